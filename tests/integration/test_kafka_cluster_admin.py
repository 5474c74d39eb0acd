"""Partition and replica administration over Kafka's protocol against a real ``franz
serve``: DescribeLogDirs, DescribeProducers, ElectLeaders, AlterPartitionReassignments and
ListPartitionReassignments, as kafka-python's and confluent-kafka's AdminClients call
them, and requests built with franz's codec where no client sends what is tested (null
lists, old versions, hostile sizes). What needs several brokers (a replica moving, a
leader elected) is tests/cluster/test_kafka_cluster_admin.py.

- DescribeLogDirs: the data dir with each replica's size on disk, growing with a produce,
  offset lag 0, and the volume's total and usable bytes (statvfs).
- DescribeProducers: an idempotent producer's id, epoch, last sequence and timestamp;
  none for a plain producer; unknown topics and partitions answered per partition.
- ElectLeaders on one broker: ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION, and for
  every partition (null) an empty answer.
- Reassignments on one broker: nothing listed; a target of the current replica accepted,
  Kafka's INVALID_REPLICA_ASSIGNMENT for empty, duplicate, negative and unregistered
  replicas, NO_REASSIGNMENT_IN_PROGRESS for a cancellation with nothing to cancel.
- Requests larger than the bounds are answered for the first 100,000 partitions.
- ACLs (a broker with SASL and ACLs): DESCRIBE / ALTER on the cluster, READ on the topic.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from api.kafka.protocol.codegen import decoder, encode
from api.kafka.protocol.schema import load
from tests.integration.conftest import FranzServer
from tests.integration.test_kafka_sasl import KafkaBroker, start_broker, stop_broker
from tests.integration.test_security import acl

kafka = pytest.importorskip("kafka")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import ElectionType  # noqa: E402
from confluent_kafka import TopicPartition as CkPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition  # noqa: E402
from kafka import errors as kerr  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402

WAIT_S = 20
ELECTION_NOT_NEEDED = 84
UNKNOWN = 3


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def server(kafka_server: FranzServer) -> FranzServer:
    return kafka_server


@pytest.fixture(scope="module")
def admin(server: FranzServer) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=WAIT_S * 1000)
    yield a
    a.close()


def new_topic(admin: KafkaAdminClient, partitions: int = 2) -> str:
    topic = name("ca")
    admin.create_topics([NewTopic(topic, partitions, 1)])
    return topic


class Raw:
    """One Kafka connection speaking franz's codec: any message, any version."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        self.correlation_id = 0

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def call(self, api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        spec = load(f"{api}Request")
        flexible = version in spec.flexible
        self.correlation_id += 1
        header = encode("RequestHeader", 2 if flexible else 1, {
            "request_api_key": spec.api_key, "request_api_version": version,
            "correlation_id": self.correlation_id, "client_id": "cluster-admin-test"})
        payload = header + encode(f"{api}Request", version, body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._exactly(4))
        frame = self._exactly(size)
        head, pos = decoder("ResponseHeader", 1 if flexible else 0)(frame, 0)
        assert head["correlation_id"] == self.correlation_id
        return decoder(f"{api}Response", version)(frame, pos)[0]

    def login(self, user: str, password: str) -> None:
        assert self.call("SaslHandshake", 1, {"mechanism": "PLAIN"})["error_code"] == 0
        done = self.call("SaslAuthenticate", 0,
                         {"auth_bytes": f"\0{user}\0{password}".encode()})
        assert done["error_code"] == 0, done

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return out


def codes(answer: dict[str, Any], results: str, partitions: str, index: str
          ) -> dict[tuple[str, int], int]:
    return {(t.get("topic", t.get("name")), p[index]): p["error_code"]
            for t in answer[results] for p in t[partitions]}


# --- DescribeLogDirs -------------------------------------------------------------------


def _log_dirs(admin: KafkaAdminClient, topic: str) -> tuple[dict[str, Any],
                                                           dict[int, dict[str, Any]]]:
    (broker,) = admin.describe_log_dirs({topic: [0, 1]})
    (log_dir,) = broker["log_dirs"]
    parts = {p["partition_index"]: p for t in log_dir["topics"] if t["name"] == topic
             for p in t["partitions"]}
    return log_dir, parts


def test_log_dirs_show_each_replica_growing_with_what_is_written(
        server: FranzServer, admin: KafkaAdminClient) -> None:
    topic = new_topic(admin)
    log_dir, before = _log_dirs(admin, topic)
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(server.data_dir.absolute())
    assert {p: (r["partition_size"], r["offset_lag"], r["is_future_key"])
            for p, r in before.items()} == {0: (0, 0, False), 1: (0, 0, False)}
    vfs = os.statvfs(server.data_dir)
    assert log_dir["total_bytes"] == vfs.f_blocks * vfs.f_frsize
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    assert abs(log_dir["usable_bytes"] - vfs.f_bavail * vfs.f_frsize) < 1 << 30

    p = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    for _ in range(100):
        p.send(topic, b"v" * 1000, partition=0)
    p.flush(WAIT_S)
    p.close()
    _, after = _log_dirs(admin, topic)
    assert after[0]["partition_size"] >= 100 * 1000
    assert after[0]["offset_lag"] == 0
    assert after[1]["partition_size"] == 0
    segment = server.data_dir / f"{topic}-0" / f"{0:020d}.log"
    assert after[0]["partition_size"] == segment.stat().st_size  # the bytes on disk


def test_log_dirs_of_every_topic_and_of_old_versions(server: FranzServer,
                                                     admin: KafkaAdminClient) -> None:
    topic = new_topic(admin)
    with Raw(server.kafka_port) as raw:
        every = raw.call("DescribeLogDirs", 4, {"topics": None})
        (result,) = every["results"]
        named = {t["name"]: len(t["partitions"]) for t in result["topics"]}
        assert named[topic] == 2 and named["__consumer_offsets"] == 50
        v0 = raw.call("DescribeLogDirs", 0, {"topics": [{"topic": topic, "partitions": [1]}]})
        (result,) = v0["results"]
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
                for t in result["topics"]] == [(topic, [1])]
        # a topic or partition this broker has no log of is left out, as Kafka does
        none = raw.call("DescribeLogDirs", 4, {"topics": [
            {"topic": "no-such-topic", "partitions": [0]}, {"topic": topic, "partitions": [7]}]})
        assert none["error_code"] == 0 and none["results"][0]["topics"] == []


