"""Real Kafka clients against three real ``franz broker`` processes on a real ZooKeeper,
each broker with its own Kafka listener: librdkafka (confluent-kafka), kafka-python and,
where Debian's ``kcat`` is installed, kcat.

- Metadata from any broker names all three brokers with their Kafka endpoints, the
  controller, and the leaders, replicas and ISRs ZooKeeper holds; a topic created with
  AdminClient shows on every broker.
- An idempotent librdkafka producer (acks=all) goes on through a kill -9 of a
  partition's leader and a controlled restart (SIGTERM) of another broker: every
  acknowledged record is there exactly once, in order, at its acknowledged offset, read
  by librdkafka and kafka-python consumers that follow the leaders meanwhile, and
  afterwards by kafka-python, kcat and REST. Asked from the moment it is elected, the
  new leader never shows an end below what was acknowledged (ListOffsets), and the old
  epoch ends after every acknowledged record (OffsetForLeaderEpoch).
- A group of two librdkafka consumers bootstrapped on the two brokers that do not
  coordinate it: FindCoordinator names the leader of the group's ``__consumer_offsets``
  partition (Kafka's hash, three partitions); the coordinator is killed while they read
  and commit, and they go on with the new one from the committed offsets (a record is
  read again only if its commit had not been acknowledged); then the next coordinator
  is stopped (SIGTERM) and hands the group over the same way.

- A broker without a replica of a partition answers NOT_LEADER_OR_FOLLOWER (the client
  refreshes and goes to the leader); a follower's Fetch (replica_id >= 0) closes the
  connection: franz brokers replicate over HTTP.

One cluster for the module; tests run in file order and leave every broker running.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from .conftest import BrokerProcess, free_port, kafka_brokers, live_broker_ids, running, wait_until

ck = pytest.importorskip("confluent_kafka")
kafka_python = pytest.importorskip("kafka")

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

JSON_V2 = "application/vnd.kafka.json.v2+json"
SESSION_MS = 4000
OFFSETS_PARTITIONS = 3
OVERRIDES = [f"zookeeper.session.timeout.ms={SESSION_MS}", "replica.lag.time.max.ms=2000",
             "replica.fetch.backoff.ms=200", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
             "min.insync.replicas=2", "log.flush.scheduler.interval.ms=200",
             "controlled.shutdown.timeout.ms=5000"]
# librdkafka settings that keep failovers quick in a test: metadata refreshed often,
# reconnects soon
FAST = {"topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 100,
        "socket.connection.setup.timeout.ms": 3000}


@pytest.fixture(scope="module")
def kafka_ports() -> dict[int, int]:
    return {i: free_port() for i in range(3)}


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory,
            kafka_ports: dict[int, int]) -> Iterator[list[BrokerProcess]]:
    procs = kafka_brokers(zookeeper, tmp_path_factory.mktemp("kafka-cluster"),
                          "kafka-cluster", kafka_ports, OVERRIDES)
    with running(procs):
        wait_until(lambda: live_broker_ids(procs[0]) == [0, 1, 2], 20, "three live brokers")
        yield procs


@pytest.fixture(autouse=True)
def _brokers_back(brokers: list[BrokerProcess]) -> Iterator[None]:
    """A test that failed half-way leaves no broker down for the next one."""
    yield
    for b in brokers:
        if not b.running:
            b.start()


def bootstrap(kafka_ports: dict[int, int], *ids: int) -> str:
    return ",".join(f"127.0.0.1:{kafka_ports[i]}" for i in (ids or sorted(kafka_ports)))


def zk_state(zk: KazooClient, topic: str, partition: int) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return dict(json.loads(data))


def zk_states(zk: KazooClient, topic: str) -> dict[int, dict[str, Any]]:
    parts = zk.get_children(f"/brokers/topics/{topic}/partitions")
    return {int(p): zk_state(zk, topic, int(p)) for p in parts}


def full_isr(zk: KazooClient, topic: str, partitions: int) -> bool:
    try:
        states = zk_states(zk, topic)
    except Exception:  # noqa: BLE001 - not there yet
        return False
    return len(states) == partitions and all(
        sorted(st["isr"]) == [0, 1, 2] and st["leader"] >= 0 for st in states.values())


class Errors:
    """What librdkafka reports through error_cb: transport errors while a broker is down
    are expected; anything else is a failure of the test."""

    EXPECTED = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
                KafkaError._TIMED_OUT}

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, err: Any) -> None:
        self.seen.append(err)

    def unexpected(self) -> list[str]:
        return [str(e) for e in self.seen if e.code() not in self.EXPECTED or e.fatal()]


def metadata_agrees(zk: KazooClient, kafka_ports: dict[int, int], topic: str,
                    live: list[int]) -> None:
    """Metadata from each of the ``live`` brokers names just them, the controller and the
    leaders and leader epochs ZooKeeper holds (the brokers apply changes a moment after
    ZooKeeper has them)."""
    from kafka import KafkaAdminClient

    def agrees(i: int) -> bool:
        md = AdminClient({"bootstrap.servers": bootstrap(kafka_ports, i)}).list_topics(
            topic, timeout=10)
        kp = KafkaAdminClient(bootstrap_servers=bootstrap(kafka_ports, i),
                              request_timeout_ms=10000)
        try:
            (desc,) = kp.describe_topics([topic])
        finally:
            kp.close()
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        states = zk_states(zk, topic)
        return (sorted(md.brokers) == live and md.controller_id == controller and
                {p.id: p.leader for p in md.topics[topic].partitions.values()} ==
                {p: st["leader"] for p, st in states.items()} and
                {p["partition_index"]: p["leader_epoch"] for p in desc["partitions"]} ==
                {p: st["leader_epoch"] for p, st in states.items()})

    for i in live:
        wait_until(lambda i=i: agrees(i), 20, f"broker {i}'s Metadata to agree with ZooKeeper")


# --- Metadata -------------------------------------------------------------------------------


def test_metadata_from_every_broker_names_all_three(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(kafka_ports, 0)})
    futures = admin.create_topics([NewTopic("kc-meta", num_partitions=3, replication_factor=3)],
                                  operation_timeout=30, request_timeout=30)
    futures["kc-meta"].result(timeout=40)
    wait_until(lambda: full_isr(zk, "kc-meta", 3), 30, "kc-meta's ISRs full")
    states = zk_states(zk, "kc-meta")
    assignment = json.loads(zk.get("/brokers/topics/kc-meta")[0])["partitions"]
    want_brokers = {i: ("127.0.0.1", kafka_ports[i]) for i in range(3)}
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    for i in range(3):
        md = AdminClient({"bootstrap.servers": bootstrap(kafka_ports, i)}).list_topics(
            timeout=20)
        assert {b.id: (b.host, b.port) for b in md.brokers.values()} == want_brokers
        assert md.controller_id == controller
        topic = md.topics["kc-meta"]
        assert topic.error is None
        got = {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs))
               for p in topic.partitions.values()}
        assert got == {p: (st["leader"], sorted(assignment[str(p)]), sorted(st["isr"]))
                       for p, st in states.items()}, f"broker {i}"
        assert all(p.error is None for p in topic.partitions.values())

    # kafka-python reads the same from each broker
    from kafka import KafkaAdminClient
    for i in range(3):
        kp = KafkaAdminClient(bootstrap_servers=bootstrap(kafka_ports, i), request_timeout_ms=20000)
        try:
            cluster = kp.describe_cluster()
            assert sorted((b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]) == [
                (j, "127.0.0.1", kafka_ports[j]) for j in range(3)]
            assert cluster["controller_id"] == controller
            (desc,) = kp.describe_topics(["kc-meta"])
            assert {p["partition_index"]: (p["leader_id"], p["leader_epoch"], sorted(p["isr_nodes"]))
                    for p in desc["partitions"]} == {
                p: (st["leader"], st["leader_epoch"], sorted(st["isr"])) for p, st in states.items()}
        finally:
            kp.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="Debian's kcat is not installed")
def test_kcat_lists_the_cluster_from_every_broker(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    states = zk_states(zk, "kc-meta")
    for i in range(3):
        out = subprocess.run(["kcat", "-b", bootstrap(kafka_ports, i), "-L", "-J", "-t", "kc-meta"],
                             capture_output=True, timeout=30, check=True).stdout
        md = json.loads(out)
        assert sorted((b["id"], b["name"]) for b in md["brokers"]) == [
            (j, f"127.0.0.1:{kafka_ports[j]}") for j in range(3)]
        (topic,) = md["topics"]
        assert {p["partition"]: (p["leader"], sorted(r["id"] for r in p["isrs"]))
                for p in topic["partitions"]} == {
            p: (st["leader"], sorted(st["isr"])) for p, st in states.items()}


def test_a_broker_without_a_replica_answers_not_leader(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    """A client whose metadata is stale (a reassignment moved the partition, or a broker
    that never hosted it) asks a broker that holds no replica: Kafka answers
    NOT_LEADER_OR_FOLLOWER for a partition its metadata knows, so the client refreshes
    and finds the leader (UNKNOWN_TOPIC_OR_PARTITION is for partitions that do not
    exist)."""
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    topic = "kc-rf1"
    admin = AdminClient({"bootstrap.servers": bootstrap(kafka_ports)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[
        topic].result(timeout=40)
    wait_until(lambda: zk.exists(f"/brokers/topics/{topic}/partitions/0/state") and
               zk_state(zk, topic, 0)["leader"] >= 0, 30, f"{topic}-0 led")
    st = zk_state(zk, topic, 0)
    leader, epoch = st["leader"], st["leader_epoch"]
    other = (leader + 1) % 3  # a broker without a replica of it
    port = kafka_ports[other]
    wait_until(lambda: httpx.get(f"{brokers[other].url}/topics/{topic}", timeout=5).status_code
               == 200, 10, f"broker {other} to know {topic}")  # it follows ZooKeeper

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1024)
    builder.append(timestamp=None, key=None, value=b"x", headers=[])
    builder.close()
    t = ProduceRequest.TopicProduceData
    produce = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[t(
        name=topic, partition_data=[t.PartitionProduceData(index=0, records=builder.buffer())])])
    (answer,) = kafka_call(port, produce, 7).responses[0].partition_responses
    assert answer.error_code == 6

    f = FetchRequest.FetchTopic
    fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=[f(
                             topic=topic, partitions=[f.FetchPartition(
                                 partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                 log_start_offset=-1, partition_max_bytes=1 << 20)])],
                         forgotten_topics_data=[], rack_id="")
    (part,) = kafka_call(port, fetch, 11).responses[0].partitions
    assert part.error_code == 6

    assert list_latest(port, topic, 0, epoch)[0] == 6
    assert end_of_epoch(port, topic, 0, epoch, epoch)[0] == 6
    # the leader answers
    assert list_latest(kafka_ports[leader], topic, 0, epoch)[0] == 0
    # a partition that does not exist stays UNKNOWN_TOPIC_OR_PARTITION
    assert list_latest(port, topic, 1, -1)[0] == 3


def test_a_follower_fetch_over_kafka_closes_the_connection(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    """franz brokers replicate over HTTP: a Fetch with a replica id >= 0 is not served."""
    from kafka.protocol.consumer import FetchRequest

    st = zk_state(zk, "kc-meta", 0)
    f = FetchRequest.FetchTopic
    fetch = FetchRequest(replica_id=(st["leader"] + 1) % 3, max_wait_ms=0, min_bytes=0,
                         max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                         topics=[f(topic="kc-meta", partitions=[f.FetchPartition(
                             partition=0, current_leader_epoch=st["leader_epoch"],
                             fetch_offset=0, log_start_offset=-1,
                             partition_max_bytes=1 << 20)])],
                         forgotten_topics_data=[], rack_id="")
    with pytest.raises(ConnectionError):
        kafka_call(kafka_ports[st["leader"]], fetch, 11)


def test_producer_ids_are_unique_across_brokers(
        brokers: list[BrokerProcess], kafka_ports: dict[int, int]) -> None:
    """InitProducerId on any broker hands out an id no other broker hands out (blocks
    of ids taken in ZooKeeper, as Kafka does): two idempotent producers sharing an id
    would have their sequence numbers checked against each other's."""
    from kafka.protocol.producer import InitProducerIdRequest

    ids = []
    for _ in range(4):
        for i in range(3):
            req = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1)
            got = kafka_call(kafka_ports[i], req, 4)
            assert (got.error_code, got.producer_epoch) == (0, 0)
            ids.append(got.producer_id)
    assert len(set(ids)) == len(ids), ids


