"""Topic administration over Kafka's protocol: CreateTopics, DeleteTopics,
CreatePartitions, on the same TopicAdmin the REST API uses (same rules, same errors)."""

from __future__ import annotations

from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from api.kafka.handlers.cluster import topic_id_bytes, valid_topic_name
from core.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from core.errors import FranzError

MAX_TOPICS_PER_REQUEST = 10_000


def _may_create(ctx: RequestContext, name: str) -> bool:
    return ctx.allowed_quietly(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or \
        ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)


@api("CreateTopics", 0, 7)
async def create_topics(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    out = []
    validate_only = bool(req["validate_only"])
    seen: set[str] = set()
    for t in req["topics"][:MAX_TOPICS_PER_REQUEST]:
        name = t["name"]
        answer: dict[str, Any] = {"name": name, "topic_id": bytes(16), "error_code": 0,
                                  "error_message": None, "num_partitions": -1,
                                  "replication_factor": -1, "configs": None}
        out.append(answer)
        if name in seen:
            answer.update(error_code=errors.INVALID_REQUEST,
                          error_message=f"topic {name} is named twice in the request")
            continue
        seen.add(name)
        if not valid_topic_name(name):
            answer.update(error_code=errors.INVALID_TOPIC_EXCEPTION,
                          error_message=f"'{name}' is not a valid topic name")
            continue
        if not _may_create(ctx, name):
            answer["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
            continue
        if t["assignments"]:
            answer.update(error_code=errors.INVALID_REQUEST,
                          error_message="manual replica assignments are not supported: give "
                                        "num_partitions and replication_factor")
            continue
        partitions = None if t["num_partitions"] == -1 else t["num_partitions"]
        rf = None if t["replication_factor"] == -1 else t["replication_factor"]
        configs = {c["name"]: c["value"] for c in t["configs"] if c["value"] is not None}
        try:
            info = await ctx.broker.create_topic(name, partitions=partitions,
                                                 replication_factor=rf, configs=configs,
                                                 validate_only=validate_only)
        except FranzError as exc:
            answer.update(error_code=errors.code_of(exc), error_message=errors.message_of(exc))
            continue
        answer["num_partitions"] = len(info.partitions)
        answer["replication_factor"] = len(info.partitions[0].replicas) if info.partitions else -1
        meta = ctx.broker.cache.topic(name)
        if meta is not None:
            answer["topic_id"] = topic_id_bytes(meta.assignment.topic_id)
    return {"throttle_time_ms": 0, "topics": out}


@api("DeleteTopics", 0, 5)
async def delete_topics(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    names = list(req["topic_names"] or []) if ctx.version < 6 else [t["name"] for t in req["topics"]]
    out = []
    for name in names[:MAX_TOPICS_PER_REQUEST]:
        answer: dict[str, Any] = {"name": name, "topic_id": bytes(16), "error_code": 0,
                                  "error_message": None}
        out.append(answer)
        if not ctx.allowed(Operation.DELETE, ResourceType.TOPIC, name):
            answer["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
            continue
        try:
            await ctx.broker.delete_topic(name)
        except FranzError as exc:
            answer.update(error_code=errors.code_of(exc), error_message=errors.message_of(exc))
    return {"throttle_time_ms": 0, "responses": out}


@api("CreatePartitions", 0, 3)
async def create_partitions(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    out = []
    for t in req["topics"][:MAX_TOPICS_PER_REQUEST]:
        name = t["name"]
        answer: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        out.append(answer)
        if not ctx.allowed(Operation.ALTER, ResourceType.TOPIC, name):
            answer["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
            continue
        if t["assignments"]:
            answer.update(error_code=errors.INVALID_REQUEST,
                          error_message="manual replica assignments are not supported")
            continue
        if req["validate_only"]:
            continue
        try:
            await ctx.broker.create_partitions(name, int(t["count"]))
        except FranzError as exc:
            answer.update(error_code=errors.code_of(exc), error_message=errors.message_of(exc))
    return {"throttle_time_ms": 0, "results": out}
