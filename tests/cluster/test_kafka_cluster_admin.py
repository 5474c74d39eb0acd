"""Replica administration over Kafka's protocol on three real ``franz broker`` processes
and a real ZooKeeper, with kafka-python's and confluent-kafka's AdminClients (and
franz's codec for what a client only sends to the controller):

- AlterPartitionReassignments moves a partition to another broker: DescribeLogDirs shows
  the same bytes on the new broker and none left on the old one; a reassignment that
  cannot finish (its new replica's broker is paused) is listed with the replica it adds
  and is cancelled, the partition staying where it was. A broker that is not the
  controller answers NOT_CONTROLLER.
- A move that only adds a replica (to a paused broker) stays listed, by
  ListPartitionReassignments and the REST reassignment routes, with its adding replica in
  ZooKeeper, until that broker resumes and joins the ISR; then it completes and the
  adding replica is cleared.
- ElectLeaders UNCLEAN brings back a partition whose in-sync replicas are all gone, with
  an out-of-sync replica as leader (what only the old ISR had is lost); PREFERRED gives a
  partition back to its preferred replica once it is in sync again, asked of a broker
  that is not the controller; a preferred replica that is down is
  PREFERRED_LEADER_NOT_AVAILABLE, a second election ELECTION_NOT_NEEDED.

One cluster for the module; every test leaves the three brokers running.
"""

from __future__ import annotations

import json
import signal
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

from .conftest import BrokerProcess, free_port, kafka_brokers, live_broker_ids, running, wait_until

ck = pytest.importorskip("confluent_kafka")
kafka_python = pytest.importorskip("kafka")

from confluent_kafka import ElectionType  # noqa: E402
from confluent_kafka import TopicPartition as CkPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from kafka import KafkaAdminClient, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402

JSON_V2 = "application/vnd.kafka.json.v2+json"
OVERRIDES = ["zookeeper.session.timeout.ms=4000", "replica.lag.time.max.ms=2000",
             "replica.fetch.backoff.ms=200", "offsets.topic.num.partitions=1",
             "auto.leader.rebalance.enable=false", "controlled.shutdown.timeout.ms=5000"]
NOT_CONTROLLER, PREFERRED_LEADER_NOT_AVAILABLE, ELECTION_NOT_NEEDED = 41, 80, 84


@pytest.fixture(scope="module")
def kafka_ports() -> dict[int, int]:
    return {i: free_port() for i in range(3)}


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory,
            kafka_ports: dict[int, int]) -> Iterator[list[BrokerProcess]]:
    procs = kafka_brokers(zookeeper, tmp_path_factory.mktemp("kafka-cluster-admin"),
                          "kafka-admin", kafka_ports, OVERRIDES)
    with running(procs):
        wait_until(lambda: live_broker_ids(procs[0]) == [0, 1, 2], 20, "three live brokers")
        yield procs


@pytest.fixture(autouse=True)
def _brokers_back(brokers: list[BrokerProcess]) -> Iterator[None]:
    yield
    for b in brokers:
        if b.running:
            b.signal(signal.SIGCONT)
        else:
            b.start()
    wait_until(lambda: live_broker_ids(brokers[0]) == [0, 1, 2], 30, "three live brokers again")


def bootstrap(ports: dict[int, int], *ids: int) -> str:
    return ",".join(f"127.0.0.1:{ports[i]}" for i in (ids or sorted(ports)))


def controller(zk: KazooClient) -> int:
    return int(json.loads(zk.get("/controller")[0])["brokerid"])


def assignment(zk: KazooClient, topic: str) -> dict[int, list[int]]:
    data = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
    return {int(p): list(r) for p, r in data["partitions"].items()}


def state(zk: KazooClient, topic: str, partition: int = 0) -> dict[str, Any]:
    return dict(json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0]))


def create(ports: dict[int, int], topic: str, partitions: int, rf: int) -> None:
    kp = KafkaAdminClient(bootstrap_servers=bootstrap(ports), request_timeout_ms=30000)
    try:
        kp.create_topics([NewTopic(topic, partitions, rf)])
    finally:
        kp.close()


