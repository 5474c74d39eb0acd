"""Record formats of ``__consumer_offsets`` and of the embedded consumer protocol.

Every key and value starts with a big-endian int16 **version**; the fields follow in
Kafka's classic (non-flexible) encoding unless the version is flexible::

    int16/int32/int64   big-endian, signed
    string              int16 length + UTF-8 bytes        (nullable: length -1 = null)
    bytes               int32 length + bytes              (nullable: length -1 = null)
    array               int32 count + elements
    flexible versions   compact string/bytes/array: unsigned varint (length + 1), 0 = null;
                        each struct ends with tagged fields: uvarint count, then per field
                        uvarint tag, uvarint size, size bytes (unknown tags are skipped)

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

A record with a null value is a tombstone; that is the caller's business (there is
nothing to decode). Keys and values must be consumed exactly: trailing bytes mean
corruption.

Embedded consumer protocol (inside ``subscription`` and ``assignment`` above; classic
encoding only)::

    ConsumerProtocolSubscription  v0: topics [string], user_data nullable bytes
                                  v1+: owned_partitions [topic string, partitions [int32]]
                                  v2+: generation_id int32;  v3+: rack_id nullable string
    ConsumerProtocolAssignment    v0+: assigned [topic string, partitions [int32]],
                                  user_data nullable bytes

Like Kafka's ``ConsumerProtocol``, decoders read a newer consumer-protocol version with
the newest layout they know and ignore what follows.

Decoders raise :class:`CorruptOffsetsRecordError` on malformed input; encoders raise
``ValueError`` on values the format cannot hold (too-long strings, out-of-range ints).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.errors import FranzError

__all__ = [
    "ConsumerAssignment",
    "ConsumerSubscription",
    "CorruptOffsetsRecordError",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "decode_assignment",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_subscription",
    "encode_assignment",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "encode_subscription",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_EXPIRE_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3
SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 1

_MAX_OFFSET_COMMIT_VALUE_VERSION = 4
_MAX_GROUP_METADATA_VALUE_VERSION = 4
_MAX_SUBSCRIPTION_VERSION = 3
_FIRST_FLEXIBLE_VERSION = 4
_NO_EPOCH = -1
_NO_TIMESTAMP = -1


class CorruptOffsetsRecordError(FranzError):
    """A ``__consumer_offsets`` key or value (or embedded protocol blob) that cannot be
    decoded: truncated, trailing bytes, bad lengths, invalid UTF-8 or unknown version."""

    error_code = 2  # CORRUPT_MESSAGE


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
    embedded consumer-protocol blobs (see :func:`decode_subscription`)."""

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


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    """Decoded ``ConsumerProtocolSubscription``; ``owned`` is flattened (topic, partition)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned: tuple[tuple[str, int], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    """Decoded ``ConsumerProtocolAssignment``; ``partitions`` is flattened (topic, partition)."""

    partitions: tuple[tuple[str, int], ...]
    user_data: bytes | None = None


# -- primitive writer and reader ----------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_INT16 = 0x7FFF
_MAX_INT32 = 0x7FFFFFFF


class _Writer:
    """Appends Kafka primitives; ``flexible`` switches to compact encodings."""

    __slots__ = ("_parts", "_flexible")

    def __init__(self, version: int, *, flexible: bool = False) -> None:
        self._parts: list[bytes] = []
        self._flexible = flexible
        self.int16(version)

    def getvalue(self) -> bytes:
        return b"".join(self._parts)

    def _pack(self, fmt: struct.Struct, value: int) -> None:
        try:
            self._parts.append(fmt.pack(value))
        except struct.error as exc:
            raise ValueError(f"{value} does not fit in {fmt.size * 8} bits") from exc

    def int16(self, value: int) -> None:
        self._pack(_I16, value)

    def int32(self, value: int) -> None:
        self._pack(_I32, value)

    def int64(self, value: int) -> None:
        self._pack(_I64, value)

    def uvarint(self, value: int) -> None:
        out = bytearray()
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self._parts.append(bytes(out))

    def _length(self, length: int | None, *, wide: bool) -> None:
        """Length prefix of a string/bytes/array; None = null."""
        if self._flexible:
            self.uvarint(0 if length is None else length + 1)
        elif wide:
            self.int32(-1 if length is None else length)
        else:
            if length is not None and length > _MAX_INT16:
                raise ValueError(f"string of {length} bytes exceeds the int16 length limit")
            self.int16(-1 if length is None else length)

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self._length(None, wide=False)
            return
        raw = value.encode("utf-8")
        self._length(len(raw), wide=False)
        self._parts.append(raw)

    def string(self, value: str) -> None:
        if value is None:
            raise ValueError("null given for a non-nullable string")
        self.nullable_string(value)

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is not None and len(value) > _MAX_INT32:
            raise ValueError(f"bytes of length {len(value)} exceed the int32 length limit")
        self._length(None if value is None else len(value), wide=True)
        if value is not None:
            self._parts.append(bytes(value))

    def bytes_(self, value: bytes) -> None:
        if value is None:
            raise ValueError("null given for non-nullable bytes")
        self.nullable_bytes(value)

    def array_length(self, count: int) -> None:
        self._length(count, wide=True)

    def int32_array(self, values: Sequence[int]) -> None:
        self.array_length(len(values))
        try:
            self._parts.append(struct.pack(f">{len(values)}i", *values))
        except struct.error as exc:
            raise ValueError(f"partition out of int32 range in {list(values)}") from exc

    def maybe_tagged_fields(self) -> None:
        """An empty tagged-field section, in flexible versions only."""
        if self._flexible:
            self.uvarint(0)


class _Reader:
    """Reads Kafka primitives from ``data``; every failure is a corrupt record."""

    __slots__ = ("_buf", "_pos", "flexible", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self._buf = memoryview(data)
        self._pos = 0
        self.flexible = False
        self.what = what

    def corrupt(self, reason: str) -> CorruptOffsetsRecordError:
        return CorruptOffsetsRecordError(f"corrupt {self.what}: {reason} at byte {self._pos}")

    def _take(self, size: int) -> memoryview:
        end = self._pos + size
        if size < 0 or end > len(self._buf):
            raise self.corrupt(f"needs {size} more bytes, {len(self._buf) - self._pos} left")
        view = self._buf[self._pos : end]
        self._pos = end
        return view

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value
        raise self.corrupt("unsigned varint longer than 32 bits")

    def _length(self, *, wide: bool) -> int | None:
        """A length prefix; None = null. Negative lengths other than null are corrupt."""
        length = self._compact_length() if self.flexible else self._classic_length(wide=wide)
        if length == -1:
            return None
        if length < 0:
            raise self.corrupt(f"negative length {length}")
        return length

    def _compact_length(self) -> int:
        return self.uvarint() - 1

    def _classic_length(self, *, wide: bool) -> int:
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        length = self._length(wide=False)
        if length is None:
            return None
        try:
            return str(self._take(length), "utf-8")
        except UnicodeDecodeError as exc:
            raise self.corrupt("string is not valid UTF-8") from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise self.corrupt("null in a non-nullable string")
        return value

    def nullable_bytes(self) -> bytes | None:
        length = self._length(wide=True)
        return None if length is None else bytes(self._take(length))

    def bytes_(self) -> bytes:
        value = self.nullable_bytes()
        if value is None:
            raise self.corrupt("null in non-nullable bytes")
        return value

    def array_length(self) -> int:
        count = self._length(wide=True)
        if count is None:
            raise self.corrupt("null in a non-nullable array")
        if count > len(self._buf) - self._pos:  # every element takes at least one byte
            raise self.corrupt(f"array of {count} elements cannot fit")
        return count

    def int32_array(self) -> tuple[int, ...]:
        count = self.array_length()
        return struct.unpack(f">{count}i", self._take(4 * count))

    def maybe_skip_tagged_fields(self) -> None:
        """Skips a tagged-field section (flexible versions only); no tags are known."""
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def expect_end(self) -> None:
        if self._pos != len(self._buf):
            raise self.corrupt(f"{len(self._buf) - self._pos} trailing bytes")


def _check_version(version: int, highest: int, what: str) -> None:
    if not 0 <= version <= highest:
        raise ValueError(f"cannot write {what} version {version} (0..{highest})")


# -- keys ---------------------------------------------------------------------------


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    """Key version 1: group, topic, partition."""
    w = _Writer(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.int32(key.partition)
    return w.getvalue()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    """Key version 2: group."""
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.getvalue()


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The record type and key of a ``__consumer_offsets`` key; None for key versions
    after 2 (KIP-848 records a classic coordinator skips)."""
    r = _Reader(data, "offsets key")
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
    _check_version(version, _MAX_OFFSET_COMMIT_VALUE_VERSION, "offset commit value")
    w = _Writer(version, flexible=version >= _FIRST_FLEXIBLE_VERSION)
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
    r = _Reader(data, "offset commit value")
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
    _check_version(version, _MAX_GROUP_METADATA_VALUE_VERSION, "group metadata value")
    w = _Writer(version, flexible=version >= _FIRST_FLEXIBLE_VERSION)
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


