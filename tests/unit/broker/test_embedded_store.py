"""EmbeddedMetadataStore on a real SQLite file under tmp_path, with a manual clock."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from core.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    TopicAlreadyExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.metadata.store import (
    BadVersionError,
    BrokerRegistration,
    EventKind,
    MetadataEvent,
    MetadataStore,
    PartitionState,
    TopicAssignment,
)
from core.clock import ManualClock

TOPIC = TopicAssignment("orders", "T8mVnmYVRVCvG2cHd8hUyA", {0: (1,), 1: (1,), 2: (1,)})


def state(leader: int = 1, epoch: int = 0, isr: tuple[int, ...] = (1,)) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1)


STATES = {p: state() for p in TOPIC.partitions}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "metadata.db"


OpenStore = Callable[[], Awaitable[EmbeddedMetadataStore]]


@pytest.fixture
async def open_store(db_path: Path, clock: ManualClock) -> AsyncIterator[OpenStore]:
    """Opens started stores on the same file; all of them are closed at the end."""
    made: list[EmbeddedMetadataStore] = []

    async def _open() -> EmbeddedMetadataStore:
        s = EmbeddedMetadataStore(f"sqlite:///{db_path}", clock=clock)
        await s.start()
        made.append(s)
        return s

    yield _open
    for s in made:
        await s.close()


@pytest.fixture
async def store(open_store: OpenStore) -> EmbeddedMetadataStore:
    return await open_store()


async def reopen(s: EmbeddedMetadataStore, open_store: OpenStore) -> EmbeddedMetadataStore:
    await s.close()
    return await open_store()


def record_events(s: EmbeddedMetadataStore) -> list[MetadataEvent]:
    events: list[MetadataEvent] = []
    s.subscribe(events.append)
    return events


# --- schema and lifecycle ---------------------------------------------------------------


async def test_start_creates_schema_from_scratch_in_a_new_directory(
    store: EmbeddedMetadataStore, db_path: Path
) -> None:
    engine = sa.create_engine(f"sqlite:///{db_path}")
    try:
        tables = set(sa.inspect(engine).get_table_names())
        with engine.connect() as conn:
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    finally:
        engine.dispose()
    assert {"cluster", "controller", "brokers", "topics", "topic_partitions",
            "topic_configs", "alembic_version"} <= tables
    assert mode == "wal"


async def test_restart_reruns_migrations_harmlessly(
    store: EmbeddedMetadataStore, open_store: OpenStore
) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    for _ in range(2):
        store = await reopen(store, open_store)
    assert await store.topic_names() == ["orders"]


async def test_calls_before_start_fail_clearly(db_path: Path, clock: ManualClock) -> None:
    s = EmbeddedMetadataStore(f"sqlite:///{db_path}", clock=clock)
    with pytest.raises(RuntimeError, match="not started"):
        await s.topic_names()


async def test_memory_database_is_refused(clock: ManualClock) -> None:
    s = EmbeddedMetadataStore("sqlite://", clock=clock)
    with pytest.raises(ValueError, match="SQLite file"):
        await s.start()


def test_is_a_metadata_store(db_path: Path, clock: ManualClock) -> None:
    s: MetadataStore = EmbeddedMetadataStore(f"sqlite:///{db_path}", clock=clock)
    assert callable(s.subscribe)


# --- cluster id -------------------------------------------------------------------------


async def test_cluster_id_is_22_char_base64_uuid_and_stable_across_reopen(
    store: EmbeddedMetadataStore, open_store: OpenStore
) -> None:
    cid = await store.cluster_id()
    assert len(cid) == 22 and not cid.startswith("-")
    assert len(base64.urlsafe_b64decode(cid + "==")) == 16
    assert await store.cluster_id() == cid
    store = await reopen(store, open_store)
    assert await store.cluster_id() == cid


# --- brokers ----------------------------------------------------------------------------


async def test_register_sets_epoch_and_timestamp(
    store: EmbeddedMetadataStore, clock: ManualClock
) -> None:
    reg = await store.register_broker(BrokerRegistration(1, "localhost", 9092, rack="r1"))
    assert reg == BrokerRegistration(1, "localhost", 9092, "r1", clock.now_ms(), 1)
    assert await store.live_brokers() == [reg]
    explicit = await store.register_broker(BrokerRegistration(2, "h2", 9093, timestamp_ms=5))
    assert explicit.timestamp_ms == 5 and explicit.epoch == 2


async def test_unregister_and_register_again(store: EmbeddedMetadataStore) -> None:
    first = await store.register_broker(BrokerRegistration(1, "h", 1))
    await store.unregister_broker(1)
    assert await store.live_brokers() == []
    await store.unregister_broker(1)  # already gone: nothing to do
    again = await store.register_broker(BrokerRegistration(1, "h", 2))
    assert again.epoch >= first.epoch
    assert [b.port for b in await store.live_brokers()] == [2]


async def test_stale_registration_is_replaced_with_a_higher_epoch(
    store: EmbeddedMetadataStore, open_store: OpenStore
) -> None:
    old = await store.register_broker(BrokerRegistration(1, "old-host", 1))
    store = await reopen(store, open_store)  # unclean stop: no unregister
    assert await store.live_brokers() == [old]
    new = await store.register_broker(BrokerRegistration(1, "new-host", 2))
    assert new.epoch == old.epoch + 1
    assert await store.live_brokers() == [new]


# --- controller -------------------------------------------------------------------------


async def test_first_registered_broker_wins_the_election(store: EmbeddedMetadataStore) -> None:
    assert await store.controller_id() is None
    await store.register_broker(BrokerRegistration(1, "h", 1))
    await store.register_broker(BrokerRegistration(2, "h", 2))
    assert await store.try_elect_controller(1) == 1
    assert await store.try_elect_controller(2) is None
    assert await store.try_elect_controller(1) is None  # already controller
    assert await store.controller_id() == 1


async def test_controller_role_ends_with_its_registration(store: EmbeddedMetadataStore) -> None:
    await store.register_broker(BrokerRegistration(1, "h", 1))
    await store.register_broker(BrokerRegistration(2, "h", 2))
    assert await store.try_elect_controller(1) == 1
    await store.unregister_broker(1)
    assert await store.controller_id() is None
    assert await store.try_elect_controller(2) == 2
    assert await store.controller_id() == 2


async def test_unregistered_broker_cannot_become_controller(store: EmbeddedMetadataStore) -> None:
    assert await store.try_elect_controller(7) is None
    assert await store.controller_id() is None


async def test_broker_wins_again_after_unclean_restart(
    store: EmbeddedMetadataStore, open_store: OpenStore
) -> None:
    await store.register_broker(BrokerRegistration(1, "h", 1))
    assert await store.try_elect_controller(1) == 1
    store = await reopen(store, open_store)  # no unregister: stale controller row
    assert await store.controller_id() == 1
    await store.register_broker(BrokerRegistration(1, "h", 1))
    assert await store.try_elect_controller(1) == 2
    assert await store.controller_id() == 1


async def test_controller_epoch_survives_clean_restart(
    store: EmbeddedMetadataStore, open_store: OpenStore
) -> None:
    await store.register_broker(BrokerRegistration(1, "h", 1))
    assert await store.try_elect_controller(1) == 1
    await store.unregister_broker(1)
    store = await reopen(store, open_store)
    await store.register_broker(BrokerRegistration(1, "h", 1))
    assert await store.try_elect_controller(1) == 2


# --- topics -----------------------------------------------------------------------------


async def test_create_get_and_list_topics(store: EmbeddedMetadataStore) -> None:
    other = TopicAssignment("audit", "x" * 22, {0: (1, 2, 3)})
    await store.create_topic(TOPIC, {"cleanup.policy": "compact"}, STATES)
    await store.create_topic(other, {}, {})
    assert await store.topic_names() == ["audit", "orders"]
    assert await store.get_topic("orders") == TOPIC
    assert await store.get_topic("audit") == other
    assert await store.get_topic("nope") is None
    assert await store.get_topic_configs("orders") == {"cleanup.policy": "compact"}
    assert await store.get_partition_states("orders") == STATES


async def test_duplicate_topic_is_refused_and_leaves_the_original(
    store: EmbeddedMetadataStore,
) -> None:
    await store.create_topic(TOPIC, {"retention.ms": "1000"}, STATES)
    dup = TopicAssignment("orders", "y" * 22, {0: (2,)})
    with pytest.raises(TopicAlreadyExistsError):
        await store.create_topic(dup, {"retention.ms": "5"}, {0: state(leader=2, isr=(2,))})
    assert await store.get_topic("orders") == TOPIC
    assert await store.get_topic_configs("orders") == {"retention.ms": "1000"}
    assert await store.get_partition_states("orders") == STATES


async def test_states_for_partitions_outside_the_assignment_are_a_bug(
    store: EmbeddedMetadataStore,
) -> None:
    with pytest.raises(ValueError, match=r"\[9\]"):
        await store.create_topic(TOPIC, {}, {**STATES, 9: state()})
    assert await store.topic_names() == []


async def test_delete_topic_removes_everything(store: EmbeddedMetadataStore) -> None:
    await store.create_topic(TOPIC, {"retention.ms": "1000"}, STATES)
    await store.delete_topic("orders")
    assert await store.topic_names() == []
    assert await store.get_topic("orders") is None
    assert await store.get_topic_configs("orders") == {}
    assert await store.get_partition_states("orders") == {}
    # the name is free again, with nothing inherited
    await store.create_topic(TOPIC, {}, {})
    assert await store.get_topic_configs("orders") == {}
    assert await store.get_partition_states("orders") == {}


async def test_delete_unknown_topic(store: EmbeddedMetadataStore) -> None:
    with pytest.raises(UnknownTopicError):
        await store.delete_topic("nope")


# --- configs ----------------------------------------------------------------------------


async def test_set_topic_configs_replaces_all_overrides(store: EmbeddedMetadataStore) -> None:
    await store.create_topic(TOPIC, {"retention.ms": "1000", "cleanup.policy": "compact"}, STATES)
    await store.set_topic_configs("orders", {"retention.ms": "2000", "segment.bytes": "1024"})
    assert await store.get_topic_configs("orders") == {"retention.ms": "2000",
                                                      "segment.bytes": "1024"}
    await store.set_topic_configs("orders", {})
    assert await store.get_topic_configs("orders") == {}


async def test_configs_of_unknown_topic(store: EmbeddedMetadataStore) -> None:
    assert await store.get_topic_configs("nope") == {}
    with pytest.raises(UnknownTopicError):
        await store.set_topic_configs("nope", {"retention.ms": "1"})


# --- partition state --------------------------------------------------------------------


async def test_conditional_update_increments_version(store: EmbeddedMetadataStore) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    assert (await store.get_partition_states("orders"))[1].version == 0
    shrunk = state(leader=1, epoch=1, isr=(1,))
    stored = await store.update_partition_state("orders", 1, shrunk, expected_version=0)
    assert stored == PartitionState(1, 1, (1,), 1, version=1)
    again = await store.update_partition_state("orders", 1, state(epoch=2), expected_version=1)
    assert again.version == 2
    states = await store.get_partition_states("orders")
    assert states[1] == again
    assert states[0].version == 0  # the others are untouched


async def test_stale_version_raises_and_changes_nothing(store: EmbeddedMetadataStore) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    await store.update_partition_state("orders", 0, state(epoch=1), expected_version=0)
    with pytest.raises(BadVersionError, match="expected version 0"):
        await store.update_partition_state("orders", 0, state(epoch=9), expected_version=0)
    assert (await store.get_partition_states("orders"))[0] == PartitionState(1, 1, (1,), 1, 1)


async def test_concurrent_updates_with_one_version_have_one_winner(
    store: EmbeddedMetadataStore,
) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    results = await asyncio.gather(
        *(store.update_partition_state("orders", 0, state(epoch=e), expected_version=0)
          for e in range(1, 9)),
        return_exceptions=True)
    winners = [r for r in results if isinstance(r, PartitionState)]
    assert len(winners) == 1
    assert all(isinstance(r, BadVersionError) for r in results if r not in winners)
    assert (await store.get_partition_states("orders"))[0] == winners[0]


async def test_update_of_unknown_topic_or_partition(store: EmbeddedMetadataStore) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    with pytest.raises(UnknownTopicError):
        await store.update_partition_state("nope", 0, state(), expected_version=0)
    with pytest.raises(UnknownPartitionError):
        await store.update_partition_state("orders", 7, state(), expected_version=0)


async def test_partitions_without_state_are_not_reported_until_written(
    store: EmbeddedMetadataStore,
) -> None:
    await store.create_topic(TOPIC, {}, {0: state()})
    assert set(await store.get_partition_states("orders")) == {0}
    await store.update_partition_state("orders", 2, state(), expected_version=0)
    assert set(await store.get_partition_states("orders")) == {0, 2}


async def test_add_partitions(store: EmbeddedMetadataStore) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    await store.update_partition_state("orders", 0, state(epoch=1), expected_version=0)
    grown = TopicAssignment("orders", TOPIC.topic_id, {**TOPIC.partitions, 3: (1,), 4: (1,)})
    await store.add_partitions(grown, {3: state(), 4: state()})
    assert await store.get_topic("orders") == grown
    states = await store.get_partition_states("orders")
    assert set(states) == {0, 1, 2, 3, 4}
    assert states[0].version == 1 and states[3].version == 0
    await store.add_partitions(grown, {})  # nothing new: no-op
    assert await store.get_topic("orders") == grown


async def test_add_partitions_refuses_changes_to_existing_ones(
    store: EmbeddedMetadataStore,
) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    moved = TopicAssignment("orders", TOPIC.topic_id, {0: (2,), 1: (1,), 2: (1,), 3: (1,)})
    with pytest.raises(InvalidReplicaAssignmentError):
        await store.add_partitions(moved, {})
    shrunk = TopicAssignment("orders", TOPIC.topic_id, {0: (1,), 3: (1,)})
    with pytest.raises(InvalidPartitionsError):
        await store.add_partitions(shrunk, {})
    grown = TopicAssignment("orders", TOPIC.topic_id, {**TOPIC.partitions, 3: (1,)})
    with pytest.raises(ValueError, match="states"):
        await store.add_partitions(grown, {0: state(), 3: state()})
    with pytest.raises(UnknownTopicError):
        await store.add_partitions(TopicAssignment("nope", "z", {0: (1,)}), {})
    assert await store.get_topic("orders") == TOPIC


# --- notifications ----------------------------------------------------------------------


async def test_listeners_hear_every_change(store: EmbeddedMetadataStore) -> None:
    events = record_events(store)
    await store.register_broker(BrokerRegistration(1, "h", 1))
    await store.try_elect_controller(1)
    await store.create_topic(TOPIC, {}, STATES)
    await store.update_partition_state("orders", 0, state(epoch=1), expected_version=0)
    grown = TopicAssignment("orders", TOPIC.topic_id, {**TOPIC.partitions, 3: (1,)})
    await store.add_partitions(grown, {3: state()})
    await store.set_topic_configs("orders", {"retention.ms": "1"})
    await store.delete_topic("orders")
    await store.unregister_broker(1)

    assert [(e.kind, e.topic, e.partition) for e in events] == [
        (EventKind.BROKERS_CHANGED, None, None),
        (EventKind.CONTROLLER_CHANGED, None, None),
        (EventKind.TOPIC_CREATED, "orders", None),
        (EventKind.PARTITION_STATE_CHANGED, "orders", 0),
        (EventKind.TOPIC_CHANGED, "orders", None),
        (EventKind.CONFIG_CHANGED, "orders", None),
        (EventKind.TOPIC_DELETED, "orders", None),
        (EventKind.BROKERS_CHANGED, None, None),
        (EventKind.CONTROLLER_CHANGED, None, None),
    ]
    assert events[1].extra == {"controller_id": 1, "epoch": 1}
    assert events[3].extra == {"leader": 1, "leader_epoch": 1, "version": 1}
    assert events[4].extra == {"added_partitions": [3]}
    assert events[-1].extra == {"controller_id": None, "epoch": 1}


async def test_failed_writes_are_not_announced(store: EmbeddedMetadataStore) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    events = record_events(store)
    with pytest.raises(TopicAlreadyExistsError):
        await store.create_topic(TOPIC, {}, STATES)
    with pytest.raises(BadVersionError):
        await store.update_partition_state("orders", 0, state(), expected_version=5)
    await store.unregister_broker(42)
    assert await store.try_elect_controller(42) is None
    assert events == []


async def test_listeners_run_on_the_loop_after_commit(
    store: EmbeddedMetadataStore, db_path: Path
) -> None:
    seen: list[tuple[int, list[str]]] = []

    def listener(ev: MetadataEvent) -> None:
        # a separate connection already sees the change: it was committed
        engine = sa.create_engine(f"sqlite:///{db_path}")
        try:
            with engine.connect() as conn:
                names = [r[0] for r in conn.exec_driver_sql("SELECT name FROM topics")]
        finally:
            engine.dispose()
        seen.append((threading.get_ident(), names))

    store.subscribe(listener)
    await store.create_topic(TOPIC, {}, STATES)
    assert seen == [(threading.get_ident(), ["orders"])]


async def test_a_failing_listener_does_not_stop_the_others(
    store: EmbeddedMetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_ev: MetadataEvent) -> None:
        raise RuntimeError("boom")

    store.subscribe(broken)
    events = record_events(store)
    await store.create_topic(TOPIC, {}, STATES)
    assert [e.kind for e in events] == [EventKind.TOPIC_CREATED]
    assert "boom" in caplog.text


# --- durability -------------------------------------------------------------------------


async def test_everything_survives_close_and_reopen(
    store: EmbeddedMetadataStore, open_store: OpenStore
) -> None:
    cid = await store.cluster_id()
    reg = await store.register_broker(BrokerRegistration(1, "h", 9092, rack="r"))
    await store.try_elect_controller(1)
    await store.create_topic(TOPIC, {"retention.ms": "1000"}, STATES)
    updated = await store.update_partition_state("orders", 2, state(epoch=3), expected_version=0)

    store = await reopen(store, open_store)
    assert await store.cluster_id() == cid
    assert await store.live_brokers() == [reg]
    assert await store.controller_id() == 1
    assert await store.get_topic("orders") == TOPIC
    assert await store.get_topic_configs("orders") == {"retention.ms": "1000"}
    assert (await store.get_partition_states("orders"))[2] == updated


async def test_several_partition_states_are_written_all_or_nothing(store) -> None:  # type: ignore[no-untyped-def]
    await store.create_topic(TOPIC, {}, STATES)
    current = await store.get_partition_states(TOPIC.name)
    moved = {p: (state(leader=1, epoch=1), current[p].version) for p in (0, 1)}
    stored = await store.update_partition_states(TOPIC.name, moved)
    assert {p: st.leader_epoch for p, st in stored.items()} == {0: 1, 1: 1}
    after = await store.get_partition_states(TOPIC.name)
    assert after[0].leader_epoch == after[1].leader_epoch == 1
    assert after[0].version == stored[0].version
    stale = {1: (state(epoch=2), current[1].version), 2: (state(epoch=2), current[2].version)}
    with pytest.raises(BadVersionError):  # partition 1 moved on: nothing written
        await store.update_partition_states(TOPIC.name, stale)
    final = await store.get_partition_states(TOPIC.name)
    assert final[2].leader_epoch == 0 and final[1].leader_epoch == 1
