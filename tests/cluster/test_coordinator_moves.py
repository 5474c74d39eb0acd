"""Coordinators whose partition moves away and comes back (issue: "a returning coordinator
serves its old view and writes it back"), on three real brokers and a real ZooKeeper.

Each internal topic has one partition here, so one broker coordinates every group, the
registry and every Idempotency-Key. Leadership moves as an operator moves it:
``franz reassign-partitions`` with the new leader first, ``--verify``, then
``franz leader-election``. A broker that led, lost the partition and leads it again
(without a restart) must answer what the others wrote meanwhile, through every broker,
and must not write its old view back (a later move to the third broker, which loads
from the log, shows what the log holds). The same after the coordinator is SIGSTOPped
past its ZooKeeper session and resumed.
"""

from __future__ import annotations

import base64
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

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 4000
V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
OVERRIDES = [
    "replica.lag.time.max.ms=2000", f"zookeeper.session.timeout.ms={SESSION_MS}",
    "replica.fetch.backoff.ms=200", "offsets.topic.num.partitions=1",
    "idempotency.topic.num.partitions=1", "auto.leader.rebalance.enable=false",
    "log.flush.scheduler.interval.ms=200", "num.partitions=1",
    "default.replication.factor=3",
]
OFFSETS, SCHEMAS, KEYS = "__consumer_offsets", "_schemas", "__franz_idempotency"


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    root = tmp_path_factory.mktemp("coordinator-moves")
    zk = f"{zookeeper}/franz-moves-{os.getpid()}-{time.monotonic_ns()}"
    procs = [BrokerProcess(i, free_port(), root / f"data-{i}", zk, root / f"broker-{i}.log",
                           overrides=OVERRIDES) for i in range(3)]
    with running(procs):
        yield procs


@pytest.fixture(scope="module")
def zk(brokers: list[BrokerProcess]) -> Iterator[KazooClient]:
    client = KazooClient(hosts=brokers[0].zk, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def state(zk: KazooClient, topic: str) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/0/state")
    return dict(json.loads(data))


def replicas(zk: KazooClient, topic: str) -> list[int]:
    data, _ = zk.get(f"/brokers/topics/{topic}")
    return list(json.loads(data)["partitions"]["0"])


def tool(b: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args, "--bootstrap-server", b.url],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def move_leader(brokers: list[BrokerProcess], zk: KazooClient, topic: str, to: int,
                tmp: Path) -> None:
    """Leadership of ``topic``-0 to broker ``to`` with the tools, then wait until every
    broker's metadata names it."""
    wait_until(lambda: len(state(zk, topic)["isr"]) == 3, 30, f"full ISR of {topic}")
    target = [to] + [r for r in replicas(zk, topic) if r != to]
    plan = tmp / f"plan-{topic}-{to}-{time.monotonic_ns()}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target}]}))
    via = brokers[(to + 1) % 3]
    done = tool(via, "reassign-partitions", "--reassignment-json-file", str(plan), "--execute")
    assert done.returncode == 0, done.stdout + done.stderr
    wait_until(lambda: tool(via, "reassign-partitions", "--reassignment-json-file", str(plan),
                            "--verify").returncode == 0, 60, f"{topic} reassignment verified")
    wait_until(lambda: tool(via, "leader-election", "--topic", topic, "--partition", "0")
               .returncode == 0 and state(zk, topic)["leader"] == to, 60,
               f"{topic} led by broker {to}")
    wait_until(lambda: all(_leader_seen(b, topic) == to for b in brokers), 30,
               f"every broker sees broker {to} leading {topic}")


def _leader_seen(b: BrokerProcess, topic: str) -> int | None:
    try:
        resp = httpx.get(f"{b.url}/topics/{topic}/partitions/0", timeout=5)
    except httpx.HTTPError:
        return None
    return resp.json().get("leader") if resp.status_code == 200 else None


def ok(resp: httpx.Response, *codes: int) -> httpx.Response:
    assert resp.status_code in (codes or (200, 204)), f"{resp.status_code} {resp.text}"
    return resp


def retrying(call: Any, what: str, budget_s: float = 30.0) -> httpx.Response:
    """``call()`` until it is not a retriable answer (a coordinator still moving). Group
    calls do not use it: their router waits for a moving coordinator itself."""
    deadline = time.monotonic() + budget_s
    while True:
        resp: httpx.Response = call()
        if resp.status_code not in (503, 504) or time.monotonic() > deadline:
            assert resp.status_code < 500, f"{what}: {resp.status_code} {resp.text}"
            return resp
        time.sleep(0.3)


# --- consumer groups ------------------------------------------------------------------


def create_instance(b: BrokerProcess, group: str, name: str) -> str:
    ok(httpx.post(f"{b.url}/consumers/{group}", headers={"Content-Type": V2}, timeout=30,
                  json={"name": name, "format": "binary", "auto.commit.enable": "false"}), 200)
    return f"/consumers/{group}/instances/{name}"


def assign(b: BrokerProcess, instance: str, topic: str) -> None:
    ok(httpx.post(f"{b.url}{instance}/assignments", headers={"Content-Type": V2}, timeout=30,
                  json={"partitions": [{"topic": topic, "partition": 0}]}))


def commit(b: BrokerProcess, instance: str, topic: str, offset: int) -> None:
    ok(httpx.post(f"{b.url}{instance}/offsets", headers={"Content-Type": V2}, timeout=30,
                  json={"offsets": [{"topic": topic, "partition": 0, "offset": offset - 1}]}))


def committed(b: BrokerProcess, instance: str, topic: str) -> int:
    resp = ok(httpx.request(
        "GET", f"{b.url}{instance}/offsets", headers={"Content-Type": V2}, timeout=30,
        content=json.dumps({"partitions": [{"topic": topic, "partition": 0}]})), 200)
    return int(resp.json()["offsets"][0]["offset"])


def members(b: BrokerProcess, group: str) -> list[str]:
    cluster = httpx.get(f"{b.url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    resp = ok(httpx.get(
        f"{b.url}/v3/clusters/{cluster}/consumer-groups/{group}/consumers", timeout=30), 200)
    return sorted(c["consumer_id"] for c in resp.json()["data"])


