"""DeleteRecords in the log: ``PartitionLog.delete_records_before`` moves the log start and
deletes the segments wholly below it at once (``retention.segments_below_log_start``), and
the log start checkpoint keeps it through a clean restart and through a crash."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage.config import LogConfig
from core.storage.errors import OffsetOutOfRangeError
from core.storage.log import PartitionLog
from core.storage.log_manager import LogManager
from core.storage.records import NewRecord, build_batch, decode_records
from core.storage.retention import segments_below_log_start

NOW = 1_700_000_000_000
SMALL = {"log.segment.bytes": "1024"}  # about 10 of the records below per segment


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def manager(data_dir: Path, clock: ManualClock) -> LogManager:
    return LogManager(data_dir, server_defaults=SMALL, clock=clock, broker_id=1)


def put(plog: PartitionLog, n: int) -> None:
    for _ in range(n):
        i = plog.log_end_offset
        rec = NewRecord(value=b"value-%05d" % i + b"." * 60, key=b"k%d" % i, timestamp=NOW)
        plog.append_as_leader(build_batch([rec], now_ms=NOW), leader_epoch=0)


def offsets(plog: PartitionLog) -> list[int]:
    out: list[int] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 1 << 20)
        out += [r.offset for r in decode_records(fetched.data, min_offset=offset)]
        offset = fetched.high_offset
    return out


def crash(lm: LogManager) -> None:
    """As a killed process leaves it: no flush, no checkpoint, no clean-shutdown marker."""
    for plog in lm.all_logs().values():
        for seg in plog.segments:
            seg.close()
    for d in lm.dirs:
        d.unlock()


@dataclass
class Seg:
    base_offset: int
    size: int = 100
    max_timestamp: int = NOW
    log_path: Path = Path("x.log")


@pytest.mark.parametrize(("log_start", "doomed"), [
    (0, 0), (9, 0), (10, 1), (15, 1), (20, 2), (29, 2), (30, 3),
])
def test_segments_below_the_log_start_are_a_prefix_of_whole_segments(
    log_start: int, doomed: int,
) -> None:
    segs = [Seg(0), Seg(10), Seg(20)]  # the last one ends at the log end, 30
    got = segments_below_log_start(segs, log_start_offset=log_start, log_end_offset=30)
    assert got == segs[:doomed]


def test_an_empty_last_segment_is_never_below_the_log_start() -> None:
    segs = [Seg(0), Seg(10, size=0)]
    assert segments_below_log_start(segs, log_start_offset=10, log_end_offset=10) == segs[:1]


def test_records_below_the_offset_are_gone_and_whole_segments_deleted_at_once(
    tmp_path: Path, clock: ManualClock,
) -> None:
    lm = manager(tmp_path / "data", clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 50)
    bases = [s.base_offset for s in plog.segments]
    assert len(bases) >= 4
    cut = bases[2] + 1  # inside the third segment
    files_before = {p.name for p in plog.dir.glob("*.log")}

    assert plog.delete_records_before(cut)
    assert plog.log_start_offset == cut
    assert [s.base_offset for s in plog.segments] == bases[2:]  # the third one holds cut
    assert {p.name for p in plog.dir.glob("*.log")} == files_before - {
        f"{b:020d}.log" for b in bases[:2]}
    assert offsets(plog) == list(range(cut, 50))
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(cut - 1, 1 << 20)
    lm.close()


def test_deleting_up_to_the_log_end_empties_the_log_and_appends_go_on_there(
    tmp_path: Path, clock: ManualClock,
) -> None:
    lm = manager(tmp_path / "data", clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 30)
    assert plog.delete_records_before(30)
    assert (plog.log_start_offset, plog.log_end_offset) == (30, 30)
    assert [s.base_offset for s in plog.segments] == [30] and plog.size_in_bytes == 0
    put(plog, 2)
    assert offsets(plog) == [30, 31]
    lm.close()


def test_an_offset_at_or_below_the_log_start_changes_nothing_and_past_the_end_is_refused(
    tmp_path: Path, clock: ManualClock,
) -> None:
    lm = manager(tmp_path / "data", clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 20)
    assert plog.delete_records_before(12)
    assert not plog.delete_records_before(12)
    assert not plog.delete_records_before(3)
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(21)
    assert plog.log_start_offset == 12
    lm.close()


@pytest.mark.parametrize("stop", ["close", "crash"])
def test_the_new_log_start_survives_a_restart_once_checkpointed(
    tmp_path: Path, clock: ManualClock, stop: str,
) -> None:
    lm = manager(tmp_path / "data", clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 50)
    cut = plog.segments[1].base_offset + 3
    plog.delete_records_before(cut)
    lm.checkpoint_log_start_offsets()  # what the broker does before it answers
    if stop == "close":
        lm.close()
    else:
        plog.flush()  # the records themselves are on disk; only the checkpoint tells
        crash(lm)
    lm2 = manager(tmp_path / "data", clock)
    again = lm2.get_log("t", 0)
    assert again is not None
    assert again.log_start_offset == cut
    assert offsets(again) == list(range(cut, 50))
    lm2.close()


def test_the_checkpoint_is_what_keeps_them_deleted_after_a_crash(
    tmp_path: Path, clock: ManualClock,
) -> None:
    """Without the checkpoint write the records of the segment holding the offset would
    come back: the reason the broker writes it before answering."""
    lm = manager(tmp_path / "data", clock)
    plog = lm.get_or_create_log("t", 0)
    put(plog, 50)
    first_kept = plog.segments[1].base_offset
    plog.delete_records_before(first_kept + 3)
    plog.flush()
    crash(lm)
    lm2 = manager(tmp_path / "data", clock)
    again = lm2.get_log("t", 0)
    assert again is not None and again.log_start_offset == first_kept
    lm2.close()


def test_a_compacted_log_start_also_moves(tmp_path: Path, clock: ManualClock) -> None:
    """The log refuses nothing by policy: the broker refuses compact-only topics."""
    plog = PartitionLog.open(tmp_path / "c-0", LogConfig(cleanup_policy=("compact",)),
                             clock=clock)
    put(plog, 5)
    assert plog.delete_records_before(2) and plog.log_start_offset == 2
    plog.close()
