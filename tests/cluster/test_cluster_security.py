"""Security across a real three-broker ZooKeeper cluster: TLS, BASIC authentication and
ACLs (docs/security.md, "A secured three-broker cluster from scratch").

Three ``franz broker`` processes on one ZooKeeper chroot, each with one https listener
(its own trustme certificate for 127.0.0.1, the CA as truststore),
``authentication.method=BASIC``, ``AclAuthorizer``, super users admin and broker, and
``inter.broker.basic.auth.user.info=broker:...`` for the calls between brokers
(replica fetches, forwarded produces and reads, group calls to the coordinator). The
users admin, broker, alice and bob are written to ZooKeeper before the brokers start, as
``franz users add --zookeeper`` does.

- ACL and user changes made through one broker apply on the others without a restart,
  within a bounded wait (ZooKeeper change notifications; cached verifications dropped).
- Replication, forwarding and consumer groups work with security on, and refuse the
  principals without ACLs (403) or credentials (401); the internal API is for brokers
  and super users only.
- ``test_fault_injection``'s producers and faults (SIGKILL a leader, then the controller,
  restart each; SIGSTOP a follower out of the ISR; SIGSTOP a leader past its ZooKeeper
  session) with https and alice's credentials: every acknowledged record is read
  back exactly where it was acknowledged, and no request was refused by security while
  brokers died and restarted.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import trustme
from kazoo.client import KazooClient

from core.broker.group.hashing import coordinator_partition
from core.broker.security.credentials import StoredCredential
from core.broker.security.zk_store import ZkSecurityStore
from core.storage.records import decode_records

from .conftest import BrokerProcess, free_port, running, wait_until
from .test_fault_injection import (
    CLIENT_TIMEOUT_S,
    LAG_MS,
    PARTITIONS,
    REQUEST_TIMEOUT_MS,
    SESSION_MS,
    TOPIC,
    Faults,
    Producers,
    controller,
    disk_log,
    log,
)

JSON_V2 = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"
Auth = tuple[str, str]
ADMIN: Auth = ("admin", "admin-Secret-0")
BROKER: Auth = ("broker", "broker-Secret-0")
ALICE: Auth = ("alice", "alice-Secret-0")
BOB: Auth = ("bob", "bob-Secret-0")
OFFSETS_PARTITIONS = 3  # so that groups are coordinated by different brokers
PROPAGATION_S = 10.0  # an ACL or user change made on one broker applies on every broker
OVERRIDES = [f"replica.lag.time.max.ms={LAG_MS}", f"zookeeper.session.timeout.ms={SESSION_MS}",
             f"request.timeout.ms={REQUEST_TIMEOUT_MS}", "replica.fetch.backoff.ms=200",
             "replica.socket.timeout.ms=10000", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
             "log.flush.scheduler.interval.ms=200",
             "authentication.method=BASIC", "authorizer.class.name=AclAuthorizer",
             "super.users=User:admin;User:broker",
             f"inter.broker.basic.auth.user.info={BROKER[0]}:{BROKER[1]}"]


@dataclass
class SecureBroker(BrokerProcess):
    """A broker whose only listener is https; probed with admin's credentials."""

    tls: ssl.SSLContext | None = None  # the client's: trusts the CA

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"broker {self.broker_id} exited:\n{self.log_tail()}")
        try:
            return call("GET", self, "/v3/clusters", ADMIN, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


def tls_of(b: SecureBroker) -> ssl.SSLContext:
    assert b.tls is not None, "a SecureBroker needs the client's TLS context"
    return b.tls


def call(method: str, b: SecureBroker, path: str, user: Auth | None = None, *,
         timeout: float = 20, **kw: Any) -> httpx.Response:
    """One request to ``b`` over https (the CA trusted), as ``user`` (None: no credentials)."""
    return httpx.request(method, f"{b.url}{path}", auth=user, verify=tls_of(b),
                         timeout=timeout, **kw)


def produce(b: SecureBroker, topic: str, user: Auth | None, values: list[Any], *,
            acks: str = "all", partition: int | None = None) -> httpx.Response:
    path = f"/topics/{topic}" if partition is None else f"/topics/{topic}/partitions/{partition}"
    return call("POST", b, path, user, params={"acks": acks}, timeout=30,
                headers={"Content-Type": JSON_V2, "Accept": JSON_V2},
                content=json.dumps({"records": [{"value": v} for v in values]}))


def produced(r: httpx.Response) -> list[int]:
    """The offsets of a fully acknowledged produce, else AssertionError with the answer."""
    assert r.status_code == 200, (r.status_code, r.text)
    rows = r.json()["offsets"]
    assert all(row["error_code"] is None for row in rows), r.text
    return [row["offset"] for row in rows]


def range_read(b: SecureBroker, topic: str, user: Auth | None, partition: int = 0,
               offset: int = 0, count: int = 1000) -> httpx.Response:
    return call("GET", b, f"/topics/{topic}/partitions/{partition}/records", user, timeout=30,
                params={"offset": offset, "count": count, "max_bytes": 1 << 20},
                headers={"Accept": JSON_V2})


def replicas_of(b: SecureBroker, topic: str) -> dict[int, dict[str, Any]] | None:
    try:
        r = call("GET", b, "/internal/v1/replicas", ADMIN, timeout=5)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    return {row["partition"]: row for row in r.json() if row["topic"] == topic}


def in_sync(brokers: list[SecureBroker], topic: str, partitions: int) -> bool:
    """Every broker hosts every partition with the same leader, epoch and LEO, HW = LEO,
    and a full ISR (as test_fault_injection's all_in_sync, over https as admin)."""
    views = [replicas_of(b, topic) for b in brokers]
    if any(v is None or len(v) != partitions for v in views):
        return False
    for p in range(partitions):
        rows = [v[p] for v in views if v is not None]
        if len({(r["leader"], r["leader_epoch"], r["log_end_offset"], r["high_watermark"])
                for r in rows}) != 1 or rows[0]["high_watermark"] != rows[0]["log_end_offset"]:
            return False
        if sorted(rows[0]["isr"]) != [0, 1, 2]:
            return False
    return True


def acl(topic_or_group: str, principal: str, operation: str, *, resource_type: str = "TOPIC",
        pattern_type: str = "LITERAL") -> dict[str, str]:
    return {"resource_type": resource_type, "resource_name": topic_or_group,
            "pattern_type": pattern_type, "principal": principal, "host": "*",
            "operation": operation, "permission": "ALLOW"}


def add_acls(b: SecureBroker, cid: str, *acls: dict[str, str]) -> None:
    r = call("POST", b, f"/v3/clusters/{cid}/acls:batch", ADMIN, json={"data": list(acls)})
    assert r.status_code == 204, r.text


def create_topic(b: SecureBroker, cid: str, topic: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    r = call("POST", b, f"/v3/clusters/{cid}/topics", ADMIN, timeout=30, json={
        "topic_name": topic, "partitions_count": partitions, "replication_factor": 3,
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]})
    assert r.status_code == 201, r.text


def status_everywhere(brokers: list[SecureBroker], request: Any) -> list[int]:
    return [request(b).status_code for b in brokers]


# --- the cluster ----------------------------------------------------------------------------


async def _seed_users(connect: str, users: list[Auth]) -> None:
    store = ZkSecurityStore(connect, session_timeout_s=10)
    await store.start()
    try:
        for name, password in users:
            await store.put_user(name, StoredCredential.create(password))
    finally:
        await store.close()


@pytest.fixture(scope="module")
def cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[SecureBroker]]:
    root = tmp_path_factory.mktemp("secure-cluster")
    ca = trustme.CA()
    ca_file = root / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    tls = ssl.create_default_context(cafile=str(ca_file))
    zk = f"{zookeeper}/franz-sec-{os.getpid()}-{time.monotonic_ns()}"
    asyncio.run(_seed_users(zk, [ADMIN, BROKER, ALICE, BOB]))
    brokers = []
    for i in range(3):
        keystore = root / f"broker-{i}.pem"
        ca.issue_cert("127.0.0.1", common_name=f"broker{i}") \
            .private_key_and_cert_chain_pem.write_to_path(str(keystore))
        port = free_port()
        overrides = [f"listeners=https://127.0.0.1:{port}", f"ssl.keystore.location={keystore}",
                     f"ssl.truststore.location={ca_file}", *OVERRIDES]
        brokers.append(SecureBroker(i, port, root / f"data-{i}", zk, root / f"broker-{i}.log",
                                    overrides=overrides, tls=tls))
    with running(brokers):  # type: ignore[arg-type]
        for b in brokers:  # every broker sees the other two
            wait_until(lambda b=b: len(call("GET", b, f"/v3/clusters/{cluster_id(b)}/brokers",
                                            ADMIN).json()["data"]) == 3,
                       30, f"three brokers seen by broker {b.broker_id}")
        yield brokers
    for b in brokers:  # nothing went wrong between brokers over TLS
        text = b.log_path.read_text(errors="replace")
        assert "CERTIFICATE_VERIFY_FAILED" not in text, text[-3000:]


