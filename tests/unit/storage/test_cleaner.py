"""Log compaction on real segment files."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import codec
from core.storage.batch import (
    BatchHeader,
    is_crc_valid,
    iter_batches,
    parse_header,
    set_log_append_time,
)
from core.storage.batch_rewrite import FilteredBatch, filter_batch
from core.storage.cleaner import clean, dirty_ratio, first_uncleanable_offset
from core.storage.config import LogConfig
from core.storage.log import PartitionLog
from core.storage.records import NewRecord, Record, build_batch, decode_records

NOW = 1_700_000_000_000
DAY = 86_400_000


def open_log(directory: Path, clock: ManualClock, **kw: object) -> PartitionLog:
    settings: dict[str, object] = {"segment_bytes": 1024, "cleanup_policy": ("compact",)}
    settings.update(kw)
    return PartitionLog.open(directory, LogConfig(**settings), clock=clock)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "data" / "compacted-0"


def put(plog: PartitionLog, key: bytes | None, value: bytes | None, *, ts: int = NOW) -> int:
    batch = build_batch([NewRecord(value=value, key=key, timestamp=ts)], now_ms=ts)
    return plog.append_as_leader(batch, leader_epoch=0).first_offset


def read_all(plog: PartitionLog) -> list[Record]:
    out: list[Record] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 1 << 20)
        out += decode_records(fetched.data, min_offset=offset)
        offset = fetched.high_offset
    return out


def raw_batches(plog: PartitionLog) -> list[tuple[BatchHeader, bytes]]:
    out = []
    for seg in plog.segments:
        for pos, header in seg.iter_batches():
            out.append((header, seg.read_batch(pos, header)))
    return out


def latest_per_key(records: list[Record]) -> dict[bytes | None, Record]:
    latest: dict[bytes | None, Record] = {}
    for r in records:
        latest[r.key] = r
    return latest


def fill(plog: PartitionLog, n: int, keys: int) -> None:
    for i in range(n):
        put(plog, b"key-%d" % (i % keys), b"value-%d" % i)


def test_keeps_last_value_per_key_with_offsets_preserved(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    fill(plog, 120, keys=7)
    plog.roll()
    before = read_all(plog)
    leo = plog.log_end_offset
    result = clean(plog, first_dirty=0, now_ms=NOW, high_watermark=leo)
    after = read_all(plog)
    assert after == sorted(latest_per_key(before).values(), key=lambda r: r.offset)
    assert result.first_dirty_after == leo
    assert result.records_removed == 120 - 7
    assert result.bytes_after < result.bytes_before
    assert plog.log_end_offset == leo
    assert put(plog, b"key-0", b"new") == leo
    plog.close()


def test_gaps_are_readable_and_survive_recovery(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    fill(plog, 60, keys=5)
    plog.roll()
    clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    survivors = read_all(plog)
    for offset in range(plog.log_start_offset, plog.log_end_offset):
        fetched = plog.read(offset, 1 << 20)
        got = decode_records(fetched.data, min_offset=offset)
        assert got, offset
        assert got[0] == next(r for r in survivors if r.offset >= offset)
    plog.close()
    reopened = open_log(log_dir, clock)  # unclean: every segment is re-validated
    assert read_all(reopened) == survivors
    assert reopened.log_end_offset == 60
    reopened.close()


def test_active_segment_and_records_above_hw_are_not_cleaned(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    fill(plog, 80, keys=4)
    hw = plog.segments[2].base_offset
    before = read_all(plog)
    result = clean(plog, first_dirty=0, now_ms=NOW, high_watermark=hw)
    assert result.first_dirty_after == hw
    after = read_all(plog)
    assert [r for r in after if r.offset >= hw] == [r for r in before if r.offset >= hw]
    below = [r for r in after if r.offset < hw]
    assert len({r.key for r in below}) == len(below)  # one per key below the HW
    assert dirty_ratio(plog, hw) > 0.0
    plog.close()


def test_min_compaction_lag_keeps_recent_segments_dirty(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, min_compaction_lag_ms=DAY)
    for i in range(40):
        put(plog, b"k%d" % (i % 3), b"old", ts=NOW - 2 * DAY)
    recent = plog.roll().base_offset
    for i in range(40):
        put(plog, b"k%d" % (i % 3), b"new")
    plog.roll()
    end = first_uncleanable_offset(plog, now_ms=NOW, high_watermark=plog.log_end_offset)
    assert end == recent
    result = clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    assert result.first_dirty_after == recent
    assert len([r for r in read_all(plog) if r.offset >= recent]) == 40
    plog.close()


def test_tombstones_kept_until_delete_horizon_then_removed(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock, delete_retention_ms=DAY)
    put(plog, b"a", b"1")
    put(plog, b"b", b"1")
    tomb = put(plog, b"a", None, ts=NOW - 5)
    put(plog, b"b", b"2")
    plog.roll()
    first = clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    records = read_all(plog)
    assert [(r.offset, r.key, r.value) for r in records] == [(tomb, b"a", None), (3, b"b", b"2")]
    assert records[0].timestamp == NOW - 5  # record timestamps survive the new baseTimestamp
    header = next(h for h, _ in raw_batches(plog) if h.base_offset == tomb)
    assert header.has_delete_horizon
    assert header.base_timestamp == NOW + DAY

    def round_at(now: int, start: int) -> int:
        put(plog, b"c", b"%d" % now)  # something dirty, so the cleaner has a range to map
        plog.roll()
        return clean(
            plog, first_dirty=start, now_ms=now, high_watermark=plog.log_end_offset
        ).first_dirty_after

    second = round_at(NOW + DAY - 1, first.first_dirty_after)
    assert any(r.offset == tomb for r in read_all(plog))
    header = next(h for h, _ in raw_batches(plog) if h.base_offset == tomb)
    assert header.base_timestamp == NOW + DAY  # the horizon is set once
    round_at(NOW + DAY, second)
    keys = [r.key for r in read_all(plog)]
    assert b"a" not in keys
    assert keys.count(b"b") == 1
    plog.close()


def test_keyless_records_are_dropped(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, cleanup_policy=("delete",))  # compacted logs reject them
    put(plog, None, b"no key")
    put(plog, b"k", b"v1")
    put(plog, None, b"no key either")
    put(plog, b"k", b"v2")
    plog.update_config(LogConfig(segment_bytes=1024, cleanup_policy=("compact",)))
    plog.roll()
    result = clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    assert [(r.offset, r.value) for r in read_all(plog)] == [(3, b"v2")]
    assert result.records_removed == 3
    plog.close()


@pytest.mark.parametrize("compression", [codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD])
def test_compressed_batches_are_compacted_with_their_codec(
    log_dir: Path, clock: ManualClock, compression: int
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=4096)
    for b in range(12):
        recs = [
            NewRecord(value=b"v%d-%d" % (b, i), key=b"k%d" % ((b * 5 + i) % 9), timestamp=NOW + i)
            for i in range(5)
        ]
        plog.append_as_leader(
            build_batch(recs, now_ms=NOW, compression=compression), leader_epoch=3
        )
    plog.roll()
    before = read_all(plog)
    clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    after = read_all(plog)
    assert after == sorted(latest_per_key(before).values(), key=lambda r: r.offset)
    for header, data in raw_batches(plog):
        assert header.compression == compression
        assert header.partition_leader_epoch == 3
        assert header.last_offset_delta == 4  # kept even if the last records went
        assert header.records_count <= 5
        assert is_crc_valid(data, 0, header)
    plog.close()


def test_last_batch_of_a_producer_is_kept_empty(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    idem = build_batch(
        [NewRecord(value=b"p", key=b"x"), NewRecord(value=b"q", key=b"y")],
        now_ms=NOW, producer_id=7, producer_epoch=1, base_sequence=10,
    )  # fmt: skip
    base = plog.append_as_leader(idem, leader_epoch=0).first_offset
    put(plog, b"x", b"newer")
    put(plog, b"y", b"newer")
    plog.roll()
    clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    header, data = next((h, d) for h, d in raw_batches(plog) if h.producer_id == 7)
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (base, 1, 0)
    assert (header.producer_epoch, header.base_sequence) == (1, 10)
    assert is_crc_valid(data, 0, header)
    assert [r.value for r in read_all(plog)] == [b"newer", b"newer"]
    plog.close()
    reopened = open_log(log_dir, clock)
    assert reopened.log_end_offset == 4
    assert [r.value for r in read_all(reopened)] == [b"newer", b"newer"]
    reopened.close()


def test_small_key_map_cleans_in_several_rounds(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    for i in range(90):
        put(plog, b"key-%d" % (i % 30), b"value-%d" % i)
    plog.roll()
    expected = sorted(latest_per_key(read_all(plog)).values(), key=lambda r: r.offset)
    first_dirty, rounds = 0, 0
    while first_dirty < plog.log_end_offset:
        result = clean(plog, first_dirty=first_dirty, now_ms=NOW,
                       high_watermark=plog.log_end_offset, max_keys=8)  # fmt: skip
        assert result.first_dirty_after > first_dirty
        first_dirty, rounds = result.first_dirty_after, rounds + 1
    assert rounds > 1
    assert read_all(plog) == expected
    plog.close()


def test_second_cleaning_merges_small_segments(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    fill(plog, 150, keys=3)
    plog.roll()
    first = clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    segments_after_first = len(plog.segments)
    assert segments_after_first > 3
    fill(plog, 30, keys=3)
    plog.roll()
    assert dirty_ratio(plog, first.first_dirty_after) > 0.5
    clean(plog, first_dirty=first.first_dirty_after, now_ms=NOW, high_watermark=plog.log_end_offset)
    assert len(plog.segments) < segments_after_first
    assert [r.value for r in read_all(plog)] == [b"value-27", b"value-28", b"value-29"]
    plog.close()


# --- crashes during the swap ----------------------------------------------------------


def _segment_files(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.name[:20].isdigit()}


def test_leftover_cleaned_files_are_discarded(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    fill(plog, 60, keys=5)
    plog.roll()
    before = read_all(plog)
    plog.close()
    (log_dir / f"{0:020d}.log.cleaned").write_bytes(b"half a compacted segment")
    (log_dir / f"{0:020d}.index.cleaned").write_bytes(b"\0" * 64)
    reopened = open_log(log_dir, clock)
    assert not any(n.endswith(".cleaned") for n in _segment_files(log_dir))
    assert read_all(reopened) == before
    reopened.close()


def test_failed_swap_leaves_the_log_intact(
    log_dir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = open_log(log_dir, clock)
    fill(plog, 60, keys=5)
    plog.roll()
    before = read_all(plog)

    def crash(new: object, old: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(plog, "replace_segments", crash)
    with pytest.raises(OSError):
        clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    assert read_all(plog) == before
    plog.close()
    reopened = open_log(log_dir, clock)
    assert read_all(reopened) == before
    reopened.close()


@pytest.mark.parametrize("old_state", ["present", "renamed-deleted"])
def test_interrupted_swap_is_completed_on_reopen(
    tmp_path: Path, log_dir: Path, clock: ManualClock, old_state: str
) -> None:
    plog = open_log(log_dir, clock)
    fill(plog, 90, keys=6)
    plog.roll()
    before = read_all(plog)
    old_bases = [s.base_offset for s in plog.segments]
    plog.close()
    # Compact a copy, then put its first cleaned segment back as a ready ".swap".
    copy_dir = tmp_path / "copy" / log_dir.name
    shutil.copytree(log_dir, copy_dir)
    copy = open_log(copy_dir, clock)
    clean(copy, first_dirty=0, now_ms=NOW, high_watermark=copy.log_end_offset)
    copy.close()
    swap_base = old_bases[0]
    shutil.copy(copy_dir / f"{swap_base:020d}.log", log_dir / f"{swap_base:020d}.log.swap")
    if old_state == "renamed-deleted":
        for ext in (".log", ".index", ".timeindex"):
            p = log_dir / f"{swap_base:020d}{ext}"
            p.rename(p.with_name(p.name + ".deleted"))
    reopened = open_log(log_dir, clock)
    after = read_all(reopened)
    assert not any(n.endswith((".swap", ".deleted")) for n in _segment_files(log_dir))
    originals = {(r.offset, r.key, r.value) for r in before}
    assert all((r.offset, r.key, r.value) in originals for r in after)  # offsets unchanged
    assert latest_per_key(after) == latest_per_key(before)  # no latest value lost
    assert [r.offset for r in after] == sorted({r.offset for r in after})
    assert reopened.log_end_offset == 90
    assert len(after) < len(before)
    reopened.close()


def test_batches_on_disk_stay_well_formed(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    fill(plog, 40, keys=4)
    plog.roll()
    clean(plog, first_dirty=0, now_ms=NOW, high_watermark=plog.log_end_offset)
    for seg in plog.segments:
        data = seg.log_path.read_bytes()
        walked = list(iter_batches(data))
        assert sum(h.size for _, h in walked) == len(data)
        assert all(is_crc_valid(data, pos, h) for pos, h in walked)
    plog.close()


# --- one batch at a time ------------------------------------------------------------


def _batch(records: list[NewRecord], *, base_offset: int = 100) -> tuple[bytes, BatchHeader]:
    data = bytes(build_batch(records, now_ms=NOW, base_offset=base_offset))
    return data, parse_header(data)


def _filter(
    data: bytes,
    header: BatchHeader,
    *,
    now: int = NOW,
    mapped_end: int = 10**9,
    is_latest: Callable[[int, bytes], bool] = lambda offset, key: True,
) -> FilteredBatch:
    return filter_batch(
        data, header, is_latest=is_latest, now_ms=now, delete_retention_ms=DAY,
        retain_empty=False, mapped_end=mapped_end,
    )  # fmt: skip


def test_filter_copies_an_untouched_batch_byte_for_byte() -> None:
    data, header = _batch([NewRecord(value=b"v", key=b"k%d" % i) for i in range(3)])
    result = _filter(data, header)
    assert result.data == data and result.removed == 0


def test_filter_drops_superseded_and_keyless_records() -> None:
    data, header = _batch(
        [
            NewRecord(value=b"a", key=b"x"),
            NewRecord(value=b"b", key=None),
            NewRecord(value=b"c", key=b"y"),
        ]
    )
    result = _filter(data, header, is_latest=lambda offset, key: key != b"x")
    assert result.removed == 2
    assert result.data is not None
    out = parse_header(result.data)
    assert (out.base_offset, out.last_offset_delta, out.records_count) == (100, 2, 1)
    assert [(r.offset, r.value) for r in decode_records(result.data)] == [(102, b"c")]
    everything_gone = _filter(data, header, is_latest=lambda offset, key: False)
    assert everything_gone.data is None and everything_gone.removed == 3


def test_filter_expires_tombstones_only_inside_the_mapped_range() -> None:
    data, header = _batch([NewRecord(value=None, key=b"x"), NewRecord(value=None, key=b"y")])
    first = _filter(data, header)  # first copy: the horizon is set, tombstones stay
    assert first.data is not None
    marked = parse_header(first.data)
    assert marked.has_delete_horizon and marked.base_timestamp == NOW + DAY
    later = _filter(first.data, marked, now=NOW + DAY, mapped_end=101)
    assert later.data is not None and later.removed == 1
    assert [r.key for r in decode_records(later.data)] == [b"y"]  # offset 101 not mapped


def test_filter_keeps_log_append_time() -> None:
    buf = build_batch(
        [NewRecord(value=b"a", key=b"x"), NewRecord(value=b"b", key=b"y")], now_ms=NOW
    )
    set_log_append_time(buf, 0, parse_header(buf), NOW + 77)
    data = bytes(buf)
    result = _filter(data, parse_header(data), is_latest=lambda offset, key: key == b"y")
    assert result.data is not None
    out = parse_header(result.data)
    assert out.timestamp_type == 1 and out.max_timestamp == NOW + 77 == result.max_timestamp
    assert [r.timestamp for r in decode_records(result.data)] == [NOW + 77]
