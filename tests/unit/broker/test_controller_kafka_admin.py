"""The controller's side of two Kafka admin APIs, over the real embedded metadata store:
``alter_reassignments`` (AlterPartitionReassignments: targets merged into the request
running, cancellations back to the origin replicas) and ``elect_unclean_leaders``
(ElectLeaders UNCLEAN); and a move that only adds a replica, listed and cancellable
until the new replica is in sync (the adding replicas kept as ZooKeeper keeps them)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from core.broker.controller.controller import Controller
from core.broker.controller.reassignment import (
    REASSIGN_PARTITIONS,
    NoReassignmentInProgressError,
    encode_reassignment,
    parse_reassignment,
)
from core.broker.errors import (
    InvalidReplicaAssignmentError,
    NotControllerError,
    UnknownPartitionError,
)
from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.metadata.store import BrokerRegistration, PartitionState, TopicAssignment
from core.clock import ManualClock

BROKERS = (1, 2, 3)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedMetadataStore]:
    s = EmbeddedMetadataStore(f"sqlite:///{tmp_path / 'data' / 'metadata.db'}",
                              clock=ManualClock())
    await s.start()
    for b in BROKERS:
        await s.register_broker(BrokerRegistration(b, f"h{b}", 9000 + b))
    yield s
    await s.close()


@pytest.fixture
async def controller(store: EmbeddedMetadataStore) -> AsyncIterator[Controller]:
    c = Controller(1, store, auto_rebalance=False)
    assert await c.maybe_elect()
    yield c
    await c.stop()


async def put_topic(store: EmbeddedMetadataStore, name: str,
                    layout: Mapping[int, tuple[int, ...]], *,
                    leaders: Mapping[int, int] | None = None,
                    isrs: Mapping[int, tuple[int, ...]] | None = None) -> None:
    states = {p: PartitionState(leader=(leaders or {}).get(p, reps[0]), leader_epoch=0,
                                isr=(isrs or {}).get(p, reps), controller_epoch=1)
              for p, reps in layout.items()}
    await store.create_topic(TopicAssignment(name, f"id-{name}", dict(layout)), {}, states)


async def request(store: EmbeddedMetadataStore) -> dict[tuple[str, int], tuple[int, ...]] | None:
    data = await store.get_admin_request(REASSIGN_PARTITIONS)
    return None if data is None else parse_reassignment(data)


async def test_new_targets_are_merged_into_the_running_reassignment(
        store: EmbeddedMetadataStore, controller: Controller) -> None:
    await put_topic(store, "t", {0: (1,), 1: (2,), 2: (1, 2), 3: (3,)})
    # a reassignment from the REST route is running
    assert await store.create_admin_request(REASSIGN_PARTITIONS, encode_reassignment(
        {("t", 0): (2,), ("t", 3): (1,)}))
    got = await controller.alter_reassignments({
        ("t", 1): (3,), ("t", 0): (3,), ("t", 9): (1,), ("u", 0): (1,), ("t", 2): (1, 7)})
    assert got[("t", 0)] is None and got[("t", 1)] is None
    assert isinstance(got[("t", 9)], UnknownPartitionError)
    assert isinstance(got[("u", 0)], UnknownPartitionError)
    assert isinstance(got[("t", 2)], InvalidReplicaAssignmentError)
    assert "[7]" in str(got[("t", 2)])
    # the latest target wins, the running one's other partitions stay
    assert await request(store) == {("t", 0): (3,), ("t", 1): (3,), ("t", 3): (1,)}


async def test_a_cancelled_move_goes_back_to_its_origin_replicas(
        store: EmbeddedMetadataStore, controller: Controller,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # t-0 moving from (1,) to (3,): expanded to (3, 1), adding 3, removing 1 (the
    # embedded store of a standalone broker, where nothing can move, keeps no
    # adding/removing replicas: ZooKeeper's are these)
    moving = TopicAssignment("t", "id-t", {0: (3, 1), 1: (2,)}, {0: (3,)}, {0: (1,)})
    await put_topic(store, "t", moving.partitions, leaders={0: 1}, isrs={0: (1,)})

    async def get_topic(name: str) -> TopicAssignment | None:
        return moving if name == "t" else None

    monkeypatch.setattr(store, "get_topic", get_topic)
    assert await store.create_admin_request(REASSIGN_PARTITIONS,
                                            encode_reassignment({("t", 0): (3,)}))
    got = await controller.alter_reassignments({("t", 0): None, ("t", 1): None})
    assert got[("t", 0)] is None
    assert isinstance(got[("t", 1)], NoReassignmentInProgressError)  # t-1 is not moving
    assert await request(store) == {("t", 0): (1,)}


async def test_nothing_to_do_writes_nothing(store: EmbeddedMetadataStore,
                                            controller: Controller) -> None:
    await put_topic(store, "t", {0: (1,), 1: (2,)})
    got = await controller.alter_reassignments({("t", 0): (1,), ("t", 1): None})
    assert got[("t", 0)] is None  # already there
    assert isinstance(got[("t", 1)], NoReassignmentInProgressError)
    assert await request(store) is None


def keep_moving_replicas(store: EmbeddedMetadataStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store keeps a reassignment's adding and removing replicas, as ZooKeeper's
    ``/brokers/topics/<t>`` does (the embedded store of a standalone broker does not)."""
    kept: dict[str, tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]] = {}
    get_topic, set_assignment = store.get_topic, store.set_assignment

    async def get(name: str) -> TopicAssignment | None:
        found = await get_topic(name)
        if found is None or name not in kept:
            return found
        return dataclasses.replace(found, adding=kept[name][0], removing=kept[name][1])

    async def put(assignment: TopicAssignment) -> None:
        kept[assignment.name] = (dict(assignment.adding), dict(assignment.removing))
        await set_assignment(assignment)

    monkeypatch.setattr(store, "get_topic", get)
    monkeypatch.setattr(store, "set_assignment", put)


