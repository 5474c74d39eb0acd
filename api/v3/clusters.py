"""v3 clusters, brokers and a broker's partition replicas.

There is exactly one cluster: the broker's own (``cluster_id`` from the metadata
store). Any other cluster id in a path is 404 / 404 "Cluster X cannot be found.".
ACLs: ``api.v3.acls``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.deps import broker_of
from api.security.authorization import authenticated_only, requires, visible
from api.v3.common import ClusterLinks, Links, V3Response, cluster_links, errors, not_found, v3_json
from api.v3.models import (
    KafkaBroker,
    KafkaBrokerList,
    KafkaCluster,
    KafkaClusterList,
    KafkaReplicaList,
)
from api.v3.partitions import replica_data
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import BrokerInfo

root_router = APIRouter(prefix="/v3", tags=["Cluster (v3)"], default_response_class=V3Response)
router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)



def cluster_data(links: Links, controller: int | None) -> dict[str, Any]:
    out = links.resource("KafkaCluster", (), [])
    out.update(
        cluster_id=links.cluster_id,
        controller=links.rel("brokers", controller) if controller is not None else None,
        acls=links.rel("acls"),
        brokers=links.rel("brokers"),
        broker_configs=links.rel("broker-configs"),
        consumer_groups=links.rel("consumer-groups"),
        topics=links.rel("topics"),
        partition_reassignments=links.rel("topics", "-", "partitions", "-", "reassignment"),
    )
    return out


def broker_data(links: Links, b: BrokerInfo) -> dict[str, Any]:
    out = links.resource("KafkaBroker", ("brokers", b.broker_id), [("broker", b.broker_id)])
    out.update(
        cluster_id=links.cluster_id,
        broker_id=b.broker_id,
        host=b.host or None,
        port=b.port,
        rack=b.rack,
        configs=links.rel("brokers", b.broker_id, "configs"),
        partition_replicas=links.rel("brokers", b.broker_id, "partition-replicas"),
    )
    return out


async def find_broker(request: Request, broker_id: int) -> BrokerInfo:
    for b in await broker_of(request).list_brokers():
        if b.broker_id == broker_id:
            return b
    raise not_found(f"Broker {broker_id} cannot be found.")


@root_router.get("/clusters", operation_id="listKafkaClusters", summary="List clusters (the one)",
                 response_model=KafkaClusterList)
@authenticated_only("the cluster id, which Kafka's metadata gives every client")
async def list_clusters(request: Request) -> Response:
    broker = broker_of(request)
    links = Links.of(request, broker.cluster_id)
    data = [cluster_data(links, await broker.controller_id())]
    return v3_json(
        {
            "kind": "KafkaClusterList",
            "metadata": {"self": links.root + "/clusters", "next": None},
            "data": data,
        }
    )


@router.get("", operation_id="getKafkaCluster", tags=["Cluster (v3)"],
            summary="Describe the cluster", response_model=KafkaCluster, responses=errors(404))
@authenticated_only("the cluster id, which Kafka's metadata gives every client")
async def get_cluster(links: ClusterLinks, request: Request) -> Response:
    return v3_json(cluster_data(links, await broker_of(request).controller_id()))


@router.get(
    "/brokers", operation_id="listKafkaBrokers", tags=["Broker (v3)"],
    summary="List live brokers", response_model=KafkaBrokerList, responses=errors(404)
)
@authenticated_only("the broker list, which Kafka's metadata gives every client")
async def list_brokers(links: ClusterLinks, request: Request) -> Response:
    data = [broker_data(links, b) for b in await broker_of(request).list_brokers()]
    return v3_json(links.collection("KafkaBrokerList", ("brokers",), data))


@router.get(
    "/brokers/{broker_id}",
    operation_id="getKafkaBroker",
    tags=["Broker (v3)"],
    summary="Describe a broker",
    response_model=KafkaBroker,
    responses=errors(404),
)
@authenticated_only("the broker list, which Kafka's metadata gives every client")
async def get_broker(broker_id: int, links: ClusterLinks, request: Request) -> Response:
    return v3_json(broker_data(links, await find_broker(request, broker_id)))


@router.get(
    "/brokers/{broker_id}/partition-replicas",
    operation_id="searchKafkaReplicasByBroker",
    tags=["Replica (v3)"],
    summary="Replicas a broker holds, over all topics",
    response_model=KafkaReplicaList,
    responses=errors(404),
)
@requires(also="lists only replicas of topics the principal may DESCRIBE")
async def list_broker_replicas(broker_id: int, links: ClusterLinks, request: Request) -> Response:
    await find_broker(request, broker_id)
    broker = broker_of(request)
    data = []
    for name in visible(request, Operation.DESCRIBE, ResourceType.TOPIC, await broker.list_topics()):
        info = await broker.describe_topic(name)
        data += [
            replica_data(links, name, p, broker_id)
            for p in info.partitions
            if broker_id in p.replicas
        ]
    parts = ("brokers", broker_id, "partition-replicas")
    return v3_json(links.collection("KafkaReplicaList", parts, data))