def produce(b: BrokerProcess, topic: str, n: int) -> None:
    records = [{"value": base64.b64encode(f"v{i}".encode()).decode()} for i in range(n)]
    ok(retrying(lambda: httpx.post(f"{b.url}/topics/{topic}", headers={"Content-Type": BINARY},
                                   json={"records": records}, timeout=30), "produce"), 200)


def test_groups_keep_offsets_and_members_when_the_coordinator_moves_away_and_back(
        brokers: list[BrokerProcess], zk: KazooClient, tmp_path: Path) -> None:
    produce(brokers[0], "orders", 30)
    a = state(zk, OFFSETS)["leader"]
    b, c = [i for i in (0, 1, 2) if i != a]
    g1 = create_instance(brokers[a], "g1", "i1")
    assign(brokers[a], g1, "orders")
    commit(brokers[a], g1, "orders", 10)
    assert committed(brokers[a], g1, "orders") == 10

    move_leader(brokers, zk, OFFSETS, b, tmp_path)
    commit(brokers[b], g1, "orders", 20)
    create_instance(brokers[b], "g2", "joined-at-b")
    assert members(brokers[c], "g2") == ["joined-at-b"]

    move_leader(brokers, zk, OFFSETS, a, tmp_path)  # back: A never restarted
    for broker in brokers:
        assert committed(broker, g1, "orders") == 20, f"through broker {broker.broker_id}"
        assert members(broker, "g2") == ["joined-at-b"], f"through broker {broker.broker_id}"
    create_instance(brokers[a], "g2", "joined-at-a")  # a write of g2 on A ...
    move_leader(brokers, zk, OFFSETS, c, tmp_path)  # ... and what the log holds after it
    for broker in brokers:
        assert committed(broker, g1, "orders") == 20
        assert members(broker, "g2") == ["joined-at-a", "joined-at-b"]


