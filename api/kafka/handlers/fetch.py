"""Fetch: record batches as stored, long-polled.

Each partition is read from its leader replica here (whole batches below the high
watermark, the first possibly starting below the offset asked: clients skip what they
did not ask for). Bounds as Kafka's: ``partition_max_bytes`` per partition and
``max_bytes`` in all, except that the first batch of the first partition with data is
returned whole even when larger (KIP-74), so a client always makes progress. When the
answer holds fewer than ``min_bytes``, the request waits up to ``max_wait_ms`` on the
partitions' wake-ups, the same ones REST long-polls use, then reads again.

On a plaintext connection a partition's batches travel as a file region
(``core.storage.file_region``) that the server sends with sendfile(2); data loaded at
start whose CRCs were not checked yet, and TLS connections, take the copying read.

Fetch sessions (KIP-227, ``fetch_sessions``): a client's first full fetch at epoch 0
makes a session; later fetches name only what changed and are answered only what
changed (records, errors, new offsets).
"""

from __future__ import annotations

import asyncio
from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import ConnectionClosed, RequestContext
from api.kafka.fetch_sessions import (
    FETCH_SESSION_ID_NOT_FOUND,
    INITIAL_EPOCH,
    FetchSessionCache,
    SessionError,
    SessionPartition,
    apply_incremental,
    partitions_of,
)
from core.broker.replica.delayed import wait_on
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition
from core.errors import FranzError

MAX_WAIT_MS = 30_000  # a client's max_wait_ms beyond this is cut (request.timeout.ms)
FETCH_MAX_BYTES = 57_671_680  # Kafka's fetch.max.bytes default: a ceiling on max_bytes


@api("Fetch", 4, 12)
async def fetch(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if req["replica_id"] >= 0:
        raise ConnectionClosed  # franz brokers replicate over HTTP, not this protocol
    sessions: FetchSessionCache | None = ctx.fetch_sessions
    owner = str(ctx.session.principal)
    session_id, epoch = int(req["session_id"]), int(req["session_epoch"])
    session = None
    try:
        if session_id and epoch > 0:
            if sessions is None:
                raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
            session = sessions.get(session_id, owner, epoch)
            apply_incremental(session, req)
        else:
            if session_id and sessions is not None:
                sessions.close(session_id, owner)
            partitions = partitions_of(req)
            if epoch == INITIAL_EPOCH and sessions is not None and ctx.version >= 7:
                session = sessions.create(owner, partitions)
            wanted = partitions
    except SessionError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "session_id": 0, "responses": []}
    incremental = session is not None and epoch > 0
    if session is not None:
        wanted = session.partitions
    denied = {t for t, _ in wanted if not ctx.allowed_quietly(Operation.READ, ResourceType.TOPIC, t)}
    for t in denied:
        ctx.allowed(Operation.READ, ResourceType.TOPIC, t)  # audit each denial once
    max_bytes = max(0, min(int(req["max_bytes"]), FETCH_MAX_BYTES))
    max_wait_ms = max(0, min(int(req["max_wait_ms"]), MAX_WAIT_MS))
    min_bytes = max(0, int(req["min_bytes"]))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    while True:
        answers, total, waiters = _read(ctx, wanted, denied, max_bytes)
        remaining = deadline - loop.time()
        if total >= min_bytes or remaining <= 0 or not waiters:
            break
        await wait_on(waiters, remaining)  # woken by an append, or the deadline: read again
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (name, index), answer in answers:
        if session is not None:
            sp = session.partitions.get((name, index))
            sent = (answer["high_watermark"], answer["last_stable_offset"],
                    answer["log_start_offset"])
            if incremental and not answer["records"] and not answer["error_code"] \
                    and sp is not None and sp.last_sent == sent:
                continue  # nothing new: an incremental answer leaves it out
            if sp is not None:
                sp.last_sent = sent
        by_topic.setdefault(name, []).append(answer)
    if session is not None:
        session.epoch = 1 if epoch <= 0 else epoch + 1
    return {"throttle_time_ms": 0, "error_code": 0,
            "session_id": 0 if session is None else session.session_id,
            "responses": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


def _error(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}  # as Kafka: empty, never null
                                                            # (librdkafka refuses -1)


def _read(ctx: RequestContext, wanted: dict[tuple[str, int], SessionPartition], denied: set[str],
          max_bytes: int) -> tuple[list[tuple[tuple[str, int], dict[str, Any]]], int, list[Any]]:
    """One pass over the partitions: (answers, bytes in them, wake-ups to wait on)."""
    broker = ctx.broker
    replicas = broker.replica_manager
    zero_copy = ctx.session.zero_copy
    answers: list[tuple[tuple[str, int], dict[str, Any]]] = []
    waiters = []
    total = 0
    for key, part in wanted.items():
        name, index = key
        if name in denied:
            answers.append((key, _error(index, errors.TOPIC_AUTHORIZATION_FAILED)))
            continue
        tp = TopicPartition(name, index)
        try:
            broker.cache.existing_partition(name, index)
            p = errors.led_here(replicas, tp)
            epoch = part.current_leader_epoch
            if epoch >= 0:
                code = p.check_fetch_epoch(epoch)
                if code:
                    answers.append((key, _error(index, code)))
                    continue
            limit = min(part.partition_max_bytes, max_bytes - total)
            offset = part.fetch_offset
            # past max_bytes the other partitions answer no records (KIP-74: the first
            # partition with data answers at least one batch)
            records: Any = b""
            high_offset = offset
            if limit > 0 or total == 0:
                region = p.read_region(offset, max(limit, 1)) if zero_copy else None
                if region is not None:
                    records, high_offset = region, region.high_offset
                else:
                    data = p.read(offset, max(limit, 1))
                    records, high_offset = data.data, data.high_offset
            offs = p.offsets()
        except FranzError as exc:
            answers.append((key, _error(index, errors.code_of(exc))))
            continue
        total += len(records)
        if records:
            broker.topic_stats.record_read(name, len(records), high_offset, offset=offset,
                                           high_watermark=offs.high_watermark)
        else:
            waiters.append(p.data_waiters)
        answers.append((key, {
            "partition_index": index, "error_code": 0,
            "high_watermark": offs.high_watermark, "last_stable_offset": offs.high_watermark,
            "log_start_offset": offs.log_start_offset, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": records,
        }))
    return answers, total, waiters
