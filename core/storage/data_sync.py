"""fdatasync for the event loop, on a thread that never takes the GIL.

``flush.messages`` makes every acknowledged append wait for an fdatasync of its segment
(``ReplicaManager``'s group commit). Through the storage thread pool
(``core.storage.blocking``) each sync is a Python work item: the worker takes the GIL to
start it, again to hand the result back, and the event loop's thread, busy with other
requests, is made to give the GIL up each time. Measured at 8 producing connections,
all threads on one core: ~20 context switches per sync and ~86 us more CPU per request
on the event loop's thread than with the sync made inline (docs/benchmarks.md).

Here the C extension runs one thread per ``DataSyncer`` that reads requests from a pipe
(a duplicate of the fd and a token), syncs, closes the duplicate and writes the token
and errno to a second pipe the event loop watches (``add_reader``): no Python, no GIL
in the worker. The duplicate keeps the file open until its sync is done, whatever the
caller does meanwhile (cancelled, segment closed). Without the C extension, or when
the thread cannot start, the storage pool does the sync. Event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
from itertools import count

from core.storage import native
from core.storage.blocking import run_blocking

_REQUEST = struct.Struct("=ii")  # fd, token
_RESULT = struct.Struct("=ii")  # token, errno (0: synced)


class DataSyncer:
    """fdatasync off the event loop (module docstring). ``close()`` ends the thread."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requests = -1  # write end of the request pipe
        self._results = -1  # read end of the result pipe
        self._tokens = count()
        self._waiting: dict[int, asyncio.Future[int]] = {}
        self._broken = not native.AVAILABLE

    async def fdatasync(self, fd: int) -> None:
        """Make ``fd``'s data durable; OSError as ``os.fdatasync`` raises it."""
        if self._broken or not self._started():
            await run_blocking(os.fdatasync, fd)
            return
        token = next(self._tokens) & 0x7FFFFFFF
        loop = self._loop
        assert loop is not None
        done = loop.create_future()
        dup = os.dup(fd)
        self._waiting[token] = done
        try:
            os.write(self._requests, _REQUEST.pack(dup, token))
        except OSError:
            os.close(dup)
            del self._waiting[token]
            raise
        err = await done
        if err:
            raise OSError(err, os.strerror(err))

    def _started(self) -> bool:
        if self._loop is not None:
            return True
        request_r, request_w = os.pipe()
        result_r, result_w = os.pipe()
        try:
            native.start_sync_thread(request_r, result_w)
        except (OSError, AttributeError):
            for fd in (request_r, request_w, result_r, result_w):
                os.close(fd)
            self._broken = True
            return False
        os.set_blocking(result_r, False)
        self._loop = asyncio.get_running_loop()
        self._requests, self._results = request_w, result_r
        self._loop.add_reader(result_r, self._on_results)
        return True

    def _on_results(self) -> None:
        # the thread writes whole 8-byte results (a pipe write of at most PIPE_BUF
        # bytes is atomic) and a read of a multiple of 8 takes whole ones
        try:
            data = os.read(self._results, _RESULT.size * 256)
        except BlockingIOError:
            return
        for token, err in _RESULT.iter_unpack(data):
            waiter = self._waiting.pop(token, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(err)

    def close(self) -> None:
        """End the thread (after the sync it is doing); waiting callers get OSError."""
        if self._loop is None:
            return
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._results)
        os.close(self._requests)  # the thread sees end of file and ends
        os.close(self._results)
        self._loop = None
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(OSError("the data sync thread was stopped"))
        self._waiting.clear()
