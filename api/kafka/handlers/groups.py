"""Consumer groups over Kafka's protocol: finding the coordinator (this module), and the
classic group protocol, commits and group administration on the coordinator.

FindCoordinator answers the leader of the group's ``__consumer_offsets`` partition
(``hash(group) % partitions``), the broker whose group coordinator serves it. Group
calls reaching a broker that does not coordinate the group answer NOT_COORDINATOR and
the client looks again: the Kafka door never forwards them.
"""

from __future__ import annotations

from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from api.kafka.handlers.cluster import brokers_of
from core.broker.errors import GroupIdNotFoundError
from core.broker.group.classic_types import (
    JoinGroupRequest,
    LeavingMember,
    OffsetCommitEntry,
    SyncGroupRequest,
)
from core.broker.group.consumer_protocol import encode_assignment, encode_subscription
from core.broker.group.hashing import coordinator_partition
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import OFFSETS_TOPIC, TopicPartition
from core.errors import FranzError

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    none = {"key": key, "node_id": -1, "host": "", "port": -1}
    if key_type == TRANSACTION_KEY:
        return {**none, "error_code": errors.INVALID_REQUEST,
                "error_message": "franz does not support transactions yet"}
    if key_type != GROUP_KEY:
        return {**none, "error_code": errors.INVALID_REQUEST,
                "error_message": f"unknown coordinator key type {key_type}"}
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, key):
        return {**none, "error_code": errors.GROUP_AUTHORIZATION_FAILED, "error_message": None}
    meta = ctx.broker.cache.topic(OFFSETS_TOPIC)
    if meta is None:
        return {**none, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "error_message": None}
    leader = ctx.broker.cache.leader_of(OFFSETS_TOPIC, coordinator_partition(key, meta.num_partitions))
    for b in brokers_of(ctx):
        if b["node_id"] == leader:
            return {"key": key, "node_id": leader, "host": b["host"], "port": b["port"],
                    "error_code": 0, "error_message": None}
    return {**none, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "error_message": None}


@api("FindCoordinator", 0, 4)
async def find_coordinator(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if ctx.version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            _coordinator(ctx, k, req["key_type"]) for k in req["coordinator_keys"]]}
    found = _coordinator(ctx, req["key"], req["key_type"])
    return {"throttle_time_ms": 0, **found}


# --- committed offsets and group administration ------------------------------------------


def _coordinator_here(ctx: RequestContext) -> Any:
    return ctx.broker.consumers.coordinator


async def _fetch_group_offsets(ctx: RequestContext, group_id: str,
                               topics: list[dict[str, Any]] | None) -> tuple[int, list[dict[str, Any]]]:
    """(group error code, topics with their partitions' committed offsets)."""
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return errors.GROUP_AUTHORIZATION_FAILED, []
    try:
        wanted = None if topics is None else [
            TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"]]
        found = await _coordinator_here(ctx).committed(group_id, wanted)
    except FranzError as exc:
        return errors.code_of(exc), []
    by_topic: dict[str, list[dict[str, Any]]] = {}
    allowed: dict[str, bool] = {}

    def topic_ok(name: str) -> bool:
        if name not in allowed:
            allowed[name] = ctx.allowed_quietly(Operation.DESCRIBE, ResourceType.TOPIC, name)
        return allowed[name]

    pairs = wanted if wanted is not None else sorted(found)
    for tp in pairs:
        if not topic_ok(tp.topic):
            if wanted is None:
                continue  # all offsets: those of topics not describable are left out
            code = errors.TOPIC_AUTHORIZATION_FAILED
        else:
            code = 0
        c = found.get(tp)
        by_topic.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "error_code": code,
            "committed_offset": -1 if c is None or code else c.offset,
            "committed_leader_epoch": -1 if c is None or code else c.leader_epoch,
            "metadata": "" if c is None or code else c.metadata})
    return 0, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


