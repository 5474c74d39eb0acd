"""Produce and InitProducerId: the client's record batches appended as they arrive.

A Produce request carries, per partition, record batches the client built (magic 2).
The leader checks every batch and record the way readers will decode them (CRC-32C,
framing, offsets), then appends them as they are: offsets and the leader epoch are
stamped in place, idempotent batches are checked against the partition's producer
state (a repeat of one of the last five is answered with its original offset). A
partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER: the client asks
Metadata again and goes to the leader (the Kafka door never forwards). From v10
(KIP-951) that answer carries the partition's CurrentLeader (id and epoch from this
broker's metadata) and the answer's NodeEndpoints the leader's endpoint on this
request's listener, so the client can go there without the Metadata round trip. v11
(KIP-890 part 2) only lets a broker answer TRANSACTION_ABORTABLE to a transactional
producer; franz refuses transactional batches at every version (INVALID_REQUEST).
"""

from __future__ import annotations

import asyncio
from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import ConnectionClosed, RequestContext
from api.kafka.handlers.cluster import LeaderHints
from core.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from core.broker.types import TopicPartition, is_internal_topic
from core.errors import FranzError
from core.storage.log_validator import validate_untrusted_records

_TRANSACTIONAL = 0x10  # batch attributes bit 4
_ATTRIBUTES_AT = 21
_MAX_TIMEOUT_MS = 300_000


def _partition_answer(index: int, code: int, message: str | None = None, *,
                      base_offset: int = -1, log_append_time: int = -1,
                      log_start_offset: int = -1) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": base_offset,
            "log_append_time_ms": log_append_time, "log_start_offset": log_start_offset,
            "record_errors": [], "error_message": message}


def _transactional(data: memoryview) -> bool:
    """Whether any batch in ``data`` is marked transactional (franz has no transactions)."""
    pos, n = 0, len(data)
    while pos + 61 <= n:
        if data[pos + _ATTRIBUTES_AT + 1] & _TRANSACTIONAL:
            return True
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if length <= 0:
            return False  # malformed: the validation names it
        pos += 12 + length
    return False


@api("Produce", 3, 11)
async def produce(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any] | None:
    acks = req["acks"]
    timeout_ms = max(0, min(int(req["timeout_ms"]), _MAX_TIMEOUT_MS))
    replicas = ctx.broker.replica_manager
    answers: list[tuple[str, list[dict[str, Any]]]] = []
    pending: list[tuple[str, dict[str, Any], asyncio.Future[Any]]] = []
    failed = False

    for topic in req["topic_data"]:
        name = topic["name"]
        out: list[dict[str, Any]] = []
        answers.append((name, out))
        refusal: tuple[int, str | None] | None = None
        if req["transactional_id"] is not None:
            refusal = (errors.INVALID_REQUEST, "franz does not support transactions yet")
        elif acks not in (0, 1, -1):
            refusal = (errors.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, not {acks}")
        elif is_internal_topic(name):
            refusal = (errors.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {name}")
        elif not ctx.allowed(Operation.WRITE, ResourceType.TOPIC, name):
            refusal = (errors.TOPIC_AUTHORIZATION_FAILED, None)
        for part in topic["partition_data"]:
            index, records = part["index"], part["records"]
            if refusal is None and (records is None or len(records) == 0):
                code: tuple[int, str | None] | None = (errors.CORRUPT_MESSAGE, "no records")
            elif refusal is None and _transactional(records):
                code = (errors.INVALID_REQUEST, "franz does not support transactions yet")
            else:
                code = refusal
            if code is not None:
                out.append(_partition_answer(index, *code))
                failed = True
                continue
            answer = _partition_answer(index, 0)
            out.append(answer)
            pending.append((name, answer, asyncio.ensure_future(_append(
                ctx, replicas, TopicPartition(name, index), records, acks, timeout_ms))))

    hints = LeaderHints(ctx) if ctx.version >= 10 else None
    for name, answer, fut in pending:
        try:
            info = await fut
        except FranzError as exc:
            answer["error_code"] = error_code = errors.code_of(exc)
            answer["error_message"] = errors.message_of(exc)
            if hints is not None and error_code == errors.NOT_LEADER_OR_FOLLOWER:
                answer["current_leader"] = hints.current_leader(name, answer["index"])
            failed = True
            continue
        except Exception as exc:  # noqa: BLE001 - one partition's bug is its own answer
            answer["error_code"] = errors.code_of(exc, where="produce")
            failed = True
            continue
        answer["base_offset"] = info.first_offset
        answer["log_append_time_ms"] = info.log_append_time
        answer["log_start_offset"] = info.log_start_offset
    if acks == 0:
        if failed:
            raise ConnectionClosed  # Kafka's way of telling an acks=0 producer
        return None
    response: dict[str, Any] = {"throttle_time_ms": 0, "responses": [
        {"name": name, "partition_responses": out} for name, out in answers]}
    if hints is not None:
        response["node_endpoints"] = hints.node_endpoints()
    return response


async def _append(ctx: RequestContext, replicas: Any, tp: TopicPartition, records: memoryview,
                  acks: int, timeout_ms: int) -> Any:
    broker = ctx.broker
    broker.cache.existing_partition(*tp)  # UNKNOWN_TOPIC_OR_PARTITION
    errors.led_here(replicas, tp)  # NOT_LEADER_OR_FOLLOWER, before any decoding
    data = validate_untrusted_records(records, where=f"{tp.topic}-{tp.partition}")
    info = await replicas.append(tp, data, acks=acks, timeout_ms=timeout_ms)
    if not info.duplicate:
        broker.topic_stats.record_append(tp.topic, records=info.num_records, size=len(data))
    return info


@api("InitProducerId", 0, 4)
async def init_producer_id(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    """An idempotent producer's id (epoch 0). A transactional id is refused: franz has
    no transaction coordinator yet."""
    if req["transactional_id"] is not None:
        return {"error_code": errors.INVALID_REQUEST, "producer_id": -1, "producer_epoch": -1}
    if not (ctx.allowed_quietly(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
            or _may_write_some_topic(ctx)):
        return {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1,
                "producer_epoch": -1}
    try:
        pid = await ctx.broker.producer_ids.next_id()
    except FranzError as exc:
        return {"error_code": errors.code_of(exc), "producer_id": -1, "producer_epoch": -1}
    return {"error_code": 0, "throttle_time_ms": 0, "producer_id": pid, "producer_epoch": 0}


def _may_write_some_topic(ctx: RequestContext) -> bool:
    """Kafka 2.8+ (KIP-679): WRITE on any topic implies IDEMPOTENT_WRITE."""
    if not ctx.broker.security.enabled:
        return True
    return any(ctx.allowed_quietly(Operation.WRITE, ResourceType.TOPIC, t)
               for t in ctx.broker.cache.topics)
