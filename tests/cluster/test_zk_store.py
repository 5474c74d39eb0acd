"""ZkMetadataStore on a real ZooKeeper (one chroot per test), with a manual clock.

Mirrors ``tests/unit/broker/test_embedded_store.py`` where the behaviour is the same, and
adds what only ZooKeeper has: several store instances (brokers) on one cluster,
ephemeral nodes and sessions, controller-epoch fencing, and Kafka's znode JSON read raw.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from core.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from core.broker.metadata.store import (
    BadVersionError,
    BrokerRegistration,
    EventKind,
    MetadataEvent,
    MetadataStore,
    MetadataStoreError,
    PartitionState,
    TopicAssignment,
)
from core.broker.metadata.zk.paths import (
    PERSISTENT_PATHS,
    BrokerIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ControllerZNode,
    MalformedZNodeError,
    TopicZNode,
)
from core.broker.metadata.zk.store import ZkMetadataStore
from core.broker.metadata.zk.watches import STATE_READ_BATCH
from core.clock import ManualClock

from .conftest import free_port

SESSION_S = 6.0
WAIT_S = 10.0
TOPIC = TopicAssignment("orders", "T8mVnmYVRVCvG2cHd8hUyA", {0: (1,), 1: (1,), 2: (1,)})


def state(leader: int = 1, epoch: int = 0, isr: tuple[int, ...] = (1,)) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1)


STATES = {p: state() for p in TOPIC.partitions}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


OpenStore = Callable[[], Awaitable[ZkMetadataStore]]


@pytest.fixture
async def open_store(zk_chroot: str, clock: ManualClock) -> AsyncIterator[OpenStore]:
    """Opens started stores (each its own session: one per "broker") on the test's
    chroot; all are closed at the end."""
    made: list[ZkMetadataStore] = []

    async def _open() -> ZkMetadataStore:
        s = ZkMetadataStore(zk_chroot, clock=clock, session_timeout_s=SESSION_S)
        await s.start()
        made.append(s)
        return s

    yield _open
    for s in made:
        await s.close()


@pytest.fixture
async def store(open_store: OpenStore) -> ZkMetadataStore:
    return await open_store()


@pytest.fixture
def raw(store: ZkMetadataStore, zk_chroot: str) -> Iterator[KazooClient]:
    """A plain kazoo client on the chroot (which ``store`` created), to read znodes raw."""
    client = KazooClient(hosts=zk_chroot)
    client.start(timeout=WAIT_S)
    yield client
    client.stop()
    client.close()


def raw_json(raw: KazooClient, path: str) -> Any:
    """The znode's JSON, checked to be compact UTF-8 as Kafka's Jackson writes it."""
    data, _ = raw.get(path)
    obj = json.loads(data)
    assert data == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    return obj


class Events:
    """Records a store's events and the thread each arrived on; ``wait_for`` wakes on
    arrival."""

    def __init__(self, s: ZkMetadataStore) -> None:
        self.seen: list[MetadataEvent] = []
        self.threads: set[int] = set()
        self._arrived = asyncio.Event()
        s.subscribe(self._on_event)

    def _on_event(self, ev: MetadataEvent) -> None:
        self.seen.append(ev)
        self.threads.add(threading.get_ident())
        self._arrived.set()

    def mark(self) -> int:
        return len(self.seen)

    async def wait_for(self, pred: Callable[[MetadataEvent], bool], *, after: int = 0
                       ) -> MetadataEvent:
        """The first event from index ``after`` on that matches ``pred``."""

        async def _wait() -> MetadataEvent:
            checked = after
            while True:
                for ev in self.seen[checked:]:
                    if pred(ev):
                        return ev
                checked = len(self.seen)
                self._arrived.clear()
                await self._arrived.wait()

        return await asyncio.wait_for(_wait(), WAIT_S)


def matching(
    kind: EventKind, topic: str | None = None, **extra: object
) -> Callable[[MetadataEvent], bool]:
    return lambda ev: (ev.kind is kind and (topic is None or ev.topic == topic)
                       and all(ev.extra.get(k) == v for k, v in extra.items()))


async def expire_session(zookeeper: str, s: ZkMetadataStore) -> None:
    """Expire the store's session the way kazoo's own test harness does: a second client
    on the same session id closes it. The store's client then sees LOST."""
    session_id, password = s._client.client_id  # test-only reach into the adapter

    def _expire() -> None:
        other = KazooClient(hosts=zookeeper, client_id=(session_id, password))
        other.start(timeout=WAIT_S)
        other.stop()
        other.close()

    await asyncio.to_thread(_expire)


