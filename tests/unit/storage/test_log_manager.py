"""The log manager on real log dirs: load, recovery, checkpoints, locking, maintenance."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage.blocking import run_blocking
from core.storage.config import LogConfig
from core.storage.errors import KafkaStorageError
from core.storage.flusher import flush_due
from core.storage.log import PartitionLog
from core.storage.log_manager import LogManager
from core.storage.records import NewRecord, Record, build_batch, decode_records
from core.storage.segment import LogSegment

NOW = 1_700_000_000_000
ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = {"log.segment.bytes": "1024"}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def manager(data_dir: Path, clock: ManualClock, **kw: object) -> LogManager:
    return LogManager(data_dir, server_defaults=DEFAULTS, clock=clock, broker_id=1, **kw)  # type: ignore[arg-type]


def put(
    plog: PartitionLog, n: int, *, start: int = 0, keys: int | None = None, ts: int = NOW
) -> None:
    for i in range(start, start + n):
        key = b"k%d" % (i % keys if keys else i)
        rec = NewRecord(value=b"value-%05d" % i, key=key, timestamp=ts)
        plog.append_as_leader(build_batch([rec], now_ms=ts), leader_epoch=0)


def read_all(plog: PartitionLog) -> list[Record]:
    out: list[Record] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 1 << 20)
        out += decode_records(fetched.data, min_offset=offset)
        offset = fetched.high_offset
    return out


def crash(lm: LogManager) -> None:
    """Stop ``lm`` the way a killed process would: no flush, checkpoint or marker."""
    for plog in lm.all_logs().values():
        for seg in plog.segments:
            seg.close()
    for d in lm.dirs:
        d.unlock()


def test_create_close_and_reload(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    a = lm.get_or_create_log("orders", 0, LogConfig(segment_bytes=1024))
    b = lm.get_or_create_log("my-topic", 12)
    assert lm.get_or_create_log("orders", 0) is a
    put(a, 30)
    put(b, 3)
    assert set(lm.all_logs()) == {("orders", 0), ("my-topic", 12)}
    lm.close()
    lm.close()  # idempotent
    assert (data_dir / ".kafka_cleanshutdown").exists()
    meta = (data_dir / "meta.properties").read_text()
    assert "version=0" in meta and "broker.id=1" in meta
    assert (data_dir / "recovery-point-offset-checkpoint").read_text().splitlines() == [
        "0", "2", "my-topic 12 3", "orders 0 30",
    ]  # fmt: skip

    lm2 = manager(data_dir, clock)
    assert not (data_dir / ".kafka_cleanshutdown").exists()
    a2, b2 = lm2.get_log("orders", 0), lm2.get_log("my-topic", 12)
    assert a2 is not None and b2 is not None
    assert (a2.log_end_offset, b2.log_end_offset) == (30, 3)
    assert a2.recovery_point == 30
    assert [r.value for r in read_all(b2)] == [b"value-00000", b"value-00001", b"value-00002"]
    assert lm2.get_log("orders", 1) is None
    lm2.close()


def test_meta_properties_must_match(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    lm.write_meta_properties(broker_id=1, cluster_id="abcDEF123")
    lm.close()
    assert "cluster.id=abcDEF123" in (data_dir / "meta.properties").read_text()
    with pytest.raises(KafkaStorageError, match="broker.id"):
        LogManager(data_dir, server_defaults={}, clock=clock, broker_id=2)
    with pytest.raises(KafkaStorageError, match="cluster.id"):
        LogManager(data_dir, server_defaults={}, clock=clock, cluster_id="other")
    lm = LogManager(data_dir, server_defaults={}, clock=clock)
    assert (lm.broker_id, lm.cluster_id) == (1, "abcDEF123")
    lm.close()


def test_unclean_restart_recovers_the_valid_prefix(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 12)
    active = plog.active_segment
    tail_base, leo = active.base_offset, plog.log_end_offset
    crash(lm)
    with open(active.log_path, "r+b") as f:  # a torn write: half of the last batch
        f.truncate(active.log_path.stat().st_size - 30)
    lm2 = manager(data_dir, clock)
    plog2 = lm2.get_log("t", 0)
    assert plog2 is not None
    assert plog2.log_end_offset == leo - 1
    assert [r.offset for r in read_all(plog2)] == list(range(leo - 1))
    assert plog2.active_segment.base_offset == tail_base
    put(plog2, 1, start=leo - 1)
    assert plog2.log_end_offset == leo
    lm2.close()


def _count_recoveries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    recovered: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *args: object, **kwargs: object) -> int:
        recovered.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    return recovered


def test_recovery_starts_at_checkpointed_recovery_point(
    data_dir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    lm = manager(data_dir, clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 40)
    plog.flush()
    lm.checkpoint_recovery_points()
    put(plog, 1, start=40)
    last_base = plog.active_segment.base_offset
    assert len(plog.segments) > 3
    crash(lm)
    recovered = _count_recoveries(monkeypatch)
    lm2 = manager(data_dir, clock)
    assert recovered == [last_base]
    assert lm2.get_log("t", 0).log_end_offset == 41  # type: ignore[union-attr]
    lm2.close()


def test_corrupt_recovery_checkpoint_means_full_recovery(
    data_dir: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lm = manager(data_dir, clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 40)
    bases = [s.base_offset for s in plog.segments]
    lm.close()  # clean shutdown, but the checkpoint gets mangled afterwards
    (data_dir / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 4")  # cut mid-write
    (data_dir / "log-start-offset-checkpoint").write_bytes(b"\xff\xfe garbage")
    recovered = _count_recoveries(monkeypatch)
    with caplog.at_level(logging.WARNING):
        lm2 = manager(data_dir, clock)
    assert recovered == bases
    assert "recovery-point-offset-checkpoint" in caplog.text
    plog2 = lm2.get_log("t", 0)
    assert plog2 is not None
    assert (plog2.log_start_offset, plog2.log_end_offset) == (0, 40)
    assert len(read_all(plog2)) == 40
    lm2.close()


def test_log_start_offset_survives_restart(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 10)
    plog.maybe_increment_log_start_offset(4)
    lm.close()
    lm2 = manager(data_dir, clock)
    assert lm2.get_log("t", 0).log_start_offset == 4  # type: ignore[union-attr]
    lm2.close()


def test_lock_prevents_a_second_manager(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    with pytest.raises(KafkaStorageError, match="lock"):
        manager(data_dir, clock)
    script = (
        "import sys; from core.clock import ManualClock; from core.storage.log_manager import LogManager\n"
        "try:\n    LogManager(sys.argv[1], server_defaults={}, clock=ManualClock())\n"
        "except Exception as e:\n    print(type(e).__name__); sys.exit(3)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(data_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert "KafkaStorageError" in proc.stdout
    lm.close()
    manager(data_dir, clock).close()  # free again


def test_delete_log(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    put(lm.get_or_create_log("gone", 0), 5)
    put(lm.get_or_create_log("kept", 0), 5)
    assert lm.delete_log("gone", 0)
    assert not lm.delete_log("gone", 0)
    assert lm.get_log("gone", 0) is None
    assert not any(p.name.startswith("gone-0") for p in data_dir.iterdir())
    assert "gone" not in (data_dir / "recovery-point-offset-checkpoint").read_text()
    (data_dir / "old-3.0123456789abcdef0123456789abcdef-delete").mkdir()  # a crash mid-delete
    lm.close()
    lm2 = manager(data_dir, clock)
    assert set(lm2.all_logs()) == {("kept", 0)}
    assert not any(p.name.endswith("-delete") for p in data_dir.iterdir())
    lm2.close()


def test_high_watermark_checkpoint_round_trip(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    put(lm.get_or_create_log("t", 0), 5)
    lm.get_or_create_log("t", 1)
    lm.checkpoint_high_watermarks({("t", 0): 4, ("t", 1): 0, ("elsewhere", 0): 9})
    assert lm.read_high_watermarks() == {("t", 0): 4, ("t", 1): 0}
    (data_dir / "replication-offset-checkpoint").write_text("0\n3\n")
    assert lm.read_high_watermarks() == {}
    lm.close()


def test_several_log_dirs(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = LogManager(dirs, server_defaults=DEFAULTS, clock=clock, broker_id=3)
    for p in range(4):
        put(lm.get_or_create_log("t", p), 2)
    assert all(len([c for c in d.iterdir() if c.is_dir()]) == 2 for d in dirs)
    lm.close()
    lm2 = LogManager(dirs, server_defaults=DEFAULTS, clock=clock)
    assert lm2.broker_id == 3
    assert {tp: lg.log_end_offset for tp, lg in lm2.all_logs().items()} == {
        ("t", p): 2 for p in range(4)
    }
    lm2.close()


# --- maintenance ----------------------------------------------------------------------


@dataclass
class FakeLog:
    config: LogConfig = field(default_factory=LogConfig)
    unflushed_messages: int = 0
    last_flush_ms: int = NOW


@pytest.mark.parametrize(
    ("config", "unflushed", "since_flush", "due"),
    [
        (LogConfig(), 10**9, 10**9, False),  # Kafka's defaults: never
        (LogConfig(flush_messages=5), 4, 0, False),
        (LogConfig(flush_messages=5), 5, 0, True),
        (LogConfig(flush_ms=1000), 1, 999, False),
        (LogConfig(flush_ms=1000), 1, 1000, True),
        (LogConfig(flush_ms=1000), 0, 5000, False),  # nothing to flush
        (LogConfig(flush_messages=1, flush_ms=0), 1, 0, True),
    ],
)
def test_flush_due(config: LogConfig, unflushed: int, since_flush: int, due: bool) -> None:
    fake = FakeLog(config, unflushed, NOW - since_flush)
    assert flush_due(fake, NOW) is due


def test_flush_dirty_logs_applies_flush_ms(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    plog = lm.get_or_create_log("t", 0, LogConfig(flush_ms=1000))
    lazy = lm.get_or_create_log("u", 0)
    put(plog, 3)
    put(lazy, 3)
    assert lm.flush_dirty_logs(clock.now_ms()) == []
    clock.advance(1000)
    assert lm.flush_dirty_logs(clock.now_ms()) == [("t", 0)]
    assert plog.recovery_point == 3 and plog.unflushed_messages == 0
    assert lazy.recovery_point == 0
    lm.close()


def test_run_retention_respects_high_watermarks(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    cfg = LogConfig(segment_bytes=1024, retention_ms=1000)
    a, b = lm.get_or_create_log("a", 0, cfg), lm.get_or_create_log("b", 0, cfg)
    put(a, 30, ts=NOW - 5000)
    put(b, 30, ts=NOW - 5000)
    assert lm.run_retention(NOW, {("a", 0): 12}) == {("a", 0): 1}
    assert a.log_start_offset == a.segments[0].base_offset <= 12
    assert b.log_start_offset == 0  # no HW known: left alone
    deleted = lm.run_retention(NOW)  # HW = LEO
    assert set(deleted) == {("a", 0), ("b", 0)}
    assert a.log_start_offset == a.log_end_offset == 30
    lm.close()


def test_run_cleaner_picks_dirtiest_log_and_checkpoints(data_dir: Path, clock: ManualClock) -> None:
    lm = manager(data_dir, clock)
    cfg = LogConfig(segment_bytes=1024, cleanup_policy=("compact",))
    c0, c1 = lm.get_or_create_log("c", 0, cfg), lm.get_or_create_log("c", 1, cfg)
    put(lm.get_or_create_log("d", 0), 100, keys=1)  # delete policy: never compacted
    put(c0, 60, keys=20)
    put(c1, 60, keys=2)
    c0.roll()
    c1.roll()
    cleaned = {lm.run_cleaner(NOW)[0], lm.run_cleaner(NOW)[0]}  # type: ignore[index]
    assert cleaned == {("c", 0), ("c", 1)}
    assert lm.cleaner_checkpoint == {("c", 0): 60, ("c", 1): 60}
    assert lm.run_cleaner(NOW) is None  # nothing dirty left
    put(c0, 3, start=60, keys=20)  # dirty ratio ~0.13: below min.cleanable.dirty.ratio
    put(c1, 40, start=60, keys=2)  # dirty ratio ~0.95
    c0.roll()
    c1.roll()
    found = lm.run_cleaner(NOW)
    assert found is not None
    tp, result = found
    assert tp == ("c", 1) and result.records_removed == 40
    assert result.first_dirty_after == 100
    assert lm.run_cleaner(NOW) is None
    assert "c 1 100" in (data_dir / "cleaner-offset-checkpoint").read_text()
    lm.close()
    lm2 = manager(data_dir, clock)
    assert lm2.cleaner_checkpoint == {("c", 0): 60, ("c", 1): 100}
    assert [r.value for r in read_all(lm2.get_log("c", 1))] == [b"value-00098", b"value-00099"]  # type: ignore[arg-type]
    lm2.close()


async def test_run_blocking_leaves_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    assert await run_blocking(threading.get_ident) != loop_thread
    assert await run_blocking(int, "7", base=8) == 7
    with pytest.raises(ZeroDivisionError):
        await run_blocking(lambda: 1 / 0)
    results = await asyncio.gather(*(run_blocking(os.getpid) for _ in range(10)))
    assert set(results) == {os.getpid()}


def test_rolled_segments_are_flushed_by_the_next_round_not_inside_append(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = LogManager(tmp_path / "data", server_defaults={}, clock=clock)
    plog = lm.get_or_create_log("t", 0, LogConfig.from_overrides({"segment.bytes": "1000"}))
    for _ in range(5):
        plog.append_as_leader(build_batch([NewRecord(b"x" * 400)], now_ms=0), leader_epoch=0)
    assert len(plog.segments) > 1
    assert plog.recovery_point == 0  # rolls did not fsync inline
    lm.flush_dirty_logs(clock.now_ms())
    assert plog.recovery_point == plog.active_segment.base_offset
    lm.close()
