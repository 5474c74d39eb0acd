"""One Kafka connection's byte stream: request bytes received straight into the buffer
they are read from, answers written with flow control.

A ``KafkaConnection`` is the transport's protocol (``asyncio.BufferedProtocol``, which
uvloop and asyncio's TLS layer both fill in place): the socket's bytes land in a small
stage (64 KiB) while the server reads size prefixes and small requests, and straight in
the request's own buffer while it reads a large body (``read_into``), so a produce
request's batches are not copied from buffer to buffer on their way in. At most the
stage is held unread: once it is full and nothing is being read, the connection stops
reading the socket (a client pipelining requests, or one that never reads its answers,
holds only its socket's and the stage's memory).

Waits for bytes are bounded by ``idle_s`` since the last byte arrived or the last read
began: one timer per connection, re-armed only when it fires, not per read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

STAGE_BYTES = 64 * 1024


class KafkaConnection(asyncio.BufferedProtocol):
    """The protocol of one accepted connection; ``on_connect(conn)`` is started as a
    task once the transport is made (after the TLS handshake on SSL listeners)."""

    def __init__(self, on_connect: Callable[[KafkaConnection], Any], idle_s: float) -> None:
        self._on_connect = on_connect
        self._idle_s = idle_s
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self._stage = bytearray(STAGE_BYTES)
        self._view = memoryview(self._stage)
        self._start = self._end = 0  # unread bytes: stage[start:end]
        self._target: memoryview | None = None  # a read_into buffer being filled
        self._filled = 0
        self._want = 0  # stage bytes the waiter needs (read_exact)
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._ended: BaseException | None = None  # why no more bytes will come
        self._activity = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._closed: asyncio.Future[None] = self._loop.create_future()
        self.task: asyncio.Task[Any] | None = None

    # --- the transport's side ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._idle_timer = self._loop.call_at(self._activity + self._idle_s, self._idle_check)
        self.task = self._loop.create_task(self._on_connect(self))

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._target is not None:
            return self._target[self._filled:]
        if self._end == len(self._stage):
            n = self._end - self._start
            if self._start:  # move the unread bytes to the front
                self._stage[:n] = self._view[self._start:self._end]
            else:  # full, and the transport asks before its pause took effect: never
                stage = bytearray(2 * len(self._stage))  # answer an empty buffer
                stage[:n] = self._view
                self._stage, self._view = stage, memoryview(stage)
            self._start, self._end = 0, n
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self._activity = self._loop.time()
        if self._target is not None:
            self._filled += nbytes
            if self._filled == len(self._target):
                self._target = None
                self._wake()
            return
        self._end += nbytes
        if self._waiter is not None and self._end - self._start >= self._want:
            self._wake()
        elif self._end == len(self._stage) and self._start == 0:
            self._pause()  # a full stage nobody is reading

    def eof_received(self) -> bool:
        self._end_stream(asyncio.IncompleteReadError(b"", None))
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_stream(ConnectionResetError("connection lost") if exc is None else exc)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionResetError("connection lost"))
        self._drain_waiters.clear()
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # --- the server's side: reads -----------------------------------------------------

    async def read_exact(self, n: int) -> bytes:
        """The next ``n`` bytes (at most the stage); IncompleteReadError at the end of
        the stream, ConnectionError when it broke, TimeoutError when idle too long."""
        while self._end - self._start < n:
            self._want = n
            await self._wait()
        data = bytes(self._view[self._start:self._start + n])
        self._consumed(n)
        return data

    async def read_into(self, buffer: bytearray | memoryview) -> None:
        """Fill ``buffer`` with the next bytes: what the stage holds is copied, the rest
        is received in place."""
        target = memoryview(buffer)
        n = min(len(target), self._end - self._start)
        if n:
            target[:n] = self._view[self._start:self._start + n]
            self._consumed(n)
        if n == len(target):
            return
        self._target, self._filled = target, n
        self._resume()
        try:
            await self._wait()
        finally:
            self._target = None

    def _consumed(self, n: int) -> None:
        self._start += n
        if self._start == self._end:
            self._start = self._end = 0
        self._resume()

    async def _wait(self) -> None:
        if self._ended is not None:
            raise self._ended
        self._activity = self._loop.time()
        waiter = self._waiter = self._loop.create_future()
        self._resume()
        try:
            await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _end_stream(self, exc: BaseException) -> None:
        if self._ended is None:
            self._ended = exc
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(self._ended)

    def _idle_check(self) -> None:
        now = self._loop.time()
        due = self._activity + self._idle_s
        waiter = self._waiter
        if waiter is None or now >= due:  # not waiting (a request is being served): not
            if waiter is not None and not waiter.done():  # idle; else idle too long
                waiter.set_exception(TimeoutError())
            due = now + self._idle_s
        self._idle_timer = self._loop.call_at(due, self._idle_check)

    def _pause(self) -> None:
        if not self._paused and self.transport is not None and not self.transport.is_closing():
            self._paused = True
            self.transport.pause_reading()

    def _resume(self) -> None:
        if self._paused and self.transport is not None and not self.transport.is_closing():
            self._paused = False
            self.transport.resume_reading()

    # --- the server's side: writes ----------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def drain(self) -> None:
        """Until the transport's buffer is below its high-water mark."""
        if self._ended is not None and isinstance(self._ended, ConnectionError):
            raise self._ended
        if self.transport is None or self.transport.is_closing():
            await asyncio.sleep(0)  # as StreamWriter.drain: let connection_lost run
            if self._closed.done():
                raise ConnectionResetError("connection lost")
            return
        if not self._write_paused:
            return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default if self.transport is None else self.transport.get_extra_info(name,
                                                                                     default)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)