# --- znode codecs: what other Kafka versions wrote (no server needed) ---------------------


def test_decoders_accept_what_older_and_newer_kafka_wrote() -> None:
    v4_ssl_only = (b'{"version":4,"host":null,"port":-1,"jmx_port":-1,"timestamp":"7",'
                   b'"endpoints":["SSL://[::1]:9093"],'
                   b'"listener_security_protocol_map":{"SSL":"SSL"}}')
    assert BrokerIdZNode.decode(3, v4_ssl_only, czxid=42) == BrokerRegistration(
        3, "::1", 9093, None, 7, 42, scheme="https")
    assert TopicZNode.decode("t", b'{"version":1,"partitions":{"1":[2],"0":[1,2]}}') == \
        TopicAssignment("t", "", {0: (1, 2), 1: (2,)})
    assert ControllerZNode.decode(
        b'{"version":2,"brokerid":5,"timestamp":"1","kraftControllerEpoch":-1}') == 5
    assert ConfigEntityChangeNotificationSequenceZNode.decode(
        b'{"version":1,"entity_type":"topics","entity_name":"t"}') == ("topics", "t")


@pytest.mark.parametrize("data", [b"", b"not json", b"[1]", b'{"version":3}',
                                  b'{"partitions":{"x":[1]}}'])
def test_malformed_topic_znodes_are_reported_as_such(data: bytes) -> None:
    with pytest.raises(MalformedZNodeError):
        TopicZNode.decode("t", data)


async def test_a_malformed_znode_is_a_metadata_store_error(
    store: ZkMetadataStore, raw: KazooClient
) -> None:
    raw.create("/brokers/topics/broken", b'{"version":3}')
    with pytest.raises(MetadataStoreError, match="broken"):
        await store.get_topic("broken")


# --- lifecycle --------------------------------------------------------------------------


async def test_start_creates_a_nested_chroot_and_kafkas_persistent_paths(
    zookeeper: str, zk_chroot: str, clock: ManualClock
) -> None:
    s = ZkMetadataStore(f"{zk_chroot}/nested/", clock=clock, session_timeout_s=SESSION_S)
    await s.start()
    try:
        chroot = "/" + zk_chroot.split("/", 1)[1] + "/nested"
        client = KazooClient(hosts=zookeeper)
        client.start(timeout=WAIT_S)
        try:
            for path in PERSISTENT_PATHS:
                assert client.exists(chroot + path), path
        finally:
            client.stop()
            client.close()
    finally:
        await s.close()


async def test_calls_before_start_fail_clearly(zk_chroot: str, clock: ManualClock) -> None:
    s = ZkMetadataStore(zk_chroot, clock=clock)
    with pytest.raises(RuntimeError, match="not started"):
        await s.topic_names()


async def test_unreachable_zookeeper_is_a_retriable_error(clock: ManualClock) -> None:
    s = ZkMetadataStore(f"127.0.0.1:{free_port()}/franz", clock=clock, session_timeout_s=1.0)
    with pytest.raises(MetadataStoreError, match="cannot connect") as info:
        await s.start()
    assert info.value.retriable


def test_is_a_metadata_store(zk_chroot: str, clock: ManualClock) -> None:
    s: MetadataStore = ZkMetadataStore(zk_chroot, clock=clock)
    assert callable(s.subscribe)


# --- cluster id -------------------------------------------------------------------------


async def test_cluster_id_is_created_once_and_shared(
    store: ZkMetadataStore, open_store: OpenStore, raw: KazooClient
) -> None:
    cid = await store.cluster_id()
    assert len(cid) == 22 and not cid.startswith("-")
    assert len(base64.urlsafe_b64decode(cid + "==")) == 16
    assert raw_json(raw, "/cluster/id") == {"version": "1", "id": cid}
    await store.close()
    assert await (await open_store()).cluster_id() == cid


# --- brokers ----------------------------------------------------------------------------


