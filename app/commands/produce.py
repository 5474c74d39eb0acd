"""``franz produce``: kafka-console-producer.sh over HTTP.

Each line of stdin (without its ``\\n`` or ``\\r\\n``) is one record, its bytes as they
are; with ``--parse-key`` the bytes before the first separator are the key. Kafka's
line reader settings say the same: ``--property parse.key=true``, ``--property
key.separator=SEP`` (a property wins over the flag).

Lines go out in batches: whatever stdin has ready (up to ``--batch-size`` lines, about
1 MiB) is one request, so piped input travels in large batches and a line typed at a
terminal goes out as soon as it is entered.

The requests are v2 binary produce calls (``POST /topics/{t}``), not v3's
``POST .../records``: both answer per record, but the v2 path is franz's fast one (about
five times the records per second of the v3 one) and carries raw bytes without a
text-or-binary choice per line. A failed record is reported on stderr with its line
number and the run goes on; a request refused as a whole (unknown topic, body too
large) stops it. Exit code 1 when any record failed.

Delivery is idempotent by default (Kafka's ``enable.idempotence``): every request
carries a fresh ``Idempotency-Key`` (a uuid4), and a request whose outcome is unknown or
failed for a reason that may pass (no answer: the connection dropped or timed out; a
5xx; a 409, the server still working on the same key; records failed with the retriable
error 50003) is sent again with the same key and the same bytes, at most ``RETRIES``
times within ``DELIVERY_TIMEOUT_S``, backing off from ``RETRY_BACKOFF_S`` to
``RETRY_BACKOFF_MAX_S`` (Kafka's ``retries``, ``delivery.timeout.ms``,
``retry.backoff.ms``, ``retry.backoff.max.ms``). The server answers such a retry with
the first request's result, or finishes what the first one started, so a lost answer
never writes a line twice. Each retry is noted on stderr. A refused connection before
the server ever answered is not retried (nothing is there: exit 2 at once). The
server puts the unkeyed lines of a request with a key on the partition that key hashes
to, so successive requests spread over the partitions at random, not in turn.

``--no-idempotence`` sends every request once, without a key, as a retry could then
write its records twice; so does ``--acks 0``, whose answer comes before the records
are written and so cannot be replayed (the server refuses a key with acks=0).
"""

from __future__ import annotations

import argparse
import base64
import os
import select
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import orjson

from app.commands.output import BOOLEAN, TEXT, Progress, console_properties, print_json
from app.http_client import CliError, FranzClient, RequestFailed, ServerUnreachable

BINARY_V2 = "application/vnd.kafka.binary.v2+json"
READ_SIZE = 1 << 20
MAX_BATCH_BYTES = 1 << 20
IDEMPOTENCY_KEY = "Idempotency-Key"
#: Retries of one request (after its first attempt), and the time they all must fit in.
RETRIES = 5
DELIVERY_TIMEOUT_S = 120.0
#: The pause before the first retry, doubled before each next one up to the maximum.
RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 1.0
#: Confluent's "retriable Kafka error" of one record: a retry of the request may write it.
RETRIABLE_RECORD_ERROR = 50003
#: kafka-console-producer.sh's --property settings (LineMessageReader) franz reads, and
#: Kafka's others, which it does not implement.
PROPERTIES = {"parse.key": BOOLEAN, "key.separator": TEXT}
UNSUPPORTED = ("parse.headers", "headers.delimiter", "headers.separator",
               "headers.key.separator", "ignore.error", "null.marker")


def run(args: argparse.Namespace, client: FranzClient) -> int:
    try:
        props = console_properties(args.property, PROPERTIES, unsupported=UNSUPPORTED)
    except ValueError as exc:
        args.subparser.error(str(exc))
    parse_key = bool(props.get("parse.key", args.parse_key))
    separator = str(props.get("key.separator", args.key_separator)).replace("\\t", "\t").encode()
    if parse_key and not separator:
        args.subparser.error("--key-separator (key.separator) must not be empty")
    path = f"/topics/{quote(args.topic, safe='')}" + ("" if args.acks == "1"
                                                       else f"?acks={args.acks}")
    progress = Progress("records", enabled=sys.stderr.isatty() and not sys.stdin.isatty())
    sender = Sender(client, path, idempotent=not args.no_idempotence and args.acks != "0",
                    note=lambda message: _note(progress, message))
    sent = failed = 0
    try:
        for first_line, lines in batches(sys.stdin.fileno(), args.batch_size):
            records, bad = _records(lines, first_line, separator if parse_key else None)
            for line_no, message in bad:
                _report(progress, line_no, message)
            failed += len(bad)
            ok, errors = sender.send(records)
            for line_no, message in errors:
                _report(progress, line_no, message)
            sent += ok
            failed += len(errors)
            progress.update(sent + failed)
    finally:
        progress.done()
    if args.output == "json":
        print_json({"topic": args.topic, "produced": sent, "failed": failed})
    return 1 if failed else 0


def _report(progress: Progress, line_no: int, message: str) -> None:
    _note(progress, f"line {line_no}: {message}")


def _note(progress: Progress, message: str) -> None:
    progress.done()
    print(f"franz produce: {message}", file=sys.stderr)