def produce(b: BrokerProcess, topic: str, values: list[Any]) -> None:
    r = httpx.post(f"{b.url}/topics/{topic}/partitions/0", params={"acks": "all"}, timeout=30,
                   headers={"Content-Type": JSON_V2},
                   content=json.dumps({"records": [{"value": v} for v in values]}))
    assert r.status_code == 200, r.text


def end_offset(b: BrokerProcess, topic: str) -> int:
    r = httpx.get(f"{b.url}/topics/{topic}/partitions/0/offsets", timeout=10)
    return int(r.json()["end_offset"]) if r.status_code == 200 else -1


def call(port: int, api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """One request to the broker at ``port``, built with franz's codec."""
    spec = load(f"{api}Request")
    flexible = version in spec.flexible
    header = encode("RequestHeader", 2 if flexible else 1, {
        "request_api_key": spec.api_key, "request_api_version": version,
        "correlation_id": 1, "client_id": "cluster-admin-test"})
    payload = header + encode(f"{api}Request", version, body)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(1 << 16)
            assert chunk, "the broker closed the connection"
            data += chunk
    _, pos = decoder("ResponseHeader", 1 if flexible else 0)(data[4:], 0)
    return decoder(f"{api}Response", version)(data[4:], pos)[0]


def log_dir_sizes(ports: dict[int, int], broker_id: int, topic: str) -> dict[int, int]:
    kp = KafkaAdminClient(bootstrap_servers=bootstrap(ports), request_timeout_ms=20000)
    try:
        (answer,) = kp.describe_log_dirs({topic: [0]}, brokers=[broker_id])
    finally:
        kp.close()
    return {p["partition_index"]: p["partition_size"]
            for d in answer["log_dirs"] for t in d["topics"] if t["name"] == topic
            for p in t["partitions"]}


def test_a_partition_moves_and_a_stuck_move_is_cancelled(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    topic = "ka-move"
    create(kafka_ports, topic, 1, 1)
    (old,) = assignment(zk, topic)[0]
    produce(brokers[old], topic, [{"n": i, "pad": "x" * 200} for i in range(50)])
    size = log_dir_sizes(kafka_ports, old, topic)[0]
    assert size > 50 * 200
    ctl = controller(zk)
    paused = next(i for i in range(3) if i not in (old, ctl))
    new = next(i for i in range(3) if i not in (old, paused))
    tp = TopicPartition(topic, 0)

    # only the controller takes it, as a ZooKeeper-mode Kafka answers
    other = next(i for i in range(3) if i != ctl)
    answer = call(kafka_ports[other], "AlterPartitionReassignments", 0, {
        "timeout_ms": 5000, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "replicas": [new]}]}]})
    assert answer["error_code"] == NOT_CONTROLLER and answer["responses"] == []

    kp = KafkaAdminClient(bootstrap_servers=bootstrap(kafka_ports), request_timeout_ms=20000)
    try:
        assert kp.alter_partition_reassignments({tp: [new]}) == {tp: None}
        wait_until(lambda: assignment(zk, topic)[0] == [new]
                   and not kp.list_partition_reassignments(), 30, f"{topic} on broker {new}")
        wait_until(lambda: log_dir_sizes(kafka_ports, new, topic).get(0) == size, 20,
                   f"the same {size} bytes on broker {new}")
        wait_until(lambda: log_dir_sizes(kafka_ports, old, topic) == {}, 20,
                   f"no replica left on broker {old}")

        # a move whose new replica cannot catch up (its broker is paused) is cancelled
        brokers[paused].signal(signal.SIGSTOP)
        try:
            assert kp.alter_partition_reassignments({tp: [paused]}) == {tp: None}
            listed = {"replicas": [paused, new], "adding_replicas": [paused],
                      "removing_replicas": [new]}
            wait_until(lambda: kp.list_partition_reassignments().get(tp) == listed, 10,
                       f"the reassignment listed as {listed}")
            assert kp.alter_partition_reassignments({tp: None}) == {tp: None}
            wait_until(lambda: not kp.list_partition_reassignments()
                       and assignment(zk, topic)[0] == [new], 15, "the move cancelled")
        finally:
            brokers[paused].signal(signal.SIGCONT)
        assert kp.alter_partition_reassignments({tp: None}) == {
            tp: kafka_python.errors.NoReassignmentInProgressError}
    finally:
        kp.close()
    assert end_offset(brokers[0], topic) == 50


