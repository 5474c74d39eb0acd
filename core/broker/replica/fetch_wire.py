"""Binary framing of the internal (broker-to-broker) replica fetch, shared by the
client adapter (``core.broker.cluster.client``) and ``api/internal``.

Request (``POST /internal/v1/replica/fetch``, a JSON body)::

    {"replica_id": 2, "max_wait_ms": 500, "max_bytes": 10485760,
     "partitions": [{"topic": "t", "partition": 0, "fetch_offset": 42,
                     "leader_epoch": 3, "last_fetched_epoch": 2, "max_bytes": 1048576,
                     "log_start_offset": 0}]}

``log_start_offset`` is the follower's (Kafka's FetchRequest LogStartOffset): the
leader's DeleteRecords waits for it. A request without it (an older broker) reads -1.

Response (binary)::

    int32 (big endian)   N = length of the JSON header
    N bytes              {"partitions": [{"topic", "partition", "kafka_error",
                          "high_watermark", "log_start_offset", "log_end_offset",
                          "diverging_epoch": null | {"epoch": E, "end_offset": O},
                          "size": S}, ...]}
    sum(S) bytes         the raw record batches of each partition, in header order,
                         exactly as they sit in the leader's log (never re-encoded)

Pure functions; no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import orjson

_LEN = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ReplicaFetchPartition:
    """One partition of a follower's fetch request."""

    topic: str
    partition: int
    fetch_offset: int
    leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int = 1048576
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class ReplicaFetchRequest:
    replica_id: int
    max_wait_ms: int
    max_bytes: int
    partitions: tuple[ReplicaFetchPartition, ...]


@dataclass(frozen=True, slots=True)
class ReplicaFetchResult:
    """The leader's answer for one partition. ``records`` are whole batches."""

    topic: str
    partition: int
    error_code: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset)
    records: bytes = b""


def encode_request(req: ReplicaFetchRequest) -> bytes:
    return orjson.dumps({
        "replica_id": req.replica_id, "max_wait_ms": req.max_wait_ms, "max_bytes": req.max_bytes,
        "partitions": [{"topic": p.topic, "partition": p.partition, "fetch_offset": p.fetch_offset,
                        "leader_epoch": p.leader_epoch, "last_fetched_epoch": p.last_fetched_epoch,
                        "max_bytes": p.max_bytes, "log_start_offset": p.log_start_offset}
                       for p in req.partitions],
    })


def decode_request(body: bytes) -> ReplicaFetchRequest:
    """ValueError (with the bad field named) on malformed input."""
    try:
        doc = orjson.loads(body)
        parts = tuple(
            ReplicaFetchPartition(str(p["topic"]), int(p["partition"]), int(p["fetch_offset"]),
                                  int(p["leader_epoch"]), int(p.get("last_fetched_epoch", -1)),
                                  int(p.get("max_bytes", 1048576)),
                                  int(p.get("log_start_offset", -1)))
            for p in doc["partitions"])
        return ReplicaFetchRequest(int(doc["replica_id"]), int(doc.get("max_wait_ms", 0)),
                                   int(doc.get("max_bytes", 10485760)), parts)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed replica fetch request: {exc!r}") from exc


def encode_response(results: list[ReplicaFetchResult]) -> bytes:
    header = orjson.dumps({"partitions": [{
        "topic": r.topic, "partition": r.partition, "kafka_error": r.error_code,
        "high_watermark": r.high_watermark, "log_start_offset": r.log_start_offset,
        "log_end_offset": r.log_end_offset,
        "diverging_epoch": None if r.diverging_epoch is None else
        {"epoch": r.diverging_epoch[0], "end_offset": r.diverging_epoch[1]},
        "size": len(r.records)} for r in results]})
    return b"".join([_LEN.pack(len(header)), header, *(r.records for r in results)])


def decode_response(body: bytes) -> list[ReplicaFetchResult]:
    """ValueError on a truncated or malformed body."""
    if len(body) < _LEN.size:
        raise ValueError("replica fetch response shorter than its length prefix")
    (n,) = _LEN.unpack_from(body, 0)
    pos = _LEN.size + n
    if n < 0 or pos > len(body):
        raise ValueError("replica fetch response header runs past the body")
    view = memoryview(body)
    out = []
    for h in orjson.loads(view[_LEN.size:pos])["partitions"]:
        size = int(h["size"])
        if pos + size > len(body):
            raise ValueError("replica fetch response records run past the body")
        div = h.get("diverging_epoch")
        out.append(ReplicaFetchResult(
            h["topic"], int(h["partition"]), int(h["kafka_error"]), int(h["high_watermark"]),
            int(h["log_start_offset"]), int(h["log_end_offset"]),
            None if div is None else (int(div["epoch"]), int(div["end_offset"])),
            bytes(view[pos:pos + size])))
        pos += size
    return out
