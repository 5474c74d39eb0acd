"""Consumer groups in a cluster: any broker answers for any group (forwarded to the
coordinator), and the group with its committed offsets survives the coordinator's death.

Three real ``franz broker`` processes on a real ZooKeeper. The group is chosen so that
its coordinator (the leader of its ``__consumer_offsets`` partition) is broker B; the
client talks to A and C only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from core.broker.group.hashing import coordinator_partition

from .conftest import BrokerProcess, free_port, read_instance_records, running, wait_until

JSON_V2 = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"
OFFSETS_PARTITIONS = 3
OVERRIDES = ["zookeeper.session.timeout.ms=4000", "replica.lag.time.max.ms=2000",
             "replica.fetch.backoff.ms=200", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
             "log.flush.scheduler.interval.ms=200"]


@pytest.fixture
def brokers(zk_chroot: str, tmp_path: Path) -> Iterator[list[BrokerProcess]]:
    procs = [BrokerProcess(i, free_port(), tmp_path / f"b{i}", zk_chroot, tmp_path / f"b{i}.log",
                           overrides=OVERRIDES) for i in range(3)]
    with running(procs):
        yield procs


@pytest.fixture
def zk(zk_chroot: str) -> Iterator[KazooClient]:
    hosts, chroot = zk_chroot.split("/", 1)
    client = KazooClient(hosts=f"{hosts}/{chroot}")
    client.start(timeout=15)
    yield client
    client.stop()


def offsets_leader(zk: KazooClient, partition: int) -> int:
    path = f"/brokers/topics/__consumer_offsets/partitions/{partition}/state"
    if not zk.exists(path):
        return -1
    return int(json.loads(zk.get(path)[0])["leader"])


def offsets_topic_ready(zk: KazooClient) -> bool:
    for p in range(OFFSETS_PARTITIONS):
        path = f"/brokers/topics/__consumer_offsets/partitions/{p}/state"
        if not zk.exists(path) or len(json.loads(zk.get(path)[0])["isr"]) != 3:
            return False
    return True


def group_led_by(zk: KazooClient, broker_id: int) -> str:
    for i in range(1000):
        group = f"billing-{i}"
        if offsets_leader(zk, coordinator_partition(group, OFFSETS_PARTITIONS)) == broker_id:
            return group
    raise AssertionError(f"no group coordinated by broker {broker_id}")


def produce(b: BrokerProcess, topic: str, values: list[Any]) -> None:
    r = httpx.post(f"{b.url}/topics/{topic}?acks=all", timeout=15,
                   headers={"Content-Type": JSON_V2},
                   json={"records": [{"value": v, "partition": 0} for v in values]})
    assert r.status_code == 200, r.text
    assert all(o.get("error_code") is None for o in r.json()["offsets"]), r.text


def read_until(b: BrokerProcess, group: str, instance: str, want: int) -> list[dict[str, Any]]:
    return read_instance_records(f"{b.url}/consumers/{group}/instances/{instance}", want)


def committed(b: BrokerProcess, group: str, instance: str, topic: str) -> int:
    r = httpx.request("GET", f"{b.url}/consumers/{group}/instances/{instance}/offsets",
                      headers={"Content-Type": V2, "Accept": V2}, timeout=15,
                      json={"partitions": [{"topic": topic, "partition": 0}]})
    assert r.status_code == 200, r.text
    return int(r.json()["offsets"][0]["offset"])


def new_instance(b: BrokerProcess, group: str, name: str, topic: str) -> dict[str, Any]:
    r = httpx.post(f"{b.url}/consumers/{group}", headers={"Content-Type": V2}, timeout=15,
                   json={"name": name, "format": "json", "auto.offset.reset": "earliest",
                         "auto.commit.enable": "false"})
    assert r.status_code == 200, r.text
    s = httpx.post(f"{b.url}/consumers/{group}/instances/{name}/subscription", timeout=15,
                   headers={"Content-Type": V2}, json={"topics": [topic]})
    assert s.status_code == 204, s.text
    return dict(r.json())


def test_group_answers_through_any_broker_and_survives_its_coordinator(
        brokers: list[BrokerProcess], zk: KazooClient) -> None:
    wait_until(lambda: offsets_topic_ready(zk), 40, "__consumer_offsets with RF=3")
    coord = 1
    group = group_led_by(zk, coord)
    a, c = brokers[0], brokers[2]
    cid = httpx.get(f"{a.url}/v3/clusters", timeout=5).json()["data"][0]["cluster_id"]
    r = httpx.post(f"{a.url}/v3/clusters/{cid}/topics", timeout=15, json={
        "topic_name": "orders", "partitions_count": 1, "replication_factor": 3})
    assert r.status_code == 201, r.text
    wait_until(lambda: all(httpx.get(f"{b.url}/topics/orders", timeout=5).status_code == 200
                           for b in brokers), 20, "orders everywhere")
    produce(a, "orders", [f"a{i}" for i in range(10)])

    # created and read through A, committed through C, while B coordinates the group
    created = new_instance(a, group, "i1", "orders")
    assert created["base_uri"].endswith(f":{a.port}/consumers/{group}/instances/i1")
    rows = read_until(a, group, "i1", 10)
    assert [row["value"] for row in rows] == [f"a{i}" for i in range(10)]
    r = httpx.post(f"{c.url}/consumers/{group}/instances/i1/offsets", timeout=15,
                   headers={"Content-Type": V2})  # no body: what was fetched
    assert r.status_code == 200, r.text
    for b in brokers:  # the same answer from every broker
        assert committed(b, group, "i1", "orders") == 10
        lags = httpx.get(f"{b.url}/v3/clusters/{cid}/consumer-groups/{group}/lags",
                         timeout=15).json()["data"]
        assert [(x["partition_id"], x["current_offset"], x["lag"]) for x in lags] == [(0, 10, 0)]
        listed = httpx.get(f"{b.url}/v3/clusters/{cid}/consumer-groups", timeout=15).json()
        assert group in [g["consumer_group_id"] for g in listed["data"]]  # every broker lists it

    # the coordinator dies: the controller moves its offsets partition, the group reloads
    brokers[coord].kill()
    p = coordinator_partition(group, OFFSETS_PARTITIONS)
    wait_until(lambda: offsets_leader(zk, p) not in (coord, -1), 30, "a new coordinator")
    produce(c, "orders", [f"b{i}" for i in range(5)])

    # a new instance of the group, through a survivor, starts at the committed offset
    def fresh_instance() -> bool:
        r = httpx.post(f"{c.url}/consumers/{group}", headers={"Content-Type": V2}, timeout=20,
                       json={"name": "i2", "format": "json", "auto.offset.reset": "earliest",
                             "auto.commit.enable": "false"})
        return r.status_code == 200
    wait_until(fresh_instance, 30, "the group served by its new coordinator")
    httpx.delete(f"{a.url}/consumers/{group}/instances/i1", timeout=15)  # i1 leaves: i2 gets p0
    s = httpx.post(f"{c.url}/consumers/{group}/instances/i2/subscription", timeout=15,
                   headers={"Content-Type": V2}, json={"topics": ["orders"]})
    assert s.status_code == 204, s.text
    rows = read_until(c, group, "i2", 5)
    assert [row["value"] for row in rows] == [f"b{i}" for i in range(5)]
    assert [row["offset"] for row in rows] == list(range(10, 15))
