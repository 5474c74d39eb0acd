"""Index files get real blocks before the mapping writes a page (core/storage/index.py).

The preallocated index is sparse; writing a page of its mapping that has no block on a
full disk is answered with SIGBUS. These tests check that blocks are reserved in
``RESERVE_CHUNK`` steps ahead of the write position (never the whole file), that a
refused reservation skips the entry instead of touching the page, and, on a real full
tmpfs (root only), that the process survives where it used to die.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import index as index_mod
from core.storage.config import LogConfig
from core.storage.index import RESERVE_CHUNK, OffsetIndex, TimeIndex
from core.storage.log import PartitionLog
from core.storage.records import build_batch_from_tuples

ROOT = Path(__file__).resolve().parents[2]
MAX = 10 * 1024 * 1024


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def enospc(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """posix_fallocate refuses with ENOSPC; the calls are recorded."""
    calls: list[tuple[int, int]] = []

    def refuse(fd: int, offset: int, length: int) -> None:
        calls.append((offset, length))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(index_mod.os, "posix_fallocate", refuse)
    return calls


def test_blocks_are_reserved_in_chunks_ahead_of_the_writes(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, MAX)
    assert idx.file_length == MAX and idx.reserved_bytes == 0
    assert allocated(idx.path) == 0  # the preallocation itself is sparse
    idx.append(1, 100)
    assert idx.reserved_bytes == RESERVE_CHUNK
    assert RESERVE_CHUNK <= allocated(idx.path) < 4 * RESERVE_CHUNK
    per_chunk = RESERVE_CHUNK // 8
    for i in range(2, per_chunk + 2):  # crosses into the second chunk
        idx.append(i, i * 100)
    assert idx.reserved_bytes == 2 * RESERVE_CHUNK
    assert allocated(idx.path) < MAX // 100  # far from the whole segment.index.bytes
    assert os.stat(idx.path).st_size == MAX  # reserving never changes the length
    assert idx.lookup(per_chunk) == (per_chunk, per_chunk * 100)
    idx.close()


def test_a_refused_reservation_skips_the_entry(tmp_path: Path, enospc: list) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, MAX)
    idx.append(5, 100)
    idx.append(9, 200)
    assert idx.entries == 0 and enospc  # nothing written to a page without a block
    assert idx.lookup(9) == (0, 0)  # lookups fall back to the start: only a longer scan
    tidx = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, MAX)
    tidx.maybe_append(1000, 5)
    assert tidx.entries == 0
    idx.close()
    tidx.close()


def test_reservation_resumes_when_space_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.posix_fallocate
    full = [True]

    def maybe(fd: int, offset: int, length: int) -> None:
        if full[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, offset, length)

    monkeypatch.setattr(index_mod.os, "posix_fallocate", maybe)
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, MAX)
    idx.append(1, 100)
    assert idx.entries == 0
    full[0] = False
    idx.append(2, 200)
    assert idx.entries == 1 and idx.entry(0) == (2, 200)
    idx.close()


def test_final_time_entry_of_a_trimmed_file(tmp_path: Path, enospc: list) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    tidx = TimeIndex(path, 0, MAX)
    tidx.trim_to_valid_size()
    assert tidx.file_length == 0
    tidx.maybe_append(1000, 3, skip_full_check=True)  # grows by one entry, then refused
    assert tidx.entries == 0 and tidx.file_length == 0 and path.stat().st_size == 0
    tidx.close()


def test_file_systems_without_fallocate_write_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(index_mod.os, "posix_fallocate", unsupported)
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, MAX)
    idx.append(1, 100)
    idx.append(2, 200)
    assert idx.entries == 2
    idx.close()


def test_a_reopened_untrimmed_file_is_reserved_again(tmp_path: Path) -> None:
    """A crash leaves the preallocated file untrimmed (sparse past its entries): after
    the rebuild the writes start from 0 again, and are reserved again."""
    path = tmp_path / "00000000000000000000.index"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, MAX)  # what a crash leaves: the whole preallocation, sparse
    os.close(fd)
    idx = OffsetIndex(path, 0, MAX)
    assert idx.entries == MAX // 8 and idx.reserved_bytes == 0
    idx.reset()
    idx.append(1, 100)
    assert idx.entries == 1 and idx.reserved_bytes == RESERVE_CHUNK
    idx.close()


def test_a_log_on_a_refusing_disk_still_appends_and_reads(
    tmp_path: Path, enospc: list
) -> None:
    """The .log write succeeded (there was room for it): the append stands, only its
    index entries are skipped, and every record is still found."""
    clock = ManualClock(1_700_000_000_000)
    config = LogConfig(index_interval_bytes=0)
    plog = PartitionLog.open(tmp_path / "t-0", config, clock=clock)
    for i in range(50):
        batch = build_batch_from_tuples([(None, f"v{i}".encode(), [], clock.now_ms())])
        plog.append_as_leader(batch, leader_epoch=0)
    assert plog.active_segment.offset_index.entries == 0
    assert plog.log_end_offset == 50
    for offset in (0, 17, 49):
        assert plog.read(offset, 1).first_offset == offset
    plog.close()


# --- a real full disk ------------------------------------------------------------------

@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_no_sigbus_on_a_full_tmpfs(tiny_tmpfs: Path) -> None:
    """Fill a real 1 MiB tmpfs, then write index entries into fresh pages. Before the
    reservation this killed the process with SIGBUS; now entries are skipped until
    space is freed, then written again. Runs in a child: a SIGBUS must not take pytest."""
    code = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from core.storage.index import OffsetIndex, TimeIndex
        d = Path({str(tiny_tmpfs)!r})
        idx = OffsetIndex(d / "00000000000000000000.index", 0, 10 << 20)
        tidx = TimeIndex(d / "00000000000000000000.timeindex", 0, 10 << 20)
        fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError:
            pass
        os.close(fd)
        for i in range(3000):
            idx.append(i + 1, i * 100)
            tidx.maybe_append(1000 + i, i + 1)
        print("full", idx.entries, tidx.entries)
        os.unlink(d / "filler")
        for i in range(3000, 6000):
            idx.append(i + 1, i * 100)
            tidx.maybe_append(1000 + i, i + 1)
        print("freed", idx.entries, tidx.entries)
        idx.close()
        tidx.close()
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != -signal.SIGBUS, "the index write was answered with SIGBUS"
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["full"] == "0 0"
    assert lines["freed"] == "3000 3000"
