"""``ByteBudget`` (queued.max.request.bytes): bytes of request bodies held at once over
every connection; takes that do not fit wait first come first served, and a reader
cancelled while waiting (its connection closed) leaves nothing held."""

from __future__ import annotations

import asyncio

from api.kafka.server import ByteBudget


def test_takes_that_fit_are_immediate_and_the_rest_wait_in_order() -> None:
    async def main() -> list[str]:
        budget, order = ByteBudget(100), []
        assert await budget.take(60) == 60 and budget.free == 40

        async def taker(name: str, n: int) -> None:
            await budget.take(n)
            order.append(name)

        big = asyncio.ensure_future(taker("big", 90))
        await asyncio.sleep(0)
        small = asyncio.ensure_future(taker("small", 10))  # fits, but waits behind big
        await asyncio.sleep(0)
        assert order == [] and budget.free == 40
        budget.give(60)
        await asyncio.gather(big, small)
        assert budget.free == 0
        return order

    assert asyncio.run(main()) == ["big", "small"]


def test_a_frame_larger_than_the_whole_budget_waits_for_all_of_it() -> None:
    async def main() -> None:
        budget = ByteBudget(100)
        await budget.take(1)
        waiting = asyncio.ensure_future(budget.take(500))
        await asyncio.sleep(0)
        assert not waiting.done()
        budget.give(1)
        assert await waiting == 100 and budget.free == 0

    asyncio.run(main())


def test_a_cancelled_waiter_holds_nothing_and_does_not_block_the_next() -> None:
    async def main() -> None:
        budget = ByteBudget(100)
        await budget.take(100)
        first = asyncio.ensure_future(budget.take(80))
        second = asyncio.ensure_future(budget.take(30))
        await asyncio.sleep(0)
        first.cancel()  # its connection closed while it waited
        await asyncio.sleep(0)
        budget.give(40)
        assert await second == 30 and budget.free == 10
        budget.give(30)
        granted = asyncio.ensure_future(budget.take(40))
        await asyncio.sleep(0)
        assert granted.done()
        # granted and cancelled in the same turn: the bytes go back
        both = asyncio.ensure_future(budget.take(50))
        blocker = asyncio.ensure_future(budget.take(1))
        await asyncio.sleep(0)
        assert not both.done() and not blocker.done()
        budget.give(51)  # grants both at once
        blocker.cancel()  # before it runs again
        await asyncio.gather(blocker, return_exceptions=True)
        assert await both == 50 and budget.free == 1

    asyncio.run(main())
