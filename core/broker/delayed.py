"""Delayed operations: waiters parked until something happens to a partition.

A long-polling fetch waits for new data below the high watermark; an acks=all produce
waits for the high watermark to pass its last offset. Both park on a ``WaitSet`` and
are woken by appends or HW moves, never by polling loops. Wake-ups are coalesced:
many appends in one event-loop iteration wake each waiter once.
"""

from __future__ import annotations

import asyncio


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
