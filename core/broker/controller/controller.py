"""The controller: the one broker that decides topic layout and leadership.

Elected through the metadata store (``try_elect_controller``: ZooKeeper's ephemeral
``/controller`` fenced by ``/controller_epoch`` in a cluster; the embedded store in
standalone, where the single broker always wins). It creates and deletes topics with
Kafka's replica assignment, adds partitions, validates and stores config overrides,
and writes initial partition states (leader = first live replica, ISR = live replicas,
leader epoch 0). Brokers learn the results through store notifications.

Failover (kafka-internals 2.6, 3.3): the active controller reacts to BROKERS_CHANGED by
re-deciding every partition (``reconcile``) with the pure rules of
``core.broker.controller.leader_election``: a dead leader is replaced by the first live ISR replica
in assignment order (leader epoch + 1), dead followers leave the ISR (epoch + 1), a
partition with no live ISR member goes offline (leader -1, ISR kept) unless
``unclean.leader.election.enable``; a returning broker brings offline partitions back.
Each decision is a conditional write at the zkVersion read (BadVersion -> re-read,
retry), fenced by the controller epoch in the ZooKeeper store. Brokers learn the new
leaders from their ZooKeeper watches on the partition state znodes (no LeaderAndIsr
push): the store's PARTITION_STATE_CHANGED event makes each broker re-sync the topic.
When ``/controller`` disappears (CONTROLLER_CHANGED with no holder) every broker runs
for the role; the winner reconciles at once (``onControllerFailover``) and resumes any
admin request left in ZooKeeper.

ZooKeeper session expiry (SESSION_EXPIRED): the controller resigns at once (its
``/controller`` is gone with the session); once the store registered the broker again
(SESSION_RESTORED) it runs for the role like everyone else.

Preferred-replica election and the auto leader rebalance (kafka-internals 3.3) are the
mixin ``core.broker.controller.preferred_election.PreferredElection``; partition
reassignment (``/admin/reassign_partitions``) is ``core.broker.controller.reassigner.Reassigner``.
This module drives both: when elected it resumes their requests and starts the rebalance
loop, it re-checks a pending reassignment on partition-state and broker changes, and it
works off the admin requests serialized with ``reconcile``.

Topic admin on a broker that is not the controller: the write goes straight to the
store (ZooKeeper multi-ops, atomic; a concurrent create of the same name fails with
TopicAlreadyExists), unfenced, with the last controller epoch this broker saw. Topic
creation touches znodes no controller decision touches, so no forwarding is needed.

Topic names that collide (Kafka's rule: equal once '.' and '_' are unified, ``t.x`` and
``t_x``) are refused in ``create_topic``, the one path every creation takes (v3 create,
auto-creation on produce, the CLI through v3): InvalidTopicError "Topic 't_x' collides
with existing topics: t.x", nothing created. The check reads the store's topic list
before the write and again after it: two brokers creating ``a.b`` and ``a_b`` at the
same instant each see the other's topic afterwards (or only the later one does) and the
one that sees a collision deletes its own, so at most one of them is left.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Collection, Coroutine, Mapping
from typing import Any

from core.broker.controller.leader_election import elect_on_broker_change
from core.broker.controller.partition_limits import PartitionLimits
from core.broker.controller.preferred_election import PreferredElection, stored_partitions
from core.broker.controller.reassigner import Reassigner
from core.broker.controller.reassignment import REASSIGN_PARTITIONS
from core.broker.controller.replica_assignment import assign_replicas
from core.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    NotControllerError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    TopicDeletionDisabledError,
    UnknownPartitionError,
    UnknownTopicError,
)
from core.broker.metadata.store import (
    BadVersionError,
    EventKind,
    MetadataEvent,
    MetadataStore,
    PartitionState,
    TopicAssignment,
)
from core.broker.types import is_internal_topic
from core.errors import FranzError
from core.storage.config import topic_collides, validate_topic_configs, validate_topic_name
from core.storage.errors import InvalidTopicError

log = logging.getLogger(__name__)

#: partition states the controller writes at once (one ZooKeeper multi-op, one SQL
#: transaction)
ELECTION_BATCH = 200


def new_topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class Controller(PreferredElection, Reassigner):
    """Topic and leadership decisions; active only on the elected broker. Preferred-replica
    election and partition reassignment come from the mixins (see the module docstring)."""

    def __init__(self, broker_id: int, store: MetadataStore, *, delete_topic_enable: bool = True,
                 unclean_default: bool = False, auto_rebalance: bool = True,
                 imbalance_check_interval_s: float = 300.0, imbalance_pct: int = 10,
                 partition_limits: PartitionLimits = PartitionLimits(),
                 hosted_replicas: Callable[[], Mapping[int, int]] = dict) -> None:
        """``unclean_default``: the broker default of unclean.leader.election.enable;
        ``auto_rebalance``, ``imbalance_*``: auto.leader.rebalance.enable,
        leader.imbalance.check.interval.seconds, leader.imbalance.per.broker.percentage;
        ``partition_limits``: what creations and increases are checked against, with
        ``hosted_replicas()`` the partition replicas each broker hosts now."""
        self.partition_limits = partition_limits
        self._hosted_replicas = hosted_replicas
        self.broker_id = broker_id
        self.store = store
        self.epoch: int | None = None
        self.known_epoch = 0  # the latest controller epoch seen (for unfenced admin writes)
        self.delete_topic_enable = delete_topic_enable
        self.unclean_default = unclean_default
        self.shutting_down: set[int] = set()  # brokers in controlled shutdown
        self.auto_rebalance = auto_rebalance
        self.imbalance_check_interval_s = imbalance_check_interval_s
        self.imbalance_pct = imbalance_pct
        self._rebalancer: asyncio.Task[None] | None = None
        self._reassigning = False  # a reassignment request is pending (re-check on changes)
        self._work = asyncio.Lock()
        self._pending = False
        self._admin_pending = False
        self._stopped = False
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def is_active(self) -> bool:
        return self.epoch is not None

    async def maybe_elect(self) -> bool:
        epoch = await self.store.try_elect_controller(self.broker_id)
        if epoch is not None:
            self.epoch = self.known_epoch = epoch
            log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
            self._on_elected()
        return self.is_active

    def _on_elected(self) -> None:
        """Resume pending admin requests; start the auto leader rebalance."""
        if self._stopped:
            return
        self._reassigning = True
        self._spawn(self._admin_coalesced())
        if self.auto_rebalance and (self._rebalancer is None or self._rebalancer.done()):
            self._rebalancer = asyncio.get_running_loop().create_task(self._rebalance_loop())
            self._tasks.add(self._rebalancer)
            self._rebalancer.add_done_callback(self._tasks.discard)

    def _check_active(self) -> int:
        """The controller epoch to stamp on writes: ours when active, else the last seen
        (topic admin from any broker goes straight to the store; see the module doc)."""
        return self.epoch if self.epoch is not None else self.known_epoch

    # --- failover ---------------------------------------------------------------------

    def on_event(self, event: MetadataEvent) -> None:
        """Store listener (event loop): schedule the reaction, never block."""
        if self._stopped:
            return
        if event.kind is EventKind.CONTROLLER_CHANGED:
            holder = event.extra.get("controller_id")
            epoch = event.extra.get("epoch")
            if isinstance(epoch, int):
                self.known_epoch = max(self.known_epoch, epoch)
            if holder is None:
                self._spawn(self._run_for_controller())
            elif holder != self.broker_id and self.epoch is not None:
                log.info("broker %d resigns as controller: broker %s holds the role",
                         self.broker_id, holder)
                self.epoch = None
        elif event.kind is EventKind.BROKERS_CHANGED:
            if event.extra.get("registered"):
                self.shutting_down.discard(event.extra.get("broker_id"))  # type: ignore[arg-type]
            if self.is_active:
                self.schedule_reconcile()
                if self._reassigning:
                    self._spawn(self._admin_coalesced())
        elif event.kind is EventKind.ADMIN_REQUEST:
            if self.is_active:
                if event.extra.get("name") == REASSIGN_PARTITIONS:
                    self._reassigning = True
                self._spawn(self._admin_coalesced())
        elif event.kind is EventKind.PARTITION_STATE_CHANGED:
            if self.is_active and self._reassigning:
                self._spawn(self._admin_coalesced())
        elif event.kind is EventKind.SESSION_EXPIRED:
            if self.epoch is not None:
                log.warning("broker %d resigns as controller: its ZooKeeper session expired",
                            self.broker_id)
            self.epoch = None
        elif event.kind is EventKind.SESSION_RESTORED:
            self._spawn(self._run_for_controller())

    async def controlled_shutdown(self, broker_id: int) -> int:
        """Move leadership away from ``broker_id`` and drop it from the ISRs (where another
        replica can take over); returns how many partitions it still leads that another
        live replica, not shutting down itself, could still take (one not in the ISR yet:
        worth asking again). 0: nothing more will move, whatever the broker still leads
        (no other replica, or every other one is going away too)."""
        self.shutting_down.add(broker_id)
        live = set(await self._live_broker_ids())
        takers = live - self.shutting_down - {broker_id}
        if not takers:  # the whole cluster is going away: no reconcile of every partition
            return 0
        async with self._work:
            await self.reconcile()
        live = set(await self._live_broker_ids())
        takers = live - self.shutting_down - {broker_id}
        remaining = 0
        for name in await self.store.topic_names():
            assignment = await self.store.get_topic(name)
            if assignment is None:
                continue
            states = await self.store.get_partition_states(name)
            remaining += sum(
                1 for p, st in states.items()
                if st.leader == broker_id
                and any(r in takers for r in assignment.partitions.get(p, ())))
        return remaining

    async def elect_unclean_leaders(self, parts: Collection[tuple[str, int]]
                                    ) -> dict[tuple[str, int], int | None]:
        """Kafka's UNCLEAN ElectLeaders: each of ``parts`` whose leader is gone (none, or
        not registered) gets the first live in-sync replica, else the first live replica
        alone in the ISR (what the old ISR had beyond it may be lost), whatever
        ``unclean.leader.election.enable`` says. Per existing partition: the leader
        elected, None when its leader is alive (no election needed), -1 when no replica
        is alive; partitions that do not exist are left out. NotControllerError on any
        broker but the active controller."""
        if self.epoch is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        out: dict[tuple[str, int], int | None] = {}
        async with self._work:
            live = set(await self._live_broker_ids())
            for topic, p, replicas, state in await stored_partitions(self.store, parts):
                out[(topic, p)] = await self._elect_unclean_one(topic, p, replicas, state, live)
        return out

    async def _elect_unclean_one(self, topic: str, partition: int, replicas: tuple[int, ...],
                                 state: PartitionState | None, live: set[int]) -> int | None:
        for _ in range(3):  # a conditional write that lost a race reads the state again
            if state is None or self.epoch is None:
                return -1
            if state.leader >= 0 and state.leader in live:
                return None
            new = elect_on_broker_change(state, replicas, live, unclean=True,
                                         controller_epoch=self.epoch,
                                         shutting_down=self.shutting_down)
            if new is None or new.leader < 0:
                return -1
            try:
                await self.store.update_partition_state(topic, partition, new,
                                                        expected_version=state.version)
            except BadVersionError:
                state = (await self.store.get_partition_states(topic)).get(partition)
                continue
            log.warning("controller: unclean election of %s-%d: leader %d, isr %s (epoch %d)",
                        topic, partition, new.leader, new.isr, new.leader_epoch)
            return new.leader
        return -1

    def schedule_reconcile(self) -> None:
        self._spawn(self._reconcile_coalesced())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """No more reactions to events (the broker is going away)."""
        self._stopped = True
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except BaseException:  # noqa: BLE001  (cancelled or failed: stopping anyway)
                pass

    async def _run_for_controller(self) -> None:
        try:
            if await self.maybe_elect():
                await self._reconcile_coalesced()
        except FranzError as exc:
            log.warning("broker %d: running for controller failed: %s", self.broker_id, exc)

    async def _admin_coalesced(self) -> None:
        """Work off the admin requests (reassignment, preferred election); coalesced like
        reconcile, serialized with it."""
        if self._admin_pending:
            return
        self._admin_pending = True
        async with self._work:
            self._admin_pending = False
            if self.epoch is None:
                return
            try:
                await self.process_preferred_election_request()
                await self.process_reassignment_request()
            except FranzError as exc:
                log.warning("controller: admin request failed (%s); retrying soon", exc)
                self._spawn(self._retry_admin_later())

    async def _retry_admin_later(self) -> None:
        await asyncio.sleep(1.0)
        await self._admin_coalesced()

    async def _reconcile_coalesced(self) -> None:
        """Many events in a row cause one or two passes, never overlapping ones."""
        if self._pending:
            return
        self._pending = True
        async with self._work:
            self._pending = False
            for attempt in range(3):
                try:
                    await self.reconcile()
                    return
                except FranzError as exc:
                    log.warning("controller: reconcile failed (%s); attempt %d", exc, attempt + 1)
                    await asyncio.sleep(0.5)

    async def reconcile(self, *, shutting_down: Collection[int] = ()) -> int:
        """Re-decide leader and ISR of every partition for the live brokers; returns the
        number of partitions changed. Active controller only."""
        if self.epoch is None:
            return 0
        live = set(await self._live_broker_ids())
        down = set(shutting_down) | self.shutting_down
        changed = 0
        for name in await self.store.topic_names():
            assignment = await self.store.get_topic(name)
            if assignment is None:
                continue
            configs = await self.store.get_topic_configs(name)
            raw = configs.get("unclean.leader.election.enable")
            unclean = self.unclean_default if raw is None else raw.strip().lower() == "true"
            states = await self.store.get_partition_states(name)
            changed += await self._elect_topic(name, assignment.partitions, states, live,
                                               down, unclean)
        return changed

    async def _elect_topic(self, topic: str, partitions: Mapping[int, tuple[int, ...]],
                           states: Mapping[int, PartitionState], live: set[int],
                           down: set[int], unclean: bool) -> int:
        """The new leader and ISR of every partition of ``topic`` that needs them, in one
        write per ``ELECTION_BATCH`` partitions (a broker back from a restart may lead
        thousands again: one write each took ~60 ms); a batch that lost a race with a
        leader's ISR change is done one partition at a time (``_elect_one``)."""
        epoch = self.epoch
        if epoch is None:
            return 0
        updates: dict[int, tuple[PartitionState, int]] = {}
        for p, replicas in sorted(partitions.items()):
            state = states.get(p)
            if state is None:
                continue
            new = elect_on_broker_change(state, replicas, live, unclean=unclean,
                                         controller_epoch=epoch, shutting_down=down)
            if new is None or (new.leader < 0 and state.leader in down and state.leader in live):
                continue
            updates[p] = (new, state.version)
        changed = 0
        batch_ps = sorted(updates)
        for i in range(0, len(batch_ps), ELECTION_BATCH):
            batch = {p: updates[p] for p in batch_ps[i:i + ELECTION_BATCH]}
            try:
                await self.store.update_partition_states(topic, batch)
            except (BadVersionError, UnknownPartitionError):
                fresh = await self.store.get_partition_states(topic)
                for p in batch:
                    state = fresh.get(p)
                    if state is not None and await self._elect_one(
                            topic, p, state, partitions[p], live, down, unclean):
                        changed += 1
                continue
            for p, (new, _version) in batch.items():
                old = states[p]
                log.info("controller: %s-%d (leader, epoch, isr) (%d, %d, %s) -> (%d, %d, %s)",
                         topic, p, old.leader, old.leader_epoch, old.isr,
                         new.leader, new.leader_epoch, new.isr)
            changed += len(batch)
        return changed

    async def _elect_one(self, topic: str, partition: int, state: PartitionState,
                         replicas: tuple[int, ...], live: set[int], down: set[int],
                         unclean: bool) -> bool:
        for _ in range(3):
            if self.epoch is None:
                return False
            new = elect_on_broker_change(state, replicas, live, unclean=unclean,
                                         controller_epoch=self.epoch, shutting_down=down)
            if new is None or (new.leader < 0 and state.leader in down and state.leader in live):
                return False  # no other replica can take over from a broker shutting down
            try:
                await self.store.update_partition_state(topic, partition, new,
                                                        expected_version=state.version)
            except BadVersionError:  # the leader changed the ISR meanwhile: re-read
                fresh = (await self.store.get_partition_states(topic)).get(partition)
                if fresh is None:
                    return False
                state = fresh
                continue
            log.info("controller: %s-%d (leader, epoch, isr) (%d, %d, %s) -> (%d, %d, %s)",
                     topic, partition, state.leader, state.leader_epoch, state.isr,
                     new.leader, new.leader_epoch, new.isr)
            return True
        return False

    async def _live_broker_ids(self) -> list[int]:
        return sorted(r.broker_id for r in await self.store.live_brokers())

    async def create_topic(
        self, name: str, *, partitions: int, replication_factor: int,
        configs: Mapping[str, str] | None = None, validate_only: bool = False,
    ) -> TopicAssignment:
        epoch = self._check_active()
        validate_topic_name(name)
        overrides = validate_topic_configs(configs or {})
        if partitions < 1:
            raise InvalidPartitionsError(f"Number of partitions must be larger than 0, got {partitions}")
        live = await self._live_broker_ids()
        if replication_factor < 1 or replication_factor > len(live):
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication_factor} larger than available brokers: {len(live)}"
                if replication_factor > len(live) else
                f"Replication factor must be larger than 0, got {replication_factor}")
        if await self.store.get_topic(name) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        colliding = await self._colliding_topics(name)
        if colliding:
            raise InvalidTopicError(
                f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")
        assignment = TopicAssignment(name, new_topic_id(),
                                     assign_replicas(live, partitions, replication_factor))
        if not is_internal_topic(name):  # sized by offsets.topic.*, the operator's choice
            self.partition_limits.check_topic(name, partitions)
            self.partition_limits.check_brokers(self._hosted_replicas(), assignment.partitions)
        if validate_only:
            return assignment
        states = {p: _initial_state(reps, live, epoch) for p, reps in assignment.partitions.items()}
        await self.store.create_topic(assignment, overrides, states)
        raced = await self._colliding_topics(name)
        if raced:
            # Another broker created a colliding name between our check and our write
            # (topic creation goes straight to the store from any broker): take ours back.
            # When both creators see each other both give up, so never both succeed.
            log.warning("topic %s collides with %s, created at the same time: creation undone",
                        name, ", ".join(raced))
            await self.store.delete_topic(name)
            raise InvalidTopicError(
                f"Topic '{name}' collides with existing topics: {', '.join(raced)}")
        if not is_internal_topic(name):
            await self._undo_if_over_budget(name, assignment)
        log.info("created topic %s with %d partition(s), replication factor %d",
                 name, partitions, replication_factor)
        return assignment

    async def _undo_if_over_budget(self, name: str, assignment: TopicAssignment) -> None:
        """The per-broker check above reads this broker's cache; creations written
        through other brokers at the same moment are not in it. Counted again from the
        store after our write: if a broker our topic uses now hosts more than it may, our
        creation is taken back and refused (racing creators may both give up; never both
        succeed past the limit)."""
        stored = await self.store.replicas_per_broker()
        limit = self.partition_limits.effective_per_broker
        used = {b for replicas in assignment.partitions.values() for b in replicas}
        over = sorted(b for b in used if stored.get(b, 0) > limit)
        if not over:
            return
        log.warning("topic %s: broker %d would host %d partition replicas with topics "
                    "created at the same time, more than %d: creation undone",
                    name, over[0], stored[over[0]], limit)
        await self.store.delete_topic(name)
        raise PolicyViolationError(
            f"Broker {over[0]} would host {stored[over[0]]} partition replicas with topics "
            f"created at the same time, more than {limit}: topic '{name}' was not created "
            "(max.partitions.per.broker)")

    async def _colliding_topics(self, name: str) -> list[str]:
        """Existing topics whose names equal ``name`` once '.' and '_' are unified
        (Kafka's ``Topic.hasCollision``: metric names cannot tell them apart)."""
        if "." not in name and "_" not in name:
            return []
        return sorted(t for t in await self.store.topic_names()
                      if t != name and topic_collides(t, name))

    async def delete_topic(self, name: str, *, force: bool = False) -> None:
        """``force``: also when delete.topic.enable=false (a creation being undone)."""
        self._check_active()
        if not self.delete_topic_enable and not force:
            raise TopicDeletionDisabledError("Topic deletion is disabled (delete.topic.enable=false)")
        if await self.store.get_topic(name) is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        await self.store.delete_topic(name)
        log.info("deleted topic %s", name)

    async def create_partitions(self, name: str, total: int) -> TopicAssignment:
        epoch = self._check_active()
        current = await self.store.get_topic(name)
        if current is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        have = len(current.partitions)
        if total < have:
            raise InvalidPartitionsError(
                f"Topic currently has {have} partitions, which is higher than the requested {total}: "
                "the partition count can only be increased")
        if total == have:
            raise InvalidPartitionsError(f"Topic already has {have} partitions.")
        self.partition_limits.check_topic(name, total)
        live = await self._live_broker_ids()
        rf = len(current.partitions[0])
        if rf > len(live):
            raise InvalidReplicationFactorError(
                f"Replication factor: {rf} larger than available brokers: {len(live)}")
        # Kafka's addPartitions: start at the broker of partition 0's first replica, shift
        # likewise, continuing the partition numbering (AdminZkClient.createNewPartitionsAssignment).
        first = current.partitions[0][0]
        start = max(0, next((i for i, b in enumerate(live) if b >= first), 0))
        added = assign_replicas(live, total - have, rf, first_partition=have,
                                start_index=start, shift=start)
        self.partition_limits.check_brokers(self._hosted_replicas(), added)
        assignment = TopicAssignment(name, current.topic_id, {**current.partitions, **added})
        states = {p: _initial_state(reps, live, epoch) for p, reps in added.items()}
        await self.store.add_partitions(assignment, states)
        return assignment

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> dict[str, str]:
        self._check_active()
        if await self.store.get_topic(name) is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        overrides = validate_topic_configs(configs)
        await self.store.set_topic_configs(name, overrides)
        return overrides


def _initial_state(replicas: tuple[int, ...], live: list[int], epoch: int) -> PartitionState:
    alive = tuple(r for r in replicas if r in live)
    leader = alive[0] if alive else -1
    return PartitionState(leader=leader, leader_epoch=0, isr=alive or replicas[:1],
                          controller_epoch=epoch)
