"""Three real ``franz broker`` processes on a real ZooKeeper (one chroot), each with its
own data dir and free 127.0.0.1 port. One cluster per module; tests run in file order
and leave every broker running (a killed or stopped broker is brought back).

Small timeouts make failover quick: ``zookeeper.session.timeout.ms=4000`` (failure
detection), ``replica.lag.time.max.ms=2000`` (ISR shrink).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from .conftest import BrokerProcess, free_port, running, wait_until

ROOT = Path(__file__).resolve().parents[2]
JSON_V2 = "application/vnd.kafka.json.v2+json"
LAG_MS = 2000
SESSION_MS = 4000
OVERRIDES = [f"replica.lag.time.max.ms={LAG_MS}", f"zookeeper.session.timeout.ms={SESSION_MS}",
             "replica.fetch.backoff.ms=200", "offsets.topic.num.partitions=1",
             "min.insync.replicas=2", "log.flush.scheduler.interval.ms=200"]


@pytest.fixture(scope="module")
def cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    root = tmp_path_factory.mktemp("cluster")
    zk = f"{zookeeper}/franz-cluster-{os.getpid()}-{time.monotonic_ns()}"
    brokers = [BrokerProcess(i, free_port(), root / f"data-{i}", zk, root / f"broker-{i}.log",
                          overrides=OVERRIDES) for i in range(3)]
    with running(brokers):
        yield brokers


@pytest.fixture(scope="module")
def zk_client(cluster: list[BrokerProcess]) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster[0].zk, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def create_topic(b: BrokerProcess, name: str, *, partitions: int = 1, rf: int = 3) -> None:
    cid = httpx.get(f"{b.url}/v3/clusters").json()["data"][0]["cluster_id"]
    resp = httpx.post(f"{b.url}/v3/clusters/{cid}/topics", timeout=30, json={
        "topic_name": name, "partitions_count": partitions, "replication_factor": rf})
    assert resp.status_code in (200, 201), resp.text


def produce(b: BrokerProcess, topic: str, values: list[Any], *, acks: str = "all") -> list[int]:
    resp = httpx.post(f"{b.url}/topics/{topic}/partitions/0", params={"acks": acks}, timeout=40,
                      headers={"Content-Type": JSON_V2},
                      content=json.dumps({"records": [{"value": v} for v in values]}))
    assert resp.status_code == 200, resp.text
    offsets = [o["offset"] for o in resp.json()["offsets"]]
    assert all(o is not None for o in offsets), resp.text
    return offsets


def read_all(b: BrokerProcess, topic: str) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    offset = 0
    while True:
        resp = httpx.get(f"{b.url}/topics/{topic}/partitions/0/records", timeout=30,
                         params={"offset": offset}, headers={"Accept": JSON_V2})
        assert resp.status_code == 200, resp.text
        rows = resp.json()
        if not rows:
            return out
        out += [(r["offset"], r["value"]) for r in rows]
        offset = rows[-1]["offset"] + 1


def replica(b: BrokerProcess, topic: str) -> dict[str, Any] | None:
    try:
        rows = httpx.get(f"{b.url}/internal/v1/replicas", timeout=5).json()
    except httpx.HTTPError:
        return None
    return next((r for r in rows if r["topic"] == topic and r["partition"] == 0), None)


def state(zk: KazooClient, topic: str) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/0/state")
    return dict(json.loads(data))


def segment_bytes(b: BrokerProcess, topic: str) -> bytes:
    d = b.data_dir / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def in_sync_everywhere(cluster: list[BrokerProcess], topic: str, live: list[int]) -> bool:
    reps = [replica(cluster[i], topic) for i in live]
    if any(r is None for r in reps):
        return False
    leos = {r["log_end_offset"] for r in reps if r}
    hws = {r["high_watermark"] for r in reps if r}
    return len(leos) == 1 and hws == leos


def test_topic_created_through_one_broker_is_seen_by_all(cluster: list[BrokerProcess],
                                                         zk_client: KazooClient) -> None:
    create_topic(cluster[0], "rep3", partitions=3)
    for b in cluster:
        topic = wait_until(lambda b=b: _topic(b, "rep3"), 10, f"rep3 on broker {b.broker_id}")
        assert len(topic["partitions"]) == 3
    # Kafka's znode layout and JSON payloads
    assignment = json.loads(zk_client.get("/brokers/topics/rep3")[0])
    assert set(assignment["partitions"]) == {"0", "1", "2"}
    assert all(sorted(r) == [0, 1, 2] for r in assignment["partitions"].values())
    st = state(zk_client, "rep3")
    assert set(st) >= {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
    assert sorted(st["isr"]) == [0, 1, 2] and st["leader"] == assignment["partitions"]["0"][0]
    assert sorted(zk_client.get_children("/brokers/ids")) == ["0", "1", "2"]
    assert json.loads(zk_client.get("/controller")[0])["brokerid"] == 0
    registration = json.loads(zk_client.get("/brokers/ids/1")[0])
    assert registration["endpoints"] == [f"HTTP://127.0.0.1:{cluster[1].port}"]
    # __consumer_offsets waited for offsets.topic.replication.factor (3) live brokers
    offsets = wait_until(lambda: zk_client.exists("/brokers/topics/__consumer_offsets"), 10,
                       "__consumer_offsets")
    assert offsets is not None
    spread = json.loads(zk_client.get("/brokers/topics/__consumer_offsets")[0])["partitions"]
    assert spread and all(sorted(r) == [0, 1, 2] for r in spread.values())  # RF=3, not 1


def _topic(b: BrokerProcess, name: str) -> dict[str, Any] | None:
    resp = httpx.get(f"{b.url}/topics/{name}", timeout=5)
    return resp.json() if resp.status_code == 200 else None


def test_produce_through_any_broker_and_identical_replicas(cluster: list[BrokerProcess],
                                                          zk_client: KazooClient) -> None:
    create_topic(cluster[1], "same")  # a non-controller creates it too
    wait_until(lambda: all(replica(b, "same") for b in cluster), 10, "replicas of 'same'")
    acked = []
    for i in range(30):
        acked += produce(cluster[i % 3], "same", [f"v{i}-{j}" for j in range(5)])
    assert acked == list(range(150))
    wait_until(lambda: in_sync_everywhere(cluster, "same", [0, 1, 2]), 10, "replicas in sync")
    logs = [segment_bytes(b, "same") for b in cluster]
    assert logs[0] == logs[1] == logs[2] and len(logs[0]) > 0
    for b in cluster:  # reads through any broker are forwarded to the leader
        assert [o for o, _ in read_all(b, "same")] == list(range(150))


def test_leader_killed_new_leader_from_isr_then_old_one_rejoins(
        cluster: list[BrokerProcess], zk_client: KazooClient) -> None:
    create_topic(cluster[0], "fail")
    acked = {}
    for i in range(20):
        for o, v in zip(produce(cluster[i % 3], "fail", [f"a{i}"]), [f"a{i}"], strict=True):
            acked[o] = v
    before = state(zk_client, "fail")
    old = before["leader"]
    cluster[old].kill()
    after = wait_until(lambda: (s := state(zk_client, "fail"))["leader"] not in (old, -1) and s,
                     SESSION_MS / 1000 + 10, "a new leader")
    assert after["leader_epoch"] > before["leader_epoch"] and after["leader"] in before["isr"]
    assert old not in after["isr"]
    alive = [b for b in cluster if b.broker_id != old]
    t0 = time.monotonic()
    for i in range(20):  # production continues (min.insync.replicas=2, two left)
        for o, v in zip(produce(alive[i % 2], "fail", [f"b{i}"]), [f"b{i}"], strict=True):
            acked[o] = v
    assert time.monotonic() - t0 < 30
    got = dict(read_all(alive[0], "fail"))
    assert all(got.get(o) == v for o, v in acked.items()), "an acknowledged record was lost"
    cluster[old].start()  # restart: catches up and rejoins the ISR
    wait_until(lambda: old in state(zk_client, "fail")["isr"], 20, f"broker {old} back in the ISR")
    wait_until(lambda: in_sync_everywhere(cluster, "fail", [0, 1, 2]), 10, "replicas in sync")
    logs = [segment_bytes(b, "fail") for b in cluster]
    assert logs[0] == logs[1] == logs[2]


def test_stopped_follower_leaves_isr_and_rejoins(cluster: list[BrokerProcess],
                                                 zk_client: KazooClient) -> None:
    create_topic(cluster[0], "lag")
    produce(cluster[0], "lag", ["x"])
    st = state(zk_client, "lag")
    follower = next(r for r in st["isr"] if r != st["leader"])
    cluster[follower].signal(signal.SIGSTOP)
    try:
        # Keep writing: the stopped follower never catches up, so it leaves the ISR after
        # replica.lag.time.max.ms; acks=all keeps working with 2 of 3 (min ISR 2).
        deadline = time.monotonic() + LAG_MS / 1000 + 10
        leader = cluster[st["leader"]]
        while follower in state(zk_client, "lag")["isr"]:
            assert time.monotonic() < deadline, "the stopped follower stayed in the ISR"
            produce(leader, "lag", ["y"], acks="1")
            time.sleep(0.2)
        assert len(state(zk_client, "lag")["isr"]) == 2
        produce(leader, "lag", ["z"], acks="all")
    finally:
        cluster[follower].signal(signal.SIGCONT)
    wait_until(lambda: follower in state(zk_client, "lag")["isr"], 20, "the follower back in the ISR")
    produce(cluster[follower], "lag", ["after"], acks="all")
