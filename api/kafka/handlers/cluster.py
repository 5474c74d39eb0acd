"""ApiVersions, Metadata, DescribeCluster: what a client learns before anything else."""

from __future__ import annotations

import base64
from typing import Any

from api.kafka import errors
from api.kafka.apis import APIS, api
from api.kafka.context import RequestContext
from core.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from core.broker.types import is_internal_topic
from core.errors import FranzError

# Kafka's topic name rule (Topic.validate): at most 249 of [a-zA-Z0-9._-]
_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
ZERO_UUID = bytes(16)


def valid_topic_name(name: str | None) -> bool:
    if not name:
        return False
    return len(name) <= 249 and name not in (".", "..") and all(c in _TOPIC_CHARS for c in name)


def topic_id_bytes(topic_id: str) -> bytes:
    """Kafka's topic id (URL-safe base64 of 16 bytes, as in ZooKeeper) as the 16 bytes."""
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except (ValueError, TypeError):
        return ZERO_UUID
    return raw if len(raw) == 16 else ZERO_UUID


def topic_id_text(raw: bytes) -> str:
    """16 bytes of a topic id as the store holds it (Kafka's Uuid.toString: URL-safe
    base64 without padding): ``topic_id_bytes`` the other way."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class LeaderHints:
    """KIP-951 (Produce v10+, Fetch v16+): a partition answered NOT_LEADER_OR_FOLLOWER
    (or, for Fetch, FENCED_LEADER_EPOCH) carries its current leader and epoch from this
    broker's metadata, and the answer the endpoints of those leaders on the listener the
    request came in on, as Kafka's getCurrentLeader: the client goes to the leader
    without asking Metadata first. A leader with no live endpoint on this listener is
    named with no endpoint (the client then asks Metadata)."""

    def __init__(self, ctx: RequestContext) -> None:
        self._ctx = ctx
        self._endpoints: dict[int, dict[str, Any]] | None = None
        self._nodes: dict[int, dict[str, Any]] = {}

    def current_leader(self, topic: str, partition: int) -> dict[str, int]:
        meta = self._ctx.broker.cache.topic(topic)
        st = None if meta is None else meta.states.get(partition)
        leader, epoch = (-1, -1) if st is None else (st.leader, st.leader_epoch)
        if leader >= 0 and leader not in self._nodes:
            if self._endpoints is None:
                self._endpoints = {b["node_id"]: b for b in brokers_of(self._ctx)}
            node = self._endpoints.get(leader)
            if node is not None:
                self._nodes[leader] = node
        return {"leader_id": leader, "leader_epoch": epoch}

    def node_endpoints(self) -> list[dict[str, Any]]:
        return list(self._nodes.values())


@api("ApiVersions", 0, 4, before_authentication=True)
async def api_versions(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if req.get("client_software_name"):
        ctx.session.client_software = (
            f"{req['client_software_name'][:64]}/{(req.get('client_software_version') or '')[:64]}")
    return {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
        {"api_key": a.key, "min_version": a.versions.low, "max_version": a.versions.high}
        for a in sorted(APIS.values(), key=lambda a: a.key)]}


def brokers_of(ctx: RequestContext) -> list[dict[str, Any]]:
    """Every live broker's endpoint on the listener this request came in on (a broker
    without such a listener is left out, as Kafka does)."""
    find = getattr(ctx.broker, "kafka_endpoints_of", None)
    if find is not None:
        return [{"node_id": b, "host": h, "port": p, "rack": r}
                for b, h, p, r in find(ctx.listener.name)]
    reg = ctx.broker.cache.brokers.get(ctx.broker.broker_id)
    return [{"node_id": ctx.broker.broker_id, "host": ctx.listener.advertised_host,
             "port": ctx.listener.advertised_port, "rack": reg.rack if reg else None}]


def controller_of(ctx: RequestContext) -> int:
    """The active controller's id; -1 while none is known, as Kafka answers."""
    cid = ctx.broker.cache.controller_id
    return -1 if cid is None else cid


