"""v3 consumer groups (read-only): groups, their consumers and those consumers' assignments.

franz's group members are its REST consumer instances (v2 ``/consumers``): a member's
``consumer_id`` and ``client_id`` are the instance name, ``instance_id`` (static
membership) is null. Groups speak the classic protocol (``type`` CLASSIC); ``state`` is
Kafka's in Confluent's spelling (STABLE, EMPTY, PREPARING_REBALANCE, ...); the
``coordinator`` is the broker leading the group's ``__consumer_offsets`` partition.
Groups are listed by id. An unknown group, consumer or assignment is 404 / 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.deps import broker_of, consumers_of
from api.security.authorization import Need, requires, visible
from api.v3.common import ClusterLinks, Links, V3Response, cluster_links, errors, not_found, v3_json
from api.v3.models import (
    KafkaConsumer,
    KafkaConsumerAssignment,
    KafkaConsumerAssignmentList,
    KafkaConsumerGroup,
    KafkaConsumerGroupList,
    KafkaConsumerList,
)
from core.broker.consumer.manager import GroupDescription
from core.broker.errors import UnknownTopicError
from core.broker.group.group import MemberDescription
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import OFFSETS_TOPIC

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Consumer Group (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

_GROUP = "/consumer-groups/{consumer_group_id}"
_CONSUMER = _GROUP + "/consumers/{consumer_id}"


async def coordinator_id(request: Request, desc: GroupDescription) -> int:
    """The leader of the group's offsets partition (this broker when unknown)."""
    broker = broker_of(request)
    try:
        info = await broker.describe_topic(OFFSETS_TOPIC)
    except UnknownTopicError:
        return broker.broker_id
    for p in info.partitions:
        if p.partition == desc.coordinator_partition and p.leader >= 0:
            return p.leader
    return broker.broker_id


def group_data(links: Links, desc: GroupDescription, coordinator: int) -> dict[str, Any]:
    g = desc.group_id
    out = links.resource("KafkaConsumerGroup", ("consumer-groups", g), [("consumer-group", g)])
    out.update(
        cluster_id=links.cluster_id,
        consumer_group_id=g,
        is_simple=desc.is_simple,
        partition_assignor=desc.protocol or "",
        state=desc.state.confluent_name,
        type="CLASSIC",
        is_mixed_consumer_group=False,
        coordinator=links.rel("brokers", coordinator),
        consumers=links.rel("consumer-groups", g, "consumers"),
        lag_summary=links.rel("consumer-groups", g, "lag-summary"),
    )
    return out


def consumer_data(links: Links, group: str, m: MemberDescription) -> dict[str, Any]:
    c = m.member_id
    parts = ("consumer-groups", group, "consumers", c)
    out = links.resource("KafkaConsumer", parts, [("consumer-group", group), ("consumer", c)])
    out.update(
        cluster_id=links.cluster_id,
        consumer_group_id=group,
        consumer_id=c,
        instance_id=m.group_instance_id,
        client_id=m.client_id,
        assignments=links.rel(*parts, "assignments"),
    )
    return out


def assignment_data(
    links: Links, group: str, consumer: str, topic: str, partition: int
) -> dict[str, Any]:
    parts = (
        "consumer-groups",
        group,
        "consumers",
        consumer,
        "assignments",
        topic,
        "partitions",
        partition,
    )
    crn = [
        ("consumer-group", group),
        ("consumer", consumer),
        ("assignment", topic),
        ("partition", partition),
    ]
    out = links.resource("KafkaConsumerAssignment", parts, crn)
    out.update(
        cluster_id=links.cluster_id,
        consumer_group_id=group,
        consumer_id=consumer,
        topic_name=topic,
        partition_id=partition,
        partition=links.rel("topics", topic, "partitions", partition),
        lag=links.rel("consumer-groups", group, "lags", topic, "partitions", partition),
    )
    return out


