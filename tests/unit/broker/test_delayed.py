"""Delayed operations (core.broker.replica.delayed): parked waiters, timeouts, flags and
abandoned tasks, on a real event loop."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.broker.replica.delayed import Flag, WaitSet, abandon, wait_on, wake_or_timeout


def future() -> asyncio.Future[object]:
    return asyncio.get_running_loop().create_future()


async def steps(n: int = 3) -> None:
    """Let other tasks run ``n`` event-loop steps."""
    for _ in range(n):
        await asyncio.sleep(0)


# --- WaitSet ----------------------------------------------------------------------------


async def test_notify_wakes_every_parked_waiter_and_empties_the_set() -> None:
    ws = WaitSet()
    futs = [future() for _ in range(3)]
    for f in futs:
        ws.park(f)
    assert len(ws) == 3
    ws.notify()
    assert all(f.done() and f.result() is None for f in futs)
    assert len(ws) == 0


async def test_a_waiter_parked_after_a_notify_waits_for_the_next_one() -> None:
    ws = WaitSet()
    early, late = future(), future()
    ws.park(early)
    ws.notify()
    ws.park(late)
    assert early.done() and not late.done()
    ws.notify()
    assert late.done()


async def test_many_notifies_wake_a_waiter_once() -> None:
    ws = WaitSet()
    f = future()
    ws.park(f)
    for _ in range(5):
        ws.notify()  # a second set_result would raise InvalidStateError
    assert f.result() is None


async def test_one_future_on_several_sets_wakes_on_the_first() -> None:
    a, b = WaitSet(), WaitSet()
    f = future()
    a.park(f)
    b.park(f)
    b.notify()
    assert f.done()
    a.notify()  # already done: skipped, no InvalidStateError
    assert len(a) == 0


async def test_a_cancelled_waiter_is_skipped_by_notify() -> None:
    ws = WaitSet()
    gone, live = future(), future()
    ws.park(gone)
    ws.park(live)
    gone.cancel()
    ws.notify()
    assert gone.cancelled() and live.result() is None


async def test_discard_unparks_and_ignores_unknown_futures() -> None:
    ws = WaitSet()
    f = future()
    ws.park(f)
    ws.discard(f)
    ws.discard(future())  # never parked: no error
    ws.notify()
    assert len(ws) == 0 and not f.done()


# --- wait_on ----------------------------------------------------------------------------


async def test_wait_on_returns_true_when_notified_and_leaves_no_waiter() -> None:
    a, b = WaitSet(), WaitSet()
    task = asyncio.create_task(wait_on([a, b], 5))
    await steps()
    assert (len(a), len(b)) == (1, 1) and not task.done()
    b.notify()
    assert await asyncio.wait_for(task, 1) is True
    assert (len(a), len(b)) == (0, 0)


async def test_wait_on_returns_false_at_the_timeout_and_leaves_no_waiter() -> None:
    ws = WaitSet()
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await wait_on([ws], 0.02) is False
    assert loop.time() - start >= 0.015
    assert len(ws) == 0


@pytest.mark.parametrize(("sets", "timeout_s"), [(0, 5.0), (1, 0.0), (1, -1.0)])
async def test_wait_on_nothing_or_no_time_returns_false_at_once(sets: int, timeout_s: float) -> None:
    wait_sets = [WaitSet() for _ in range(sets)]
    assert await asyncio.wait_for(wait_on(wait_sets, timeout_s), 0.5) is False
    assert all(len(ws) == 0 for ws in wait_sets)


async def test_a_cancelled_wait_on_unparks_from_every_set() -> None:
    a, b = WaitSet(), WaitSet()
    task = asyncio.create_task(wait_on([a, b], 5))
    await steps()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (len(a), len(b)) == (0, 0)


# --- wake_or_timeout --------------------------------------------------------------------


async def test_wake_or_timeout_is_true_when_the_future_is_completed_in_time() -> None:
    f = future()
    asyncio.get_running_loop().call_later(0.005, f.set_result, None)
    assert await asyncio.wait_for(wake_or_timeout(f, 5), 1) is True


async def test_wake_or_timeout_is_false_at_the_timeout_and_the_future_stays_timed_out() -> None:
    f = future()
    assert await wake_or_timeout(f, 0.01) is False
    assert f.done()  # with the marker: asking again still says "timed out"
    assert await wake_or_timeout(f, 5) is False


async def test_wake_or_timeout_on_an_already_woken_future_is_true_at_once() -> None:
    f = future()
    f.set_result(None)
    assert await wake_or_timeout(f, 0) is True


async def test_wake_or_timeout_with_no_time_left_is_false_without_waiting() -> None:
    f = future()
    assert await wake_or_timeout(f, 0) is False
    assert not f.done()  # nothing was parked on a timer


async def test_a_wake_before_the_timeout_is_not_overturned_by_the_timer() -> None:
    f = future()
    asyncio.get_running_loop().call_soon(f.set_result, None)
    assert await wake_or_timeout(f, 0.01) is True
    await asyncio.sleep(0.02)  # past the timeout: the wake stands
    assert f.result() is None
    assert await wake_or_timeout(f, 0) is True


# --- Flag -------------------------------------------------------------------------------


async def test_flag_wait_returns_at_once_when_set() -> None:
    flag = Flag()
    flag.set()
    assert flag.is_set()
    await asyncio.wait_for(flag.wait(), 0.5)


async def test_flag_wait_blocks_until_set_and_clear_rearms_it() -> None:
    flag = Flag()
    task = asyncio.create_task(flag.wait())
    await steps()
    assert not task.done()
    flag.set()
    await asyncio.wait_for(task, 1)
    flag.clear()
    assert not flag.is_set()
    again = asyncio.create_task(flag.wait())
    await steps()
    assert not again.done()
    flag.set()
    await asyncio.wait_for(again, 1)


async def test_one_future_waits_on_a_partition_and_a_flag_at_once() -> None:
    ws, flag = WaitSet(), Flag()
    f = future()
    ws.park(f)
    flag.park(f)
    flag.set()
    assert await wake_or_timeout(f, 1) is True
    ws.discard(f)
    flag.discard(f)
    assert len(ws) == 0


# --- abandon ----------------------------------------------------------------------------


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """What the running loop reports to its exception handler ("Task exception was never
    retrieved" among them), collected instead of logged."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    old = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    yield seen
    loop.set_exception_handler(old)


async def _fails_when_cancelled() -> None:
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        await asyncio.sleep(0)
        raise RuntimeError("cleanup failed") from None


async def _fail() -> None:
    raise RuntimeError("boom")


async def _until_done(task: asyncio.Task[None]) -> None:
    await steps(5)
    assert task.done()


async def test_an_unretrieved_failure_is_reported_without_abandon(
    loop_errors: list[dict[str, Any]],
) -> None:
    """The detector of the next tests works: a failed task nobody awaited is reported."""
    task = asyncio.create_task(_fail())
    await _until_done(task)
    del task
    gc.collect()
    assert any("never retrieved" in ctx.get("message", "") for ctx in loop_errors)


async def test_abandon_cancels_the_task() -> None:
    task = asyncio.create_task(asyncio.sleep(10))
    await steps(1)
    abandon(task)
    await steps()
    assert task.cancelled()


async def test_an_abandoned_task_that_fails_later_is_not_reported(
    loop_errors: list[dict[str, Any]],
) -> None:
    task = asyncio.create_task(_fails_when_cancelled())
    await steps(1)
    abandon(task)
    await _until_done(task)
    del task
    gc.collect()
    assert loop_errors == []


async def test_abandoning_an_already_failed_task_retrieves_its_exception(
    loop_errors: list[dict[str, Any]],
) -> None:
    task = asyncio.create_task(_fail())
    await steps()
    assert task.done()
    abandon(task)
    await _until_done(task)
    del task
    gc.collect()
    assert loop_errors == []
