"""Executor side: read one ``[start, end)`` offset range of a partition over HTTP and
turn the records into rows (pyarrow ``RecordBatch``es or tuples).

The range read (``GET /topics/{t}/partitions/{p}/records``) is stateless: the same range
always gives the same rows, so a re-planned or retried task neither loses nor repeats a
record. The loop asks for ``offset=<next>`` with ``count`` bounded by what is left of the
range, follows ``X-Franz-Next-Offset`` (which also steps over compaction gaps), drops any
record at or past ``end`` and stops there. Offsets below the partition's log start (the
server's 416) are data loss: an error naming the lost offsets, or (with
``failOnDataLoss=false``) a warning and a jump to the log start.

With ``keyFormat`` / ``valueFormat`` set to a schema format, franz decodes that side with
the schema its bytes name and the column holds the decoded value as JSON text. A
record franz cannot decode fails the task (franz's 408 names its partition and offset).
"""

from __future__ import annotations

import binascii
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from spark_connector.client import FranzClient, dumps, loads
from spark_connector.options import BINARY_FORMAT, ReaderConf

log = logging.getLogger("spark_connector")

TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class FranzDataLossError(RuntimeError):
    """Offsets the query needed are gone (retention, deletion, truncation)."""


def data_loss(conf: ReaderConf, message: str) -> None:
    """Fail (``failOnDataLoss=true``, the default) or warn and go on."""
    if conf.fail_on_data_loss:
        raise FranzDataLossError(
            f"franz: data loss: {message}. Set the option failOnDataLoss=false to skip the "
            "missing data and continue."
        )
    log.warning("franz: data loss (failOnDataLoss=false, continuing): %s", message)


def iter_range(
    client: FranzClient, conf: ReaderConf, topic: str, partition: int, start: int, end: int
) -> Iterator[list[dict[str, Any]]]:
    """Lists of records (the range read's JSON objects) with ``start <= offset < end``,
    in offset order."""
    cur = start
    stalled_since: float | None = None
    where = f"topic {topic!r} partition {partition}"
    while cur < end:
        resp = client.read(
            topic,
            partition,
            cur,
            max_bytes=conf.max_bytes_per_request,
            count=min(conf.max_records_per_request, end - cur),
            timeout_ms=conf.long_poll_timeout_ms,
            key_format=conf.key_format,
            value_format=conf.value_format,
        )
        if resp.status_code in (404, 416):
            bounds = client.offsets(topic, partition) if resp.status_code == 416 else None
            if bounds is None:
                data_loss(
                    conf,
                    f"{where} no longer exists; offsets {cur} to {end - 1} of the "
                    "planned range cannot be read",
                )
                return
            log_start, high = bounds
            if cur < log_start:
                lost_to = min(log_start, end)
                data_loss(
                    conf,
                    f"{where}: offsets {cur} to {lost_to - 1} were deleted (by "
                    f"retention) before they were read; the earliest available "
                    f"offset is now {log_start}",
                )
                cur = lost_to
                continue
            if cur > high:
                data_loss(
                    conf,
                    f"{where}: offset {cur} is past the partition's end offset "
                    f"{high} (topic re-created or truncated?); offsets {cur} to "
                    f"{end - 1} cannot be read",
                )
                return
            stalled_since = _stall(conf, where, cur, end, stalled_since, high)
            if stalled_since is None:
                return
            continue  # raced with retention: ask again
        if resp.status_code != 200:
            raise client.error(resp)
        records = loads(resp.content)
        nxt = int(resp.headers.get("x-franz-next-offset", cur))
        if records:
            if records[-1]["offset"] >= end:
                records = [r for r in records if r["offset"] < end]
                if records:
                    yield records
                return
            yield records
            nxt = max(nxt, records[-1]["offset"] + 1)
        if nxt > cur:
            cur, stalled_since = nxt, None
            continue
        high = int(resp.headers.get("x-franz-high-watermark", end))
        if high <= cur:
            data_loss(
                conf,
                f"{where}: the partition ends at offset {high}, before the planned "
                f"range end {end} (topic re-created or truncated?); offsets {cur} "
                f"to {end - 1} cannot be read",
            )
            return
        stalled_since = _stall(conf, where, cur, end, stalled_since, high)
        if stalled_since is None:
            return


