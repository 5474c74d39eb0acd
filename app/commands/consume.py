"""``franz consume``: kafka-console-consumer.sh over HTTP.

Without ``--group``: every partition of the topic is read with franz's range read
(``GET /topics/{t}/partitions/{p}/records``, a long poll; the v2 form, whose binary
rendering is several times faster than v3's), one thread per partition, from the log
start (``--from-beginning``) or from the end (the v3 ``.../offset`` call); nothing is
committed. With ``--group``: a v2 consumer instance joins the group, subscribes, reads
(``GET .../records``), commits what it printed after each batch, and leaves the group at
exit (also on Ctrl-C and SIGTERM).

Output: the value per line (``null`` for none), ``KEY<TAB>VALUE`` with ``--print-key``;
``--output json`` writes one JSON object per record (``topic``, ``partition``,
``offset``, ``timestamp`` in epoch ms, ``key``, ``value`` as text, bytes that are not
UTF-8 backslash-escaped). "Processed a total of N messages" goes to stderr at the end.
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

from app.http_client import V2_MEDIA, CliError, FranzClient, RequestFailed

POLL_MS = 1000
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
_NOT_FOUND = 404
_OUT_OF_RANGE = 416


class Printer:
    """Writes records to stdout in the chosen form and counts them."""

    def __init__(self, *, print_key: bool, as_json: bool) -> None:
        self.print_key = print_key
        self.as_json = as_json
        self.count = 0
        self.out = sys.stdout.buffer

    def write(self, topic: str, partition: int, offset: int, timestamp: int | None,
              key: bytes | None, value: bytes | None) -> None:
        if self.as_json:
            line = orjson.dumps({"topic": topic, "partition": partition, "offset": offset,
                                 "timestamp": timestamp, "key": _text(key), "value": _text(value)})
        else:
            line = b"null" if value is None else value
            if self.print_key:
                line = (b"null" if key is None else key) + b"\t" + line
        self.out.write(line + b"\n")
        self.count += 1

    def flush(self) -> None:
        self.out.flush()


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="backslashreplace")


def _b64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)


def run(args: argparse.Namespace, client: FranzClient) -> int:
    try:
        client.get_json(client.v3("topics", args.topic))
    except RequestFailed as exc:
        if exc.status != _NOT_FOUND:
            raise
        raise RequestFailed(exc.status, exc.code, f"Topic '{args.topic}' does not exist.") from exc
    printer = Printer(print_key=args.print_key, as_json=args.output == "json")
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
                printer.write(topic, r["partition"], r["offset"], r.get("timestamp"),
                              _b64(r["key"]), _b64(r["value"]))
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
            printer.write(r["topic"], r["partition"], r["offset"], r.get("timestamp"),
                          _b64(r["key"]), _b64(r["value"]))
            last[(r["topic"], r["partition"])] = r["offset"]
        if not last:
            continue
        printer.flush()
        deadline.touch()
        offsets = [{"topic": t, "partition": p, "offset": o} for (t, p), o in last.items()]
        client.request("POST", base + "/offsets", json={"offsets": offsets},
                       headers={"Content-Type": V2_MEDIA})
