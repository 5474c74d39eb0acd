"""KIP-951 on two real ``franz broker`` processes on a real ZooKeeper: Produce v10 and
Fetch v16 sent to a broker that does not lead the partition answer
NOT_LEADER_OR_FOLLOWER with the current leader and its epoch (CurrentLeader) and the
leader's endpoint on the listener the request came in on (NodeEndpoints), so the client
goes to the leader without asking Metadata first. Older versions have no such fields and
Fetch v12-v15 leave CurrentLeader empty, as Kafka 3.9 does. Raw requests over sockets
(the codec's own encoder), so every field is looked at.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from api.kafka.protocol.codegen import decoder, encode
from api.kafka.protocol.schema import load
from core.storage.records import NewRecord, build_batch

from .conftest import BrokerProcess, free_port, kafka_brokers, live_broker_ids, running, wait_until

TOPIC = "nvc-rf1"
NOT_LEADER_OR_FOLLOWER = 6


@pytest.fixture(scope="module")
def kafka_ports() -> dict[int, int]:
    return {i: free_port() for i in range(2)}


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory,
            kafka_ports: dict[int, int]) -> Iterator[list[BrokerProcess]]:
    procs = kafka_brokers(zookeeper, tmp_path_factory.mktemp("kafka-new-versions"),
                          "kafka-nv", kafka_ports,
                          ["zookeeper.session.timeout.ms=4000", "offsets.topic.num.partitions=1"])
    with running(procs):
        wait_until(lambda: live_broker_ids(procs[0]) == [0, 1], 20, "two live brokers")
        yield procs


def call(port: int, api: str, key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """One request over a connection of its own; its decoded answer."""
    flexible = version in load(f"{api}Request").flexible
    header = encode("RequestHeader", 2 if flexible else 1, {
        "request_api_key": key, "request_api_version": version, "correlation_id": 9,
        "client_id": "kip-951"})
    payload = header + encode(f"{api}Request", version, body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _exactly(sock, 4))
        frame = _exactly(sock, size)
    tagged = version in load(f"{api}Response").flexible
    answer, end = decoder(f"{api}Response", version)(frame, 5 if tagged else 4)
    assert end == len(frame)
    return answer


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def metadata(port: int) -> dict[str, Any]:
    (t,) = call(port, "Metadata", 3, 12, {
        "topics": [{"name": TOPIC, "topic_id": bytes(16)}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})["topics"]
    return t


def fetch_v(version: int, topic_id: bytes, epoch: int) -> dict[str, Any]:
    topic = {"topic_id": topic_id} if version >= 13 else {"topic": TOPIC}
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{**topic, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}]}


def test_a_non_leader_names_the_leader_and_its_endpoint(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    cluster = httpx.get(f"{brokers[0].url}/v3/clusters", timeout=10).json()["data"][0][
        "cluster_id"]
    r = httpx.post(f"{brokers[0].url}/v3/clusters/{cluster}/topics", timeout=30, json={
        "topic_name": TOPIC, "partitions_count": 1, "replication_factor": 1})
    assert r.status_code == 201, r.text
    state_path = f"/brokers/topics/{TOPIC}/partitions/0/state"
    wait_until(lambda: zk.exists(state_path) and json.loads(zk.get(state_path)[0])["leader"] >= 0,
               30, f"{TOPIC}-0 led")
    st = json.loads(zk.get(state_path)[0])
    leader, epoch = st["leader"], st["leader_epoch"]
    other = 1 - leader  # holds no replica of it
    # both brokers' metadata name that leader (they follow ZooKeeper a moment later)
    for i in (leader, other):
        wait_until(lambda i=i: [p["leader_id"] for p in metadata(kafka_ports[i])["partitions"]]
                   == [leader], 20, f"broker {i} to know {TOPIC}'s leader")
    topic_id = bytes(metadata(kafka_ports[other])["topic_id"])
    want_leader = {"leader_id": leader, "leader_epoch": epoch}
    want_nodes = [{"node_id": leader, "host": "127.0.0.1", "port": kafka_ports[leader],
                   "rack": None}]

    batch = bytes(build_batch([NewRecord(b"v")], now_ms=int(time.time() * 1000)))
    produce = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    for version in (10, 11):
        answer = call(kafka_ports[other], "Produce", 0, version, produce)
        (part,) = answer["responses"][0]["partition_responses"]
        assert part["error_code"] == NOT_LEADER_OR_FOLLOWER
        assert part["current_leader"] == want_leader, version
        assert answer["node_endpoints"] == want_nodes, version
    # the client goes there: the leader takes it
    answer = call(kafka_ports[leader], "Produce", 0, 10, produce)
    (part,) = answer["responses"][0]["partition_responses"]
    assert (part["error_code"], part["base_offset"]) == (0, 0)
    assert not answer["node_endpoints"]

    for version in (16, 17):
        for asked_epoch in (-1, epoch):
            answer = call(kafka_ports[other], "Fetch", 1, version,
                          fetch_v(version, topic_id, asked_epoch))
            ((t, part),) = [(t, p) for t in answer["responses"] for p in t["partitions"]]
            assert bytes(t["topic_id"]) == topic_id
            assert (part["error_code"], part["records"]) == (NOT_LEADER_OR_FOLLOWER, b"")
            assert part["current_leader"] == want_leader, version
            assert answer["node_endpoints"] == want_nodes, version
    # before v16 Kafka leaves CurrentLeader empty (v12 has the field, v16 fills it)
    for version in (12, 13, 15):
        answer = call(kafka_ports[other], "Fetch", 1, version, fetch_v(version, topic_id, epoch))
        (part,) = answer["responses"][0]["partitions"]
        assert part["error_code"] == NOT_LEADER_OR_FOLLOWER
        assert part["current_leader"] == {"leader_id": -1, "leader_epoch": -1}
    # the leader serves the record to the same request
    answer = call(kafka_ports[leader], "Fetch", 1, 16, fetch_v(16, topic_id, epoch))
    (part,) = answer["responses"][0]["partitions"]
    assert part["error_code"] == 0 and part["high_watermark"] == 1 and part["records"]
    assert not answer["node_endpoints"]