# --- an idempotent producer through failovers ------------------------------------------------


class Producing:
    """An idempotent librdkafka producer (acks=all) sending ``i`` to partition ``i % n``
    in a thread, as fast as acks come back in a small window; what was acknowledged is
    kept per partition, in the order of the delivery reports."""

    def __init__(self, kafka_ports: dict[int, int], topic: str, partitions: int) -> None:
        self.errors = Errors()
        self.producer = Producer({
            "bootstrap.servers": bootstrap(kafka_ports), "enable.idempotence": True,
            "acks": "all", "linger.ms": 5, "message.timeout.ms": 120_000,
            "request.timeout.ms": 10_000, "error_cb": self.errors, **FAST})
        self.topic, self.partitions = topic, partitions
        self.acked: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(f"{int(msg.value())}: {err}")
            return
        self.acked[msg.partition()].append((int(msg.value()), msg.offset()))

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.sent - self.acked_count() - len(self.failed) >= 50:
                self.producer.poll(0.05)
                continue
            i = self.sent
            self.producer.produce(self.topic, value=str(i).encode(), partition=i % self.partitions,
                                  on_delivery=self._report)
            self.sent += 1
            self.producer.poll(0)
            time.sleep(0.005)

    def start(self) -> None:
        self._thread.start()

    def progress(self, more: int, timeout_s: float, what: str) -> None:
        """Until ``more`` records more were acknowledged."""
        target = self.acked_count() + more
        wait_until(lambda: self.acked_count() >= target or self.failed, timeout_s, what)
        assert not self.failed, self.failed[:5]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        left = self.producer.flush(60)
        assert left == 0, f"{left} records never acknowledged"


