"""DeleteRecords and OffsetDelete against a real ``franz serve``, as their users run them:
confluent-kafka's and kafka-python's AdminClients (what kafka-delete-records.sh and
kafka-consumer-groups.sh --delete-offsets send), raw requests where a client hides the
answer, and what consumers and the REST API see afterwards, also after a restart and
after a crash (SIGKILL) right after the deletion."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import KafkaConsumer  # noqa: E402
from kafka import TopicPartition as KpPartition  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.errors import (  # noqa: E402
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NoError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata  # noqa: E402

from api.kafka.protocol.codegen import decoder, encode  # noqa: E402
from tests.integration.conftest import FranzServer, free_port  # noqa: E402
from tests.integration.test_kafka_sasl import (  # noqa: E402
    ADMIN_PASSWORD,
    KafkaBroker,
    rdkafka_conf,
    start_broker,
    stop_broker,
)
from tests.integration.test_security import acl  # noqa: E402

WAIT_S = 20
RECORDS = 40
MECHANISM = "SCRAM-SHA-256"


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """A broker of this module's own: the tests stop, kill and start it."""
    s = FranzServer(tmp_path_factory.mktemp("kdelete") / "data", ["num.partitions=1"])
    s.kafka_port = free_port()
    s.start()
    yield s
    s.stop()


@pytest.fixture
def admin(server: FranzServer) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})


@pytest.fixture
def kp_admin(server: FranzServer) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=WAIT_S * 1000)
    yield a
    a.close()


def create(admin: AdminClient, topic: str, partitions: int = 1, **configs: str) -> None:
    for fut in admin.create_topics([NewTopic(topic, partitions, 1, config=configs)]).values():
        fut.result(WAIT_S)


