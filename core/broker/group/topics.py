"""What groups need to know about topics: pattern subscriptions, partition counts and
whether partitions exist, asked of the :class:`GroupBackend`."""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.broker.errors import UnknownTopicOrPartitionError
from core.broker.group.backend import GroupBackend
from core.broker.types import TopicPartition, is_internal_topic


def match_topics(pattern: str, topics: Iterable[str]) -> tuple[str, ...]:
    """Topics ``pattern`` matches as a whole (Java's ``matches()``), sorted; internal
    topics are left out (the Java consumer's ``exclude.internal.topics=true``).
    Python's ``re`` stands in for ``java.util.regex``: they agree on common patterns."""
    regex = re.compile(pattern)
    return tuple(sorted(t for t in topics if not is_internal_topic(t) and regex.fullmatch(t)))


async def partition_counts(backend: GroupBackend, topics: Iterable[str]) -> dict[str, int]:
    """Partition count per existing topic of ``topics`` (missing ones are left out)."""
    counts: dict[str, int] = {}
    for topic in sorted(set(topics)):
        count = await backend.partition_count(topic)
        if count is not None:
            counts[topic] = count
    return counts


async def check_partitions(backend: GroupBackend, tps: Iterable[TopicPartition]) -> None:
    """UnknownTopicOrPartitionError unless every partition exists."""
    tps = list(tps)
    counts = await partition_counts(backend, (tp[0] for tp in tps))
    for topic, partition in tps:
        if not 0 <= partition < counts.get(topic, 0):
            raise UnknownTopicOrPartitionError(
                f"This server does not host this topic-partition: {topic}-{partition}"
            )
