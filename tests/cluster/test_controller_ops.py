"""Controller operations on three real ``franz broker`` processes and a real ZooKeeper:
preferred leader election, partition reassignment, refused bad input (a taken broker
id, a replication factor above the live brokers) and a broker's ZooKeeper session
expiring while it is stopped. One cluster per module; every test leaves all three
brokers running.

Low timeouts keep it quick: ``zookeeper.session.timeout.ms=4000``,
``replica.lag.time.max.ms=2000``, ``leader.imbalance.check.interval.seconds=2``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from .conftest import BrokerProcess, free_port, running, wait_until
from .test_cluster import (
    JSON_V2,
    OVERRIDES,
    read_all,
    replica,
    state,
)

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 4000
EXTRA = ["leader.imbalance.check.interval.seconds=2", "offsets.topic.replication.factor=1"]


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    root = tmp_path_factory.mktemp("controller-ops")
    zk = f"{zookeeper}/franz-ops-{os.getpid()}-{time.monotonic_ns()}"
    procs = [BrokerProcess(i, free_port(), root / f"data-{i}", zk, root / f"broker-{i}.log",
                           overrides=OVERRIDES + EXTRA)
             for i in range(3)]
    with running(procs):
        yield procs


def cluster_id(b: BrokerProcess) -> str:
    return str(httpx.get(f"{b.url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"])


def v3(b: BrokerProcess, *parts: str | int) -> str:
    return f"{b.url}/v3/clusters/{cluster_id(b)}" + "".join(f"/{p}" for p in parts)


def create(b: BrokerProcess, name: str, rf: int) -> httpx.Response:
    return httpx.post(v3(b, "topics"), timeout=30, json={
        "topic_name": name, "partitions_count": 1, "replication_factor": rf})


def produce(b: BrokerProcess, topic: str, values: list[Any]) -> None:
    resp = httpx.post(f"{b.url}/topics/{topic}/partitions/0", params={"acks": "all"},
                      timeout=40, headers={"Content-Type": JSON_V2},
                      content=json.dumps({"records": [{"value": v} for v in values]}))
    assert resp.status_code == 200, resp.text


def assignment(zk: KazooClient, topic: str) -> list[int]:
    data, _ = zk.get(f"/brokers/topics/{topic}")
    return list(json.loads(data)["partitions"]["0"])


def leaders_seen(brokers: list[BrokerProcess], topic: str) -> list[int]:
    """Brokers whose own replica says it leads ``topic``-0."""
    return [b.broker_id for b in brokers
            if (r := replica(b, topic)) is not None and r["leader"] == b.broker_id]


def test_replication_factor_above_live_brokers_is_refused(brokers: list[BrokerProcess],
                                                          zk: KazooClient) -> None:
    resp = create(brokers[1], "too-wide", 4)
    assert resp.status_code == 400
    body = resp.json()
    assert body["error_code"] == 40002
    assert "Replication factor: 4 larger than available brokers: 3" in body["message"]
    assert zk.exists("/brokers/topics/too-wide") is None


def test_a_taken_broker_id_is_refused_and_the_holder_keeps_it(
        brokers: list[BrokerProcess], zk: KazooClient, tmp_path: Path) -> None:
    before = zk.get("/brokers/ids/1")
    cmd = [sys.executable, "-m", "app.cli", "broker", "--broker-id", "1", "--zookeeper",
           brokers[0].zk, "--host", "127.0.0.1", "--port", str(free_port()),
           "--data-dir", str(tmp_path / "dup")]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode != 0, out
    assert time.monotonic() - started < 30
    assert "broker.id 1 is already registered" in out and str(brokers[1].port) in out, out
    assert "Traceback" not in out, out  # a clear message, not a stack
    after = zk.get("/brokers/ids/1")
    assert after[1].czxid == before[1].czxid and after[0] == before[0]  # untouched
    assert httpx.get(f"{brokers[1].url}/v3/clusters", timeout=5).status_code == 200


def test_preferred_leader_gets_leadership_back_after_a_restart(
        brokers: list[BrokerProcess], zk: KazooClient) -> None:
    assert create(brokers[0], "pref", 3).status_code == 201
    wait_until(lambda: len(state(zk, "pref")["isr"]) == 3, 20, "full ISR")
    preferred = assignment(zk, "pref")[0]
    assert state(zk, "pref")["leader"] == preferred
    produce(brokers[0], "pref", list(range(20)))
    victim = brokers[preferred]
    victim.kill()
    wait_until(lambda: state(zk, "pref")["leader"] not in (preferred, -1), 20, "failover")
    victim.start()
    # back in the ISR, then the auto rebalance (every 2 s, > 10 % imbalance) moves it back
    wait_until(lambda: state(zk, "pref")["leader"] == preferred, 30, "preferred leader back")
    wait_until(lambda: leaders_seen(brokers, "pref") == [preferred], 10, "one leader")
    assert [v for _, v in read_all(brokers[0], "pref")] == list(range(20))


def test_preferred_election_on_request(brokers: list[BrokerProcess], zk: KazooClient) -> None:
    """The on-demand route writes Kafka's znode, which the controller deletes when done."""
    resp = httpx.post(v3(brokers[2], "preferred-replica-election"), timeout=10,
                      json={"version": 1, "partitions": [{"topic": "pref", "partition": 0}]})
    assert resp.status_code == 202, resp.text
    assert resp.json()["partitions"] == [{"topic": "pref", "partition": 0}]
    wait_until(lambda: zk.exists("/admin/preferred_replica_election") is None, 10, "done")
    assert state(zk, "pref")["leader"] == assignment(zk, "pref")[0]
    bad = httpx.post(v3(brokers[2], "preferred-replica-election"), timeout=10,
                     json={"version": 1, "partitions": [{"topic": "nope", "partition": 0}]})
    assert bad.status_code == 404


