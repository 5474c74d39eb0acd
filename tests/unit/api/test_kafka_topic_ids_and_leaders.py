"""The Kafka door's handlers in process, on a metadata cache of their own: topic ids
resolved as Metadata answers them (the cache's id index follows deletion and
recreation), and KIP-951's CurrentLeader / NodeEndpoints on the Fetch v16 and Produce
v10 answers that need them, FENCED_LEADER_EPOCH included (a real cluster test,
tests/cluster/test_kafka_new_versions_cluster.py, covers NOT_LEADER_OR_FOLLOWER)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from api.kafka import errors
from api.kafka.context import ListenerInfo, RequestContext, Session
from api.kafka.fetch_sessions import FetchSessionCache
from api.kafka.handlers.cluster import metadata, topic_id_bytes, topic_id_text
from api.kafka.handlers.fetch import fetch
from api.kafka.handlers.produce import produce
from core.broker.errors import UnknownTopicOrPartitionError
from core.broker.metadata.cache import MetadataCache, TopicMetadata
from core.broker.metadata.store import BrokerRegistration, Endpoint, PartitionState, TopicAssignment
from core.storage.config import LogConfig

LISTENER = ListenerInfo("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)


def _id() -> str:
    return topic_id_text(uuid.uuid4().bytes)


def _put(cache: MetadataCache, name: str, topic_id: str, leaders: dict[int, tuple[int, int]]
         ) -> None:
    """Topic ``name`` with partition -> (leader, epoch), replicas 0, 1, 2."""
    cache.put_topic(name, TopicMetadata(
        TopicAssignment(name, topic_id, {p: (0, 1, 2) for p in leaders}),
        {p: PartitionState(leader, epoch, (0, 1, 2), 1) for p, (leader, epoch) in leaders.items()},
        {}, LogConfig()))


def test_topic_ids_follow_creation_deletion_and_recreation() -> None:
    cache = MetadataCache()
    first, second = _id(), _id()
    _put(cache, "t", first, {0: (0, 0)})
    assert cache.topic_name_of(first) == "t"
    assert topic_id_text(topic_id_bytes(first)) == first  # the bytes Metadata answers
    _put(cache, "t", first, {0: (1, 1)})  # a leader change keeps the id
    assert cache.topic_name_of(first) == "t"
    cache.remove_topic("t")
    assert cache.topic_name_of(first) is None
    _put(cache, "t", second, {0: (0, 0)})
    assert (cache.topic_name_of(first), cache.topic_name_of(second)) == (None, "t")
    _put(cache, "t", first, {0: (0, 0)})  # recreated over a topic the cache still had
    assert (cache.topic_name_of(first), cache.topic_name_of(second)) == ("t", None)
    assert cache.topic_name_of("") is None


class _Partition:
    """The leader replica of a partition whose leader epoch is ``epoch``."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def check_fetch_epoch(self, asked: int) -> int:
        return errors.FENCED_LEADER_EPOCH if asked < self.epoch else 0


class _Replicas:
    def __init__(self, led: dict[tuple[str, int], _Partition]) -> None:
        self.led = led

    def leader_partition(self, tp: Any) -> _Partition:
        try:
            return self.led[(tp.topic, tp.partition)]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"{tp} is not hosted here") from None


def _ctx(cache: MetadataCache, replicas: _Replicas, api_key: int, version: int
         ) -> RequestContext:
    broker = SimpleNamespace(
        cache=cache, broker_id=0, cluster_id="c", security=SimpleNamespace(enabled=False),
        config={"auto.create.topics.enable": False}, replica_manager=replicas,
        kafka_endpoints_of=cache.kafka_endpoints_of)
    return RequestContext(broker, LISTENER, Session(host="127.0.0.1"), api_key,  # type: ignore[arg-type]
                          version, 1, "test", fetch_sessions=FetchSessionCache())


def _cluster() -> MetadataCache:
    """Brokers 0 and 1 with a PLAINTEXT listener, 2 without; topic ``t``: partition 0 led
    here (epoch 5), 1 by broker 1 (epoch 3), 2 by broker 2 (epoch 7)."""
    cache = MetadataCache()
    cache.brokers = {b: BrokerRegistration(b, "127.0.0.1", 8082 + b, rack="r1" if b else None,
                                           kafka_endpoints=(Endpoint(
                                               "PLAINTEXT", f"h{b}", 9092 + b, "PLAINTEXT"),)
                                           if b < 2 else ())
                     for b in range(3)}
    _put(cache, "t", _id(), {0: (0, 5), 1: (1, 3), 2: (2, 7)})
    return cache


