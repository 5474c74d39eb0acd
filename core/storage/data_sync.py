"""fdatasync off the event loop without taking the GIL: the group commit of ``flush.messages``.

A storage-pool thread (``run_blocking``) costs the loop nothing while it syncs, but it
must take the GIL to start the call and again to hand its result back; while the loop
thread is busy serving requests each of those waits up to the interpreter's switch
interval (5 ms). Measured in-process with 8 concurrent 1000-record produces: a flush of
~0.85 ms (fsync 0.41 + two index msyncs 0.2 each) came back after 2-4 ms, ~1.6 requests
shared one, and ``flush.messages=1`` ran at 0.45 x acks=1.

``DataSyncer.fdatasync(fd)`` starts each fdatasync on a native thread of the C extension
(``core.storage._native.fdatasync_async``) that never touches the GIL; it reports
``(job id, errno)`` on a pipe the event loop watches, which resolves the waiting future.
At most ``MAX_IN_FLIGHT`` run at once (one thread each). Without the extension it falls
back to ``run_blocking(os.fdatasync, fd)``. The caller keeps ``fd`` open (pinned) until
the await returns. Event-loop only.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import os
import struct

from core.storage.blocking import run_blocking

try:
    from core.storage import _native
except ImportError:  # built without a C compiler
    _native = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 16
_MESSAGE = struct.Struct("=II")  # job id, errno (0: done), as the C side writes them


class DataSyncer:
    """fdatasync of pinned descriptors for one event loop; ``close`` when done."""

    def __init__(self, *, native: bool = True) -> None:
        self._native = native and _native is not None and hasattr(os, "fdatasync")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._read_fd = self._write_fd = -1
        self._waiting: dict[int, asyncio.Future[int]] = {}
        self._ids = itertools.count(1)
        self._slots: asyncio.Semaphore | None = None
        self._pending = b""
        self._closed = False

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    async def fdatasync(self, fd: int) -> None:
        """fdatasync(fd); OSError as os.fdatasync raises it."""
        if not self._native or self._closed:
            await run_blocking(os.fdatasync, fd)
            return
        loop = self._attach()
        assert self._slots is not None
        async with self._slots:
            job = next(self._ids) & 0xFFFFFFFF
            done: asyncio.Future[int] = loop.create_future()
            self._waiting[job] = done
            try:
                _native.fdatasync_async(fd, self._write_fd, job)
            except OSError:  # no thread could be started: the pool does it
                del self._waiting[job]
                await run_blocking(os.fdatasync, fd)
                return
            err = await asyncio.shield(done)  # a cancelled waiter leaves the job to finish
        if err:
            raise OSError(err, os.strerror(err))

    def _attach(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._read_fd, self._write_fd = os.pipe2(os.O_CLOEXEC)
            os.set_blocking(self._read_fd, False)
            loop.add_reader(self._read_fd, self._on_readable)
            self._loop = loop
            self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        elif self._loop is not loop:
            raise RuntimeError("DataSyncer is bound to another event loop")
        return loop

    def _on_readable(self) -> None:
        try:
            data = os.read(self._read_fd, _MESSAGE.size * 256)
        except BlockingIOError:
            return
        data = self._pending + data
        whole = len(data) - len(data) % _MESSAGE.size
        self._pending = data[whole:]
        for job, err in _MESSAGE.iter_unpack(data[:whole]):
            done = self._waiting.pop(job, None)
            if done is not None and not done.done():
                done.set_result(err)

    def close(self) -> None:
        """Stop watching the pipe. Its write end stays open while a job is in flight (a
        native thread still writes to it: closing it could hand its number to another
        file), so a close with jobs running leaves that descriptor to the process exit."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None:
            self._loop.remove_reader(self._read_fd)
            os.close(self._read_fd)
            if self._waiting:
                log.warning("%d fdatasync(s) still running at close", len(self._waiting))
                for done in self._waiting.values():
                    if not done.done():
                        done.set_result(errno.ECANCELED)  # not known to be on disk
            else:
                os.close(self._write_fd)
