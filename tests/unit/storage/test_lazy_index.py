"""Indexes keep no descriptor and map their files only when used: loading a log of many
segments after a clean shutdown maps the active segment's indexes at most, a rolled
segment's indexes are unmapped, and a lookup in an old segment maps them again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import mapped_file
from core.storage.config import LogConfig
from core.storage.index import OffsetIndex
from core.storage.log import PartitionLog
from core.storage.records import build_batch_from_tuples

pytestmark = pytest.mark.skipif(mapped_file.HOLDS_DESCRIPTOR,
                                reason="no libc mmap: the fallback dups descriptors")

CONFIG = LogConfig.from_overrides({"segment.bytes": "400", "index.interval.bytes": "1"})


def _index_mappings(directory: Path) -> int:
    """Mappings of this process onto index files of ``directory``."""
    maps = Path("/proc/self/maps").read_text().splitlines()
    return sum(1 for line in maps if str(directory) in line
               and line.endswith((".index", ".timeindex")))


def _fds_into(directory: Path) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith(str(directory))
        except OSError:
            pass
    return n


def _fill(directory: Path, clock: ManualClock, batches: int) -> PartitionLog:
    lg = PartitionLog.open(directory, CONFIG, clock=clock)
    for i in range(batches):
        lg.append_as_leader(build_batch_from_tuples([(None, b"v%03d" % i, [], 1_000 + i)]),
                            leader_epoch=0)
    return lg


def test_an_index_holds_no_descriptor_and_maps_on_first_use(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 4096)
    assert idx.created and not idx.is_mapped
    assert _fds_into(tmp_path) == 0
    idx.append(5, 100)
    assert idx.is_mapped and _fds_into(tmp_path) == 0
    idx.trim_to_valid_size()  # trimming unmaps; the next use maps the new length
    assert not idx.is_mapped
    assert idx.lookup(7) == (5, 100) and idx.is_mapped
    idx.close()
    reopened = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 4096)
    assert not reopened.created and reopened.entries == 1
    reopened.sanity_check(log_size=200)  # reads, does not map
    assert not reopened.is_mapped and reopened.last_entry() == (5, 100)
    assert not reopened.is_mapped
    reopened.close()


def test_loading_many_segments_maps_only_the_active_one(tmp_path: Path) -> None:
    clock = ManualClock(1_000)
    directory = tmp_path / "t-0"
    lg = _fill(directory, clock, 60)
    assert len(lg.segments) > 5
    assert _index_mappings(directory) <= 2  # rolled segments were unmapped
    expected = [lg.read(o, 1 << 20).data for o in (0, 7, 30)]
    lg.flush()
    lg.close()
    assert _index_mappings(directory) == 0

    lg = PartitionLog.open(directory, CONFIG, clock=clock, clean_shutdown=True,
                           recovery_point=60)
    assert _index_mappings(directory) <= 2
    assert all(not s.offset_index.is_mapped for s in lg.segments[:-1])
    assert _fds_into(directory) <= 1  # at most the active .log, from the cache
    # lookups in old segments map their indexes on first use, and find the same data
    assert [lg.read(o, 1 << 20).data for o in (0, 7, 30)] == expected
    assert lg.segment_for(7).offset_index.is_mapped
    assert lg.offset_for_timestamp(1_030) == (30, 1_030)
    lg.close()


def test_a_corrupt_index_of_an_old_segment_is_still_rebuilt(tmp_path: Path) -> None:
    clock = ManualClock(1_000)
    directory = tmp_path / "t-0"
    lg = _fill(directory, clock, 40)
    second = lg.segments[1]
    first_index = lg.segments[0].offset_index.path
    expected = lg.read(second.base_offset, 1 << 20).data
    lg.flush()
    lg.close()
    first_index.write_bytes(b"\x00" * 16)  # two zero entries: not increasing
    lg = PartitionLog.open(directory, CONFIG, clock=clock, clean_shutdown=True,
                           recovery_point=40)
    assert lg.segments[0].offset_index.entries > 2  # rebuilt from the .log
    assert lg.read(second.base_offset, 1 << 20).data == expected
    assert lg.read(1, 1 << 20).data
    lg.close()
