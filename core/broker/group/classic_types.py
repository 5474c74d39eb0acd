"""Arguments and answers of Kafka's classic group protocol as the coordinator takes and
gives them (``core.broker.group.classic.ClassicGroups``). Field names and meanings are
Kafka's (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, DescribeGroups);
errors are raised as domain errors (``core.broker.errors``) carrying Kafka's
``error_code``, except where Kafka answers per member or per partition.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.broker.types import TopicPartition

#: Kafka's UNKNOWN_MEMBER_ID: the member id of a first JoinGroup, of a simple commit.
UNKNOWN_MEMBER_ID = ""
#: generation of a commit from outside group management ("simple" commits, admin tools)
NO_GENERATION = -1

# Bounds on what one member may bring (the whole group is written in one record of
# __consumer_offsets, on the event loop, at every rebalance).
MAX_PROTOCOLS = 32
MAX_PROTOCOL_NAME_LENGTH = 255
MAX_MEMBER_METADATA_BYTES = 1 << 20  # all of one member's protocol metadata together
MAX_ASSIGNMENT_BYTES = 1 << 20  # one member's assignment in a SyncGroup
MAX_ID_LENGTH = 1024  # member ids, group instance ids and client ids, as stored


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    """A JoinGroup. ``protocols``: (name, metadata) in the client's order of preference
    (for protocol type ``consumer``: assignor names and ConsumerProtocolSubscription
    bytes). ``require_known_member_id``: JoinGroup v4+ (a first join gets
    MEMBER_ID_REQUIRED); ``supports_skip_assignment``: v9+ (KIP-814). ``client_id`` and
    ``client_host`` come from the request header and the connection; v0 has no rebalance
    timeout (pass the session timeout, as Kafka does)."""

    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    reason: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    supports_skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """One member as the leader's JoinGroup answer lists it (metadata for the protocol
    chosen); REST consumer instances are listed as Kafka consumers (their subscription)."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """A JoinGroup's answer: the generation, the protocol chosen, the leader, this
    member's id; the leader alone gets ``members``. ``skip_assignment`` (v9+): the
    leader must not assign (a static leader that rejoined without a rebalance)."""

    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    """A SyncGroup. ``assignments``: the leader's (member id -> assignment bytes); empty
    from followers. ``protocol_type`` / ``protocol_name`` (v5+) are checked when set."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


@dataclass(frozen=True, slots=True)
class LeavingMember:
    """One member of a LeaveGroup (v3+: several; ``member_id`` empty with a
    ``group_instance_id`` removes that static member, as admin tools do)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    """Kafka's per-member answer of LeaveGroup: ``error_code`` 0 when it left (25
    UNKNOWN_MEMBER_ID, 82 FENCED_INSTANCE_ID otherwise)."""

    member_id: str
    group_instance_id: str | None
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class OffsetCommitEntry:
    """One partition of an OffsetCommit: the next offset to consume, its metadata (None
    is stored as ""), the leader epoch of the last record consumed (-1: unknown)."""

    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # empty unless the group is Stable (Kafka's describeNoMetadata)
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """DescribeGroups of one group: ``state`` in Kafka's spelling (``Stable``,
    ``PreparingRebalance``, ``CompletingRebalance``, ``Empty``, ``Dead`` for a group
    that does not exist); ``protocol`` only while Stable."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class CoordinatorLocation:
    """FindCoordinator of a group: its ``__consumer_offsets`` partition, the broker that
    leads it (-1: none now) and whether that is this broker (its groups are served
    here)."""

    partition: int
    leader_id: int
    is_local: bool


__all__ = [
    "MAX_ASSIGNMENT_BYTES",
    "MAX_ID_LENGTH",
    "MAX_MEMBER_METADATA_BYTES",
    "MAX_PROTOCOLS",
    "MAX_PROTOCOL_NAME_LENGTH",
    "NO_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "CoordinatorLocation",
    "DescribedGroup",
    "DescribedMember",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResult",
    "LeaveResult",
    "LeavingMember",
    "OffsetCommitEntry",
    "SyncGroupRequest",
    "SyncGroupResult",
    "TopicPartition",
]
