"""DeleteRecords on a replicated partition, two real ``franz broker`` processes on a real
ZooKeeper: the leader answers once its follower's log start is there too (the follower
learns it from its fetches and writes it to its checkpoint before it reports it), so
when both brokers are killed right after the answer and only the follower comes back
and leads, consumers still start at the new offset: deleted records never come back."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from .conftest import BrokerProcess, free_port, kafka_brokers, running, wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

RECORDS, CUT = 40, 25
OVERRIDES = ["zookeeper.session.timeout.ms=4000", "replica.lag.time.max.ms=10000",
             "replica.fetch.backoff.ms=200", "offsets.topic.num.partitions=1",
             "offsets.topic.replication.factor=2"]


@pytest.fixture(scope="module")
def kafka_ports() -> dict[int, int]:
    return {i: free_port() for i in range(2)}


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory,
            kafka_ports: dict[int, int]) -> Iterator[list[BrokerProcess]]:
    procs = kafka_brokers(zookeeper, tmp_path_factory.mktemp("kafka-delete-records"),
                          "delete-records", kafka_ports, OVERRIDES)
    with running(procs):
        yield procs


def bootstrap(kafka_ports: dict[int, int], *ids: int) -> str:
    return ",".join(f"127.0.0.1:{kafka_ports[i]}" for i in (ids or sorted(kafka_ports)))


def state(zk: KazooClient, topic: str) -> dict[str, object]:
    try:
        data, _ = zk.get(f"/brokers/topics/{topic}/partitions/0/state")
    except Exception:  # noqa: BLE001 - not there yet
        return {}
    return dict(json.loads(data))


def starts_at(kafka_ports: dict[int, int], ids: tuple[int, ...], topic: str) -> tuple[int, int, int]:
    """(log start, high watermark, first offset a new group reads from the beginning)."""
    c = Consumer({"bootstrap.servers": bootstrap(kafka_ports, *ids), "group.id": uuid.uuid4().hex,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "topic.metadata.refresh.interval.ms": 1000})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)
        c.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                return low, high, m.offset()
        raise AssertionError("nothing read")
    finally:
        c.close()


def test_deleted_records_stay_deleted_on_the_follower_that_takes_over(
        brokers: list[BrokerProcess], kafka_ports: dict[int, int]) -> None:
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=brokers[0].zk, timeout=10)
    zk.start(timeout=10)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(kafka_ports)})
        admin.create_topics([NewTopic(topic, 1, 2, config={"segment.bytes": "1024"})],
                            operation_timeout=30)[topic].result(40)
        wait_until(lambda: sorted(state(zk, topic).get("isr", [])) == [0, 1], 30, "a full ISR")
        p = Producer({"bootstrap.servers": bootstrap(kafka_ports), "acks": "all"})
        for i in range(RECORDS):
            p.produce(topic, b"value-%03d-" % i + b"." * 60, partition=0)
        assert p.flush(30) == 0
        leader = int(state(zk, topic)["leader"])  # type: ignore[call-overload]
        follower = 1 - leader

        tp = TopicPartition(topic, 0, CUT)
        deleted = admin.delete_records([tp], operation_timeout=20)[tp].result(30)
        assert deleted.low_watermark == CUT  # the follower's log start is there too

        brokers[follower].kill()  # at once: only what it made durable before reporting
        brokers[leader].kill()
        brokers[follower].start()
        wait_until(lambda: state(zk, topic).get("leader") == follower, 30,
                   "the follower to lead")
        assert starts_at(kafka_ports, (follower,), topic) == (CUT, RECORDS, CUT)
        brokers[leader].start()
        assert starts_at(kafka_ports, (0, 1), topic) == (CUT, RECORDS, CUT)
    finally:
        zk.stop()
        zk.close()