class Tailing:
    """A librdkafka consumer assigned every partition from offset 0 (no group), reading
    in a thread while the brokers fail: it follows each new leader (ListOffsets,
    OffsetForLeaderEpoch validation); ``auto.offset.reset=error`` turns any reset of its
    position into an error instead of a silent re-read or skip."""

    def __init__(self, kafka_ports: dict[int, int], topic: str, partitions: int) -> None:
        self.errors = Errors()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap(kafka_ports), "group.id": "kc-tail",
            "enable.auto.commit": False, "auto.offset.reset": "error",
            "fetch.wait.max.ms": 200, "error_cb": self.errors, **FAST})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.got: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        self.message_errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                self.message_errors.append(str(msg.error()))
                continue
            self.got[msg.partition()].append((msg.offset(), int(msg.value())))

    def until(self, ends: dict[int, int], timeout_s: float) -> None:
        wait_until(lambda: all(self.got[p] and self.got[p][-1][0] >= end - 1
                               for p, end in ends.items()), timeout_s, "the tail consumer's reads")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.consumer.close()


class KafkaPythonTailing:
    """As ``Tailing``, with kafka-python (its own leader-epoch validation after a leader
    change); a reset of its position would read from the start again, which shows as
    offsets read twice."""

    def __init__(self, kafka_ports: dict[int, int], topic: str, partitions: int) -> None:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KpPartition
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap(kafka_ports), enable_auto_commit=False,
            auto_offset_reset="earliest", request_timeout_ms=20000, metadata_max_age_ms=1000,
            fetch_max_wait_ms=200, retry_backoff_ms=100, reconnect_backoff_max_ms=500)
        tps = [KpPartition(topic, p) for p in range(partitions)]
        self.consumer.assign(tps)
        for tp in tps:
            self.consumer.seek(tp, 0)
        self.got: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                polled = self.consumer.poll(timeout_ms=200)
            except Exception as exc:  # noqa: BLE001 - reported by the test
                self.failures.append(repr(exc))
                time.sleep(0.2)
                continue
            for tp, records in polled.items():
                self.got[tp.partition] += [(r.offset, int(r.value)) for r in records]

    def until(self, ends: dict[int, int], timeout_s: float) -> None:
        wait_until(lambda: all(self.got[p] and self.got[p][-1][0] >= end - 1
                               for p, end in ends.items()), timeout_s,
                   "the kafka-python tail consumer's reads")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.consumer.close()


