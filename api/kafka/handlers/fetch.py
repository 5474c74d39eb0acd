"""Fetch: record batches as stored, long-polled.

Each partition is read from its leader replica here (whole batches below the high
watermark, the first possibly starting below the offset asked: clients skip what they
did not ask for). Bounds as Kafka's: ``partition_max_bytes`` per partition and
``max_bytes`` in all, except that the first batch of the first partition with data is
returned whole even when larger (KIP-74), so a client always makes progress. When the
answer holds fewer than ``min_bytes``, the request waits up to ``max_wait_ms`` on the
partitions' wake-ups, the same ones REST long-polls use, then reads again.

Fetch sessions (KIP-227) are answered with session id 0 ("no session"): clients then
send full fetches, which Kafka allows.
"""

from __future__ import annotations

import asyncio
from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import ConnectionClosed, RequestContext
from core.broker.replica.delayed import wait_on
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition
from core.errors import FranzError

MAX_WAIT_MS = 30_000  # a client's max_wait_ms beyond this is cut (request.timeout.ms)
FETCH_SESSION_ID_NOT_FOUND = 70
FETCH_MAX_BYTES = 57_671_680  # Kafka's fetch.max.bytes default: a ceiling on max_bytes


@api("Fetch", 4, 12)
async def fetch(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if req["replica_id"] >= 0:
        raise ConnectionClosed  # franz brokers replicate over HTTP, not this protocol
    if req["session_id"] != 0:
        return {"throttle_time_ms": 0, "error_code": FETCH_SESSION_ID_NOT_FOUND,
                "session_id": 0, "responses": []}
    wanted = []
    denied: set[str] = set()
    for topic in req["topics"]:
        name = topic["topic"]
        if name not in denied and not ctx.allowed(Operation.READ, ResourceType.TOPIC, name):
            denied.add(name)
        for part in topic["partitions"]:
            wanted.append((name, part))
    max_bytes = max(0, min(int(req["max_bytes"]), FETCH_MAX_BYTES))
    max_wait_ms = max(0, min(int(req["max_wait_ms"]), MAX_WAIT_MS))
    min_bytes = max(0, int(req["min_bytes"]))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    while True:
        answers, total, waiters = _read(ctx, wanted, denied, max_bytes)
        remaining = deadline - loop.time()
        if total >= min_bytes or total > 0 and min_bytes <= 1 or remaining <= 0 or not waiters:
            break
        await wait_on(waiters, remaining)
        if loop.time() >= deadline:
            answers, total, waiters = _read(ctx, wanted, denied, max_bytes)
            break
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for name, answer in answers:
        by_topic.setdefault(name, []).append(answer)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


def _error(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": None}


def _read(ctx: RequestContext, wanted: list[tuple[str, dict[str, Any]]], denied: set[str],
          max_bytes: int) -> tuple[list[tuple[str, dict[str, Any]]], int, list[Any]]:
    """One pass over the partitions: (answers, bytes in them, wake-ups to wait on)."""
    broker = ctx.broker
    replicas = broker.replica_manager
    answers: list[tuple[str, dict[str, Any]]] = []
    waiters = []
    total = 0
    for name, part in wanted:
        index = part["partition"]
        if name in denied:
            answers.append((name, _error(index, errors.TOPIC_AUTHORIZATION_FAILED)))
            continue
        tp = TopicPartition(name, index)
        try:
            broker.cache.existing_partition(name, index)
            p = replicas.leader_partition(tp)
            epoch = part["current_leader_epoch"]
            if epoch >= 0:
                code = p.check_fetch_epoch(epoch)
                if code:
                    answers.append((name, _error(index, code)))
                    continue
            limit = min(int(part["partition_max_bytes"]), max_bytes - total)
            offset = int(part["fetch_offset"])
            # past max_bytes the other partitions answer no records (KIP-74: the first
            # partition with data answers at least one batch)
            data = p.read(offset, max(limit, 1)) if limit > 0 or total == 0 else None
            offs = p.offsets()
        except FranzError as exc:
            answers.append((name, _error(index, errors.code_of(exc))))
            continue
        records = b"" if data is None else data.data
        total += len(records)
        if records:
            broker.topic_stats.record_fetch(name, data, offset=offset,
                                            high_watermark=offs.high_watermark)
        else:
            waiters.append(p.data_waiters)
        answers.append((name, {
            "partition_index": index, "error_code": 0,
            "high_watermark": offs.high_watermark, "last_stable_offset": offs.high_watermark,
            "log_start_offset": offs.log_start_offset, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": records,
        }))
    return answers, total, waiters
