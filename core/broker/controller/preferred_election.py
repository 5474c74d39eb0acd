"""The controller's preferred-replica election and auto leader rebalance (kafka-internals 3.3).

``elect_preferred_leaders`` moves leadership back to the first replica of a partition when
it is alive and in the ISR (leader epoch + 1, ISR unchanged), with the pure rules of
``core.broker.controller.leader_election``. It runs on request (Kafka's
``/admin/preferred_replica_election`` znode, written by ``request_preferred_election``,
deleted when done) and, with ``auto.leader.rebalance.enable``, every
``leader.imbalance.check.interval.seconds`` for the brokers whose share of not-led
preferred partitions exceeds ``leader.imbalance.per.broker.percentage``
(``rebalance_imbalanced``, skipped while a reassignment runs).

``PreferredElection`` is a mixin of ``Controller``, with no state of its own: the
controller starts ``_rebalance_loop`` when elected and calls
``process_preferred_election_request`` in its pass over the admin requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from core.broker.controller.leader_election import elect_preferred, imbalanced_partitions
from core.broker.controller.reassignment import (
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    ReassignmentInProgressError,
    encode_election,
    parse_election,
)
from core.broker.errors import InvalidReplicaAssignmentError, UnknownTopicError
from core.broker.metadata.store import (
    BadVersionError,
    MetadataStore,
    PartitionState,
    TopicAssignment,
)
from core.errors import FranzError

log = logging.getLogger(__name__)


async def stored_partitions(store: MetadataStore, parts: Iterable[tuple[str, int]]
                            ) -> list[tuple[str, int, tuple[int, ...], PartitionState]]:
    """``(topic, partition, replicas, state)`` of each of ``parts`` the store has both an
    assignment and a state for, topics in name order (one read of each topic's
    assignment and states)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    out = []
    for topic, partitions in sorted(by_topic.items()):
        assignment = await store.get_topic(topic)
        if assignment is None:
            continue
        states = await store.get_partition_states(topic)
        for p in partitions:
            state, replicas = states.get(p), assignment.partitions.get(p)
            if state is not None and replicas is not None:
                out.append((topic, p, replicas, state))
    return out


class PreferredElection:
    """Preferred-replica election on request and the auto leader rebalance (module doc)."""

    # The controller's state and helpers this mixin uses (``Controller`` sets them up).
    store: MetadataStore
    epoch: int | None
    shutting_down: set[int]
    imbalance_check_interval_s: float
    imbalance_pct: int
    _stopped: bool
    _work: asyncio.Lock

    if TYPE_CHECKING:
        @property
        def is_active(self) -> bool: ...

        async def _live_broker_ids(self) -> list[int]: ...

    async def request_preferred_election(self, body: object | None) -> list[tuple[str, int]]:
        """Validate Kafka's election JSON (None: every partition) and write the request
        znode for the controller; returns the partitions named."""
        if body is None:
            parts = [(t, p) for t in await self.store.topic_names()
                     for p in sorted(((await self.store.get_topic(t)) or
                                      TopicAssignment(t, "", {})).partitions)]
        else:
            parts = parse_election(body)
            for t, p in parts:
                assignment = await self.store.get_topic(t)
                if assignment is None or p not in assignment.partitions:
                    raise UnknownTopicError(f"Partition {t}-{p} does not exist.")
        if not await self.store.create_admin_request(PREFERRED_REPLICA_ELECTION,
                                                     encode_election(parts)):
            raise ReassignmentInProgressError(
                "A preferred replica election is already in progress; try again when it ends.")
        return parts

    async def process_preferred_election_request(self) -> None:
        data = await self.store.get_admin_request(PREFERRED_REPLICA_ELECTION)
        if data is None:
            return
        try:
            parts = parse_election(data)
        except InvalidReplicaAssignmentError as exc:
            log.error("controller: dropping a malformed preferred election request: %s", exc)
        else:
            moved = await self.elect_preferred_leaders(parts)
            log.info("controller: preferred replica election of %d partition(s): %d moved",
                     len(parts), len(moved))
        await self.store.delete_admin_request(PREFERRED_REPLICA_ELECTION)

    async def elect_preferred_leaders(self, parts: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Move leadership of ``parts`` to their preferred replica where it can lead now;
        returns the partitions whose leader changed. Active controller only."""
        live = set(await self._live_broker_ids()) - self.shutting_down
        moved = []
        for topic, p, replicas, state in await stored_partitions(self.store, parts):
            if self.epoch is None:
                break
            new = elect_preferred(state, replicas, live, controller_epoch=self.epoch)
            if new is None:
                continue
            try:
                await self.store.update_partition_state(topic, p, new,
                                                        expected_version=state.version)
            except BadVersionError:
                continue  # changed meanwhile; the next check will see it
            log.info("controller: preferred leader %d elected for %s-%d (epoch %d)",
                     new.leader, topic, p, new.leader_epoch)
            moved.append((topic, p))
        return moved

    async def _rebalance_loop(self) -> None:
        while not self._stopped and self.is_active:
            await asyncio.sleep(self.imbalance_check_interval_s)
            if self._stopped or not self.is_active:
                return
            try:
                async with self._work:
                    await self.rebalance_imbalanced()
            except FranzError as exc:
                log.warning("controller: leader rebalance check failed: %s", exc)

    async def rebalance_imbalanced(self) -> list[tuple[str, int]]:
        """Kafka's auto leader rebalance pass; skipped while a reassignment runs."""
        if self.epoch is None or await self.store.get_admin_request(REASSIGN_PARTITIONS):
            return []
        live = set(await self._live_broker_ids()) - self.shutting_down
        assignments, states = {}, {}
        for name in await self.store.topic_names():
            assignment = await self.store.get_topic(name)
            if assignment is None:
                continue
            st = await self.store.get_partition_states(name)
            for p, replicas in assignment.partitions.items():
                assignments[(name, p)] = replicas
                if p in st:
                    states[(name, p)] = st[p]
        parts = imbalanced_partitions(assignments, states, live,
                                      max_imbalance_pct=self.imbalance_pct)
        return await self.elect_preferred_leaders(parts) if parts else []