async def test_registration_is_ephemeral_kafka_json_with_czxid_epoch(
    store: ZkMetadataStore, raw: KazooClient, clock: ManualClock
) -> None:
    reg = await store.register_broker(BrokerRegistration(1, "h1", 9092, rack="r1"))
    _, stat = raw.get("/brokers/ids/1")
    assert reg == BrokerRegistration(1, "h1", 9092, "r1", clock.now_ms(), stat.czxid)
    assert stat.ephemeralOwner != 0
    assert raw_json(raw, "/brokers/ids/1") == {  # no Kafka endpoint: host null, port -1
        "version": 5, "host": None, "port": -1, "endpoints": ["HTTP://h1:9092"],
        "listener_security_protocol_map": {"HTTP": "PLAINTEXT"}, "jmx_port": -1,
        "timestamp": str(clock.now_ms()), "rack": "r1", "features": {}}
    other = await store.register_broker(BrokerRegistration(2, "h2", 9093, timestamp_ms=5))
    assert "rack" not in raw_json(raw, "/brokers/ids/2")
    assert other.timestamp_ms == 5 and other.epoch > reg.epoch
    assert await store.live_brokers() == [reg, other]


async def test_unregister_and_register_again(store: ZkMetadataStore) -> None:
    first = await store.register_broker(BrokerRegistration(1, "h", 1))
    await store.unregister_broker(1)
    assert await store.live_brokers() == []
    await store.unregister_broker(1)  # already gone: nothing to do
    again = await store.register_broker(BrokerRegistration(1, "h", 2))
    assert again.epoch > first.epoch
    assert [b.port for b in await store.live_brokers()] == [2]


async def test_closed_session_removes_the_registration_for_the_others(
    open_store: OpenStore,
) -> None:
    a, b = await open_store(), await open_store()
    events = Events(b)
    await a.register_broker(BrokerRegistration(1, "h", 1))
    await events.wait_for(matching(EventKind.BROKERS_CHANGED, broker_id=1, registered=True))
    await a.close()  # no unregister: ZooKeeper drops the ephemeral node with the session
    await events.wait_for(matching(EventKind.BROKERS_CHANGED, broker_id=1, registered=False))
    assert await b.live_brokers() == []


async def test_registration_left_by_another_session_is_replaced(
    open_store: OpenStore, raw: KazooClient
) -> None:
    old_store, new_store = await open_store(), await open_store()
    old = await old_store.register_broker(BrokerRegistration(1, "old-host", 1))
    assert await old_store.try_elect_controller(1) == 1
    # the broker restarts before its old session expired: same id, new session
    new = await new_store.register_broker(BrokerRegistration(1, "new-host", 2))
    assert new.epoch > old.epoch
    assert await new_store.live_brokers() == [new]
    assert raw.get("/brokers/ids/1")[1].ephemeralOwner == new_store._client.client_id[0]
    assert await new_store.controller_id() is None  # released with the old registration
    assert await new_store.try_elect_controller(1) == 2


async def test_expired_session_registers_again_with_a_new_epoch(
    zookeeper: str, open_store: OpenStore
) -> None:
    a, b = await open_store(), await open_store()
    mine, theirs = Events(a), Events(b)
    registered = matching(EventKind.BROKERS_CHANGED, broker_id=1, registered=True)
    first = await a.register_broker(BrokerRegistration(1, "h", 1))
    await theirs.wait_for(registered)
    mine_mark, theirs_mark = mine.mark(), theirs.mark()
    await expire_session(zookeeper, a)
    await mine.wait_for(registered, after=mine_mark)
    [again] = await b.live_brokers()
    assert again.epoch > first.epoch and again.host == "h"
    await theirs.wait_for(registered, after=theirs_mark)


async def test_expired_session_does_not_take_back_an_id_registered_meanwhile(
    zookeeper: str, open_store: OpenStore, raw: KazooClient
) -> None:
    old, new = await open_store(), await open_store()
    seen = Events(new)
    await old.register_broker(BrokerRegistration(1, "old-host", 1))
    await seen.wait_for(matching(EventKind.BROKERS_CHANGED, broker_id=1, registered=True))
    async with old._lock:  # hold back old's re-registration until the id is taken
        await expire_session(zookeeper, old)
        await seen.wait_for(matching(EventKind.BROKERS_CHANGED, broker_id=1, registered=False))
        await new.register_broker(BrokerRegistration(1, "new-host", 2))
    for _ in range(500):  # old gives the id up once its re-registration has run
        if 1 not in old._registrations:
            break
        await asyncio.sleep(0.02)
    assert 1 not in old._registrations
    assert raw.get("/brokers/ids/1")[1].ephemeralOwner == new._client.client_id[0]
    assert [b.host for b in await old.live_brokers()] == ["new-host"]


