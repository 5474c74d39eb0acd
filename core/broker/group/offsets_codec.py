"""Record formats of ``__consumer_offsets``.

Every key and value starts with a big-endian int16 **version**; the fields follow in
Kafka's classic (non-flexible) encoding unless the version is flexible (both in
``core.broker.group.wire_primitives``).

Keys (the key version tells the record type)::

    offset commit   v0, v1 (v1 written)  group string, topic string, partition int32
    group metadata  v2                   group string
    v3 and later    KIP-848 consumer-group records: decode_key returns None (skip them)

Offset commit value (v3 written; v1 when an expire timestamp is set, as Kafka does)::

    v0, v2   offset int64, metadata string, commit_timestamp int64
    v1       offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
    v3       offset int64, leader_epoch int32 (-1 none), metadata string, commit_timestamp int64
    v4       as v3, flexible

Group metadata value (v3 written)::

    protocol_type string, generation int32, protocol nullable string,
    leader nullable string, current_state_timestamp int64 (v2+),
    members array of:
        member_id string, group_instance_id nullable string (v3+), client_id string,
        client_host string, rebalance_timeout int32 (v1+), session_timeout int32,
        subscription bytes, assignment bytes
    v4: as v3, flexible

``subscription`` and ``assignment`` are opaque here; for the consumer protocol they
carry the blobs of ``core.broker.group.consumer_protocol``.

A record with a null value is a tombstone; that is the caller's business (there is
nothing to decode). Keys and values must be consumed exactly: trailing bytes mean
corruption.

Decoders raise :class:`CorruptOffsetsRecordError` on malformed input; encoders raise
``ValueError`` on values the format cannot hold (too-long strings, out-of-range ints).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.broker.group.wire_primitives import (
    CorruptOffsetsRecordError,
    Reader,
    Writer,
    check_version,
)

__all__ = [
    "CorruptOffsetsRecordError",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_EXPIRE_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3

_MAX_OFFSET_COMMIT_VALUE_VERSION = 4
_MAX_GROUP_METADATA_VALUE_VERSION = 4
_FIRST_FLEXIBLE_VERSION = 4
_NO_EPOCH = -1
_NO_TIMESTAMP = -1


# -- records ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Key of a committed offset: one per (group, topic, partition)."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset (the next offset to consume). ``leader_epoch`` -1 = unknown;
    ``expire_timestamp`` only exists for commits of old clients that set a retention."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """Key of a group's metadata record."""

    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member as stored with its group; ``subscription``/``assignment`` are the
    embedded consumer-protocol blobs (see ``core.broker.group.consumer_protocol``)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's generation, protocol, leader and members. ``current_state_timestamp``
    -1 = unknown (versions before 2)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]



# -- keys ---------------------------------------------------------------------------


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    """Key version 1: group, topic, partition."""
    w = Writer(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.int32(key.partition)
    return w.getvalue()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    """Key version 2: group."""
    w = Writer(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.getvalue()


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The record type and key of a ``__consumer_offsets`` key; None for key versions
    after 2 (KIP-848 records a classic coordinator skips)."""
    r = Reader(data, "offsets key")
    version = r.int16()
    key: OffsetCommitKey | GroupMetadataKey
    if version in (0, 1):
        key = OffsetCommitKey(group=r.string(), topic=r.string(), partition=r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(group=r.string())
    elif version > GROUP_METADATA_KEY_VERSION:
        return None
    else:
        raise r.corrupt(f"negative key version {version}")
    r.expect_end()
    return key


# -- offset commit value ------------------------------------------------------------


def encode_offset_commit_value(value: OffsetCommitValue, *, version: int | None = None) -> bytes:
    """Value version 3, or 1 when ``expire_timestamp`` is set (Kafka's rule; v1 has no
    leader epoch). ``version`` forces one of 0-4 for older or newer readers; fields the
    chosen version lacks are dropped."""
    if version is None:
        has_expiry = value.expire_timestamp is not None
        version = OFFSET_COMMIT_VALUE_EXPIRE_VERSION if has_expiry else OFFSET_COMMIT_VALUE_VERSION
    check_version(version, _MAX_OFFSET_COMMIT_VALUE_VERSION, "offset commit value")
    w = Writer(version, flexible=version >= _FIRST_FLEXIBLE_VERSION)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        expire = value.expire_timestamp
        w.int64(_NO_TIMESTAMP if expire is None else expire)
    w.maybe_tagged_fields()
    return w.getvalue()


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    """An offset commit value of version 0-4. A v1 expire timestamp of -1 reads as None."""
    r = Reader(data, "offset commit value")
    version = r.int16()
    if not 0 <= version <= _MAX_OFFSET_COMMIT_VALUE_VERSION:
        raise r.corrupt(f"unknown offset commit value version {version}")
    r.flexible = version >= _FIRST_FLEXIBLE_VERSION
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else _NO_EPOCH
    metadata = r.string()
    commit_timestamp = r.int64()
    expire = r.int64() if version == 1 else _NO_TIMESTAMP
    r.maybe_skip_tagged_fields()
    r.expect_end()
    return OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=None if expire == _NO_TIMESTAMP else expire,
    )


# -- group metadata value -----------------------------------------------------------


def encode_group_metadata_value(
    value: GroupMetadataValue, *, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    """Value version 3 by default; ``version`` may force 0-4 (older versions drop the
    fields they lack: state timestamp < 2, instance id < 3, rebalance timeout < 1)."""
    check_version(version, _MAX_GROUP_METADATA_VALUE_VERSION, "group metadata value")
    w = Writer(version, flexible=version >= _FIRST_FLEXIBLE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.nullable_string(value.protocol)
    w.nullable_string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_length(len(value.members))
    for member in value.members:
        _write_member(w, member, version)
    w.maybe_tagged_fields()
    return w.getvalue()


def _write_member(w: Writer, member: MemberMetadata, version: int) -> None:
    w.string(member.member_id)
    if version >= 3:
        w.nullable_string(member.group_instance_id)
    w.string(member.client_id)
    w.string(member.client_host)
    if version >= 1:
        w.int32(member.rebalance_timeout)
    w.int32(member.session_timeout)
    w.bytes_(member.subscription)
    w.bytes_(member.assignment)
    w.maybe_tagged_fields()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    """A group metadata value of version 0-4. As in Kafka, a v0 member's rebalance
    timeout is its session timeout."""
    r = Reader(data, "group metadata value")
    version = r.int16()
    if not 0 <= version <= _MAX_GROUP_METADATA_VALUE_VERSION:
        raise r.corrupt(f"unknown group metadata value version {version}")
    r.flexible = version >= _FIRST_FLEXIBLE_VERSION
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp = r.int64() if version >= 2 else _NO_TIMESTAMP
    members = tuple(_read_member(r, version) for _ in range(r.array_length()))
    r.maybe_skip_tagged_fields()
    r.expect_end()
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=timestamp,
        members=members,
    )


def _read_member(r: Reader, version: int) -> MemberMetadata:
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout = r.int32() if version >= 1 else None
    session_timeout = r.int32()
    subscription = r.bytes_()
    assignment = r.bytes_()
    r.maybe_skip_tagged_fields()
    return MemberMetadata(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout=session_timeout if rebalance_timeout is None else rebalance_timeout,
        session_timeout=session_timeout,
        subscription=subscription,
        assignment=assignment,
    )
