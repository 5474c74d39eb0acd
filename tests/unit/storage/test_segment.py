"""LogSegment on real files: append/read, index density, limits, timestamps, recovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage.batch import parse_header, split_batches
from core.storage.records import NewRecord, build_batch, decode_records
from core.storage.segment import LogSegment

NOW = 1_700_000_000_000


def make_batch(base: int, count: int, *, ts: int = NOW, value_size: int = 20) -> bytearray:
    records = [
        NewRecord(value=bytes([65 + i % 26]) * value_size, key=b"k%d" % i, timestamp=ts + i)
        for i in range(count)
    ]
    return build_batch(records, now_ms=ts, base_offset=base)


def append(seg: LogSegment, buf: bytes | bytearray) -> None:
    h = parse_header(buf)
    seg.append(buf, first_offset=h.base_offset, last_offset=h.last_offset,
               max_timestamp=h.max_timestamp, max_timestamp_offset=h.last_offset)  # fmt: skip


def open_segment(
    directory: Path, base: int = 0, *, interval: int = 4096, index_bytes: int = 1 << 16
) -> LogSegment:
    return LogSegment(
        directory,
        base,
        index_interval_bytes=interval,
        max_index_bytes=index_bytes,
        clock=ManualClock(NOW),
    )


def fill(seg: LogSegment, batches: int, per_batch: int = 5, *, start: int = 0) -> list[bytearray]:
    out = []
    for i in range(batches):
        b = make_batch(start + i * per_batch, per_batch)
        append(seg, b)
        out.append(b)
    return out


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in decode_records(data)]


def test_file_names_and_round_trip(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 42)
    assert seg.log_path.name == "00000000000000000042.log"
    assert (tmp_path / "00000000000000000042.index").exists()
    assert (tmp_path / "00000000000000000042.timeindex").exists()
    written = fill(seg, 10, start=42)
    assert seg.size == sum(len(b) for b in written)
    assert seg.next_offset() == 92
    pos, data = seg.read(42, 1 << 20)  # type: ignore[misc]
    assert pos == 0 and data == b"".join(written)
    pos, data = seg.read(65, 1 << 20)  # type: ignore[misc]
    assert pos == sum(len(b) for b in written[:4])
    assert offsets(data)[0] == 62  # the batch holding 65 starts at 62
    assert seg.read(92, 100) is None
    seg.close()


def test_read_returns_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    written = fill(seg, 6)
    size = len(written[0])
    _, data = seg.read(0, int(size * 2.5))  # type: ignore[misc]
    assert data == written[0] + written[1]
    _, data = seg.read(0, 10)  # type: ignore[misc]
    assert data == written[0]  # at least one whole batch
    _, data = seg.read(0, 10, min_one_batch=False)  # type: ignore[misc]
    assert data == b""
    seg.close()


def test_read_respects_max_position_and_max_offset(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    written = fill(seg, 6)
    third = sum(len(b) for b in written[:3])
    _, data = seg.read(0, 1 << 20, max_position=third)  # type: ignore[misc]
    assert data == b"".join(written[:3])
    _, data = seg.read(0, 1 << 20, max_position=third - 1)  # type: ignore[misc]
    assert data == b"".join(written[:2])
    _, data = seg.read(3, 1 << 20, max_position=10)  # type: ignore[misc]
    assert data == b""
    found = seg.read_slice(0, 1 << 20, max_offset=12)
    assert found is not None and offsets(found.data)[-1] == 14  # batch [10, 14] starts below 12
    assert (found.first_offset, found.next_offset) == (0, 15)
    found = seg.read_slice(0, 1 << 20, max_offset=10)
    assert found is not None and found.next_offset == 10
    seg.close()


def expected_entries(sizes: list[int], lasts: list[int], interval: int) -> list[tuple[int, int]]:
    since, pos, out = 0, 0, []
    for size, last in zip(sizes, lasts, strict=True):
        if since > interval:
            out.append((last, pos))
            since = 0
        since += size
        pos += size
    return out


@pytest.mark.parametrize("interval", [0, 100, 300, 1000, 4096])
def test_index_density_follows_index_interval_bytes(tmp_path: Path, interval: int) -> None:
    seg = open_segment(tmp_path, interval=interval)
    written = fill(seg, 40, per_batch=3)
    sizes = [len(b) for b in written]
    lasts = [3 * i + 2 for i in range(40)]
    got = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    assert got == expected_entries(sizes, lasts, interval)
    if interval == 0:
        assert len(got) == 39  # every append but the first
    # each indexed position is the start of the batch whose last offset it names
    for off, pos in got:
        assert parse_header(seg._pread(61, pos)).last_offset == off
    seg.close()


def index_entries(seg: LogSegment) -> list[tuple[int, int]]:
    return [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]


def test_multi_batch_append_indexes_per_batch(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    batches = [make_batch(i * 4, 4) for i in range(12)]
    one_by_one = open_segment(tmp_path / "a", interval=150)
    for b in batches:
        append(one_by_one, b)
    data = b"".join(batches)
    spans = [(pos, h.size, h.last_offset, h.max_timestamp) for pos, h in split_batches(data)]
    together = open_segment(tmp_path / "b", interval=150)
    together.append(data, first_offset=0, last_offset=47, max_timestamp=NOW + 3,
                    max_timestamp_offset=3, batches=spans)  # fmt: skip
    assert index_entries(together) == index_entries(one_by_one) != []
    whole = open_segment(tmp_path / "c", interval=150)
    whole.append(
        data, first_offset=0, last_offset=47, max_timestamp=NOW + 3, max_timestamp_offset=3
    )
    assert index_entries(whole) == []  # one append without spans: the first is never indexed
    for seg in (one_by_one, together, whole):
        seg.close()


def test_translate_offset(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=0)
    written = fill(seg, 10, per_batch=4)
    for target in range(40):
        pos, header = seg.translate_offset(target)  # type: ignore[misc]
        assert header.base_offset == target // 4 * 4
        assert pos == sum(len(b) for b in written[: target // 4])
    assert seg.translate_offset(40) is None
    seg.close()


def test_locate_with_large_and_small_batches_mixed(tmp_path: Path) -> None:
    """Large batches (an index entry each, a frame read at a time) and small ones
    after them (read a chunk at a time): every offset is found in its batch."""
    seg = open_segment(tmp_path, index_bytes=1 << 20)
    sizes, base = [], 0
    for count, value_size in [(40, 1000)] * 6 + [(3, 20)] * 30 + [(40, 1000)] * 2:
        batch = make_batch(base, count, value_size=value_size)
        append(seg, batch)
        sizes.append((base, count, len(batch)))
        base += count
    position = 0
    for first, count, size in sizes:
        for target in (first, first + count // 2, first + count - 1):
            frame = seg.locate(target)
            assert frame is not None
            assert (frame.position, frame.base_offset, frame.size) == (position, first, size)
        position += size
    assert seg.locate(base) is None
    seg.close()


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=0)
    stamps = [100, 300, 200, 500, 400, 500, 900]
    for i, ts in enumerate(stamps):
        append(
            seg, build_batch([NewRecord(value=b"v", timestamp=NOW + ts)], now_ms=NOW, base_offset=i)
        )
    assert seg.max_timestamp == NOW + 900 and seg.max_timestamp_offset == 6
    assert seg.time_index.entries > 0
    for target in (0, 100, 150, 250, 300, 450, 500, 501, 900):
        expected = next((i, NOW + ts) for i, ts in enumerate(stamps) if ts >= target)
        assert seg.find_offset_by_timestamp(NOW + target) == expected, target
    assert seg.find_offset_by_timestamp(NOW + 901) is None
    assert seg.find_offset_by_timestamp(NOW + 100, start_offset=2) == (2, NOW + 200)
    seg.close()


def test_find_offset_by_timestamp_inside_a_batch(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    records = [NewRecord(value=b"x", timestamp=NOW + t) for t in (50, 10, 70, 30)]
    append(seg, build_batch(records, now_ms=NOW))
    assert seg.find_offset_by_timestamp(NOW + 20) == (0, NOW + 50)
    assert seg.find_offset_by_timestamp(NOW + 60) == (2, NOW + 70)
    seg.close()


def test_reopen_after_close(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=100)
    written = fill(seg, 20)
    entries = seg.offset_index.entries
    seg.close()
    assert (tmp_path / f"{0:020d}.index").stat().st_size == entries * 8
    again = open_segment(tmp_path, interval=100)
    again.sanity_check()
    assert again.size == sum(len(b) for b in written)
    assert again.next_offset() == 100
    assert again.max_timestamp == NOW + 4
    assert again.first_batch_timestamp == NOW + 4
    assert again.read(57, 1 << 20)[1][:8] == written[11][:8]  # type: ignore[index]
    again.close()


def test_recover_rebuilds_indexes_and_truncates_garbage(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=200)
    fill(seg, 30)
    before = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    size = seg.size
    seg.close()
    with open(tmp_path / f"{0:020d}.log", "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x96" + b"\xff" * 100)
    (tmp_path / f"{0:020d}.index").write_bytes(b"garbage!" * 3)
    again = open_segment(tmp_path, interval=200)
    assert again.recover(1 << 20) == 108
    assert again.size == size and os.path.getsize(again.log_path) == size
    assert [again.offset_index.entry(i) for i in range(again.offset_index.entries)] == before
    assert again.next_offset() == 150
    again.close()


def test_recover_rejects_batches_above_max_message_bytes(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    fill(seg, 3)
    written_big = make_batch(15, 50, value_size=100)
    append(seg, written_big)
    assert seg.recover(len(written_big) - 1) == len(written_big)
    assert seg.next_offset() == 15
    seg.close()


def test_truncate_to(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=0)
    written = fill(seg, 10)
    assert seg.truncate_to(23) == sum(len(b) for b in written[4:])
    assert seg.next_offset() == 20
    assert seg.offset_index.last_offset < 20
    assert seg.time_index.last_entry()[1] < 20
    assert seg.max_timestamp == NOW + 4
    append(seg, make_batch(20, 5))
    assert seg.next_offset() == 25
    size = seg.size
    assert seg.truncate_to(0) == size
    assert seg.size == 0 and seg.first_batch_timestamp is None and seg.next_offset() == 0
    seg.close()


def test_rename_suffix_and_delete(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, 7, interval=0)
    fill(seg, 2, start=7)
    seg.rename_suffix("", ".deleted")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"{7:020d}{ext}.deleted" for ext in (".index", ".log", ".timeindex")]
    assert seg.read(7, 100) is not None  # the open fd survives the rename
    seg.delete()
    assert list(tmp_path.iterdir()) == []


def test_tail_reads_after_appends_and_truncation(tmp_path: Path) -> None:
    """The batch of the last append is found without the index; truncation and a
    multi-batch append leave reads exact."""
    seg = open_segment(tmp_path, interval=100_000)  # no index entries: every lookup scans
    batches = fill(seg, 30, per_batch=4)
    for off in (116, 117, 119, 0, 5, 115):
        found = seg.read(off, 10_000)
        assert found is not None and found[1].startswith(bytes(batches[off // 4]))
    seg.truncate_to(110)  # drops batches 27.. (offsets 108..)
    assert seg.read(117, 1000) is None
    assert offsets(seg.read(104, 1000)[1]) == [104, 105, 106, 107]
    two = make_batch(108, 2) + make_batch(110, 3)
    seg.append(two, first_offset=108, last_offset=112, max_timestamp=NOW, max_timestamp_offset=112,
               batches=[(0, len(make_batch(108, 2)), 109, NOW),
                        (len(make_batch(108, 2)), len(make_batch(110, 3)), 112, NOW)])
    assert offsets(seg.read(111, 1000)[1]) == [110, 111, 112]
    assert offsets(seg.read(108, 1000)[1]) == [108, 109, 110, 111, 112]
    append(seg, make_batch(113, 1))
    assert offsets(seg.read(113, 1000)[1]) == [113]
    assert seg.read(113, 1000, max_offset=113)[1] == b""  # not below max_offset
