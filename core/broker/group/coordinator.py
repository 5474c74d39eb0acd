"""The group coordinator: the groups whose ``__consumer_offsets`` partition this broker
leads, their membership, rebalances, heartbeats and committed offsets.

Ownership: group ``g`` belongs to partition ``coordinator_partition(g, n)`` of
``__consumer_offsets``, whose groups this broker serves while it leads that partition,
through the coordinator runtime (``core.broker.coordination.runtime``): the replica
becoming leader at epoch E loads the partition from the log (requests for its groups
wait for the load); resigning, or leading at another epoch, drops its groups (Dead)
before anything reads them again; every write is fenced by the epoch its group was
loaded at. A broker that does not lead the partition answers
:class:`NotCoordinatorError`, never from memory.

Writes: every membership change is a rebalance that ends with a group metadata record
(a full snapshot with members, subscriptions and assignments); every commit is one batch
of offset commit records. Both go to the log with acks=all through the backend, one
append at a time per partition, and nothing a caller can see changes before the append
succeeded: a commit updates the offset cache afterwards; a membership change is made on
the group (the assignor needs it) after a ``Group.snapshot()`` and put back with
``restore()`` when building or appending its record fails, and the listener hears of
changed assignments only once the record is written. So a failed write (a record too
large for ``__consumer_offsets``: ``GroupRecordTooLargeError``, a storage error, losing
the partition) leaves the group as it was, and later joins and commits work. A group
made for a first join or commit that failed stays invisible (``Group.is_unwritten``).

Kafka clients' groups (the classic protocol: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) are the ``ClassicRebalance`` mixin's (``core.broker.group.classic_engine``):
a group with a Kafka client among its members rebalances Kafka's way (held joins, the
client leader's assignment), REST instances in it included; a group of REST instances
only rebalances in one step, as above. Both write the same records the same way.

Event-loop only. Locks: one per group (membership changes), then one per offsets
partition (appends); never the other way round.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from core.broker.coordination.runtime import CoordinatorRuntime, Shard
from core.broker.errors import (
    ConsumerAlreadyExistsError,
    ConsumerInstanceNotFoundError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupRecordTooLargeError,
    GroupSubscribedToTopicError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
)
from core.broker.group.backend import GroupBackend
from core.broker.group.classic_engine import ClassicRebalance
from core.broker.group.group import (
    CONSUMER_PROTOCOL_TYPE,
    CommittedOffset,
    Group,
    GroupDescription,
    GroupSnapshot,
    GroupState,
    GroupSummary,
    Member,
    compute_assignment,
)
from core.broker.group.hashing import coordinator_partition
from core.broker.group.loading import OffsetsWriter, load_groups
from core.broker.group.records import (
    group_metadata_record,
    group_tombstone,
    offset_commit_record,
    offset_tombstone,
)
from core.broker.group.topics import check_partitions, match_topics, partition_counts
from core.broker.types import TopicPartition
from core.clock import SYSTEM_CLOCK, Clock
from core.errors import FranzError
from core.storage.errors import MessageTooLargeError, RecordBatchTooLargeError
from core.storage.records import NewRecord, build_batch

log = logging.getLogger(__name__)


class RebalanceListener(Protocol):
    """Hooks for the owner of the members' runtime state (the consumer manager)."""

    async def before_rebalance(self, group: Group, leaving: Iterable[Member]) -> None:
        """Last chance to commit (auto-commit) before assignments change or members go."""
        ...

    def on_assignment_changed(
        self, group: Group, member: Member, revoked: frozenset[TopicPartition]
    ) -> None:
        """``member``'s partitions changed; it lost ``revoked`` (possibly none)."""
        ...

    def readable_topics(self, member: Member, topics: Iterable[str]) -> list[str]:
        """Of ``topics``, those ``member`` may read: a pattern subscribes to those only
        (Kafka's consumer sees only the topics it is authorized to describe)."""
        ...


