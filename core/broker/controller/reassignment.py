"""Partition reassignment and preferred-leader election requests: pure rules.

Kafka's admin znodes (and franz's HTTP routes that write them) carry these JSON bodies:

    /admin/reassign_partitions        {"version":1,"partitions":[{"topic":"t","partition":0,
                                                                  "replicas":[1,2]}]}
    /admin/preferred_replica_election {"version":1,"partitions":[{"topic":"t","partition":0}]}

A reassignment of one partition from the original replicas (OAR) to the target (TRS)
goes through Kafka's steps (KIP-455), one ``next_step`` at a time:

1. ``EXPAND``: the assignment becomes RAR = TRS + (OAR - TRS); ``adding`` = TRS - OAR
   and ``removing`` = OAR - TRS are written beside it (``adding_replicas`` /
   ``removing_replicas`` of ``/brokers/topics/<t>``). New replicas start fetching.
2. ``WAIT``: until every target replica is in the ISR. A move that only adds replicas
   has RAR = TRS: the ``adding`` written beside it is what tells it from a finished one,
   so it waits like any other (Kafka's ``isReassignmentComplete``: TRS in the ISR).
3. ``SHRINK``: the leader moves to the first target replica alive and in the ISR if the
   current one is not a target (or is dead), the ISR drops the removed replicas (leader
   epoch + 1; no state write when neither changes), the assignment becomes TRS and
   ``adding`` / ``removing`` are cleared; removed replicas stop and delete their logs.
4. ``DONE``: the assignment is TRS with nothing being added or removed.

A move that only removes replicas has nothing to expand and nothing to wait for once
the kept replicas are in sync: it shrinks at once, as in Kafka. A cancellation (the
target set back to OAR, see ``Reassigner.alter_reassignments``) is a target within the
current replicas: it waits for OAR to be in sync and shrinks back to it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from core.broker.errors import InvalidReplicaAssignmentError
from core.broker.metadata.store import PartitionState
from core.errors import FranzError

REASSIGN_PARTITIONS = "reassign_partitions"
PREFERRED_REPLICA_ELECTION = "preferred_replica_election"


class ReassignmentInProgressError(FranzError):
    """A reassignment is already running (Kafka REASSIGNMENT_IN_PROGRESS)."""

    error_code = 60


class NoReassignmentInProgressError(FranzError):
    """A cancellation for a partition that is not being reassigned (Kafka
    NO_REASSIGNMENT_IN_PROGRESS)."""

    error_code = 85


class Step(enum.Enum):
    EXPAND = "expand"
    WAIT = "wait"
    SHRINK = "shrink"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Plan:
    """What to write for one partition at one step."""

    step: Step
    replicas: tuple[int, ...]  # the assignment to write (EXPAND: RAR; SHRINK: TRS)
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    # SHRINK: the new leader and ISR (None: they stay, only the assignment is written)
    state: PartitionState | None = None


def parse_reassignment(body: object) -> dict[tuple[str, int], tuple[int, ...]]:
    """Kafka's reassignment JSON -> {(topic, partition): target replicas}. Shape errors
    are ``InvalidReplicaAssignmentError`` naming what is wrong."""
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for entry in _entries(body, "reassignment"):
        tp = _tp(entry)
        replicas = entry.get("replicas")
        if not isinstance(replicas, list) or not replicas or \
                not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0
                        for r in replicas):
            raise InvalidReplicaAssignmentError(
                f"Partition {tp[0]}-{tp[1]}: replicas must be a non-empty list of broker ids, "
                f"got {replicas!r}")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"Partition {tp[0]}-{tp[1]}: duplicate replicas in {replicas}")
        if tp in out:
            raise InvalidReplicaAssignmentError(f"Partition {tp[0]}-{tp[1]} is listed twice")
        out[tp] = tuple(replicas)
    return out


def parse_election(body: object) -> list[tuple[str, int]]:
    """Kafka's preferred-replica-election JSON -> partitions (duplicates dropped)."""
    out: list[tuple[str, int]] = []
    for entry in _entries(body, "election"):
        tp = _tp(entry)
        if tp not in out:
            out.append(tp)
    return out


def encode_reassignment(targets: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]})


