"""Consumer groups over Kafka's protocol: finding the coordinator (this module), and the
classic group protocol, commits and group administration on the coordinator.

FindCoordinator answers the leader of the group's ``__consumer_offsets`` partition
(``hash(group) % partitions``), the broker whose group coordinator serves it. Group
calls reaching a broker that does not coordinate the group answer NOT_COORDINATOR and
the client looks again: the Kafka door never forwards them.
"""

from __future__ import annotations

from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from api.kafka.handlers.cluster import brokers_of
from core.broker.group.hashing import coordinator_partition
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import OFFSETS_TOPIC

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    none = {"key": key, "node_id": -1, "host": "", "port": -1}
    if key_type == TRANSACTION_KEY:
        return {**none, "error_code": errors.INVALID_REQUEST,
                "error_message": "franz does not support transactions yet"}
    if key_type != GROUP_KEY:
        return {**none, "error_code": errors.INVALID_REQUEST,
                "error_message": f"unknown coordinator key type {key_type}"}
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, key):
        return {**none, "error_code": errors.GROUP_AUTHORIZATION_FAILED, "error_message": None}
    meta = ctx.broker.cache.topic(OFFSETS_TOPIC)
    if meta is None:
        return {**none, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "error_message": None}
    leader = ctx.broker.cache.leader_of(OFFSETS_TOPIC, coordinator_partition(key, meta.num_partitions))
    for b in brokers_of(ctx):
        if b["node_id"] == leader:
            return {"key": key, "node_id": leader, "host": b["host"], "port": b["port"],
                    "error_code": 0, "error_message": None}
    return {**none, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "error_message": None}


@api("FindCoordinator", 0, 4)
async def find_coordinator(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if ctx.version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            _coordinator(ctx, k, req["key_type"]) for k in req["coordinator_keys"]]}
    found = _coordinator(ctx, req["key"], req["key_type"])
    return {"throttle_time_ms": 0, **found}
