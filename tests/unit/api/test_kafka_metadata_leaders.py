"""Metadata answers name only leaders the client can reach: a partition whose leader is
not among the brokers of the answer (a dead broker ZooKeeper still names until the
controller elects another, or a live broker without this listener) answers no leader,
with Kafka's error for it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from api.kafka import errors
from api.kafka.context import ListenerInfo, RequestContext, Session
from api.kafka.handlers.cluster import metadata
from core.broker.metadata.cache import MetadataCache, TopicMetadata
from core.broker.metadata.store import BrokerRegistration, Endpoint, PartitionState, TopicAssignment
from core.storage.config import LogConfig

LISTENER = ListenerInfo("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)


def _registration(broker_id: int, *, kafka: bool = True) -> BrokerRegistration:
    endpoints = (Endpoint("PLAINTEXT", "127.0.0.1", 9092 + broker_id, "PLAINTEXT"),) if kafka else ()
    return BrokerRegistration(broker_id, "127.0.0.1", 8082 + broker_id, kafka_endpoints=endpoints)


def _cache(live: dict[int, bool], leaders: dict[int, int]) -> MetadataCache:
    """Brokers ``live`` (id -> has a PLAINTEXT Kafka listener); topic ``t`` with one
    partition per entry of ``leaders`` (partition -> leader), replicas 0, 1, 2."""
    cache = MetadataCache()
    cache.brokers = {b: _registration(b, kafka=k) for b, k in live.items()}
    assignment = TopicAssignment("t", "AAAAAAAAAAAAAAAAAAAAAA", {p: (0, 1, 2) for p in leaders})
    states = {p: PartitionState(leader, 3, (0, 1, 2), 1) for p, leader in leaders.items()}
    cache.put_topic("t", TopicMetadata(assignment, states, {}, LogConfig()))
    return cache


def _ask(cache: MetadataCache, version: int = 12) -> dict[str, Any]:
    broker = SimpleNamespace(
        cache=cache, broker_id=0, cluster_id="cluster", security=SimpleNamespace(enabled=False),
        config={"auto.create.topics.enable": False}, kafka_endpoints_of=cache.kafka_endpoints_of)
    ctx = RequestContext(broker, LISTENER, Session(host="127.0.0.1"), 3, version, 1,  # type: ignore[arg-type]
                         "test")
    req = {"topics": [{"name": "t", "topic_id": bytes(16)}], "allow_auto_topic_creation": False,
           "include_cluster_authorized_operations": False,
           "include_topic_authorized_operations": False}
    return asyncio.run(metadata(ctx, req))


def _partitions(answer: dict[str, Any]) -> dict[int, tuple[int, int, int]]:
    (topic,) = answer["topics"]
    return {p["partition_index"]: (p["error_code"], p["leader_id"], p["leader_epoch"])
            for p in topic["partitions"]}


def test_a_leader_that_is_gone_is_no_leader() -> None:
    # broker 1's registration is gone (killed, session expired); ZooKeeper still names it
    answer = _ask(_cache({0: True, 2: True}, {0: 1, 1: 2}))
    assert [b["node_id"] for b in answer["brokers"]] == [0, 2]
    assert _partitions(answer) == {0: (errors.LEADER_NOT_AVAILABLE, -1, 3), 1: (0, 2, 3)}


def test_a_live_leader_without_this_listener_is_no_leader() -> None:
    cache = _cache({0: True, 1: True, 2: False}, {0: 2, 1: 0})
    assert _partitions(_ask(cache)) == {0: (errors.LISTENER_NOT_FOUND, -1, 3), 1: (0, 0, 3)}
    # before v6 Kafka has no LISTENER_NOT_FOUND in Metadata
    assert _partitions(_ask(cache, 5)) == {0: (errors.LEADER_NOT_AVAILABLE, -1, 3), 1: (0, 0, 3)}


def test_no_leader_elected() -> None:
    answer = _ask(_cache({0: True, 1: True, 2: True}, {0: -1}))
    assert _partitions(answer) == {0: (errors.LEADER_NOT_AVAILABLE, -1, 3)}

