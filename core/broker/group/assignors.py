"""Partition assignors for the consumer groups whose members franz itself runs.

In Kafka the group leader (a client) computes the assignment; a REST gateway owns the
consumers of its HTTP clients, so it runs the assignor itself (kafka-internals.md 4.4).
Each assignor is a pure function::

    (members: {member_id: Subscription}, partitions_per_topic: {topic: count})
        -> {member_id: [(topic, partition), ...]}

Every member appears in the result (possibly with an empty list) and every list is
sorted. Topics a member subscribes to but that are missing from
``partitions_per_topic`` are ignored, as Kafka does for topics without metadata.
Results depend only on the inputs, never on the iteration order of the mappings.

- ``range``: per topic, the subscribed members sorted by id; each gets a contiguous run
  of ``P // M`` partitions and the first ``P % M`` members one more
  (``RangeAssignor``; co-partitioned topics line up). Instance ids of static members are
  not part of :class:`Subscription`, so members sort by member id only.
- ``roundrobin``: all subscribed topic-partitions sorted by (topic, partition), dealt to
  the members sorted by id through a circular iterator that skips members not
  subscribed to the partition's topic (``RoundRobinAssignor``).
- ``sticky``: see :func:`sticky_assign`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, TypeAlias

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "Assignor",
    "Subscription",
    "TopicPartition",
    "assign",
    "range_assign",
    "roundrobin_assign",
    "sticky_assign",
]

TopicPartition: TypeAlias = tuple[str, int]
Assignment: TypeAlias = dict[str, list[TopicPartition]]


@dataclass(frozen=True, slots=True)
class Subscription:
    """What one member asks for: topic names and the partitions it owns now.

    ``owned`` is the member's current assignment (``ownedPartitions`` of the consumer
    protocol, v1+); only the sticky assignor reads it.
    """

    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()


Assignor: TypeAlias = Callable[[Mapping[str, Subscription], Mapping[str, int]], Assignment]


# -- shared helpers -------------------------------------------------------------------


def _effective_topics(
    members: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, frozenset[str]]:
    """Member id (sorted) -> the subscribed topics that exist."""
    for topic, count in partitions_per_topic.items():
        if count < 0:
            raise ValueError(f"topic {topic!r} has a negative partition count {count}")
    return {
        member: frozenset(t for t in members[member].topics if t in partitions_per_topic)
        for member in sorted(members)
    }


def _subscribers(topics_by_member: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
    """Topic (sorted) -> its subscribers, sorted by member id."""
    out: dict[str, list[str]] = {}
    for member in sorted(topics_by_member):
        for topic in topics_by_member[member]:
            out.setdefault(topic, []).append(member)
    return {topic: out[topic] for topic in sorted(out)}


def _empty(members: Iterable[str]) -> Assignment:
    return {member: [] for member in sorted(members)}


def _sorted(assignment: Mapping[str, Iterable[TopicPartition]]) -> Assignment:
    return {member: sorted(tps) for member, tps in assignment.items()}


# -- range ----------------------------------------------------------------------------


def range_assign(
    members: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]
) -> Assignment:
    """Kafka's ``RangeAssignor``: contiguous runs per topic, extras to the first members."""
    out = _empty(members)
    subscribers = _subscribers(_effective_topics(members, partitions_per_topic))
    for topic, consumers in subscribers.items():
        per_member, extra = divmod(partitions_per_topic[topic], len(consumers))
        for i, member in enumerate(consumers):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            out[member].extend((topic, p) for p in range(start, start + length))
    return _sorted(out)


# -- roundrobin -----------------------------------------------------------------------


def roundrobin_assign(
    members: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]
) -> Assignment:
    """Kafka's ``RoundRobinAssignor``: deal sorted partitions to sorted members in a circle."""
    out = _empty(members)
    topics_by_member = _effective_topics(members, partitions_per_topic)
    ring = list(topics_by_member)
    position = 0
    for topic in _subscribers(topics_by_member):  # only topics someone subscribes to
        for partition in range(partitions_per_topic[topic]):
            # Terminates: the topic has at least one subscriber on the ring.
            while topic not in topics_by_member[ring[position % len(ring)]]:
                position += 1
            out[ring[position % len(ring)]].append((topic, partition))
            position += 1
    return _sorted(out)


# -- sticky ---------------------------------------------------------------------------


