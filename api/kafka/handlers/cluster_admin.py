"""Partition and replica administration over Kafka's protocol: ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments, DescribeLogDirs,
DescribeProducers, on the controller and replicas the REST API uses.

- ElectLeaders PREFERRED writes the same request as ``POST .../preferred-replica-election``
  (any broker: the request goes to the metadata store, the controller carries it out)
  and waits, up to the request's timeout, until this broker's metadata shows the
  preferred leaders. UNCLEAN runs on the active controller (NOT_CONTROLLER elsewhere, as
  a ZooKeeper-mode Kafka answers; clients send it to the controller Metadata names).
- AlterPartitionReassignments runs on the active controller (top-level NOT_CONTROLLER
  elsewhere, as Kafka): targets and cancellations are merged into the running
  reassignment (``Reassigner.alter_reassignments``). ListPartitionReassignments is
  answered by any broker, as ``GET .../reassignment``.
- DescribeLogDirs and DescribeProducers describe this broker's own replicas.

Kafka's answers and error codes throughout (``KafkaApis``, ``KafkaController``,
``ReplicaManager`` of Kafka 3.9). A request names at most ``MAX_TOPICS_PER_REQUEST``
topics and ``MAX_PARTITIONS_PER_REQUEST`` partitions that are looked at; the rest is
left unanswered.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from api.kafka.handlers.admin import MAX_TOPICS_PER_REQUEST
from api.kafka.handlers.cluster import valid_topic_name
from core.broker.controller.reassignment import (
    PREFERRED_REPLICA_ELECTION,
    ReassignmentInProgressError,
)
from core.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from core.broker.types import TopicPartition
from core.errors import FranzError
from core.storage.blocking import run_blocking

MAX_PARTITIONS_PER_REQUEST = 100_000
MAX_TIMEOUT_MS = 300_000  # a client's timeout_ms beyond it waits this long

NOT_CONTROLLER = 41
KAFKA_STORAGE_ERROR = 56
INVALID_REPLICA_ASSIGNMENT = 39
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84
PREFERRED, UNCLEAN = 0, 1

TP = tuple[str, int]
Outcome = tuple[int, str | None]  # error code, message
NO_PARTITION: Outcome = (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
WAIT_STEP_S = 0.05
#: after the controller finished a preferred election, how long this broker's metadata
#: may take to show its leaders before the ones it does not show count as not elected
SETTLE_S = 2.0


def _requested(topics: Iterable[dict[str, Any]], name: str, partitions: str) -> list[TP]:
    """(topic, partition) pairs of a request, in order, each once, bounded."""
    out: dict[TP, None] = {}
    for i, t in enumerate(topics):
        if i >= MAX_TOPICS_PER_REQUEST:
            break
        for p in t[partitions]:
            if len(out) >= MAX_PARTITIONS_PER_REQUEST:
                return list(out)
            out[(t[name], p)] = None
    return list(out)


def _by_topic(tps: Iterable[TP]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for t, p in tps:
        grouped.setdefault(t, []).append(p)
    return grouped


def _timeout_s(timeout_ms: int) -> float:
    return min(max(timeout_ms, 0), MAX_TIMEOUT_MS) / 1000


# --- ElectLeaders -------------------------------------------------------------------


@api("ElectLeaders", 0, 2)
async def elect_leaders(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    asked = req["topic_partitions"]
    requested = None if asked is None else _requested(asked, "topic", "partitions")

    def answer(top: int, results: dict[TP, Outcome]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": top, "replica_election_results": [
            {"topic": t, "partition_result": [
                {"partition_id": p, "error_code": results[(t, p)][0],
                 "error_message": results[(t, p)][1]} for p in ps]}
            for t, ps in _by_topic(results).items()]}

    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        denied = (errors.CLUSTER_AUTHORIZATION_FAILED, None)
        return answer(errors.CLUSTER_AUTHORIZATION_FAILED,
                      dict.fromkeys(requested or [], denied))
    kind = req["election_type"]
    parts = requested if requested is not None else _all_partitions(ctx)
    if kind not in (PREFERRED, UNCLEAN):
        bad = (errors.INVALID_REQUEST, f"Unknown election type {kind}: 0 is PREFERRED, "
                                       "1 is UNCLEAN")
        return answer(errors.INVALID_REQUEST, dict.fromkeys(parts, bad))
    deadline = asyncio.get_running_loop().time() + _timeout_s(req["timeout_ms"])
    if kind == PREFERRED:
        results = await _elect_preferred(ctx, parts, deadline)
    else:
        results = await _elect_unclean(ctx, parts, deadline)
    if requested is None:  # every partition: those that needed nothing are left out
        results = {tp: r for tp, r in results.items() if r[0] != ELECTION_NOT_NEEDED}
    return answer(errors.NONE, results)


def _all_partitions(ctx: RequestContext) -> list[TP]:
    return [(t, p) for t, meta in sorted(ctx.broker.cache.topics.items())
            for p in sorted(meta.assignment.partitions)]


async def _elect_preferred(ctx: RequestContext, parts: list[TP],
                           deadline: float) -> dict[TP, Outcome]:
    """Kafka's controller: a partition led by its preferred replica needs nothing; one
    whose preferred replica is not alive and in the ISR cannot have it; the rest go to
    the controller in one preferred-replica-election request (REST's)."""
    cache, results = ctx.broker.cache, {}
    live = set(cache.brokers)
    wanted: dict[TP, int] = {}
    for t, p in parts:
        meta = cache.topic(t)
        replicas = None if meta is None else meta.assignment.partitions.get(p)
        if meta is None or not replicas:
            results[(t, p)] = NO_PARTITION
            continue
        state, preferred = meta.states.get(p), replicas[0]
        if state is not None and state.leader == preferred:
            results[(t, p)] = (ELECTION_NOT_NEEDED,
                               "Leader election not needed for topic partition.")
        elif state is None or preferred not in live or preferred not in state.isr:
            results[(t, p)] = _preferred_unavailable(t, p, preferred, state)
        else:
            wanted[(t, p)] = preferred
            results[(t, p)] = (errors.NONE, None)
    if not wanted:
        return results
    loop = asyncio.get_running_loop()
    body = {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in wanted]}
    while True:
        try:
            await ctx.broker.controller.request_preferred_election(body)
            break
        except ReassignmentInProgressError:  # another election is running: ours is next
            if loop.time() >= deadline:
                return {**results, **dict.fromkeys(wanted, (
                    errors.REQUEST_TIMED_OUT,
                    "Another preferred replica election was still running"))}
            await asyncio.sleep(0.1)
        except FranzError as exc:
            return {**results, **dict.fromkeys(wanted, (errors.code_of(exc),
                                                        errors.message_of(exc)))}
    pending = await _await_leaders(ctx, wanted, deadline, request_done=_election_done(ctx))
    for tp in pending:
        meta = cache.topic(tp[0])
        state = None if meta is None else meta.states.get(tp[1])
        results[tp] = pending[tp] or _preferred_unavailable(*tp, wanted[tp], state)
    return results


