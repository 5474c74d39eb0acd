"""``franz consume``: kafka-console-consumer.sh over HTTP.

Without ``--group``: every partition of the topic is read with franz's range read
(``GET /topics/{t}/partitions/{p}/records``, a long poll; the v2 form, whose binary
rendering is several times faster than v3's), one thread per partition, from the log
start (``--from-beginning``) or from the end (the v3 ``.../offset`` call); nothing is
committed. With ``--group``: a v2 consumer instance joins the group, subscribes, reads
(``GET .../records``), commits what it printed after each batch, and leaves the group at
exit (also on Ctrl-C and SIGTERM).

Output: the value per line (``null`` for none), ``KEY<TAB>VALUE`` with ``--print-key``;
Kafka's formatter settings (``--property print.timestamp=true``, ``print.partition``,
``print.offset``, ``print.headers``, ``print.key``, ``print.value``, ``key.separator``,
``line.separator``, ``headers.separator``, ``null.literal``) shape each line as
kafka-console-consumer.sh's DefaultMessageFormatter does:
``CreateTime:<ms>`` SEP ``Partition:<p>`` SEP ``Offset:<o>`` SEP ``<k>:<v>,...``
(``NO_HEADERS``) SEP key SEP value, each part only when asked for. ``--output json``
writes one JSON object per record (``topic``, ``partition``, ``offset``, ``timestamp`` in
epoch ms, ``key``, ``value`` as text, bytes that are not UTF-8 backslash-escaped).
"Processed a total of N messages" goes to stderr at the end.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import queue
import signal
import sys
import threading
import time
import uuid
from typing import Any
from urllib.parse import quote

import orjson

from app.commands.output import BOOLEAN, TEXT, console_properties, unescape_separator
from app.http_client import V2_MEDIA, CliError, FranzClient, RequestFailed

POLL_MS = 1000
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
_NOT_FOUND = 404
_OUT_OF_RANGE = 416


#: The deserializers that print what franz prints, the bytes as they are.
RAW_DESERIALIZERS = ("StringDeserializer", "ByteArrayDeserializer")


def _deserializer(name: str, value: str) -> str:
    """``key.deserializer`` and the like: only those printing the bytes as they are."""
    if value.strip().rsplit(".", 1)[-1] not in RAW_DESERIALIZERS:
        raise ValueError(f"{name}: franz prints the bytes as they are; only "
                         "org.apache.kafka.common.serialization.StringDeserializer or "
                         f"ByteArrayDeserializer can be given, got {value!r}")
    return value


#: kafka-console-consumer.sh's --property settings (DefaultMessageFormatter) franz reads.
PROPERTIES = {
    "print.timestamp": BOOLEAN, "print.partition": BOOLEAN, "print.offset": BOOLEAN,
    "print.headers": BOOLEAN, "print.key": BOOLEAN, "print.value": BOOLEAN,
    "key.separator": TEXT, "line.separator": TEXT, "headers.separator": TEXT,
    "null.literal": TEXT, "key.deserializer": _deserializer,
    "value.deserializer": _deserializer, "headers.deserializer": _deserializer,
}


class Printer:
    """Writes records to stdout in the chosen form and counts them. ``props`` are the
    formatter settings (``PROPERTIES``): which parts of a record, and the separators."""

    def __init__(self, *, print_key: bool, as_json: bool,
                 props: dict[str, object] | None = None) -> None:
        props = props or {}
        self.as_json = as_json
        self.print_key = bool(props.get("print.key", print_key))
        self.print_value = bool(props.get("print.value", True))
        self.print_timestamp = bool(props.get("print.timestamp", False))
        self.print_partition = bool(props.get("print.partition", False))
        self.print_offset = bool(props.get("print.offset", False))
        self.print_headers = bool(props.get("print.headers", False))

        def raw(name: str, default: str) -> bytes:
            return unescape_separator(str(props.get(name, default))).encode()

        self.key_separator = raw("key.separator", "\t")
        self.line_separator = raw("line.separator", "\n")
        self.headers_separator = raw("headers.separator", ",")
        self.null = str(props.get("null.literal", "null")).encode()
        self.plain = not (self.print_timestamp or self.print_partition or self.print_offset
                          or self.print_headers or not self.print_value)
        self.count = 0
        self.out = sys.stdout.buffer

    def write(self, topic: str, r: dict[str, Any]) -> None:
        """One record as the v2 binary APIs answer it (key and value base64)."""
        key, value = _b64(r["key"]), _b64(r["value"])
        if self.as_json:
            line = orjson.dumps({"topic": topic, "partition": r["partition"],
                                 "offset": r["offset"], "timestamp": r.get("timestamp"),
                                 "key": _text(key), "value": _text(value)}) + b"\n"
        elif self.plain:  # the common case, kept short
            line = self.null if value is None else value
            if self.print_key:
                line = (self.null if key is None else key) + self.key_separator + line
            line += self.line_separator
        else:
            line = self._formatted(r, key, value)
        self.out.write(line)
        self.count += 1

    def _formatted(self, r: dict[str, Any], key: bytes | None, value: bytes | None) -> bytes:
        """Kafka's DefaultMessageFormatter: the parts asked for, key.separator between
        them, line.separator after the last."""
        parts: list[bytes] = []
        if self.print_timestamp:
            ts, kind = r.get("timestamp"), r.get("timestamp_type") or "CreateTime"
            parts.append(b"NO_TIMESTAMP" if ts is None or ts < 0 else f"{kind}:{ts}".encode())
        if self.print_partition:
            parts.append(b"Partition:%d" % r["partition"])
        if self.print_offset:
            parts.append(b"Offset:%d" % r["offset"])
        if self.print_headers:
            headers = r.get("headers") or []
            parts.append(self.headers_separator.join(
                h["key"].encode() + b":" + (self.null if h.get("value") is None
                                            else base64.b64decode(h["value"]))
                for h in headers) if headers else b"NO_HEADERS")
        if self.print_key:
            parts.append(self.null if key is None else key)
        if self.print_value:
            parts.append(self.null if value is None else value)
        return self.key_separator.join(parts) + self.line_separator

    def flush(self) -> None:
        self.out.flush()


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="backslashreplace")


def _b64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)


def run(args: argparse.Namespace, client: FranzClient) -> int:
    try:
        props = console_properties(args.property, PROPERTIES)
    except ValueError as exc:
        args.subparser.error(str(exc))
    try:
        client.get_json(client.v3("topics", args.topic))
    except RequestFailed as exc:
        if exc.status != _NOT_FOUND:
            raise
        raise RequestFailed(exc.status, exc.code, f"Topic '{args.topic}' does not exist.") from exc
    printer = Printer(print_key=args.print_key, as_json=args.output == "json", props=props)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it as Ctrl-C does: cleanly
    try:
        if args.group:
            _consume_group(args, client, printer)
        else:
            _consume_partitions(args, client, printer)
    except KeyboardInterrupt:
        pass  # the usual way to stop: report and exit 0
    finally:
        printer.flush()
        print(f"Processed a total of {printer.count} messages", file=sys.stderr)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class _Deadline:
    """--timeout-ms: how long until the run ends for lack of records (None: never)."""

    def __init__(self, timeout_ms: int | None) -> None:
        self.timeout = None if timeout_ms is None else timeout_ms / 1000
        self.touch()

    def touch(self) -> None:
        self.last = time.monotonic()

    def remaining(self) -> float | None:
        if self.timeout is None:
            return None
        return self.timeout - (time.monotonic() - self.last)


# --- without a group: range reads, one thread per partition ---------------------------------


def _consume_partitions(args: argparse.Namespace, client: FranzClient, printer: Printer) -> None:
    topic = args.topic
    partitions = [p["partition_id"] for p in client.v3_list("topics", topic, "partitions")]
    edge = "earliest_offset" if args.from_beginning else "latest_offset"
    inbox: queue.Queue[Any] = queue.Queue(maxsize=64)
    stop = threading.Event()
    for p in partitions:
        start = client.get_json(client.v3("topics", topic, "partitions", p, "offset"))[edge]
        threading.Thread(target=_read_partition, args=(client, topic, p, start, inbox, stop),
                         name=f"franz-consume-{p}", daemon=True).start()
    deadline = _Deadline(args.timeout_ms)
    try:
        while args.max_messages is None or printer.count < args.max_messages:
            left = deadline.remaining()
            if left is not None and left <= 0:
                return
            try:
                page = inbox.get(timeout=left)
            except queue.Empty:
                return
            if isinstance(page, CliError):
                raise page
            for r in page:
                if args.max_messages is not None and printer.count >= args.max_messages:
                    break
                printer.write(topic, r)
            printer.flush()
            deadline.touch()
    finally:
        stop.set()


def _read_partition(client: FranzClient, topic: str, partition: int, offset: int,
                    inbox: queue.Queue[Any], stop: threading.Event) -> None:
    """Long-poll franz's v2 range read (its binary rendering is the fast one) and hand
    each non-empty page to the printing thread."""
    path = f"/topics/{quote(topic, safe='')}/partitions/{partition}/records"
    while not stop.is_set():
        try:
            resp = client.request("GET", path, params={"offset": offset, "timeout": POLL_MS},
                                  headers={"Accept": BINARY_V2})
        except RequestFailed as exc:
            if exc.status == _OUT_OF_RANGE:  # retention moved the log start past us
                offset = client.get_json(client.v3("topics", topic, "partitions", partition,
                                                   "offset"))["earliest_offset"]
                continue
            inbox.put(exc)
            return
        except CliError as exc:
            inbox.put(exc)
            return
        except Exception as exc:  # the client closed under us as the run ends
            if not stop.is_set():
                inbox.put(CliError(f"reading {topic}-{partition} failed: {exc!r}"))
            return
        offset = int(resp.headers["X-Franz-Next-Offset"])
        page = orjson.loads(resp.content)
        if page and not stop.is_set():
            inbox.put(page)


# --- with a group: a v2 consumer instance ----------------------------------------------------


def _consume_group(args: argparse.Namespace, client: FranzClient, printer: Printer) -> None:
    name = f"franz-console-consumer-{uuid.uuid4().hex[:12]}"
    config = {"name": name, "format": "binary",
              "auto.offset.reset": "earliest" if args.from_beginning else "latest",
              "auto.commit.enable": "false"}
    v2 = {"Content-Type": V2_MEDIA}
    client.request("POST", f"/consumers/{quote(args.group, safe='')}", json=config, headers=v2)
    base = f"/consumers/{quote(args.group, safe='')}/instances/{quote(name, safe='')}"
    try:
        client.request("POST", base + "/subscription", json={"topics": [args.topic]}, headers=v2)
        _read_group(args, client, printer, base)
    finally:
        with contextlib.suppress(CliError):
            client.request("DELETE", base, headers=v2)


def _read_group(args: argparse.Namespace, client: FranzClient, printer: Printer,
                base: str) -> None:
    deadline = _Deadline(args.timeout_ms)
    while args.max_messages is None or printer.count < args.max_messages:
        left = deadline.remaining()
        if left is not None and left <= 0:
            return
        wait = POLL_MS if left is None else max(1, min(POLL_MS, int(left * 1000)))
        resp = client.request("GET", base + "/records", params={"timeout": wait},
                              headers={"Accept": BINARY_V2})
        last: dict[tuple[str, int], int] = {}
        for r in orjson.loads(resp.content):
            if args.max_messages is not None and printer.count >= args.max_messages:
                break
            printer.write(r["topic"], r)
            last[(r["topic"], r["partition"])] = r["offset"]
        if not last:
            continue
        printer.flush()
        deadline.touch()
        offsets = [{"topic": t, "partition": p, "offset": o} for (t, p), o in last.items()]
        client.request("POST", base + "/offsets", json={"offsets": offsets},
                       headers={"Content-Type": V2_MEDIA})
