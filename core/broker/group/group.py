"""A consumer group as its coordinator holds it: state, generation, members, offsets.

The state machine is Kafka's classic one (kafka-internals.md 4.2)::

                 first join                 join phase done, members remain
    Empty ------------------> Preparing ------------------------------> Completing
      ^                       Rebalance <----------------------------- Rebalance
      |   join phase done,      |  ^      member joined/left/changed        |
      +-- nobody left ----------+  |                                        | assignment
                                   +--------- member joined/left/changed -- Stable <-+
                                                                             persisted
    any state --> Dead   (offsets partition emigrated, or the group was deleted)

A group's members are REST consumer instances run by the broker itself, Kafka clients
speaking the classic group protocol (a :class:`ClassicMember` on the member), or both.
With REST instances only, a rebalance completes in one step: the coordinator moves the
group through PreparingRebalance and CompletingRebalance to Stable (or Empty) without
awaiting clients, and the assignment comes from ``core.broker.group.assignors``. With a
Kafka client among them the rebalance is Kafka's own (``core.broker.group.classic_engine``):
joins are awaited, the client elected leader assigns, its SyncGroup ends it. The states
and the transitions table are Kafka's either way, so describe-group output and the
records written to ``__consumer_offsets`` read the same as Kafka's.

Not thread-safe; owned by :class:`core.broker.group.coordinator.GroupCoordinator` on the
event loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.broker.group.assignors import Subscription, assign
from core.broker.types import TopicPartition

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """Group states; each docstring says what the classic protocol answers in it."""

    EMPTY = "Empty"
    """No members; may still hold offsets. Join -> PreparingRebalance; heartbeat and
    sync -> UNKNOWN_MEMBER_ID; only "simple" commits (no member) are accepted."""

    PREPARING_REBALANCE = "PreparingRebalance"
    """Collecting joins. Heartbeat and sync -> REBALANCE_IN_PROGRESS; commits from
    members of the previous generation are accepted."""

    COMPLETING_REBALANCE = "CompletingRebalance"
    """Waiting for the leader's assignment. Heartbeat -> NONE; commits ->
    REBALANCE_IN_PROGRESS; a new or changed member sends the group back to
    PreparingRebalance."""

    STABLE = "Stable"
    """Assignment distributed. Heartbeat -> NONE; commits from the current generation;
    a join, leave, failure or changed subscription -> PreparingRebalance."""

    DEAD = "Dead"
    """Metadata being removed (partition unloaded, group deleted). Every request ->
    COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR, the client rediscovers the coordinator."""

    @property
    def confluent_name(self) -> str:
        """The v3 API spelling: ``STABLE``, ``PREPARING_REBALANCE``, ..."""
        return self.name


_VALID_PREVIOUS: Mapping[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransitionError(RuntimeError):
    """A state change the transitions table does not allow: a coordinator bug."""


def check_transition(old: GroupState, new: GroupState) -> None:
    if old not in _VALID_PREVIOUS[new]:
        raise IllegalGroupTransitionError(f"group cannot go from {old.value} to {new.value}")


@dataclass(slots=True, eq=False)
class ClassicMember:
    """What a member that speaks Kafka's classic group protocol itself brings (a Kafka
    client's JoinGroup): its protocol type and protocols (name, metadata) in its order of
    preference, the assignment its leader gave it (opaque bytes), and the requests of it
    the coordinator holds: a JoinGroup awaiting the end of the join phase, a SyncGroup
    awaiting the leader's. ``is_new``: joined, never part of a generation yet (its
    deadline is the new-member join timeout, and awaiting a join does not keep it alive).
    """

    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    is_new: bool = False
    join_waiter: asyncio.Future[Any] | None = None
    sync_waiter: asyncio.Future[Any] | None = None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    @property
    def satisfied(self) -> bool:
        """Kafka's ``hasSatisfiedHeartbeat``: a member (not new) with a JoinGroup or
        SyncGroup held by the coordinator is not expired meanwhile."""
        return not self.is_new and (self.join_waiter is not None
                                    or self.sync_waiter is not None)


@dataclass(slots=True)
class Member:
    """One group member: a REST consumer instance, or a Kafka client (``classic``).

    ``topics`` is the subscription the assignor sees (for a pattern subscription: the
    topics the pattern matched at the last metadata refresh). ``manual`` members chose
    their partitions with ``assign``: their ``assignment`` is theirs, and the assignor
    skips them. ``properties`` are the instance settings (format, auto.offset.reset...),
    opaque to the coordinator but persisted with the member. ``runtime`` is the consumer
    manager's per-instance state (positions); it lives and dies with this object, so a
    member restored from the log starts with none. ``classic`` is set for a member that
    speaks Kafka's classic protocol itself (a Kafka client): its ``topics`` and
    ``assignment`` are decoded from its own metadata and assignment, for describing
    only; the assignor never sees it (its leader assigns).
    """

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    manual: bool = False
    assignment: tuple[TopicPartition, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)
    deadline_ms: int = 0
    runtime: Any = None
    classic: ClassicMember | None = None

    @property
    def is_subscribed(self) -> bool:
        """Takes part in the assignor's work (subscribe mode with a pattern or topics)."""
        return (self.classic is None and not self.manual
                and (bool(self.topics) or self.pattern is not None))

    def touch(self, now_ms: int) -> None:
        """A heartbeat: push the expiry to now + session timeout."""
        self.deadline_ms = now_ms + self.session_timeout_ms


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed offset: the next offset the group will consume."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: GroupState
    protocol_type: str  # "" for a "simple" group that only holds offsets
    is_simple: bool


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol: str | None  # the partition assignor in use
    generation: int
    leader: str | None
    is_simple: bool
    coordinator_partition: int
    members: tuple[MemberDescription, ...]


