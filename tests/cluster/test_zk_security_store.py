"""ZkSecurityStore on a real ZooKeeper (one chroot per test): users and ACLs on Kafka's
znodes read back raw, change notifications between stores (each its own session, as
two brokers or an offline command and a broker), optimistic concurrency, and names that
cannot be znodes."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from core.broker.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from core.broker.security.credentials import StoredCredential
from core.broker.security.store import SecurityChange
from core.broker.security.zk_store import (
    ZkSecurityStore,
    binding_key,
    decode_extended_acl_change,
    decode_literal_acl_change,
)

SESSION_S = 6.0
WAIT_S = 10.0

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
ALL_TOPICS = ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL)
LOGS = ResourcePattern(ResourceType.TOPIC, "logs-", PatternType.PREFIXED)
GROUP = ResourcePattern(ResourceType.GROUP, "billing.v1", PatternType.LITERAL)
CLUSTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
TXN = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-1", PatternType.PREFIXED)


def acl(pattern: ResourcePattern, op: Operation, principal: str = "User:alice",
        permission: Permission = Permission.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(pattern, AccessControlEntry(principal, host, op, permission))


def cred(pw: str = "pw") -> StoredCredential:
    return StoredCredential.create(pw, n=1024)


OpenStore = Callable[[], Awaitable[ZkSecurityStore]]


@pytest.fixture
async def open_store(zk_chroot: str) -> AsyncIterator[OpenStore]:
    """Opens started stores on the test's chroot, each with its own session; all are
    closed at the end."""
    made: list[ZkSecurityStore] = []

    async def _open() -> ZkSecurityStore:
        s = ZkSecurityStore(zk_chroot, session_timeout_s=SESSION_S)
        await s.start()
        made.append(s)
        return s

    yield _open
    for s in made:
        await s.close()


@pytest.fixture
async def store(open_store: OpenStore) -> ZkSecurityStore:
    return await open_store()


@pytest.fixture
def raw(store: ZkSecurityStore, zk_chroot: str) -> Iterator[KazooClient]:
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


def notices(raw: KazooClient, directory: str) -> list[bytes]:
    """The data of the notifications under ``directory``, in sequence order."""
    return [raw.get(f"{directory}/{c}")[0] for c in sorted(raw.get_children(directory))]


class Changes:
    """Records a store's listener calls; ``wait_for`` wakes on arrival."""

    def __init__(self, s: ZkSecurityStore) -> None:
        self.seen: list[SecurityChange] = []
        self.threads: set[int] = set()
        self._arrived = asyncio.Event()
        s.watch(self._on_change)

    def _on_change(self, change: SecurityChange) -> None:
        self.threads.add(threading.get_ident())
        self.seen.append(change)
        self._arrived.set()

    async def wait_for(self, change: SecurityChange) -> None:
        async def _wait() -> None:
            while change not in self.seen:
                self._arrived.clear()
                await self._arrived.wait()

        await asyncio.wait_for(_wait(), WAIT_S)


# --- users --------------------------------------------------------------------------------


async def test_users_round_trip_on_kafkas_znodes(store: ZkSecurityStore, raw: KazooClient
                                                 ) -> None:
    assert await store.get_user("alice") is None
    first = cred("pw")
    await store.put_user("alice", first)
    await store.put_user("bob", cred("other"))

    got = await store.get_user("alice")
    assert got == first and got.verify("pw")
    assert await store.list_users() == ["alice", "bob"]
    assert raw_json(raw, "/config/users/alice") == {
        "version": 1, "config": {"scrypt": first.encode()}}
    assert raw.get("/config/users/alice")[0].startswith(b'{"version":1,"config":{"scrypt":"')
    assert [json.loads(n) for n in notices(raw, "/config/changes")] == [
        {"version": 2, "entity_path": "users/alice"}, {"version": 2, "entity_path": "users/bob"}]

    second = cred("new")
    await store.put_user("alice", second)
    assert await store.get_user("alice") == second

    assert await store.delete_user("alice") is True
    assert raw.exists("/config/users/alice") is None
    assert await store.delete_user("alice") is False
    assert await store.get_user("alice") is None
    assert await store.list_users() == ["bob"]
    assert [json.loads(n)["entity_path"] for n in notices(raw, "/config/changes")] == [
        "users/alice", "users/bob", "users/alice", "users/alice"]


