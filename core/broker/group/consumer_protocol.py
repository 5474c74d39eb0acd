"""The embedded consumer protocol: the ``subscription`` and ``assignment`` blobs a
consumer-group member carries (stored inside ``__consumer_offsets`` group metadata,
see ``core.broker.group.offsets_codec``). Classic encoding only (``core.broker.group.wire_primitives``)::

    ConsumerProtocolSubscription  v0: topics [string], user_data nullable bytes
                                  v1+: owned_partitions [topic string, partitions [int32]]
                                  v2+: generation_id int32;  v3+: rack_id nullable string
    ConsumerProtocolAssignment    v0+: assigned [topic string, partitions [int32]],
                                  user_data nullable bytes

v1 of each is written. Like Kafka's ``ConsumerProtocol``, decoders read a newer version
with the newest layout they know and ignore what follows.

Decoders raise :class:`CorruptOffsetsRecordError` on malformed input; encoders raise
``ValueError`` on values the format cannot hold (too-long strings, out-of-range ints).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.broker.group.wire_primitives import Reader, Writer

__all__ = [
    "ConsumerAssignment",
    "ConsumerSubscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 1

_MAX_SUBSCRIPTION_VERSION = 3


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


def _group_by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Topic -> partitions, topics in order of first appearance (as Kafka writes them)."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    return grouped


def _write_topic_partitions(w: Writer, partitions: Iterable[tuple[str, int]]) -> None:
    grouped = _group_by_topic(partitions)
    w.array_length(len(grouped))
    for topic, numbers in grouped.items():
        w.string(topic)
        w.int32_array(numbers)


def _read_topic_partitions(r: Reader) -> tuple[tuple[str, int], ...]:
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
    w = Writer(SUBSCRIPTION_VERSION)
    w.array_length(len(names))
    for name in names:
        w.string(name)
    w.nullable_bytes(user_data)
    _write_topic_partitions(w, owned)
    return w.getvalue()


def decode_subscription(data: bytes) -> ConsumerSubscription:
    """``ConsumerProtocolSubscription`` of any version >= 0 (newer ones read as v3)."""
    r = Reader(data, "consumer subscription")
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
    w = Writer(ASSIGNMENT_VERSION)
    _write_topic_partitions(w, partitions)
    w.nullable_bytes(user_data)
    return w.getvalue()


def decode_assignment(data: bytes) -> ConsumerAssignment:
    """``ConsumerProtocolAssignment`` of any version >= 0 (all share one layout)."""
    r = Reader(data, "consumer assignment")
    version = r.int16()
    if version < 0:
        raise r.corrupt(f"negative assignment version {version}")
    partitions = _read_topic_partitions(r)
    return ConsumerAssignment(partitions=partitions, user_data=r.nullable_bytes())