class Group:
    """A group's membership, generation and committed offsets.

    Lifecycle: made by the coordinator on first join or commit, or when its offsets
    partition is loaded; Dead (and dropped) when that partition is unloaded or the group
    is deleted.
    """

    def __init__(
        self,
        group_id: str,
        *,
        partition: int,
        state: GroupState = GroupState.EMPTY,
        protocol_type: str = "",
        generation: int = 0,
        protocol: str | None = None,
        leader_id: str | None = None,
        state_timestamp_ms: int = -1,
    ) -> None:
        self.group_id = group_id
        self.partition = partition  # of __consumer_offsets
        self.state = state
        self.protocol_type = protocol_type
        self.generation = generation
        self.protocol = protocol
        self.leader_id = leader_id
        self.state_timestamp_ms = state_timestamp_ms
        self.members: dict[str, Member] = {}  # insertion order = join order
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        # the leader epoch of __consumer_offsets-<partition> this group was loaded (or
        # made) at: its writes are refused under any other (-1: none, never written)
        self.loaded_epoch = -1
        # the classic protocol's rebalance in memory only (core.broker.group.classic_engine)
        self.previous_state: GroupState | None = None
        self.pending_members: dict[str, int] = {}  # KIP-394 ids handed out -> deadline
        self.pending_sync: set[str] = set()  # joined this generation, no SyncGroup yet
        self.new_member_added = False  # a member joined during the initial delay
        self.timers: dict[str, asyncio.TimerHandle] = {}  # "join" / "sync" deadlines

    def __repr__(self) -> str:
        return (
            f"Group({self.group_id!r}, {self.state.value}, generation={self.generation}, "
            f"members={list(self.members)})"
        )

    # --- state ----------------------------------------------------------------------

    def transition_to(self, new: GroupState, now_ms: int) -> None:
        check_transition(self.state, new)
        self.previous_state = self.state
        self.state = new
        self.state_timestamp_ms = now_ms

    @property
    def is_dead(self) -> bool:
        return self.state is GroupState.DEAD

    @property
    def is_unwritten(self) -> bool:
        """Made for a first join or commit whose write has not succeeded (or failed): no
        members, no offsets, never rebalanced. Lookups treat it as absent."""
        return (self.generation == 0 and not self.members and not self.offsets
                and not self.pending_members)

    def snapshot(self) -> GroupSnapshot:
        """What a membership change may alter, to put back if its write fails."""
        return GroupSnapshot(self)

    @property
    def is_simple(self) -> bool:
        """A group that only commits offsets and never had members through the protocol."""
        return self.protocol_type == "" and not self.members

    @property
    def has_classic_members(self) -> bool:
        """Some member is a Kafka client: rebalances follow the classic protocol."""
        return any(m.classic is not None for m in self.members.values())

    def static_member_id(self, group_instance_id: str) -> str | None:
        """The member id holding ``group_instance_id`` (KIP-345), if any."""
        for m in self.members.values():
            if m.group_instance_id == group_instance_id:
                return m.member_id
        return None

    # --- rebalance in three steps (each legal per the transitions table) -------------

    def prepare_rebalance(self, now_ms: int) -> None:
        if self.state is not GroupState.PREPARING_REBALANCE:
            self.transition_to(GroupState.PREPARING_REBALANCE, now_ms)

    def complete_join(self, protocol: str, now_ms: int) -> None:
        """End of the join phase: new generation, protocol and leader (or Empty)."""
        self.generation += 1
        if not self.members:
            self.protocol = None
            self.leader_id = None
            self.transition_to(GroupState.EMPTY, now_ms)
            return
        self.protocol_type = CONSUMER_PROTOCOL_TYPE
        self.protocol = protocol
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)

    def complete_sync(
        self, assignment: Mapping[str, Iterable[TopicPartition]], now_ms: int
    ) -> dict[str, frozenset[TopicPartition]]:
        """Install the assignment (members not named keep theirs, e.g. manual ones) and
        go Stable. Returns, for each member whose partitions changed, the ones it lost
        (possibly none)."""
        revoked: dict[str, frozenset[TopicPartition]] = {}
        for member_id, member in self.members.items():
            if member_id in assignment:
                new = tuple(TopicPartition(t, p) for t, p in assignment[member_id])
                if frozenset(new) != frozenset(member.assignment):
                    revoked[member_id] = frozenset(member.assignment) - frozenset(new)
                member.assignment = new
        self.transition_to(GroupState.STABLE, now_ms)
        log.info(
            "group %s generation %d stable: %s",
            self.group_id,
            self.generation,
            {m: len(a) for m, a in ((m.member_id, m.assignment) for m in self.members.values())},
        )
        return revoked

    # --- views ------------------------------------------------------------------------

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() if m.is_subscribed for t in m.topics}

    def topics_in_use(self) -> set[str]:
        """Every topic a member reads: Kafka clients' own subscriptions, REST instances'
        subscriptions (a pattern's matches) and the topics of their manual assignments
        (OffsetDelete refuses these: Kafka's ``isSubscribedToTopic``)."""
        return {t for m in self.members.values()
                for t in (*m.topics, *(tp.topic for tp in m.assignment if m.manual))}

    def expired_members(self, now_ms: int) -> list[str]:
        return [m.member_id for m in self.members.values() if m.deadline_ms < now_ms
                and (m.classic is None or not m.classic.satisfied)]

    def summary(self) -> GroupSummary:
        return GroupSummary(self.group_id, self.state, self.protocol_type, self.is_simple)

    def describe(self) -> GroupDescription:
        members = tuple(
            MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.topics, m.assignment
            )
            for m in self.members.values()
        )
        return GroupDescription(
            self.group_id,
            self.state,
            self.protocol_type,
            self.protocol,
            self.generation,
            self.leader_id,
            self.is_simple,
            self.partition,
            members,
        )


