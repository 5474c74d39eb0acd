"""DeleteRecords: what ``kafka-delete-records.sh`` and ``AdminClient.deleteRecords`` send.

Per partition, on its leader: the log start moves up to the given offset (-1: the high
watermark), the segments wholly below it are deleted at once, and the new log start is
written to ``log-start-offset-checkpoint`` before the answer, so neither a restart nor a
crash brings the records back. The answer waits, up to the request's ``timeout_ms``,
until every follower on a live broker has its log start there too
(``ReplicaManager.delete_records``); ``low_watermark`` is the lowest of those log starts.

Errors per partition, as Kafka answers them: TOPIC_AUTHORIZATION_FAILED (DELETE on the
topic), UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION for an internal topic,
NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE above the high watermark, POLICY_VIOLATION
when the topic's cleanup.policy has no ``delete``, REQUEST_TIMED_OUT when the followers
did not follow in time (the records are deleted on the leader all the same).
"""

from __future__ import annotations

import asyncio
from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from core.broker.errors import DeleteRecordsTimedOutError
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition, is_internal_topic
from core.errors import FranzError

INVALID_LOW_WATERMARK = -1


@api("DeleteRecords", 0, 2)
async def delete_records(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    replicas = broker.replica_manager
    timeout_ms = int(req["timeout_ms"])
    deletions = []
    topics = []
    for topic in req["topics"]:
        name = topic["name"]
        allowed = ctx.allowed(Operation.DELETE, ResourceType.TOPIC, name)
        out = []
        for part in topic["partitions"]:
            answer = {"partition_index": part["partition_index"],
                      "low_watermark": INVALID_LOW_WATERMARK, "error_code": 0}
            out.append(answer)
            if not allowed:
                answer["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                tp = broker.cache.existing_partition(name, part["partition_index"])
                if is_internal_topic(name):
                    answer["error_code"] = errors.INVALID_TOPIC_EXCEPTION
                    continue
                errors.led_here(replicas, tp)
            except FranzError as exc:
                answer["error_code"] = errors.code_of(exc)
                continue
            deletions.append(_delete(ctx, answer, tp, int(part["offset"]), timeout_ms))
        topics.append({"name": name, "partitions": out})
    await asyncio.gather(*deletions)
    return {"throttle_time_ms": 0, "topics": topics}


async def _delete(ctx: RequestContext, answer: dict[str, Any], tp: TopicPartition,
                  offset: int, timeout_ms: int) -> None:
    try:
        answer["low_watermark"] = await ctx.broker.replica_manager.delete_records(
            tp, offset, timeout_ms=timeout_ms)
    except DeleteRecordsTimedOutError as exc:
        answer["error_code"], answer["low_watermark"] = exc.error_code, exc.low_watermark
    except FranzError as exc:
        answer["error_code"] = errors.code_of(exc)