@pytest.fixture(scope="module")
def zk(cluster: list[SecureBroker]) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster[0].zk, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def cluster_id(b: SecureBroker) -> str:
    r = call("GET", b, "/v3/clusters", ADMIN)
    assert r.status_code == 200, r.text
    return str(r.json()["data"][0]["cluster_id"])


def partition_state(zk: KazooClient, topic: str, partition: int) -> dict[str, Any] | None:
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    return json.loads(zk.get(path)[0]) if zk.exists(path) else None


def timed_wait(cond: Any, timeout_s: float, what: str) -> float:
    """``wait_until``, returning how long it took (logged)."""
    t0 = time.monotonic()
    wait_until(cond, timeout_s, what, every_s=0.1)
    took = time.monotonic() - t0
    log(f"{what}: {took:.2f} s")
    return took


# --- ACLs and users change online, cluster-wide ------------------------------------------------


@pytest.mark.timeout(180)
def test_acl_and_user_changes_apply_on_every_broker(cluster: list[SecureBroker]) -> None:
    b0, b1, b2 = cluster
    cid = cluster_id(b0)
    create_topic(b0, cid, "acl-orders")
    wait_until(lambda: all(s == 200 for s in status_everywhere(
        cluster, lambda b: call("GET", b, "/topics/acl-orders", ADMIN))), 20,
        "acl-orders known to every broker")

    # no ACL: alice is refused on every broker (and auto-creation needs CREATE)
    for b in cluster:
        assert produce(b, "acl-orders", ALICE, ["no"]).status_code == 403
    assert produce(b0, "acl-unknown", ALICE, ["no"]).status_code == 403

    # an ACL added through broker 0 applies on brokers 1 and 2 without a restart
    r = call("POST", b0, f"/v3/clusters/{cid}/acls", ADMIN,
             json=acl("acl-orders", "User:alice", "WRITE"))
    assert r.status_code == 201, r.text
    timed_wait(lambda: produce(b2, "acl-orders", ALICE, ["via-2"]).status_code == 200,
               PROPAGATION_S, "alice's WRITE ACL applies on broker 2")
    timed_wait(lambda: produce(b1, "acl-orders", ALICE, ["via-1"]).status_code == 200,
               PROPAGATION_S, "alice's WRITE ACL applies on broker 1")
    assert produced(produce(b0, "acl-orders", ALICE, ["via-0"]))
    # WRITE implies DESCRIBE, not READ
    assert range_read(b1, "acl-orders", ALICE).status_code == 403
    assert call("GET", b2, "/topics/acl-orders", ALICE).status_code == 200
    assert produce(b2, "acl-orders", BOB, ["no"]).status_code == 403

    # its deletion through broker 1 applies on brokers 0 and 2
    r = call("DELETE", b1, f"/v3/clusters/{cid}/acls", ADMIN,
             params=acl("acl-orders", "User:alice", "WRITE"))
    assert r.status_code == 200, r.text
    assert [(a["principal"], a["operation"]) for a in r.json()["data"]] == [("User:alice", "WRITE")]
    timed_wait(lambda: produce(b0, "acl-orders", ALICE, ["late"]).status_code == 403,
               PROPAGATION_S, "the deleted ACL refused on broker 0")
    timed_wait(lambda: produce(b2, "acl-orders", ALICE, ["late"]).status_code == 403,
               PROPAGATION_S, "the deleted ACL refused on broker 2")
    assert produce(b1, "acl-orders", ALICE, ["late"]).status_code == 403
    for b in cluster:
        listed = call("GET", b, f"/v3/clusters/{cid}/acls", ADMIN,
                      params={"resource_name": "acl-orders"}).json()["data"]
        assert listed == [], listed

    # a user added online through broker 1 authenticates on broker 2 (and 0)
    carol: Auth = ("carol", "carol-Secret-0")
    assert call("GET", b2, "/v3/clusters", carol).status_code == 401
    r = call("PUT", b1, f"/v3/clusters/{cid}/users/carol", ADMIN, json={"password": carol[1]})
    assert r.status_code == 204, r.text
    timed_wait(lambda: call("GET", b2, "/v3/clusters", carol).status_code == 200,
               PROPAGATION_S, "the new user carol authenticates on broker 2")
    wait_until(lambda: call("GET", b0, "/v3/clusters", carol).status_code == 200,
               PROPAGATION_S, "the new user carol authenticates on broker 0")
    assert call("GET", b1, "/v3/clusters", carol).status_code == 200
    # authenticated is not authorized: no ACL, and not a super user
    assert call("GET", b2, "/internal/v1/replicas", carol).status_code == 403
    assert produce(b2, "acl-orders", carol, ["no"]).status_code == 403

    # a new password through broker 0: the old one (cached as verified on every broker)
    # is refused everywhere, the new one accepted
    new_carol: Auth = ("carol", "carol-Secret-1")
    r = call("PUT", b0, f"/v3/clusters/{cid}/users/carol", ADMIN, json={"password": new_carol[1]})
    assert r.status_code == 204, r.text
    timed_wait(lambda: status_everywhere(
        cluster, lambda b: call("GET", b, "/v3/clusters", carol)) == [401] * 3,
        PROPAGATION_S, "carol's old password refused on every broker")
    assert status_everywhere(cluster, lambda b: call("GET", b, "/v3/clusters", new_carol)) \
        == [200] * 3

    # deleted through broker 2: refused (401) on every broker, whose caches held her
    r = call("DELETE", b2, f"/v3/clusters/{cid}/users/carol", ADMIN)
    assert r.status_code == 204, r.text
    timed_wait(lambda: status_everywhere(
        cluster, lambda b: call("GET", b, "/v3/clusters", new_carol)) == [401] * 3,
        PROPAGATION_S, "the deleted user carol refused on every broker")
    r = call("GET", b0, "/v3/clusters", new_carol)
    assert r.headers.get("www-authenticate") == 'Basic realm="franz"'
    assert r.json()["error_code"] == 40101
    users = call("GET", b1, f"/v3/clusters/{cid}/users", ADMIN).json()["data"]
    assert sorted(u["user_name"] for u in users) == ["admin", "alice", "bob", "broker"]