async def test_a_users_other_configs_survive_its_credential(
    store: ZkSecurityStore, raw: KazooClient
) -> None:
    """A quota set by Kafka's tools on the same znode is kept (and is no user by itself)."""
    raw.create("/config/users/carol", b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
    assert await store.list_users() == []
    c = cred()
    await store.put_user("carol", c)
    assert raw_json(raw, "/config/users/carol")["config"] == {
        "producer_byte_rate": "1024", "scrypt": c.encode()}
    assert await store.delete_user("carol") is True
    assert raw_json(raw, "/config/users/carol") == {
        "version": 1, "config": {"producer_byte_rate": "1024"}}


# --- ACLs ---------------------------------------------------------------------------------


async def test_acls_on_kafkas_znodes(store: ZkSecurityStore, raw: KazooClient) -> None:
    bindings = [
        acl(ORDERS, Operation.READ),
        acl(ORDERS, Operation.WRITE, "User:bob", Permission.DENY, "10.0.0.1"),
        acl(ALL_TOPICS, Operation.DESCRIBE_CONFIGS, "User:*"),
        acl(LOGS, Operation.ALL),
        acl(GROUP, Operation.READ),
        acl(CLUSTER, Operation.CLUSTER_ACTION, "User:broker"),
        acl(CLUSTER, Operation.IDEMPOTENT_WRITE),
        acl(TXN, Operation.WRITE),
    ]
    await store.add_acls(bindings)
    await store.add_acls(bindings[:2])  # already there: nothing changes

    assert await store.all_acls() == sorted(bindings, key=binding_key)
    assert await store.acls_of(ORDERS) == bindings[:2]  # in the order added
    assert await store.acls_of(CLUSTER) == bindings[5:7]
    assert await store.acls_of(LOGS) == [bindings[3]]
    assert await store.acls_of(ResourcePattern(ResourceType.TOPIC, "logs-",
                                               PatternType.LITERAL)) == []

    assert raw_json(raw, "/kafka-acl/Topic/orders") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
         "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write",
         "host": "10.0.0.1"}]}
    assert raw_json(raw, "/kafka-acl/Topic/*")["acls"] == [
        {"principal": "User:*", "permissionType": "Allow", "operation": "DescribeConfigs",
         "host": "*"}]
    assert raw_json(raw, "/kafka-acl-extended/prefixed/Topic/logs-")["acls"][0][
        "operation"] == "All"
    assert raw_json(raw, "/kafka-acl/Group/billing.v1")["acls"][0]["operation"] == "Read"
    assert [e["operation"] for e in raw_json(raw, "/kafka-acl/Cluster/kafka-cluster")[
        "acls"]] == ["ClusterAction", "IdempotentWrite"]
    assert raw_json(raw, "/kafka-acl-extended/prefixed/TransactionalId/tx-1")["acls"][0][
        "operation"] == "Write"

    # one notification per resource written, in the order written
    assert notices(raw, "/kafka-acl-changes") == [
        b"Topic:LITERAL:orders", b"Topic:LITERAL:*", b"Group:LITERAL:billing.v1",
        b"Cluster:LITERAL:kafka-cluster"]
    assert [json.loads(n) for n in notices(raw, "/kafka-acl-extended-changes")] == [
        {"version": 1, "resourceType": "Topic", "name": "logs-", "patternType": "PREFIXED"},
        {"version": 1, "resourceType": "TransactionalId", "name": "tx-1",
         "patternType": "PREFIXED"}]

    # removing: what was there comes back; the last ACL of a resource takes its znode
    assert await store.remove_acls([bindings[0], acl(ORDERS, Operation.ALTER)]) == [bindings[0]]
    assert raw_json(raw, "/kafka-acl/Topic/orders")["acls"][0]["principal"] == "User:bob"
    assert await store.remove_acls([bindings[1], bindings[3]]) == [bindings[1], bindings[3]]
    assert raw.exists("/kafka-acl/Topic/orders") is None
    assert raw.exists("/kafka-acl-extended/prefixed/Topic/logs-") is None
    assert await store.remove_acls([bindings[1]]) == []
    assert await store.all_acls() == sorted(bindings[2:3] + bindings[4:], key=binding_key)
    assert notices(raw, "/kafka-acl-changes")[-2:] == [b"Topic:LITERAL:orders"] * 2