def _write_member(w: _Writer, member: MemberMetadata, version: int) -> None:
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
    r = _Reader(data, "group metadata value")
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


def _read_member(r: _Reader, version: int) -> MemberMetadata:
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


# -- embedded consumer protocol -----------------------------------------------------


def _group_by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Topic -> partitions, topics in order of first appearance (as Kafka writes them)."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    return grouped


def _write_topic_partitions(w: _Writer, partitions: Iterable[tuple[str, int]]) -> None:
    grouped = _group_by_topic(partitions)
    w.array_length(len(grouped))
    for topic, numbers in grouped.items():
        w.string(topic)
        w.int32_array(numbers)


def _read_topic_partitions(r: _Reader) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    for _ in range(r.array_length()):
        topic = r.string()
        out.extend((topic, partition) for partition in r.int32_array())
    return tuple(out)


def encode_subscription(
    topics: Iterable[str],
    user_data: bytes | None = None,
    owned: Iterable[tuple[str, int]] = (),
) -> bytes:
    """``ConsumerProtocolSubscription`` v1: topics, user data, owned partitions."""
    names = list(topics)
    w = _Writer(SUBSCRIPTION_VERSION)
    w.array_length(len(names))
    for name in names:
        w.string(name)
    w.nullable_bytes(user_data)
    _write_topic_partitions(w, owned)
    return w.getvalue()


