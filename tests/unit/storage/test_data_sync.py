"""DataSyncer: fdatasync on native threads reported through a pipe, its errors, its bound,
and the thread-pool fallback."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from core.storage import data_sync, native
from core.storage.data_sync import DataSyncer


@pytest.mark.parametrize("use_native", [True, False])
async def test_many_concurrent_syncs_all_complete(tmp_path: Path, use_native: bool) -> None:
    if use_native and not native.AVAILABLE:
        pytest.skip("C extension not built")
    syncer = DataSyncer(native=use_native)
    fds = []
    try:
        for i in range(40):
            fd = os.open(tmp_path / f"f{i}", os.O_CREAT | os.O_WRONLY)
            os.write(fd, b"x" * 4096)
            fds.append(fd)
        await asyncio.gather(*(syncer.fdatasync(fd) for fd in fds))
        assert syncer.in_flight == 0
    finally:
        syncer.close()
        for fd in fds:
            os.close(fd)


@pytest.mark.parametrize("use_native", [True, False])
async def test_an_fdatasync_error_is_raised_as_oserror(use_native: bool) -> None:
    if use_native and not native.AVAILABLE:
        pytest.skip("C extension not built")
    syncer = DataSyncer(native=use_native)
    r, w = os.pipe()  # fdatasync of a pipe: EINVAL
    try:
        with pytest.raises(OSError) as info:
            await syncer.fdatasync(w)
        assert info.value.errno == errno.EINVAL
    finally:
        syncer.close()
        os.close(r)
        os.close(w)


async def test_at_most_max_in_flight_native_jobs(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    if not native.AVAILABLE:
        pytest.skip("C extension not built")
    monkeypatch.setattr(data_sync, "MAX_IN_FLIGHT", 3)
    seen = []
    real = data_sync._native.fdatasync_async

    class Spy:
        @staticmethod
        def fdatasync_async(fd: int, notify: int, job: int) -> None:
            seen.append(syncer.in_flight)
            real(fd, notify, job)

    monkeypatch.setattr(data_sync, "_native", Spy)
    syncer = DataSyncer()
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_WRONLY)
    try:
        await asyncio.gather(*(syncer.fdatasync(fd) for _ in range(20)))
    finally:
        syncer.close()
        os.close(fd)
    assert len(seen) == 20 and max(seen) <= 3