async def test_malformed_acl_znodes_are_skipped_and_unknown_entries_kept(
    store: ZkSecurityStore, raw: KazooClient
) -> None:
    raw.create("/kafka-acl/Topic/broken", b"not json")
    newer_kafka = {"principal": "User:x", "permissionType": "Allow",
                   "operation": "CreateTokens", "host": "*", "extra": 1}
    raw.create("/kafka-acl/Topic/orders", json.dumps({"version": 1, "future": True, "acls": [
        newer_kafka, {"principal": "User:alice", "permissionType": "Allow",
                      "operation": "Read", "host": "*", "extra": 2}]}).encode())
    raw.create("/kafka-acl-extended/prefixed/Cluster/kafka-cluster", b'{"version":1,"acls":[]}')

    assert await store.all_acls() == [acl(ORDERS, Operation.READ)]
    assert await store.acls_of(ResourcePattern(ResourceType.TOPIC, "broken",
                                               PatternType.LITERAL)) == []

    await store.add_acls([acl(ORDERS, Operation.WRITE)])
    await store.remove_acls([acl(ORDERS, Operation.READ)])
    assert raw_json(raw, "/kafka-acl/Topic/orders")["acls"] == [
        newer_kafka, {"principal": "User:alice", "permissionType": "Allow",
                      "operation": "Write", "host": "*"}]


async def test_names_that_cannot_be_znodes_are_refused_before_any_write(
    store: ZkSecurityStore, raw: KazooClient
) -> None:
    slashed = ResourcePattern(ResourceType.GROUP, "team/a", PatternType.LITERAL)
    with pytest.raises(ValueError, match="'/'"):
        await store.add_acls([acl(ORDERS, Operation.READ), acl(slashed, Operation.READ)])
    with pytest.raises(ValueError, match="znode"):
        await store.add_acls([acl(ResourcePattern(ResourceType.GROUP, "..",
                                                  PatternType.LITERAL), Operation.READ)])
    with pytest.raises(ValueError):
        await store.put_user("a/b", cred())
    assert await store.acls_of(slashed) == []
    assert await store.get_user("a/b") is None
    assert raw.get_children("/kafka-acl/Topic") == []
    assert raw.get_children("/kafka-acl/Group") == []
    assert raw.get_children("/kafka-acl-changes") == []
    assert raw.get_children("/config/users") == []
    assert raw.get_children("/config/changes") == []


# --- several stores on one cluster ---------------------------------------------------------


