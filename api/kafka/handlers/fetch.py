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

Versions, as Kafka 3.9 answers them:

    v13  topics by id (KIP-516), resolved through the metadata cache, the same ids
         Metadata answers: an id no topic has is UNKNOWN_TOPIC_ID (100) per partition; a
         session's partition whose topic was recreated under its name with a new id is
         INCONSISTENT_TOPIC_ID (103), never the new topic's records
    v14  OFFSET_MOVED_TO_TIERED_STORAGE may be answered: franz has no tiered storage
    v15  the replica id moves into the tagged ReplicaState (brokers only; a consumer
         sends none, read as -1)
    v16  NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH answers carry the partition's
         CurrentLeader (id and epoch from this broker's metadata) and the answer's
         NodeEndpoints that leader's endpoint on this request's listener (KIP-951), so the
         client goes there without a Metadata round trip
    v17  a follower's tagged ReplicaDirectoryId (KIP-853): nothing for consumers
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
    ZERO_UUID,
    FetchSessionCache,
    Resolve,
    SessionError,
    SessionPartition,
    apply_incremental,
    partitions_of,
)
from api.kafka.handlers.cluster import LeaderHints, topic_id_bytes, topic_id_text
from core.broker.replica.delayed import wait_on
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition
from core.errors import FranzError

MAX_WAIT_MS = 30_000  # a client's max_wait_ms beyond this is cut (request.timeout.ms)
FETCH_MAX_BYTES = 57_671_680  # Kafka's fetch.max.bytes default: a ceiling on max_bytes


@api("Fetch", 4, 17)
async def fetch(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    # v15+ carries the replica id in the tagged ReplicaState (absent: -1, a consumer)
    if req["replica_id"] >= 0 or req["replica_state"]["replica_id"] >= 0:
        raise ConnectionClosed  # franz brokers replicate over HTTP, not this protocol
    by_id = ctx.version >= 13
    resolve = _resolver(ctx) if by_id else None
    sessions: FetchSessionCache | None = ctx.fetch_sessions
    owner = str(ctx.session.principal)
    session_id, epoch = int(req["session_id"]), int(req["session_epoch"])
    session = None
    try:
        if session_id and epoch > 0:
            if sessions is None:
                raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
            session = sessions.get(session_id, owner, epoch, uses_topic_ids=by_id)
            apply_incremental(session, req, resolve)
        else:
            if session_id and sessions is not None:
                sessions.close(session_id, owner)
            partitions = partitions_of(req, resolve)
            if epoch == INITIAL_EPOCH and sessions is not None and ctx.version >= 7:
                session = sessions.create(owner, partitions, uses_topic_ids=by_id)
            wanted = partitions
    except SessionError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "session_id": 0, "responses": []}
    incremental = session is not None and epoch > 0
    if session is not None:
        wanted = session.partitions
    names = {sp.name for sp in wanted.values() if sp.name is not None}
    denied = {t for t in names if not ctx.allowed_quietly(Operation.READ, ResourceType.TOPIC, t)}
    for t in denied:
        ctx.allowed(Operation.READ, ResourceType.TOPIC, t)  # audit each denial once
    max_bytes = max(0, min(int(req["max_bytes"]), FETCH_MAX_BYTES))
    max_wait_ms = max(0, min(int(req["max_wait_ms"]), MAX_WAIT_MS))
    min_bytes = max(0, int(req["min_bytes"]))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    while True:
        answers, total, waiters = _read(ctx, wanted, denied, max_bytes, by_id)
        remaining = deadline - loop.time()
        if total >= min_bytes or remaining <= 0 or not waiters:
            break
        await wait_on(waiters, remaining)  # woken by an append, or the deadline: read again
    hints = LeaderHints(ctx) if ctx.version >= 16 else None
    by_topic: dict[Any, list[dict[str, Any]]] = {}
    for key, answer in answers:
        if hints is not None and answer["error_code"] in _LEADER_HINTED:
            asked = wanted.get(key)  # a session's, which another connection may change
            if asked is not None and asked.name is not None:
                answer["current_leader"] = hints.current_leader(asked.name, key[1])
        if session is not None:
            sp = session.partitions.get(key)
            sent = (answer["high_watermark"], answer["last_stable_offset"],
                    answer["log_start_offset"])
            if incremental and not answer["records"] and not answer["error_code"] \
                    and sp is not None and sp.last_sent == sent:
                continue  # nothing new: an incremental answer leaves it out
            if sp is not None:
                sp.last_sent = sent
        by_topic.setdefault(key[0], []).append(answer)
    if session is not None:
        session.epoch = 1 if epoch <= 0 else epoch + 1
    out: dict[str, Any] = {
        "throttle_time_ms": 0, "error_code": 0,
        "session_id": 0 if session is None else session.session_id,
        "responses": [{"topic_id": t, "partitions": ps} if by_id else {"topic": t, "partitions": ps}
                      for t, ps in by_topic.items()]}
    if hints is not None:
        out["node_endpoints"] = hints.node_endpoints()
    return out


_LEADER_HINTED = (errors.NOT_LEADER_OR_FOLLOWER, errors.FENCED_LEADER_EPOCH)  # KIP-951


def _resolver(ctx: RequestContext) -> Resolve:
    """Topic id (16 bytes) -> the name of the topic that has it now, None for none."""
    cache = ctx.broker.cache

    def resolve(topic_id: bytes) -> str | None:
        return None if topic_id == ZERO_UUID else cache.topic_name_of(topic_id_text(topic_id))
    return resolve


def _error(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b""}  # as Kafka: empty, never null
                                                            # (librdkafka refuses -1)


def _read(ctx: RequestContext, wanted: dict[tuple[Any, int], SessionPartition], denied: set[str],
          max_bytes: int, by_id: bool
          ) -> tuple[list[tuple[tuple[Any, int], dict[str, Any]]], int, list[Any]]:
    """One pass over the partitions: (answers, bytes in them, wake-ups to wait on)."""
    broker = ctx.broker
    replicas = broker.replica_manager
    zero_copy = ctx.session.zero_copy
    answers: list[tuple[tuple[Any, int], dict[str, Any]]] = []
    waiters = []
    total = 0
    ids: dict[str, bytes] = {}  # v13+: each topic's id now, by name
    for key, part in wanted.items():
        index = key[1]
        name = part.name
        if name is None:  # v13+: an id no topic has
            answers.append((key, _error(index, errors.UNKNOWN_TOPIC_ID)))
            continue
        if name in denied:
            answers.append((key, _error(index, errors.TOPIC_AUTHORIZATION_FAILED)))
            continue
        tp = TopicPartition(name, index)
        try:
            broker.cache.existing_partition(name, index)
            if by_id:
                current = ids.get(name)
                if current is None:
                    current = ids[name] = topic_id_bytes(
                        broker.cache.topics[name].assignment.topic_id)
                if current != part.topic_id:  # the name was recreated: another topic
                    answers.append((key, _error(index, errors.INCONSISTENT_TOPIC_ID)))
                    continue
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