@api("OffsetFetch", 1, 8)
async def offset_fetch(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if ctx.version >= 8:
        groups = []
        for g in req["groups"]:
            topics = None if g["topics"] is None else [
                {"name": t["name"], "partition_indexes": t["partition_indexes"]} for t in g["topics"]]
            code, found = await _fetch_group_offsets(ctx, g["group_id"], topics)
            groups.append({"group_id": g["group_id"], "error_code": code, "topics": found})
        return {"throttle_time_ms": 0, "groups": groups}
    code, found = await _fetch_group_offsets(ctx, req["group_id"], req["topics"])
    if ctx.version < 2 and code:  # v0-1 have no top-level error: every partition carries it
        found = [{"name": t["name"], "partitions": [
            {"partition_index": p, "error_code": code, "committed_offset": -1, "metadata": ""}
            for p in t["partition_indexes"]]} for t in (req["topics"] or [])]
    return {"throttle_time_ms": 0, "error_code": code, "topics": found}


@api("ListGroups", 0, 4)
async def list_groups(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    states = {s.lower() for s in (req["states_filter"] or [])}
    groups = []
    for g in _coordinator_here(ctx).list_groups():
        if states and g.state.value.lower() not in states:
            continue
        if not ctx.allowed_quietly(Operation.DESCRIBE, ResourceType.GROUP, g.group_id):
            continue
        groups.append({"group_id": g.group_id, "protocol_type": g.protocol_type,
                       "group_state": g.state.value})
    return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}


@api("DescribeGroups", 0, 5)
async def describe_groups(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    out = []
    for group_id in req["groups"]:
        answer: dict[str, Any] = {"error_code": 0, "group_id": group_id, "group_state": "",
                                  "protocol_type": "", "protocol_data": "", "members": [],
                                  "authorized_operations": -2147483648}
        out.append(answer)
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            answer["error_code"] = errors.GROUP_AUTHORIZATION_FAILED
            continue
        try:
            desc = await _coordinator_here(ctx).describe_group(group_id)
        except GroupIdNotFoundError:
            answer["group_state"] = "Dead"  # Kafka describes an unknown group as Dead
            continue
        except FranzError as exc:
            answer["error_code"] = errors.code_of(exc)
            continue
        answer.update(group_state=desc.state.value, protocol_type=desc.protocol_type,
                      protocol_data=desc.protocol or "")
        answer["members"] = [{
            "member_id": m.member_id, "group_instance_id": m.group_instance_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "member_metadata": getattr(m, "metadata", None) or encode_subscription(m.topics),
            "member_assignment": getattr(m, "assignment_bytes", None)
            or encode_assignment(m.assignment),
        } for m in desc.members]
    return {"throttle_time_ms": 0, "groups": out}


@api("DeleteGroups", 0, 2)
async def delete_groups(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    out = []
    for group_id in req["groups_names"]:
        answer = {"group_id": group_id, "error_code": 0}
        out.append(answer)
        if not ctx.allowed(Operation.DELETE, ResourceType.GROUP, group_id):
            answer["error_code"] = errors.GROUP_AUTHORIZATION_FAILED
            continue
        try:
            await _coordinator_here(ctx).delete_group(group_id)
        except FranzError as exc:
            answer["error_code"] = errors.code_of(exc)
    return {"throttle_time_ms": 0, "results": out}


@api("OffsetDelete", 0, 0)
async def offset_delete(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    """kafka-consumer-groups --delete-offsets: a group's committed offsets of the given
    partitions go (tombstones), unless a member reads the topic
    (GROUP_SUBSCRIBED_TO_TOPIC). A group error is the answer's only content, as Kafka's."""
    group_id = req["group_id"]
    if not ctx.allowed(Operation.DELETE, ResourceType.GROUP, group_id):
        return {"error_code": errors.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0,
                "topics": []}
    codes: dict[TopicPartition, int] = {}
    wanted: list[TopicPartition] = []
    for t in req["topics"]:
        readable = ctx.allowed(Operation.READ, ResourceType.TOPIC, t["name"])
        for p in t["partitions"]:
            tp = TopicPartition(t["name"], p["partition_index"])
            if not readable:
                codes[tp] = errors.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                ctx.broker.cache.existing_partition(*tp)
            except FranzError as exc:
                codes[tp] = errors.code_of(exc)
                continue
            wanted.append(tp)
    try:
        codes.update(await _coordinator_here(ctx).delete_offsets(group_id, wanted))
    except FranzError as exc:
        return {"error_code": errors.code_of(exc), "throttle_time_ms": 0, "topics": []}
    return {"error_code": 0, "throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"],
             "error_code": codes[TopicPartition(t["name"], p["partition_index"])]}
            for p in t["partitions"]]} for t in req["topics"]]}


# --- the classic group protocol -----------------------------------------------------------


def _member_id_of(exc: BaseException, fallback: str) -> str:
    return getattr(exc, "member_id", None) or fallback