async def work(controller: Controller) -> None:
    """One pass over the reassignment request, as the controller runs it on each event."""
    async with controller._work:
        await controller.process_reassignment_request()


async def set_isr(store: EmbeddedMetadataStore, topic: str, isr: tuple[int, ...]) -> None:
    state = (await store.get_partition_states(topic))[0]
    await store.update_partition_state(topic, 0, dataclasses.replace(state, isr=isr),
                                       expected_version=state.version)


async def test_a_move_that_only_adds_a_replica_runs_until_it_is_in_sync(
        store: EmbeddedMetadataStore, controller: Controller,
        monkeypatch: pytest.MonkeyPatch) -> None:
    keep_moving_replicas(store, monkeypatch)
    await put_topic(store, "t", {0: (1,)})
    await controller.request_reassignment(encode_reassignment({("t", 0): (1, 2)}))
    for _ in range(2):  # broker 2 is not in the ISR: the move stays, listed, however often
        await work(controller)
        moved = await store.get_topic("t")
        assert moved is not None and (moved.partitions[0], moved.adding) == ((1, 2), {0: (2,)})
        assert await controller.reassignments() == [("t", 0, (1, 2), (2,), ())]
        assert await request(store) == {("t", 0): (1, 2)}
    await set_isr(store, "t", (1, 2))
    await work(controller)
    done = await store.get_topic("t")
    assert done is not None and (done.partitions[0], done.adding, done.removing) == ((1, 2), {}, {})
    assert await controller.reassignments() == []
    assert await request(store) is None
    state = (await store.get_partition_states("t"))[0]
    assert (state.leader, state.leader_epoch, state.isr) == (1, 0, (1, 2))  # nothing to elect


async def test_a_move_that_only_adds_a_replica_can_be_cancelled(
        store: EmbeddedMetadataStore, controller: Controller,
        monkeypatch: pytest.MonkeyPatch) -> None:
    keep_moving_replicas(store, monkeypatch)
    await put_topic(store, "t", {0: (1,)})
    got = await controller.alter_reassignments({("t", 0): (1, 2)})
    assert got == {("t", 0): None}
    await work(controller)
    assert await controller.reassignments() == [("t", 0, (1, 2), (2,), ())]
    # its target is reached already, but the replica is still being added: it is moving
    assert await controller.alter_reassignments({("t", 0): None}) == {("t", 0): None}
    assert await request(store) == {("t", 0): (1,)}
    await work(controller)
    back = await store.get_topic("t")
    assert back is not None and (back.partitions[0], back.adding, back.removing) == ((1,), {}, {})
    assert await request(store) is None
    again = await controller.alter_reassignments({("t", 0): None})
    assert isinstance(again[("t", 0)], NoReassignmentInProgressError)


async def test_unclean_election_takes_an_out_of_sync_replica(
        store: EmbeddedMetadataStore, controller: Controller) -> None:
    await put_topic(store, "t", {0: (1, 2), 1: (2, 3), 2: (1, 3), 3: (1,)},
                    leaders={0: -1, 3: -1}, isrs={0: (1,), 3: (1,)})
    await store.unregister_broker(1)
    got = await controller.elect_unclean_leaders(
        [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 9), ("nope", 0)])
    assert got == {("t", 0): 2,  # out of sync, alone in the ISR
                   ("t", 1): None,  # its leader is alive: not needed
                   ("t", 2): 3,  # an in-sync replica is alive: it comes first
                   ("t", 3): -1}  # no replica alive
    states = await store.get_partition_states("t")
    assert (states[0].leader, states[0].leader_epoch, states[0].isr) == (2, 1, (2,))
    assert (states[2].leader, states[2].isr) == (3, (3,))
    assert states[3].leader == -1


async def test_only_the_controller_runs_them(store: EmbeddedMetadataStore,
                                             controller: Controller) -> None:
    await put_topic(store, "t", {0: (1,)})
    other = Controller(2, store, auto_rebalance=False)
    try:
        assert not await other.maybe_elect()
        with pytest.raises(NotControllerError):
            await other.alter_reassignments({("t", 0): (2,)})
        with pytest.raises(NotControllerError):
            await other.elect_unclean_leaders([("t", 0)])
    finally:
        await other.stop()
