"""confluent-kafka (librdkafka) against franz's Kafka listener: a client no one here wrote,
as a team with existing Kafka applications would point it at franz.

Produce with every compression codec and idempotence on, consume by assignment and in a
group that rebalances, commit, look the group up with the AdminClient, administer topics
and configs; and what was produced over Kafka reads back over REST with the same keys,
values, headers and timestamps.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from conftest import FranzServer  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
WAIT_S = 20


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def server(kafka_server: FranzServer) -> FranzServer:
    return kafka_server


@pytest.fixture(scope="module")
def admin(server: FranzServer) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})


def create(admin: AdminClient, topic: str, partitions: int = 1, **configs: str) -> None:
    for fut in admin.create_topics([NewTopic(topic, partitions, 1, config=configs)]).values():
        fut.result(WAIT_S)


def produce(server: FranzServer, topic: str, records: list[tuple[bytes | None, bytes]], **conf: object
            ) -> list[tuple[int, int]]:
    """(partition, offset) of each record, in order; every delivery must succeed."""
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5,
                  "partitioner": "murmur2_random", **conf})
    out: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[object] = []

    def done(i: int):  # noqa: ANN202
        def cb(err, msg):  # noqa: ANN001, ANN202
            if err is not None:
                errors.append(err)
            else:
                out[i] = (msg.partition(), msg.offset())
        return cb

    for i, (key, value) in enumerate(records):
        p.produce(topic, key=key, value=value, headers=[("i", str(i).encode())],
                  timestamp=1_700_000_000_000 + i, on_delivery=done(i))
    assert p.flush(WAIT_S) == 0
    assert errors == []
    assert all(o is not None for o in out)
    return out  # type: ignore[return-value]


def consume_assigned(server: FranzServer, topic: str, partition: int, count: int) -> list:
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": name("assign"),
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        got: list = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m)
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_an_idempotent_producer_with_each_codec_is_read_back_in_order(
        server: FranzServer, admin: AdminClient, codec: str) -> None:
    topic = name(f"codec-{codec}")
    create(admin, topic)
    records = [(f"k{i}".encode(), f"value {i} {codec}".encode() * 3) for i in range(200)]
    placed = produce(server, topic, records, **{"compression.type": codec,
                                                "enable.idempotence": True})
    assert [o for _, o in placed] == list(range(200))
    got = consume_assigned(server, topic, 0, 200)
    assert [(m.key(), m.value()) for m in got] == records
    assert [m.offset() for m in got] == list(range(200))
    assert got[7].headers() == [("i", b"7")]
    assert got[7].timestamp() == (ck.TIMESTAMP_CREATE_TIME, 1_700_000_000_007)


def test_keyed_records_land_where_rest_puts_the_same_keys(server: FranzServer,
                                                           admin: AdminClient) -> None:
    """librdkafka's murmur2_random partitioner and franz's REST key placement agree
    (both are Java's), so keyed data from both doors meets in one partition per key."""
    topic = name("keys")
    create(admin, topic, partitions=6)
    keys = [f"user-{i}".encode() for i in range(30)]
    kafka_placed = produce(server, topic, [(k, b"x") for k in keys])
    r = httpx.post(f"{server.url}/topics/{topic}", timeout=WAIT_S,
                   headers={"Content-Type": "application/vnd.kafka.binary.v2+json"},
                   json={"records": [{"key": base64.b64encode(k).decode(), "value": "eA=="}
                                     for k in keys]})
    assert r.status_code == 200, r.text
    assert [o["partition"] for o in r.json()["offsets"]] == [p for p, _ in kafka_placed]


def test_what_kafka_produced_reads_back_over_rest_with_keys_headers_timestamps(
        server: FranzServer, admin: AdminClient) -> None:
    topic = name("interop")
    create(admin, topic)
    produce(server, topic, [(b"k1", b"v1"), (None, b"v2")])
    r = httpx.get(f"{server.url}/topics/{topic}/partitions/0/records", params={"offset": 0},
                  headers={"Accept": "application/vnd.kafka.binary.v2+json"}, timeout=WAIT_S)
    assert r.status_code == 200, r.text
    rows = r.json()
    assert [(row["key"], base64.b64decode(row["value"])) for row in rows] == [
        (base64.b64encode(b"k1").decode(), b"v1"), (None, b"v2")]
    assert rows[0]["timestamp"] == 1_700_000_000_000


def test_what_rest_produced_reads_back_over_kafka(server: FranzServer, admin: AdminClient) -> None:
    topic = name("rest-first")
    create(admin, topic)
    r = httpx.post(f"{server.url}/topics/{topic}", timeout=WAIT_S,
                   headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                   json={"records": [{"key": "a", "value": {"n": 1}}, {"key": "b", "value": [2]}]})
    assert r.status_code == 200, r.text
    got = consume_assigned(server, topic, 0, 2)
    assert [(m.key(), m.value()) for m in got] == [(b'"a"', b'{"n":1}'), (b'"b"', b"[2]")]


def test_watermarks_and_offsets_for_times(server: FranzServer, admin: AdminClient) -> None:
    topic = name("times")
    create(admin, topic)
    produce(server, topic, [(None, b"x")] * 10)
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": name("w")})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S) == (0, 10)
        found = c.offsets_for_times([TopicPartition(topic, 0, 1_700_000_000_004)], timeout=WAIT_S)
        assert found[0].offset == 4
        later = c.offsets_for_times([TopicPartition(topic, 0, 1_800_000_000_000)], timeout=WAIT_S)
        assert later[0].offset == -1  # no record that late: Kafka answers -1
    finally:
        c.close()


def _group_member(server: FranzServer, group: str, topic: str, seconds: float,
                  seen: dict, name_: str) -> None:
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "enable.auto.commit": False})
    c.subscribe([topic])
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is None:
                continue
            assert m.error() is None, m.error()
            seen.setdefault((m.partition(), m.offset()), []).append(name_)
            c.commit(message=m, asynchronous=False)
    finally:
        c.close()


