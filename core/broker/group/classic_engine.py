"""Kafka's classic group protocol inside the group coordinator: the rebalance that Kafka
clients (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) take part in themselves.

``ClassicRebalance`` is a mixin of :class:`core.broker.group.coordinator.GroupCoordinator`
with no state of its own beyond the group's (``Group.pending_members``,
``pending_sync``, ``timers``, each member's ``Member.classic``); the public entry is
``core.broker.group.classic.ClassicGroups``. The behaviour is Kafka's
``GroupMetadataManager`` for classic groups (kafka-internals.md 4.2):

- **Join phase.** A join, leave, failure or changed metadata sends the group to
  PreparingRebalance; each Kafka client's JoinGroup is held until every member has
  joined again or the rebalance timeout (the largest of the clients') ends it; the first
  rebalance of an Empty group waits ``group.initial.rebalance.delay.ms`` longer while
  members keep arriving (up to the rebalance timeout). Dynamic members that did not
  rejoin are removed; a new generation, the protocol every member supports (by vote),
  a leader; every held JoinGroup is answered, the leader's with all members' metadata.
- **Sync phase.** CompletingRebalance until the leader's SyncGroup: its assignment is
  written (the group metadata record, through the coordinator's fenced ``_append``)
  before any member gets its own; then Stable. Members that never sync within the
  rebalance timeout are removed and the group rebalances again.
- **REST consumer instances in the same group** (mixed groups) take part as members
  that always join at once, with the consumer-protocol subscription of their topics
  and franz's assignors as their protocols (``rest_protocols``): the Kafka leader
  assigns them too, and its assignment is applied to them (decoded with
  ``consumer_protocol``) through the listener's ``on_assignment_changed``, once
  written; their auto-commit runs before (``before_rebalance``). A REST instance never
  leads. When the last Kafka client leaves, the server assigns again as it does for
  REST-only groups.
- **Static members** (KIP-345): a JoinGroup with a known ``group.instance.id`` and no
  member id replaces the old member id (the old one is fenced: FENCED_INSTANCE_ID); in a
  Stable group whose protocol it does not change, without a rebalance (the new id is
  written at once). Static members that do not rejoin stay members until their session
  times out.

Every wait is capped (the rebalance timeout, clamped to ``MAX_REBALANCE_TIMEOUT_MS``).
Resigning the offsets partition fails every held JoinGroup and SyncGroup with
NOT_COORDINATOR (``fail_classic_waiters``). Timers run on the event loop's clock;
session expiry is the coordinator's ``expire`` (members' ``deadline_ms``).

Event-loop only; every method runs with the group's lock held unless it says otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from core.broker.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    GroupRecordTooLargeError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from core.broker.group import consumer_protocol
from core.broker.group.assignors import ASSIGNORS
from core.broker.group.classic_types import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribedMember,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveResult,
    LeavingMember,
    OffsetCommitEntry,
    SyncGroupRequest,
    SyncGroupResult,
)
from core.broker.group.group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicMember,
    CommittedOffset,
    Group,
    GroupState,
    Member,
)
from core.broker.group.offsets_codec import CorruptOffsetsRecordError
from core.broker.group.records import offset_commit_record
from core.broker.group.topics import partition_counts
from core.broker.types import TopicPartition
from core.errors import FranzError, InvalidRequestError

if TYPE_CHECKING:
    from core.broker.group.backend import GroupBackend
    from core.clock import Clock
    from core.storage.records import NewRecord

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The longest rebalance timeout honoured (a client may send up to 2^31-1 ms).
MAX_REBALANCE_TIMEOUT_MS = 1_800_000
#: Kafka's group.classic.new.member.join.timeout.ms: a new member's JoinGroup is held
#: at most this long (it cannot heartbeat yet).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
#: What a held JoinGroup or SyncGroup waits beyond the rebalance timeout, at most.
WAIT_MARGIN_MS = 5_000

_PREPARABLE = frozenset({GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE})


class ClassicRebalance:
    """The classic protocol's rebalance and requests (module doc)."""

    # The coordinator's state and helpers this mixin uses (``GroupCoordinator`` sets
    # them up).
    backend: GroupBackend
    clock: Clock
    listener: Any  # coordinator.RebalanceListener | None
    assignor: str
    group_max_size: int
    offset_metadata_max_bytes: int
    initial_rebalance_delay_ms: int
    _groups: dict[str, Group]
    _group_locks: defaultdict[str, asyncio.Lock]
    _background: set[asyncio.Task[None]]

    if TYPE_CHECKING:
        async def group(self, group_id: str, *, create: bool = False) -> Group | None: ...

        def _check_alive(self, group: Group) -> None: ...

        async def _append(self, group: Group, records: list[NewRecord],
                          on_success: Callable[[], object] | None = None, *,
                          what: str = "the write") -> int: ...

        @staticmethod
        def _metadata_record(group: Group, now_ms: int) -> NewRecord: ...

        async def _server_rebalance(self, group: Group, *, reason: str) -> None: ...

        async def _resolve_patterns(self, group: Group) -> None: ...

    # --- protocols ----------------------------------------------------------------------

    def rest_protocols(self) -> tuple[str, ...]:
        """The protocols a REST instance supports, in its order of preference: the
        configured assignor first (eager ones only: REST instances do not take part in
        cooperative rebalances)."""
        return (self.assignor, *(name for name in ASSIGNORS if name != self.assignor))

    def _protocols_of(self, m: Member) -> tuple[str, ...]:
        return m.classic.names if m.classic is not None else self.rest_protocols()

    @staticmethod
    def _type_of(m: Member) -> str:
        return m.classic.protocol_type if m.classic is not None else CONSUMER_PROTOCOL_TYPE

    def supports_protocols(self, group: Group, protocol_type: str, names: Iterable[str], *,
                           member_id: str | None = None) -> bool:
        """Kafka's ``supportsProtocols``: a protocol type and one protocol every other
        member (than ``member_id``) shares."""
        names = set(names)
        if not protocol_type or not names:
            return False
        others = [m for mid, m in group.members.items() if mid != member_id]
        if not others:
            return True
        if any(self._type_of(m) != protocol_type for m in others):
            return False
        shared = set.intersection(*(set(self._protocols_of(m)) for m in others))
        return bool(shared & names)

    def _select_protocol(self, group: Group) -> str:
        """Kafka's ``selectProtocol``: each member votes for its first protocol that all
        support; most votes wins (ties: the first name in order)."""
        members = list(group.members.values())
        candidates = set.intersection(*(set(self._protocols_of(m)) for m in members))
        votes: Counter[str] = Counter()
        for m in members:
            vote = next((n for n in self._protocols_of(m) if n in candidates), None)
            if vote is not None:
                votes[vote] += 1
        if not votes:  # cannot happen: every join checks supports_protocols
            leader = group.members.get(group.leader_id or "") or members[0]
            return self._protocols_of(leader)[0]
        return max(sorted(votes), key=lambda n: votes[n])

    def _rebalance_timeout(self, group: Group) -> int:
        """The largest rebalance timeout of the Kafka clients (REST instances join at
        once and do not count), clamped."""
        timeouts = [m.rebalance_timeout_ms for m in group.members.values()
                    if m.classic is not None]
        return min(max(timeouts, default=0), MAX_REBALANCE_TIMEOUT_MS)

    def _rest_metadata(self, m: Member) -> bytes:
        """A REST instance as a Kafka consumer's subscription (v1): its topics (a
        pattern's as last matched) and the partitions it owns; manual ones: none."""
        if m.manual:
            return consumer_protocol.encode_subscription(())
        return consumer_protocol.encode_subscription(m.topics, None, owned=m.assignment)

    def _metadata_of(self, group: Group, m: Member) -> bytes:
        return (m.classic.metadata(group.protocol) if m.classic is not None
                else self._rest_metadata(m))

    @staticmethod
    def _joined(m: Member) -> bool:
        return m.classic is None or m.classic.join_waiter is not None

    def _all_joined(self, group: Group) -> bool:
        return not group.pending_members and all(self._joined(m) for m in group.members.values())

    # --- timers -------------------------------------------------------------------------

    def _schedule(self, group: Group, kind: str, delay_ms: int,
                  action: Callable[[Group], Awaitable[None]]) -> None:
        """Run ``action`` with the group's lock in ``delay_ms`` unless cancelled or
        replaced by then (one timer per kind per group)."""
        self._cancel_timer(group, kind)
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            task = asyncio.ensure_future(self._run_timer(group, kind, handle, action))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        handle = loop.call_later(max(delay_ms, 0) / 1000, fire)
        group.timers[kind] = handle

    async def _run_timer(self, group: Group, kind: str, handle: asyncio.TimerHandle,
                         action: Callable[[Group], Awaitable[None]]) -> None:
        async with self._group_locks[group.group_id]:
            if group.timers.get(kind) is not handle or group.is_dead:
                return  # cancelled, replaced, or the group left this broker
            del group.timers[kind]
            try:
                await action(group)
            except FranzError as exc:
                log.warning("group %s: %s timer: %s", group.group_id, kind, exc)
            except Exception:
                log.exception("group %s: %s timer failed", group.group_id, kind)

    @staticmethod
    def _cancel_timer(group: Group, kind: str) -> None:
        handle = group.timers.pop(kind, None)
        if handle is not None:
            handle.cancel()

    # --- held requests ------------------------------------------------------------------

    @staticmethod
    def _waiter() -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_retrieve)
        return fut

    def fail_classic_waiters(self, group: Group, error: Callable[[], FranzError]) -> None:
        """Answer every held JoinGroup and SyncGroup of ``group`` with ``error()`` and
        stop its timers (the partition resigned: NOT_COORDINATOR). Not under the lock."""
        for kind in list(group.timers):
            self._cancel_timer(group, kind)
        for m in group.members.values():
            if m.classic is not None:
                _fail(m.classic.join_waiter, error)
                _fail(m.classic.sync_waiter, error)
                m.classic.join_waiter = m.classic.sync_waiter = None

    def stop_classic(self) -> None:
        """The broker stops: every held JoinGroup and SyncGroup gets NOT_COORDINATOR
        (the clients find the next coordinator), no timer fires again."""
        for group in list(self._groups.values()):
            self.fail_classic_waiters(group, lambda: NotCoordinatorError(
                "the coordinator is stopping"))
        for task in list(self._background):
            task.cancel()

    def _fail_syncs(self, group: Group, error: Callable[[], FranzError]) -> None:
        for m in group.members.values():
            if m.classic is not None and m.classic.sync_waiter is not None:
                _fail(m.classic.sync_waiter, error)
                m.classic.sync_waiter = None
                m.touch(self.clock.now_ms())

    def _drop_member(self, group: Group, member_id: str) -> None:
        """Remove a Kafka client's member (``_release`` it first)."""
        self._release(group, group.members.pop(member_id))

    @staticmethod
    def _release(group: Group, m: Member) -> None:
        """A member leaves: a held JoinGroup or SyncGroup of it gets UNKNOWN_MEMBER_ID
        (it may join again as a new member)."""
        if m.classic is not None:
            gone = lambda: UnknownMemberIdError(  # noqa: E731
                f"member {m.member_id!r} was removed from group {group.group_id!r}")
            _fail(m.classic.join_waiter, gone)
            _fail(m.classic.sync_waiter, gone)
            m.classic.join_waiter = m.classic.sync_waiter = None
        group.pending_sync.discard(m.member_id)

    # --- the join phase -----------------------------------------------------------------

    async def _maybe_prepare_or_complete(self, group: Group, reason: str) -> None:
        if group.state in _PREPARABLE:
            await self._prepare(group, reason)
        else:
            await self._maybe_complete_join(group)

    async def _prepare(self, group: Group, reason: str) -> None:
        """Kafka's ``prepareRebalance``: held SyncGroups get REBALANCE_IN_PROGRESS; the
        join phase starts (after the initial delay for an Empty group)."""
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._fail_syncs(group, lambda: RebalanceInProgressError(
                f"group {group.group_id!r} is rebalancing again: join again"))
            for m in group.members.values():
                if m.classic is not None:
                    m.classic.assignment = b""
        self._cancel_timer(group, "sync")
        group.pending_sync.clear()
        initial = group.state is GroupState.EMPTY
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock.now_ms())
        log.info("group %s preparing to rebalance from generation %d (%s)", group.group_id,
                 group.generation, reason)
        if initial:
            delay = self.initial_rebalance_delay_ms
            remaining = max(self._rebalance_timeout(group) - delay, 0)
            self._schedule(group, "join", delay,
                           lambda g: self._initial_delay_over(g, delay, remaining))
            return
        if self._all_joined(group):
            await self._complete_join(group)
        else:
            self._schedule(group, "join", self._rebalance_timeout(group), self._complete_join)

    async def _initial_delay_over(self, group: Group, delay: int, remaining: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            next_delay = min(self.initial_rebalance_delay_ms, remaining)
            next_remaining = max(remaining - delay, 0)
            self._schedule(group, "join", next_delay,
                           lambda g: self._initial_delay_over(g, next_delay, next_remaining))
            return
        await self._complete_join(group)

    async def _maybe_complete_join(self, group: Group) -> None:
        """End the join phase now if every member joined (never during the initial
        delay of a group that was Empty)."""
        if (group.state is GroupState.PREPARING_REBALANCE
                and group.previous_state is not GroupState.EMPTY and self._all_joined(group)):
            await self._complete_join(group)

    async def _complete_join(self, group: Group) -> None:
        """Kafka's ``completeClassicGroupJoin``: remove dynamic members that did not
        rejoin, start the next generation and answer every held JoinGroup."""
        self._cancel_timer(group, "join")
        if group.is_dead or group.state is not GroupState.PREPARING_REBALANCE:
            return
        group.new_member_added = False
        late = [mid for mid, m in group.members.items() if m.classic is not None
                and m.classic.join_waiter is None and m.group_instance_id is None]
        for mid in late:
            self._drop_member(group, mid)
        if late:
            log.info("group %s removed members that did not rejoin in time: %s",
                     group.group_id, late)
        classic = [m for m in group.members.values() if m.classic is not None]
        if not classic:  # REST instances only (or nobody): the server assigns, as always
            await self._server_rebalance(group, reason="the last Kafka client left")
            return
        joined = [m for m in classic if self._joined(m)]
        if not joined:  # only static members that have not rejoined: wait for them
            log.warning("group %s: no Kafka client rejoined; waiting one more rebalance "
                        "timeout", group.group_id)
            self._schedule(group, "join", self._rebalance_timeout(group), self._complete_join)
            return
        leader = group.members.get(group.leader_id or "")
        if leader is None or leader.classic is None or not self._joined(leader):
            leader = joined[0]
        now = self.clock.now_ms()
        group.generation += 1
        group.protocol = self._select_protocol(group)
        group.protocol_type = self._type_of(leader)
        group.leader_id = leader.member_id
        group.transition_to(GroupState.COMPLETING_REBALANCE, now)
        everyone = self._join_members(group)
        for m in joined:
            assert m.classic is not None
            _resolve(m.classic.join_waiter, self._join_result(
                group, m.member_id, members=everyone if m is leader else ()))
            m.classic.join_waiter = None
            m.classic.is_new = False
            m.touch(now)
            group.pending_sync.add(m.member_id)
        generation = group.generation
        self._schedule(group, "sync", self._rebalance_timeout(group),
                       lambda g: self._sync_expired(g, generation))
        log.info("group %s generation %d: protocol %s, leader %s, %d members (%d Kafka "
                 "clients)", group.group_id, generation, group.protocol, group.leader_id,
                 len(group.members), len(classic))

    def _join_members(self, group: Group) -> tuple[JoinGroupMember, ...]:
        return tuple(JoinGroupMember(m.member_id, m.group_instance_id, self._metadata_of(group, m))
                     for m in group.members.values())

    def _join_result(self, group: Group, member_id: str, *,
                     members: tuple[JoinGroupMember, ...] = (), leader: str | None = None,
                     skip_assignment: bool = False) -> JoinGroupResult:
        return JoinGroupResult(
            generation_id=group.generation, protocol_type=group.protocol_type or None,
            protocol_name=group.protocol,
            leader=(group.leader_id or "") if leader is None else leader,
            member_id=member_id, members=members,
            skip_assignment=skip_assignment)

    async def _sync_expired(self, group: Group, generation: int) -> None:
        """The rebalance timeout passed since the join phase ended: members that sent
        no SyncGroup are removed and the group rebalances."""
        if generation != group.generation or not group.pending_sync or group.state not in (
                GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        late = sorted(group.pending_sync)
        for mid in late:
            if mid in group.members:
                self._drop_member(group, mid)
        group.pending_sync.clear()
        await self._prepare(group, f"removing {late}: no SyncGroup in time")

    # --- the sync phase -----------------------------------------------------------------

    async def _leader_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        """Write the leader's assignment, then answer every held SyncGroup (Stable); a
        failed write answers them with the error and the group rebalances again."""
        if self.listener is not None and any(m.classic is None for m in group.members.values()):
            await self.listener.before_rebalance(group, ())  # REST auto-commit first
        self._check_alive(group)
        saved = group.snapshot()
        revoked: dict[str, frozenset[TopicPartition]] = {}
        for mid, m in group.members.items():
            data = assignments.get(mid, b"")
            if m.classic is not None:
                m.classic.assignment = data
                m.assignment = _decoded_partitions(m.classic.protocol_type, data)
            elif not m.manual:
                new = _rest_assignment(group.group_id, mid, data)
                if frozenset(new) != frozenset(m.assignment):
                    revoked[mid] = frozenset(m.assignment) - frozenset(new)
                m.assignment = new
        now = self.clock.now_ms()
        try:
            await self._append(group, [self._metadata_record(group, now)],
                               what=f"the assignment of group {group.group_id!r}")
        except Exception as exc:
            saved.restore()
            if group.is_dead:
                raise
            log.warning("group %s: the leader's assignment of generation %d was not "
                        "written: %s", group.group_id, group.generation, exc)
            error = _append_error(group.group_id, exc)
            self._fail_syncs(group, error)
            for m in group.members.values():
                if m.classic is not None:
                    m.classic.assignment = b""
            await self._maybe_prepare_or_complete(group, "the assignment was not written")
            raise error() from exc
        group.transition_to(GroupState.STABLE, now)
        for m in group.members.values():
            if m.classic is not None and m.classic.sync_waiter is not None:
                _resolve(m.classic.sync_waiter, SyncGroupResult(
                    group.protocol_type or None, group.protocol, m.classic.assignment))
                m.classic.sync_waiter = None
                m.touch(now)
        if self.listener is not None:
            for mid, lost in revoked.items():
                self.listener.on_assignment_changed(group, group.members[mid], lost)
        log.info("group %s generation %d stable (assigned by %s)", group.group_id,
                 group.generation, group.leader_id)

    # --- changes from the REST side and from expiry ----------------------------------------

    async def _classic_change(self, group: Group, leaving: Iterable[Member],
                              mutate: Callable[[Group], None], *, reason: str) -> None:
        """A membership change of a group with Kafka clients made by the coordinator
        itself (a REST instance created, deleted or resubscribed, a member expired): the
        change now, then Kafka's rebalance (nothing is written until its end)."""
        leaving = list(leaving)
        if self.listener is not None and group.members:
            await self.listener.before_rebalance(group, leaving)
        self._check_alive(group)
        for m in leaving:
            self._release(group, m)
        mutate(group)
        await self._resolve_patterns(group)
        await self._maybe_prepare_or_complete(group, reason)

    async def expire_pending(self, group: Group, now_ms: int) -> list[str]:
        """Forget member ids handed out by MEMBER_ID_REQUIRED whose member never joined
        within its session timeout (takes the lock)."""
        async with self._group_locks[group.group_id]:
            gone = [mid for mid, deadline in group.pending_members.items() if deadline < now_ms]
            for mid in gone:
                del group.pending_members[mid]
            if gone and not group.is_dead and \
                    group.state is GroupState.PREPARING_REBALANCE and self._all_joined(group):
                await self._complete_join(group)
        return gone

    # --- requests -----------------------------------------------------------------------

    async def classic_join(self, req: JoinGroupRequest) -> JoinGroupResult:
        group = await self.group(req.group_id, create=True)
        assert group is not None
        async with self._group_locks[req.group_id]:
            self._check_alive(group)
            if not self._accept_joining(group, req.member_id):
                group.pending_members.pop(req.member_id, None)
                raise GroupMaxSizeReachedError(
                    f"group {req.group_id!r} already has {self.group_max_size} members "
                    f"(group.max.size)")
            if req.member_id == UNKNOWN_MEMBER_ID:
                outcome = await self._join_new(group, req)
            else:
                outcome = await self._join_existing(group, req)
        if isinstance(outcome, JoinGroupResult):
            return outcome
        own = min(max(req.rebalance_timeout_ms, 0), MAX_REBALANCE_TIMEOUT_MS)
        cap = max(own, self._rebalance_timeout(group)) + self.initial_rebalance_delay_ms \
            + WAIT_MARGIN_MS  # the barrier waits for the slowest member's timeout
        result: JoinGroupResult = await _await(outcome, cap, "the join phase")
        return result

    def _accept_joining(self, group: Group, member_id: str) -> bool:
        """Kafka's ``acceptJoiningMember`` (group.max.size)."""
        m = group.members.get(member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            awaiting = sum(1 for x in group.members.values() if self._joined(x))
            return (m is not None and self._joined(m)) or awaiting < self.group_max_size
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return m is not None or len(group.members) < self.group_max_size
        return True

    async def _join_new(self, group: Group, req: JoinGroupRequest
                        ) -> JoinGroupResult | asyncio.Future[Any]:
        names = [name for name, _ in req.protocols]
        if not self.supports_protocols(group, req.protocol_type, names):
            raise InconsistentGroupProtocolError(
                f"group {group.group_id!r}: protocol type {req.protocol_type!r} with "
                f"{names} shares no protocol with the members "
                f"({self._shared_description(group)})")
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old = group.static_member_id(req.group_instance_id)
            if old is not None and group.members[old].classic is not None:
                return await self._replace_static(group, old, new_id, req)
            return await self._add_member(group, new_id, req)
        if req.require_known_member_id:
            group.pending_members[new_id] = self.clock.now_ms() + req.session_timeout_ms
            raise MemberIdRequiredError("join again with the member id given", member_id=new_id)
        return await self._add_member(group, new_id, req)

    def _shared_description(self, group: Group) -> str:
        if not group.members:
            return "none"
        shared = set.intersection(*(set(self._protocols_of(m)) for m in group.members.values()))
        types = sorted({self._type_of(m) for m in group.members.values()})
        return f"type {'/'.join(types)}, shared protocols {sorted(shared)}"

    async def _join_existing(self, group: Group, req: JoinGroupRequest
                             ) -> JoinGroupResult | asyncio.Future[Any]:
        mid = req.member_id
        names = [name for name, _ in req.protocols]
        if not self.supports_protocols(group, req.protocol_type, names, member_id=mid):
            raise InconsistentGroupProtocolError(
                f"group {group.group_id!r}: {names} share no protocol with the other "
                f"members ({self._shared_description(group)})")
        if mid in group.pending_members:
            if req.group_instance_id is not None:
                raise InvalidRequestError("a member id handed out by MEMBER_ID_REQUIRED "
                                          "cannot join with a group instance id")
            del group.pending_members[mid]
            return await self._add_member(group, mid, req)
        member = self.validate_member(group, mid, req.group_instance_id)
        assert member.classic is not None
        reason = f"member {mid} rejoined ({req.reason or 'no reason given'})"
        if group.state is GroupState.PREPARING_REBALANCE:
            return await self._update_and_rebalance(group, member, req, reason)
        if group.state is GroupState.COMPLETING_REBALANCE:
            if member.classic.protocols == req.protocols:  # a lost answer: the same again
                everyone = self._join_members(group) if mid == group.leader_id else ()
                return self._join_result(group, mid, members=everyone)
            return await self._update_and_rebalance(group, member, req, reason)
        if group.state is GroupState.STABLE:
            if mid == group.leader_id or member.classic.protocols != req.protocols:
                return await self._update_and_rebalance(group, member, req, reason)
            return self._join_result(group, mid)
        raise UnknownMemberIdError(f"group {group.group_id!r} is {group.state.value}: "
                                   "join again without a member id")

    def validate_member(self, group: Group, member_id: str,
                        group_instance_id: str | None) -> Member:
        """Kafka's ``validateMember``: the instance id (when given) maps to
        ``member_id`` (FENCED_INSTANCE_ID otherwise), and the member is a Kafka
        client's (UNKNOWN_MEMBER_ID otherwise: REST instances are not theirs to use)."""
        if group_instance_id is not None:
            holder = group.static_member_id(group_instance_id)
            if holder is None:
                raise UnknownMemberIdError(
                    f"no member of group {group.group_id!r} has instance id "
                    f"{group_instance_id!r}")
            if holder != member_id:
                raise FencedInstanceIdError(
                    f"instance id {group_instance_id!r} of group {group.group_id!r} is held "
                    f"by another member id now")
        m = group.members.get(member_id)
        if m is None or m.classic is None:
            raise UnknownMemberIdError(
                f"member {member_id!r} is not a member of group {group.group_id!r}")
        return m

    async def _add_member(self, group: Group, member_id: str,
                          req: JoinGroupRequest) -> asyncio.Future[Any]:
        now = self.clock.now_ms()
        member = Member(
            member_id=member_id, client_id=req.client_id, client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            group_instance_id=req.group_instance_id,
            topics=_decoded_topics(req.protocol_type, req.protocols),
            classic=ClassicMember(req.protocol_type, req.protocols, is_new=True),
        )
        member.deadline_ms = now + NEW_MEMBER_JOIN_TIMEOUT_MS
        fut = self._waiter()
        assert member.classic is not None
        member.classic.join_waiter = fut
        if group.state is GroupState.PREPARING_REBALANCE and \
                group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.members[member_id] = member
        await self._maybe_prepare_or_complete(
            group, f"new member {member_id} (instance id {req.group_instance_id}) joined "
                   f"({req.reason or 'no reason given'})")
        return fut

    def _update(self, member: Member, req: JoinGroupRequest) -> asyncio.Future[Any]:
        c = member.classic
        assert c is not None
        _fail(c.join_waiter, lambda: RebalanceInProgressError(
            "a newer JoinGroup of this member replaced this one"))
        c.protocol_type = req.protocol_type
        c.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.topics = _decoded_topics(req.protocol_type, req.protocols)
        c.join_waiter = self._waiter()
        return c.join_waiter

    async def _update_and_rebalance(self, group: Group, member: Member, req: JoinGroupRequest,
                                    reason: str) -> asyncio.Future[Any]:
        fut = self._update(member, req)
        await self._maybe_prepare_or_complete(group, reason)
        return fut

    async def _replace_static(self, group: Group, old_id: str, new_id: str,
                              req: JoinGroupRequest) -> JoinGroupResult | asyncio.Future[Any]:
        """A known static member joins with no member id (KIP-345): it takes the place
        of ``old_id`` (fenced), keeping its assignment."""
        saved = group.snapshot()
        old = group.members[old_id]
        assert old.classic is not None
        fenced = lambda: FencedInstanceIdError(  # noqa: E731
            f"instance id {req.group_instance_id!r} joined again as another member id")
        _fail(old.classic.join_waiter, fenced)
        _fail(old.classic.sync_waiter, fenced)
        old.classic.join_waiter = old.classic.sync_waiter = None
        new = Member(
            member_id=new_id, client_id=old.client_id, client_host=old.client_host,
            session_timeout_ms=old.session_timeout_ms,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            group_instance_id=old.group_instance_id, topics=old.topics,
            assignment=old.assignment,
            classic=ClassicMember(old.classic.protocol_type, old.classic.protocols,
                                  old.classic.assignment))
        members = [(new_id, new) if mid == old_id else (mid, m)
                   for mid, m in group.members.items()]
        group.members.clear()
        group.members.update(members)
        leader_before = group.leader_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        pending_sync = old_id in group.pending_sync
        if pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        new.touch(self.clock.now_ms())
        fut = self._update(new, req)
        log.info("group %s: static member %r replaced member %s by %s (%s)", group.group_id,
                 req.group_instance_id, old_id, new_id, group.state.value)
        if group.state is GroupState.STABLE:
            if self._select_protocol(group) != group.protocol:
                await self._prepare(group, f"static member {new_id} changes the protocol")
                return fut
            assert new.classic is not None
            new.classic.join_waiter = None
            _retire(fut)
            try:
                await self._append(group, [self._metadata_record(group, self.clock.now_ms())],
                                   what=f"the new member id of a static member of group "
                                        f"{group.group_id!r}")
            except Exception:
                saved.restore()
                if pending_sync:
                    group.pending_sync.discard(new_id)
                    group.pending_sync.add(old_id)
                raise
            if req.supports_skip_assignment:
                is_leader = group.leader_id == new_id
                return self._join_result(
                    group, new_id, members=self._join_members(group) if is_leader else (),
                    skip_assignment=is_leader)
            return self._join_result(group, new_id, leader=leader_before or "")
        if group.state is GroupState.COMPLETING_REBALANCE:
            await self._prepare(group, f"static member {new_id} rejoined while syncing")
        else:
            await self._maybe_complete_join(group)
        return fut

    async def classic_sync(self, req: SyncGroupRequest) -> SyncGroupResult:
        group = await self.group(req.group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {req.group_id!r} has no members")
        async with self._group_locks[req.group_id]:
            self._check_alive(group)
            if group.state is GroupState.EMPTY:
                raise UnknownMemberIdError(f"group {req.group_id!r} has no members")
            member = self.validate_member(group, req.member_id, req.group_instance_id)
            assert member.classic is not None
            if req.generation_id != group.generation:
                raise IllegalGenerationError(
                    f"generation {req.generation_id} is not group {req.group_id!r}'s "
                    f"({group.generation})")
            if (req.protocol_type is not None and req.protocol_type != group.protocol_type) \
                    or (req.protocol_name is not None and req.protocol_name != group.protocol):
                raise InconsistentGroupProtocolError(
                    f"group {req.group_id!r} uses {group.protocol_type}/{group.protocol}")
            if group.state is GroupState.PREPARING_REBALANCE:
                raise RebalanceInProgressError(f"group {req.group_id!r} is rebalancing")
            self._synced(group, req.member_id)
            if group.state is GroupState.STABLE:
                return SyncGroupResult(group.protocol_type or None, group.protocol,
                                       member.classic.assignment)
            _fail(member.classic.sync_waiter, lambda: RebalanceInProgressError(
                "a newer SyncGroup of this member replaced this one"))
            fut = member.classic.sync_waiter = self._waiter()
            if req.member_id == group.leader_id:
                await self._leader_sync(group, dict(req.assignments))
        cap = self._rebalance_timeout(group) + WAIT_MARGIN_MS
        result: SyncGroupResult = await _await(fut, cap, "the leader's SyncGroup")
        return result

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel_timer(group, "sync")

    async def classic_heartbeat(self, group_id: str, generation_id: int, member_id: str,
                                group_instance_id: str | None = None) -> None:
        group = await self.group(group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id!r} has no members")
        self._check_alive(group)
        member = self.validate_member(group, member_id, group_instance_id)
        if generation_id != group.generation:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {group_id!r}'s ({group.generation})")
        if group.state is GroupState.EMPTY:
            raise UnknownMemberIdError(f"group {group_id!r} has no members")
        member.touch(self.clock.now_ms())
        if group.state is GroupState.PREPARING_REBALANCE:
            raise RebalanceInProgressError(f"group {group_id!r} is rebalancing: join again")

    async def classic_leave(self, group_id: str,
                            members: Iterable[LeavingMember]) -> list[LeaveResult]:
        members = list(members)
        group = await self.group(group_id)
        if group is None:
            return [LeaveResult(m.member_id, m.group_instance_id, UnknownMemberIdError.error_code)
                    for m in members]
        async with self._group_locks[group_id]:
            self._check_alive(group)
            results: list[LeaveResult] = []
            left: list[str] = []
            pending_left = False
            for who in members:
                code = 0
                try:
                    if who.member_id == UNKNOWN_MEMBER_ID:
                        mid = (group.static_member_id(who.group_instance_id)
                               if who.group_instance_id is not None else None)
                        if mid is None or group.members[mid].classic is None:
                            raise UnknownMemberIdError("no such static member")
                        self._drop_member(group, mid)
                        left.append(mid)
                    elif who.member_id in group.pending_members:
                        del group.pending_members[who.member_id]
                        pending_left = True
                    else:
                        self.validate_member(group, who.member_id, who.group_instance_id)
                        self._drop_member(group, who.member_id)
                        left.append(who.member_id)
                except (UnknownMemberIdError, FencedInstanceIdError) as exc:
                    code = exc.error_code
                results.append(LeaveResult(who.member_id, who.group_instance_id, code))
            if left:
                log.info("group %s: %s left (%s)", group_id, left,
                         "; ".join(sorted({m.reason or "no reason given" for m in members})))
                try:
                    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                        await self._prepare(group, f"{left} left")
                    elif group.state is GroupState.PREPARING_REBALANCE:
                        await self._maybe_complete_join(group)
                except FranzError as exc:  # they left; the rest of the group retries later
                    log.warning("group %s: the rebalance after %s left failed: %s",
                                group_id, left, exc)
            elif pending_left:
                await self._maybe_complete_join(group)
        return results

    async def classic_commit(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: dict[TopicPartition, OffsetCommitEntry]
                             ) -> dict[TopicPartition, int]:
        group = await self.group(group_id, create=generation_id < 0)
        if group is None:  # a generation for a group this coordinator does not know
            raise IllegalGenerationError(f"group {group_id!r} does not exist")
        topics = {tp.topic for tp in offsets}
        counts = await partition_counts(self.backend, topics)
        async with self._group_locks[group_id]:
            self._check_alive(group)
            self._validate_commit(group, generation_id, member_id, group_instance_id)
            now = self.clock.now_ms()
            out: dict[TopicPartition, int] = {}
            entries: dict[TopicPartition, CommittedOffset] = {}
            for tp, entry in offsets.items():
                tp = TopicPartition(*tp)
                metadata = entry.metadata or ""
                if len(metadata) > self.offset_metadata_max_bytes:
                    out[tp] = OffsetMetadataTooLargeError.error_code
                elif not 0 <= tp.partition < counts.get(tp.topic, 0):
                    out[tp] = UnknownTopicOrPartitionError.error_code
                else:
                    entries[tp] = CommittedOffset(entry.offset, metadata, now, entry.leader_epoch)
            if entries:
                try:
                    records = [offset_commit_record(group_id, tp, c) for tp, c in entries.items()]
                except ValueError as exc:
                    raise GroupRecordTooLargeError(
                        f"The offsets of group {group_id!r} cannot be written: {exc}") from None
                await self._append(
                    group, records, on_success=lambda: group.offsets.update(entries),
                    what=f"the offset commit of group {group_id!r} ({len(records)} partitions)")
            out.update(dict.fromkeys(entries, 0))
        return out

    def _validate_commit(self, group: Group, generation_id: int, member_id: str,
                         group_instance_id: str | None) -> None:
        """Kafka's ``ClassicGroup.validateOffsetCommit``."""
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return  # admin tools, consumers without group management
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            self.validate_member(group, member_id, group_instance_id)
            if generation_id != group.generation:
                raise IllegalGenerationError(
                    f"generation {generation_id} is not group {group.group_id!r}'s "
                    f"({group.generation})")
        else:
            raise UnknownMemberIdError(
                f"group {group.group_id!r} has members: a commit without a member id and "
                f"generation (generation {NO_GENERATION}) is refused")
        if group.state is GroupState.COMPLETING_REBALANCE:
            raise RebalanceInProgressError(f"group {group.group_id!r} is rebalancing")

    def classic_describe(self, group: Group | None, group_id: str) -> DescribedGroup:
        if group is None:
            return DescribedGroup(group_id, GroupState.DEAD.value, "", "")
        stable = group.state is GroupState.STABLE
        members = tuple(
            DescribedMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                self._metadata_of(group, m) if stable else b"",
                (m.classic.assignment if m.classic is not None
                 else consumer_protocol.encode_assignment(m.assignment)) if stable else b"")
            for m in group.members.values())
        return DescribedGroup(group_id, group.state.value, group.protocol_type,
                              (group.protocol or "") if stable else "", members)


# --- helpers ------------------------------------------------------------------------------


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


def _retire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.cancel()


def _resolve(fut: asyncio.Future[Any] | None, result: object) -> None:
    if fut is not None and not fut.done():
        fut.set_result(result)


def _fail(fut: asyncio.Future[Any] | None, error: Callable[[], FranzError]) -> None:
    if fut is not None and not fut.done():
        fut.set_exception(error())


async def _await(fut: asyncio.Future[T], cap_ms: int, what: str) -> T:
    """The answer of a held request, waiting at most ``cap_ms`` (then
    REBALANCE_IN_PROGRESS: the client joins again)."""
    try:
        return await asyncio.wait_for(asyncio.shield(fut), max(cap_ms, 1) / 1000)
    except TimeoutError:
        raise RebalanceInProgressError(f"{what} did not end within {cap_ms} ms") from None


def _append_error(group_id: str, exc: BaseException) -> Callable[[], FranzError]:
    """What the members get when the group's record could not be written (Kafka's
    ``appendGroupMetadataErrorToResponseError``)."""
    if isinstance(exc, NotCoordinatorError):
        return lambda: NotCoordinatorError(str(exc))
    if isinstance(exc, GroupRecordTooLargeError):
        return lambda: GroupRecordTooLargeError(exc.message)
    return lambda: CoordinatorNotAvailableError(
        f"the assignment of group {group_id!r} could not be written: {exc}")


def _decoded_topics(protocol_type: str,
                    protocols: tuple[tuple[str, bytes], ...]) -> tuple[str, ...]:
    """The topics a Kafka consumer subscribes to, for describing (first protocol)."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return ()
    try:
        return consumer_protocol.decode_subscription(protocols[0][1]).topics
    except CorruptOffsetsRecordError:
        return ()


def _decoded_partitions(protocol_type: str, data: bytes) -> tuple[TopicPartition, ...]:
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not data:
        return ()
    try:
        return tuple(dict.fromkeys(TopicPartition(t, p) for t, p in
                                   consumer_protocol.decode_assignment(data).partitions))
    except CorruptOffsetsRecordError:
        return ()


def _rest_assignment(group_id: str, member_id: str, data: bytes) -> tuple[TopicPartition, ...]:
    """A REST instance's partitions as the Kafka leader assigned them."""
    if not data:
        return ()
    try:
        return tuple(dict.fromkeys(TopicPartition(t, p) for t, p in
                                   consumer_protocol.decode_assignment(data).partitions))
    except CorruptOffsetsRecordError as exc:
        log.warning("group %s: the leader's assignment of REST instance %s does not "
                    "decode (%s): it gets no partitions", group_id, member_id, exc)
        return ()
