"""v2 topic and partition metadata (rest-api-reference §2.1, §2.2).

Unknown topic: 404 / 40401 (Confluent's documented code; its current code says 40403).
Unknown partition of a known topic, or a partition path segment that is not a number:
404 / 40402.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.deps import broker_of
from api.openapi import errors, ok
from api.responses import check_accept, v2_json
from api.security.authorization import Need, requires, visible
from core.broker.errors import UnknownPartitionError
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import PartitionInfo, TopicInfo

router = APIRouter(dependencies=[Depends(check_accept)])
_TOPICS: list[str | Enum] = ["Topic (v2)"]  # the type of APIRouter.get(tags=)
_PARTITIONS: list[str | Enum] = ["Partition (v2)"]

_PARTITION = {
    "partition": 0,
    "leader": 0,
    "replicas": [{"broker": 0, "leader": True, "in_sync": True}],
}
_TOPIC = {"name": "orders", "configs": {"cleanup.policy": "delete"}, "partitions": [_PARTITION]}


def partition_out(p: PartitionInfo) -> dict[str, Any]:
    isr = set(p.isr)
    return {
        "partition": p.partition,
        "leader": p.leader,
        "replicas": [
            {"broker": b, "leader": b == p.leader, "in_sync": b in isr} for b in p.replicas
        ],
    }


def topic_out(info: TopicInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "configs": dict(info.configs),
        "partitions": [partition_out(p) for p in info.partitions],
    }


def _find(info: TopicInfo, partition: int) -> PartitionInfo:
    for p in info.partitions:
        if p.partition == partition:
            return p
    raise UnknownPartitionError(f"Partition {partition} of topic '{info.name}' not found.")


@router.get(
    "/topics",
    operation_id="listTopics",
    tags=_TOPICS,
    summary="List topic names (internal topics included)",
    responses={
        200: {
            "description": "Topic names",
            "content": {
                "application/vnd.kafka.v2+json": {
                    "schema": {"type": "array", "items": {"type": "string"}},
                    "example": ["__consumer_offsets", "orders"],
                }
            },
        }
    },
)
@requires(also="lists only the topics the principal may DESCRIBE")
async def list_topics(request: Request) -> Response:
    names = await broker_of(request).list_topics()
    return v2_json(request, visible(request, Operation.DESCRIBE, ResourceType.TOPIC, names))


@router.get(
    "/topics/{topic}",
    operation_id="getTopic",
    tags=_TOPICS,
    summary="Describe a topic",
    responses={**ok("TopicOut", _TOPIC), **errors(404)},
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic"))
async def get_topic(topic: str, request: Request) -> Response:
    return v2_json(request, topic_out(await broker_of(request).describe_topic(topic)))


@router.get(
    "/topics/{topic}/partitions",
    operation_id="listPartitions",
    tags=_PARTITIONS,
    summary="List a topic's partitions",
    responses={
        **{
            200: {
                "description": "Partitions",
                "content": {
                    "application/vnd.kafka.v2+json": {
                        "schema": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/PartitionOut"},
                        },
                        "example": [_PARTITION],
                    }
                },
            }
        },
        **errors(404),
    },
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic"))
async def list_partitions(topic: str, request: Request) -> Response:
    info = await broker_of(request).describe_topic(topic)
    return v2_json(request, [partition_out(p) for p in info.partitions])


@router.get(
    "/topics/{topic}/partitions/{partition}",
    operation_id="getPartition",
    tags=_PARTITIONS,
    summary="Describe one partition",
    responses={**ok("PartitionOut", _PARTITION), **errors(404)},
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic"))
async def get_partition(topic: str, partition: int, request: Request) -> Response:
    info = await broker_of(request).describe_topic(topic)
    return v2_json(request, partition_out(_find(info, partition)))


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets",
    operation_id="getPartitionOffsets",
    tags=_PARTITIONS,
    summary="First and next offsets of a partition",
    description="`beginning_offset` is the log start offset, `end_offset` the high "
    "watermark (the offset the next record will get once replicated).",
    responses={
        **ok("PartitionOffsetsOut", {"beginning_offset": 0, "end_offset": 42}),
        **errors(404),
    },
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic"))
async def get_partition_offsets(topic: str, partition: int, request: Request) -> Response:
    offsets = await broker_of(request).partition_offsets(topic, partition)
    body = {"beginning_offset": offsets.log_start_offset, "end_offset": offsets.high_watermark}
    return v2_json(request, body)