# --- replication, forwarding and groups with security on -----------------------------------------


def offsets_topic_ready(zk: KazooClient) -> bool:
    states = [partition_state(zk, "__consumer_offsets", p) for p in range(OFFSETS_PARTITIONS)]
    return all(st is not None and len(st["isr"]) == 3 for st in states)


def group_not_coordinated_by(zk: KazooClient, broker_id: int, taken: set[str]) -> tuple[str, int]:
    """A group ``secure-group-N`` (not in ``taken``) coordinated by another broker, and
    that coordinator."""
    for i in range(200):
        group = f"secure-group-{i}"
        st = partition_state(zk, "__consumer_offsets",
                             coordinator_partition(group, OFFSETS_PARTITIONS))
        if group not in taken and st is not None and st["leader"] not in (broker_id, -1):
            return group, int(st["leader"])
    raise AssertionError(f"no group coordinated elsewhere than broker {broker_id}")


def read_records(instance: str, b: SecureBroker, user: Auth, want: int) -> list[dict[str, Any]]:
    """Records of a consumer instance (long polls of 1 s), until ``want`` came or 30 s."""
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while len(rows) < want and time.monotonic() < deadline:
        r = httpx.get(f"{instance}/records", params={"timeout": 1000}, auth=user,
                      verify=tls_of(b), headers={"Accept": JSON_V2}, timeout=30)
        assert r.status_code == 200, r.text
        rows += r.json()
    return rows