def kafka_call(port: int, request: Any, version: int) -> Any:
    """One request to one broker over a connection of its own, with kafka-python's
    protocol classes; its decoded answer."""
    import socket
    import struct
    import sys

    protocol = sys.modules[type(request).__module__]
    answer_class = getattr(protocol, type(request).__name__.replace("Request", "Response"))
    request.with_header(correlation_id=1, client_id="kc-raw")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        return answer_class.decode(_read_exactly(sock, size), version=version, header=True)


def _read_exactly(sock: Any, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def list_latest(port: int, topic: str, partition: int, epoch: int) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v4 (latest) for one partition."""
    from kafka.protocol.consumer import ListOffsetsRequest
    t = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[t(name=topic, partitions=[
        t.ListOffsetsPartition(partition_index=partition, current_leader_epoch=epoch,
                               timestamp=-1)])])
    (part,) = kafka_call(port, req, 4).topics[0].partitions
    return part.error_code, part.offset


def end_of_epoch(port: int, topic: str, partition: int, current: int,
                 epoch: int) -> tuple[int, int, int]:
    """(error code, epoch, end offset) of OffsetForLeaderEpoch v4 for one partition."""
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest
    t = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[t(topic=topic, partitions=[
        t.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current,
                                   leader_epoch=epoch)])])
    (part,) = kafka_call(port, req, 4).topics[0].partitions
    return part.error_code, part.leader_epoch, part.end_offset


def read_over_kafka_python(kafka_ports: dict[int, int], topic: str, partition: int,
                           end: int) -> list[tuple[int, int]]:
    """(offset, value) of a partition below ``end`` with kafka-python (no group)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap(kafka_ports), enable_auto_commit=False,
                      auto_offset_reset="earliest", request_timeout_ms=20000,
                      metadata_max_age_ms=1000)
    tp = KpPartition(topic, partition)
    out: list[tuple[int, int]] = []
    try:
        c.assign([tp])
        c.seek(tp, 0)
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                out += [(r.offset, int(r.value)) for r in records]
    finally:
        c.close()
    return out