def sticky_assign(
    members: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]
) -> Assignment:
    """A balanced assignment that keeps as much of each member's ``owned`` as it can.

    1. Keep every owned partition that still exists and that the member still
       subscribes to. A partition claimed by several members is kept by none of them
       (Kafka does the same for claims of equal generation; there are no generations
       here).
    2. Give each remaining partition, in (topic, partition) order, to the eligible
       member holding the fewest (ties: smallest member id).
    3. While some member could take a partition from a member holding at least two more,
       move one (preferring a partition the donor did not own before, so step 2's
       choices move before owned ones). Each move lowers the sum of squared counts, so
       this ends.

    Guarantees: every subscribed partition is assigned exactly once, to a subscriber;
    members with the same (effective) subscription end with counts differing by at most
    one; with equal subscriptions the number of owned partitions that move is minimal.

    Simplifications against Kafka's ``StickyAssignor``: no generation-aware conflict
    resolution and no ``userData``; with unequal subscriptions step 3 is a local search
    (single moves, no exchanges), which balances well but is not proven optimal, and
    Kafka's preference for assigning the least flexible members first is not copied.
    Eager protocol: partitions that move are handed over in the same rebalance.
    """
    topics_by_member = _effective_topics(members, partitions_per_topic)
    subscribers = _subscribers(topics_by_member)
    owned = _surviving_owned(members, topics_by_member, partitions_per_topic)
    current = {member: set(tps) for member, tps in owned.items()}
    claimed = set().union(*current.values())
    for topic, consumers in subscribers.items():
        for partition in range(partitions_per_topic[topic]):
            if (topic, partition) not in claimed:
                target = min(consumers, key=lambda m: (len(current[m]), m))
                current[target].add((topic, partition))
    while (move := _find_move(current, topics_by_member, owned)) is not None:
        donor, receiver, tp = move
        current[donor].remove(tp)
        current[receiver].add(tp)
    return _sorted(current)


def _surviving_owned(
    members: Mapping[str, Subscription],
    topics_by_member: Mapping[str, frozenset[str]],
    partitions_per_topic: Mapping[str, int],
) -> dict[str, frozenset[TopicPartition]]:
    """Per member, the owned partitions it may keep: valid, subscribed, uncontested."""
    claims: dict[TopicPartition, list[str]] = {}
    for member, topics in topics_by_member.items():
        for topic, partition in set(members[member].owned):
            if topic in topics and 0 <= partition < partitions_per_topic[topic]:
                claims.setdefault((topic, partition), []).append(member)
    keep: dict[str, set[TopicPartition]] = {member: set() for member in topics_by_member}
    for tp, claimants in claims.items():
        if len(claimants) == 1:
            keep[claimants[0]].add(tp)
    return {member: frozenset(tps) for member, tps in keep.items()}


def _find_move(
    current: Mapping[str, set[TopicPartition]],
    topics_by_member: Mapping[str, frozenset[str]],
    owned: Mapping[str, frozenset[TopicPartition]],
) -> tuple[str, str, TopicPartition] | None:
    """The first (donor, receiver, partition) that narrows a gap of two or more."""
    receivers = sorted(current, key=lambda m: (len(current[m]), m))
    donors = sorted(current, key=lambda m: (-len(current[m]), m))
    for receiver in receivers:
        wanted = topics_by_member[receiver]
        for donor in donors:
            if len(current[donor]) - len(current[receiver]) < 2:
                break
            movable = [tp for tp in current[donor] if tp[0] in wanted]
            if movable:
                tp = min(movable, key=lambda t: (t in owned[donor], t))
                return donor, receiver, tp
    return None


# -- registry -------------------------------------------------------------------------

ASSIGNORS: Final[Mapping[str, Assignor]] = MappingProxyType(
    {"range": range_assign, "roundrobin": roundrobin_assign, "sticky": sticky_assign}
)


def assign(
    strategy: str,
    members: Mapping[str, Subscription],
    partitions_per_topic: Mapping[str, int],
) -> Assignment:
    """Run the assignor registered under ``strategy`` (a consumer protocol name)."""
    try:
        assignor = ASSIGNORS[strategy]
    except KeyError:
        known = ", ".join(sorted(ASSIGNORS))
        raise ValueError(f"unknown assignment strategy {strategy!r} (known: {known})") from None
    return assignor(members, partitions_per_topic)