def _preferred_unavailable(topic: str, partition: int, preferred: int,
                           state: Any) -> Outcome:
    isr = [] if state is None else list(state.isr)
    return (PREFERRED_LEADER_NOT_AVAILABLE,
            f"Failed to elect leader for partition {topic}-{partition}: its preferred replica "
            f"{preferred} is not alive and in the in-sync replicas {isr}")


def _election_done(ctx: RequestContext) -> Any:
    async def done() -> bool:
        try:
            return await ctx.broker.store.get_admin_request(PREFERRED_REPLICA_ELECTION) is None
        except FranzError:
            return False
    return done


async def _await_leaders(ctx: RequestContext, wanted: dict[TP, int], deadline: float, *,
                         request_done: Any = None) -> dict[TP, Outcome | None]:
    """Wait until this broker's metadata shows each partition's expected leader (Kafka's
    DelayedElectLeader); returns those that it does not: REQUEST_TIMED_OUT at the
    deadline, None (for the caller to explain) once ``request_done()`` says the
    controller finished and ``SETTLE_S`` passed."""
    loop, cache = asyncio.get_running_loop(), ctx.broker.cache
    finished_at: float | None = None
    while True:
        pending = [tp for tp, leader in wanted.items() if cache.leader_of(*tp) != leader]
        now = loop.time()
        if not pending:
            return {}
        if finished_at is None and request_done is not None and await request_done():
            finished_at = now
        if finished_at is not None and now - finished_at >= SETTLE_S:
            return dict.fromkeys(pending)
        if now >= deadline:
            return dict.fromkeys(pending, (errors.REQUEST_TIMED_OUT,
                                           "The election did not complete within the timeout"))
        await asyncio.sleep(WAIT_STEP_S)


