"""Kafka's topic-name collision rule in the controller: ``t.x`` and ``t_x`` cannot both
exist (``Topic.hasCollision``), also when two brokers create them at the same moment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from core.broker.controller.controller import Controller
from core.broker.errors import TopicAlreadyExistsError
from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.metadata.store import BrokerRegistration, PartitionState, TopicAssignment
from core.clock import ManualClock
from core.storage.errors import InvalidTopicError


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedMetadataStore]:
    s = EmbeddedMetadataStore(f"sqlite:///{tmp_path / 'data' / 'metadata.db'}",
                              clock=ManualClock())
    await s.start()
    for b in (1, 2):
        await s.register_broker(BrokerRegistration(b, f"h{b}", 9000 + b))
    yield s
    await s.close()


@pytest.fixture
async def controller(store: EmbeddedMetadataStore) -> AsyncIterator[Controller]:
    c = Controller(1, store, auto_rebalance=False)
    assert await c.maybe_elect()
    yield c
    await c.stop()


async def create(c: Controller, name: str, **kw: object) -> TopicAssignment:
    return await c.create_topic(name, partitions=1, replication_factor=1, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("first", "second"), [
    ("t.x", "t_x"), ("t_x", "t.x"), ("a.b_c", "a_b.c"), ("a.b.c", "a_b_c"),
])
async def test_a_colliding_name_is_refused_and_nothing_is_created(
    store: EmbeddedMetadataStore, controller: Controller, first: str, second: str
) -> None:
    await create(controller, first)
    with pytest.raises(InvalidTopicError) as err:
        await create(controller, second)
    assert err.value.message == f"Topic '{second}' collides with existing topics: {first}"
    with pytest.raises(InvalidTopicError):  # validate_only answers the same
        await create(controller, second, validate_only=True)
    assert await store.topic_names() == [first]
    assert await store.get_topic(second) is None


async def test_names_that_only_look_alike_do_not_collide(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    for name in ("m.cpu", "m-cpu", "mcpu", "M_cpu", "m.cpu.x"):
        await create(controller, name)
    assert await store.topic_names() == sorted(["m.cpu", "m-cpu", "mcpu", "M_cpu", "m.cpu.x"])


async def test_the_same_name_again_is_already_exists_not_a_collision(
    controller: Controller,
) -> None:
    await create(controller, "t.x")
    with pytest.raises(TopicAlreadyExistsError):
        await create(controller, "t.x")


async def test_every_colliding_topic_is_named(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    # topics left by an older franz, before the rule, are all reported
    for name in ("a.b_c", "a_b.c"):
        await store.create_topic(
            TopicAssignment(name, f"id-{name}", {0: (1,)}), {},
            {0: PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)})
    with pytest.raises(InvalidTopicError) as err:
        await create(controller, "a.b.c")
    assert err.value.message == "Topic 'a.b.c' collides with existing topics: a.b_c, a_b.c"


class _BothCheckFirst:
    """The store as two brokers racing see it: each creation waits until the other has
    also checked the topic list, so both checks pass before either write lands."""

    def __init__(self, store: EmbeddedMetadataStore) -> None:
        self._store = store
        self._barrier = asyncio.Barrier(2)

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str],
                           states: Mapping[int, PartitionState]) -> None:
        await asyncio.wait_for(self._barrier.wait(), 5)
        await self._store.create_topic(assignment, configs, states)


async def test_two_brokers_creating_colliding_names_at_once_never_both_succeed(
    store: EmbeddedMetadataStore,
) -> None:
    racing = _BothCheckFirst(store)
    c1 = Controller(1, racing, auto_rebalance=False)  # type: ignore[arg-type]
    c2 = Controller(2, racing, auto_rebalance=False)  # type: ignore[arg-type]
    assert await c1.maybe_elect()
    try:
        results = await asyncio.gather(create(c1, "a.b"), create(c2, "a_b"),
                                       return_exceptions=True)
    finally:
        await c1.stop()
        await c2.stop()
    names = await store.topic_names()
    assert len(names) <= 1, names
    for name, result in zip(("a.b", "a_b"), results, strict=True):
        if name in names:
            assert isinstance(result, TopicAssignment)
        else:
            assert isinstance(result, InvalidTopicError), result
            assert "collides with existing topics" in result.message
    # whatever is left, a later colliding creation is refused
    c3 = Controller(1, store, auto_rebalance=False)
    await c3.maybe_elect()
    if names:
        with pytest.raises(InvalidTopicError):
            await create(c3, "a.b" if names == ["a_b"] else "a_b")
    await c3.stop()
