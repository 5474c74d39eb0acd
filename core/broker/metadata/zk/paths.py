"""Kafka's ZooKeeper znodes: one object per znode, owning its path and its JSON.

Modelled on Kafka's ``kafka.zk.ZkData``: each class names one znode (or one family of
znodes) and has a ``path`` plus pure ``encode``/``decode`` between our dataclasses and
the bytes Kafka writes, so ``zkCli.sh get /brokers/topics/<t>`` shows what a Kafka
operator expects. Paths are relative to the chroot (``zookeeper.connect=h:2181/franz``);
the kazoo client adds the chroot. All JSON is UTF-8, compact (no spaces, like Jackson),
keys in Kafka's order:

    /cluster/id                                {"version":"1","id":"<22-char base64>"}
    /controller                        (E)     {"version":1,"brokerid":2,"timestamp":"17000..."}
    /controller_epoch                          7                  (plain decimal text)
    /latest_producer_id_block                  {"version":1,"broker":0,"block_start":"0",
                                                "block_end":"999"}
    /brokers/ids/<id>                  (E)     {"version":5,"host":"h","port":9092,
                                                "jmx_port":-1,"timestamp":"1700000000000",
                                                "endpoints":["PLAINTEXT://h:9092",
                                                    "SASL_SSL://h:9094","HTTP://h:8082"],
                                                "listener_security_protocol_map":
                                                    {"PLAINTEXT":"PLAINTEXT",
                                                     "SASL_SSL":"SASL_SSL",
                                                     "HTTP":"PLAINTEXT"},
                                                "rack":"r1","features":{}}
                                                (the Kafka listeners, then franz's HTTP one
                                                as HTTP (PLAINTEXT) or HTTPS (SSL); host/port:
                                                the first Kafka PLAINTEXT one, else null, -1;
                                                rack only if set)
    /brokers/topics/<t>                        {"version":3,"topic_id":"...",
                                                "partitions":{"0":[2,0,1]},
                                                "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<t>/partitions/<p>         (empty)
    /brokers/topics/<t>/partitions/<p>/state   {"controller_epoch":7,"leader":2,"version":1,
                                                "leader_epoch":12,"isr":[2,0,1]}
    /config/topics/<t>                         {"version":1,"config":{"retention.ms":"1000"}}
    /config/changes/config_change_<10 digits> (S) {"version":2,"entity_path":"topics/<t>"}
    /admin/delete_topics/<t>                   (empty; its existence requests deletion)
    /admin/reassign_partitions                 {"version":1,"partitions":[{"topic":"t",
                                                "partition":0,"replicas":[1,2]}]}
    /admin/preferred_replica_election          {"version":1,"partitions":[{"topic":"t",
                                                "partition":0}]}

Decoders accept what older Kafka versions wrote (broker v4 without ``features``, a broker
registration without franz's HTTP endpoint, as Kafka and franz before its Kafka listeners
wrote it: ``BrokerIdZNode``), topic
v1/v2 without ``topic_id``, config change v1 with ``entity_type``/``entity_name``,
controller v2 with ``kraftControllerEpoch``) and ignore unknown keys. A malformed
payload raises ``MalformedZNodeError``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from core.broker.metadata.store import (
    BrokerRegistration,
    Endpoint,
    PartitionState,
    TopicAssignment,
)

TOPIC_CONFIG_ENTITY = "topics"
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")


class MalformedZNodeError(ValueError):
    """A znode's payload is not what Kafka writes there."""


P = ParamSpec("P")
T = TypeVar("T")


def _decoder(fn: Callable[P, T]) -> Callable[P, T]:
    """Any shape error while decoding (missing key, wrong type) is a MalformedZNodeError."""

    @functools.wraps(fn)
    def decode(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except MalformedZNodeError:
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            subject = ", ".join(repr(a) for a in args if not isinstance(a, bytes))
            raise MalformedZNodeError(f"{fn.__qualname__}({subject}): {exc!r}") from exc

    return decode


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _loads(data: bytes | None, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data or b"")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedZNodeError(f"{what}: not JSON: {data!r}") from exc
    if not isinstance(obj, dict):
        raise MalformedZNodeError(f"{what}: expected a JSON object, got {data!r}")
    return obj


class ClusterIdZNode:
    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    @_decoder
    def decode(data: bytes) -> str:
        return str(_loads(data, ClusterIdZNode.path)["id"])


class ControllerZNode:
    path = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int) -> bytes:
        return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})

    @staticmethod
    @_decoder
    def decode(data: bytes) -> int:
        return int(_loads(data, ControllerZNode.path)["brokerid"])