def find_member(desc: GroupDescription, consumer_id: str) -> MemberDescription:
    for m in desc.members:
        if m.member_id == consumer_id:
            return m
    raise not_found(f"Consumer {consumer_id} cannot be found in consumer group {desc.group_id}.")


@router.get(
    "/consumer-groups",
    operation_id="listKafkaConsumerGroups",
    summary="List consumer groups",
    response_model=KafkaConsumerGroupList,
    responses=errors(404),
)
@requires(also="lists only the groups the principal may DESCRIBE")
async def list_groups(links: ClusterLinks, request: Request) -> Response:
    consumers = consumers_of(request)
    data = []
    groups = sorted(s.group_id for s in await consumers.list_groups())
    for group in visible(request, Operation.DESCRIBE, ResourceType.GROUP, groups):
        desc = await consumers.describe_group(group)
        data.append(group_data(links, desc, await coordinator_id(request, desc)))
    return v3_json(links.collection("KafkaConsumerGroupList", ("consumer-groups",), data))


@router.get(
    _GROUP,
    operation_id="getKafkaConsumerGroup",
    summary="Describe a consumer group",
    response_model=KafkaConsumerGroup,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"))
async def get_group(consumer_group_id: str, links: ClusterLinks, request: Request) -> Response:
    desc = await consumers_of(request).describe_group(consumer_group_id)
    return v3_json(group_data(links, desc, await coordinator_id(request, desc)))


@router.get(
    _GROUP + "/consumers",
    operation_id="listKafkaConsumers",
    summary="List a group's consumers",
    response_model=KafkaConsumerList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"))
async def list_consumers(consumer_group_id: str, links: ClusterLinks, request: Request) -> Response:
    desc = await consumers_of(request).describe_group(consumer_group_id)
    data = [consumer_data(links, consumer_group_id, m) for m in desc.members]
    parts = ("consumer-groups", consumer_group_id, "consumers")
    return v3_json(links.collection("KafkaConsumerList", parts, data))


@router.get(
    _CONSUMER,
    operation_id="getKafkaConsumer",
    summary="Describe a consumer",
    response_model=KafkaConsumer,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"))
async def get_consumer(
    consumer_group_id: str, consumer_id: str, links: ClusterLinks, request: Request
) -> Response:
    desc = await consumers_of(request).describe_group(consumer_group_id)
    return v3_json(consumer_data(links, consumer_group_id, find_member(desc, consumer_id)))


@router.get(
    _CONSUMER + "/assignments",
    operation_id="listKafkaConsumerAssignment",
    summary="List a consumer's assigned partitions",
    response_model=KafkaConsumerAssignmentList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"))
async def list_assignments(
    consumer_group_id: str, consumer_id: str, links: ClusterLinks, request: Request
) -> Response:
    desc = await consumers_of(request).describe_group(consumer_group_id)
    member = find_member(desc, consumer_id)
    data = [
        assignment_data(links, consumer_group_id, consumer_id, t, p)
        for t, p in sorted(member.assignment)
    ]
    parts = ("consumer-groups", consumer_group_id, "consumers", consumer_id, "assignments")
    return v3_json(links.collection("KafkaConsumerAssignmentList", parts, data))


@router.get(
    _CONSUMER + "/assignments/{topic_name}/partitions/{partition_id}",
    operation_id="getKafkaConsumerAssignment",
    summary="Describe one assignment",
    response_model=KafkaConsumerAssignment,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"))
async def get_assignment(
    consumer_group_id: str,
    consumer_id: str,
    topic_name: str,
    partition_id: int,
    links: ClusterLinks,
    request: Request,
) -> Response:
    desc = await consumers_of(request).describe_group(consumer_group_id)
    member = find_member(desc, consumer_id)
    if (topic_name, partition_id) not in member.assignment:
        raise not_found(
            f"Partition {topic_name}-{partition_id} is not assigned to consumer {consumer_id}."
        )
    return v3_json(assignment_data(links, consumer_group_id, consumer_id, topic_name, partition_id))
