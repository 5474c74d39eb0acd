"""franz additions to the v3 consumer groups: the admin calls ``kafka-consumer-groups.sh``
needs (``franz consumer-groups``) and Confluent's v3 lacks.

    GET    /consumer-groups/{g}/offsets        one row per partition the group has
                                               committed or is assigned: committed
                                               offset, log end, lag, and the member
                                               reading it (with its host)
    POST   /consumer-groups/{g}/offsets:alter  set committed offsets (Kafka's
                                               AlterConsumerGroupOffsets); only while the
                                               group has no members
    DELETE /consumer-groups/{g}                the group and its offsets; only when empty

``offsets:alter`` takes ``{"data": [{"topic_name", "partition_id", "offset"}],
"validate_only": false}``: explicit offsets (0..2^63-2; partition ids int32), as Kafka's
admin call does (the client resolves earliest/latest first); all are written together,
204. An unknown group is fine there (the offsets create it, as in Kafka) when its id is
one a new group may have: 1..249 characters of ``[A-Za-z0-9._-]``, not "." or ".."
(400 / 40002 otherwise, nothing written).

Errors: unknown group 404 / 404 (GET, DELETE); unknown topic or partition 404 / 40403;
a group with members 400 / 40002; a bad body 400 / 400, 415, or 422 / 42206.
"""

from __future__ import annotations

from typing import Annotated, Any, Required

from fastapi import APIRouter, Depends, Request
from pydantic import ConfigDict, Field, TypeAdapter, with_config
from starlette.responses import Response
from typing_extensions import TypedDict

from api.deps import broker_of, consumers_of
from api.errors import ApiError, ErrorCode
from api.input_limits import INT32_MAX, MAX_OFFSET
from api.security.authorization import Need, require, requires, visible
from api.v3.common import (
    ClusterLinks,
    V3Response,
    cluster_links,
    errors,
    no_content,
    read_body,
    v3_json,
)
from api.v3.models import CollectionMetadata
from core.broker.consumer.instance import validate_group_id
from core.broker.errors import GroupIdNotFoundError, UnknownPartitionError
from core.broker.group.group import GroupDescription
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Consumer Group (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

_GROUP = "/consumer-groups/{consumer_group_id}"
_FORBID = ConfigDict(extra="forbid")


@with_config(_FORBID)
class KafkaConsumerGroupOffset(TypedDict):
    """franz: one partition of a group, as ``kafka-consumer-groups --describe`` shows it."""

    kind: Annotated[str, Field(description="The resource type: KafkaConsumerGroupOffset")]
    cluster_id: Annotated[str, Field(description="The cluster id")]
    consumer_group_id: Annotated[str, Field(description="The consumer group id")]
    topic_name: Annotated[str, Field(description="The topic name")]
    partition_id: Annotated[int, Field(description="The partition id")]
    current_offset: Annotated[int | None, Field(
        description="The committed offset (the next to read); null when none is")]
    log_end_offset: Annotated[int, Field(description="The high watermark")]
    lag: Annotated[int | None, Field(description="`log_end_offset - current_offset`; null "
                                     "without a committed offset")]
    consumer_id: Annotated[str, Field(description="The member assigned the partition; "
                                      "empty when none is")]
    host: Annotated[str, Field(description="That member's host; empty when none")]
    client_id: Annotated[str, Field(description="That member's `client.id`; empty when "
                                    "none")]


@with_config(_FORBID)
class KafkaConsumerGroupOffsetList(TypedDict):
    kind: Annotated[str, Field(description="The resource type: KafkaConsumerGroupOffsetList")]
    metadata: Annotated[CollectionMetadata, Field(description="The collection's URL; "
                                                  "`next` is always null")]
    data: Annotated[list[KafkaConsumerGroupOffset], Field(
        description="Every partition the group committed or is assigned, sorted")]


@with_config(_FORBID)
class ConsumerGroupOffsetIn(TypedDict):
    topic_name: Annotated[str, Field(min_length=1, description="The topic name",
                                     examples=["orders"])]
    partition_id: Annotated[int, Field(ge=0, le=INT32_MAX, description="The partition id",
                                       examples=[0])]
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET, description="The offset to commit: "
                                 "the next the group reads, 0..2^63-2", examples=[42])]


@with_config(_FORBID)
class AlterConsumerGroupOffsetsRequest(TypedDict, total=False):
    data: Required[Annotated[list[ConsumerGroupOffsetIn], Field(
        min_length=1, description="The offsets, written together")]]
    validate_only: Annotated[bool | None, Field(description="Only check the request; "
                                                "write nothing")]


ALTER_OFFSETS = TypeAdapter(AlterConsumerGroupOffsetsRequest)