@pytest.mark.timeout(180)
def test_replication_forwarding_and_groups_with_security(cluster: list[SecureBroker],
                                                         zk: KazooClient) -> None:
    topic = "secure-orders"
    cid = cluster_id(cluster[1])
    create_topic(cluster[1], cid, topic)
    add_acls(cluster[0], cid, acl(topic, "User:alice", "WRITE"), acl(topic, "User:alice", "READ"),
             acl("secure-group-", "User:alice", "READ", resource_type="GROUP",
                 pattern_type="PREFIXED"))
    wait_until(lambda: in_sync(cluster, topic, 1), 30, f"{topic} on every broker, full ISR")
    st = partition_state(zk, topic, 0)
    assert st is not None
    leader = st["leader"]
    forwarder = next(b for b in cluster if b.broker_id != leader)
    reader = next(b for b in cluster if b.broker_id not in (leader, forwarder.broker_id))
    log(f"{topic}-0: leader {leader}, produce through {forwarder.broker_id}, "
        f"read through {reader.broker_id}")

    # alice produces acks=all through a broker that is not the leader: forwarded to it
    # over the internal API with the broker's credentials, replicated to both followers
    values = [f"v{i}" for i in range(10)]
    wait_until(lambda: produce(forwarder, topic, ALICE, ["probe"]).status_code == 200,
               PROPAGATION_S, "alice's ACLs on the forwarding broker")
    assert produced(produce(forwarder, topic, ALICE, values, partition=0)) == list(range(1, 11))
    wait_until(lambda: all(
        (v := replicas_of(b, topic)) is not None
        and (v[0]["log_end_offset"], v[0]["high_watermark"]) == (11, 11) for b in cluster),
        20, "every replica at LEO = HW = 11")

    # read back through the third broker (neither the leader nor the forwarder)
    r = range_read(reader, topic, ALICE)
    assert r.status_code == 200, r.text
    assert [row["value"] for row in r.json()] == ["probe", *values]
    # every broker's own copy holds the records (replica fetches authenticated)
    for b in cluster:
        rows = [(r.offset, json.loads(r.value)) for r in _decoded(b, topic)]
        assert rows == list(enumerate(["probe", *values])), f"broker {b.broker_id}: {rows}"

    # bob (no ACLs) is refused everything; no credentials or a wrong password: 401
    for b in cluster:
        assert produce(b, topic, BOB, ["bob"]).status_code == 403
        assert range_read(b, topic, BOB).status_code == 403
        assert call("GET", b, f"/topics/{topic}", BOB).status_code == 403
        for user in (None, ("alice", "wrong-password"), ("nobody", "x")):
            for r in (produce(b, topic, user, ["anon"]), range_read(b, topic, user),
                      call("GET", b, "/internal/v1/replicas", user)):
                assert r.status_code == 401, (b.broker_id, user and user[0], r.text)
                assert r.headers.get("www-authenticate") == 'Basic realm="franz"'
        # the internal API: brokers and super users only
        assert call("GET", b, "/internal/v1/replicas", ALICE).status_code == 403
        assert call("GET", b, "/internal/v1/replicas", BOB).status_code == 403
        assert call("GET", b, "/internal/v1/replicas", ADMIN).status_code == 200
        assert call("GET", b, "/internal/v1/replicas", BROKER).status_code == 200

    # consumer groups: through each broker, a group coordinated by another one
    wait_until(lambda: offsets_topic_ready(zk), 40, "__consumer_offsets with a full ISR")
    taken: set[str] = set()
    for b in cluster:
        group, coord = group_not_coordinated_by(zk, b.broker_id, taken)
        taken.add(group)
        log(f"group {group}: client on broker {b.broker_id}, coordinator {coord}")
        base = f"/consumers/{group}"
        new = {"name": "i1", "format": "json", "auto.offset.reset": "earliest",
               "auto.commit.enable": "false"}
        assert call("POST", b, base, BOB, headers={"Content-Type": V2}, json=new).status_code == 403
        assert call("POST", b, base, None, headers={"Content-Type": V2}, json=new).status_code == 401
        r = call("POST", b, base, ALICE, headers={"Content-Type": V2}, json=new)
        assert r.status_code == 200, r.text
        instance = r.json()["base_uri"]
        assert instance == f"{b.url}{base}/instances/i1", instance
        inst = f"{base}/instances/i1"
        # bob cannot subscribe to, read or commit through alice's instance
        assert call("POST", b, f"{inst}/subscription", BOB, headers={"Content-Type": V2},
                    json={"topics": [topic]}).status_code == 403
        r = call("POST", b, f"{inst}/subscription", ALICE, headers={"Content-Type": V2},
                 json={"topics": [topic]})
        assert r.status_code == 204, r.text
        assert call("GET", b, f"{inst}/records", BOB, params={"timeout": 100},
                    headers={"Accept": JSON_V2}).status_code == 403
        rows = read_records(instance, b, ALICE, 11)
        assert [row["value"] for row in rows] == ["probe", *values]
        assert call("POST", b, f"{inst}/offsets", BOB, headers={"Content-Type": V2}).status_code == 403
        r = call("POST", b, f"{inst}/offsets", ALICE, headers={"Content-Type": V2})
        assert r.status_code == 200, r.text
        for other in cluster:  # the commit, as every broker answers it (from the coordinator)
            r = call("GET", other, f"{inst}/offsets", ALICE,
                     headers={"Content-Type": V2, "Accept": V2},
                     json={"partitions": [{"topic": topic, "partition": 0}]})
            assert r.status_code == 200, r.text
            assert r.json()["offsets"][0]["offset"] == 11, r.text
            assert call("GET", other, f"{inst}/offsets", BOB,
                        headers={"Content-Type": V2, "Accept": V2},
                        json={"partitions": [{"topic": topic, "partition": 0}]}).status_code == 403
        r = call("DELETE", b, inst, ALICE, headers={"Content-Type": V2})
        assert r.status_code == 204, r.text