# --- DescribeProducers -------------------------------------------------------------------


def test_producers_of_a_partition_are_its_idempotent_producers(
        server: FranzServer, admin: KafkaAdminClient) -> None:
    topic = new_topic(admin, 3)
    started = int(time.time() * 1000)
    p = KafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True, acks="all",
                      linger_ms=0, max_in_flight_requests_per_connection=1)
    for i in range(5):
        p.send(topic, b"%d" % i, partition=0).get(WAIT_S)
    p.close()
    plain = KafkaProducer(bootstrap_servers=server.bootstrap, acks=1)
    plain.send(topic, b"plain", partition=1).get(WAIT_S)
    plain.close()
    ended = int(time.time() * 1000)
    got = admin.describe_producers([TopicPartition(topic, i) for i in range(3)])
    (state,) = got[TopicPartition(topic, 0)].active_producers
    assert state.producer_id >= 0 and state.producer_epoch == 0
    assert state.last_sequence == 4  # five batches of one record: sequences 0..4
    assert started - 1000 <= state.last_timestamp <= ended + 1000
    assert (state.coordinator_epoch, state.current_transaction_start_offset) == (-1, -1)
    assert got[TopicPartition(topic, 1)].active_producers == []  # not idempotent
    assert got[TopicPartition(topic, 2)].active_producers == []
    # a second idempotent producer: another producer id beside the first
    q = KafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True, acks="all")
    q.send(topic, b"q", partition=0).get(WAIT_S)
    q.close()
    states = admin.describe_producers([TopicPartition(topic, 0)])[
        TopicPartition(topic, 0)].active_producers
    assert len({s.producer_id for s in states}) == 2
    assert {s.producer_id: s.last_sequence for s in states}[state.producer_id] == 4


def test_producers_of_unknown_topics_and_partitions(server: FranzServer,
                                                    admin: KafkaAdminClient) -> None:
    topic = new_topic(admin)
    with pytest.raises(kerr.UnknownTopicOrPartitionError):
        admin.describe_producers([TopicPartition(topic, 9)], broker_id=0)
    with Raw(server.kafka_port) as raw:
        answer = raw.call("DescribeProducers", 0, {"topics": [
            {"name": topic, "partition_indexes": [0, 9, -1]},
            {"name": "no-such-topic", "partition_indexes": [0]},
            {"name": "bad/name", "partition_indexes": [0]}]})
    assert codes(answer, "topics", "partitions", "partition_index") == {
        (topic, 0): 0, (topic, 9): UNKNOWN, (topic, -1): UNKNOWN,
        ("no-such-topic", 0): UNKNOWN, ("bad/name", 0): 17}  # INVALID_TOPIC_EXCEPTION