class ControllerEpochZNode:
    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    @_decoder
    def decode(data: bytes) -> int:
        try:
            return int(data.decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise MalformedZNodeError(
                f"{ControllerEpochZNode.path}: not a number: {data!r}") from exc


class ProducerIdBlockZNode:
    """The last block of producer ids handed to a broker (Kafka's ProducerIdBlockZNode:
    ``block_start`` and ``block_end`` inclusive, written as strings)."""

    path = "/latest_producer_id_block"

    @staticmethod
    def encode(broker_id: int, start: int, end: int) -> bytes:
        return _dumps({"version": 1, "broker": broker_id, "block_start": str(start),
                       "block_end": str(end)})

    @staticmethod
    @_decoder
    def decode(data: bytes) -> tuple[int, int, int]:
        """(broker, block_start, block_end)."""
        obj = _loads(data, ProducerIdBlockZNode.path)
        return int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"])


class BrokerIdsZNode:
    path = "/brokers/ids"


class BrokerIdZNode:
    """Version 5 (IBP >= 2.7), as Kafka writes it, with franz's HTTP endpoint beside the
    Kafka ones. ``endpoints`` lists the broker's Kafka endpoints
    (``BrokerRegistration.kafka_endpoints``, ``PLAINTEXT://h:9092``) and then its first
    HTTP listener, the one other franz brokers call, under a name of franz's own:
    ``HTTP://h:8082`` (mapped to PLAINTEXT in ``listener_security_protocol_map``) or
    ``HTTPS://h:8443`` (mapped to SSL), so that Kafka's parsers, which take only their
    four security protocols, read it too. ``host``/``port`` are those of the first Kafka
    endpoint whose security protocol is PLAINTEXT (Kafka's rule, for clients that read
    them; franz's HTTP endpoint never counts: it does not speak Kafka), null and -1
    without one.

    Decoding takes the HTTP endpoint from ``HTTP``/``HTTPS`` and every other endpoint as a
    Kafka one. A registration without them (franz before its Kafka listeners registered
    its HTTP listener as PLAINTEXT or SSL; Kafka's own brokers) is read as before: its
    PLAINTEXT endpoint (``host``/``port``), else the first endpoint, whose security
    protocol gives the scheme, and no Kafka endpoints (which of the two wrote it cannot
    be told, and an old franz broker's endpoint does not speak Kafka)."""

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path}/{broker_id}"

    @staticmethod
    def encode(reg: BrokerRegistration) -> bytes:
        http = "HTTPS" if reg.scheme == "https" else "HTTP"
        plaintext = next((e for e in reg.kafka_endpoints if e.security_protocol == "PLAINTEXT"),
                         None)
        protocols = {e.listener: e.security_protocol for e in reg.kafka_endpoints}
        protocols[http] = HTTP_LISTENERS[http]
        body: dict[str, object] = {
            "version": 5, "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "jmx_port": -1, "timestamp": str(reg.timestamp_ms),
            "endpoints": [*(_endpoint(e.listener, e.host, e.port) for e in reg.kafka_endpoints),
                          _endpoint(http, reg.host, reg.port)],
            "listener_security_protocol_map": protocols,
        }
        if reg.rack is not None:
            body["rack"] = reg.rack
        body["features"] = {}
        return _dumps(body)

    @staticmethod
    @_decoder
    def decode(broker_id: int, data: bytes, *, czxid: int) -> BrokerRegistration:
        """The broker epoch is the znode's czxid (not in the JSON)."""
        obj = _loads(data, BrokerIdZNode.path(broker_id))
        protocols = {str(k).upper(): str(v).upper()
                     for k, v in (obj.get("listener_security_protocol_map") or {}).items()}
        endpoints = [_split_endpoint(str(e)) for e in obj.get("endpoints") or ()]
        http = next((e for e in endpoints if e[0] in HTTP_LISTENERS), None)
        kafka: tuple[Endpoint, ...] = ()
        host: str | None
        if http is not None:
            name, host, port = http
            scheme = "https" if name == "HTTPS" else "http"
            kafka = tuple(Endpoint(n, h, p, protocols.get(n, n))
                          for n, h, p in endpoints if n not in HTTP_LISTENERS)
        else:  # Kafka's, or franz's before its Kafka listeners
            host, port, scheme = obj.get("host"), int(obj.get("port", -1)), "http"
            if host is None or port < 0:  # no PLAINTEXT listener: take the first endpoint
                listener, host, port = endpoints[0]
                if protocols.get(listener, listener) in _TLS_PROTOCOLS:
                    scheme = "https"
        return BrokerRegistration(broker_id, str(host), port, rack=obj.get("rack"),
                                  timestamp_ms=int(obj.get("timestamp", 0)), epoch=czxid,
                                  scheme=scheme, kafka_endpoints=kafka)


#: franz's names for its HTTP endpoint in ``/brokers/ids/<id>`` and the security
#: protocol each is mapped to (a Kafka listener may not take these names).
HTTP_LISTENERS = {"HTTP": "PLAINTEXT", "HTTPS": "SSL"}
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def _endpoint(listener: str, host: str, port: int) -> str:
    """``PLAINTEXT://h:9092``, an IPv6 host in brackets (as Kafka formats it)."""
    return f"{listener}://{f'[{host}]' if ':' in host else host}:{port}"


