"""The bounded cache of segment descriptors: eviction, reopening on demand, pinning
under concurrent threads, appends after eviction, close/delete while cached."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import fd_cache
from core.storage.config import LogConfig
from core.storage.fd_cache import DescriptorCache, SegmentFile
from core.storage.log import PartitionLog
from core.storage.records import build_batch_from_tuples


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _files(tmp_path: Path, cache: DescriptorCache, n: int) -> list[SegmentFile]:
    return [SegmentFile(tmp_path / f"{i}.log", cache, create=True) for i in range(n)]


def test_capacity_bounds_open_descriptors_and_evicts_least_recently_used(tmp_path: Path) -> None:
    cache = DescriptorCache(4)
    before = _open_fds()
    files = _files(tmp_path, cache, 10)
    assert len(cache) == 4 and _open_fds() == before + 4
    assert [f.is_open for f in files] == [False] * 6 + [True] * 4
    files[6].acquire()  # 6 is now the most recently used
    files[6].release()
    files[0].acquire()  # reopened on demand: evicts 7, the least recently used
    files[0].release()
    assert files[0].is_open and files[6].is_open and not files[7].is_open
    assert _open_fds() == before + 4
    for f in files:
        f.close()
    assert len(cache) == 0 and _open_fds() == before


def test_reopened_descriptor_reads_and_appends_the_same_file(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    a, b = _files(tmp_path, cache, 2)
    with a.pin() as fd:
        os.write(fd, b"hello ")
    assert not a.is_open or not b.is_open
    with b.pin() as fd:
        os.write(fd, b"other")
    with a.pin() as fd:  # reopened O_APPEND: lands at the end
        os.write(fd, b"world")
        assert os.pread(fd, 100, 0) == b"hello world"
    assert (tmp_path / "1.log").read_bytes() == b"other"


def test_pinned_descriptor_is_never_closed_under_its_user(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    a, b = _files(tmp_path, cache, 2)
    fd = a.acquire()
    try:
        with b.pin():  # over capacity: a is pinned, so it stays open
            assert a.is_open and b.is_open
        a.close()  # closing a pinned file defers the close to the last release
        assert a.is_open
        os.write(fd, b"still mine")
    finally:
        a.release()
    assert not a.is_open and len(cache) <= 1
    assert (tmp_path / "0.log").read_bytes() == b"still mine"
    with pytest.raises(OSError):
        a.acquire()


def test_threads_writing_through_a_tiny_cache_never_write_into_another_file(
    tmp_path: Path,
) -> None:
    """8 threads append tagged records to 24 files through a cache of 3: every open
    evicts, so a descriptor closed under a writer (and its number reused) would put a
    record in the wrong file or fail the write."""
    cache = DescriptorCache(3)
    files = _files(tmp_path, cache, 24)
    errors: list[BaseException] = []
    rounds = 150

    def writer(t: int) -> None:
        try:
            for i in range(rounds):
                f = files[(t * 7 + i) % len(files)]
                fd = f.acquire()
                try:
                    tag = f"{f.path.name}:{t}:{i};".encode()
                    os.write(fd, tag)
                    os.pread(fd, 16, 0)
                finally:
                    f.release()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors, errors
    total = 0
    for f in files:
        records = [r for r in f.path.read_bytes().decode().split(";") if r]
        assert all(r.startswith(f.path.name + ":") for r in records), f.path.name
        total += len(records)
    assert total == 8 * rounds
    assert len(cache) <= 3
    for f in files:
        f.close()


def test_capacity_from_property() -> None:
    assert fd_cache.capacity_from_property(None, 20000) == 10000
    assert fd_cache.capacity_from_property("0", 256) == 128
    assert fd_cache.capacity_from_property("500", 20000) == 500
    assert fd_cache.capacity_from_property("5000", 1000) == 750  # a quarter kept
    assert fd_cache.capacity_from_property("1", 20000) == fd_cache.MIN_CAPACITY


# --- through the log -----------------------------------------------------------------


def _all_data(lg: PartitionLog) -> bytes:
    out, offset = b"", lg.log_start_offset
    for _ in range(1000):  # a read returns one segment's batches at most
        if offset >= lg.log_end_offset:
            break
        got = lg.read(offset, 1 << 20)
        out, offset = out + got.data, got.high_offset
    return out


def _batch(value: bytes, ts: int = 1_000) -> bytearray:
    return build_batch_from_tuples([(None, value, [], ts)])


@pytest.fixture
def tiny_cache():
    cache = fd_cache.descriptor_cache()
    old = cache.capacity
    cache.set_capacity(2)
    yield cache
    cache.set_capacity(old)


def test_logs_through_a_tiny_cache_keep_their_data(tmp_path: Path, tiny_cache) -> None:
    """Six logs, a cache of two: each append to an evicted active segment reopens it and
    lands after the previous batch; reads, truncation and reopening all see it."""
    clock = ManualClock(1_000)
    config = LogConfig.from_overrides({"segment.bytes": "200"})
    logs = [PartitionLog.open(tmp_path / f"t-{i}", config, clock=clock) for i in range(6)]
    for round_ in range(5):
        for i, lg in enumerate(logs):
            lg.append_as_leader(_batch(f"{i}-{round_}".encode()), leader_epoch=0)
    assert len(tiny_cache) <= 2
    for i, lg in enumerate(logs):
        assert len(lg.segments) > 1  # rolled: several segments per log
        data = _all_data(lg)
        assert all(f"{i}-{r}".encode() in data for r in range(5)), (i, data)
        assert lg.log_end_offset == 5
    logs[0].truncate_to(3)
    assert logs[0].log_end_offset == 3
    logs[0].append_as_leader(_batch(b"after-truncate"), leader_epoch=0)
    for lg in logs:
        lg.flush()
        lg.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config, clock=clock, clean_shutdown=True,
                                 recovery_point=4)
    data = _all_data(reopened)
    assert b"0-2" in data and b"0-3" not in data and b"after-truncate" in data
    assert reopened.log_end_offset == 4
    reopened.close()


def test_deleting_a_segment_while_its_descriptor_is_cached(tmp_path: Path, tiny_cache) -> None:
    clock = ManualClock(1_000)
    config = LogConfig.from_overrides({"segment.bytes": "200"})
    lg = PartitionLog.open(tmp_path / "t-0", config, clock=clock)
    for i in range(4):
        lg.append_as_leader(_batch(f"v{i}".encode()), leader_epoch=0)
    first = lg.segments[0]
    first._pread(1, 0)  # cached now
    before = _open_fds()
    lg.delete_segments([first], reason="test")
    assert not first.log_path.exists() and _open_fds() <= before
    assert lg.read(lg.log_start_offset, 1 << 20).data
    lg.close()
