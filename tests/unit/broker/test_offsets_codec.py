"""__consumer_offsets keys and values, and the embedded consumer protocol."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.broker.group.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from core.broker.group.offsets_codec import (
    CorruptOffsetsRecordError,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from core.errors import FranzError

# -- hand-built encodings, independent of the module ---------------------------------


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def b(v: bytes | None) -> bytes:
    return i32(-1) if v is None else i32(len(v)) + v


def cs(v: str | None) -> bytes:
    """Compact string; all test strings are short, so the uvarint is one byte."""
    if v is None:
        return b"\x00"
    raw = v.encode()
    return bytes([len(raw) + 1]) + raw


def cb(v: bytes) -> bytes:
    return bytes([len(v) + 1]) + v


# -- error class ----------------------------------------------------------------------


def test_corrupt_error_is_a_franz_error_with_code_2() -> None:
    assert issubclass(CorruptOffsetsRecordError, FranzError)
    assert CorruptOffsetsRecordError.error_code == 2


# -- keys -----------------------------------------------------------------------------


def test_offset_commit_key_matches_the_doc_example() -> None:
    expected = bytes.fromhex("0001 0001 67 0001 74 00000000")
    assert encode_offset_commit_key(OffsetCommitKey("g", "t", 0)) == expected
    assert decode_key(expected) == OffsetCommitKey("g", "t", 0)


def test_offset_commit_key_version_0_is_read() -> None:
    data = i16(0) + s("grp") + s("topic") + i32(7)
    assert decode_key(data) == OffsetCommitKey("grp", "topic", 7)


def test_group_metadata_key() -> None:
    data = encode_group_metadata_key(GroupMetadataKey("g"))
    assert data == bytes.fromhex("0002 0001 67")
    assert decode_key(data) == GroupMetadataKey("g")


@pytest.mark.parametrize("version", [3, 4, 5, 100, 32767])
def test_newer_key_versions_are_skipped(version: int) -> None:
    assert decode_key(i16(version) + b"whatever follows") is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        i16(-1) + s("g"),
        i16(1) + s("g") + s("t"),  # no partition
        i16(1) + s("g") + s("t") + i32(0) + b"\x00",  # trailing byte
        i16(2) + s(None),  # null group
        i16(2) + i16(-2),  # negative length
        i16(2) + i16(3) + b"ab",  # short string
        i16(2) + i16(1) + b"\xff",  # invalid UTF-8
    ],
)
def test_malformed_keys_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptOffsetsRecordError):
        decode_key(data)


# -- offset commit values -------------------------------------------------------------

VALUE = OffsetCommitValue(offset=5, leader_epoch=2, metadata="m", commit_timestamp=1000)


def test_offset_commit_value_v3_bytes() -> None:
    expected = i16(3) + i64(5) + i32(2) + s("m") + i64(1000)
    assert encode_offset_commit_value(VALUE) == expected
    assert decode_offset_commit_value(expected) == VALUE


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (i16(0) + i64(5) + s("m") + i64(1000), OffsetCommitValue(5, -1, "m", 1000)),
        (
            i16(1) + i64(5) + s("m") + i64(1000) + i64(2000),
            OffsetCommitValue(5, -1, "m", 1000, 2000),
        ),
        (i16(1) + i64(5) + s("") + i64(1000) + i64(-1), OffsetCommitValue(5, -1, "", 1000, None)),
        (i16(2) + i64(5) + s("m") + i64(1000), OffsetCommitValue(5, -1, "m", 1000)),
        (i16(3) + i64(5) + i32(-1) + s("") + i64(1000), OffsetCommitValue(5, -1, "", 1000)),
        (i16(4) + i64(5) + i32(2) + cs("m") + i64(1000) + b"\x00", VALUE),
        # v4 with an unknown tagged field (tag 0, 16 bytes, e.g. a topic id): skipped
        (i16(4) + i64(5) + i32(2) + cs("m") + i64(1000) + b"\x01\x00\x10" + bytes(16), VALUE),
        # v4 with two tagged fields
        (
            i16(4) + i64(5) + i32(2) + cs("m") + i64(1000) + b"\x02\x00\x01x\x05\x00",
            VALUE,
        ),
    ],
)
def test_offset_commit_value_versions(data: bytes, expected: OffsetCommitValue) -> None:
    assert decode_offset_commit_value(data) == expected


def test_offset_commit_value_with_expiry_is_written_as_v1() -> None:
    value = OffsetCommitValue(5, 2, "m", 1000, expire_timestamp=9000)
    data = encode_offset_commit_value(value)
    assert data == i16(1) + i64(5) + s("m") + i64(1000) + i64(9000)
    assert decode_offset_commit_value(data) == OffsetCommitValue(5, -1, "m", 1000, 9000)


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_offset_commit_value_forced_versions_drop_expiry(version: int) -> None:
    value = OffsetCommitValue(5, 2, "m", 1000, expire_timestamp=9000)
    decoded = decode_offset_commit_value(encode_offset_commit_value(value, version=version))
    assert decoded.expire_timestamp is None
    assert decoded.leader_epoch == (2 if version >= 3 else -1)


def test_offset_commit_value_v4_written_bytes() -> None:
    data = encode_offset_commit_value(VALUE, version=4)
    assert data == i16(4) + i64(5) + i32(2) + cs("m") + i64(1000) + b"\x00"


@pytest.mark.parametrize("version", [-1, 5])
def test_offset_commit_value_unknown_write_version(version: int) -> None:
    with pytest.raises(ValueError):
        encode_offset_commit_value(VALUE, version=version)


@pytest.mark.parametrize(
    "data",
    [
        i16(5) + i64(5) + i32(2) + s("m") + i64(1000),  # unknown version
        i16(-1),
        i16(3) + i64(5) + i32(2) + s(None) + i64(1000),  # null metadata
        i16(3) + i64(5) + i32(2) + s("m") + i64(1000) + b"\x00",  # trailing
        i16(4) + i64(5) + i32(2) + b"\x00" + i64(1000) + b"\x00",  # compact null metadata
        i16(4) + i64(5) + i32(2) + cs("m") + i64(1000),  # missing tagged fields
        i16(4) + i64(5) + i32(2) + cs("m") + i64(1000) + b"\x01\x00\x05ab",  # short tag
        i16(4) + i64(5) + i32(2) + b"\xff\xff\xff\xff\xff\x01",  # varint too long
        i16(4) + i64(5) + i32(2) + b"\xff\xff\xff\xff\x7f",  # varint > 32 bits
    ],
)
def test_malformed_offset_commit_values_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptOffsetsRecordError):
        decode_offset_commit_value(data)


# -- group metadata values ------------------------------------------------------------

MEMBER = MemberMetadata(
    member_id="c-1",
    group_instance_id="i-1",
    client_id="c",
    client_host="/10.0.0.1",
    rebalance_timeout=300000,
    session_timeout=10000,
    subscription=b"\x00\x01sub",
    assignment=b"\x00\x01asg",
)
GROUP = GroupMetadataValue(
    protocol_type="consumer",
    generation=3,
    protocol="range",
    leader="c-1",
    current_state_timestamp=1234,
    members=(MEMBER,),
)


def member_v(version: int) -> bytes:
    out = s("c-1")
    if version >= 3:
        out += s("i-1")
    out += s("c") + s("/10.0.0.1")
    if version >= 1:
        out += i32(300000)
    return out + i32(10000) + b(b"\x00\x01sub") + b(b"\x00\x01asg")


def group_v(version: int) -> bytes:
    out = i16(version) + s("consumer") + i32(3) + s("range") + s("c-1")
    if version >= 2:
        out += i64(1234)
    return out + i32(1) + member_v(version)


def test_group_metadata_value_v3_bytes() -> None:
    assert encode_group_metadata_value(GROUP) == group_v(3)
    assert decode_group_metadata_value(group_v(3)) == GROUP


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            0,
            GroupMetadataValue(
                "consumer",
                3,
                "range",
                "c-1",
                -1,
                (
                    MemberMetadata(
                        "c-1", None, "c", "/10.0.0.1", 10000, 10000, b"\x00\x01sub", b"\x00\x01asg"
                    ),
                ),
            ),
        ),
        (
            1,
            GroupMetadataValue(
                "consumer",
                3,
                "range",
                "c-1",
                -1,
                (
                    MemberMetadata(
                        "c-1", None, "c", "/10.0.0.1", 300000, 10000, b"\x00\x01sub", b"\x00\x01asg"
                    ),
                ),
            ),
        ),
        (
            2,
            GroupMetadataValue(
                "consumer",
                3,
                "range",
                "c-1",
                1234,
                (
                    MemberMetadata(
                        "c-1", None, "c", "/10.0.0.1", 300000, 10000, b"\x00\x01sub", b"\x00\x01asg"
                    ),
                ),
            ),
        ),
        (3, GROUP),
    ],
)
def test_group_metadata_value_old_versions(version: int, expected: GroupMetadataValue) -> None:
    assert decode_group_metadata_value(group_v(version)) == expected
    assert encode_group_metadata_value(expected, version=version) == group_v(version)


def group_v4(*, member_tags: bytes = b"\x00", tags: bytes = b"\x00") -> bytes:
    member = (
        cs("c-1")
        + cs("i-1")
        + cs("c")
        + cs("/10.0.0.1")
        + i32(300000)
        + i32(10000)
        + cb(b"\x00\x01sub")
        + cb(b"\x00\x01asg")
        + member_tags
    )
    head = i16(4) + cs("consumer") + i32(3) + cs("range") + cs("c-1") + i64(1234)
    return head + b"\x02" + member + tags


def test_group_metadata_value_v4() -> None:
    assert decode_group_metadata_value(group_v4()) == GROUP
    assert encode_group_metadata_value(GROUP, version=4) == group_v4()
    tagged = group_v4(member_tags=b"\x01\x07\x02hi", tags=b"\x01\x00\x00")
    assert decode_group_metadata_value(tagged) == GROUP


def test_empty_group_with_null_protocol_and_leader() -> None:
    empty = GroupMetadataValue("consumer", 0, None, None, 99, ())
    data = encode_group_metadata_value(empty)
    assert data == i16(3) + s("consumer") + i32(0) + s(None) + s(None) + i64(99) + i32(0)
    assert decode_group_metadata_value(data) == empty


@pytest.mark.parametrize(
    "data",
    [
        i16(5) + group_v(3)[2:],
        i16(-1) + group_v(3)[2:],
        group_v(3) + b"\x00",
        group_v(3)[:-1],
        i16(3) + s("consumer") + i32(3) + s(None) + s(None) + i64(0) + i32(-1),  # null array
        i16(3) + s("consumer") + i32(3) + s(None) + s(None) + i64(0) + i32(1000),  # huge array
        i16(3) + s(None) + i32(3) + s(None) + s(None) + i64(0) + i32(0),  # null protocol type
        group_v(3).replace(b(b"\x00\x01asg"), b(None)),  # null assignment bytes
        group_v(3).replace(b(b"\x00\x01asg"), i32(-7)),  # negative bytes length
    ],
)
def test_malformed_group_metadata_values_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptOffsetsRecordError):
        decode_group_metadata_value(data)


# -- embedded consumer protocol -------------------------------------------------------


def test_subscription_v1_bytes() -> None:
    data = encode_subscription(["t1", "t2"], b"ud", [("t1", 0), ("t2", 3), ("t1", 2)])
    expected = (
        i16(1)
        + i32(2)
        + s("t1")
        + s("t2")
        + b(b"ud")
        + i32(2)
        + s("t1")
        + i32(2)
        + i32(0)
        + i32(2)
        + s("t2")
        + i32(1)
        + i32(3)
    )
    assert data == expected
    assert decode_subscription(data) == ConsumerSubscription(
        topics=("t1", "t2"), user_data=b"ud", owned=(("t1", 0), ("t1", 2), ("t2", 3))
    )


def test_subscription_defaults() -> None:
    data = encode_subscription(["t"])
    assert data == i16(1) + i32(1) + s("t") + b(None) + i32(0)
    assert decode_subscription(data) == ConsumerSubscription(topics=("t",))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (i16(0) + i32(1) + s("t") + b(None), ConsumerSubscription(("t",))),
        (
            i16(2) + i32(1) + s("t") + b(b"u") + i32(1) + s("t") + i32(1) + i32(4) + i32(7),
            ConsumerSubscription(("t",), b"u", (("t", 4),), generation_id=7),
        ),
        (
            i16(3) + i32(1) + s("t") + b(None) + i32(0) + i32(7) + s("rack-a"),
            ConsumerSubscription(("t",), None, (), generation_id=7, rack_id="rack-a"),
        ),
        # a future version is read as v3 and whatever follows is ignored
        (
            i16(9) + i32(1) + s("t") + b(None) + i32(0) + i32(7) + s(None) + b"future",
            ConsumerSubscription(("t",), None, (), generation_id=7),
        ),
        # v0 ignores trailing bytes too (a newer writer's ownedPartitions)
        (i16(0) + i32(0) + b(None) + i32(0), ConsumerSubscription(())),
    ],
)
def test_subscription_versions(data: bytes, expected: ConsumerSubscription) -> None:
    assert decode_subscription(data) == expected


def test_assignment_bytes() -> None:
    data = encode_assignment([("b", 1), ("a", 0), ("b", 0)], b"x")
    expected = (
        i16(1) + i32(2) + s("b") + i32(2) + i32(1) + i32(0) + s("a") + i32(1) + i32(0) + b(b"x")
    )
    assert data == expected
    assert decode_assignment(data) == ConsumerAssignment((("b", 1), ("b", 0), ("a", 0)), b"x")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 7])
def test_assignment_versions_share_one_layout(version: int) -> None:
    data = i16(version) + i32(1) + s("t") + i32(1) + i32(5) + b(None) + b"extra"
    assert decode_assignment(data) == ConsumerAssignment((("t", 5),))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        i16(-1) + i32(0) + b(None),
        i16(1) + i32(1),  # missing topic
        i16(1) + i32(1) + s("t") + i32(2) + i32(0),  # short partitions array
        i16(1) + i32(-1) + b(None),  # null topics array
        i16(1) + i32(1) + s("t") + i32(-1) + b(None),  # null partitions array
        i16(1) + i32(0),  # missing user data
    ],
)
def test_malformed_assignments_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptOffsetsRecordError):
        decode_assignment(data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00",
        i16(-3) + i32(0) + b(None),
        i16(1) + i32(2) + s("t"),
        i16(1) + i32(1) + s("t") + b(None),  # v1 without owned partitions
        i16(1) + i32(1) + s("t") + i32(5) + b"ab",  # short user data
    ],
)
def test_malformed_subscriptions_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptOffsetsRecordError):
        decode_subscription(data)


# -- encoder limits -------------------------------------------------------------------


def test_encoders_reject_values_the_format_cannot_hold() -> None:
    with pytest.raises(ValueError):
        encode_offset_commit_key(OffsetCommitKey("g" * 40000, "t", 0))
    with pytest.raises(ValueError):
        encode_offset_commit_key(OffsetCommitKey("g", "t", 2**31))
    with pytest.raises(ValueError):
        encode_offset_commit_value(OffsetCommitValue(2**63, -1, "", 0))
    with pytest.raises(ValueError):
        encode_assignment([("t", -(2**31) - 1)])
    with pytest.raises(ValueError):
        encode_group_metadata_value(GROUP, version=5)


def test_long_strings_work_in_flexible_versions() -> None:
    value = OffsetCommitValue(1, 0, "x" * 40000, 2)  # too long for an int16 length
    assert decode_offset_commit_value(encode_offset_commit_value(value, version=4)) == value
    with pytest.raises(ValueError):
        encode_offset_commit_value(value)


# -- properties: round trips and truncation -------------------------------------------

names = st.text(max_size=12)
i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
blobs = st.binary(max_size=20)

offset_keys = st.builds(OffsetCommitKey, names, names, i32s)
group_keys = st.builds(GroupMetadataKey, names)
offset_values = st.builds(
    OffsetCommitValue,
    offset=i64s,
    leader_epoch=i32s,
    metadata=names,
    commit_timestamp=i64s,
    expire_timestamp=st.none(),
)
members = st.builds(
    MemberMetadata, names, st.none() | names, names, names, i32s, i32s, blobs, blobs
)
groups = st.builds(
    GroupMetadataValue,
    names,
    i32s,
    st.none() | names,
    st.none() | names,
    i64s,
    st.lists(members, max_size=3).map(tuple),
)
topic_partitions = st.lists(st.tuples(st.sampled_from(["a", "b", "ü"]), i32s), max_size=8)


@given(offset_keys)
def test_offset_commit_key_round_trip(key: OffsetCommitKey) -> None:
    assert decode_key(encode_offset_commit_key(key)) == key


@given(group_keys)
def test_group_metadata_key_round_trip(key: GroupMetadataKey) -> None:
    assert decode_key(encode_group_metadata_key(key)) == key


@given(offset_values, st.sampled_from([3, 4]))
def test_offset_commit_value_round_trip(value: OffsetCommitValue, version: int) -> None:
    assert decode_offset_commit_value(encode_offset_commit_value(value, version=version)) == value


@given(offset_values, st.integers(0, 2**62))
def test_offset_commit_value_v1_round_trip(value: OffsetCommitValue, expire: int) -> None:
    value = OffsetCommitValue(value.offset, -1, value.metadata, value.commit_timestamp, expire)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


@settings(max_examples=200)
@given(groups, st.sampled_from([3, 4]))
def test_group_metadata_value_round_trip(value: GroupMetadataValue, version: int) -> None:
    assert decode_group_metadata_value(encode_group_metadata_value(value, version=version)) == value


@given(st.lists(names, max_size=4), st.none() | blobs, topic_partitions)
def test_subscription_round_trip(
    topics: list[str], user_data: bytes | None, owned: list[tuple[str, int]]
) -> None:
    owned_sorted = sorted(owned, key=lambda tp: tp[0])  # grouped by topic, order kept
    decoded = decode_subscription(encode_subscription(topics, user_data, owned_sorted))
    assert decoded == ConsumerSubscription(tuple(topics), user_data, tuple(owned_sorted))


@given(topic_partitions, st.none() | blobs)
def test_assignment_round_trip(partitions: list[tuple[str, int]], user_data: bytes | None) -> None:
    grouped = sorted(partitions, key=lambda tp: tp[0])
    decoded = decode_assignment(encode_assignment(grouped, user_data))
    assert decoded == ConsumerAssignment(tuple(grouped), user_data)


@settings(max_examples=100)
@given(
    st.one_of(
        offset_keys.map(lambda k: (encode_offset_commit_key(k), decode_key)),
        group_keys.map(lambda k: (encode_group_metadata_key(k), decode_key)),
        offset_values.map(lambda v: (encode_offset_commit_value(v), decode_offset_commit_value)),
        offset_values.map(
            lambda v: (encode_offset_commit_value(v, version=4), decode_offset_commit_value)
        ),
        groups.map(lambda g: (encode_group_metadata_value(g), decode_group_metadata_value)),
        groups.map(
            lambda g: (encode_group_metadata_value(g, version=4), decode_group_metadata_value)
        ),
    ),
    st.data(),
)
def test_every_truncation_is_corrupt(
    encoded: tuple[bytes, Callable[[bytes], object]], data: st.DataObject
) -> None:
    raw, decode = encoded
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CorruptOffsetsRecordError):
        decode(raw[:cut])


@given(topic_partitions, st.none() | blobs, st.data())
def test_truncated_consumer_protocol_is_corrupt(
    partitions: list[tuple[str, int]], user_data: bytes | None, data: st.DataObject
) -> None:
    cases: list[tuple[bytes, Callable[[bytes], object]]] = [
        (encode_assignment(partitions, user_data), decode_assignment),
        (encode_subscription(["a", "b"], user_data, partitions), decode_subscription),
    ]
    for raw, decode in cases:
        cut = data.draw(st.integers(0, len(raw) - 1))
        with pytest.raises(CorruptOffsetsRecordError):
            decode(raw[:cut])


@given(st.binary(max_size=64))
def test_decoders_never_raise_anything_but_corrupt(raw: bytes) -> None:
    decoders: list[Callable[[bytes], object]] = [
        decode_key,
        decode_offset_commit_value,
        decode_group_metadata_value,
        decode_subscription,
        decode_assignment,
    ]
    for decode in decoders:
        try:
            decode(raw)
        except CorruptOffsetsRecordError:
            pass