def produce(server: FranzServer, topic: str, n: int, *, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        p.produce(topic, value=b"value-%03d-" % i + b"." * 60, partition=partition)
        p.poll(0)
    assert p.flush(WAIT_S) == 0


def first_offset_read(server: FranzServer, topic: str) -> int:
    """The first offset a new group's consumer from the beginning gets."""
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": name("fresh"),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                return m.offset()
        raise AssertionError("nothing read")
    finally:
        c.close()


def watermarks(server: FranzServer, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": name("w")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)
    finally:
        c.close()


def rest_view(server: FranzServer, topic: str) -> tuple[int, int, int]:
    """(v2 beginning_offset, v3 earliest_offset, first offset of a v3 read from the start)."""
    with httpx.Client(base_url=server.url, timeout=WAIT_S) as http:
        v2 = http.get(f"/topics/{topic}/partitions/0/offsets")
        assert v2.status_code == 200, v2.text
        cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        base = f"/v3/clusters/{cluster}/topics/{topic}/partitions/0"
        v3 = http.get(f"{base}/offset")
        assert v3.status_code == 200, v3.text
        records = http.get(f"{base}/records", params={"count": 1})
        assert records.status_code == 200, records.text
        return (v2.json()["beginning_offset"], v3.json()["earliest_offset"],
                records.json()["data"][0]["offset"])


def segment_files(server: FranzServer, topic: str) -> int:
    return len(list((server.data_dir / f"{topic}-0").glob("*.log")))


# --- raw requests ---------------------------------------------------------------------------


def call(server: FranzServer, api: str, key: int, version: int, body: dict[str, Any],
         *, flexible: bool) -> dict[str, Any]:
    header = encode("RequestHeader", 2 if flexible else 1,
                    {"request_api_key": key, "request_api_version": version,
                     "correlation_id": 11, "client_id": "delete-records-test"})
    payload = header + encode(f"{api}Request", version, body)
    with socket.create_connection(("127.0.0.1", server.kafka_port), timeout=WAIT_S) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)

        def exactly(n: int) -> bytes:
            out = b""
            while len(out) < n:
                chunk = sock.recv(n - len(out))
                assert chunk, "closed by the broker"
                out += chunk
            return out

        (size,) = struct.unpack(">i", exactly(4))
        frame = exactly(size)
    start = 5 if flexible else 4  # correlation id, then an empty tagged-field section
    body_out, _ = decoder(f"{api}Response", version)(frame, start)
    return body_out


def delete_records_raw(server: FranzServer, topics: dict[str, list[tuple[int, int]]],
                       *, version: int = 2, timeout_ms: int = 5000) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error code, low watermark)."""
    got = call(server, "DeleteRecords", 21, version, {
        "topics": [{"name": t, "partitions": [{"partition_index": p, "offset": o} for p, o in ps]}
                   for t, ps in topics.items()], "timeout_ms": timeout_ms},
        flexible=version >= 2)
    return {(t["name"], p["partition_index"]): (p["error_code"], p["low_watermark"])
            for t in got["topics"] for p in t["partitions"]}


# --- DeleteRecords --------------------------------------------------------------------------


def assert_starts_at(server: FranzServer, topic: str, start: int) -> None:
    assert watermarks(server, topic) == (start, RECORDS)
    assert first_offset_read(server, topic) == start
    assert rest_view(server, topic) == (start, start, start)


def test_deleted_records_stay_deleted_for_kafka_and_rest_after_a_crash_and_a_restart(
        server: FranzServer, admin: AdminClient) -> None:
    topic = name("dr")
    create(admin, topic, **{"segment.bytes": "1024"})  # ten records or so per segment
    produce(server, topic, RECORDS)
    assert_starts_at(server, topic, 0)
    files = segment_files(server, topic)
    assert files >= 4

    futures = admin.delete_records([TopicPartition(topic, 0, 25)], operation_timeout=10)
    deleted = futures[TopicPartition(topic, 0, 25)].result(WAIT_S)
    assert deleted.low_watermark == 25
    assert_starts_at(server, topic, 25)
    assert segment_files(server, topic) < files  # whole segments below 25 are gone now

    server.kill()  # right after the answer: nothing had time to flush or checkpoint
    server.start()
    assert_starts_at(server, topic, 25)
    server.restart()
    assert_starts_at(server, topic, 25)


def test_kafka_python_deletes_up_to_the_high_watermark_and_appends_go_on(
        server: FranzServer, admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    topic = name("hw")
    create(admin, topic)
    produce(server, topic, 10)
    got = kp_admin.delete_records({KpPartition(topic, 0): -1})
    assert got[KpPartition(topic, 0)]["low_watermark"] == 10
    assert watermarks(server, topic) == (10, 10)
    produce(server, topic, 3)
    assert first_offset_read(server, topic) == 10
    assert watermarks(server, topic) == (10, 13)


def test_delete_records_errors_are_kafkas(server: FranzServer, admin: AdminClient) -> None:
    topic, compacted = name("err"), name("compact")
    create(admin, topic, partitions=2)
    create(admin, compacted, **{"cleanup.policy": "compact"})
    produce(server, topic, 5)
    for version in (0, 1, 2):
        answers = delete_records_raw(server, {
            topic: [(0, 6), (1, 0), (7, 0)],  # above the HW; an empty partition; no such one
            "no-such-topic": [(0, 0)],
            "__consumer_offsets": [(0, 0)],
            compacted: [(0, 0)],
        }, version=version)
        assert answers == {
            (topic, 0): (1, -1),  # OFFSET_OUT_OF_RANGE
            (topic, 1): (0, 0),
            (topic, 7): (3, -1),  # UNKNOWN_TOPIC_OR_PARTITION
            ("no-such-topic", 0): (3, -1),
            ("__consumer_offsets", 0): (17, -1),  # INVALID_TOPIC_EXCEPTION
            (compacted, 0): (44, -1),  # POLICY_VIOLATION
        }, version
    assert delete_records_raw(server, {topic: [(0, -1)]}, version=0) == {(topic, 0): (0, 5)}
    assert watermarks(server, topic) == (5, 5)


# --- OffsetDelete ---------------------------------------------------------------------------


def commit_and_leave(server: FranzServer, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group,
                      enable_auto_commit=False)
    try:
        c.commit({KpPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})
    finally:
        c.close()


def committed(kp_admin: KafkaAdminClient, group: str, tps: list[KpPartition]) -> dict[KpPartition, int]:
    """The committed offsets OffsetFetch answers (-1: none)."""
    got = kp_admin.list_group_offsets({group: tps})[group]
    return {tp: got[tp].offset if tp in got else -1 for tp in tps}


def test_offset_delete_of_an_empty_group_shows_minus_one_also_after_a_restart(
        server: FranzServer, admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    topic, group = name("od"), name("odg")
    create(admin, topic, partitions=2)
    produce(server, topic, 4)
    tp0, tp1 = KpPartition(topic, 0), KpPartition(topic, 1)
    commit_and_leave(server, group, {(topic, 0): 3, (topic, 1): 1})
    assert committed(kp_admin, group, [tp0, tp1]) == {tp0: 3, tp1: 1}
    got = kp_admin.delete_group_offsets(group, [tp0, KpPartition(topic, 9)])
    assert got == {tp0: NoError, KpPartition(topic, 9): UnknownTopicOrPartitionError}
    assert committed(kp_admin, group, [tp0, tp1]) == {tp0: -1, tp1: 1}
    kp_admin.close()
    server.restart()
    again = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:  # the coordinator loads __consumer_offsets after the restart
            try:
                assert committed(again, group, [tp0, tp1]) == {tp0: -1, tp1: 1}
                break
            except kafka.errors.KafkaError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        # the group has no offsets of topic-0 left, but it still exists: topic-1's
        assert again.delete_group_offsets(group, [tp1]) == {tp1: NoError}
        assert committed(again, group, [tp0, tp1]) == {tp0: -1, tp1: -1}
        with pytest.raises(GroupIdNotFoundError):
            again.delete_group_offsets(group, [tp1])  # nothing left: no such group
    finally:
        again.close()


def test_an_active_group_keeps_the_offsets_of_topics_it_reads(
        server: FranzServer, admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    read, other, group = name("read"), name("other"), name("active")
    create(admin, read)
    create(admin, other)
    produce(server, read, 3)
    commit_and_leave(server, group, {(other, 0): 2})
    c = KafkaConsumer(read, bootstrap_servers=server.bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=10000, heartbeat_interval_ms=1000)
    try:
        deadline = time.monotonic() + WAIT_S
        while not c.assignment():
            assert time.monotonic() < deadline, "the consumer never joined"
            c.poll(200)
        c.commit()
        got = kp_admin.delete_group_offsets(group, [KpPartition(read, 0), KpPartition(other, 0)])
        assert got == {KpPartition(read, 0): GroupSubscribedToTopicError,
                       KpPartition(other, 0): NoError}
        assert committed(kp_admin, group, [KpPartition(read, 0), KpPartition(other, 0)]) == {
            KpPartition(read, 0): 3, KpPartition(other, 0): -1}
    finally:
        c.close()
    deadline = time.monotonic() + WAIT_S
    while True:  # gone from the group once it left: its offsets may go too
        got = kp_admin.delete_group_offsets(group, [KpPartition(read, 0)])
        if got == {KpPartition(read, 0): NoError} or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got == {KpPartition(read, 0): NoError}


def test_offset_delete_of_an_unknown_group_is_group_id_not_found(
        kp_admin: KafkaAdminClient) -> None:
    with pytest.raises(GroupIdNotFoundError):
        kp_admin.delete_group_offsets(name("nobody"), [KpPartition("whatever", 0)])


# --- ACLs -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    b = start_broker(tmp_path_factory.mktemp("kdelete-acls"),
                     lambda port: [f"kafka.listeners=SASL_PLAINTEXT://127.0.0.1:{port}"],
                     "SASL_PLAINTEXT")
    yield b
    stop_broker(b)


def sasl_admin(broker: KafkaBroker, user: str, password: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol=broker.protocol,
                            sasl_mechanism=MECHANISM, sasl_plain_username=user,
                            sasl_plain_password=password, request_timeout_ms=10000)


def test_both_need_delete_acls(secured: KafkaBroker) -> None:
    topic, group = secured.create_topic(name("t")), name("g")
    user, password = name("user"), "user-Passw0rd"
    secured.add_user(user, password)
    secured.grant(acl("TOPIC", topic, f"User:{user}", "DESCRIBE"))
    p = Producer(rdkafka_conf(secured, MECHANISM, "admin", ADMIN_PASSWORD))
    for _ in range(3):
        p.produce(topic, b"v")
    assert p.flush(WAIT_S) == 0
    c = KafkaConsumer(bootstrap_servers=secured.bootstrap, group_id=group,
                      security_protocol=secured.protocol, sasl_mechanism=MECHANISM,
                      sasl_plain_username="admin", sasl_plain_password=ADMIN_PASSWORD)
    c.commit({KpPartition(topic, 0): OffsetAndMetadata(2, "", -1)})
    c.close()

    conf = rdkafka_conf(secured, MECHANISM, user, password)
    as_user = AdminClient({k: v for k, v in conf.items() if not k.startswith("reconnect")})
    tp = TopicPartition(topic, 0, 2)
    with pytest.raises(ck.KafkaException) as denied:
        as_user.delete_records([tp])[tp].result(WAIT_S)
    assert denied.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    kp = sasl_admin(secured, user, password)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            kp.delete_group_offsets(group, [KpPartition(topic, 0)])

        secured.grant(acl("TOPIC", topic, f"User:{user}", "DELETE"),
                      acl("GROUP", group, f"User:{user}", "DELETE"))
        assert as_user.delete_records([tp])[tp].result(WAIT_S).low_watermark == 2
        # DELETE on the group, but no READ on the topic: refused for its partitions
        assert kp.delete_group_offsets(group, [KpPartition(topic, 0)]) == {
            KpPartition(topic, 0): TopicAuthorizationFailedError}
        secured.grant(acl("TOPIC", topic, f"User:{user}", "READ"))
        assert kp.delete_group_offsets(group, [KpPartition(topic, 0)]) == {
            KpPartition(topic, 0): NoError}
    finally:
        kp.close()
