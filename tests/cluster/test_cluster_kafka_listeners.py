"""Three real ``franz broker`` processes, two of them with ``kafka.listeners``: each
registers ``/brokers/ids/<id>`` in Kafka's JSON (its Kafka endpoints, their protocol
map, host/port of the PLAINTEXT one) with its HTTP endpoint beside them; every broker
reads the others' Kafka endpoints back, and the brokers still call each other over HTTP
(a produce forwarded to the leader, acks=all through followers' fetches)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator

import httpx
import pytest
from kazoo.client import KazooClient

from core.broker.metadata.store import Endpoint
from core.broker.metadata.zk.store import ZkMetadataStore
from core.clock import SYSTEM_CLOCK

from .conftest import BrokerProcess, free_port, running, wait_until

JSON_V2 = "application/vnd.kafka.json.v2+json"
OVERRIDES = ["offsets.topic.num.partitions=1", "replica.fetch.backoff.ms=200",
             "min.insync.replicas=2", "zookeeper.session.timeout.ms=6000"]


@pytest.fixture(scope="module")
def kafka_ports() -> dict[int, dict[str, int]]:
    return {0: {"PLAINTEXT": free_port()},
            1: {"CLIENT": free_port(), "SASL_PLAINTEXT": free_port()}}


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory,
            kafka_ports: dict[int, dict[str, int]]) -> Iterator[list[BrokerProcess]]:
    root = tmp_path_factory.mktemp("kafka-listeners")
    zk = f"{zookeeper}/franz-kafka-listeners-{os.getpid()}-{time.monotonic_ns()}"
    own = {
        0: [f"kafka.listeners=PLAINTEXT://127.0.0.1:{kafka_ports[0]['PLAINTEXT']}"],
        1: [f"kafka.listeners=CLIENT://127.0.0.1:{kafka_ports[1]['CLIENT']},"
            f"SASL_PLAINTEXT://127.0.0.1:{kafka_ports[1]['SASL_PLAINTEXT']}",
            "listener.security.protocol.map=CLIENT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            f"kafka.advertised.listeners=CLIENT://localhost:{kafka_ports[1]['CLIENT']},"
            f"SASL_PLAINTEXT://127.0.0.1:{kafka_ports[1]['SASL_PLAINTEXT']}"],
        2: [],  # franz broker's default: no Kafka listener
    }
    procs = [BrokerProcess(i, free_port(), root / f"data-{i}", zk, root / f"broker-{i}.log",
                           overrides=[*OVERRIDES, *own[i]]) for i in range(3)]
    with running(procs):
        yield procs


def _znode(zk: KazooClient, broker_id: int) -> dict[str, object]:
    return dict(json.loads(zk.get(f"/brokers/ids/{broker_id}")[0]))


def test_brokers_register_their_kafka_endpoints_as_kafka_does(
        brokers: list[BrokerProcess], zk: KazooClient,
        kafka_ports: dict[int, dict[str, int]]) -> None:
    b0, b1, b2 = brokers
    wait_until(lambda: sorted(zk.get_children("/brokers/ids")) == ["0", "1", "2"], 20,
               "three registrations")
    first = _znode(zk, 0)
    plaintext = kafka_ports[0]["PLAINTEXT"]
    assert first == {
        "version": 5, "host": "127.0.0.1", "port": plaintext, "jmx_port": -1,
        "timestamp": first["timestamp"],
        "endpoints": [f"PLAINTEXT://127.0.0.1:{plaintext}", f"HTTP://127.0.0.1:{b0.port}"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "HTTP": "PLAINTEXT"},
        "features": {}}
    assert str(first["timestamp"]).isdigit()
    second = _znode(zk, 1)
    client, sasl = kafka_ports[1]["CLIENT"], kafka_ports[1]["SASL_PLAINTEXT"]
    assert second["endpoints"] == [f"CLIENT://localhost:{client}",
                                   f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
                                   f"HTTP://127.0.0.1:{b1.port}"]
    assert second["listener_security_protocol_map"] == {
        "CLIENT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "HTTP": "PLAINTEXT"}
    assert (second["host"], second["port"]) == ("localhost", client)  # its PLAINTEXT one
    third = _znode(zk, 2)
    assert third["endpoints"] == [f"HTTP://127.0.0.1:{b2.port}"]
    assert (third["host"], third["port"]) == (None, -1)


def test_every_broker_reads_the_kafka_endpoints_back(
        brokers: list[BrokerProcess], kafka_ports: dict[int, dict[str, int]]) -> None:
    async def read() -> dict[int, tuple[tuple[str, int, str], tuple[Endpoint, ...]]]:
        store = ZkMetadataStore(brokers[0].zk, clock=SYSTEM_CLOCK, session_timeout_s=6)
        await store.start()
        try:
            return {r.broker_id: ((r.host, r.port, r.scheme), r.kafka_endpoints)
                    for r in await store.live_brokers()}
        finally:
            await store.close()

    found = asyncio.run(read())
    assert found == {
        0: (("127.0.0.1", brokers[0].port, "http"),
            (Endpoint("PLAINTEXT", "127.0.0.1", kafka_ports[0]["PLAINTEXT"], "PLAINTEXT"),)),
        1: (("127.0.0.1", brokers[1].port, "http"),
            (Endpoint("CLIENT", "localhost", kafka_ports[1]["CLIENT"], "PLAINTEXT"),
             Endpoint("SASL_PLAINTEXT", "127.0.0.1", kafka_ports[1]["SASL_PLAINTEXT"],
                      "SASL_PLAINTEXT"))),
        2: (("127.0.0.1", brokers[2].port, "http"), ()),
    }


def test_brokers_still_call_each_other_over_http(brokers: list[BrokerProcess]) -> None:
    b0 = brokers[0]
    cid = httpx.get(f"{b0.url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    r = httpx.post(f"{b0.url}/v3/clusters/{cid}/topics", timeout=30, json={
        "topic_name": "kafka-door-orders", "partitions_count": 1, "replication_factor": 3})
    assert r.status_code in (200, 201), r.text
    listed = httpx.get(f"{b0.url}/v3/clusters/{cid}/brokers", timeout=10).json()["data"]
    assert sorted((b["broker_id"], b["port"]) for b in listed) == [
        (b.broker_id, b.port) for b in brokers]  # the HTTP addresses, as before

    def produced_through_all() -> bool:
        for b in brokers:  # two of them forward to the leader, over HTTP
            r = httpx.post(f"{b.url}/topics/kafka-door-orders/partitions/0",
                           params={"acks": "all"}, timeout=40,
                           headers={"Content-Type": JSON_V2},
                           content=json.dumps({"records": [{"value": {"via": b.broker_id}}]}))
            if r.status_code != 200 or r.json()["offsets"][0]["error_code"] is not None:
                return False
        return True

    wait_until(produced_through_all, 40, "acks=all produces through every broker")

    def read_all(b: BrokerProcess) -> set[int] | None:
        r = httpx.get(f"{b.url}/topics/kafka-door-orders/partitions/0/records",
                      params={"offset": 0}, headers={"Accept": JSON_V2}, timeout=30)
        vias = {row["value"]["via"] for row in r.json()} if r.status_code == 200 else set()
        return vias if vias >= {0, 1, 2} else None

    for b in brokers:
        wait_until(lambda b=b: read_all(b), 30, f"every record through broker {b.broker_id}")