def _inline_schema(adapter: TypeAdapter[Any]) -> dict[str, Any]:
    """The JSON schema with its ``$defs`` resolved in place (for ``openapi_extra``)."""
    schema = adapter.json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {k: resolve(v) for k, v in node.items()}
        return [resolve(v) for v in node] if isinstance(node, list) else node

    return dict(resolve(schema))


_ALTER_EXAMPLE = {
    "data": [{"topic_name": "orders", "partition_id": 0, "offset": 42}],
    "validate_only": False,
}
_ALTER_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": _inline_schema(ALTER_OFFSETS), "example": _ALTER_EXAMPLE}
        },
    }
}


def _not_inactive(desc: GroupDescription) -> ApiError:
    """Kafka's refusal (kafka-consumer-groups.sh) to move the offsets of a live group."""
    return ApiError(
        400,
        ErrorCode.KAFKA_BAD_REQUEST,
        f"Assignments can only be reset if the group '{desc.group_id}' is inactive, "
        f"but the current state is {desc.state.confluent_name}.",
    )


@router.get(
    _GROUP + "/offsets",
    operation_id="listKafkaConsumerGroupOffsets",
    summary="franz: every partition of a group with its offset, end, lag and member",
    response_model=KafkaConsumerGroupOffsetList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"), also="lists only partitions of topics the principal may DESCRIBE")
async def list_group_offsets(
    consumer_group_id: str, links: ClusterLinks, request: Request
) -> Response:
    consumers, broker = consumers_of(request), broker_of(request)
    desc = await consumers.describe_group(consumer_group_id)
    committed = await consumers.group_offsets(consumer_group_id)
    owners = {tp: m for m in desc.members for tp in m.assignment}
    data = []
    shown = set(visible(request, Operation.DESCRIBE, ResourceType.TOPIC,
                        {tp[0] for tp in (*committed, *owners)}))
    for topic, partition in sorted({*committed, *owners}):
        if topic not in shown or broker.cache.topic(topic) is None:
            continue  # a deleted topic's old commit
        end = (await broker.partition_offsets(topic, partition)).high_watermark
        current = committed.get(TopicPartition(topic, partition))
        m = owners.get(TopicPartition(topic, partition))
        data.append({
            "kind": "KafkaConsumerGroupOffset",
            "cluster_id": links.cluster_id,
            "consumer_group_id": consumer_group_id,
            "topic_name": topic,
            "partition_id": partition,
            "current_offset": current,
            "log_end_offset": end,
            "lag": None if current is None else max(0, end - current),
            "consumer_id": m.member_id if m else "",
            "host": m.client_host if m else "",
            "client_id": m.client_id if m else "",
        })
    parts = ("consumer-groups", consumer_group_id, "offsets")
    return v3_json(links.collection("KafkaConsumerGroupOffsetList", parts, data))


@router.post(
    _GROUP + "/offsets:alter",
    operation_id="updateKafkaConsumerGroupOffsets",
    summary="franz: set a group's committed offsets (the group must have no members)",
    status_code=204,
    openapi_extra=_ALTER_DOC,
    responses=errors(400, 404, 415, 422),
)
@requires(Need(Operation.READ, ResourceType.GROUP, "consumer_group_id"), also="READ on each topic in the body", audited=True)
async def alter_group_offsets(
    consumer_group_id: str, links: ClusterLinks, request: Request
) -> Response:
    req = await read_body(request, ALTER_OFFSETS)
    broker, consumers = broker_of(request), consumers_of(request)
    offsets: dict[TopicPartition, int] = {}
    for entry in req["data"]:
        topic, partition = entry["topic_name"], entry["partition_id"]
        require(request, Operation.READ, ResourceType.TOPIC, topic)
        info = await broker.describe_topic(topic)  # UnknownTopicError: 404 / 40403
        if not any(p.partition == partition for p in info.partitions):
            raise UnknownPartitionError(f"Partition {partition} of topic '{topic}' not found.")
        offsets[TopicPartition(topic, partition)] = entry["offset"]
    try:
        desc = await consumers.describe_group(consumer_group_id)
    except GroupIdNotFoundError:
        desc = None  # a new group: the offsets create it
        validate_group_id(consumer_group_id)
    if desc is not None and desc.members:
        raise _not_inactive(desc)
    if not req.get("validate_only"):
        await consumers.reset_offsets(consumer_group_id, offsets)  # NonEmptyGroupError: 400
    return no_content()


@router.delete(
    _GROUP,
    operation_id="deleteKafkaConsumerGroup",
    summary="franz: delete a consumer group and its committed offsets (it must be empty)",
    status_code=204,
    responses=errors(400, 404),
)
@requires(Need(Operation.DELETE, ResourceType.GROUP, "consumer_group_id"), audited=True)
async def delete_group(consumer_group_id: str, links: ClusterLinks, request: Request) -> Response:
    await consumers_of(request).delete_group(consumer_group_id)
    return no_content()