# --- ElectLeaders ---------------------------------------------------------------------


def test_elections_on_one_broker_are_never_needed(server: FranzServer,
                                                  admin: KafkaAdminClient) -> None:
    topic = new_topic(admin)
    ck_admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        got = ck_admin.elect_leaders(kind, [CkPartition(topic, 0), CkPartition(topic, 1),
                                            CkPartition(topic, 5)]).result(timeout=WAIT_S)
        assert {(tp.topic, tp.partition): err.code() for tp, err in got.items()} == {
            (topic, 0): ELECTION_NOT_NEEDED, (topic, 1): ELECTION_NOT_NEEDED,
            (topic, 5): UNKNOWN}
    # every partition: the ones that need nothing are left out
    assert ck_admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=WAIT_S) == {}
    # kafka-python takes ELECTION_NOT_NEEDED as success
    answer = admin.elect_leaders(0, {topic: [0]})
    assert answer.replica_election_results[0].partition_result[0].error_code == \
        ELECTION_NOT_NEEDED
    with Raw(server.kafka_port) as raw:
        v0 = raw.call("ElectLeaders", 0, {"topic_partitions": [
            {"topic": topic, "partitions": [0, -1]}], "timeout_ms": 1000})
        assert codes(v0, "replica_election_results", "partition_result", "partition_id") == {
            (topic, 0): ELECTION_NOT_NEEDED, (topic, -1): UNKNOWN}
        every = raw.call("ElectLeaders", 2, {"election_type": 1, "topic_partitions": None,
                                             "timeout_ms": 1000})
        assert every["error_code"] == 0 and every["replica_election_results"] == []
        odd = raw.call("ElectLeaders", 2, {"election_type": 7, "topic_partitions": [
            {"topic": topic, "partitions": [0]}], "timeout_ms": 1000})
        assert odd["error_code"] == 42  # INVALID_REQUEST
        assert "election type 7" in \
            odd["replica_election_results"][0]["partition_result"][0]["error_message"]


# --- reassignments ----------------------------------------------------------------------


def test_reassignments_on_one_broker(server: FranzServer, admin: KafkaAdminClient) -> None:
    topic = new_topic(admin, 6)
    assert admin.list_partition_reassignments() == {}
    tp = [TopicPartition(topic, i) for i in range(6)]
    got = admin.alter_partition_reassignments({
        tp[0]: [0],  # where it is: accepted, nothing moves
        tp[1]: [0, 0],
        tp[2]: [-1],
        tp[3]: [5],  # no broker 5
        tp[4]: None,  # nothing to cancel
        TopicPartition(topic, 9): [0],
    })
    assert got == {tp[0]: None, tp[1]: kerr.InvalidReplicationAssignmentError,
                   tp[2]: kerr.InvalidReplicationAssignmentError,
                   tp[3]: kerr.InvalidReplicationAssignmentError,
                   tp[4]: kerr.NoReassignmentInProgressError,
                   TopicPartition(topic, 9): kerr.UnknownTopicOrPartitionError}
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments({topic: [0, 1]}) == {}
    with Raw(server.kafka_port) as raw:
        answer = raw.call("AlterPartitionReassignments", 0, {"timeout_ms": 1000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 1, "replicas": [0, 0]},
                                           {"partition_index": 2, "replicas": []},
                                           {"partition_index": 3, "replicas": [0, 7]}]}]})
    messages = {p["partition_index"]: p["error_message"]
                for p in answer["responses"][0]["partitions"]}
    assert messages[1] == ("Duplicate replica ids in partition reassignment replica list: "
                           "[0, 0]")
    assert messages[2] == "Empty replica list specified in partition reassignment."
    assert "[7]" in messages[3] and "not registered" in messages[3]


# --- bounds ------------------------------------------------------------------------------


def test_huge_requests_are_answered_within_bounds(server: FranzServer,
                                                  admin: KafkaAdminClient) -> None:
    topic = new_topic(admin)
    with Raw(server.kafka_port) as raw:
        many = list(range(150_000))
        answer = raw.call("ElectLeaders", 2, {"election_type": 0, "timeout_ms": 1000,
                                              "topic_partitions": [
                                                  {"topic": topic, "partitions": many}]})
        got = codes(answer, "replica_election_results", "partition_result", "partition_id")
        assert len(got) == 100_000 and got[(topic, 0)] == ELECTION_NOT_NEEDED
        assert set(got.values()) == {ELECTION_NOT_NEEDED, UNKNOWN}
        answer = raw.call("DescribeProducers", 0, {"topics": [
            {"name": f"none-{i}", "partition_indexes": [0]} for i in range(12_000)]})
        assert len(answer["topics"]) == 10_000
        answer = raw.call("AlterPartitionReassignments", 0, {"timeout_ms": 1000, "topics": [
            {"name": topic, "partitions": [
                {"partition_index": 0, "replicas": list(range(200_000))}]}]})
        (result,) = answer["responses"][0]["partitions"]
        assert result["error_code"] == 39 and len(result["error_message"]) <= 1000
        # the connection is still served
        assert raw.call("ListPartitionReassignments", 0,
                        {"timeout_ms": 1000, "topics": None})["error_code"] == 0


