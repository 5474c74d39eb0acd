"""Confluent REST Proxy v3 routers, under ``/v3`` (rest-api-reference §3; docs/api-v3.md).

    clusters         /v3/clusters, the cluster, brokers, a broker's replicas
    acls             ACLs: search, create, batch create, delete (Kafka's ACL model)
    users            franz: users and API keys (HTTP Basic credentials)
    topics           list, describe, create, PATCH partitions_count, delete
    partitions       partitions, offsets, replicas
    reassignments    ongoing reassignments; franz: start one, preferred leader election
    configs          topic configs (read, set, reset, alter; applied live), broker configs
    consumer_groups  groups, consumers, assignments
    lags             per-partition lags and the group lag summary
    group_admin      franz: a group's offsets (describe), offset reset, group delete
    produce          POST .../records: one record, several, or a stream
    produce_batch    POST .../records:batch: up to 10 (at most 50) records, answered 207
    records          franz: GET .../partitions/{p}/records, a long-poll range read

Every answer is ``application/json``; resources carry ``kind``, ``metadata.self`` (an
absolute URL), ``metadata.resource_name`` (a CRN) and ``{"related": url}`` links
(``api.v3.common``). Shapes: ``api.v3.models``. Errors: ``api.errors`` (v3 rows).
"""

from __future__ import annotations

from fastapi import APIRouter

from api.v3 import (
    acls,
    clusters,
    configs,
    consumer_groups,
    lags,
    partitions,
    produce,
    produce_batch,
    reassignments,
    records,
    topics,
    users,
)
from api.v3.group_admin import router as group_admin_router  # franz: offsets, reset, delete
from api.v3.models import OPENAPI_SCHEMAS as _MODEL_SCHEMAS

router = APIRouter()
router.include_router(clusters.root_router)
# Order matters where paths overlap: "/topics/-/..." routes precede "/topics/{topic_name}/...".
router.include_router(reassignments.router)  # before partitions: replaces its empty lists
for _module in (clusters, acls, users, configs, topics, partitions, consumer_groups, lags,
                produce, produce_batch, records):
    router.include_router(_module.router)
router.include_router(group_admin_router)

#: Request shapes for ``components/schemas`` (responses come in as ``response_model``).
OPENAPI_SCHEMAS = {**_MODEL_SCHEMAS, **acls.OPENAPI_SCHEMAS, **users.OPENAPI_SCHEMAS}

__all__ = ["OPENAPI_SCHEMAS", "router"]
