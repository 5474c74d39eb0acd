"""OffsetIndex and TimeIndex on real files: append, lookup, full, trim, reopen, sanity."""

from __future__ import annotations

import bisect
import struct
from pathlib import Path

import pytest

from core.storage.errors import CorruptIndexError, NonMonotonicAppendError
from core.storage.index import OffsetIndex, TimeIndex

BASE = 1000


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    return tmp_path / f"{BASE:020d}.index"


@pytest.fixture
def time_path(tmp_path: Path) -> Path:
    return tmp_path / f"{BASE:020d}.timeindex"


def test_new_offset_index_is_preallocated_rounded_down(index_path: Path) -> None:
    idx = OffsetIndex(index_path, BASE, 8 * 10 + 5)
    assert index_path.stat().st_size == 80
    assert (idx.entries, idx.max_entries) == (0, 10)
    assert idx.lookup(BASE + 5) == (BASE, 0)
    idx.close()
    assert index_path.stat().st_size == 0


def test_offset_index_append_and_lookup(index_path: Path) -> None:
    idx = OffsetIndex(index_path, BASE, 4096)
    entries = [(BASE + 3, 0), (BASE + 10, 4100), (BASE + 17, 8300), (BASE + 40, 12500)]
    for off, pos in entries:
        idx.append(off, pos)
    assert idx.entries == 4
    assert idx.lookup(BASE) == (BASE, 0)
    assert idx.lookup(BASE + 2) == (BASE, 0)
    assert idx.lookup(BASE + 3) == (BASE + 3, 0)
    assert idx.lookup(BASE + 9) == (BASE + 3, 0)
    assert idx.lookup(BASE + 10) == (BASE + 10, 4100)
    assert idx.lookup(BASE + 39) == (BASE + 17, 8300)
    assert idx.lookup(BASE + 10**6) == (BASE + 40, 12500)
    assert idx.last_offset == BASE + 40
    idx.close()


def test_offset_index_rejects_non_increasing_offsets(index_path: Path) -> None:
    idx = OffsetIndex(index_path, BASE, 4096)
    idx.append(BASE + 5, 100)
    with pytest.raises(NonMonotonicAppendError, match=r"offset 1005 .* last offset 1005"):
        idx.append(BASE + 5, 200)
    with pytest.raises(NonMonotonicAppendError):
        idx.append(BASE + 4, 200)
    with pytest.raises(ValueError, match="does not fit"):
        OffsetIndex(index_path.with_name("x.index"), BASE, 64).append(BASE - 1, 0)
    idx.close()


def test_offset_index_full(index_path: Path) -> None:
    idx = OffsetIndex(index_path, BASE, 8 * 3)
    for i in range(3):
        assert not idx.is_full()
        idx.append(BASE + i + 1, i * 100)
    assert idx.is_full()
    with pytest.raises(ValueError, match="full"):
        idx.append(BASE + 10, 999)
    idx.close()


def test_offset_index_trim_and_reopen(index_path: Path) -> None:
    idx = OffsetIndex(index_path, BASE, 1 << 20)
    for i in range(1, 51):
        idx.append(BASE + i * 2, i * 64)
    idx.close()
    assert index_path.stat().st_size == 50 * 8
    again = OffsetIndex(index_path, BASE, 1 << 20)
    assert again.entries == 50 and again.is_full()
    again.sanity_check()
    assert again.lookup(BASE + 21) == (BASE + 20, 640)
    again.resize(1 << 20)
    assert not again.is_full() and again.max_entries == (1 << 20) // 8
    again.append(BASE + 200, 9999)
    assert again.lookup(BASE + 300) == (BASE + 200, 9999)
    again.close()
    assert OffsetIndex(index_path, BASE, 1 << 20).entries == 51


def test_offset_index_truncate_and_reset(index_path: Path) -> None:
    idx = OffsetIndex(index_path, BASE, 4096)
    for i in range(1, 11):
        idx.append(BASE + i * 10, i * 100)
    idx.truncate_to(BASE + 50)  # removes entries >= 50
    assert idx.entries == 4 and idx.last_offset == BASE + 40
    idx.truncate_to(BASE + 35)
    assert idx.entries == 3 and idx.last_offset == BASE + 30
    idx.truncate_to(BASE + 1000)
    assert idx.entries == 3
    idx.truncate_to(BASE)
    assert idx.entries == 0
    idx.append(BASE + 1, 5)
    idx.reset()
    assert idx.entries == 0 and idx.max_entries == 4096 // 8
    idx.close()