class GroupCoordinator(ClassicRebalance):
    """Groups of the offsets partitions this broker leads. See the module docstring.
    ``initial_rebalance_delay_ms``: group.initial.rebalance.delay.ms (Kafka clients'
    groups only: REST instances never wait)."""

    def __init__(
        self,
        backend: GroupBackend,
        *,
        clock: Clock = SYSTEM_CLOCK,
        assignor: str = "range",
        offset_metadata_max_bytes: int = 4096,
        group_max_size: int = 1000,
        listener: RebalanceListener | None = None,
        initial_rebalance_delay_ms: int = 0,
    ) -> None:
        if group_max_size < 1:
            raise ValueError(f"group.max.size must be at least 1, got {group_max_size}")
        self.backend = backend
        self.group_max_size = group_max_size
        self.clock = clock
        self.assignor = assignor
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.listener = listener
        self.initial_rebalance_delay_ms = max(int(initial_rebalance_delay_ms), 0)
        self._background: set[asyncio.Task[None]] = set()  # the classic protocol's timers
        self._groups: dict[str, Group] = {}
        self.runtime: CoordinatorRuntime[dict[str, Group]] = CoordinatorRuntime(
            OffsetsWriter(backend), lambda p, epoch: load_groups(backend, clock, p, epoch),
            loaded=self._install, unloaded=self._drop, eager=True)
        self._group_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._write_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    # --- ownership and loading --------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return coordinator_partition(group_id, self.backend.offsets_topic_partitions)

    def on_role_change(self, partition: int, leader_epoch: int | None) -> None:
        """The replica of ``__consumer_offsets``-``partition`` here leads at
        ``leader_epoch`` now (None: not at all); the replica manager calls it."""
        self.runtime.on_role_change(partition, leader_epoch)

    async def load_owned(self) -> list[int]:
        """Try to load every offsets partition; returns those this broker leads."""
        return await self.runtime.load_all(range(self.backend.offsets_topic_partitions))

    def _install(self, shard: Shard[dict[str, Group]]) -> None:
        self._groups.update(shard.state)

    def _drop(self, shard: Shard[dict[str, Group]]) -> None:
        """The partition is no longer served here: its groups go Dead and are dropped;
        Kafka clients' held JoinGroup and SyncGroup requests get NOT_COORDINATOR."""
        now = self.clock.now_ms()
        for group in [g for g in self._groups.values() if g.partition == shard.partition]:
            if not group.is_dead:
                group.transition_to(GroupState.DEAD, now)

            def moved(g: Group = group) -> NotCoordinatorError:
                return NotCoordinatorError(
                    f"__consumer_offsets-{g.partition} (group {g.group_id!r}) moved away")

            self.fail_classic_waiters(group, moved)
            del self._groups[group.group_id]

    # --- lookups --------------------------------------------------------------------

    async def group(self, group_id: str, *, create: bool = False) -> Group | None:
        """The group (after its partition is loaded); a new Empty one if ``create``.
        Without ``create`` a group nothing was written for yet counts as absent."""
        if not group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        partition = self.partition_for(group_id)
        shard = await self.runtime.shard(partition)
        group = self._groups.get(group_id)
        if group is None and create:
            group = self._groups[group_id] = Group(
                group_id, partition=partition, state_timestamp_ms=self.clock.now_ms()
            )
            group.loaded_epoch = shard.epoch
        if group is not None and not create and group.is_unwritten:
            return None
        return group

    def member(self, group_id: str, member_id: str) -> Member:
        """A REST instance's member of a loaded group, synchronously;
        ConsumerInstanceNotFoundError (also for a Kafka client's member: the REST API
        does not reach those)."""
        self.runtime.loaded(self.partition_for(group_id))
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None or member.classic is not None:
            raise ConsumerInstanceNotFoundError(
                f"Consumer instance {member_id!r} not found in group {group_id!r}."
            )
        return member

    async def find_member(self, group_id: str, member_id: str) -> tuple[Group, Member]:
        """A REST instance's member (as ``member``, waiting for the load)."""
        group = await self.group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.classic is not None:
            raise ConsumerInstanceNotFoundError(
                f"Consumer instance {member_id!r} not found in group {group_id!r}."
            )
        return group, member

    def touch(self, group_id: str, member_id: str) -> Member:
        """Heartbeat: the member's expiry moves to now + its session timeout."""
        member = self.member(group_id, member_id)
        member.touch(self.clock.now_ms())
        return member

    def loaded_groups(self) -> list[Group]:
        """The groups of the partitions served here now (at their current epoch)."""
        served = {s.partition for s in self.runtime.shards()}
        return [g for _, g in sorted(self._groups.items())
                if g.partition in served and not g.is_dead and not g.is_unwritten]

    def list_groups(self) -> list[GroupSummary]:
        return [g.summary() for g in self.loaded_groups()]

    async def describe_group(self, group_id: str) -> GroupDescription:
        group = await self.group(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {group_id!r} not found.")
        return group.describe()

    # --- membership -------------------------------------------------------------------

    async def join(self, group_id: str, member: Member) -> Group:
        """Add ``member`` (ConsumerAlreadyExistsError if its id is taken) and rebalance."""
        group = await self.group(group_id, create=True)
        assert group is not None
        async with self._group_locks[group_id]:
            self._check_alive(group)
            if member.member_id in group.members:
                raise ConsumerAlreadyExistsError(
                    f"Consumer with specified consumer ID {member.member_id!r} already exists "
                    f"in group {group_id!r}."
                )
            if len(group.members) >= self.group_max_size:
                raise GroupMaxSizeReachedError(
                    f"Consumer group {group_id!r} already has {len(group.members)} members, "
                    f"its maximum (group.max.size={self.group_max_size}): delete an instance "
                    "or use another group")
            if group.has_classic_members and not self.supports_protocols(
                    group, CONSUMER_PROTOCOL_TYPE, self.rest_protocols()):
                raise InconsistentGroupProtocolError(
                    f"Consumer group {group_id!r} has Kafka clients whose assignors "
                    f"({self._shared_description(group)}) a REST consumer instance cannot "
                    f"use (it supports {list(self.rest_protocols())})")
            member.touch(self.clock.now_ms())

            def add(g: Group) -> None:
                g.members[member.member_id] = member

            await self._rebalance(group, (), add, reason=f"{member.member_id} joined")
        return group

    async def leave(
        self,
        group_id: str,
        member_ids: Iterable[str],
        *,
        expired_at: int | None = None,
        reason: str = "left",
    ) -> list[str]:
        """Remove members and rebalance; returns the ids removed. With ``expired_at``,
        only members still past their deadline then (a late heartbeat saves a member)."""
        group = await self.group(group_id)
        if group is None:
            return []
        async with self._group_locks[group_id]:
            self._check_alive(group)
            leaving = [group.members[i] for i in member_ids if i in group.members]
            if expired_at is not None:
                leaving = [m for m in leaving if m.deadline_ms < expired_at
                           and (m.classic is None or not m.classic.satisfied)]
            if not leaving:
                return []

            def remove(g: Group) -> None:
                for m in leaving:
                    del g.members[m.member_id]

            ids = [m.member_id for m in leaving]
            await self._rebalance(group, leaving, remove, reason=f"{ids} {reason}")
        return ids

    async def update_member(
        self, group_id: str, member_id: str, change: Callable[[Member], None], *, reason: str
    ) -> Member:
        """Apply ``change`` to the member (subscription or manual assignment) and
        rebalance. ``change`` may raise to refuse (nothing happens then)."""
        group, member = await self.find_member(group_id, member_id)
        async with self._group_locks[group_id]:
            self._check_alive(group)
            if group.members.get(member_id) is not member:
                raise ConsumerInstanceNotFoundError(f"Consumer instance {member_id!r} not found.")
            saved = group.snapshot()
            change(member)  # may raise to refuse: nothing was changed yet
            member.touch(self.clock.now_ms())
            await self._rebalance(group, (), lambda g: None, reason=f"{member_id} {reason}",
                                  saved=saved)
        return member

    async def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove every member whose heartbeat deadline is before ``now_ms``."""
        out: list[tuple[str, str]] = []
        for group in self.loaded_groups():
            if group.pending_members and not group.is_dead:
                await self.expire_pending(group, now_ms)
            expired = group.expired_members(now_ms)
            if expired and not group.is_dead:
                ids = await self.leave(
                    group.group_id, expired, expired_at=now_ms, reason="expired (idle)"
                )
                out.extend((group.group_id, i) for i in ids)
        return out

    async def refresh_metadata(self) -> list[str]:
        """Re-resolve pattern subscriptions and partition counts; rebalance groups whose
        assignment would change. Returns the ids of the groups rebalanced."""
        changed: list[str] = []
        all_topics: list[str] | None = None
        for group in self.loaded_groups():
            if group.is_dead or not any(m.is_subscribed for m in group.members.values()):
                continue
            async with self._group_locks[group.group_id]:
                if group.is_dead:
                    continue
                if all_topics is None and any(
                    m.pattern is not None for m in group.members.values()
                ):
                    all_topics = await self.backend.list_topics()
                if await self._assignment_stale(group, all_topics or []):
                    await self._rebalance(group, (), lambda g: None, reason="metadata changed")
                    changed.append(group.group_id)
        return changed

    async def _assignment_stale(self, group: Group, all_topics: list[str]) -> bool:
        for m in group.members.values():
            if (
                m.pattern is not None
                and not m.manual
                and m.topics != match_topics(m.pattern, self._readable(m, all_topics))
            ):
                return True
        if group.has_classic_members:  # the Kafka leader follows partition counts itself
            return False
        counts = await partition_counts(self.backend, group.subscribed_topics())
        proposed = compute_assignment(group, self.assignor, counts)
        return any(
            frozenset(tps) != frozenset(group.members[mid].assignment)
            for mid, tps in proposed.items()
        )

    def _readable(self, member: Member, topics: list[str]) -> list[str]:
        return topics if self.listener is None else self.listener.readable_topics(member, topics)

    def _check_alive(self, group: Group) -> None:
        if group.is_dead:
            raise NotCoordinatorError(f"group {group.group_id!r} moved to another coordinator")

    async def _rebalance(
        self,
        group: Group,
        leaving: Iterable[Member],
        mutate: Callable[[Group], None],
        *,
        reason: str,
        saved: GroupSnapshot | None = None,
    ) -> None:
        """One whole rebalance, with the group lock held: hooks, membership change,
        pattern resolution, assignment, and the group metadata record. If anything after
        the hooks fails, the group is put back as it was (``saved``, taken by a caller
        that changed a member already, or now) and the error goes to the caller.

        A group with Kafka clients among its members rebalances their way instead
        (``ClassicRebalance._classic_change``): the change is made, the clients are
        asked to join again, and the call returns; the record is written when their
        leader's assignment comes (or when the last of them is gone)."""
        saved = saved or group.snapshot()
        if group.has_classic_members:
            try:
                await self._classic_change(group, leaving, mutate, reason=reason)
            except Exception:
                saved.restore()
                raise
            return
        try:
            if self.listener is not None and group.members:
                await self.listener.before_rebalance(group, list(leaving))
            mutate(group)
        except Exception as exc:
            saved.restore()
            log.warning("group %s: rebalance (%s) not written, the group is unchanged: %s",
                        group.group_id, reason, exc)
            raise
        await self._server_rebalance(group, reason=reason, saved=saved)

    async def _resolve_patterns(self, group: Group) -> None:
        """Pattern subscriptions of REST instances -> the topics they match now."""
        if any(m.pattern is not None and not m.manual for m in group.members.values()):
            all_topics = await self.backend.list_topics()
            for m in group.members.values():
                if m.pattern is not None and not m.manual:
                    m.topics = match_topics(m.pattern, self._readable(m, all_topics))

    async def _server_rebalance(self, group: Group, *, reason: str,
                                saved: GroupSnapshot | None = None) -> None:
        """The rebalance of a group of REST instances only (membership already
        changed): the assignor, the record, then the listener. On failure the group is
        put back (``saved``, or as it was when called) and the error raised."""
        saved = saved or group.snapshot()
        old_generation = group.generation
        try:
            await self._resolve_patterns(group)
            counts = await partition_counts(self.backend, group.subscribed_topics())
            now = self.clock.now_ms()
            group.prepare_rebalance(now)
            group.complete_join(self.assignor, now)
            revoked: dict[str, frozenset[TopicPartition]] = {}
            if group.members:
                revoked = group.complete_sync(
                    compute_assignment(group, self.assignor, counts), now)
            await self._append(group, [self._metadata_record(group, now)],
                               what=f"the metadata of group {group.group_id!r}")
        except Exception as exc:
            saved.restore()
            log.warning("group %s: rebalance (%s) not written, the group is unchanged: %s",
                        group.group_id, reason, exc)
            raise
        if self.listener is not None:
            for member_id, tps in revoked.items():
                self.listener.on_assignment_changed(group, group.members[member_id], tps)
        log.info(
            "group %s rebalanced (%s): generation %d -> %d, state %s",
            group.group_id,
            reason,
            old_generation,
            group.generation,
            group.state.value,
        )

    @staticmethod
    def _metadata_record(group: Group, now_ms: int) -> NewRecord:
        try:
            return group_metadata_record(group, now_ms)
        except ValueError as exc:  # a field past its wire length (int16 strings)
            raise GroupRecordTooLargeError(
                f"The metadata of group {group.group_id!r} cannot be written to "
                f"__consumer_offsets: {exc}") from None

    async def persist_member(
        self, group_id: str, member_id: str, change: Callable[[Member], frozenset[TopicPartition]]
    ) -> None:
        """Apply a change that does not concern the assignor (a manual assignment) and
        write the group snapshot. ``change`` returns the partitions the member lost."""
        group, member = await self.find_member(group_id, member_id)
        async with self._group_locks[group_id]:
            self._check_alive(group)
            if group.members.get(member_id) is not member:
                raise ConsumerInstanceNotFoundError(f"Consumer instance {member_id!r} not found.")
            saved = group.snapshot()
            revoked = change(member)
            if group.has_classic_members and group.state is not GroupState.STABLE:
                # mid-rebalance: the record written at its end holds the change
                if self.listener is not None:
                    self.listener.on_assignment_changed(group, member, revoked)
                return
            try:
                now = self.clock.now_ms()
                await self._append(group, [self._metadata_record(group, now)],
                                   what=f"the metadata of group {group_id!r}")
            except Exception:
                saved.restore()
                raise
            if self.listener is not None:
                self.listener.on_assignment_changed(group, member, revoked)

    # --- offsets ----------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, tuple[int, str]],
        *,
        member_id: str | None = None,
    ) -> None:
        """Write the offsets (next offset to read, metadata) with acks=all, then cache
        them. Without ``member_id`` this is a "simple" commit (the group may be new)."""
        for tp, (_, metadata) in offsets.items():
            if len(metadata) > self.offset_metadata_max_bytes:
                raise OffsetMetadataTooLargeError(
                    f"metadata for {tp.topic}-{tp.partition} exceeds "
                    f"{self.offset_metadata_max_bytes} bytes"
                )
        if not offsets:
            return
        await check_partitions(self.backend, offsets)
        group = await self.group(group_id, create=member_id is None)
        if group is None or (member_id is not None and member_id not in group.members):
            raise ConsumerInstanceNotFoundError(
                f"Consumer instance {member_id!r} not found in group {group_id!r}."
            )
        self._check_alive(group)
        now = self.clock.now_ms()
        entries = {
            TopicPartition(*tp): CommittedOffset(off, meta, now)
            for tp, (off, meta) in offsets.items()
        }
        try:
            records = [offset_commit_record(group_id, tp, c) for tp, c in entries.items()]
        except ValueError as exc:
            raise GroupRecordTooLargeError(
                f"The offsets of group {group_id!r} cannot be written: {exc}") from None
        await self._append(
            group, records, on_success=lambda: group.offsets.update(entries),
            what=f"the offset commit of group {group_id!r} ({len(records)} partitions)",
        )

    async def committed(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """Cached committed offsets (all of the group's when ``partitions`` is None);
        partitions without a commit are left out."""
        group = await self.group(group_id)
        if group is None:
            return {}
        if partitions is None:
            return dict(group.offsets)
        return {TopicPartition(*tp): group.offsets[tp] for tp in partitions if tp in group.offsets}

    async def reset_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Admin reset: only while the group has no members (NonEmptyGroupError)."""
        group = await self.group(group_id)
        if group is not None and group.members:
            raise NonEmptyGroupError(f"group {group_id!r} has active members")
        await self.commit_offsets(group_id, {tp: (off, "") for tp, off in offsets.items()})

    async def delete_group(self, group_id: str) -> None:
        """Tombstones for the group and its offsets; NonEmptyGroupError if it has members."""
        group = await self.group(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {group_id!r} not found.")
        async with self._group_locks[group_id]:
            self._check_alive(group)
            if group.members:
                raise NonEmptyGroupError(f"group {group_id!r} has active members")
            now = self.clock.now_ms()
            records = [offset_tombstone(group_id, tp, now) for tp in group.offsets]
            records.append(group_tombstone(group_id, now))

            def drop() -> None:
                group.transition_to(GroupState.DEAD, now)
                if self._groups.get(group_id) is group:
                    del self._groups[group_id]

            await self._append(group, records, on_success=drop)
        log.info("group %s deleted", group_id)

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                             ) -> dict[TopicPartition, int]:
        """OffsetDelete, by Kafka's rules: the committed offsets of ``partitions`` are
        deleted (tombstones, written as commits are: acks=all, fenced by the epoch the
        group was loaded at), except those of topics a member reads
        (GROUP_SUBSCRIBED_TO_TOPIC). The error code per partition (0 also for one that
        had no offset). GroupIdNotFoundError when the group does not exist;
        NonEmptyGroupError for a group with members of another protocol type than
        ``consumer`` (Kafka cannot tell what they read)."""
        group = await self.group(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {group_id!r} not found.")
        async with self._group_locks[group_id]:
            self._check_alive(group)
            if group.state is not GroupState.EMPTY and \
                    group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise NonEmptyGroupError(
                    f"group {group_id!r} has members of protocol type "
                    f"{group.protocol_type!r}: its offsets cannot be deleted")
            in_use = group.topics_in_use()
            codes = {TopicPartition(*tp): GroupSubscribedToTopicError.error_code
                     if tp[0] in in_use else 0 for tp in partitions}
            doomed = [tp for tp, code in codes.items() if code == 0 and tp in group.offsets]
            if doomed:
                now = self.clock.now_ms()

                def forget() -> None:
                    for tp in doomed:
                        group.offsets.pop(tp, None)

                await self._append(
                    group, [offset_tombstone(group_id, tp, now) for tp in doomed],
                    on_success=forget,
                    what=f"the offset deletion of group {group_id!r} ({len(doomed)} partitions)")
                log.info("group %s: offsets of %d partition(s) deleted", group_id, len(doomed))
        return codes

    async def expire_empty_groups(self, now_ms: int, retention_ms: int) -> list[str]:
        """Kafka's offsets retention (``offsets.retention.minutes``, KIP-211): a group with
        no members for ``retention_ms`` (since it became Empty, or since its last commit
        if that came later) loses its offsets and is deleted (tombstones, as
        ``delete_group``); groups with members keep theirs. Without it every group a
        client ever named (a random one per run, as console consumers make) stayed in
        memory and in ``__consumer_offsets`` for good. The ids deleted."""
        gone: list[str] = []
        for group in self.loaded_groups():
            if group.is_dead or group.members or group.pending_members:
                continue
            since = max([group.state_timestamp_ms,
                         *(c.commit_timestamp for c in group.offsets.values())])
            if since < 0 or now_ms - since < retention_ms:
                continue
            try:
                await self.delete_group(group.group_id)
            except FranzError as exc:  # joined meanwhile, moved away: next round
                log.debug("group %s not expired: %s", group.group_id, exc)
                continue
            gone.append(group.group_id)
        if gone:
            log.info("%d empty group(s) expired after offsets.retention.minutes: %s",
                     len(gone), gone[:10])
        return gone

    # --- the log ----------------------------------------------------------------------

    async def _append(
        self,
        group: Group,
        records: list[NewRecord],
        on_success: Callable[[], object] | None = None,
        *,
        what: str = "the write",
    ) -> int:
        """Append ``records`` of ``group`` under the leader epoch it was loaded at (the
        runtime drops the partition and raises NotCoordinatorError when that is over)."""
        batch = bytes(build_batch(records, now_ms=self.clock.now_ms()))
        partition = group.partition
        async with self._write_locks[partition]:
            try:
                offset = await self.runtime.append(partition, group.loaded_epoch, batch,
                                                   acks=-1, timeout_ms=0)
            except (MessageTooLargeError, RecordBatchTooLargeError) as exc:
                raise GroupRecordTooLargeError(
                    f"{what[0].upper()}{what[1:]} does not fit in one record batch of "
                    f"__consumer_offsets ({len(batch)} bytes): {exc.message}; "
                    f"nothing was changed") from None
            if on_success is not None:
                on_success()
            return offset
