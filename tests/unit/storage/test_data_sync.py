"""``DataSyncer``: fdatasync on the C extension's GIL-free thread, answered on the
event loop; the storage thread pool without the extension."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from core.storage import data_sync, native
from core.storage.data_sync import DataSyncer

needs_c = pytest.mark.skipif(not native.AVAILABLE, reason="C extension not built")


def _threads() -> int:
    return len(os.listdir(f"/proc/{os.getpid()}/task"))


@needs_c
async def test_many_files_synced_at_once_each_answered(tmp_path: Path) -> None:
    syncer = DataSyncer()
    fds = []
    try:
        for i in range(20):
            fd = os.open(tmp_path / f"f{i}", os.O_WRONLY | os.O_CREAT)
            os.write(fd, b"x" * 4096)
            fds.append(fd)
        await asyncio.gather(*(syncer.fdatasync(fd) for fd in fds for _ in range(3)))
        assert syncer._waiting == {}
    finally:
        syncer.close()
        for fd in fds:
            os.close(fd)


@needs_c
async def test_an_error_of_the_sync_is_the_callers_oserror() -> None:
    syncer = DataSyncer()
    r, w = os.pipe()
    try:
        with pytest.raises(OSError) as caught:
            await syncer.fdatasync(r)  # a pipe cannot be synced: EINVAL from the thread
        assert caught.value.errno == errno.EINVAL
        with pytest.raises(OSError):
            await syncer.fdatasync(10_000)  # not open: refused before it is sent
    finally:
        syncer.close()
        os.close(r)
        os.close(w)


@needs_c
async def test_the_fd_may_be_closed_while_its_sync_is_queued(tmp_path: Path) -> None:
    syncer = DataSyncer()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"data")
    try:
        pending = asyncio.ensure_future(syncer.fdatasync(fd))
        await asyncio.sleep(0)
        os.close(fd)  # the thread syncs its own duplicate
        await pending
    finally:
        syncer.close()


@needs_c
async def test_close_ends_the_thread_and_a_later_sync_starts_another(tmp_path: Path) -> None:
    syncer = DataSyncer()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        await syncer.fdatasync(fd)
        running = _threads()
        syncer.close()
        for _ in range(100):  # the thread reads end of file and ends
            if _threads() < running:
                break
            await asyncio.sleep(0.01)
        assert _threads() < running
        await syncer.fdatasync(fd)  # a new thread
        assert syncer._loop is not None
    finally:
        syncer.close()
        os.close(fd)


async def test_without_the_extension_the_thread_pool_syncs(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_sync.native, "AVAILABLE", False)
    syncer = DataSyncer()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        await syncer.fdatasync(fd)
        assert syncer._loop is None  # no thread was started
        r, w = os.pipe()
        with pytest.raises(OSError):
            await syncer.fdatasync(r)
        os.close(r)
        os.close(w)
    finally:
        syncer.close()
        os.close(fd)