def test_a_move_that_only_adds_a_replica_waits_for_it_to_catch_up(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    topic = "ka-add"
    create(kafka_ports, topic, 1, 1)
    (old,) = assignment(zk, topic)[0]
    produce(brokers[old], topic, [{"n": i, "pad": "x" * 200} for i in range(50)])
    size = log_dir_sizes(kafka_ports, old, topic)[0]
    ctl = controller(zk)
    new = next(i for i in range(3) if i not in (old, ctl))  # never pause the controller
    up = [i for i in range(3) if i != new]
    tp = TopicPartition(topic, 0)
    cid = httpx.get(f"{brokers[ctl].url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    rest = f"{brokers[ctl].url}/v3/clusters/{cid}/topics/{topic}/partitions/0/reassignment"
    listed = {"replicas": [old, new], "adding_replicas": [new], "removing_replicas": []}

    def moving() -> bool:
        got = httpx.get(rest, timeout=10)
        assert got.status_code in (200, 404), got.text
        in_zk = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
        return (kp.list_partition_reassignments().get(tp) == listed and got.status_code == 200
                and (got.json()["adding_replicas"], got.json()["removing_replicas"]) == ([new], [])
                and in_zk["adding_replicas"] == {"0": [new]}
                and zk.exists("/admin/reassign_partitions") is not None)

    kp = KafkaAdminClient(bootstrap_servers=bootstrap(kafka_ports, *up), request_timeout_ms=20000)
    try:
        assert kp.list_partition_reassignments() == {}  # finds the controller while all run
        brokers[new].signal(signal.SIGSTOP)
        try:
            assert kp.alter_partition_reassignments({tp: [old, new]}) == {tp: None}
            wait_until(lambda: assignment(zk, topic)[0] == [old, new], 10, "the replica added")
            # the target replicas are all assigned, but the new one is not in sync: the move
            # stays in progress, however long its broker is away
            wait_until(moving, 10, f"the move listed as {listed}")
            until = time.monotonic() + 3
            while time.monotonic() < until:
                assert moving(), "the move stopped being listed before its replica caught up"
                assert state(zk, topic)["isr"] == [old]
                time.sleep(0.3)
        finally:
            brokers[new].signal(signal.SIGCONT)
        wait_until(lambda: new in state(zk, topic)["isr"], 30, f"broker {new} in sync")
        wait_until(lambda: not kp.list_partition_reassignments()
                   and zk.exists("/admin/reassign_partitions") is None, 15, "the move done")
        assert httpx.get(rest, timeout=10).status_code == 404
        in_zk = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
        assert (in_zk["partitions"], in_zk["adding_replicas"], in_zk["removing_replicas"]) == \
            ({"0": [old, new]}, {}, {})
        assert state(zk, topic)["leader"] == old
        wait_until(lambda: log_dir_sizes(kafka_ports, new, topic).get(0) == size, 20,
                   f"the same {size} bytes on broker {new}")
    finally:
        kp.close()


def test_unclean_and_preferred_elections(brokers: list[BrokerProcess], zk: KazooClient,
                                         kafka_ports: dict[int, int]) -> None:
    create(kafka_ports, "ka-unclean", 1, 2)
    create(kafka_ports, "ka-pref", 3, 3)
    a, b = assignment(zk, "ka-unclean")[0]
    wait_until(lambda: sorted(state(zk, "ka-unclean")["isr"]) == sorted([a, b]), 20, "full ISR")
    pref = assignment(zk, "ka-pref")
    p_a = next(p for p, r in pref.items() if r[0] == a)  # a's partition of ka-pref
    p_b = next(p for p, r in pref.items() if r[0] == b)
    produce(brokers[b], "ka-unclean", [1, 2, 3])

    brokers[a].stop()  # controlled shutdown: b leads alone and takes two more records
    wait_until(lambda: state(zk, "ka-unclean")["isr"] == [b], 20, f"broker {b} alone in the ISR")
    produce(brokers[b], "ka-unclean", [4, 5])
    assert end_offset(brokers[b], "ka-unclean") == 5
    brokers[b].stop()
    wait_until(lambda: state(zk, "ka-unclean")["leader"] == -1, 20, "ka-unclean offline")
    brokers[a].start()  # out of sync: a clean election cannot make it leader
    wait_until(lambda: a in state(zk, "ka-pref", p_a)["isr"], 30, f"broker {a} in sync on ka-pref")
    assert state(zk, "ka-unclean")["leader"] == -1

    ctl = controller(zk)
    other = next(i for i in (a, 3 - a - b) if i != ctl)  # a live broker not the controller
    body = {"election_type": 1, "timeout_ms": 10000,
            "topic_partitions": [{"topic": "ka-unclean", "partitions": [0]}]}
    answer = call(kafka_ports[other], "ElectLeaders", 2, body)
    assert answer["replica_election_results"][0]["partition_result"][0]["error_code"] == \
        NOT_CONTROLLER
    admin = AdminClient({"bootstrap.servers": bootstrap(kafka_ports, a, 3 - a - b)})
    tp = CkPartition("ka-unclean", 0)
    got = admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(timeout=30)
    assert list(got.values()) == [None]
    assert (state(zk, "ka-unclean")["leader"], state(zk, "ka-unclean")["isr"]) == (a, [a])
    assert end_offset(brokers[a], "ka-unclean") == 3  # the two records only b had are gone
    again = admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(timeout=30)
    assert [e.code() for e in again.values()] == [ELECTION_NOT_NEEDED]

    # PREFERRED, asked of a broker that is not the controller (the election request goes
    # through ZooKeeper, as the REST route's does); b, preferred elsewhere, is down
    assert state(zk, "ka-pref", p_a)["leader"] != a
    answer = call(kafka_ports[other], "ElectLeaders", 2, {
        "election_type": 0, "timeout_ms": 20000,
        "topic_partitions": [{"topic": "ka-pref", "partitions": [p_a, p_b]}]})
    assert answer["error_code"] == 0
    results = {r["partition_id"]: r for r in answer["replica_election_results"][0][
        "partition_result"]}
    assert results[p_a]["error_code"] == 0
    assert results[p_b]["error_code"] == PREFERRED_LEADER_NOT_AVAILABLE
    assert f"preferred replica {b}" in results[p_b]["error_message"]
    assert state(zk, "ka-pref", p_a)["leader"] == a
    md = AdminClient({"bootstrap.servers": bootstrap(kafka_ports, other)}).list_topics(
        "ka-pref", timeout=10)
    assert md.topics["ka-pref"].partitions[p_a].leader == a  # the asked broker knows it
    got = admin.elect_leaders(ElectionType.PREFERRED, [CkPartition("ka-pref", p_a)]).result(
        timeout=30)
    assert [e.code() for e in got.values()] == [ELECTION_NOT_NEEDED]

    brokers[b].start()  # b follows a: it drops the two records the election lost
    wait_until(lambda: sorted(state(zk, "ka-unclean")["isr"]) == sorted([a, b]), 30,
               f"broker {b} back in sync")
    assert end_offset(brokers[b], "ka-unclean") == 3
    wait_until(lambda: log_dir_sizes(kafka_ports, b, "ka-unclean")
               == log_dir_sizes(kafka_ports, a, "ka-unclean"), 20,
               f"broker {b}'s log cut back to broker {a}'s")