async def test_changes_reach_the_other_stores_listener(
    open_store: OpenStore, raw: KazooClient
) -> None:
    raw.create("/kafka-acl-changes/acl_changes_", b"Topic:LITERAL:before", sequence=True)
    a = await open_store()
    await a.put_user("early", cred())
    b = await open_store()
    seen_a, seen_b = Changes(a), Changes(b)

    await a.put_user("alice", cred())
    await seen_b.wait_for(SecurityChange(user="alice"))
    await a.add_acls([acl(ORDERS, Operation.READ), acl(LOGS, Operation.WRITE)])
    await seen_b.wait_for(SecurityChange(pattern=ORDERS))
    await seen_b.wait_for(SecurityChange(pattern=LOGS))
    assert await b.acls_of(ORDERS) == [acl(ORDERS, Operation.READ)]
    await a.delete_user("alice")
    await seen_b.wait_for(SecurityChange(user="alice"))

    # written by others (Kafka's old literal form included): reported to both
    raw.create("/kafka-acl-changes/acl_changes_", b"Group:billing.v1", sequence=True)
    raw.create("/config/changes/config_change_",
               b'{"version":2,"entity_path":"topics/orders"}', sequence=True)
    await seen_a.wait_for(SecurityChange(pattern=GROUP))
    await seen_b.wait_for(SecurityChange(pattern=GROUP))

    # the writer heard its own changes (directly, and only once each); nobody heard
    # what was written before it started, nor topic config changes
    assert seen_a.seen[:4] == [SecurityChange(user="alice"), SecurityChange(pattern=ORDERS),
                               SecurityChange(pattern=LOGS), SecurityChange(user="alice")]
    assert seen_a.seen.count(SecurityChange(pattern=ORDERS)) == 1
    for seen in (seen_a, seen_b):
        assert SecurityChange(user="early") not in seen.seen
        assert SecurityChange(pattern=ResourcePattern(
            ResourceType.TOPIC, "before", PatternType.LITERAL)) not in seen.seen
        assert all(c.user is None or c.user == "alice" for c in seen.seen)
        assert seen.threads == {threading.get_ident()}  # on the event loop's thread


async def test_concurrent_adds_to_one_resource_lose_nothing(open_store: OpenStore) -> None:
    a, b = await open_store(), await open_store()
    mine = [acl(ORDERS, Operation.READ, f"User:a{i}") for i in range(12)]
    theirs = [acl(ORDERS, Operation.READ, f"User:b{i}") for i in range(12)]
    await asyncio.gather(*(a.add_acls([x]) for x in mine), *(b.add_acls([x]) for x in theirs))
    got = await a.acls_of(ORDERS)
    assert len(got) == len(mine + theirs) and set(got) == set(mine + theirs)

    await asyncio.gather(*(a.remove_acls([x]) for x in mine[:6]),
                         *(b.remove_acls([x]) for x in theirs[:6]))
    got = await b.acls_of(ORDERS)
    assert len(got) == 12 and set(got) == set(mine[6:] + theirs[6:])


async def test_a_lost_session_makes_listeners_read_everything(
    store: ZkSecurityStore, zookeeper: str
) -> None:
    changes = Changes(store)
    session_id, password = store._client.client_id  # test-only reach into the adapter

    def _expire() -> None:  # a second client on the same session closes it
        other = KazooClient(hosts=zookeeper, client_id=(session_id, password))
        other.start(timeout=WAIT_S)
        other.stop()
        other.close()

    await asyncio.to_thread(_expire)
    await changes.wait_for(SecurityChange())
    await store.put_user("alice", cred())  # the new session works
    assert await store.list_users() == ["alice"]


# --- notification codecs (no server needed) -----------------------------------------------


def test_acl_notifications_of_old_and_new_kafka_decode() -> None:
    assert decode_literal_acl_change(b"Topic:orders") == ORDERS
    assert decode_literal_acl_change(b"Topic:LITERAL:orders") == ORDERS
    assert decode_literal_acl_change(b"Group:LITERAL:a:b") == ResourcePattern(
        ResourceType.GROUP, "a:b", PatternType.LITERAL)
    assert decode_literal_acl_change(b"TransactionalId:tx") == ResourcePattern(
        ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL)
    assert decode_extended_acl_change(
        b'{"version":1,"resourceType":"Topic","name":"logs-","patternType":"PREFIXED"}'
    ) == LOGS
    with pytest.raises(ValueError):
        decode_literal_acl_change(b"orders")
