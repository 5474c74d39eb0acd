"""A segment's file region (what a Kafka Fetch sends with sendfile(2)) covers exactly
the bytes its copying read returns, for every offset and limit; and it still reads after
the segment file was unlinked (retention) while the region was pinned."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage.batch import parse_header
from core.storage.records import NewRecord, build_batch
from core.storage.segment import LogSegment

NOW = 1_700_000_000_000


def batch(base: int, count: int, value_size: int) -> bytearray:
    return build_batch([NewRecord(b"v" * value_size, key=b"k%d" % i) for i in range(count)],
                       now_ms=NOW, base_offset=base)


@pytest.fixture(params=[(20, 0), (30_000, 0), (30_000, 5)],
                ids=["small-batches", "large-batches", "large-batches-with-offset-gaps"])
def segment(tmp_path: Path, request: pytest.FixtureRequest) -> LogSegment:
    """40 batches; with gaps, offsets jump between batches as after compaction (the
    region's end is found through the offset index, which must not skip past them)."""
    value_size, gap = request.param
    seg = LogSegment(tmp_path, 0, index_interval_bytes=4096, max_index_bytes=1 << 16,
                     clock=ManualClock(NOW))
    base = 0
    for i in range(40):
        b = batch(base, 1 + i % 4, value_size)
        h = parse_header(b)
        seg.append(b, first_offset=h.base_offset, last_offset=h.last_offset,
                   max_timestamp=h.max_timestamp, max_timestamp_offset=h.last_offset)
        base = h.last_offset + 1 + gap * (i % 3)
    return seg


@pytest.mark.parametrize("max_bytes", [1, 100, 5_000, 70_000, 200_000, 1 << 20])
@pytest.mark.parametrize("max_offset", [None, 7, 50, 120])
def test_a_region_holds_what_a_read_returns(segment: LogSegment, max_bytes: int,
                                            max_offset: int | None) -> None:
    for offset in (0, 1, 2, 13, 40, 77, 99, 130):
        sliced = segment.read_slice(offset, max_bytes, max_offset=max_offset)
        region = segment.read_region(offset, max_bytes, max_offset=max_offset)
        if sliced is None:
            assert region is None
            continue
        assert region is not None
        assert region.read() == sliced.data, (offset, max_bytes, max_offset)
        if sliced.data:
            assert (region.position, region.first_offset, region.high_offset) == (
                sliced.position, sliced.first_offset, sliced.next_offset)


def test_a_pinned_region_reads_after_its_file_is_unlinked(segment: LogSegment) -> None:
    region = segment.read_region(0, 1 << 20)
    assert region is not None and region.length > 0
    expected = region.read()
    fd = region.acquire()
    try:
        os.unlink(segment.log_path)
        assert os.pread(fd, region.length, region.position) == expected
    finally:
        region.release()