def read_over_kcat(kafka_ports: dict[int, int], topic: str, partition: int) -> list[tuple[int, int]]:
    out = subprocess.run(["kcat", "-b", bootstrap(kafka_ports), "-C", "-t", topic,
                          "-p", str(partition), "-o", "beginning", "-e", "-q", "-f", "%o %s\\n"],
                         capture_output=True, timeout=60, check=True).stdout.decode()
    return [(int(o), int(v)) for o, v in (line.split() for line in out.splitlines())]


def read_over_rest(b: BrokerProcess, topic: str, partition: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    offset = 0
    while True:
        r = httpx.get(f"{b.url}/topics/{topic}/partitions/{partition}/records", timeout=30,
                      params={"offset": offset}, headers={"Accept": JSON_V2})
        assert r.status_code == 200, r.text
        rows = r.json()
        if not rows:
            return out
        out += [(row["offset"], int(row["value"])) for row in rows]
        offset = rows[-1]["offset"] + 1


def _new_leader(zk: KazooClient, topic: str, partition: int, old: int) -> tuple[int, int] | None:
    st = zk_state(zk, topic, partition)
    return None if st["leader"] in (old, -1) else (st["leader"], st["leader_epoch"])


def new_leader_offsets(port: int, topic: str, acked: list[tuple[int, int]], epoch: int,
                       old_epoch: int) -> None:
    """Asked from the moment it is elected, the new leader of ``topic``-0 never shows an
    end below what was acknowledged (while its high watermark is below the start of its
    epoch it answers OFFSET_NOT_AVAILABLE, which clients retry), and the old epoch ends
    after every acknowledged record (OffsetForLeaderEpoch)."""
    retriable = {6, 74, 75, 78}  # not leader yet, fenced / unknown epoch, offsets not yet
    codes: list[int] = []
    deadline = time.monotonic() + 20
    while True:
        acked_end = max((o for _, o in acked), default=-1) + 1
        code, offset = list_latest(port, topic, 0, epoch)
        codes.append(code)
        if code == 0:
            assert offset >= acked_end, (
                f"the new leader's end {offset} is below the acknowledged {acked_end}")
            break
        assert code in retriable, f"ListOffsets on the new leader answered {code}"
        assert time.monotonic() < deadline, f"ListOffsets answered only {codes[-5:]}"
        time.sleep(0.02)
    code, end_epoch, end = end_of_epoch(port, topic, 0, epoch, old_epoch)
    assert code == 0
    assert end_epoch == old_epoch
    assert end >= acked_end, f"epoch {old_epoch} ends at {end}, before acknowledged {acked_end}"
    assert end_of_epoch(port, topic, 0, old_epoch, old_epoch)[0] == 74  # FENCED_LEADER_EPOCH
    assert end_of_epoch(port, topic, 0, epoch + 1, old_epoch)[0] == 75  # UNKNOWN_LEADER_EPOCH


def test_idempotent_producer_goes_on_through_failovers(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    topic, n = "kc-idem", 2
    admin = AdminClient({"bootstrap.servers": bootstrap(kafka_ports, 1)})
    admin.create_topics([NewTopic(topic, num_partitions=n, replication_factor=3)])[topic].result(
        timeout=40)
    wait_until(lambda: full_isr(zk, topic, n), 30, f"{topic}'s ISRs full")
    producing = Producing(kafka_ports, topic, n)
    tail = Tailing(kafka_ports, topic, n)
    kp_tail = KafkaPythonTailing(kafka_ports, topic, n)
    producing.start()
    try:
        producing.progress(100, 30, "records acknowledged before any failure")
        # kill -9 the leader of partition 0
        victim = zk_state(zk, topic, 0)["leader"]
        before = zk_state(zk, topic, 0)["leader_epoch"]
        brokers[victim].kill()
        new_leader, epoch = wait_until(lambda: _new_leader(zk, topic, 0, victim), 30,
                                       f"a new leader of {topic}-0", every_s=0.02)
        assert epoch > before
        new_leader_offsets(kafka_ports[new_leader], topic, producing.acked[0], epoch, before)
        producing.progress(100, 60, f"records acknowledged with broker {victim} killed")
        metadata_agrees(zk, kafka_ports, topic, [b for b in range(3) if b != victim])
        brokers[victim].start()
        wait_until(lambda: full_isr(zk, topic, n), 60, f"broker {victim} back in every ISR")
        producing.progress(50, 30, "records acknowledged after the restart")
        # a controlled restart (SIGTERM: leadership handed away first) of another broker
        # that leads a partition
        other = next(b for b in [zk_state(zk, topic, 1)["leader"], zk_state(zk, topic, 0)["leader"],
                                 (victim + 1) % 3] if b != victim)
        brokers[other].stop()
        producing.progress(100, 60, f"records acknowledged with broker {other} stopped")
        brokers[other].start()
        wait_until(lambda: full_isr(zk, topic, n), 60, f"broker {other} back in every ISR")
        producing.progress(50, 30, "records acknowledged at the end")
        metadata_agrees(zk, kafka_ports, topic, [0, 1, 2])
    finally:
        producing.stop()
    try:
        assert not producing.failed, producing.failed[:5]
        assert not producing.errors.unexpected(), producing.errors.unexpected()
        ends = {p: max(o for _, o in producing.acked[p]) + 1 for p in range(n)}
        tail.until(ends, 30)
        kp_tail.until(ends, 30)
    finally:
        tail.stop()
        kp_tail.stop()
    assert not tail.message_errors, tail.message_errors[:5]
    assert not tail.errors.unexpected(), tail.errors.unexpected()
    assert not kp_tail.failures, kp_tail.failures[:5]

    states = zk_states(zk, topic)
    for p in range(n):
        acked = producing.acked[p]
        values = [v for v, _ in acked]
        assert values == sorted(values), f"{topic}-{p}: acknowledged out of order"
        reads = {"librdkafka while failing": tail.got[p],
                 "kafka-python while failing": kp_tail.got[p],
                 "kafka-python": read_over_kafka_python(kafka_ports, topic, p, ends[p]),
                 "REST": read_over_rest(brokers[states[p]["leader"]], topic, p)}
        if shutil.which("kcat"):
            reads["kcat"] = read_over_kcat(kafka_ports, topic, p)
        for name, got in reads.items():
            offsets = [o for o, _ in got]
            assert offsets == sorted(set(offsets)), f"{topic}-{p} over {name}: offsets repeat"
            got_values = [v for _, v in got]
            assert len(got_values) == len(set(got_values)), f"{topic}-{p} over {name}: duplicates"
            assert got_values == sorted(got_values), f"{topic}-{p} over {name}: out of order"
            assert set(values) <= set(got_values), (
                f"{topic}-{p} over {name}: acknowledged records missing: "
                f"{sorted(set(values) - set(got_values))[:10]}")
            assert dict(acked) == {v: o for o, v in got if v in set(values)}, (
                f"{topic}-{p} over {name}: offsets differ from the acknowledged ones")


# --- a consumer group through a coordinator failover -----------------------------------------


def produce_values(kafka_ports: dict[int, int], topic: str, values: range, partitions: int,
                   *, pace_s: float = 0.0) -> None:
    p = Producer({"bootstrap.servers": bootstrap(kafka_ports), "enable.idempotence": True,
                  "acks": "all", "message.timeout.ms": 60_000, **FAST})
    failed: list[str] = []
    for v in values:
        p.produce(topic, value=str(v).encode(), partition=v % partitions,
                  on_delivery=lambda err, _msg: err is None or failed.append(str(err)))
        p.poll(pace_s)
    assert p.flush(60) == 0
    assert not failed, failed[:5]


class Member:
    """One librdkafka group member, committing each record synchronously after reading it."""

    def __init__(self, kafka_ports: dict[int, int], broker: int, group: str, topic: str,
                 log: Group) -> None:
        self.errors = Errors()
        self.name = f"member-{broker}"
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap(kafka_ports, broker), "group.id": group,
            "client.id": self.name, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 200,
            "coordinator.query.interval.ms": 1000, "error_cb": self.errors, **FAST})
        self.consumer.subscribe([topic])
        self.log = log

    def poll(self) -> None:
        msg = self.consumer.poll(0.1)
        if msg is None:
            return
        if msg.error():
            self.log.message_errors.append(f"{self.name}: {msg.error()}")
            return
        self.log.read(msg.partition(), msg.offset(), int(msg.value()))
        try:
            self.consumer.commit(message=msg, asynchronous=False)
        except ck.KafkaException as exc:
            self.log.failed_commits.append(f"{self.name}: {exc}")
            return
        self.log.committed(msg.partition(), msg.offset() + 1)

    def assigned(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())