class GroupSnapshot:
    """A group's membership state at one moment: state, generation, protocol, leader,
    the members (same objects, same order) and each member's subscription and assignment.
    Committed offsets are not part of it (they change only after their own write).
    ``restore`` puts it back, unless the group went Dead meanwhile (it stays Dead)."""

    __slots__ = ("_group", "_fields", "_members", "_member_fields")

    def __init__(self, group: Group) -> None:
        self._group = group
        self._fields = (group.state, group.protocol_type, group.generation, group.protocol,
                        group.leader_id, group.state_timestamp_ms)
        self._members = dict(group.members)
        self._member_fields = {
            mid: (m.topics, m.pattern, m.manual, m.assignment,
                  None if m.classic is None else (m.classic.protocols, m.classic.assignment,
                                                  m.session_timeout_ms,
                                                  m.rebalance_timeout_ms))
            for mid, m in group.members.items()
        }

    def restore(self) -> None:
        g = self._group
        if g.is_dead:
            return
        (g.state, g.protocol_type, g.generation, g.protocol, g.leader_id,
         g.state_timestamp_ms) = self._fields
        g.members.clear()
        g.members.update(self._members)
        for mid, member in self._members.items():
            member.topics, member.pattern, member.manual, member.assignment, classic = (
                self._member_fields[mid])
            if classic is not None and member.classic is not None:
                (member.classic.protocols, member.classic.assignment,
                 member.session_timeout_ms, member.rebalance_timeout_ms) = classic


def compute_assignment(
    group: Group, strategy: str, partitions_per_topic: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """The assignor's answer for the group's subscribed members (manual members and
    Kafka clients are left out; members without a subscription get nothing). Pure."""
    subscriptions = {
        m.member_id: Subscription(tuple(m.topics), owned=tuple(m.assignment))
        for m in group.members.values()
        if m.is_subscribed
    }
    result: dict[str, list[TopicPartition]] = {
        m.member_id: [] for m in group.members.values() if not m.manual and m.classic is None
    }
    if subscriptions:
        for member_id, tps in assign(strategy, subscriptions, partitions_per_topic).items():
            result[member_id] = [TopicPartition(t, p) for t, p in tps]
    return result