def test_reassignment_moves_the_data_and_deletes_the_old_replica(
        brokers: list[BrokerProcess], zk: KazooClient, tmp_path: Path) -> None:
    assert create(brokers[0], "moved", 2).status_code == 201
    wait_until(lambda: len(state(zk, "moved")["isr"]) == 2, 20, "full ISR")
    old = assignment(zk, "moved")
    (gone,) = [old[0]]
    newcomer = next(b for b in (0, 1, 2) if b not in old)
    target = [old[1], newcomer]
    values = [f"v{i}" for i in range(200)]
    produce(brokers[0], "moved", values)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moved", "partition": 0, "replicas": target}]}))
    cli = [sys.executable, "-m", "app.cli", "reassign-partitions", "--bootstrap-server",
           brokers[2].url, "--reassignment-json-file", str(plan)]
    done = subprocess.run([*cli, "--execute"], cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Successfully started partition reassignment" in done.stdout
    # a second request while the first runs is refused
    again = httpx.post(v3(brokers[1], "reassignments"), timeout=10, json=json.loads(
        plan.read_text()))
    if again.status_code != 400:  # the first had already finished: this one is a no-op
        assert again.status_code == 202, again.text
        assert assignment(zk, "moved") == target

    def verified() -> bool:
        return subprocess.run([*cli, "--verify"], cwd=ROOT, capture_output=True,
                              timeout=60).returncode == 0

    wait_until(verified, 60, "reassignment verified")
    wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, 20, "request znode gone")
    assert assignment(zk, "moved") == target
    st = state(zk, "moved")
    assert st["leader"] in target and set(st["isr"]) <= set(target)
    wait_until(lambda: not (brokers[gone].data_dir / "moved-0").exists(), 20, "old log deleted")
    assert replica(brokers[gone], "moved") is None
    wait_until(lambda: all((r := replica(brokers[b], "moved")) is not None and
                         r["log_end_offset"] == len(values) for b in target), 20, "data moved")
    for b in target:  # the new leader's high watermark follows its followers' fetches
        wait_until(lambda b=b: [v for _, v in read_all(brokers[b], "moved")] == values, 20,
                   f"every record readable through broker {b}")
    listed = httpx.get(v3(brokers[0], "topics", "-", "partitions", "-", "reassignment"),
                       timeout=10).json()
    assert listed["kind"] == "KafkaReassignmentList" and listed["data"] == []


