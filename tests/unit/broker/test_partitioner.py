"""Kafka's default partitioner: murmur2 vectors, a literal Java transcription, rotation."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.broker.produce.partitioner import (
    UnkeyedPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# From Kafka's UtilsTest.testMurmur2 (plus "abc").
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def _java_int(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def _java_murmur2(data: bytes) -> int:
    """Line-by-line transcription of Utils.murmur2 with Java int semantics."""
    length = len(data)
    m = _java_int(0x5BD1E995)
    h = _java_int(_java_int(0x9747B28C) ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = _java_int(
            (data[i4] & 0xFF)
            + ((data[i4 + 1] & 0xFF) << 8)
            + ((data[i4 + 2] & 0xFF) << 16)
            + ((data[i4 + 3] & 0xFF) << 24)
        )
        k = _java_int(k * m)
        k ^= (k & 0xFFFFFFFF) >> 24
        k = _java_int(k * m)
        h = _java_int(h * m)
        h ^= k
    rem = length % 4
    base = length & ~3
    if rem == 3:
        h ^= _java_int((data[base + 2] & 0xFF) << 16)
    if rem >= 2:
        h ^= _java_int((data[base + 1] & 0xFF) << 8)
    if rem >= 1:
        h ^= data[base] & 0xFF
        h = _java_int(h * m)
    h ^= (h & 0xFFFFFFFF) >> 13
    h = _java_int(h * m)
    h ^= (h & 0xFFFFFFFF) >> 15
    return _java_int(h)


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected
    assert _java_murmur2(data) == expected


def test_murmur2_of_empty_input() -> None:
    assert murmur2(b"") == _java_murmur2(b"")


@given(st.binary(max_size=600))
def test_murmur2_matches_java_transcription(data: bytes) -> None:
    assert murmur2(data) == _java_murmur2(data)


@given(st.binary(max_size=300))
def test_murmur2_accepts_bytes_like(data: bytes) -> None:
    assert murmur2(bytearray(data)) == murmur2(memoryview(data)) == murmur2(data)


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(data: bytes) -> None:
    assert -(2**31) <= murmur2(data) < 2**31


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, 0),
        (5, 5),
        (-1, 0x7FFFFFFF),
        (-(2**31), 0),
        (2**31 - 1, 2**31 - 1),
        (-973932308, 1173551340),
    ],
)
def test_to_positive_clears_the_sign_bit(n: int, expected: int) -> None:
    assert to_positive(n) == expected


@pytest.mark.parametrize(("key", "_hash"), KAFKA_VECTORS)
@pytest.mark.parametrize("num_partitions", [1, 3, 6, 50, 1000])
def test_partition_for_key(key: bytes, _hash: int, num_partitions: int) -> None:
    expected = (_hash & 0x7FFFFFFF) % num_partitions
    assert partition_for_key(key, num_partitions) == expected


def test_partition_for_key_known_values() -> None:
    # to_positive(-790332482) = 1357151166; 1357151166 % 6 = 0, % 10 = 6
    assert partition_for_key(b"foobar", 6) == 0
    assert partition_for_key(b"foobar", 10) == 6


@pytest.mark.parametrize("bad", [0, -1])
def test_partition_for_key_rejects_non_positive_counts(bad: int) -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", bad)


def test_unkeyed_rotates_per_topic_from_first() -> None:
    p = UnkeyedPartitioner(first=0)
    assert [p.next_partition("a", 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [p.next_partition("b", 2) for _ in range(3)] == [0, 1, 0]
    assert p.next_partition("a", 3) == 1


def test_unkeyed_follows_partition_count_changes() -> None:
    p = UnkeyedPartitioner(first=0)
    assert [p.next_partition("t", 2) for _ in range(2)] == [0, 1]
    assert [p.next_partition("t", 4) for _ in range(3)] == [2, 3, 0]


def test_unkeyed_random_start_is_seeded_and_spreads_evenly() -> None:
    a = UnkeyedPartitioner(rng=random.Random(7))
    b = UnkeyedPartitioner(rng=random.Random(7))
    seq_a = [a.next_partition("t", 5) for _ in range(10)]
    assert seq_a == [b.next_partition("t", 5) for _ in range(10)]
    assert sorted(seq_a) == sorted(list(range(5)) * 2)


def test_unkeyed_rejects_non_positive_counts() -> None:
    with pytest.raises(ValueError):
        UnkeyedPartitioner(first=0).next_partition("t", 0)
