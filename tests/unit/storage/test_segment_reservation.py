"""Blocks reserved past a segment's end (``fallocate`` KEEP_SIZE): the file's size stays
exactly the batches written, the reservation is given back at roll, truncation and close,
one a crash left is trimmed, and a file system that refuses only turns it off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import native
from core.storage.batch import parse_header
from core.storage.config import LogConfig
from core.storage.log import PartitionLog
from core.storage.records import NewRecord, build_batch
from core.storage.segment import RESERVE_BYTES, LogSegment

NOW = 1_700_000_000_000

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="the C extension is not built")


def _reservable(directory: Path) -> bool:
    fd = os.open(directory / "probe", os.O_WRONLY | os.O_CREAT)
    try:
        return native.reserve_blocks(fd, 0, 1 << 16)
    finally:
        os.close(fd)
        os.unlink(directory / "probe")


@pytest.fixture
def dir_(tmp_path: Path) -> Path:
    if not _reservable(tmp_path):
        pytest.skip("this file system cannot reserve blocks")
    return tmp_path


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def batch(base: int, count: int = 10, value_size: int = 200) -> bytearray:
    return build_batch([NewRecord(value=b"v" * value_size, key=b"k%d" % i, timestamp=NOW)
                        for i in range(count)], now_ms=NOW, base_offset=base)


def append(seg: LogSegment, buf: bytearray) -> None:
    h = parse_header(buf)
    seg.append(buf, first_offset=h.base_offset, last_offset=h.last_offset,
               max_timestamp=h.max_timestamp, max_timestamp_offset=h.last_offset)


def open_segment(directory: Path, base: int = 0, **kw: int) -> LogSegment:
    return LogSegment(directory, base, index_interval_bytes=4096, max_index_bytes=1 << 16,
                      clock=ManualClock(NOW), **kw)


def test_writes_reserve_blocks_ahead_without_changing_the_size(dir_: Path) -> None:
    seg = open_segment(dir_)
    b = batch(0)
    append(seg, b)
    assert os.stat(seg.log_path).st_size == seg.size == len(b)
    assert allocated(seg.log_path) >= len(b) + RESERVE_BYTES
    assert seg.read(0, 1 << 20) == (0, bytes(b))  # reads see the batch only
    seg.close()


def test_roll_gives_the_reservation_back(dir_: Path) -> None:
    seg = open_segment(dir_)
    append(seg, batch(0))
    seg.on_become_inactive()
    assert allocated(seg.log_path) < seg.size + 64 * 1024
    assert os.stat(seg.log_path).st_size == seg.size
    seg.close()


def test_close_gives_the_reservation_back(dir_: Path) -> None:
    seg = open_segment(dir_)
    append(seg, batch(0))
    size, path = seg.size, seg.log_path
    seg.close()
    assert allocated(path) < size + 64 * 1024
    assert os.stat(path).st_size == size


def test_truncation_gives_the_reservation_back(dir_: Path) -> None:
    seg = open_segment(dir_)
    append(seg, batch(0))
    append(seg, batch(10))
    seg.truncate_to(10)
    assert allocated(seg.log_path) < seg.size + 64 * 1024
    append(seg, batch(10))  # the next write reserves again
    assert allocated(seg.log_path) >= seg.size + RESERVE_BYTES
    seg.close()


def test_a_reservation_left_by_a_crash_is_trimmed_by_recovery(dir_: Path) -> None:
    seg = open_segment(dir_)
    append(seg, batch(0))
    size, path = seg.size, seg.log_path
    # the process dies here: no roll, no close (the descriptor cache keeps the fd)
    again = open_segment(dir_)
    assert again.size == size and allocated(path) >= size + RESERVE_BYTES
    assert again.recover(1 << 20) == 0
    assert allocated(path) < size + 64 * 1024
    assert os.stat(path).st_size == size
    again.close()
    seg.close()


def test_a_refusing_file_system_only_turns_reservation_off(
    dir_: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def refuse(fd: int, offset: int, length: int) -> bool:
        calls.append((offset, length))
        return False

    monkeypatch.setattr(native, "reserve_blocks", refuse)
    seg = open_segment(dir_)
    first, second = batch(0), batch(10)
    append(seg, first)
    append(seg, second)
    assert len(calls) == 1 and seg.reserve_bytes == 0  # asked once, then not again
    assert os.stat(seg.log_path).st_size == len(first) + len(second)
    assert seg.read(0, 1 << 20) == (0, bytes(first + second))
    seg.close()


def test_small_segments_reserve_at_most_segment_bytes(dir_: Path) -> None:
    config = LogConfig(segment_bytes=16 * 1024)
    plog = PartitionLog.open(dir_ / "t-0", config, clock=ManualClock(NOW))
    try:
        plog.append_as_leader(batch(0), leader_epoch=0)
        seg = plog.active_segment
        assert seg.reserve_bytes == 16 * 1024
        assert allocated(seg.log_path) < seg.size + 16 * 1024 + 64 * 1024
        for _ in range(10):  # past segment.bytes: rolls, each rolled segment trimmed
            plog.append_as_leader(batch(0, value_size=1000), leader_epoch=0)
        rolled = plog.non_active_segments()
        assert rolled
        for old in rolled:
            assert allocated(old.log_path) < old.size + 64 * 1024
            assert os.stat(old.log_path).st_size == old.size
    finally:
        plog.close()


def test_reserve_blocks_refuses_what_it_cannot_reserve(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        assert native.reserve_blocks(r, 0, 4096) is False  # a pipe has no blocks
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(ValueError):
        native.reserve_blocks(0, -1, 10)
    with pytest.raises(ValueError):
        native.reserve_blocks(0, 0, 0)