def _split_endpoint(endpoint: str) -> tuple[str, str, int]:
    """``SSL://h:9093`` or ``PLAINTEXT://[::1]:9092`` -> (listener name, host, port)."""
    listener, sep, hostport = endpoint.partition("://")
    host, colon, port = hostport.rpartition(":")
    if not sep or not colon:
        raise ValueError(f"endpoint {endpoint!r} is not NAME://HOST:PORT")
    return listener.upper(), host.strip("[]"), int(port)


class TopicsZNode:
    path = "/brokers/topics"


class TopicZNode:
    """Version 3 (IBP >= 2.8): the replica assignment, first replica = preferred leader."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path}/{topic}"

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        return _dumps({
            "version": 3, "topic_id": assignment.topic_id,
            "partitions": {str(p): [int(r) for r in replicas]
                           for p, replicas in sorted(assignment.partitions.items())},
            "adding_replicas": {str(p): [int(r) for r in rs]
                                for p, rs in sorted(assignment.adding.items())},
            "removing_replicas": {str(p): [int(r) for r in rs]
                                  for p, rs in sorted(assignment.removing.items())},
        })

    @staticmethod
    @_decoder
    def decode(topic: str, data: bytes) -> TopicAssignment:
        """Topics written before version 3 have no id: ``topic_id`` is then ``""``."""
        obj = _loads(data, TopicZNode.path(topic))
        partitions = {int(p): tuple(int(r) for r in replicas)
                      for p, replicas in obj["partitions"].items()}
        def per_partition(key: str) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(int(r) for r in rs)
                    for p, rs in sorted((obj.get(key) or {}).items()) if rs}

        return TopicAssignment(topic, str(obj.get("topic_id", "")),
                               dict(sorted(partitions.items())),
                               per_partition("adding_replicas"),
                               per_partition("removing_replicas"))


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{partition}"


class TopicPartitionStateZNode:
    """Leader and ISR; ``PartitionState.version`` is this znode's zkVersion."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    @staticmethod
    def encode(state: PartitionState) -> bytes:
        return _dumps({"controller_epoch": state.controller_epoch, "leader": state.leader,
                       "version": 1, "leader_epoch": state.leader_epoch,
                       "isr": [int(r) for r in state.isr]})

    @staticmethod
    @_decoder
    def decode(data: bytes, *, zk_version: int) -> PartitionState:
        obj = _loads(data, "partition state")
        return PartitionState(leader=int(obj["leader"]), leader_epoch=int(obj["leader_epoch"]),
                              isr=tuple(int(r) for r in obj["isr"]),
                              controller_epoch=int(obj["controller_epoch"]), version=zk_version)


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    """Overrides only; every value is a string."""

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{name}"

    @staticmethod
    def encode(configs: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": {str(k): str(v) for k, v in configs.items()}})

    @staticmethod
    @_decoder
    def decode(data: bytes) -> dict[str, str]:
        obj = _loads(data, "config")
        return {str(k): str(v) for k, v in (obj.get("config") or {}).items()}


class ConfigEntityChangeNotificationZNode:
    path = "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    """Sequential: ZooKeeper appends a 10-digit counter to ``prefix_path``."""

    prefix = "config_change_"
    prefix_path = f"{ConfigEntityChangeNotificationZNode.path}/{prefix}"

    @staticmethod
    def encode(entity_type: str, name: str) -> bytes:
        return _dumps({"version": 2, "entity_path": f"{entity_type}/{name}"})

    @staticmethod
    @_decoder
    def decode(data: bytes) -> tuple[str, str]:
        """(entity type, entity name); v1 wrote them as two fields."""
        obj = _loads(data, "config change notification")
        if "entity_path" in obj:
            entity_type, _, name = str(obj["entity_path"]).partition("/")
            return entity_type, name
        return str(obj["entity_type"]), str(obj["entity_name"])


class DeleteTopicsZNode:
    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


class AdminRequestZNode:
    """``/admin/reassign_partitions`` and ``/admin/preferred_replica_election``: Kafka's
    JSON requests (``core.broker.controller.reassignment`` parses them); the controller deletes
    each when it is done."""

    names = ("reassign_partitions", "preferred_replica_election")

    @staticmethod
    def path(name: str) -> str:
        return f"/admin/{name}"


PERSISTENT_PATHS: tuple[str, ...] = (
    "/consumers",  # pre-0.9 consumers; Kafka still creates it
    BrokerIdsZNode.path,
    TopicsZNode.path,
    ConfigEntityChangeNotificationZNode.path,
    DeleteTopicsZNode.path,
    "/brokers/seqid",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    *(ConfigEntityTypeZNode.path(t) for t in CONFIG_ENTITY_TYPES),
)
"""The persistent parents Kafka creates at startup (``ZkData.PersistentZkPaths``)."""
