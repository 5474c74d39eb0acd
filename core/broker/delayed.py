"""Delayed operations: waiters parked until something happens to a partition.

A long-polling fetch waits for new data below the high watermark; an acks=all produce
waits for the high watermark to pass its last offset. Both park on a ``WaitSet`` and
are woken by appends or HW moves, never by polling loops. Wake-ups are coalesced:
many appends in one event-loop iteration wake each waiter once.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple


class WaitSet:
    """Futures waiting for the next change of one partition. Event-loop only."""

    __slots__ = ("_waiters", "_scheduled")

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []
        self._scheduled = False

    def __len__(self) -> int:
        return len(self._waiters)

    def new_waiter(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def park(self, fut: asyncio.Future[object]) -> None:
        """Wake ``fut`` (result None) with the others; one future may be parked on
        several sets at once and wakes on the first."""
        self._waiters.append(fut)  # type: ignore[arg-type]

    def discard(self, fut: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def notify(self) -> None:
        """Wake every current waiter, once, at the end of this loop iteration."""
        if self._scheduled or not self._waiters:
            return
        self._scheduled = True
        asyncio.get_running_loop().call_soon(self._fire)

    def _fire(self) -> None:
        self._scheduled = False
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)


async def wait_any(futures: list[asyncio.Future[None]], timeout_s: float) -> bool:
    """Wait until one of ``futures`` completes or the timeout passes; True if woken."""
    if timeout_s <= 0 or not futures:
        return False
    done, _ = await asyncio.wait(futures, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    return bool(done)


class DataWatch(NamedTuple):
    """A partition led by this broker, seen by a reader about to wait: the set woken
    when its high watermark moves, and the high watermark now."""

    waiters: WaitSet
    high_watermark: int


class Flag:
    """``asyncio.Event`` whose waiting can share one future with ``WaitSet``s
    (``park``), so a read waits on partitions and on its interruption at once without
    a task per thing it waits on."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[object]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def clear(self) -> None:
        self._set = False

    def park(self, fut: asyncio.Future[object]) -> None:
        self._waiters.append(fut)

    def discard(self, fut: asyncio.Future[object]) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    async def wait(self) -> None:
        if self._set:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        finally:
            self.discard(fut)


_TIMED_OUT = object()


def _time_out(fut: asyncio.Future[object]) -> None:
    if not fut.done():
        fut.set_result(_TIMED_OUT)


async def wake_or_timeout(fut: asyncio.Future[object], timeout_s: float) -> bool:
    """Await ``fut``, a private wake-up future, for at most ``timeout_s``: True if
    something woke it, False at the timeout (then it is done, with a marker result).
    Cheaper than ``asyncio.wait``: one timer, no extra futures or callbacks."""
    if fut.done():
        return fut.result() is not _TIMED_OUT
    if timeout_s <= 0:
        return False
    handle = asyncio.get_running_loop().call_later(timeout_s, _time_out, fut)
    try:
        return (await fut) is not _TIMED_OUT
    finally:
        handle.cancel()