class Group:
    """What the group's members read and committed, and each re-read checked against the
    commits that had succeeded before it."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, int], int] = {}
        self.commits: dict[int, int] = {}  # partition -> highest acknowledged commit
        self.rereads_below_commit: list[tuple[int, int, int]] = []
        self.rereads = 0
        self.message_errors: list[str] = []
        self.failed_commits: list[str] = []

    def read(self, partition: int, offset: int, value: int) -> None:
        key = (partition, offset)
        if key in self.seen:
            self.rereads += 1
            if offset < self.commits.get(partition, 0):
                self.rereads_below_commit.append((partition, offset, self.commits[partition]))
        self.seen[key] = value

    def committed(self, partition: int, offset: int) -> None:
        self.commits[partition] = max(self.commits.get(partition, 0), offset)


def coordinator_of(kafka_ports: dict[int, int], group: str) -> tuple[int, str, int]:
    """The coordinator librdkafka's AdminClient finds for ``group`` (FindCoordinator),
    with the group's state and member count as it describes them (DescribeGroups). A
    new client each time: one that found it before keeps its answer in a cache and
    waits for that broker even once it is gone."""
    admin = AdminClient({"bootstrap.servers": bootstrap(kafka_ports)})
    (desc,) = admin.describe_consumer_groups([group], request_timeout=10).values()
    got = desc.result(timeout=20)
    return int(got.coordinator.id), got.state.name, len(got.members)


def offsets_partition(group: str) -> int:
    """Kafka's partition of ``__consumer_offsets`` for an ASCII ``group``:
    ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``."""
    h = 0
    for c in group:
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS


def test_consumer_group_follows_its_coordinator_through_a_failover(
        brokers: list[BrokerProcess], zk: KazooClient, kafka_ports: dict[int, int]) -> None:
    topic, n, group = "kc-group", 2, "kc-g"
    offsets = offsets_partition(group)
    admin = AdminClient({"bootstrap.servers": bootstrap(kafka_ports)})
    admin.create_topics([NewTopic(topic, num_partitions=n, replication_factor=3)])[topic].result(
        timeout=40)
    wait_until(lambda: full_isr(zk, topic, n) and
               full_isr(zk, "__consumer_offsets", OFFSETS_PARTITIONS), 30, "every ISR full")
    produce_values(kafka_ports, topic, range(0, 100), n)
    coordinator = zk_state(zk, "__consumer_offsets", offsets)["leader"]
    # the two members start on the two brokers that are not the coordinator
    log = Group()
    members = [Member(kafka_ports, b, group, topic, log) for b in range(3) if b != coordinator]

    def polled_until(cond: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}: "
                                     f"{len(log.seen)} read, commits {log.commits}, "
                                     f"assigned {[m.assigned() for m in members]}")
            for m in members:
                m.poll()

    more = threading.Thread(target=produce_values, daemon=True, args=(
        kafka_ports, topic, range(100, 200), n), kwargs={"pace_s": 0.03})
    try:
        polled_until(lambda: all(m.assigned() for m in members) and len(log.seen) >= 30, 40,
                     "both members assigned a partition and reading")
        assert sorted(p for m in members for p in m.assigned()) == list(range(n))
        # FindCoordinator: the leader of the group's partition of __consumer_offsets
        assert coordinator_of(kafka_ports, group) == (coordinator, "STABLE", 2)
        # killed while the members read and commit, with records still coming
        more.start()
        brokers[coordinator].kill()
        polled_until(lambda: len(log.seen) >= 200, 90, "every record read after the failover")
        new_coordinator = zk_state(zk, "__consumer_offsets", offsets)["leader"]
        assert new_coordinator not in (coordinator, -1)
        assert coordinator_of(kafka_ports, group) == (new_coordinator, "STABLE", 2)
        polled_until(lambda: log.commits == {0: 100, 1: 100}, 20, "every record committed")
        # what the new coordinator holds, as each member sees it
        for m in members:
            committed = m.consumer.committed([TopicPartition(topic, p) for p in range(n)],
                                             timeout=20)
            assert {tp.partition: tp.offset for tp in committed} == {0: 100, 1: 100}
        brokers[coordinator].start()
        wait_until(lambda: full_isr(zk, "__consumer_offsets", OFFSETS_PARTITIONS), 60,
                   f"broker {coordinator} back in the ISRs of __consumer_offsets")
        # a controlled stop (SIGTERM) of the coordinator hands the group over as well
        more = threading.Thread(target=produce_values, daemon=True, args=(
            kafka_ports, topic, range(200, 300), n), kwargs={"pace_s": 0.03})
        more.start()
        stopped = zk_state(zk, "__consumer_offsets", offsets)["leader"]
        brokers[stopped].stop()
        polled_until(lambda: len(log.seen) >= 300, 90, "every record read after the stop")
        assert coordinator_of(kafka_ports, group) == (
            zk_state(zk, "__consumer_offsets", offsets)["leader"], "STABLE", 2)
        polled_until(lambda: log.commits == {0: 150, 1: 150}, 20, "every record committed")
    finally:
        more.join(timeout=60)
        for m in members:
            m.consumer.close()
    print(f"group: {log.rereads} records read again, {len(log.failed_commits)} failed commits")
    assert sorted(log.seen.values()) == list(range(300))
    assert not log.rereads_below_commit, (
        f"records read again below a commit that had succeeded: {log.rereads_below_commit[:10]}")
    assert not log.message_errors, log.message_errors[:5]
    for m in members:
        assert not m.errors.unexpected(), m.errors.unexpected()
    for b in brokers:
        if not b.running:
            b.start()
    wait_until(lambda: full_isr(zk, "__consumer_offsets", OFFSETS_PARTITIONS) and
               full_isr(zk, topic, n), 60, "every broker back in every ISR")
