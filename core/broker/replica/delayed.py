"""Delayed operations: waiters parked until something happens to a partition.

A long-polling fetch waits for new data below the high watermark; an acks=all produce
waits for the high watermark to pass its last offset; a follower's fetch waits for the
log end to move. Each parks one future on a ``WaitSet`` (or on several at once, and on
a ``Flag``) and is woken by appends or HW moves, never by polling loops. A woken waiter
leaves the set, so many appends in one event-loop iteration wake it once.

Waking costs one event-loop step: ``notify`` completes the futures at once (their
tasks run next), and ``wake_or_timeout`` awaits the future itself, with a timer
instead of ``asyncio.wait``'s extra futures and callbacks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, NamedTuple


class WaitSet:
    """Futures waiting for the next change of one partition. Event-loop only."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[object]] = []

    def __len__(self) -> int:
        return len(self._waiters)

    def park(self, fut: asyncio.Future[object]) -> None:
        """Complete ``fut`` (result None) at the next ``notify``; one future may be
        parked on several sets at once and wakes on the first."""
        self._waiters.append(fut)

    def discard(self, fut: asyncio.Future[object]) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def notify(self) -> None:
        """Wake every current waiter."""
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)


async def wait_on(sets: Iterable[WaitSet], timeout_s: float) -> bool:
    """Wait until one of ``sets`` is notified (True) or ``timeout_s`` passes (False)."""
    sets = list(sets)
    if not sets or timeout_s <= 0:
        return False
    fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    for ws in sets:
        ws.park(fut)
    try:
        return await wake_or_timeout(fut, timeout_s)
    finally:
        for ws in sets:
            ws.discard(fut)


class DataWatch(NamedTuple):
    """A partition led by this broker, seen by a reader about to wait: the set woken
    when its high watermark moves, and the high watermark now."""

    waiters: WaitSet
    high_watermark: int


class Flag:
    """``asyncio.Event`` whose waiters sit in a ``WaitSet``, so one future can wait on
    partitions and on this flag at once (``park``) without a task per thing it waits
    on."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters = WaitSet()

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        self._waiters.notify()

    def clear(self) -> None:
        self._set = False

    def park(self, fut: asyncio.Future[object]) -> None:
        self._waiters.park(fut)

    def discard(self, fut: asyncio.Future[object]) -> None:
        self._waiters.discard(fut)

    async def wait(self) -> None:
        if self._set:
            return
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.park(fut)
        try:
            await fut
        finally:
            self.discard(fut)


def abandon(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` without awaiting it; its outcome is retrieved when it ends (no
    "exception was never retrieved")."""
    task.cancel()
    task.add_done_callback(_retrieve_outcome)


def _retrieve_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


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