@api("JoinGroup", 0, 9)
async def join_group(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    group_id, member_id = req["group_id"], req["member_id"]

    def fail(code: int, member: str) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "generation_id": -1,
                "protocol_type": None, "protocol_name": None if ctx.version >= 7 else "",
                "leader": "", "skip_assignment": False, "member_id": member, "members": []}

    if not ctx.allowed(Operation.READ, ResourceType.GROUP, group_id):
        return fail(errors.GROUP_AUTHORIZATION_FAILED, member_id)
    session_ms = int(req["session_timeout_ms"])
    join = JoinGroupRequest(
        group_id=group_id, session_timeout_ms=session_ms,
        rebalance_timeout_ms=int(req["rebalance_timeout_ms"]) if ctx.version >= 1 else session_ms,
        member_id=member_id, protocol_type=req["protocol_type"],
        protocols=tuple((p["name"], bytes(p["metadata"])) for p in req["protocols"]),
        group_instance_id=req["group_instance_id"], reason=req["reason"],
        client_id=ctx.client_id or "", client_host=f"/{ctx.session.host}",
        require_known_member_id=ctx.version >= 4, supports_skip_assignment=ctx.version >= 9)
    try:
        got = await ctx.broker.classic_groups.join_group(join)
    except FranzError as exc:
        return fail(errors.code_of(exc), _member_id_of(exc, member_id))
    return {"throttle_time_ms": 0, "error_code": 0, "generation_id": got.generation_id,
            "protocol_type": got.protocol_type, "protocol_name": got.protocol_name,
            "leader": got.leader, "skip_assignment": got.skip_assignment,
            "member_id": got.member_id, "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata} for m in got.members]}


@api("SyncGroup", 0, 5)
async def sync_group(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    group_id = req["group_id"]

    def fail(code: int) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "protocol_type": None,
                "protocol_name": None, "assignment": b""}

    if not ctx.allowed(Operation.READ, ResourceType.GROUP, group_id):
        return fail(errors.GROUP_AUTHORIZATION_FAILED)
    sync = SyncGroupRequest(
        group_id=group_id, generation_id=int(req["generation_id"]), member_id=req["member_id"],
        group_instance_id=req["group_instance_id"], protocol_type=req["protocol_type"],
        protocol_name=req["protocol_name"],
        assignments=tuple((a["member_id"], bytes(a["assignment"])) for a in req["assignments"]))
    try:
        got = await ctx.broker.classic_groups.sync_group(sync)
    except FranzError as exc:
        return fail(errors.code_of(exc))
    return {"throttle_time_ms": 0, "error_code": 0, "protocol_type": got.protocol_type,
            "protocol_name": got.protocol_name, "assignment": got.assignment}


@api("Heartbeat", 0, 4)
async def heartbeat(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    group_id = req["group_id"]
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, group_id):
        return {"throttle_time_ms": 0, "error_code": errors.GROUP_AUTHORIZATION_FAILED}
    try:
        await ctx.broker.classic_groups.heartbeat(group_id, int(req["generation_id"]),
                                                  req["member_id"], req["group_instance_id"])
    except FranzError as exc:
        return {"throttle_time_ms": 0, "error_code": errors.code_of(exc)}
    return {"throttle_time_ms": 0, "error_code": 0}


@api("LeaveGroup", 0, 5)
async def leave_group(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    group_id = req["group_id"]
    leaving = [LeavingMember(req["member_id"])] if ctx.version < 3 else [
        LeavingMember(m["member_id"], m["group_instance_id"], m["reason"]) for m in req["members"]]
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, group_id):
        return {"throttle_time_ms": 0, "error_code": errors.GROUP_AUTHORIZATION_FAILED,
                "members": []}
    try:
        results = await ctx.broker.classic_groups.leave_group(group_id, leaving)
    except FranzError as exc:
        return {"throttle_time_ms": 0, "error_code": errors.code_of(exc), "members": []}
    if ctx.version < 3:  # one member: its error is the answer's
        code = results[0].error_code if results else 0
        return {"throttle_time_ms": 0, "error_code": code, "members": []}
    return {"throttle_time_ms": 0, "error_code": 0, "members": [
        {"member_id": r.member_id, "group_instance_id": r.group_instance_id,
         "error_code": r.error_code} for r in results]}


@api("OffsetCommit", 0, 8)
async def offset_commit(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    group_id = req["group_id"]
    topics = req["topics"]

    def answer(codes: dict[TopicPartition, int]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"],
                 "error_code": codes.get(TopicPartition(t["name"], p["partition_index"]), 0)}
                for p in t["partitions"]]} for t in topics]}

    def every(code: int) -> dict[TopicPartition, int]:
        return {TopicPartition(t["name"], p["partition_index"]): code
                for t in topics for p in t["partitions"]}

    if not ctx.allowed(Operation.READ, ResourceType.GROUP, group_id):
        return answer(every(errors.GROUP_AUTHORIZATION_FAILED))
    codes: dict[TopicPartition, int] = {}
    entries: dict[TopicPartition, OffsetCommitEntry] = {}
    for t in topics:
        readable = ctx.allowed(Operation.READ, ResourceType.TOPIC, t["name"])
        for p in t["partitions"]:
            tp = TopicPartition(t["name"], p["partition_index"])
            if not readable:
                codes[tp] = errors.TOPIC_AUTHORIZATION_FAILED
            elif ctx.broker.cache.topic(tp.topic) is None or \
                    tp.partition not in ctx.broker.cache.topics[tp.topic].assignment.partitions:
                codes[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                entries[tp] = OffsetCommitEntry(int(p["committed_offset"]), p["committed_metadata"],
                                                int(p["committed_leader_epoch"]))
    if entries:
        generation = int(req["generation_id_or_member_epoch"]) if ctx.version >= 1 else -1
        try:
            codes.update(await ctx.broker.classic_groups.commit_offsets(
                group_id, generation, req["member_id"] or "", req["group_instance_id"], entries))
        except FranzError as exc:
            code = errors.code_of(exc)
            codes.update({tp: code for tp in entries})
    return answer(codes)
