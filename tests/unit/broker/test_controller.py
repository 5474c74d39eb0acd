"""The controller (election, topic creation and deletion, failover, controlled shutdown,
preferred election) and a broker's ``ControlledShutdown``, over the real embedded
metadata store on a SQLite file. Only the public surface of ``Controller`` is used."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

import pytest

from core.broker.controller import controlled_shutdown as shutdown_mod
from core.broker.controller.controlled_shutdown import Address, ControlledShutdown
from core.broker.controller.controller import Controller
from core.broker.controller.partition_limits import PartitionLimits
from core.broker.errors import (
    BrokerNotAvailableError,
    InvalidReplicationFactorError,
    PolicyViolationError,
    TopicDeletionDisabledError,
    UnknownTopicError,
)
from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.metadata.store import (
    BrokerRegistration,
    EventKind,
    MetadataEvent,
    PartitionState,
    TopicAssignment,
)
from core.clock import ManualClock

BROKERS = (1, 2, 3)


def addr(broker_id: int) -> Address:
    return (f"h{broker_id}", 9000 + broker_id)


def reg(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, *addr(broker_id))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedMetadataStore]:
    s = EmbeddedMetadataStore(f"sqlite:///{tmp_path / 'data' / 'metadata.db'}",
                              clock=ManualClock())
    await s.start()
    for b in BROKERS:
        await s.register_broker(reg(b))
    yield s
    await s.close()


MakeController = Callable[..., Controller]


@pytest.fixture
async def make_controller(store: EmbeddedMetadataStore) -> AsyncIterator[MakeController]:
    made: list[Controller] = []

    def make(broker_id: int = 1, **kw: object) -> Controller:
        kw.setdefault("auto_rebalance", False)
        c = Controller(broker_id, store, **kw)  # type: ignore[arg-type]
        made.append(c)
        return c

    yield make
    for c in made:
        await c.stop()


@pytest.fixture
async def controller(make_controller: MakeController) -> Controller:
    c = make_controller(1)
    assert await c.maybe_elect()
    return c


async def put_topic(store: EmbeddedMetadataStore, name: str,
                    layout: Mapping[int, tuple[int, ...]], *,
                    leaders: Mapping[int, int] | None = None,
                    isrs: Mapping[int, tuple[int, ...]] | None = None,
                    configs: Mapping[str, str] | None = None) -> None:
    """A topic with a known layout (leader = first replica, ISR = all, unless given)."""
    states = {p: PartitionState(leader=(leaders or {}).get(p, reps[0]), leader_epoch=0,
                                isr=(isrs or {}).get(p, reps), controller_epoch=1)
              for p, reps in layout.items()}
    await store.create_topic(TopicAssignment(name, f"id-{name}", dict(layout)), configs or {},
                             states)


async def lei(store: EmbeddedMetadataStore,
              topic: str) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    """partition -> (leader, leader epoch, ISR)."""
    return {p: (s.leader, s.leader_epoch, s.isr)
            for p, s in (await store.get_partition_states(topic)).items()}


async def eventually(cond: Callable[[], bool | Awaitable[bool]], timeout: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        ok = cond()
        if inspect.isawaitable(ok):
            ok = await ok
        if ok:
            return
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


# --- election -----------------------------------------------------------------------------


async def test_the_first_broker_is_elected(
    store: EmbeddedMetadataStore, make_controller: MakeController
) -> None:
    c1, c2 = make_controller(1), make_controller(2)
    assert not c1.is_active
    assert await c1.maybe_elect() is True
    assert c1.is_active and c1.epoch is not None
    assert await store.controller_id() == 1
    assert await c2.maybe_elect() is False and not c2.is_active
    assert await make_controller(9).maybe_elect() is False  # not registered: cannot win

    await store.unregister_broker(1)  # the controller's session ends
    assert await c2.maybe_elect() is True
    assert c2.epoch is not None and c2.epoch > c1.epoch


# --- topics -------------------------------------------------------------------------------


async def test_create_topic_assigns_partitions_over_the_live_brokers(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    assignment = await controller.create_topic("orders", partitions=6, replication_factor=2,
                                               configs={"retention.ms": "1000"})
    assert sorted(assignment.partitions) == list(range(6))
    for replicas in assignment.partitions.values():
        assert len(replicas) == 2 and len(set(replicas)) == 2 and set(replicas) <= set(BROKERS)
    # leaders spread evenly: each broker is the first replica of two partitions
    assert sorted(r[0] for r in assignment.partitions.values()) == [1, 1, 2, 2, 3, 3]

    stored = await store.get_topic("orders")
    assert stored is not None and dict(stored.partitions) == dict(assignment.partitions)
    assert await store.get_topic_configs("orders") == {"retention.ms": "1000"}
    states = await store.get_partition_states("orders")
    for p, replicas in assignment.partitions.items():
        s = states[p]
        assert (s.leader, s.leader_epoch, s.isr) == (replicas[0], 0, replicas)
        assert s.controller_epoch == controller.epoch


async def test_create_topic_uses_only_live_brokers(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    await store.unregister_broker(3)
    assignment = await controller.create_topic("t", partitions=4, replication_factor=2)
    assert {b for r in assignment.partitions.values() for b in r} == {1, 2}


async def test_validate_only_writes_nothing(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    assignment = await controller.create_topic("t", partitions=3, replication_factor=3,
                                               validate_only=True)
    assert len(assignment.partitions) == 3
    assert await store.get_topic("t") is None
    assert await store.topic_names() == []
    assert await store.get_partition_states("t") == {}


async def test_a_replication_factor_above_the_live_brokers_is_refused(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 3"):
        await controller.create_topic("t", partitions=1, replication_factor=4)
    await store.unregister_broker(3)
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 2"):
        await controller.create_topic("t", partitions=1, replication_factor=3)
    assert await store.topic_names() == []


async def test_delete_topic_when_disabled_is_refused(
    store: EmbeddedMetadataStore, make_controller: MakeController
) -> None:
    c = make_controller(1, delete_topic_enable=False)
    assert await c.maybe_elect()
    await put_topic(store, "t", {0: (1, 2)})
    with pytest.raises(TopicDeletionDisabledError):
        await c.delete_topic("t")
    assert await store.topic_names() == ["t"]


async def test_delete_topic(store: EmbeddedMetadataStore, controller: Controller) -> None:
    await put_topic(store, "t", {0: (1, 2)})
    await controller.delete_topic("t")
    assert await store.topic_names() == []
    with pytest.raises(UnknownTopicError):
        await controller.delete_topic("t")


# --- failover -----------------------------------------------------------------------------


async def test_reconcile_moves_leadership_off_a_dead_broker(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    await put_topic(store, "t", {0: (2, 1, 3), 1: (1, 2, 3), 2: (3, 2, 1)})
    assert await controller.reconcile() == 0  # everybody alive: nothing to do

    await store.unregister_broker(2)
    assert await controller.reconcile() == 3
    assert await lei(store, "t") == {
        0: (1, 1, (1, 3)),  # next ISR member in assignment order, epoch + 1
        1: (1, 1, (1, 3)),  # leader kept; the dead follower leaves the ISR
        2: (3, 1, (3, 1)),
    }
    states = await store.get_partition_states("t")
    assert all(s.controller_epoch == controller.epoch for s in states.values())
    assert await controller.reconcile() == 0  # settled


async def test_no_live_isr_member_takes_the_partition_offline_until_it_returns(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    await put_topic(store, "t", {0: (2, 3)}, isrs={0: (2,)})  # 3 lags behind
    await store.unregister_broker(2)
    assert await controller.reconcile() == 1
    assert await lei(store, "t") == {0: (-1, 1, (2,))}  # offline; the ISR keeps 2

    await store.register_broker(reg(2))
    assert await controller.reconcile() == 1
    assert await lei(store, "t") == {0: (2, 2, (2,))}


async def test_unclean_election_by_broker_default(
    store: EmbeddedMetadataStore, make_controller: MakeController
) -> None:
    c = make_controller(1, unclean_default=True)
    assert await c.maybe_elect()
    await put_topic(store, "t", {0: (2, 3)}, isrs={0: (2,)})
    await store.unregister_broker(2)
    await c.reconcile()
    assert await lei(store, "t") == {0: (3, 1, (3,))}  # the out-of-sync replica leads


async def test_unclean_election_by_topic_override(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    await put_topic(store, "t", {0: (2, 3)}, isrs={0: (2,)},
                    configs={"unclean.leader.election.enable": "true"})
    await put_topic(store, "u", {0: (2, 3)}, isrs={0: (2,)})
    await store.unregister_broker(2)
    await controller.reconcile()
    assert await lei(store, "t") == {0: (3, 1, (3,))}
    assert await lei(store, "u") == {0: (-1, 1, (2,))}


async def test_a_broker_going_away_triggers_a_reconcile(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    store.subscribe(controller.on_event)
    await put_topic(store, "t", {0: (2, 1, 3)})
    await store.unregister_broker(2)

    async def moved() -> bool:
        return (await lei(store, "t"))[0] == (1, 1, (1, 3))

    await eventually(moved)


async def test_an_inactive_controller_decides_nothing(
    store: EmbeddedMetadataStore, make_controller: MakeController
) -> None:
    await put_topic(store, "t", {0: (2, 1, 3)})
    await store.unregister_broker(2)
    c = make_controller(1)  # never elected
    assert await c.reconcile() == 0
    assert await lei(store, "t") == {0: (2, 0, (2, 1, 3))}


# --- controlled shutdown and preferred election ---------------------------------------------


async def test_controlled_shutdown_moves_leadership_away(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    await put_topic(store, "t", {0: (2, 1, 3), 1: (2,), 2: (1, 2, 3)})
    remaining = await controller.controlled_shutdown(2)
    assert remaining == 0  # everything movable moved; t-1 has no other replica
    assert await lei(store, "t") == {
        0: (1, 1, (1, 3)),
        1: (2, 0, (2,)),  # untouched
        2: (1, 1, (1, 3)),  # a follower going away leaves the ISR
    }


async def test_preferred_leaders_are_elected_back(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    await put_topic(store, "t", {0: (2, 1, 3), 1: (3, 1, 2), 2: (1, 2, 3)},
                    leaders={0: 1, 1: 1}, isrs={1: (1, 2)})
    moved = await controller.elect_preferred_leaders([("t", 0), ("t", 1), ("t", 2)])
    assert moved == [("t", 0)]
    assert await lei(store, "t") == {
        0: (2, 1, (2, 1, 3)),  # back to the first replica, ISR unchanged
        1: (1, 0, (1, 2)),  # the preferred replica 3 is not in the ISR
        2: (1, 0, (1, 2, 3)),  # already led by its preferred replica
    }


async def test_a_preferred_replica_that_is_down_is_not_elected(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    await put_topic(store, "t", {0: (2, 1, 3)}, leaders={0: 1})
    await store.unregister_broker(2)
    assert await controller.elect_preferred_leaders([("t", 0)]) == []
    assert (await lei(store, "t"))[0][0] == 1


# --- ControlledShutdown.run ------------------------------------------------------------------


class FakeShutdownClient:
    """``ShutdownClient``: records calls; forwards them to ``remote`` (the controller on
    the other broker) or raises ``error``."""

    def __init__(self, remote: Controller | None = None,
                 error: Exception | None = None) -> None:
        self.remote, self.error = remote, error
        self.calls: list[tuple[Address, int]] = []

    async def controlled_shutdown(self, address: Address, broker_id: int) -> int:
        self.calls.append((address, broker_id))
        if self.error is not None:
            raise self.error
        assert self.remote is not None
        return await self.remote.controlled_shutdown(broker_id)


class Counter:
    def __init__(self, value: object) -> None:
        self.value, self.calls = value, 0

    def __call__(self) -> object:
        self.calls += 1
        return self.value() if callable(self.value) else self.value


def leaders_view(store: EmbeddedMetadataStore,
                 initial: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The leaders a broker knows, kept current from the store's events."""
    view = dict(initial)

    def on_event(ev: MetadataEvent) -> None:
        if ev.kind is EventKind.PARTITION_STATE_CHANGED:
            assert ev.topic is not None and ev.partition is not None
            view[(ev.topic, ev.partition)] = ev.extra["leader"]  # type: ignore[assignment]

    store.subscribe(on_event)
    return view


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutdown_mod, "RETRY_S", 0.02)


