"""The controller's side of partition reassignment (``/admin/reassign_partitions``).

``request_reassignment`` validates Kafka's reassignment JSON and writes the request. Each
partition then moves through ``core.broker.controller.reassignment.next_step`` (expand to
RAR = target + old, wait for the target replicas to join the ISR, move the leader into the
target set and drop the old replicas, write the target assignment); the request is deleted
when every partition is done. Progress is re-checked on every partition-state change and
broker change while a request is pending, and resumed by a new controller.
``reassignments`` lists the partitions still moving. ``alter_reassignments`` (Kafka's
AlterPartitionReassignments, on the controller) merges targets and cancellations into
the running request under the controller's lock.

``Reassigner`` is a mixin of ``Controller``: the controller calls
``process_reassignment_request`` in its pass over the admin requests and sets
``_reassigning`` (a request may be pending: re-check on changes) when elected or told of a
new request; ``process_reassignment_request`` clears it once no request is left.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from core.broker.controller.reassignment import (
    REASSIGN_PARTITIONS,
    NoReassignmentInProgressError,
    ReassignmentInProgressError,
    Step,
    check_targets,
    encode_reassignment,
    moving_replicas,
    next_step,
    parse_reassignment,
)
from core.broker.errors import (
    InvalidReplicaAssignmentError,
    NotControllerError,
    UnknownPartitionError,
    UnknownTopicError,
)
from core.broker.metadata.store import BadVersionError, MetadataStore, TopicAssignment
from core.errors import FranzError

log = logging.getLogger(__name__)


class Reassigner:
    """Partition reassignment requests, their progress and steps (module docstring)."""

    # The controller's state and helpers this mixin uses (``Controller`` sets them up).
    store: MetadataStore
    epoch: int | None
    _reassigning: bool
    _work: asyncio.Lock

    if TYPE_CHECKING:
        async def _live_broker_ids(self) -> list[int]: ...

    async def request_reassignment(self, body: object) -> dict[tuple[str, int], tuple[int, ...]]:
        """Validate Kafka's reassignment JSON and write ``/admin/reassign_partitions``;
        ReassignmentInProgressError if one is running."""
        targets = parse_reassignment(body)
        if not targets:
            raise InvalidReplicaAssignmentError("The reassignment names no partitions")
        partitions: dict[tuple[str, int], object] = {}
        for t in {t for t, _ in targets}:
            assignment = await self.store.get_topic(t)
            if assignment is None:
                raise UnknownTopicError(f"Topic '{t}' not found.")
            partitions.update({(t, p): r for p, r in assignment.partitions.items()})
        check_targets(targets, partitions, await self._live_broker_ids())
        if not await self.store.create_admin_request(REASSIGN_PARTITIONS,
                                                     encode_reassignment(targets)):
            raise ReassignmentInProgressError("There is an existing assignment running.")
        return targets

    async def alter_reassignments(
        self, changes: Mapping[tuple[str, int], tuple[int, ...] | None],
    ) -> dict[tuple[str, int], FranzError | None]:
        """Kafka's AlterPartitionReassignments, on the active controller: each partition
        of ``changes`` gets new target replicas, or (None) its reassignment cancelled,
        back to the replicas it had (the current ones but those being added: Kafka's
        origin replicas). The request running, if any, is rewritten with the changes
        merged in, a partition's latest target winning as in Kafka, while the controller
        is not working on it. Per partition: None (accepted) or why not (the partition
        does not exist, brokers not registered, nothing to cancel). NotControllerError on
        any other broker."""
        if self.epoch is None:
            raise NotControllerError("this broker is not the controller")
        async with self._work:
            if self.epoch is None:  # resigned while waiting for the lock
                raise NotControllerError("this broker is not the controller")
            for _ in range(5):  # another broker's request got in between: merge again
                data = await self.store.get_admin_request(REASSIGN_PARTITIONS)
                try:
                    running = {} if data is None else parse_reassignment(data)
                except InvalidReplicaAssignmentError:
                    running = {}
                targets = dict(running)
                results: dict[tuple[str, int], FranzError | None] = {}
                live = await self._live_broker_ids()
                topics: dict[str, TopicAssignment | None] = {}
                for (t, p), target in changes.items():
                    if t not in topics:
                        topics[t] = await self.store.get_topic(t)
                    assignment = topics[t]
                    current = None if assignment is None else assignment.partitions.get(p)
                    if assignment is None or current is None:
                        results[(t, p)] = UnknownPartitionError("The partition does not exist.")
                        continue
                    if target is None:
                        # moving: its target is not reached yet, or it is (a move that
                        # only adds replicas) but they are still being added
                        moving = (t, p) in running and (
                            running[(t, p)] != current or bool(assignment.adding.get(p))
                            or bool(assignment.removing.get(p)))
                        if not moving:
                            results[(t, p)] = NoReassignmentInProgressError(
                                f"Partition {t}-{p} is not being reassigned.")
                            continue
                        adding = assignment.adding.get(p, ())
                        target = tuple(r for r in current if r not in adding)
                    try:
                        check_targets({(t, p): target}, {(t, p): current}, live)
                    except InvalidReplicaAssignmentError as exc:
                        results[(t, p)] = exc
                        continue
                    results[(t, p)] = None
                    if target != current or (t, p) in running:
                        targets[(t, p)] = target
                if targets == running:
                    return results
                if data is not None:
                    await self.store.delete_admin_request(REASSIGN_PARTITIONS)
                if not targets or await self.store.create_admin_request(
                        REASSIGN_PARTITIONS, encode_reassignment(targets)):
                    self._reassigning = bool(targets)
                    return results
        raise ReassignmentInProgressError(
            "Other reassignment requests kept arriving at the same time; try again.")

    async def reassignments(self) -> list[tuple[str, int, tuple[int, ...], tuple[int, ...],
                                                tuple[int, ...]]]:
        """Partitions still moving: (topic, partition, replicas now, adding, removing)."""
        data = await self.store.get_admin_request(REASSIGN_PARTITIONS)
        if data is None:
            return []
        try:
            targets = parse_reassignment(data)
        except InvalidReplicaAssignmentError:
            return []
        out = []
        cache: dict[str, TopicAssignment | None] = {}
        for (t, p), target in sorted(targets.items()):
            if t not in cache:
                cache[t] = await self.store.get_topic(t)
            assignment = cache[t]
            if assignment is None or p not in assignment.partitions:
                continue
            cur = assignment.partitions[p]
            stored_adding = assignment.adding.get(p, ())
            if cur == target and not stored_adding and not assignment.removing.get(p):
                continue  # done (a move that only adds keeps its adding replicas until done)
            adding, removing = moving_replicas(cur, target, stored_adding)
            out.append((t, p, cur, adding, removing))
        return out

    async def process_reassignment_request(self) -> None:
        data = await self.store.get_admin_request(REASSIGN_PARTITIONS)
        if data is None:
            self._reassigning = False
            return
        self._reassigning = True
        try:
            targets = parse_reassignment(data)
        except InvalidReplicaAssignmentError as exc:
            log.error("controller: dropping a malformed reassignment request: %s", exc)
            await self.store.delete_admin_request(REASSIGN_PARTITIONS)
            self._reassigning = False
            return
        live = set(await self._live_broker_ids())
        pending = 0
        for (t, p), target in sorted(targets.items()):
            for _ in range(4):  # a few steps at once when nothing needs to wait
                step = await self._reassign_step(t, p, target, live)
                if step in (Step.DONE, Step.WAIT):
                    break
            pending += step is not Step.DONE
        if pending == 0 and self.epoch is not None:
            await self.store.delete_admin_request(REASSIGN_PARTITIONS)
            self._reassigning = False
            log.info("controller: reassignment of %d partition(s) completed", len(targets))

    async def _reassign_step(self, topic: str, partition: int, target: tuple[int, ...],
                             live: set[int]) -> Step:
        assignment = await self.store.get_topic(topic)
        if assignment is None or partition not in assignment.partitions or self.epoch is None:
            return Step.DONE  # deleted meanwhile: nothing left to move
        state = (await self.store.get_partition_states(topic)).get(partition)
        adding = assignment.adding.get(partition, ())
        removing = assignment.removing.get(partition, ())
        plan = next_step(assignment.partitions[partition], target, state, live,
                         controller_epoch=self.epoch, adding=adding, removing=removing)
        if plan.step is Step.EXPAND:
            await self.store.set_assignment(_with_replicas(assignment, partition, plan.replicas,
                                                           plan.adding, plan.removing))
            log.info("controller: reassigning %s-%d: replicas %s -> %s (adding %s, removing %s)",
                     topic, partition, assignment.partitions[partition], plan.replicas,
                     plan.adding, plan.removing)
        elif plan.step is Step.SHRINK:
            assert state is not None
            new = plan.state or state  # None: leader and ISR stay as they are
            if plan.state is not None:
                try:
                    await self.store.update_partition_state(topic, partition, plan.state,
                                                            expected_version=state.version)
                except BadVersionError:
                    return Step.WAIT  # the leader changed the ISR meanwhile: next event
            if assignment.partitions[partition] != plan.replicas or adding or removing:
                await self.store.set_assignment(_with_replicas(assignment, partition,
                                                               plan.replicas, (), ()))
            log.info("controller: reassigned %s-%d to %s (leader %d, epoch %d, isr %s)",
                     topic, partition, plan.replicas, new.leader, new.leader_epoch, new.isr)
        return plan.step


def _with_replicas(assignment: TopicAssignment, partition: int, replicas: tuple[int, ...],
                   adding: tuple[int, ...], removing: tuple[int, ...]) -> TopicAssignment:
    parts = {**assignment.partitions, partition: replicas}
    add = {p: r for p, r in assignment.adding.items() if p != partition}
    rem = {p: r for p, r in assignment.removing.items() if p != partition}
    if adding:
        add[partition] = adding
    if removing:
        rem[partition] = removing
    return TopicAssignment(assignment.name, assignment.topic_id, parts, add, rem)