def _stall(
    conf: ReaderConf, where: str, cur: int, end: int, since: float | None, high: int
) -> float | None:
    """No progress: keep trying until ``kafkaConsumer.pollTimeoutMs``, then data loss."""
    now = time.monotonic()
    if since is None:
        return now
    if (now - since) * 1000 >= conf.poll_timeout_ms:
        data_loss(
            conf,
            f"{where}: no record at offset {cur} after "
            f"{conf.poll_timeout_ms} ms (end offset {high}); offsets {cur} to "
            f"{end - 1} cannot be read",
        )
        return None
    time.sleep(min(0.2, conf.poll_timeout_ms / 1000))
    return since


# --- rows ----------------------------------------------------------------------------

_a2b = binascii.a2b_base64


def _headers(hs: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not hs:
        return None  # Kafka's source: null, not an empty array
    return [
        {"key": h["key"], "value": None if h["value"] is None else _a2b(h["value"])} for h in hs
    ]


def _json_text(value: Any) -> str:
    return dumps(value).decode()


def cell(fmt: str) -> Callable[[Any], Any]:
    """A key or value of the range read's answer -> the column's value: the bytes of a
    base64 string, or the JSON text of a decoded value (never called for null)."""
    return _a2b if fmt == BINARY_FORMAT else _json_text


def to_arrow(
    records: list[dict[str, Any]], topic: str, partition: int, include_headers: bool, schema: Any,
    key_format: str = BINARY_FORMAT, value_format: str = BINARY_FORMAT,
) -> Any:
    """One ``pyarrow.RecordBatch`` with exactly the Arrow schema Spark expects."""
    import pyarrow as pa

    n = len(records)
    key_cell, value_cell = cell(key_format), cell(value_format)
    tt = TIMESTAMP_TYPES
    arrays = [
        pa.array([None if (k := r["key"]) is None else key_cell(k) for r in records],
                 schema.field("key").type),
        pa.array([None if (v := r["value"]) is None else value_cell(v) for r in records],
                 schema.field("value").type),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r["offset"] for r in records], pa.int64()),
        pa.array(
            [(-1 if (ts := r.get("timestamp")) is None else ts) * 1000 for r in records],
            schema.field("timestamp").type,
        ),
        pa.array([tt.get(r.get("timestamp_type"), -1) for r in records], pa.int32()),
    ]
    if include_headers:
        arrays.append(
            pa.array([_headers(r.get("headers")) for r in records], schema.field("headers").type)
        )
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def to_tuples(
    records: list[dict[str, Any]], topic: str, partition: int, include_headers: bool,
    key_format: str = BINARY_FORMAT, value_format: str = BINARY_FORMAT,
) -> Iterator[tuple[Any, ...]]:
    key_cell, value_cell = cell(key_format), cell(value_format)
    for r in records:
        key, value, ts = r["key"], r["value"], r.get("timestamp")
        row: tuple[Any, ...] = (
            None if key is None else key_cell(key),
            None if value is None else value_cell(value),
            topic,
            partition,
            r["offset"],
            datetime.fromtimestamp((ts if ts is not None else -1) / 1000, tz=UTC),
            TIMESTAMP_TYPES.get(r.get("timestamp_type"), -1),
        )
        if include_headers:
            hs = _headers(r.get("headers"))
            row += (None if hs is None else [(h["key"], h["value"]) for h in hs],)
        yield row


def read_rows(
    conf: ReaderConf, topic: str, partition: int, start: int, end: int, arrow_schema: Any
) -> Iterator[Any]:
    """Rows of one range for ``DataSourceReader.read``: Arrow batches (one per HTTP
    response) or tuples (``arrow=false``). The next response is fetched and parsed on a
    helper thread while this one is converted (the wait on the server overlaps the
    conversion)."""
    chunks = _prefetched(lambda: _fetch(conf, topic, partition, start, end))
    for records in chunks:
        if conf.arrow:
            yield to_arrow(records, topic, partition, conf.include_headers, arrow_schema,
                           conf.key_format, conf.value_format)
        else:
            yield from to_tuples(records, topic, partition, conf.include_headers,
                                 conf.key_format, conf.value_format)


def _fetch(
    conf: ReaderConf, topic: str, partition: int, start: int, end: int
) -> Iterator[list[dict[str, Any]]]:
    with FranzClient(conf.http) as client:
        yield from iter_range(client, conf, topic, partition, start, end)


_DONE = object()


def _prefetched(source: Callable[[], Iterator[Any]], depth: int = 2) -> Iterator[Any]:
    """``source()`` run on a daemon thread, at most ``depth`` items ahead; its errors are
    raised here; stops when the consumer does."""
    q: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[Any, BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in source():
                if not put((item, None)):
                    return
            put((_DONE, None))
        except BaseException as e:  # handed to the consumer
            put((None, e))

    thread = threading.Thread(target=run, name="franz-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = q.get()
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