def test_a_group_of_two_rebalances_shares_the_partitions_and_commits(
        server: FranzServer, admin: AdminClient) -> None:
    topic, group = name("grp"), name("g")
    create(admin, topic, partitions=4)
    produce(server, topic, [(f"k{i}".encode(), b"v") for i in range(80)])
    seen: dict = {}
    first = threading.Thread(target=_group_member, args=(server, group, topic, 10, seen, "a"))
    second = threading.Thread(target=_group_member, args=(server, group, topic, 6, seen, "b"))
    first.start()
    time.sleep(2)
    second.start()
    first.join()
    second.join()
    assert len(seen) == 80  # every record read
    committed = admin.list_consumer_group_offsets(
        [ck.ConsumerGroupTopicPartitions(group)])[group].result(WAIT_S)
    assert sum(tp.offset for tp in committed.topic_partitions) == 80
    groups = {g.group_id for g in admin.list_consumer_groups().result(WAIT_S).valid}
    assert group in groups
    desc = admin.describe_consumer_groups([group])[group].result(WAIT_S)
    assert desc.state == ck.ConsumerGroupState.EMPTY


def test_admin_topics_and_configs(server: FranzServer, admin: AdminClient) -> None:
    topic = name("admin")
    create(admin, topic, partitions=2, **{"retention.ms": "100000"})
    described = admin.describe_configs([ConfigResource("topic", topic)])
    entries = next(iter(described.values())).result(WAIT_S)
    assert entries["retention.ms"].value == "100000"
    admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])])[ConfigResource("topic", topic)].result(WAIT_S)
    entries = next(iter(admin.describe_configs([ConfigResource("topic", topic)]).values())).result(WAIT_S)
    assert (entries["retention.ms"].value, entries["cleanup.policy"].value) == ("5000", "delete,compact")
    bad = admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])])
    with pytest.raises(ck.KafkaException, match="retention.ms"):
        next(iter(bad.values())).result(WAIT_S)
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(WAIT_S)
    assert len(admin.list_topics(topic, timeout=WAIT_S).topics[topic].partitions) == 5
    with pytest.raises(ck.KafkaException, match="(?i)exist"):
        create(admin, topic)
    admin.delete_topics([topic])[topic].result(WAIT_S)
    r = httpx.get(f"{server.url}/topics/{topic}", timeout=WAIT_S)
    assert r.status_code == 404