def test_binary_search_over_warm_and_cold_entries(index_path: Path) -> None:
    idx = OffsetIndex(index_path, BASE, 8 * 5000)
    offsets = [BASE + 3 * i + 1 for i in range(5000)]
    for i, off in enumerate(offsets):
        idx.append(off, i * 10)
    for target in range(BASE - 2, offsets[-1] + 5, 7):
        i = bisect.bisect_right(offsets, target) - 1
        expected = (BASE, 0) if i < 0 else (offsets[i], i * 10)
        assert idx.lookup(target) == expected
    idx.close()


def test_sanity_check_rejects_bad_files(tmp_path: Path) -> None:
    odd = tmp_path / "odd.index"
    odd.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x01\x02")
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex(odd, 0, 4096).sanity_check()

    untrimmed = tmp_path / "untrimmed.index"  # a crash left the preallocated zeros
    untrimmed.write_bytes(struct.pack(">ii", 5, 100) + bytes(8 * 20))
    with pytest.raises(CorruptIndexError, match="do not increase"):
        OffsetIndex(untrimmed, 0, 4096).sanity_check()

    below = tmp_path / "below.index"
    below.write_bytes(struct.pack(">ii", -3, 0))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(below, 0, 4096).sanity_check()

    positions = tmp_path / "positions.index"
    positions.write_bytes(struct.pack(">iiii", 1, 500, 2, 400))
    with pytest.raises(CorruptIndexError, match="positions"):
        OffsetIndex(positions, 0, 4096).sanity_check()

    good = tmp_path / "good.index"
    good.write_bytes(struct.pack(">iiii", 1, 400, 2, 500))
    OffsetIndex(good, 0, 4096).sanity_check()


def test_time_index_only_strictly_increasing_timestamps(time_path: Path) -> None:
    idx = TimeIndex(time_path, BASE, 12 * 100)
    idx.maybe_append(-1, BASE)  # no timestamp: never written
    idx.maybe_append(100, BASE + 1)
    idx.maybe_append(100, BASE + 2)  # not greater: ignored
    idx.maybe_append(90, BASE + 3)  # smaller: ignored
    idx.maybe_append(150, BASE + 4)
    assert [idx.entry(i) for i in range(idx.entries)] == [(100, BASE + 1), (150, BASE + 4)]
    with pytest.raises(NonMonotonicAppendError):
        idx.maybe_append(200, BASE + 3)
    assert idx.lookup(99) == (-1, BASE)
    assert idx.lookup(100) == (100, BASE + 1)
    assert idx.lookup(149) == (100, BASE + 1)
    assert idx.lookup(10**15) == (150, BASE + 4)
    idx.close()
    assert time_path.stat().st_size == 24
    again = TimeIndex(time_path, BASE, 12 * 100)
    again.sanity_check()
    assert again.last_entry() == (150, BASE + 4)
    again.close()


def test_time_index_keeps_a_slot_for_the_final_entry(time_path: Path) -> None:
    idx = TimeIndex(time_path, BASE, 12 * 3)
    idx.maybe_append(10, BASE + 1)
    idx.maybe_append(20, BASE + 2)
    assert idx.is_full()
    with pytest.raises(ValueError, match="full"):
        idx.maybe_append(30, BASE + 3)
    idx.maybe_append(30, BASE + 3, skip_full_check=True)
    assert idx.entries == 3
    idx.close()


def test_time_index_truncate(time_path: Path) -> None:
    idx = TimeIndex(time_path, BASE, 1200)
    for i in range(1, 6):
        idx.maybe_append(i * 100, BASE + i * 10)
    idx.truncate_to(BASE + 30)
    assert idx.last_entry() == (200, BASE + 20)
    idx.truncate_to(BASE + 21)
    assert idx.last_entry() == (200, BASE + 20)
    idx.truncate_to(BASE)
    assert idx.entries == 0 and idx.last_entry() == (-1, BASE)
    idx.close()


def test_time_index_sanity_check(tmp_path: Path) -> None:
    bad = tmp_path / "bad.timeindex"
    bad.write_bytes(struct.pack(">qiqi", 500, 3, 400, 4))
    with pytest.raises(CorruptIndexError, match="timestamps"):
        TimeIndex(bad, 0, 1200).sanity_check()
    zeros = tmp_path / "zeros.timeindex"
    zeros.write_bytes(struct.pack(">qi", 500, 3) + bytes(12 * 4))
    with pytest.raises(CorruptIndexError):
        TimeIndex(zeros, 0, 1200).sanity_check()
    cut = tmp_path / "cut.timeindex"
    cut.write_bytes(struct.pack(">qi", 500, 3)[:7])
    with pytest.raises(CorruptIndexError, match="multiple"):
        TimeIndex(cut, 0, 1200).sanity_check()