def _decoded(b: SecureBroker, topic: str) -> list[Any]:
    d = b.data_dir / f"{topic}-0"
    return list(decode_records(b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))))


# --- no acknowledged record lost, with security on --------------------------------------------------


class SecureProducers(Producers):
    """test_fault_injection's producers, sending over https as alice: ``_send`` gets each
    thread's own authenticated client instead of the plain one ``_produce`` opened."""

    def __init__(self, brokers: list[SecureBroker], user: Auth) -> None:
        super().__init__(brokers)  # type: ignore[arg-type]
        self._user = user
        self._tls = tls_of(brokers[0])
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()

    def _send(self, client: httpx.Client, b: BrokerProcess, ids: list[str]) -> None:
        mine: httpx.Client | None = getattr(self._local, "client", None)
        if mine is None:
            mine = httpx.Client(timeout=CLIENT_TIMEOUT_S, auth=self._user,
                                verify=self._tls)
            self._local.client = mine
            with self._clients_lock:
                self._clients.append(mine)
        super()._send(mine, b, ids)

    def close(self) -> None:
        with self._clients_lock:
            for c in self._clients:
                c.close()


def http_log(b: SecureBroker, partition: int, user: Auth) -> list[tuple[int, str]]:
    """What ``user`` reads through broker ``b`` (range reads, forwarded to the leader)."""
    out: list[tuple[int, str]] = []
    offset = 0
    for _ in range(10000):
        r = range_read(b, TOPIC, user, partition, offset)
        assert r.status_code == 200, r.text
        rows = r.json()
        if not rows:
            return out
        out += [(row["offset"], row["value"]) for row in rows]
        offset = rows[-1]["offset"] + 1
    raise AssertionError("range read did not end")


