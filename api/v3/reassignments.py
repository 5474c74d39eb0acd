"""v3 partition reassignments (Confluent's read-only lists) and franz's two controller
requests, answered by any broker (docs/cluster.md, "Moving leaders and replicas").

    GET  /v3/clusters/{c}/topics/-/partitions/-/reassignment        every moving partition
    GET  /v3/clusters/{c}/topics/{t}/partitions/-/reassignment      a topic's
    GET  /v3/clusters/{c}/topics/{t}/partitions/{p}/reassignment    one (404 when not moving)
    POST /v3/clusters/{c}/reassignments              franz: start one (Kafka's reassignment
                                                     JSON); 202, or 400 while one runs
    POST /v3/clusters/{c}/preferred-replica-election franz: Kafka's election JSON, or no
                                                     body for every partition; 202

Both POSTs write Kafka's admin znode (``/admin/reassign_partitions``,
``/admin/preferred_replica_election``); the controller carries the request out and
deletes the znode when done. Registered before ``api.v3.partitions``, whose "never any
reassignment" routes these replace.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from pydantic import TypeAdapter
from starlette.responses import Response

from api.deps import broker_of
from api.errors import ApiError, ErrorCode
from api.input_limits import check_json_depth
from api.security.authorization import Need, requires
from api.v3.common import (
    ClusterLinks,
    Links,
    V3Response,
    body_doc,
    cluster_links,
    errors,
    not_found,
    read_body,
    require_json_type,
    v3_json,
)
from api.v3.models import (
    KafkaReassignment,
    KafkaReassignmentList,
    PartitionReassignmentPlan,
    PreferredReplicaElection,
)
from core.broker.security.acl import Operation, ResourceType

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Partition (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

_BODY = TypeAdapter(dict[str, Any])
_REASSIGN_EXAMPLE = {"version": 1,
                     "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2, 3]}]}
_ELECTION_EXAMPLE = {"version": 1, "partitions": [{"topic": "orders", "partition": 0}]}


def _data(links: Links, topic: str, partition: int, adding: tuple[int, ...],
          removing: tuple[int, ...]) -> dict[str, Any]:
    base = ("topics", topic, "partitions", partition)
    out = links.resource("KafkaReassignment", (*base, "reassignment"),
                         [("topic", topic), ("partition", partition)])
    out.update(cluster_id=links.cluster_id, topic_name=topic, partition_id=partition,
               adding_replicas=list(adding), removing_replicas=list(removing),
               replicas=links.rel(*base, "replicas"))
    return out


async def _moving(request: Request, topic: str | None = None,
                  partition: int | None = None) -> list[tuple[str, int, Any, Any, Any]]:
    broker = broker_of(request)
    if topic is not None:
        info = await broker.describe_topic(topic)  # 404 for an unknown topic
        if partition is not None and partition not in {p.partition for p in info.partitions}:
            raise ApiError(404, ErrorCode.CONSUMER_INSTANCE_NOT_FOUND,
                           "This server does not host this topic-partition.")
    return [r for r in await broker.controller.reassignments()
            if (topic is None or r[0] == topic) and (partition is None or r[1] == partition)]


@router.get("/topics/-/partitions/-/reassignment", operation_id="listKafkaReassignments",
            summary="List ongoing reassignments",
            response_model=KafkaReassignmentList, responses=errors(404))
@requires(Need(Operation.DESCRIBE, ResourceType.CLUSTER))
async def list_all_reassignments(links: ClusterLinks, request: Request) -> Response:
    data = [_data(links, t, p, a, r) for t, p, _, a, r in await _moving(request)]
    return v3_json(links.collection("KafkaReassignmentList",
                                    ("topics", "-", "partitions", "-", "reassignment"), data))


@router.get("/topics/{topic_name}/partitions/-/reassignment",
            operation_id="listKafkaReassignmentsByTopic",
            summary="List a topic's ongoing reassignments",
            response_model=KafkaReassignmentList, responses=errors(404))
@requires(Need(Operation.DESCRIBE, ResourceType.CLUSTER))
async def list_topic_reassignments(topic_name: str, links: ClusterLinks,
                                   request: Request) -> Response:
    data = [_data(links, t, p, a, r) for t, p, _, a, r in await _moving(request, topic_name)]
    return v3_json(links.collection(
        "KafkaReassignmentList", ("topics", topic_name, "partitions", "-", "reassignment"), data))


@router.get("/topics/{topic_name}/partitions/{partition_id}/reassignment",
            operation_id="getKafkaReassignment",
            summary="A partition's ongoing reassignment (404 when it is not moving)",
            response_model=KafkaReassignment, responses=errors(404))
@requires(Need(Operation.DESCRIBE, ResourceType.CLUSTER))
async def get_reassignment(topic_name: str, partition_id: int, links: ClusterLinks,
                           request: Request) -> Response:
    found = await _moving(request, topic_name, partition_id)
    if not found:
        raise not_found(f"No reassignment in progress for {topic_name}-{partition_id}.")
    t, p, _, a, r = found[0]
    return v3_json(_data(links, t, p, a, r))


@router.post("/reassignments", status_code=202, operation_id="createKafkaReassignment",
             summary="franz: start a partition reassignment (Kafka's reassignment JSON)",
             description="The controller carries it out; `GET .../reassignment` shows the "
             "partitions still moving. 400 while another reassignment runs.",
             response_model=PartitionReassignmentPlan,
             openapi_extra=body_doc("PartitionReassignmentRequest", _REASSIGN_EXAMPLE),
             responses={202: {"description": "Accepted: the reassignment asked for"},
                        **errors(400, 404, 415, 422)})
@requires(Need(Operation.ALTER, ResourceType.CLUSTER), audited=True)
async def start_reassignment(links: ClusterLinks, request: Request) -> Response:
    body = await read_body(request, _BODY)
    targets = await broker_of(request).controller.request_reassignment(body)
    return v3_json({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())
    ]}, status=202)


@router.post("/preferred-replica-election", status_code=202,
             operation_id="createKafkaPreferredReplicaElection",
             summary="franz: elect preferred leaders (Kafka's election JSON; no body: all)",
             response_model=PreferredReplicaElection,
             openapi_extra=body_doc("PreferredReplicaElectionRequest", _ELECTION_EXAMPLE,
                                    required=False,
                                    description="No body: every partition of every topic"),
             responses={202: {"description": "Accepted: the partitions named"},
                        **errors(400, 404, 415)})
@requires(Need(Operation.ALTER, ResourceType.CLUSTER), audited=True)
async def preferred_replica_election(links: ClusterLinks, request: Request) -> Response:
    raw = await request.body()
    body: Any = None
    if raw.strip():
        require_json_type(request)
        check_json_depth(raw)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, ErrorCode.BAD_REQUEST, f"Malformed JSON: {exc}") from None
    parts = await broker_of(request).controller.request_preferred_election(body)
    return v3_json({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in parts]},
                   status=202)