def test_metadata_of_an_unknown_topic_without_auto_create(server: FranzServer) -> None:
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": name("m"),
                  "allow.auto.create.topics": False})
    try:
        md = c.list_topics(name("never"), timeout=WAIT_S)
        (t,) = md.topics.values()
        assert t.error is not None and t.error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        c.close()


@pytest.fixture
def rest_instance(server: FranzServer) -> Iterator[tuple[str, str]]:
    group = name("mixed")
    base = f"{server.url}/consumers/{group}"
    r = httpx.post(base, json={"name": "rest-1", "format": "binary",
                               "auto.offset.reset": "earliest", "auto.commit.enable": "false"},
                   headers={"Content-Type": "application/vnd.kafka.v2+json"}, timeout=WAIT_S)
    assert r.status_code == 200, r.text
    yield group, f"{base}/instances/rest-1"
    httpx.delete(f"{base}/instances/rest-1", timeout=WAIT_S)


def test_a_rest_instance_and_a_kafka_consumer_share_a_group(
        server: FranzServer, admin: AdminClient, rest_instance: tuple[str, str]) -> None:
    group, instance = rest_instance
    topic = name("mixed")
    create(admin, topic, partitions=4)
    produce(server, topic, [(f"k{i}".encode(), b"v") for i in range(40)])
    headers = {"Content-Type": "application/vnd.kafka.v2+json"}
    assert httpx.post(f"{instance}/subscription", json={"topics": [topic]}, headers=headers,
                      timeout=WAIT_S).status_code == 204
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    kafka_parts: set[int] = set()
    rest_parts: set[int] = set()
    deadline = time.monotonic() + 25
    try:
        while time.monotonic() < deadline and not (kafka_parts and rest_parts):
            c.poll(0.3)
            kafka_parts = {tp.partition for tp in c.assignment()}
            r = httpx.get(f"{instance}/assignments", timeout=WAIT_S,
                          headers={"Accept": "application/vnd.kafka.v2+json"})
            rest_parts = {p["partition"] for p in r.json().get("partitions", [])}
            httpx.get(f"{instance}/records", timeout=WAIT_S,  # keeps the instance alive
                      headers={"Accept": "application/vnd.kafka.binary.v2+json"},
                      params={"timeout": 100})
        assert kafka_parts and rest_parts, (kafka_parts, rest_parts)
        assert not kafka_parts & rest_parts
        assert kafka_parts | rest_parts == {0, 1, 2, 3}
        # a commit from the Kafka side is the group's committed offset for REST too
        mine = sorted(kafka_parts)[0]
        c.commit(offsets=[TopicPartition(topic, mine, 3)], asynchronous=False)
        r = httpx.request("GET", f"{instance}/offsets", timeout=WAIT_S,
                          headers={"Content-Type": "application/vnd.kafka.v2+json",
                                   "Accept": "application/vnd.kafka.v2+json"},
                          json={"partitions": [{"topic": topic, "partition": mine}]})
        assert r.status_code == 200, r.text
        assert r.json()["offsets"][0]["offset"] == 3
    finally:
        c.close()


def test_metrics_count_kafka_requests_by_api(server: FranzServer, admin: AdminClient) -> None:
    topic = name("metrics")
    create(admin, topic)
    produce(server, topic, [(None, b"x")] * 3)
    text = httpx.get(f"{server.url}/metrics", timeout=WAIT_S).text
    counts = {line.split("{request=\"")[1].split("\"")[0]: float(line.rsplit(" ", 1)[1])
              for line in text.splitlines()
              if line.startswith("franz_network_requestmetrics_requests_total{")}
    assert counts.get("Produce", 0) >= 1 and counts.get("Metadata", 0) >= 1
    assert counts.get("CreateTopics", 0) >= 1
    assert "franz_network_kafka_connections " in text
