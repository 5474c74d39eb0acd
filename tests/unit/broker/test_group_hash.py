"""Java String.hashCode and the coordinator partition of a group."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.broker.group.hashing import coordinator_partition, java_abs, java_string_hash


def _reference_hash(s: str) -> int:
    """Unbounded-integer formula sum(unit * 31^(n-1-i)) reduced to a Java int."""
    raw = s.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    total = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) & 0xFFFFFFFF
    return total - 2**32 if total >= 2**31 else total


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("my-group", -1906497762),
        ("Aa", 2112),
        ("BB", 2112),  # the classic Java collision
        ("polygenelubricants", -(2**31)),  # hashCode is Integer.MIN_VALUE
        ("\u00e9", 0xE9),
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # non-BMP: two surrogate units
    ],
)
def test_java_string_hash_vectors(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected


@given(st.text(max_size=80))
def test_java_string_hash_matches_the_formula(s: str) -> None:
    assert java_string_hash(s) == _reference_hash(s)


def test_lone_surrogate_counts_as_one_unit() -> None:
    assert java_string_hash("\ud800") == 0xD800


@pytest.mark.parametrize(
    ("n", "expected"), [(0, 0), (5, 5), (-5, 5), (-(2**31), 0), (2**31 - 1, 2**31 - 1)]
)
def test_java_abs(n: int, expected: int) -> None:
    assert java_abs(n) == expected


@pytest.mark.parametrize(
    ("group", "partitions", "expected"),
    [
        ("my-group", 50, 12),
        ("hello", 50, 99162322 % 50),
        ("polygenelubricants", 50, 0),
        ("", 50, 0),
        ("my-group", 1, 0),
        ("my-group", 7, 1906497762 % 7),
    ],
)
def test_coordinator_partition(group: str, partitions: int, expected: int) -> None:
    assert coordinator_partition(group, partitions) == expected


def test_coordinator_partition_defaults_to_50() -> None:
    assert coordinator_partition("my-group") == 12


@given(st.text(max_size=40), st.integers(min_value=1, max_value=500))
def test_coordinator_partition_in_range(group: str, partitions: int) -> None:
    assert 0 <= coordinator_partition(group, partitions) < partitions


def test_coordinator_partition_rejects_non_positive_counts() -> None:
    with pytest.raises(ValueError):
        coordinator_partition("g", 0)