def encode_election(partitions: Sequence[tuple[str, int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p} for t, p in partitions]})


def check_targets(targets: Mapping[tuple[str, int], Sequence[int]],
                  partitions: Mapping[tuple[str, int], object], brokers: Collection[int]) -> None:
    """Every partition exists and every target broker is registered (Kafka refuses a
    reassignment to unknown brokers)."""
    for (t, p), replicas in targets.items():
        if (t, p) not in partitions:
            raise InvalidReplicaAssignmentError(f"Partition {t}-{p} does not exist")
        unknown = sorted(set(replicas) - set(brokers))
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Partition {t}-{p}: replicas {list(replicas)} name brokers {unknown} that are "
                f"not registered (live brokers: {sorted(brokers)})")


def moving_replicas(current: Sequence[int], target: Sequence[int],
                    adding: Sequence[int] = ()) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(adding, removing) of a partition whose assignment is ``current`` (with ``adding``
    stored beside it by an earlier EXPAND) on its way to ``target``: the target replicas
    not among Kafka's origin replicas (the current ones but those being added), and the
    current replicas not in the target."""
    origin = [r for r in current if r not in adding]
    return (tuple(r for r in target if r not in origin),
            tuple(r for r in current if r not in target))


def next_step(current: Sequence[int], target: Sequence[int], state: PartitionState | None,
              live: Collection[int], *, controller_epoch: int, adding: Sequence[int] = (),
              removing: Sequence[int] = ()) -> Plan:
    """The next write for a partition whose assignment is ``current`` on its way to
    ``target`` (see the module doc). ``adding`` / ``removing``: what the assignment
    stores beside ``current`` (written by a previous EXPAND; empty when no move ran)."""
    cur, trs = tuple(current), tuple(target)
    if cur == trs and not adding and not removing:
        if state is not None and state.leader in trs and not set(state.isr) <= set(trs):
            # a removed replica re-joined the ISR between the two writes of SHRINK
            isr = tuple(r for r in state.isr if r in trs)
            return Plan(Step.SHRINK, trs, state=PartitionState(
                leader=state.leader, leader_epoch=state.leader_epoch + 1, isr=isr,
                controller_epoch=controller_epoch, version=state.version))
        return Plan(Step.DONE, trs)
    add, rem = moving_replicas(cur, trs, adding)
    if not set(trs) <= set(cur):
        rar = trs + tuple(r for r in cur if r not in trs)
        return Plan(Step.EXPAND, rar, adding=add, removing=rem)
    if state is None or not set(trs) <= set(state.isr):
        return Plan(Step.WAIT, cur, adding=add, removing=rem)
    leader = state.leader
    if leader not in trs or leader not in live:
        candidates = [r for r in trs if r in state.isr and r in live]
        if not candidates:
            return Plan(Step.WAIT, cur, adding=add, removing=rem)
        leader = candidates[0]
    isr = tuple(r for r in state.isr if r in trs)
    new_state = None if (leader, isr) == (state.leader, tuple(state.isr)) else PartitionState(
        leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr,
        controller_epoch=controller_epoch, version=state.version)
    return Plan(Step.SHRINK, trs, removing=rem, state=new_state)


def _entries(body: object, what: str) -> list[dict[str, object]]:
    if isinstance(body, bytes | str):
        try:
            body = json.loads(body or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidReplicaAssignmentError(f"The {what} request is not JSON: {exc}") from exc
    if not isinstance(body, dict) or not isinstance(body.get("partitions"), list):
        raise InvalidReplicaAssignmentError(
            f'The {what} request must be {{"version":1,"partitions":[...]}}')
    entries = body["partitions"]
    if not all(isinstance(e, dict) for e in entries):
        raise InvalidReplicaAssignmentError(f"Each partition of the {what} request must be an object")
    return entries


def _tp(entry: Mapping[str, object]) -> tuple[str, int]:
    topic, partition = entry.get("topic"), entry.get("partition")
    if not isinstance(topic, str) or not topic or not isinstance(partition, int) or \
            isinstance(partition, bool) or partition < 0:
        raise InvalidReplicaAssignmentError(
            f"Each partition needs a topic name and a partition number >= 0, got {dict(entry)}")
    return topic, partition


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