async def _elect_unclean(ctx: RequestContext, parts: list[TP],
                         deadline: float) -> dict[TP, Outcome]:
    controller = ctx.broker.controller
    if not controller.is_active:
        return dict.fromkeys(parts, (NOT_CONTROLLER, None))
    try:
        elected = await controller.elect_unclean_leaders(parts)
    except FranzError as exc:
        return dict.fromkeys(parts, (errors.code_of(exc), errors.message_of(exc)))
    results: dict[TP, Outcome] = {}
    wanted: dict[TP, int] = {}
    for tp in parts:
        if tp not in elected:
            results[tp] = NO_PARTITION
        elif elected[tp] is None:
            results[tp] = (ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
        elif elected[tp] == -1:
            results[tp] = (ELIGIBLE_LEADERS_NOT_AVAILABLE,
                           f"Failed to elect leader for partition {tp[0]}-{tp[1]}: "
                           "no replica is alive")
        else:
            wanted[tp] = elected[tp]  # type: ignore[assignment]
            results[tp] = (errors.NONE, None)
    for tp, outcome in (await _await_leaders(ctx, wanted, deadline)).items():
        results[tp] = outcome or (errors.REQUEST_TIMED_OUT, None)
    return results


# --- partition reassignments --------------------------------------------------------


@api("AlterPartitionReassignments", 0, 0)
async def alter_partition_reassignments(ctx: RequestContext,
                                        req: dict[str, Any]) -> dict[str, Any]:
    def top(code: int, message: str | None = None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "responses": []}

    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return top(errors.CLUSTER_AUTHORIZATION_FAILED)
    results: dict[TP, Outcome] = {}
    changes: dict[TP, tuple[int, ...] | None] = {}
    count = 0
    for t in req["topics"][:MAX_TOPICS_PER_REQUEST]:
        for p in t["partitions"]:
            if count >= MAX_PARTITIONS_PER_REQUEST:
                break
            count += 1
            tp, replicas = (t["name"], p["partition_index"]), p["replicas"]
            bad = None if replicas is None else _replicas_error(replicas)
            if bad is not None:
                results[tp] = (INVALID_REPLICA_ASSIGNMENT, bad)
                changes.pop(tp, None)
            else:
                changes[tp] = None if replicas is None else tuple(replicas)
                results.pop(tp, None)
    if not ctx.broker.controller.is_active:
        return top(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
    if changes:
        try:
            outcome = await ctx.broker.controller.alter_reassignments(changes)
        except FranzError as exc:
            return top(errors.code_of(exc), errors.message_of(exc))
        for tp, refused in outcome.items():
            results[tp] = (errors.NONE, None) if refused is None else \
                (errors.code_of(refused), errors.message_of(refused))
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None,
            "responses": [{"name": t, "partitions": [
                {"partition_index": p, "error_code": results[(t, p)][0],
                 "error_message": results[(t, p)][1]} for p in ps]}
                for t, ps in _by_topic(results).items()]}


def _replicas_error(replicas: list[int]) -> str | None:
    """Kafka's checks of a target replica list (``KafkaController.validateReplicas``)."""
    shown = str(replicas[:20])[:-1] + (", ...]" if len(replicas) > 20 else "]")
    if not replicas:
        return "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return f"Duplicate replica ids in partition reassignment replica list: {shown}"
    if any(r < 0 for r in replicas):
        return f"Invalid broker id in replica list: {shown}"
    return None


@api("ListPartitionReassignments", 0, 0)
async def list_partition_reassignments(ctx: RequestContext,
                                       req: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"throttle_time_ms": 0, "error_code": errors.NONE,
                           "error_message": None, "topics": []}
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        out["error_code"] = errors.CLUSTER_AUTHORIZATION_FAILED
        return out
    asked = req["topics"]
    wanted = None if asked is None else set(_requested(asked, "name", "partition_indexes"))
    try:
        moving = await ctx.broker.controller.reassignments()
    except FranzError as exc:
        out.update(error_code=errors.code_of(exc), error_message=errors.message_of(exc))
        return out
    topics: dict[str, list[dict[str, Any]]] = {}
    for t, p, replicas, adding, removing in moving:
        if wanted is None or (t, p) in wanted:
            topics.setdefault(t, []).append({
                "partition_index": p, "replicas": list(replicas),
                "adding_replicas": list(adding), "removing_replicas": list(removing)})
    out["topics"] = [{"name": t, "partitions": ps} for t, ps in topics.items()]
    return out


# --- DescribeLogDirs ----------------------------------------------------------------


@api("DescribeLogDirs", 0, 4)
async def describe_log_dirs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                "results": []}
    asked = req["topics"]
    wanted = None if asked is None else set(_requested(asked, "topic", "partitions"))
    broker = ctx.broker
    replicas = broker.replica_manager.partitions
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = {}
    for (t, p), plog in sorted(broker.log_manager.all_logs().items()):
        if wanted is not None and (t, p) not in wanted:
            continue
        replica = replicas.get(TopicPartition(t, p))
        lag = -1 if replica is None or plog.offline else \
            max(replica.high_watermark - plog.log_end_offset, 0)
        by_dir.setdefault(plog.dir.parent, {}).setdefault(t, []).append({
            "partition_index": p, "partition_size": plog.size_in_bytes, "offset_lag": lag,
            "is_future_key": False})
    results = []
    for d in broker.log_manager.dirs:
        path = d.path.absolute()
        result: dict[str, Any] = {"error_code": errors.NONE, "log_dir": str(path),
                                  "topics": [], "total_bytes": -1, "usable_bytes": -1}
        try:
            st = await run_blocking(os.statvfs, path)
        except OSError:
            result["error_code"] = KAFKA_STORAGE_ERROR
        else:
            result.update(total_bytes=st.f_blocks * st.f_frsize,
                          usable_bytes=st.f_bavail * st.f_frsize,
                          topics=[{"name": t, "partitions": ps} for t, ps in
                                  by_dir.get(d.path, {}).items()])
        results.append(result)
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "results": results}


