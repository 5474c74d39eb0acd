"""Retention: the pure decision table, then real logs on disk."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage.config import LogConfig
from core.storage.log import PartitionLog
from core.storage.records import NewRecord, Record, build_batch, decode_records
from core.storage.retention import largest_timestamp, segments_to_delete

NOW = 1_700_000_000_000
HOUR = 3_600_000


@dataclass
class Seg:
    base_offset: int
    size: int = 100
    max_timestamp: int = NOW
    log_path: Path = Path("/nonexistent")


def cfg(**kw: object) -> LogConfig:
    return LogConfig(**kw)  # type: ignore[arg-type]


def decide(
    segs: list[Seg],
    config: LogConfig,
    *,
    hw: int,
    leo: int,
    log_start: int = 0,
    now: int = NOW,
) -> list[int]:
    out = segments_to_delete(
        segs,
        config=config,
        high_watermark=hw,
        log_start_offset=log_start,
        log_end_offset=leo,
        now_ms=now,
    )
    return [s.base_offset for s in out]


THREE = [Seg(0, max_timestamp=NOW - 10 * HOUR), Seg(10, max_timestamp=NOW - 5 * HOUR), Seg(20)]


@pytest.mark.parametrize(
    ("config", "hw", "log_start", "expected"),
    [
        # time: strictly older than retention.ms
        (cfg(retention_ms=6 * HOUR), 30, 0, [0]),
        (cfg(retention_ms=4 * HOUR), 30, 0, [0, 10]),
        (cfg(retention_ms=10 * HOUR), 30, 0, []),  # exactly retention.ms old: kept
        (cfg(retention_ms=-1), 30, 0, []),
        # never past the high watermark
        (cfg(retention_ms=4 * HOUR), 15, 0, [0]),
        (cfg(retention_ms=4 * HOUR), 9, 0, []),
        # size: total 300; delete while total - size >= retention.bytes
        (cfg(retention_ms=-1, retention_bytes=200), 30, 0, [0]),
        (cfg(retention_ms=-1, retention_bytes=100), 30, 0, [0, 10]),
        (cfg(retention_ms=-1, retention_bytes=150), 30, 0, [0]),
        (cfg(retention_ms=-1, retention_bytes=0), 30, 0, [0, 10, 20]),
        (cfg(retention_ms=-1, retention_bytes=-1), 30, 0, []),
        # log start: the next segment's base <= log start offset
        (cfg(retention_ms=-1), 30, 10, [0]),
        (cfg(retention_ms=-1), 30, 15, [0]),
        (cfg(retention_ms=-1), 30, 20, [0, 10]),
        (cfg(retention_ms=-1), 15, 20, [0]),  # ...but still not past the HW
        # compacted topics: only the log-start rule
        (cfg(retention_ms=1, retention_bytes=0, cleanup_policy=("compact",)), 30, 0, []),
        (cfg(retention_ms=1, cleanup_policy=("compact",)), 30, 10, [0]),
        (cfg(retention_ms=4 * HOUR, cleanup_policy=("compact", "delete")), 30, 0, [0, 10]),
    ],
)
def test_decision_table(config: LogConfig, hw: int, log_start: int, expected: list[int]) -> None:
    assert decide(THREE, config, hw=hw, leo=30, log_start=log_start) == expected


def test_stops_at_first_segment_that_is_not_deletable() -> None:
    segs = [
        Seg(0, max_timestamp=NOW - 10 * HOUR),
        Seg(10, max_timestamp=NOW + HOUR),  # future-dated: delays deletion
        Seg(20, max_timestamp=NOW - 10 * HOUR),
        Seg(30),
    ]
    assert decide(segs, cfg(retention_ms=HOUR), hw=40, leo=40) == [0]


def test_active_segment_deletable_when_expired_and_replicated() -> None:
    segs = [Seg(0, max_timestamp=NOW - 10 * HOUR), Seg(10, max_timestamp=NOW - 9 * HOUR)]
    assert decide(segs, cfg(retention_ms=HOUR), hw=20, leo=20) == [0, 10]
    assert decide(segs, cfg(retention_ms=HOUR), hw=19, leo=20) == [0]


def test_empty_last_segment_is_never_deleted() -> None:
    segs = [Seg(0, max_timestamp=NOW - 10 * HOUR), Seg(10, size=0, max_timestamp=-1)]
    assert decide(segs, cfg(retention_ms=HOUR, retention_bytes=0), hw=10, leo=10) == [0]


def test_mtime_fallback_for_segment_without_timestamps(tmp_path: Path) -> None:
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    old.write_bytes(b"x")
    new.write_bytes(b"x")
    os.utime(old, ns=((NOW - 10 * HOUR) * 10**6,) * 2)
    os.utime(new, ns=(NOW * 10**6,) * 2)
    segs = [
        Seg(0, max_timestamp=-1, log_path=old),
        Seg(10, max_timestamp=-1, log_path=new),
        Seg(20),
    ]
    assert largest_timestamp(segs[0]) == NOW - 10 * HOUR
    assert decide(segs, cfg(retention_ms=HOUR), hw=30, leo=30) == [0]


# --- on disk ------------------------------------------------------------------------


def read_all(plog: PartitionLog) -> list[Record]:
    """Every record from the log start to the LEO, segment by segment."""
    out: list[Record] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 1 << 20)
        out += decode_records(fetched.data, min_offset=offset)
        offset = fetched.high_offset
    return out


def _append(plog: PartitionLog, n: int, *, ts: int, size: int = 100) -> None:
    for i in range(n):
        rec = NewRecord(value=bytes([i % 256]) * size, key=b"k%d" % i, timestamp=ts)
        plog.append_as_leader(build_batch([rec], now_ms=ts), leader_epoch=0)


def _open(tmp_path: Path, clock: ManualClock, **kw: object) -> PartitionLog:
    d = tmp_path / "t-0"
    d.mkdir(exist_ok=True)
    return PartitionLog.open(d, LogConfig(**kw), clock=clock)  # type: ignore[arg-type]


def _delete(plog: PartitionLog, now: int, hw: int | None = None) -> int:
    doomed = segments_to_delete(
        plog.segments,
        config=plog.config,
        high_watermark=plog.log_end_offset if hw is None else hw,
        log_start_offset=plog.log_start_offset,
        log_end_offset=plog.log_end_offset,
        now_ms=now,
    )
    if doomed:
        plog.delete_segments(doomed, reason="test")
    return len(doomed)


def test_time_retention_uses_record_timestamps(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    plog = _open(tmp_path, clock, segment_bytes=1000, retention_ms=HOUR)
    _append(plog, 10, ts=NOW - 3 * HOUR)  # old records, written now
    _append(plog, 10, ts=NOW)
    assert len(plog.segments) > 2
    assert _delete(plog, NOW) >= 1
    first = plog.segments[0].base_offset
    assert plog.log_start_offset == first
    assert first <= 10
    records = read_all(plog)
    assert [r.offset for r in records][-10:] == list(range(10, 20))
    assert all(r.timestamp == NOW for r in records if r.offset >= 10)
    plog.close()


def test_size_retention_keeps_at_most_retention_bytes(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    plog = _open(tmp_path, clock, segment_bytes=1000, retention_ms=-1, retention_bytes=1500)
    _append(plog, 40, ts=NOW)
    before = plog.size_in_bytes
    assert before > 1500
    _delete(plog, NOW)
    assert plog.size_in_bytes <= before
    # oldest-first: what is left is >= retention.bytes minus one segment, never less
    assert plog.size_in_bytes >= 1500 - 1000
    assert sum(s.size for s in plog.segments) - plog.segments[0].size < 1500
    assert plog.log_start_offset == plog.segments[0].base_offset
    plog.close()


def test_never_beyond_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    plog = _open(tmp_path, clock, segment_bytes=1000, retention_ms=HOUR)
    _append(plog, 30, ts=NOW - 5 * HOUR)
    hw = 5
    _delete(plog, NOW, hw=hw)
    assert plog.log_start_offset <= hw
    for seg in plog.segments[1:]:
        assert seg.base_offset > hw
    assert plog.read(hw, 1 << 20).data
    plog.close()


def test_log_start_rule_on_compacted_topic(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    plog = _open(tmp_path, clock, segment_bytes=1000, cleanup_policy=("compact",))
    _append(plog, 30, ts=NOW)
    plog.maybe_increment_log_start_offset(15)
    _delete(plog, NOW)
    assert plog.segments[0].base_offset <= 15
    assert len(plog.segments) == 1 or plog.segments[1].base_offset > 15
    assert plog.log_start_offset == 15
    plog.close()


def test_active_segment_deleted_and_fresh_one_rolled(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    plog = _open(tmp_path, clock, segment_bytes=1000, retention_ms=HOUR)
    _append(plog, 20, ts=NOW - 5 * HOUR)
    leo = plog.log_end_offset
    n = len(plog.segments)
    assert _delete(plog, NOW) == n
    assert len(plog.segments) == 1
    assert plog.active_segment.base_offset == leo
    assert plog.active_segment.size == 0
    assert plog.log_start_offset == leo == plog.log_end_offset
    _append(plog, 1, ts=NOW)
    assert decode_records(plog.read(leo, 1 << 20).data)[0].offset == leo
    plog.close()
    reopened = PartitionLog.open(
        tmp_path / "t-0", plog.config, clock=clock, log_start_offset=leo, clean_shutdown=True
    )
    assert reopened.log_start_offset == leo
    assert reopened.log_end_offset == leo + 1
    reopened.close()
