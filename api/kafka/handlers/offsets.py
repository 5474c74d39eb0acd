"""ListOffsets and OffsetForLeaderEpoch: where a partition starts, ends, and where an
epoch ended (clients truncate to it after a leader change, KIP-320)."""

from __future__ import annotations

from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition
from core.errors import FranzError


@api("ListOffsets", 1, 6)
async def list_offsets(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    replicas = broker.replica_manager
    topics = []
    for topic in req["topics"]:
        name = topic["name"]
        allowed = ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)
        out = []
        for part in topic["partitions"]:
            index = part["partition_index"]
            answer = {"partition_index": index, "error_code": 0, "timestamp": -1, "offset": -1,
                      "leader_epoch": -1}
            out.append(answer)
            if not allowed:
                answer["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                tp = broker.cache.existing_partition(name, index)
                p = errors.led_here(replicas, tp)
                epoch = part["current_leader_epoch"]
                if epoch >= 0 and (code := p.check_fetch_epoch(epoch)):
                    answer["error_code"] = code
                    continue
                # a new leader behind its epoch's start answers OFFSET_NOT_AVAILABLE at
                # once, as Kafka does: the client retries, the connection is not held
                found = await replicas.offset_and_timestamp(tp, int(part["timestamp"]), wait_s=0)
                answer["leader_epoch"] = replicas.leader_partition(tp).leader_epoch
            except FranzError as exc:
                answer["error_code"] = errors.code_of(exc)
                continue
            if found is not None:
                answer["offset"], answer["timestamp"] = found
        topics.append({"name": name, "partitions": out})
    return {"throttle_time_ms": 0, "topics": topics}


@api("OffsetForLeaderEpoch", 0, 4)
async def offset_for_leader_epoch(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    replicas = broker.replica_manager
    topics = []
    for topic in req["topics"]:
        name = topic["topic"]
        allowed = ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)
        out = []
        for part in topic["partitions"]:
            index = part["partition"]
            answer = {"error_code": 0, "partition": index, "leader_epoch": -1, "end_offset": -1}
            out.append(answer)
            if not allowed:
                answer["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                broker.cache.existing_partition(name, index)
                p = errors.led_here(replicas, TopicPartition(name, index))
                current = part["current_leader_epoch"]
                if current >= 0 and (code := p.check_fetch_epoch(current)):
                    answer["error_code"] = code
                    continue
                p.check_online()
                epoch, end = p.log.leader_epoch_cache.end_offset_for(
                    int(part["leader_epoch"]), p.log.log_end_offset)
            except FranzError as exc:
                answer["error_code"] = errors.code_of(exc)
                continue
            answer["leader_epoch"], answer["end_offset"] = epoch, end
        topics.append({"topic": name, "partitions": out})
    return {"throttle_time_ms": 0, "topics": topics}
