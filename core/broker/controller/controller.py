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

Preferred-replica election (kafka-internals 3.3): ``elect_preferred_leaders`` moves
leadership back to the first replica of a partition when it is alive and in the ISR
(leader epoch + 1, ISR unchanged). It runs on request (Kafka's
``/admin/preferred_replica_election`` znode, deleted when done) and, with
``auto.leader.rebalance.enable``, every ``leader.imbalance.check.interval.seconds`` for
the brokers whose share of not-led preferred partitions exceeds
``leader.imbalance.per.broker.percentage``.

Partition reassignment (``/admin/reassign_partitions``): each partition moves through
``core.broker.controller.reassignment.next_step`` (expand to RAR = target + old, wait for the target
replicas to join the ISR, move the leader into the target set and drop the old replicas,
write the target assignment); the request is deleted when every partition is done.
Progress is re-checked on every partition-state change and broker change while a request
is pending, and resumed by a new controller.

Topic admin on a broker that is not the controller: the write goes straight to the
store (ZooKeeper multi-ops, atomic; a concurrent create of the same name fails with
TopicAlreadyExists), unfenced, with the last controller epoch this broker saw. Topic
creation touches znodes no controller decision touches, so no forwarding is needed.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Collection, Mapping

from core.broker.controller.leader_election import (
    elect_on_broker_change,
    elect_preferred,
    imbalanced_partitions,
)
from core.broker.controller.reassignment import (
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    ReassignmentInProgressError,
    Step,
    check_targets,
    encode_election,
    encode_reassignment,
    next_step,
    parse_election,
    parse_reassignment,
)
from core.broker.controller.replica_assignment import assign_replicas
from core.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    TopicDeletionDisabledError,
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
from core.errors import FranzError
from core.storage.config import validate_topic_configs, validate_topic_name

log = logging.getLogger(__name__)


def new_topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class Controller:
    """Topic and leadership decisions; active only on the elected broker."""

    def __init__(self, broker_id: int, store: MetadataStore, *, delete_topic_enable: bool = True,
                 unclean_default: bool = False, auto_rebalance: bool = True,
                 imbalance_check_interval_s: float = 300.0, imbalance_pct: int = 10) -> None:
        """``unclean_default``: the broker default of unclean.leader.election.enable;
        ``auto_rebalance``, ``imbalance_*``: auto.leader.rebalance.enable,
        leader.imbalance.check.interval.seconds, leader.imbalance.per.broker.percentage."""
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
        replica can take over); returns how many partitions it still leads."""
        self.shutting_down.add(broker_id)
        async with self._work:
            await self.reconcile()
        remaining = 0
        for name in await self.store.topic_names():
            states = await self.store.get_partition_states(name)
            remaining += sum(1 for st in states.values() if st.leader == broker_id)
        return remaining

    def schedule_reconcile(self) -> None:
        self._spawn(self._reconcile_coalesced())

    def _spawn(self, coro: object) -> None:
        task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
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
            for p, replicas in sorted(assignment.partitions.items()):
                state = states.get(p)
                if state is not None and await self._elect_one(name, p, state, replicas, live,
                                                               down, unclean):
                    changed += 1
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

    # --- preferred-replica election ---------------------------------------------------

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
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        moved = []
        for topic, partitions in sorted(by_topic.items()):
            assignment = await self.store.get_topic(topic)
            if assignment is None:
                continue
            states = await self.store.get_partition_states(topic)
            for p in partitions:
                state, replicas = states.get(p), assignment.partitions.get(p)
                if state is None or replicas is None or self.epoch is None:
                    continue
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

    # --- partition reassignment -------------------------------------------------------

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
            if cur == target:
                continue
            adding = assignment.adding.get(p) or tuple(r for r in target if r not in cur)
            removing = assignment.removing.get(p) or tuple(r for r in cur if r not in target)
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
        plan = next_step(assignment.partitions[partition], target, state, live,
                         controller_epoch=self.epoch)
        if plan.step is Step.EXPAND:
            await self.store.set_assignment(_with_replicas(assignment, partition, plan.replicas,
                                                           plan.adding, plan.removing))
            log.info("controller: reassigning %s-%d: replicas %s -> %s (adding %s, removing %s)",
                     topic, partition, assignment.partitions[partition], plan.replicas,
                     plan.adding, plan.removing)
        elif plan.step is Step.SHRINK:
            assert state is not None and plan.state is not None
            try:
                await self.store.update_partition_state(topic, partition, plan.state,
                                                        expected_version=state.version)
            except BadVersionError:
                return Step.WAIT  # the leader changed the ISR meanwhile: next event
            if assignment.partitions[partition] != plan.replicas:
                await self.store.set_assignment(_with_replicas(assignment, partition,
                                                               plan.replicas, (), ()))
            log.info("controller: reassigned %s-%d to %s (leader %d, epoch %d, isr %s)",
                     topic, partition, plan.replicas, plan.state.leader,
                     plan.state.leader_epoch, plan.state.isr)
        return plan.step

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
        assignment = TopicAssignment(name, new_topic_id(),
                                     assign_replicas(live, partitions, replication_factor))
        if validate_only:
            return assignment
        states = {p: _initial_state(reps, live, epoch) for p, reps in assignment.partitions.items()}
        await self.store.create_topic(assignment, overrides, states)
        log.info("created topic %s with %d partition(s), replication factor %d",
                 name, partitions, replication_factor)
        return assignment

    async def delete_topic(self, name: str) -> None:
        self._check_active()
        if not self.delete_topic_enable:
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


def _initial_state(replicas: tuple[int, ...], live: list[int], epoch: int) -> PartitionState:
    alive = tuple(r for r in replicas if r in live)
    leader = alive[0] if alive else -1
    return PartitionState(leader=leader, leader_epoch=0, isr=alive or replicas[:1],
                          controller_epoch=epoch)
