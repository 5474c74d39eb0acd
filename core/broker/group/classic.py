"""Kafka's classic group protocol as a Python API: what the Kafka wire door's group
handlers call (``Broker.classic_groups``).

:class:`ClassicGroups` serves the groups this broker coordinates, and only those: a
Kafka client finds its group's coordinator with FindCoordinator
(:meth:`ClassicGroups.find_coordinator`) and talks to it directly, so nothing here is
forwarded to another broker; a group whose ``__consumer_offsets`` partition is not led
here raises :class:`NotCoordinatorError` (the client looks again), one still loading
waits for the load. The rules are Kafka's (``core.broker.group.classic_engine``); the
arguments and answers are the dataclasses of ``core.broker.group.classic_types``.

Errors are raised as ``core.broker.errors`` classes carrying Kafka's ``error_code``:

================  ========================================================================
join_group        MemberIdRequiredError (79; ``.member_id`` is the id to join with),
                  InconsistentGroupProtocolError (23), InvalidSessionTimeoutError (26),
                  UnknownMemberIdError (25), FencedInstanceIdError (82),
                  GroupMaxSizeReachedError (81), RebalanceInProgressError (27: the join
                  phase outlived its cap, join again), InvalidGroupIdError (24),
                  InvalidRequestError (42), NotCoordinatorError (16),
                  CoordinatorLoadInProgressError (14)
sync_group        UnknownMemberIdError, IllegalGenerationError (22),
                  RebalanceInProgressError, InconsistentGroupProtocolError,
                  FencedInstanceIdError, NotCoordinatorError,
                  CoordinatorNotAvailableError (15) / GroupRecordTooLargeError (28) when
                  the assignment could not be written
heartbeat         UnknownMemberIdError, IllegalGenerationError, FencedInstanceIdError,
                  RebalanceInProgressError (join again), NotCoordinatorError
leave_group       per member in the answer (25, 82); NotCoordinatorError for the request
commit_offsets    IllegalGenerationError, UnknownMemberIdError, FencedInstanceIdError,
                  RebalanceInProgressError for the request; per partition in the answer
                  (12 OFFSET_METADATA_TOO_LARGE, 3 UNKNOWN_TOPIC_OR_PARTITION)
================  ========================================================================

A JoinGroup answered with an error carries ``exc.member_id`` when the error has one
(MEMBER_ID_REQUIRED), else the request's member id. The wire door checks ACLs (READ on
the group; READ on each topic committed) before calling.

Event-loop only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from core.broker.errors import (
    CoordinatorLoadInProgressError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    NotCoordinatorError,
)
from core.broker.group import consumer_protocol
from core.broker.group.classic_types import (
    MAX_ASSIGNMENT_BYTES,
    MAX_ID_LENGTH,
    MAX_MEMBER_METADATA_BYTES,
    MAX_PROTOCOL_NAME_LENGTH,
    MAX_PROTOCOLS,
    CoordinatorLocation,
    DescribedGroup,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveResult,
    LeavingMember,
    OffsetCommitEntry,
    SyncGroupRequest,
    SyncGroupResult,
)
from core.broker.group.coordinator import GroupCoordinator
from core.broker.group.group import CONSUMER_PROTOCOL_TYPE, CommittedOffset, GroupSummary
from core.broker.group.offsets_codec import CorruptOffsetsRecordError
from core.broker.group.records import is_franz_user_data
from core.broker.types import TopicPartition
from core.errors import InvalidRequestError

DEFAULT_MIN_SESSION_TIMEOUT_MS = 6_000  # Kafka's group.min.session.timeout.ms
DEFAULT_MAX_SESSION_TIMEOUT_MS = 1_800_000  # Kafka's group.max.session.timeout.ms


class ClassicGroups:
    """The classic group protocol over ``coordinator`` (the consumer manager's)."""

    def __init__(self, coordinator: GroupCoordinator, *,
                 min_session_timeout_ms: int = DEFAULT_MIN_SESSION_TIMEOUT_MS,
                 max_session_timeout_ms: int = DEFAULT_MAX_SESSION_TIMEOUT_MS) -> None:
        if not 0 < min_session_timeout_ms <= max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must be positive and at most "
                             "group.max.session.timeout.ms")
        self.coordinator = coordinator
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms

    # --- finding the coordinator ----------------------------------------------------------

    def find_coordinator(self, group_id: str) -> CoordinatorLocation:
        """FindCoordinator (key type GROUP): the group's partition of
        ``__consumer_offsets``, its leader as this broker's metadata names it, and
        whether this broker serves the group now."""
        partition = self.coordinator.partition_for(group_id)
        return CoordinatorLocation(partition,
                                   self.coordinator.backend.offsets_leader(partition),
                                   self.coordinates(group_id))

    def coordinates(self, group_id: str) -> bool:
        """This broker leads the group's offsets partition now (loaded or loading)."""
        partition = self.coordinator.partition_for(group_id)
        try:
            self.coordinator.runtime.loaded(partition)
        except NotCoordinatorError:
            return False
        except CoordinatorLoadInProgressError:
            return True
        return True

    # --- membership -------------------------------------------------------------------------

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResult:
        """JoinGroup: held until the join phase ends (see the module doc of
        ``classic_engine``), at most the rebalance timeout and a margin."""
        _check_group_id(req.group_id)
        if not self.min_session_timeout_ms <= req.session_timeout_ms <= \
                self.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {req.session_timeout_ms} ms is outside "
                f"{self.min_session_timeout_ms}..{self.max_session_timeout_ms} ms "
                f"(group.min.session.timeout.ms, group.max.session.timeout.ms)")
        if req.rebalance_timeout_ms < 0:
            raise InvalidRequestError("the rebalance timeout must not be negative")
        _check_protocols(req)
        for what, value in (("member id", req.member_id), ("client id", req.client_id),
                            ("group instance id", req.group_instance_id or "")):
            if len(value) > MAX_ID_LENGTH:
                raise InvalidRequestError(f"the {what} is longer than {MAX_ID_LENGTH}")
        if req.group_instance_id == "":
            raise InvalidRequestError("the group instance id must not be empty")
        return await self.coordinator.classic_join(req)

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResult:
        """SyncGroup: the leader's assignment is written before anyone gets theirs;
        followers wait for it (at most the rebalance timeout and a margin)."""
        _check_group_id(req.group_id)
        seen: set[str] = set()
        for member_id, data in req.assignments:
            if member_id in seen:
                raise InvalidRequestError(f"member {member_id!r} is assigned twice")
            seen.add(member_id)
            if len(data) > MAX_ASSIGNMENT_BYTES:
                raise InvalidRequestError(
                    f"the assignment of {member_id!r} is larger than {MAX_ASSIGNMENT_BYTES}")
        return await self.coordinator.classic_sync(req)

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> None:
        """Heartbeat: the member stays (its session timeout from now);
        RebalanceInProgressError while the group waits for members to join again."""
        _check_group_id(group_id)
        await self.coordinator.classic_heartbeat(group_id, generation_id, member_id,
                                                 group_instance_id)

    async def leave_group(self, group_id: str,
                          members: Iterable[LeavingMember]) -> list[LeaveResult]:
        """LeaveGroup (v0-2: one member; v3+: several, per-member answers)."""
        _check_group_id(group_id)
        return await self.coordinator.classic_leave(group_id, members)

    # --- offsets ------------------------------------------------------------------------------

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: Mapping[TopicPartition, OffsetCommitEntry]
                             ) -> dict[TopicPartition, int]:
        """OffsetCommit: a member's (its generation and member id checked, Kafka's
        rules) or a "simple" one (generation -1, no member id: only while the group has
        no members). Returns the error code per partition (0: written)."""
        _check_group_id(group_id)
        entries = {TopicPartition(*tp): e for tp, e in offsets.items()}
        if not entries:
            return {}
        return await self.coordinator.classic_commit(group_id, generation_id, member_id,
                                                     group_instance_id, entries)

    async def fetch_offsets(self, group_id: str,
                            partitions: Iterable[TopicPartition] | None = None
                            ) -> dict[TopicPartition, CommittedOffset]:
        """OffsetFetch: the committed offsets (all of the group's for None); partitions
        without one are left out (the wire answers offset -1)."""
        _check_group_id(group_id)
        return await self.coordinator.committed(
            group_id, None if partitions is None else [TopicPartition(*tp) for tp in partitions])

    # --- admin -------------------------------------------------------------------------------

    async def describe_group(self, group_id: str) -> DescribedGroup:
        """DescribeGroups of one group ("Dead" when there is none), REST instances
        included as Kafka consumers (their subscription and assignment)."""
        _check_group_id(group_id)
        group = await self.coordinator.group(group_id)
        return self.coordinator.classic_describe(group, group_id)

    def list_groups(self) -> list[GroupSummary]:
        """ListGroups: the groups this broker coordinates (state, protocol type)."""
        return self.coordinator.list_groups()

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups of one group: GroupIdNotFoundError (69), NonEmptyGroupError (68)."""
        _check_group_id(group_id)
        await self.coordinator.delete_group(group_id)


def _check_group_id(group_id: str) -> None:
    if not group_id:
        raise InvalidGroupIdError("the group id must not be empty")


def _check_protocols(req: JoinGroupRequest) -> None:
    """Bounded metadata, distinct names; a consumer's subscription may not pass for a
    REST instance's (franz's user data: a reload would read it as one)."""
    if len(req.protocols) > MAX_PROTOCOLS:
        raise InvalidRequestError(f"more than {MAX_PROTOCOLS} protocols")
    if len(req.protocol_type) > MAX_PROTOCOL_NAME_LENGTH:
        raise InvalidRequestError("the protocol type is too long")
    names = [name for name, _ in req.protocols]
    if len(set(names)) != len(names):
        raise InvalidRequestError("a protocol is named twice")
    if any(not name or len(name) > MAX_PROTOCOL_NAME_LENGTH for name in names):
        raise InvalidRequestError(
            f"protocol names must have 1 to {MAX_PROTOCOL_NAME_LENGTH} characters")
    if sum(len(data) for _, data in req.protocols) > MAX_MEMBER_METADATA_BYTES:
        raise InvalidRequestError(
            f"the protocol metadata is larger than {MAX_MEMBER_METADATA_BYTES} bytes")
    if req.protocol_type == CONSUMER_PROTOCOL_TYPE:
        for _, data in req.protocols:
            try:
                subscription = consumer_protocol.decode_subscription(data)
            except CorruptOffsetsRecordError:
                continue  # the client's business; it is kept as it came
            if is_franz_user_data(subscription.user_data):
                raise InvalidRequestError("the subscription's user data is reserved")


__all__ = ["ClassicGroups"]