def decode_subscription(data: bytes) -> ConsumerSubscription:
    """``ConsumerProtocolSubscription`` of any version >= 0 (newer ones read as v3)."""
    r = _Reader(data, "consumer subscription")
    version = r.int16()
    if version < 0:
        raise r.corrupt(f"negative subscription version {version}")
    version = min(version, _MAX_SUBSCRIPTION_VERSION)
    topics = tuple(r.string() for _ in range(r.array_length()))
    user_data = r.nullable_bytes()
    owned = _read_topic_partitions(r) if version >= 1 else ()
    generation_id = r.int32() if version >= 2 else -1
    rack_id = r.nullable_string() if version >= 3 else None
    return ConsumerSubscription(
        topics=topics,
        user_data=user_data,
        owned=owned,
        generation_id=generation_id,
        rack_id=rack_id,
    )


def encode_assignment(
    partitions: Iterable[tuple[str, int]], user_data: bytes | None = None
) -> bytes:
    """``ConsumerProtocolAssignment`` v1: assigned partitions by topic, user data."""
    w = _Writer(ASSIGNMENT_VERSION)
    _write_topic_partitions(w, partitions)
    w.nullable_bytes(user_data)
    return w.getvalue()


def decode_assignment(data: bytes) -> ConsumerAssignment:
    """``ConsumerProtocolAssignment`` of any version >= 0 (all share one layout)."""
    r = _Reader(data, "consumer assignment")
    version = r.int16()
    if version < 0:
        raise r.corrupt(f"negative assignment version {version}")
    partitions = _read_topic_partitions(r)
    return ConsumerAssignment(partitions=partitions, user_data=r.nullable_bytes())