# --- DescribeProducers --------------------------------------------------------------


@api("DescribeProducers", 0, 0)
async def describe_producers(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    """Any replica hosted here answers, leader or follower, as Kafka's
    ``ReplicaManager.activeProducerState`` does (``--broker-id`` of
    kafka-transactions.sh, ``broker_id`` of kafka-python, asks a follower)."""
    broker, out, count = ctx.broker, [], 0
    for t in req["topics"][:MAX_TOPICS_PER_REQUEST]:
        name = t["name"]
        error: Outcome | None = None
        if not valid_topic_name(name):
            error = (errors.INVALID_TOPIC_EXCEPTION, f"'{name}' is not a valid topic name")
        elif not ctx.allowed(Operation.READ, ResourceType.TOPIC, name):
            error = (errors.TOPIC_AUTHORIZATION_FAILED, None)
        meta = broker.cache.topic(name)
        if error is None and meta is None:
            error = (errors.UNKNOWN_TOPIC_OR_PARTITION, None)
        partitions = []
        for p in t["partition_indexes"]:
            if count >= MAX_PARTITIONS_PER_REQUEST:
                break
            count += 1
            answer: dict[str, Any] = {"partition_index": p, "error_code": errors.NONE,
                                      "error_message": None, "active_producers": []}
            partitions.append(answer)
            if error is not None:
                answer.update(error_code=error[0], error_message=error[1])
                continue
            replica = broker.replica_manager.partitions.get(TopicPartition(name, p))
            if replica is None:
                assert meta is not None
                answer["error_code"] = errors.NOT_LEADER_OR_FOLLOWER \
                    if p in meta.assignment.partitions else errors.UNKNOWN_TOPIC_OR_PARTITION
            elif replica.log.offline:
                answer["error_code"] = KAFKA_STORAGE_ERROR
            else:
                answer["active_producers"] = [
                    {"producer_id": pid, "producer_epoch": e.producer_epoch,
                     "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                     "coordinator_epoch": e.coordinator_epoch, "current_txn_start_offset": -1}
                    for pid, e in sorted(replica.log.producer_state.producers.items())]
        out.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": out}
