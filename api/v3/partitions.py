"""v3 partitions, their replicas and offsets (reassignments: ``api.v3.reassignments``).

Unknown topic or partition (also a partition id that is not a number): 404 / 40403
"This server does not host this topic-partition.", as Confluent's v3 answers. A
partition's ``leader`` links to the leader's replica, null while it has none.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from api.deps import broker_of
from api.errors import ApiError, ErrorCode
from api.openapi import enum_parameter
from api.security.authorization import Need, requires
from api.v3.common import ClusterLinks, Links, V3Response, cluster_links, errors, not_found, v3_json
from api.v3.models import (
    KafkaPartition,
    KafkaPartitionList,
    KafkaPartitionWithOffsets,
    KafkaReplica,
    KafkaReplicaList,
)
from core.broker.errors import UnknownPartitionError
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import PartitionInfo, TopicInfo

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

_TOPIC = "/topics/{topic_name}"
_PARTITIONS: list[str | Enum] = ["Partition (v3)"]  # the type of APIRouter.get(tags=)
_REPLICAS: list[str | Enum] = ["Replica (v3)"]
_PARTITION = _TOPIC + "/partitions/{partition_id}"


def find_partition(info: TopicInfo, partition_id: int) -> PartitionInfo:
    for p in info.partitions:
        if p.partition == partition_id:
            return p
    raise UnknownPartitionError(f"Partition {partition_id} of topic '{info.name}' not found.")


def partition_data(links: Links, topic: str, p: PartitionInfo) -> dict[str, Any]:
    base = ("topics", topic, "partitions", p.partition)
    out = links.resource("KafkaPartition", base, [("topic", topic), ("partition", p.partition)])
    out.update(
        cluster_id=links.cluster_id,
        topic_name=topic,
        partition_id=p.partition,
        leader=links.rel(*base, "replicas", p.leader) if p.leader >= 0 else None,
        replicas=links.rel(*base, "replicas"),
        reassignment=links.rel(*base, "reassignment"),
    )
    return out


def replica_data(links: Links, topic: str, p: PartitionInfo, broker_id: int) -> dict[str, Any]:
    parts = ("topics", topic, "partitions", p.partition, "replicas", broker_id)
    crn = [("topic", topic), ("partition", p.partition), ("replica", broker_id)]
    out = links.resource("KafkaReplica", parts, crn)
    out.update(
        cluster_id=links.cluster_id,
        topic_name=topic,
        partition_id=p.partition,
        broker_id=broker_id,
        is_leader=broker_id == p.leader,
        is_in_sync=broker_id in p.isr,
        broker=links.rel("brokers", broker_id),
    )
    return out


@router.get(
    _TOPIC + "/partitions",
    operation_id="listKafkaPartitions",
    tags=_PARTITIONS,
    summary="List a topic's partitions",
    response_model=KafkaPartitionList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic_name"))
async def list_partitions(topic_name: str, links: ClusterLinks, request: Request) -> Response:
    info = await broker_of(request).describe_topic(topic_name)
    data = [partition_data(links, topic_name, p) for p in info.partitions]
    return v3_json(
        links.collection("KafkaPartitionList", ("topics", topic_name, "partitions"), data)
    )


@router.get(
    _PARTITION,
    operation_id="getKafkaPartition",
    tags=_PARTITIONS,
    summary="Describe a partition",
    response_model=KafkaPartition,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic_name"))
async def get_partition(
    topic_name: str, partition_id: int, links: ClusterLinks, request: Request
) -> Response:
    info = await broker_of(request).describe_topic(topic_name)
    return v3_json(partition_data(links, topic_name, find_partition(info, partition_id)))


@router.get(
    _PARTITION + "/offset",
    operation_id="listKafkaPartitionOffsets",
    tags=_PARTITIONS,
    summary="Earliest and latest offsets of a partition",
    description="`earliest_offset` is the log start offset, `latest_offset` the high "
    "watermark. `offset_type` accepts only `earliest_and_latest` (Confluent).",
    response_model=KafkaPartitionWithOffsets,
    openapi_extra={"parameters": [enum_parameter(
        "offset_type", ["earliest_and_latest"], "The offsets to answer: only "
        "`earliest_and_latest`", default="earliest_and_latest")]},
    responses=errors(400, 404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic_name"))
async def get_partition_offsets(
    topic_name: str,
    partition_id: int,
    links: ClusterLinks,
    request: Request,
    offset_type: Annotated[str, Query()] = "earliest_and_latest",
) -> Response:
    if offset_type != "earliest_and_latest":
        raise ApiError(400, ErrorCode.BAD_REQUEST, f"offset_type:{offset_type} is invalid")
    offsets = await broker_of(request).partition_offsets(topic_name, partition_id)
    parts = ("topics", topic_name, "partitions", partition_id, "offset")
    crn = [("topic", topic_name), ("partition", partition_id), ("offset_type", offset_type)]
    out = links.resource("KafkaPartitionWithOffsets", parts, crn)
    out.update(
        cluster_id=links.cluster_id,
        topic_name=topic_name,
        partition_id=partition_id,
        earliest_offset=offsets.log_start_offset,
        latest_offset=offsets.high_watermark,
    )
    return v3_json(out)


@router.get(
    _PARTITION + "/replicas",
    operation_id="listKafkaReplicas",
    tags=_REPLICAS,
    summary="List a partition's replicas",
    response_model=KafkaReplicaList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic_name"))
async def list_replicas(
    topic_name: str, partition_id: int, links: ClusterLinks, request: Request
) -> Response:
    p = find_partition(await broker_of(request).describe_topic(topic_name), partition_id)
    data = [replica_data(links, topic_name, p, b) for b in p.replicas]
    parts = ("topics", topic_name, "partitions", partition_id, "replicas")
    return v3_json(links.collection("KafkaReplicaList", parts, data))


@router.get(
    _PARTITION + "/replicas/{broker_id}",
    operation_id="getKafkaReplica",
    tags=_REPLICAS,
    summary="Describe one replica of a partition",
    response_model=KafkaReplica,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic_name"))
async def get_replica(
    topic_name: str, partition_id: int, broker_id: int, links: ClusterLinks, request: Request
) -> Response:
    p = find_partition(await broker_of(request).describe_topic(topic_name), partition_id)
    if broker_id not in p.replicas:
        raise not_found(f"Broker {broker_id} holds no replica of {topic_name}-{partition_id}.")
    return v3_json(replica_data(links, topic_name, p, broker_id))