def _fetch_req(topic_id: bytes, epochs: dict[int, int]) -> dict[str, Any]:
    return {"replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "", "topic_id": topic_id, "partitions": [
                {"partition": p, "current_leader_epoch": e, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1000}
                for p, e in epochs.items()]}]}


def test_fetch_v16_names_the_leader_on_not_leader_and_fenced_epoch() -> None:
    cache = _cluster()
    tid = topic_id_bytes(cache.topics["t"].assignment.topic_id)
    replicas = _Replicas({("t", 0): _Partition(5)})
    answer = asyncio.run(fetch(_ctx(cache, replicas, 1, 16),
                               _fetch_req(tid, {0: 4, 1: 3, 2: -1})))
    parts = {p["partition_index"]: p for p in answer["responses"][0]["partitions"]}
    assert {i: (p["error_code"], p["current_leader"]) for i, p in parts.items()} == {
        0: (errors.FENCED_LEADER_EPOCH, {"leader_id": 0, "leader_epoch": 5}),
        1: (errors.NOT_LEADER_OR_FOLLOWER, {"leader_id": 1, "leader_epoch": 3}),
        # broker 2 is live but has no endpoint on this listener: named, with no endpoint
        2: (errors.NOT_LEADER_OR_FOLLOWER, {"leader_id": 2, "leader_epoch": 7})}
    assert sorted(answer["node_endpoints"], key=lambda n: n["node_id"]) == [
        {"node_id": 0, "host": "h0", "port": 9092, "rack": None},
        {"node_id": 1, "host": "h1", "port": 9093, "rack": "r1"}]
    # v15 has no NodeEndpoints and Kafka leaves CurrentLeader to v16
    older = asyncio.run(fetch(_ctx(cache, replicas, 1, 15), _fetch_req(tid, {0: 4, 1: 3})))
    assert all("current_leader" not in p for p in older["responses"][0]["partitions"])
    assert "node_endpoints" not in older


def test_produce_v10_names_the_leader_on_not_leader() -> None:
    cache = _cluster()
    req = {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 1, "records": memoryview(bytes(70))},
                                         {"index": 2, "records": memoryview(bytes(70))},
                                         {"index": 9, "records": memoryview(bytes(70))}]}]}
    answer = asyncio.run(produce(_ctx(cache, _Replicas({}), 0, 10), req))
    parts = {p["index"]: p for p in answer["responses"][0]["partition_responses"]}
    assert (parts[1]["error_code"], parts[1]["current_leader"]) == (
        errors.NOT_LEADER_OR_FOLLOWER, {"leader_id": 1, "leader_epoch": 3})
    assert parts[2]["current_leader"] == {"leader_id": 2, "leader_epoch": 7}
    assert (parts[9]["error_code"], "current_leader" in parts[9]) == (
        errors.UNKNOWN_TOPIC_OR_PARTITION, False)  # only NOT_LEADER_OR_FOLLOWER, as Kafka
    assert answer["node_endpoints"] == [{"node_id": 1, "host": "h1", "port": 9093, "rack": "r1"}]
    older = asyncio.run(produce(_ctx(cache, _Replicas({}), 0, 9), req))
    assert "node_endpoints" not in older


def test_metadata_v12_by_id_resolves_as_fetch_does() -> None:
    cache = _cluster()
    tid = topic_id_bytes(cache.topics["t"].assignment.topic_id)
    unknown = uuid.uuid4().bytes
    req = {"topics": [{"name": None, "topic_id": tid}, {"name": None, "topic_id": unknown},
                      {"name": None, "topic_id": tid}],
           "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    answer = asyncio.run(metadata(_ctx(cache, _Replicas({}), 3, 12), req))
    assert [(t["error_code"], t["name"], t["topic_id"]) for t in answer["topics"]] == [
        (0, "t", tid), (errors.UNKNOWN_TOPIC_ID, None, unknown)]