# --- ACLs -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    b = start_broker(tmp_path_factory.mktemp("kafka-cluster-admin"),
                     lambda port: [f"kafka.listeners=SASL_PLAINTEXT://127.0.0.1:{port}"],
                     "SASL_PLAINTEXT")
    yield b
    stop_broker(b)


def _user(broker: KafkaBroker, *acls: tuple[str, str, str]) -> tuple[str, str]:
    user = name("user")
    password = f"{user}-Passw0rd"
    broker.add_user(user, password)
    if acls:
        broker.grant(*(acl(t, n, f"User:{user}", op) for t, n, op in acls))
    return user, password


def test_cluster_administration_needs_the_cluster_acls(secured: KafkaBroker) -> None:
    topic = secured.create_topic(name("sec"))
    user, password = _user(secured)
    with Raw(secured.kafka_port) as raw:
        raw.login(user, password)
        denied = 31  # CLUSTER_AUTHORIZATION_FAILED
        elect = raw.call("ElectLeaders", 2, {"election_type": 0, "timeout_ms": 1000,
                                             "topic_partitions": [
                                                 {"topic": topic, "partitions": [0]}]})
        assert elect["error_code"] == denied
        assert codes(elect, "replica_election_results", "partition_result",
                     "partition_id") == {(topic, 0): denied}
        assert raw.call("ElectLeaders", 2, {"election_type": 0, "timeout_ms": 1000,
                                            "topic_partitions": None}) == {
            "throttle_time_ms": 0, "error_code": denied, "replica_election_results": []}
        alter = raw.call("AlterPartitionReassignments", 0, {"timeout_ms": 1000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [0]}]}]})
        assert (alter["error_code"], alter["responses"]) == (denied, [])
        listed = raw.call("ListPartitionReassignments", 0, {"timeout_ms": 1000, "topics": None})
        assert listed["error_code"] == denied
        dirs = raw.call("DescribeLogDirs", 4, {"topics": None})
        assert (dirs["error_code"], dirs["results"]) == (denied, [])
        assert raw.call("DescribeLogDirs", 1, {"topics": None})["results"] == []
        producers = raw.call("DescribeProducers", 0, {"topics": [
            {"name": topic, "partition_indexes": [0]}]})
        assert codes(producers, "topics", "partitions", "partition_index") == {
            (topic, 0): 29}  # TOPIC_AUTHORIZATION_FAILED
    assert secured.wait_audit(lambda a: a["principal"] == f"User:{user}"
                              and a["operation"] == "ALTER" and a["result"] == "denied"
                              and a["resource"] == "CLUSTER:kafka-cluster")


def test_the_cluster_acls_let_an_operator_in(secured: KafkaBroker) -> None:
    topic = secured.create_topic(name("sec"))
    user, password = _user(secured, ("CLUSTER", "kafka-cluster", "ALTER"),
                           ("CLUSTER", "kafka-cluster", "DESCRIBE"), ("TOPIC", topic, "READ"))
    kp = KafkaAdminClient(bootstrap_servers=secured.bootstrap, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="PLAIN", sasl_plain_username=user,
                          sasl_plain_password=password, request_timeout_ms=WAIT_S * 1000)
    try:
        elected = kp.elect_leaders(0, {topic: [0]})
        assert elected.replica_election_results[0].partition_result[0].error_code == \
            ELECTION_NOT_NEEDED
        assert kp.alter_partition_reassignments({TopicPartition(topic, 0): [0]}) == {
            TopicPartition(topic, 0): None}
        assert kp.list_partition_reassignments() == {}
        (broker,) = kp.describe_log_dirs({topic: [0]})
        assert [t["name"] for t in broker["log_dirs"][0]["topics"]] == [topic]
        got = kp.describe_producers([TopicPartition(topic, 0)])
        assert got[TopicPartition(topic, 0)].active_producers == []
    finally:
        kp.close()
