"""Which ``__consumer_offsets`` partition (hence which broker) coordinates a group.

Kafka (``GroupMetadataManager.partitionFor``)::

    partition = Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions

``String.hashCode`` runs over the string's UTF-16 code units, ``h = 31*h + unit``, with
signed 32-bit overflow; a character outside the BMP is two units (a surrogate pair).
``Utils.abs`` is ``Math.abs`` except that -2^31 maps to 0 (``Math.abs`` would leave it
negative). Getting this bit-exact matters: clients and brokers of a mixed cluster must
agree on the coordinator.
"""

from __future__ import annotations

__all__ = ["DEFAULT_OFFSETS_PARTITIONS", "coordinator_partition", "java_abs", "java_string_hash"]

DEFAULT_OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions

_MASK32 = 0xFFFFFFFF
_SIGN32 = 0x80000000
_INT_MIN = -(2**31)


def _code_units(s: str) -> list[int]:
    """The UTF-16 code units of ``s`` (lone surrogates pass through as themselves)."""
    if s.isascii():
        return [ord(c) for c in s]
    raw = s.encode("utf-16-be", "surrogatepass")
    return [(raw[i] << 8) | raw[i + 1] for i in range(0, len(raw), 2)]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s`` as a signed 32-bit int."""
    h = 0
    for unit in _code_units(s):
        h = (31 * h + unit) & _MASK32
    return h - 0x100000000 if h & _SIGN32 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` for a Java int: ``abs`` with -2^31 mapped to 0."""
    return 0 if n == _INT_MIN else abs(n)


def coordinator_partition(group_id: str, num_partitions: int = DEFAULT_OFFSETS_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return java_abs(java_string_hash(group_id)) % num_partitions