@pytest.mark.timeout(180)
def test_no_acknowledged_record_lost_with_security(cluster: list[SecureBroker],
                                                   zk: KazooClient) -> None:
    t_start = time.monotonic()
    cid = cluster_id(cluster[0])
    create_topic(cluster[1], cid, TOPIC, PARTITIONS, {"min.insync.replicas": "2"})
    add_acls(cluster[2], cid, acl(TOPIC, "User:alice", "WRITE"), acl(TOPIC, "User:alice", "READ"))
    wait_until(lambda: in_sync(cluster, TOPIC, PARTITIONS), 30, f"every replica of {TOPIC}")
    # the ACLs hold on every broker before the first write (else a 403 would be counted)
    wait_until(lambda: status_everywhere(cluster, lambda b: range_read(b, TOPIC, ALICE, count=1))
               == [200] * 3, PROPAGATION_S, "alice's ACLs on every broker")

    producers = SecureProducers(cluster, ALICE)
    faults = Faults(cluster, zk, producers)  # type: ignore[arg-type]
    producers.start()
    try:
        wait_until(lambda: producers.acked_count() >= 100, 30, "the first acknowledged writes")
        log(f"{producers.acked_count()} acknowledged; controller {controller(zk)}")
        faults.kill_leader()
        faults.kill_controller()
        faults.stop_follower()  # back in the ISR only through authenticated replica fetches
        faults.pause_leader_past_session()
        time.sleep(1.0)
    finally:
        producers.stop()
        producers.close()
    log(f"producers stopped: {dict(producers.requests)}")
    refused = {k: n for k, n in producers.requests.items() if k in ("http 401", "http 403")}
    assert not refused, f"security refused alice while brokers restarted: {refused}"

    wait_until(lambda: in_sync(cluster, TOPIC, PARTITIONS), 30, "all replicas in sync")
    views = replicas_of(cluster[0], TOPIC)
    assert views is not None
    acked = producers.acked
    acked_ids = {rid for _, _, rid in acked}
    assert len(acked_ids) == len(acked), "one id acknowledged twice"
    logs: dict[int, dict[int, str]] = {}
    occurrences: Counter[str] = Counter()
    for p in range(PARTITIONS):
        replicas = [disk_log(b, p) for b in cluster]
        leo = views[p]["log_end_offset"]
        for b, rep in zip(cluster, replicas, strict=True):
            assert [o for o, _ in rep] == list(range(leo)), \
                f"{TOPIC}-{p} on broker {b.broker_id}: offsets not contiguous 0..{leo - 1}"
            assert rep == replicas[0], f"{TOPIC}-{p}: broker {b.broker_id} differs from broker 0"
        for b in cluster:
            assert http_log(b, p, ALICE) == replicas[0], f"{TOPIC}-{p} read through {b.broker_id}"
        logs[p] = dict(replicas[0])
        occurrences.update(rid for _, rid in replicas[0])
    lost = [(p, o, rid, logs[p].get(o)) for p, o, rid in acked if logs[p].get(o) != rid]
    assert not lost, f"{len(lost)} acknowledged record(s) lost or moved, e.g. {lost[:10]}"
    unknown = [rid for rid in occurrences if rid not in acked_ids and rid not in producers.unacked]
    assert not unknown, f"records no producer sent: {unknown[:10]}"
    counts = {"acked": len(acked), "found": sum(len(v) for v in logs.values()),
              "lost": len(lost), "unacked_sent": len(producers.unacked),
              "unacked_found": sum(1 for rid in producers.unacked if occurrences[rid]),
              "acked_also_at_other_offset": sum(occurrences[rid] - 1 for rid in acked_ids
                                                if occurrences[rid] > 1),
              "faults": faults.events, "seconds": round(time.monotonic() - t_start, 1)}
    log("secure fault counts: " + json.dumps(counts))
    assert time.monotonic() - t_start < 120, counts