# --- controller -------------------------------------------------------------------------


async def test_first_registered_broker_wins_the_election(
    store: ZkMetadataStore, raw: KazooClient, clock: ManualClock
) -> None:
    assert await store.controller_id() is None
    assert await store.try_elect_controller(7) is None  # not registered
    await store.register_broker(BrokerRegistration(1, "h", 1))
    await store.register_broker(BrokerRegistration(2, "h", 2))
    assert await store.try_elect_controller(1) == 1
    assert await store.try_elect_controller(2) is None
    assert await store.try_elect_controller(1) is None  # already controller
    assert await store.controller_id() == 1
    assert raw_json(raw, "/controller") == {"version": 1, "brokerid": 1,
                                            "timestamp": str(clock.now_ms())}
    assert raw.get("/controller")[1].ephemeralOwner != 0
    assert raw.get("/controller_epoch")[0] == b"1"


async def test_two_brokers_race_and_exactly_one_wins(open_store: OpenStore) -> None:
    a, b = await open_store(), await open_store()
    await a.register_broker(BrokerRegistration(1, "h", 1))
    await b.register_broker(BrokerRegistration(2, "h", 2))
    results = await asyncio.gather(a.try_elect_controller(1), b.try_elect_controller(2))
    assert sorted(results, key=str) == [1, None]
    winner_id = 1 if results[0] == 1 else 2
    assert await a.controller_id() == winner_id == await b.controller_id()


async def test_after_the_controller_session_ends_another_wins_the_next_epoch(
    open_store: OpenStore,
) -> None:
    a, b = await open_store(), await open_store()
    events = Events(b)
    await a.register_broker(BrokerRegistration(1, "h", 1))
    await b.register_broker(BrokerRegistration(2, "h", 2))
    assert await a.try_elect_controller(1) == 1
    await events.wait_for(matching(EventKind.CONTROLLER_CHANGED, controller_id=1, epoch=1))
    assert await b.try_elect_controller(2) is None
    await a.close()
    await events.wait_for(matching(EventKind.CONTROLLER_CHANGED, controller_id=None, epoch=1))
    assert await b.try_elect_controller(2) == 2
    assert await b.controller_id() == 2


async def test_controller_role_ends_with_its_registration(store: ZkMetadataStore) -> None:
    await store.register_broker(BrokerRegistration(1, "h", 1))
    await store.register_broker(BrokerRegistration(2, "h", 2))
    assert await store.try_elect_controller(1) == 1
    await store.unregister_broker(1)
    assert await store.controller_id() is None
    assert await store.try_elect_controller(2) == 2


async def test_deposed_controller_writes_are_fenced_by_the_epoch(
    zookeeper: str, open_store: OpenStore
) -> None:
    a, b = await open_store(), await open_store()
    mine = Events(a)
    await a.register_broker(BrokerRegistration(1, "h", 1))
    assert await a.try_elect_controller(1) == 1
    await a.create_topic(TOPIC, {}, STATES)
    mark = mine.mark()
    await expire_session(zookeeper, a)  # a stalls past its session; b takes over
    await b.register_broker(BrokerRegistration(2, "h", 2))
    assert await b.try_elect_controller(2) == 2
    await mine.wait_for(matching(EventKind.BROKERS_CHANGED, broker_id=1, registered=True),
                        after=mark)  # a is back, on a new session

    with pytest.raises(NotControllerError, match="epoch 1"):
        await a.update_partition_state("orders", 0, state(epoch=9), expected_version=0)
    with pytest.raises(NotControllerError):
        await a.create_topic(TopicAssignment("late", "x" * 22, {0: (1,)}), {}, {})
    assert (await b.get_partition_states("orders"))[0].version == 0
    assert await b.topic_names() == ["orders"]
    # told it lost, the store drops the fence: a plain broker's writes are not checked
    assert await a.try_elect_controller(1) is None
    stored = await a.update_partition_state("orders", 0, state(epoch=1), expected_version=0)
    assert stored.version == 1