def test_a_broker_down_during_a_topic_delete_drops_its_log_on_return(
        brokers: list[BrokerProcess], zk: KazooClient) -> None:
    assert create(brokers[0], "doomed", 3).status_code == 201
    wait_until(lambda: len(state(zk, "doomed")["isr"]) == 3, 20, "full ISR")
    produce(brokers[0], "doomed", ["x"] * 5)
    away = brokers[2]
    wait_until(lambda: (away.data_dir / "doomed-0").exists(), 10, "replica on disk")
    away.kill()
    assert httpx.delete(v3(brokers[0], "topics", "doomed"), timeout=30).status_code == 204
    assert zk.exists("/brokers/topics/doomed") is None
    assert (away.data_dir / "doomed-0").exists()
    away.start()
    wait_until(lambda: not (away.data_dir / "doomed-0").exists(), 20, "stray log deleted")
    assert not list(away.data_dir.glob("doomed-0*"))
    for b in brokers[:2]:
        assert not list(b.data_dir.glob("doomed-0*"))


def test_session_expiry_of_a_stopped_leader_is_recovered_without_split_brain(
        brokers: list[BrokerProcess], zk: KazooClient) -> None:
    assert create(brokers[0], "expiry", 3).status_code == 201
    wait_until(lambda: len(state(zk, "expiry")["isr"]) == 3, 20, "full ISR")
    leader = state(zk, "expiry")["leader"]
    produce(brokers[0], "expiry", list(range(10)))
    czxid = zk.exists(f"/brokers/ids/{leader}").czxid
    victim = brokers[leader]
    victim.signal(signal.SIGSTOP)
    try:
        wait_until(lambda: zk.exists(f"/brokers/ids/{leader}") is None, SESSION_MS / 1000 + 10,
                 "session expired")
        wait_until(lambda: state(zk, "expiry")["leader"] not in (leader, -1), 15, "failover")
        wait_until(lambda: zk.exists("/controller") is not None, 15, "a controller")
    finally:
        victim.signal(signal.SIGCONT)
    other = next(b for b in brokers if b.broker_id != leader)
    produce(other, "expiry", list(range(10, 20)))  # acked while the old leader was away
    wait_until(lambda: (s := zk.exists(f"/brokers/ids/{leader}")) is not None and
             s.czxid != czxid, 20, "registered again on a new session")
    # exactly one broker acts as leader: the one in ZooKeeper (the auto rebalance may
    # hand it back to the preferred replica meanwhile)
    wait_until(lambda: leaders_seen(brokers, "expiry") == [state(zk, "expiry")["leader"]], 20,
             "one leader, as in ZooKeeper")
    wait_until(lambda: len(state(zk, "expiry")["isr"]) == 3, 30, "back in the ISR")
    produce(victim, "expiry", list(range(20, 30)))
    # every acknowledged record, through every broker; a leader elected a moment ago (the
    # auto rebalance) shows them once its followers' next fetch has moved its high
    # watermark, as in Kafka, so each read may have to wait for that
    for b in brokers:
        wait_until(lambda b=b: [v for _, v in read_all(b, "expiry")] == list(range(30)), 20,
                   f"broker {b.broker_id} reads all 30 records")
    controller = json.loads(zk.get("/controller")[0])["brokerid"]

    def active_controllers() -> list[int]:
        return [b.broker_id for b in brokers
                if "franz_controller_activecontrollercount 1.0" in
                httpx.get(f"{b.url}/metrics", timeout=10).text]

    wait_until(lambda: active_controllers() == [controller], 10, "exactly one controller")


def test_isr_counters_are_exported(brokers: list[BrokerProcess]) -> None:
    text = "".join(httpx.get(f"{b.url}/metrics", timeout=10).text for b in brokers)
    shrinks = [line for line in text.splitlines()
               if line.startswith("franz_replicamanager_isrshrinks_total")]
    expands = [line for line in text.splitlines()
               if line.startswith("franz_replicamanager_isrexpands_total")]
    assert len(shrinks) == 3 and len(expands) == 3
    assert sum(float(line.split()[-1]) for line in expands) >= 1  # rejoins after restarts