def _readable(fd: int) -> bool:
    """More input is ready right now (False where select cannot tell, e.g. Windows)."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def batches(fd: int, max_lines: int) -> Iterator[tuple[int, list[bytes]]]:
    """(number of the first line, lines) from ``fd``: the complete lines available,
    at most ``max_lines`` and about ``MAX_BATCH_BYTES`` per batch; a last line without
    a newline counts at end of input."""
    pending = b""
    line_no = 1
    eof = False
    while not eof:
        chunk = os.read(fd, READ_SIZE)
        eof = not chunk
        pending += chunk
        while not eof and len(pending) < MAX_BATCH_BYTES and _readable(fd):
            more = os.read(fd, READ_SIZE)
            eof = not more
            pending += more
        lines = pending.split(b"\n")
        pending = lines.pop()  # the unfinished line (b"" after a newline)
        if eof and pending:
            lines.append(pending)
            pending = b""
        for start in range(0, len(lines), max_lines):
            part = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines[start:start + max_lines]]
            yield line_no + start, part
        line_no += len(lines)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _records(lines: list[bytes], first_line: int, separator: bytes | None
             ) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """(line number, v2 binary record) per line, and (line number, error) for lines
    without the key separator."""
    if separator is None:  # the common case, kept tight: ~1 µs per line
        b64 = base64.b64encode
        return [(first_line + i, {"value": b64(line).decode()}) for i, line in enumerate(lines)], []
    records: list[tuple[int, dict[str, Any]]] = []
    bad: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        key, sep, value = line.partition(separator)
        if not sep:
            bad.append((first_line + i, "no key separator found"))
            continue
        records.append((first_line + i, {"key": _b64(key), "value": _b64(value)}))
    return records, bad


class Sender:
    """Sends the batches to ``path``: idempotently (a fresh Idempotency-Key per request,
    failed attempts retried with it) or each request once (``idempotent`` false)."""

    def __init__(self, client: FranzClient, path: str, *, idempotent: bool,
                 note: Callable[[str], None]) -> None:
        self.client = client
        self.path = path
        self.idempotent = idempotent
        self.note = note
        self.answered = False  # the server has answered a request of this run

    def send(self, records: list[tuple[int, dict[str, Any]]]
             ) -> tuple[int, list[tuple[int, str]]]:
        """Send one batch; (records written, (line number, error) per failed record)."""
        if not records:
            return 0, []
        body = orjson.dumps({"records": [r for _, r in records]})
        lines = f"lines {records[0][0]}-{records[-1][0]}"
        headers = {"Content-Type": BINARY_V2}
        if not self.idempotent:
            try:
                resp = self.client.request("POST", self.path, content=body, headers=headers)
            except RequestFailed as exc:
                exc.message = f"{exc.message} ({lines} were not written)"
                raise
            ok, errors, _again = _outcome(records, resp.content)
            return ok, errors
        headers[IDEMPOTENCY_KEY] = str(uuid.uuid4())
        start = time.monotonic()
        attempt = 1
        while True:
            try:
                resp = self.client.request("POST", self.path, content=body, headers=headers)
            except CliError as exc:
                if isinstance(exc, RequestFailed):
                    self.answered = True
                retriable = self._retriable(exc)
                if not retriable or not self._may_retry(attempt, start):
                    if attempt == 1 and not retriable:  # refused as a whole, nothing sent
                        exc.message += f" ({lines} were not written)"
                    else:
                        took = time.monotonic() - start
                        exc.message += (f" ({lines} may not have been written: {attempt} "
                                        f"attempts in {took:.1f} s)")
                    raise
                reason = exc.message.rstrip(".")
            else:
                self.answered = True
                ok, errors, again = _outcome(records, resp.content)
                if not again or not self._may_retry(attempt, start):
                    return ok, errors
                reason = f"{again} records failed with a retriable error"
            self.note(f"{lines}: {reason}; retrying with the same Idempotency-Key "
                      f"(retry {attempt} of {RETRIES})")
            time.sleep(_backoff(attempt))
            attempt += 1

    def _retriable(self, exc: CliError) -> bool:
        """A failure a retry with the same key may get past without writing twice."""
        if isinstance(exc, ServerUnreachable):
            # a refused connection before any answer: no server there, say so at once
            return self.answered or not _refused(exc)
        return isinstance(exc, RequestFailed) and (exc.status >= 500 or exc.status == 409)

    @staticmethod
    def _may_retry(attempt: int, start: float) -> bool:
        """Retry number ``attempt`` is allowed: within the count and, after its back-off,
        within the delivery time."""
        return (attempt <= RETRIES
                and time.monotonic() + _backoff(attempt) - start < DELIVERY_TIMEOUT_S)


def _backoff(attempt: int) -> float:
    """The pause before retry number ``attempt`` (1 = the first retry)."""
    return float(min(RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S * 2 ** (attempt - 1)))


def _refused(exc: BaseException) -> bool:
    """The connection was refused (ConnectionRefusedError among the causes): the request
    never reached a server."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ConnectionRefusedError):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def _outcome(records: list[tuple[int, dict[str, Any]]], content: bytes
             ) -> tuple[int, list[tuple[int, str]], int]:
    """(records written, (line number, error) per failed record, how many of those
    failed with the retriable error) of a produce answer."""
    results = orjson.loads(content)["offsets"]
    errors: list[tuple[int, str]] = []
    retriable = 0
    for (line_no, _), r in zip(records, results, strict=True):
        code = r["error_code"]
        if code is not None:
            errors.append((line_no, f"error {code}: {r['error']}"))
            retriable += code == RETRIABLE_RECORD_ERROR
    return len(records) - len(errors), errors, retriable