# --- topics -----------------------------------------------------------------------------


async def test_create_get_and_list_topics_in_kafka_json(
    store: ZkMetadataStore, raw: KazooClient
) -> None:
    other = TopicAssignment("audit", "x" * 22, {0: (1, 2, 3)})
    await store.create_topic(TOPIC, {"cleanup.policy": "compact"}, STATES)
    await store.create_topic(other, {}, {})
    assert await store.topic_names() == ["audit", "orders"]
    assert await store.get_topic("orders") == TOPIC
    assert await store.get_topic("audit") == other
    assert await store.get_topic("nope") is None
    assert await store.get_topic_configs("orders") == {"cleanup.policy": "compact"}
    assert await store.get_partition_states("orders") == STATES
    assert await store.get_partition_states("audit") == {}

    assert raw_json(raw, "/brokers/topics/orders") == {
        "version": 3, "topic_id": TOPIC.topic_id, "partitions": {"0": [1], "1": [1], "2": [1]},
        "adding_replicas": {}, "removing_replicas": {}}
    assert raw_json(raw, "/brokers/topics/orders/partitions/1/state") == {
        "controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
    assert raw_json(raw, "/config/topics/orders") == {
        "version": 1, "config": {"cleanup.policy": "compact"}}
    assert raw_json(raw, "/config/topics/audit") == {"version": 1, "config": {}}
    assert raw.get_children("/brokers/topics/audit/partitions") == ["0"]
    assert raw.exists("/brokers/topics/audit/partitions/0/state") is None


async def test_duplicate_topic_is_refused_and_leaves_the_original(
    store: ZkMetadataStore,
) -> None:
    await store.create_topic(TOPIC, {"retention.ms": "1000"}, STATES)
    dup = TopicAssignment("orders", "y" * 22, {0: (2,)})
    with pytest.raises(TopicAlreadyExistsError):
        await store.create_topic(dup, {"retention.ms": "5"}, {0: state(leader=2, isr=(2,))})
    assert await store.get_topic("orders") == TOPIC
    assert await store.get_topic_configs("orders") == {"retention.ms": "1000"}
    assert await store.get_partition_states("orders") == STATES


async def test_states_for_partitions_outside_the_assignment_are_a_bug(
    store: ZkMetadataStore,
) -> None:
    with pytest.raises(ValueError, match=r"\[9\]"):
        await store.create_topic(TOPIC, {}, {**STATES, 9: state()})
    assert await store.topic_names() == []


async def test_delete_topic_removes_every_znode(store: ZkMetadataStore, raw: KazooClient) -> None:
    await store.create_topic(TOPIC, {"retention.ms": "1000"}, STATES)
    await store.delete_topic("orders")
    assert await store.topic_names() == []
    assert await store.get_topic("orders") is None
    assert await store.get_topic_configs("orders") == {}
    assert await store.get_partition_states("orders") == {}
    assert raw.exists("/config/topics/orders") is None
    assert raw.get_children("/admin/delete_topics") == []
    # the name is free again, with nothing inherited
    await store.create_topic(TOPIC, {}, {})
    assert await store.get_topic_configs("orders") == {}
    assert await store.get_partition_states("orders") == {}


async def test_delete_completes_a_request_left_by_a_crash(
    store: ZkMetadataStore, raw: KazooClient
) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    raw.create("/admin/delete_topics/orders")
    await store.delete_topic("orders")
    assert raw.get_children("/admin/delete_topics") == []


async def test_delete_unknown_topic(store: ZkMetadataStore) -> None:
    with pytest.raises(UnknownTopicError):
        await store.delete_topic("nope")


# --- configs ----------------------------------------------------------------------------


async def test_set_topic_configs_replaces_all_and_notifies(
    store: ZkMetadataStore, raw: KazooClient
) -> None:
    await store.create_topic(TOPIC, {"retention.ms": "1000", "cleanup.policy": "compact"}, STATES)
    await store.set_topic_configs("orders", {"retention.ms": "2000", "segment.bytes": "1024"})
    assert await store.get_topic_configs("orders") == {"retention.ms": "2000",
                                                      "segment.bytes": "1024"}
    assert raw.get_children("/config/changes") == ["config_change_0000000000"]
    assert raw_json(raw, "/config/changes/config_change_0000000000") == {
        "version": 2, "entity_path": "topics/orders"}
    await store.set_topic_configs("orders", {})
    assert await store.get_topic_configs("orders") == {}


async def test_configs_of_unknown_topic(store: ZkMetadataStore, raw: KazooClient) -> None:
    assert await store.get_topic_configs("nope") == {}
    with pytest.raises(UnknownTopicError):
        await store.set_topic_configs("nope", {"retention.ms": "1"})
    assert raw.get_children("/config/changes") == []


# --- partition state --------------------------------------------------------------------


async def test_conditional_update_increments_the_zk_version(
    store: ZkMetadataStore, raw: KazooClient
) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    shrunk = state(leader=1, epoch=1, isr=(1,))
    stored = await store.update_partition_state("orders", 1, shrunk, expected_version=0)
    assert stored == PartitionState(1, 1, (1,), 1, version=1)
    assert raw.get("/brokers/topics/orders/partitions/1/state")[1].version == 1
    again = await store.update_partition_state("orders", 1, state(epoch=2), expected_version=1)
    assert again.version == 2
    states = await store.get_partition_states("orders")
    assert states[1] == again
    assert states[0].version == 0  # the others are untouched


async def test_stale_version_raises_and_changes_nothing(store: ZkMetadataStore) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    await store.update_partition_state("orders", 0, state(epoch=1), expected_version=0)
    with pytest.raises(BadVersionError, match="expected version 0, stored version is 1"):
        await store.update_partition_state("orders", 0, state(epoch=9), expected_version=0)
    assert (await store.get_partition_states("orders"))[0] == PartitionState(1, 1, (1,), 1, 1)


async def test_concurrent_updates_from_two_brokers_have_one_winner(
    open_store: OpenStore,
) -> None:
    a, b = await open_store(), await open_store()
    await a.create_topic(TOPIC, {}, STATES)
    results = await asyncio.gather(
        *(s.update_partition_state("orders", 0, state(epoch=e), expected_version=0)
          for e in range(1, 9) for s in (a, b)),
        return_exceptions=True)
    winners = [r for r in results if isinstance(r, PartitionState)]
    assert len(winners) == 1
    assert all(isinstance(r, BadVersionError) for r in results if r not in winners)
    assert (await b.get_partition_states("orders"))[0] == winners[0]


async def test_update_of_unknown_topic_or_partition(store: ZkMetadataStore) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    with pytest.raises(UnknownTopicError):
        await store.update_partition_state("nope", 0, state(), expected_version=0)
    with pytest.raises(UnknownPartitionError):
        await store.update_partition_state("orders", 7, state(), expected_version=0)


async def test_partitions_without_state_are_not_reported_until_written(
    store: ZkMetadataStore,
) -> None:
    await store.create_topic(TOPIC, {}, {0: state()})
    assert set(await store.get_partition_states("orders")) == {0}
    with pytest.raises(BadVersionError, match="stored version is 0"):
        await store.update_partition_state("orders", 2, state(), expected_version=3)
    first = await store.update_partition_state("orders", 2, state(), expected_version=0)
    assert first.version == 1  # as the embedded store numbers a first write
    assert set(await store.get_partition_states("orders")) == {0, 2}


async def test_add_partitions(store: ZkMetadataStore, raw: KazooClient) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    await store.update_partition_state("orders", 0, state(epoch=1), expected_version=0)
    grown = TopicAssignment("orders", TOPIC.topic_id, {**TOPIC.partitions, 3: (1,), 4: (1,)})
    await store.add_partitions(grown, {3: state(), 4: state()})
    assert await store.get_topic("orders") == grown
    states = await store.get_partition_states("orders")
    assert set(states) == {0, 1, 2, 3, 4}
    assert states[0].version == 1 and states[3].version == 0
    assert raw_json(raw, "/brokers/topics/orders")["partitions"]["4"] == [1]
    await store.add_partitions(grown, {})  # nothing new: no-op
    assert await store.get_topic("orders") == grown


async def test_add_partitions_refuses_changes_to_existing_ones(store: ZkMetadataStore) -> None:
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


async def test_listeners_hear_every_local_change_before_the_call_returns(
    store: ZkMetadataStore,
) -> None:
    events: list[MetadataEvent] = []
    store.subscribe(events.append)
    await store.register_broker(BrokerRegistration(1, "h", 1))
    await store.try_elect_controller(1)
    await store.create_topic(TOPIC, {}, STATES)
    await store.update_partition_state("orders", 0, state(epoch=1), expected_version=0)
    grown = TopicAssignment("orders", TOPIC.topic_id, {**TOPIC.partitions, 3: (1,)})
    await store.add_partitions(grown, {3: state()})
    await store.set_topic_configs("orders", {"retention.ms": "1"})
    await store.delete_topic("orders")
    await store.unregister_broker(1)
    await asyncio.sleep(0.5)  # the store's own watches fire too: they must add nothing

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
    assert events[0].extra == {"broker_id": 1, "registered": True}
    assert events[1].extra == {"controller_id": 1, "epoch": 1}
    assert events[2].extra == {"partitions": 3}
    assert events[3].extra == {"leader": 1, "leader_epoch": 1, "version": 1}
    assert events[4].extra == {"added_partitions": [3]}
    assert events[-2].extra == {"broker_id": 1, "registered": False}
    assert events[-1].extra == {"controller_id": None, "epoch": 1}


async def test_another_broker_hears_every_change_on_its_loop(open_store: OpenStore) -> None:
    a, b = await open_store(), await open_store()
    seen = Events(b)

    async def step(write: Awaitable[object], expect: Callable[[MetadataEvent], bool]) -> None:
        await write
        await seen.wait_for(expect)

    await step(a.register_broker(BrokerRegistration(1, "h", 1)),
               matching(EventKind.BROKERS_CHANGED, broker_id=1, registered=True))
    await step(a.try_elect_controller(1), matching(EventKind.CONTROLLER_CHANGED, controller_id=1,
                                              epoch=1))
    await step(a.create_topic(TOPIC, {}, STATES),
               matching(EventKind.TOPIC_CREATED, "orders", partitions=3))
    await step(a.update_partition_state("orders", 2, state(epoch=1), expected_version=0),
               matching(EventKind.PARTITION_STATE_CHANGED, "orders", leader=1, leader_epoch=1,
                   version=1))
    grown = TopicAssignment("orders", TOPIC.topic_id, {**TOPIC.partitions, 3: (1,)})
    await step(a.add_partitions(grown, {3: state()}),
               matching(EventKind.TOPIC_CHANGED, "orders", added_partitions=[3]))
    await step(a.update_partition_state("orders", 3, state(epoch=4), expected_version=0),
               matching(EventKind.PARTITION_STATE_CHANGED, "orders", leader_epoch=4))
    await step(a.set_topic_configs("orders", {"retention.ms": "1"}),
               matching(EventKind.CONFIG_CHANGED, "orders"))
    await step(a.delete_topic("orders"), matching(EventKind.TOPIC_DELETED, "orders"))
    await step(a.unregister_broker(1), matching(EventKind.CONTROLLER_CHANGED, controller_id=None))
    await seen.wait_for(matching(EventKind.BROKERS_CHANGED, broker_id=1, registered=False))

    assert [e.partition for e in seen.seen if e.kind is EventKind.PARTITION_STATE_CHANGED] \
        == [2, 3]  # announced once each, and nothing for states created with the topic
    assert seen.threads == {threading.get_ident()}


async def test_failed_writes_are_not_announced(store: ZkMetadataStore) -> None:
    await store.create_topic(TOPIC, {}, STATES)
    await asyncio.sleep(0.2)  # let the store's own watches settle
    events: list[MetadataEvent] = []
    store.subscribe(events.append)
    with pytest.raises(TopicAlreadyExistsError):
        await store.create_topic(TOPIC, {}, STATES)
    with pytest.raises(BadVersionError):
        await store.update_partition_state("orders", 0, state(), expected_version=5)
    await store.unregister_broker(42)
    assert await store.try_elect_controller(42) is None
    await asyncio.sleep(0.2)
    assert events == []


async def test_a_failing_listener_does_not_stop_the_others(
    store: ZkMetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_ev: MetadataEvent) -> None:
        raise RuntimeError("boom")

    store.subscribe(broken)
    events: list[MetadataEvent] = []
    store.subscribe(events.append)
    await store.create_topic(TOPIC, {}, STATES)
    assert [e.kind for e in events] == [EventKind.TOPIC_CREATED]
    assert "boom" in caplog.text


async def test_producer_id_blocks_never_overlap_between_brokers(
        open_store: OpenStore, raw: KazooClient) -> None:
    a, b = await open_store(), await open_store()
    blocks = await asyncio.gather(*(s.allocate_producer_ids(i % 2, 1000)
                                    for i, s in enumerate([a, b] * 6)))
    ids = [set(range(start, end + 1)) for start, end in blocks]
    assert all(len(block) == 1000 for block in ids)
    assert len(set().union(*ids)) == 12 * 1000  # racing claims: 12 disjoint blocks
    assert min(start for start, _ in blocks) == 0
    latest = raw_json(raw, "/latest_producer_id_block")
    assert latest["version"] == 1 and latest["block_end"] == str(12 * 1000 - 1)
    assert latest["block_start"] == str(11 * 1000) and latest["broker"] in (0, 1)


async def test_replicas_per_broker_counts_every_stored_topic(open_store: OpenStore) -> None:
    a, b = await open_store(), await open_store()
    await a.create_topic(TOPIC, {}, STATES)
    other = TopicAssignment("other", "Q8mVnmYVRVCvG2cHd8hUyA", {0: (2, 1), 1: (1, 3)})
    await b.create_topic(other, {}, {p: state(leader=r[0], isr=r) for p, r in
                                     other.partitions.items()})
    assert await a.replicas_per_broker() == {1: 5, 2: 1, 3: 1}


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


async def test_another_broker_hears_every_state_of_a_large_topic_once(
    open_store: OpenStore,
) -> None:
    """Partition states are watched in pipelined batches (``STATE_READ_BATCH``): a
    topic with more partitions than one batch, every state moved twice by another
    broker, is heard in full, each change once, and a state written for the first time
    (a partition created without one) is heard too."""
    n = STATE_READ_BATCH + 700
    big = TopicAssignment("big", "T8mVnmYVRVCvG2cHd8hUyB", {p: (1,) for p in range(n)})
    a = await open_store()
    await a.create_topic(big, {}, {p: state() for p in range(n - 1)})  # the last: no state
    b = await open_store()
    seen = Events(b)
    for epoch in (1, 2):
        current = await a.get_partition_states("big")
        for lo in range(0, n - 1, 200):
            await a.update_partition_states("big", {
                p: (state(epoch=epoch), current[p].version) for p in range(lo, min(lo + 200, n - 1))})
    await a.update_partition_state("big", n - 1, state(epoch=5), expected_version=0)
    await seen.wait_for(lambda e: e.kind is EventKind.PARTITION_STATE_CHANGED
                        and e.partition == n - 1 and e.extra["leader_epoch"] == 5)

    def heard() -> list[tuple[int | None, object]]:
        return [(e.partition, e.extra["leader_epoch"]) for e in seen.seen
                if e.kind is EventKind.PARTITION_STATE_CHANGED and e.topic == "big"]

    async def all_heard() -> None:
        while {p for p, epoch in heard() if epoch == 2} != set(range(n - 1)):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(all_heard(), WAIT_S)
    assert len(heard()) == len(set(heard()))  # no change announced twice
    assert (await b.get_partition_states("big"))[n - 1].leader_epoch == 5


async def test_state_watches_come_back_after_the_session_expires(
    zookeeper: str, open_store: OpenStore
) -> None:
    a, b = await open_store(), await open_store()
    seen = Events(b)
    await a.create_topic(TOPIC, {}, STATES)
    await seen.wait_for(matching(EventKind.TOPIC_CREATED, "orders"))
    await expire_session(zookeeper, b)
    await a.update_partition_state("orders", 1, state(epoch=7), expected_version=0)
    await seen.wait_for(matching(EventKind.PARTITION_STATE_CHANGED, "orders", leader_epoch=7))
    mark = seen.mark()
    await a.update_partition_state("orders", 1, state(epoch=8), expected_version=1)
    await seen.wait_for(matching(EventKind.PARTITION_STATE_CHANGED, "orders", leader_epoch=8),
                        after=mark)