@api("Metadata", 0, 12)
async def metadata(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker, version = ctx.broker, ctx.version
    requested = req["topics"]
    if requested is None or (version == 0 and not requested):
        names, explicit = sorted(broker.cache.topics), False
    else:
        names, explicit = [t["name"] for t in requested], True
    auto_create = (req["allow_auto_topic_creation"] if version >= 4 else True) and \
        bool(broker.config["auto.create.topics.enable"])
    brokers = brokers_of(ctx)
    reachable = {b["node_id"] for b in brokers}
    topics: list[dict[str, Any] | None] = []  # None: not shown (a name not asked for)
    ids = [bytes(t["topic_id"]) for t in requested or ()] if version >= 12 else []
    if any(i != ZERO_UUID for i in ids):  # v12 by topic id: the names are not looked at
        for topic_id in dict.fromkeys(i for i in ids if i != ZERO_UUID):
            topics.append(await _topic_by_id(ctx, topic_id, reachable))
        names = []
    for name in dict.fromkeys(names):  # a name asked twice is answered once
        topics.append(await _topic(ctx, name, explicit=explicit, auto_create=auto_create,
                                   reachable=reachable))
    if not explicit:
        topics = [t for t in topics if t is not None]
    out: dict[str, Any] = {
        "throttle_time_ms": 0, "brokers": brokers, "cluster_id": broker.cluster_id or None,
        "controller_id": controller_of(ctx), "topics": [t for t in topics if t is not None],
    }
    if req.get("include_cluster_authorized_operations"):
        out["cluster_authorized_operations"] = -2147483648
    return out


async def _topic_by_id(ctx: RequestContext, topic_id: bytes, reachable: set[int]
                       ) -> dict[str, Any]:
    """Metadata v12 asked by id, as Kafka 3.9: an id no topic has is UNKNOWN_TOPIC_ID with
    a null name; a topic the principal may not describe is TOPIC_AUTHORIZATION_FAILED
    with its id and a null name (ids are not secret, names are); never auto-created."""
    name = ctx.broker.cache.topic_name_of(topic_id_text(topic_id))
    if name is None:
        return {"error_code": errors.UNKNOWN_TOPIC_ID, "name": None, "topic_id": topic_id,
                "is_internal": False, "partitions": []}
    answer = await _topic(ctx, name, explicit=True, auto_create=False, reachable=reachable)
    assert answer is not None  # explicit: always answered
    if answer["error_code"] == errors.TOPIC_AUTHORIZATION_FAILED:
        answer["name"], answer["topic_id"] = None, topic_id
    return answer


async def _topic(ctx: RequestContext, name: str | None, *, explicit: bool, auto_create: bool,
                 reachable: set[int]) -> dict[str, Any] | None:
    """One topic's answer; a partition whose leader is not among ``reachable`` (the
    brokers the answer lists: live, with an endpoint on this listener) has no leader
    in it, as Kafka answers: LEADER_NOT_AVAILABLE while the leader is gone (a dead
    broker ZooKeeper still names until the controller elects another), or
    LISTENER_NOT_FOUND (v6+) when it is live without this listener. A client never
    gets a leader id it has no address for."""
    broker = ctx.broker

    def error(code: int) -> dict[str, Any]:
        return {"error_code": code, "name": name, "topic_id": ZERO_UUID,
                "is_internal": False, "partitions": []}

    if name is None or not valid_topic_name(name):
        return error(errors.INVALID_TOPIC_EXCEPTION)
    if not ctx.allowed_quietly(Operation.DESCRIBE, ResourceType.TOPIC, name):
        if not explicit:
            return None
        ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)  # audit the denial
        return error(errors.TOPIC_AUTHORIZATION_FAILED)
    meta = broker.cache.topic(name)
    if meta is None:
        if not explicit or not auto_create or is_internal_topic(name):
            return error(errors.UNKNOWN_TOPIC_OR_PARTITION) if explicit else None
        if not (ctx.allowed_quietly(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                or ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)):
            return error(errors.TOPIC_AUTHORIZATION_FAILED)
        try:
            await broker.create_topic(name)
        except FranzError as exc:
            code = errors.code_of(exc)
            if code != 36:  # TOPIC_ALREADY_EXISTS: another request made it meanwhile
                return error(code)
        meta = broker.cache.topic(name)
        if meta is None or any(s.leader < 0 for s in meta.states.values()) or not meta.states:
            return error(errors.LEADER_NOT_AVAILABLE)  # clients ask again shortly
    live = broker.cache.brokers
    partitions = []
    for p, replicas in sorted(meta.assignment.partitions.items()):
        st = meta.states.get(p)
        leader = -1 if st is None else st.leader
        code = 0
        if leader not in reachable:
            code = errors.LISTENER_NOT_FOUND if leader in live and ctx.version >= 6 \
                else errors.LEADER_NOT_AVAILABLE
            leader = -1
        partitions.append({
            "error_code": code,
            "partition_index": p, "leader_id": leader,
            "leader_epoch": -1 if st is None else st.leader_epoch,
            "replica_nodes": list(replicas), "isr_nodes": [] if st is None else list(st.isr),
            "offline_replicas": [r for r in replicas if r not in live],
        })
    return {"error_code": 0, "name": name, "topic_id": topic_id_bytes(meta.assignment.topic_id),
            "is_internal": is_internal_topic(name), "partitions": partitions,
            "topic_authorized_operations": -2147483648}


@api("DescribeCluster", 0, 1)
async def describe_cluster(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "brokers": [],
                "cluster_id": ctx.broker.cluster_id, "controller_id": -1}
    return {"error_code": 0, "throttle_time_ms": 0, "endpoint_type": 1,
            "cluster_id": ctx.broker.cluster_id, "controller_id": controller_of(ctx),
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"],
                         "rack": b["rack"]} for b in brokers_of(ctx)],
            "cluster_authorized_operations": -2147483648}
