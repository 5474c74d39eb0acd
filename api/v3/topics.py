"""v3 topics: list, describe, create, increase partitions, delete (rest-api-reference §3.4).

Create: 201 with the topic and ``Location: <self>``; with ``validate_only`` nothing is
created and the answer is 200 (Confluent). A missing or illegal ``topic_name`` is
422 / 42206 "Payload error. Invalid topic name."; an existing topic 400 / 40002
"Topic 'x' already exists."; a bad config 400 / 40002 naming the key; a replication
factor above the live brokers 400 / 40002. Partitions grow with
``PATCH .../topics/{t}`` ``{"partitions_count": N}``; the same or a smaller count is
400 / 40002. Unknown topic: 404 / 40403.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from api.deps import broker_of
from api.errors import V3_MEDIA, ApiError, ErrorCode
from api.openapi import ref
from api.security.authorization import (
    Need,
    allowed,
    require_create_topic,
    requires,
    visible,
)
from api.v3.common import (
    PAYLOAD_ERROR,
    ClusterLinks,
    Links,
    V3Response,
    body_doc,
    cluster_links,
    errors,
    no_content,
    read_body,
    v3_json,
)
from api.v3.configs import config_text
from api.v3.models import (
    CREATE_TOPIC,
    UPDATE_PARTITIONS_COUNT,
    CreateTopicRequest,
    KafkaTopic,
    KafkaTopicList,
)
from core.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)
from core.broker.security.acl import SUPPORTED_OPERATIONS, Operation, ResourceType
from core.broker.types import TopicInfo
from core.storage.config import is_valid_topic_name

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Topic (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

_CREATE_EXAMPLE = {
    "topic_name": "orders",
    "partitions_count": 3,
    "replication_factor": 1,
    "configs": [{"name": "cleanup.policy", "value": "compact"}],
}


def topic_data(links: Links, info: TopicInfo,
               authorized: list[str] | None = None) -> dict[str, Any]:
    """``authorized``: the principal's operations on the topic, when asked for."""
    name = info.name
    out = links.resource("KafkaTopic", ("topics", name), [("topic", name)])
    out.update(
        cluster_id=links.cluster_id,
        topic_name=name,
        is_internal=info.internal,
        replication_factor=len(info.partitions[0].replicas) if info.partitions else 0,
        partitions_count=len(info.partitions),
        partitions=links.rel("topics", name, "partitions"),
        configs=links.rel("topics", name, "configs"),
        partition_reassignments=links.rel("topics", name, "partitions", "-", "reassignment"),
        authorized_operations=authorized or [],
    )
    return out


def _operations(request: Request, topic: str, include: bool) -> list[str] | None:
    """The operations the principal may do on ``topic`` (Kafka's
    ``include_authorized_operations``; every one without an authorizer)."""
    if not include:
        return None
    ops = sorted(SUPPORTED_OPERATIONS[ResourceType.TOPIC], key=lambda op: op.name)
    return [op.name for op in ops if allowed(request, op, ResourceType.TOPIC, topic)]


@router.get(
    "/topics",
    operation_id="listKafkaTopics",
    summary="List topics (internal ones included), sorted by name",
    response_model=KafkaTopicList,
    responses=errors(400, 404),  # 400: a bad include_authorized_operations
)
@requires(also="lists only the topics the principal may DESCRIBE")
async def list_topics(
    links: ClusterLinks, request: Request,
    include: Annotated[bool, Query(alias="includeAuthorizedOperations",
                                   description="fill `authorized_operations`")] = False,
) -> Response:
    broker = broker_of(request)
    names = visible(request, Operation.DESCRIBE, ResourceType.TOPIC, await broker.list_topics())
    data = [topic_data(links, await broker.describe_topic(n), _operations(request, n, include))
            for n in names]
    return v3_json(links.collection("KafkaTopicList", ("topics",), data))


