"""Byte compatibility with an independent implementation of Kafka's record format.

kafka-python's pure-Python ``DefaultRecordBatch`` reads the segment files franz
writes, and batches built by kafka-python's builder append and read back through
franz byte for byte (apart from the base offset and leader epoch the leader assigns).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from core.clock import ManualClock
from core.storage import codec
from core.storage.batch import iter_batches
from core.storage.config import LogConfig
from core.storage.log import PartitionLog
from core.storage.records import NewRecord, build_batch, decode_records

CODECS = [codec.NONE, codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD]


def _records(n: int) -> list[NewRecord]:
    return [NewRecord(value=None if i == 7 else f"value-{i}".encode() * (i % 5 + 1),
                      key=None if i % 4 == 0 else f"key-{i}".encode(),
                      headers=[("trace", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else [],
                      timestamp=1_700_000_000_000 + i)
            for i in range(n)]


def _open(tmp_path: Path) -> PartitionLog:
    return PartitionLog.open(tmp_path / "compat-0", LogConfig(), clock=ManualClock())


@pytest.mark.parametrize("cid", CODECS)
def test_segments_written_by_franz_decode_with_kafka_python(tmp_path: Path, cid: int) -> None:
    plog = _open(tmp_path)
    expected: list[tuple[int, bytes | None, bytes | None, list, int]] = []
    for round_ in range(3):
        recs = _records(20)
        plog.append_as_leader(build_batch(recs, now_ms=0, compression=cid), leader_epoch=round_)
        base = round_ * 20
        expected += [(base + i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(recs)]
    plog.close()

    seen = []
    segment_bytes = b"".join(p.read_bytes() for p in sorted((tmp_path / "compat-0").glob("*.log")))
    for pos, h in iter_batches(segment_bytes):
        batch = DefaultRecordBatch(segment_bytes[pos : pos + h.size])
        assert batch.validate_crc()
        assert batch.compression_type == cid
        for rec in batch:
            seen.append((rec.offset, rec.key, rec.value, [tuple(x) for x in rec.headers], rec.timestamp))
    assert seen == [(o, k, v, [tuple(x) for x in hs], ts) for o, k, v, hs, ts in expected]


@pytest.mark.parametrize("cid", CODECS)
def test_batches_built_by_kafka_python_append_and_read_back_byte_for_byte(tmp_path: Path, cid: int) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=cid, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    recs = _records(30)
    for i, r in enumerate(recs):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers)
    foreign = bytes(builder.build())

    plog = _open(tmp_path)
    plog.append_as_leader(build_batch([NewRecord(b"first")], now_ms=0), leader_epoch=0)
    info = plog.append_as_leader(bytearray(foreign), leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (1, 30)
    stored = plog.read(1, 1 << 20).data
    assert len(stored) == len(foreign)
    # Only baseOffset (bytes 0-7) and partitionLeaderEpoch (12-15) are assigned by the leader.
    assert stored[8:12] == foreign[8:12] and stored[16:] == foreign[16:]
    assert int.from_bytes(stored[0:8], "big") == 1 and int.from_bytes(stored[12:16], "big") == 3
    got = decode_records(stored)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (1 + i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(recs)]