def test_a_coordinator_paused_past_its_session_serves_what_was_written_meanwhile(
        brokers: list[BrokerProcess], zk: KazooClient, tmp_path: Path) -> None:
    a = state(zk, OFFSETS)["leader"]
    others = [i for i in (0, 1, 2) if i != a]
    g3 = create_instance(brokers[a], "g3", "before-pause")
    assign(brokers[a], g3, "orders")
    commit(brokers[a], g3, "orders", 5)
    paused = brokers[a]
    paused.signal(signal.SIGSTOP)
    try:
        wait_until(lambda: state(zk, OFFSETS)["leader"] in others, 30, "the offsets move")
        b = state(zk, OFFSETS)["leader"]
        commit(brokers[b], g3, "orders", 15)
        create_instance(brokers[b], "g3", "during-pause")
    finally:
        paused.signal(signal.SIGCONT)
    wait_until(lambda: a in state(zk, OFFSETS)["isr"], 60, "the paused broker back in the ISR")
    move_leader(brokers, zk, OFFSETS, a, tmp_path)
    for broker in brokers:
        assert committed(broker, g3, "orders") == 15, f"through broker {broker.broker_id}"
        assert members(broker, "g3") == ["before-pause", "during-pause"]


# --- the Schema Registry and Idempotency-Keys -----------------------------------------


def register(b: BrokerProcess, subject: str, field: str) -> int:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": f, "type": "string", "default": ""} for f in ("a", field)]}
    resp = ok(retrying(lambda: httpx.post(
        f"{b.url}/subjects/{subject}/versions", timeout=30,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        json={"schema": json.dumps(schema)}), "register"), 200)
    return int(resp.json()["id"])


def versions(b: BrokerProcess, subject: str) -> list[int]:
    return list(ok(retrying(lambda: httpx.get(f"{b.url}/subjects/{subject}/versions",
                                              timeout=30), "versions"), 200).json())


def keyed_produce(b: BrokerProcess, key: str, value: str) -> httpx.Response:
    body = {"records": [{"value": base64.b64encode(value.encode()).decode()}]}
    return retrying(lambda: httpx.post(
        f"{b.url}/topics/exactly", headers={"Content-Type": BINARY, "Idempotency-Key": key},
        json=body, timeout=30), f"produce with {key}")


def log_end(b: BrokerProcess, topic: str) -> int:
    resp = ok(httpx.get(f"{b.url}/topics/{topic}/partitions/0/offsets", timeout=10), 200)
    return int(resp.json()["end_offset"])


def test_registry_and_idempotency_keys_survive_their_coordinator_moving_away_and_back(
        brokers: list[BrokerProcess], zk: KazooClient, tmp_path: Path) -> None:
    produce(brokers[0], "exactly", 1)
    first = register(brokers[0], "moves-value", "b")
    k1 = ok(keyed_produce(brokers[0], "key-1", "one"), 200).json()
    for topic in (SCHEMAS, KEYS):
        wait_until(lambda t=topic: zk.exists(f"/brokers/topics/{t}") is not None, 30, topic)
    home = {t: state(zk, t)["leader"] for t in (SCHEMAS, KEYS)}
    for topic in (SCHEMAS, KEYS):
        away = next(i for i in (0, 1, 2) if i != home[topic])
        move_leader(brokers, zk, topic, away, tmp_path)
    second = register(brokers[0], "moves-value", "c")
    k2 = ok(keyed_produce(brokers[0], "key-2", "two"), 200).json()
    for topic in (SCHEMAS, KEYS):
        move_leader(brokers, zk, topic, home[topic], tmp_path)
    end = log_end(brokers[0], "exactly")
    for broker in brokers:
        assert versions(broker, "moves-value") == [1, 2]
        assert ok(keyed_produce(broker, "key-1", "one"), 200).json() == k1
        assert ok(keyed_produce(broker, "key-2", "two"), 200).json() == k2
        assert keyed_produce(broker, "key-2", "other body").status_code == 422
    assert log_end(brokers[0], "exactly") == end  # the retries wrote nothing
    third = register(brokers[home[SCHEMAS]], "moves-value", "d")
    assert len({first, second, third}) == 3  # no id handed out twice
    assert versions(brokers[0], "moves-value") == [1, 2, 3]