@router.get(
    "/topics/{topic_name}",
    operation_id="getKafkaTopic",
    summary="Describe a topic",
    response_model=KafkaTopic,
    responses=errors(400, 404),  # 400: a bad include_authorized_operations
)
@requires(Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic_name"))
async def get_topic(
    topic_name: str, links: ClusterLinks, request: Request,
    include: Annotated[bool, Query(alias="include_authorized_operations",
                                   description="fill `authorized_operations`")] = False,
) -> Response:
    info = await broker_of(request).describe_topic(topic_name)
    return v3_json(topic_data(links, info, _operations(request, topic_name, include)))


def _optional_count(value: int | None, what: str) -> int | None:
    """None, or -1 (Kafka's "broker default"), means the default; below 1 is refused."""
    if value is None or value == -1:
        return None
    if value < 1:
        error = InvalidPartitionsError if what == "partitions" else InvalidReplicationFactorError
        raise error(f"Number of {what} must be larger than 0, got {value}.")
    return value


def _create_args(req: CreateTopicRequest) -> dict[str, Any]:
    name = req["topic_name"]
    if not is_valid_topic_name(name):
        raise ApiError(422, ErrorCode.PAYLOAD_ERROR, PAYLOAD_ERROR + "Invalid topic name.")
    if req.get("replicas_assignments"):
        raise InvalidReplicaAssignmentError(
            "replicas_assignments is not supported: franz assigns replicas itself; "
            "give partitions_count and replication_factor"
        )
    configs = {c["name"]: config_text(c.get("value")) for c in req.get("configs") or ()}
    return {
        "partitions": _optional_count(req.get("partitions_count"), "partitions"),
        "replication_factor": _optional_count(req.get("replication_factor"), "replication factor"),
        "configs": {k: v for k, v in configs.items() if v is not None},
        "validate_only": bool(req.get("validate_only")),
    }


@router.post(
    "/topics",
    operation_id="createKafkaTopic",
    summary="Create a topic",
    description="201 with the topic and `Location`; `validate_only`: 200, nothing created.",
    status_code=201,
    response_model=KafkaTopic,
    openapi_extra=body_doc("CreateTopicRequest", _CREATE_EXAMPLE),
    responses={
        201: {"description": "Created", "headers": {"Location": {
            "description": "The new topic's URL", "schema": {"type": "string"}}}},
        200: {
            "description": "validate_only: the topic as it would be; nothing created",
            "content": {V3_MEDIA: {"schema": ref("KafkaTopic")}},
        },
        **errors(400, 404, 415, 422),
    },
)
@requires(also="CREATE on the cluster or on the topic named in the body", audited=True)
async def create_topic(links: ClusterLinks, request: Request) -> Response:
    req = await read_body(request, CREATE_TOPIC)
    require_create_topic(request, req["topic_name"])
    args = _create_args(req)
    info = await broker_of(request).create_topic(req["topic_name"], **args)
    body = topic_data(links, info)
    if args["validate_only"]:
        return v3_json(body)
    return v3_json(body, status=201, headers={"Location": body["metadata"]["self"]})


@router.patch(
    "/topics/{topic_name}",
    operation_id="updatePartitionCountKafkaTopic",
    summary="Increase a topic's partition count",
    description="The count can only grow: the same or a smaller count is 400 / 40002.",
    response_model=KafkaTopic,
    openapi_extra=body_doc("UpdatePartitionsCountRequest", {"partitions_count": 6}),
    responses=errors(400, 404, 415, 422),
)
@requires(Need(Operation.ALTER, ResourceType.TOPIC, "topic_name"), audited=True)
async def update_partitions_count(
    topic_name: str, links: ClusterLinks, request: Request
) -> Response:
    req = await read_body(request, UPDATE_PARTITIONS_COUNT)
    broker = broker_of(request)
    await broker.describe_topic(topic_name)  # 404 before any count check
    info = await broker.create_partitions(topic_name, req["partitions_count"])
    return v3_json(topic_data(links, info))


@router.delete(
    "/topics/{topic_name}",
    operation_id="deleteKafkaTopic",
    summary="Delete a topic",
    status_code=204,
    responses=errors(400, 404),
)
@requires(Need(Operation.DELETE, ResourceType.TOPIC, "topic_name"), audited=True)
async def delete_topic(topic_name: str, request: Request) -> Response:
    await broker_of(request).delete_topic(topic_name)
    return no_content()