@pytest.mark.parametrize(("enabled", "live"), [(False, 3), (True, 1)])
async def test_shutdown_disabled_or_alone_returns_at_once(
    store: EmbeddedMetadataStore, make_controller: MakeController, enabled: bool, live: int
) -> None:
    c = make_controller(1)
    assert await c.maybe_elect()
    client = FakeShutdownClient(error=AssertionError("must not be called"))
    leads, live_brokers, address_of = Counter(True), Counter(live), Counter(None)
    shutdown = ControlledShutdown(1, c, store, client,
                                  address_of=address_of,  # type: ignore[arg-type]
                                  leads_shared_partitions=leads,  # type: ignore[arg-type]
                                  live_brokers=live_brokers,  # type: ignore[arg-type]
                                  enabled=enabled, timeout_ms=5000)
    await asyncio.wait_for(shutdown.run(), 0.5)
    assert (leads.calls, address_of.calls, client.calls) == (0, 0, [])
    assert live_brokers.calls == (1 if enabled else 0)
    assert c.shutting_down == set()  # the controller was not asked


async def test_shutdown_asks_the_local_controller_until_nothing_shared_is_led(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    # t-0 can move to 2 at once; t-1 only once 3 has caught up (joined the ISR)
    await put_topic(store, "t", {0: (1, 2), 1: (1, 3)}, isrs={1: (1,)})
    view = leaders_view(store, {("t", 0): 1, ("t", 1): 1})
    leads = Counter(lambda: any(leader == 1 for leader in view.values()))
    client = FakeShutdownClient(error=AssertionError("the controller is local"))
    shutdown = ControlledShutdown(1, controller, store, client, address_of=addr,
                                  leads_shared_partitions=leads,  # type: ignore[arg-type]
                                  live_brokers=lambda: 3, timeout_ms=5000)
    task = asyncio.ensure_future(shutdown.run())

    await eventually(lambda: view[("t", 0)] == 2)
    await asyncio.sleep(0.1)
    assert not task.done()  # t-1 is still led here: it keeps asking
    asked = leads.calls
    assert asked >= 3
    state = (await store.get_partition_states("t"))[1]
    await store.update_partition_state("t", 1, PartitionState(1, 0, (1, 3), 1),
                                       expected_version=state.version)  # 3 caught up

    await asyncio.wait_for(task, 2)
    assert await lei(store, "t") == {0: (2, 1, (2,)), 1: (3, 1, (3,))}
    assert client.calls == [] and controller.shutting_down == {1}
    assert leads.calls >= asked  # the last answer (nothing left to move) may end it


async def test_shutdown_asks_the_controller_on_another_broker(
    store: EmbeddedMetadataStore, make_controller: MakeController
) -> None:
    remote = make_controller(2)
    assert await remote.maybe_elect()
    local = make_controller(1)
    await put_topic(store, "t", {0: (1, 2, 3)})
    view = leaders_view(store, {("t", 0): 1})
    client = FakeShutdownClient(remote=remote)
    shutdown = ControlledShutdown(1, local, store, client, address_of=addr,
                                  leads_shared_partitions=lambda: view[("t", 0)] == 1,
                                  live_brokers=lambda: 3, timeout_ms=5000)
    await asyncio.wait_for(shutdown.run(), 2)
    assert client.calls == [(addr(2), 1)]
    assert await lei(store, "t") == {0: (2, 1, (2, 3))}
    assert local.shutting_down == set() and remote.shutting_down == {1}


@pytest.mark.parametrize("with_controller", [True, False])
async def test_shutdown_gives_up_after_the_timeout(
    store: EmbeddedMetadataStore, make_controller: MakeController, with_controller: bool
) -> None:
    if with_controller:  # the controller on broker 2 does not answer
        assert await make_controller(2).maybe_elect()
    client = FakeShutdownClient(error=BrokerNotAvailableError("broker 2 is unreachable"))
    shutdown = ControlledShutdown(1, make_controller(1), store, client, address_of=addr,
                                  leads_shared_partitions=lambda: True,
                                  live_brokers=lambda: 3, timeout_ms=150)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.wait_for(shutdown.run(), 2)  # no exception: a plain shutdown follows
    assert 0.15 <= loop.time() - start < 1
    if with_controller:
        assert len(client.calls) >= 3 and set(client.calls) == {(addr(2), 1)}
    else:
        assert client.calls == []  # nobody to ask


async def test_creations_racing_through_other_brokers_never_pass_the_per_broker_maximum(
        make_controller: MakeController, store: EmbeddedMetadataStore) -> None:
    """The per-broker check reads the broker's cache; a creation written through another
    broker at the same moment is not in it (here: a cache that never sees anything). The
    count from the store after the write takes such a creation back."""
    c = make_controller(1, partition_limits=PartitionLimits(per_broker=10),
                        hosted_replicas=dict)  # stale: always empty
    assert await c.maybe_elect()
    await c.create_topic("first", partitions=6 * len(BROKERS), replication_factor=1)
    with pytest.raises(PolicyViolationError, match="at the same time"):
        await c.create_topic("second", partitions=6 * len(BROKERS), replication_factor=1)
    assert await store.get_topic("second") is None  # taken back
    assert max((await store.replicas_per_broker()).values()) <= 10
    await c.create_topic("small", partitions=len(BROKERS), replication_factor=1)  # fits


async def test_shutdown_stops_asking_when_every_other_replica_is_going_away_too(
    store: EmbeddedMetadataStore, controller: Controller
) -> None:
    """A whole cluster stopping at once: broker 2 already asked, so what broker 1 leads
    has nowhere to go; it stops asking at the first answer, not at its deadline."""
    await put_topic(store, "t", {0: (1, 2), 1: (1, 2)})
    await controller.controlled_shutdown(2)
    leads = Counter(True)
    shutdown = ControlledShutdown(1, controller, store, None, address_of=addr,
                                  leads_shared_partitions=leads,  # type: ignore[arg-type]
                                  live_brokers=lambda: 3, timeout_ms=30_000)
    await asyncio.wait_for(shutdown.run(), 1.0)
    assert leads.calls == 1
    assert (await lei(store, "t"))[0][0] == 1  # still led here: no replica could take it


async def test_the_last_broker_of_a_stopping_cluster_is_answered_without_a_reconcile(
    store: EmbeddedMetadataStore, controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    await put_topic(store, "t", {0: (1, 2, 3)})
    await controller.controlled_shutdown(2)
    await controller.controlled_shutdown(3)
    reconciles: list[int] = []
    real = controller.reconcile

    async def counted(**kw: object) -> int:
        reconciles.append(1)
        return await real(**kw)  # type: ignore[arg-type]

    monkeypatch.setattr(controller, "reconcile", counted)
    assert await controller.controlled_shutdown(1) == 0
    assert reconciles == []  # no other broker could take anything: nothing re-decided
    assert (await lei(store, "t"))[0][0] == 1


async def test_shutdown_stops_asking_once_it_is_the_last_broker_registered(
    store: EmbeddedMetadataStore, make_controller: MakeController
) -> None:
    c = make_controller(1)  # not the controller; the controller went away
    live = iter([3, 3, 1])
    client = FakeShutdownClient(error=ConnectionError("the controller is gone"))
    shutdown = ControlledShutdown(1, c, store, client, address_of=addr,
                                  leads_shared_partitions=lambda: True,
                                  live_brokers=lambda: next(live, 1), timeout_ms=30_000)
    await asyncio.wait_for(shutdown.run(), 1.0)  # not its 30 s deadline
