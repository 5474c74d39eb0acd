"""v3 consumer lags and the group lag summary.

One lag per partition the group has committed an offset for (Confluent reads the
group's committed offsets, then the latest offsets): ``current_offset`` is the committed
offset (the next one the group will read), ``log_end_offset`` the high watermark (the
latest offset a read-committed consumer can see), ``lag`` the difference, and
``consumer_id`` / ``client_id`` name the member assigned the partition ("" when none
is). Partitions of deleted topics are left out. Lags are sorted by lag, largest first,
then by topic and partition. The summary holds the largest lag (ties: the first in
that order) and the total.

Unknown group: 404 / 404. A group without committed offsets has no lags: 404 / 404, as
in Confluent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.deps import broker_of, consumers_of
from api.security.authorization import Need, requires, visible
from api.v3.common import ClusterLinks, Links, V3Response, cluster_links, errors, not_found, v3_json
from api.v3.models import KafkaConsumerGroupLagSummary, KafkaConsumerLag, KafkaConsumerLagList
from core.broker.consumer.manager import GroupDescription
from core.broker.errors import UnknownTopicOrPartitionError
from core.broker.group.group import MemberDescription
from core.broker.security.acl import Operation, ResourceType

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Consumer Group (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

_GROUP = "/consumer-groups/{consumer_group_id}"


@dataclass(frozen=True, slots=True)
class Lag:
    topic: str
    partition: int
    current_offset: int
    log_end_offset: int
    consumer_id: str
    instance_id: str | None
    client_id: str

    @property
    def lag(self) -> int:
        return max(0, self.log_end_offset - self.current_offset)


def compute_lags(
    desc: GroupDescription, committed: dict[tuple[str, int], int], ends: dict[tuple[str, int], int]
) -> list[Lag]:
    """Lags of the committed partitions with a known end, largest first. Pure."""
    owners: dict[tuple[str, int], MemberDescription] = {
        (t, p): m for m in desc.members for t, p in m.assignment
    }
    lags = []
    for (topic, partition), offset in committed.items():
        end = ends.get((topic, partition))
        if end is None:
            continue
        m = owners.get((topic, partition))
        lags.append(
            Lag(
                topic,
                partition,
                offset,
                end,
                m.member_id if m else "",
                m.group_instance_id if m else None,
                m.client_id if m else "",
            )
        )
    lags.sort(key=lambda x: (-x.lag, x.topic, x.partition))
    return lags


async def group_lags(request: Request, group: str) -> list[Lag]:
    """The group's lags; 404 / 404 for an unknown group or one without commits."""
    consumers = consumers_of(request)
    desc = await consumers.describe_group(group)
    committed = await consumers.group_offsets(group)
    shown = set(visible(request, Operation.DESCRIBE, ResourceType.TOPIC,
                        {tp[0] for tp in committed}))
    committed = {tp: o for tp, o in committed.items() if tp[0] in shown}
    if not committed:
        raise not_found("Consumer group offsets could not be found.")
    broker = broker_of(request)
    ends = {}
    for tp in committed:
        try:
            ends[(tp[0], tp[1])] = (await broker.partition_offsets(tp[0], tp[1])).high_watermark
        except UnknownTopicOrPartitionError:
            continue
    return compute_lags(desc, {(t, p): o for (t, p), o in committed.items()}, ends)


def lag_data(links: Links, group: str, lag: Lag) -> dict[str, Any]:
    parts = ("consumer-groups", group, "lags", lag.topic, "partitions", lag.partition)
    crn = [("consumer-group", group), ("lag", lag.topic), ("partition", lag.partition)]
    out = links.resource("KafkaConsumerLag", parts, crn)
    out.update(
        cluster_id=links.cluster_id,
        consumer_group_id=group,
        topic_name=lag.topic,
        partition_id=lag.partition,
        current_offset=lag.current_offset,
        log_end_offset=lag.log_end_offset,
        lag=lag.lag,
        consumer_id=lag.consumer_id,
        instance_id=lag.instance_id,
        client_id=lag.client_id,
    )
    return out


def summary_data(links: Links, group: str, lags: list[Lag]) -> dict[str, Any]:
    top = lags[0]
    parts = ("consumer-groups", group, "lag-summary")
    out = links.resource(
        "KafkaConsumerGroupLagSummary", parts, [("consumer-group", group), ("lag-summary", None)]
    )
    out.update(
        cluster_id=links.cluster_id,
        consumer_group_id=group,
        max_lag_consumer_id=top.consumer_id,
        max_lag_instance_id=top.instance_id,
        max_lag_client_id=top.client_id,
        max_lag_topic_name=top.topic,
        max_lag_partition_id=top.partition,
        max_lag=top.lag,
        total_lag=sum(x.lag for x in lags),
        max_lag_consumer=links.rel("consumer-groups", group, "consumers", top.consumer_id),
        max_lag_partition=links.rel("topics", top.topic, "partitions", top.partition),
    )
    return out


@router.get(
    _GROUP + "/lags",
    operation_id="listKafkaConsumerLags",
    summary="Lag of every partition the group committed, largest first",
    response_model=KafkaConsumerLagList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"), also="lists only partitions of topics the principal may DESCRIBE")
async def list_lags(consumer_group_id: str, links: ClusterLinks, request: Request) -> Response:
    lags = await group_lags(request, consumer_group_id)
    if not lags:
        raise not_found("Consumer lags not found.")
    data = [lag_data(links, consumer_group_id, x) for x in lags]
    parts = ("consumer-groups", consumer_group_id, "lags")
    return v3_json(links.collection("KafkaConsumerLagList", parts, data))


@router.get(
    _GROUP + "/lags/{topic_name}/partitions/{partition_id}",
    operation_id="getKafkaConsumerLag",
    summary="Lag of one partition",
    response_model=KafkaConsumerLag,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"), Need(Operation.DESCRIBE, ResourceType.TOPIC, "topic_name"))
async def get_lag(
    consumer_group_id: str,
    topic_name: str,
    partition_id: int,
    links: ClusterLinks,
    request: Request,
) -> Response:
    for lag in await group_lags(request, consumer_group_id):
        if lag.topic == topic_name and lag.partition == partition_id:
            return v3_json(lag_data(links, consumer_group_id, lag))
    raise not_found(
        f"Consumer group {consumer_group_id} has no lag for {topic_name}-{partition_id}."
    )


@router.get(
    _GROUP + "/lag-summary",
    operation_id="getKafkaConsumerGroupLagSummary",
    summary="The group's largest and total lag",
    response_model=KafkaConsumerGroupLagSummary,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.GROUP, "consumer_group_id"), also="summarises only partitions of topics the principal may DESCRIBE")
async def get_lag_summary(
    consumer_group_id: str, links: ClusterLinks, request: Request
) -> Response:
    lags = await group_lags(request, consumer_group_id)
    if not lags:
        raise not_found("Consumer lags not found.")
    return v3_json(summary_data(links, consumer_group_id, lags))
