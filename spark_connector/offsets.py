"""Offset bookkeeping: the Kafka-shaped offset JSON, splitting ranges into Spark
partitions, and admission control. Pure Python (no Spark, no HTTP)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from spark_connector.options import TopicPartition


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): n}`` -> ``{"t": {"p": n}}``, topics and partitions in a fixed order
    (Spark compares offsets by their JSON text)."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def from_json_offsets(doc: Mapping[str, Mapping[str, int]] | None) -> dict[TopicPartition, int]:
    if not doc:
        return {}
    return {(t, int(p)): int(n) for t, parts in doc.items() for p, n in parts.items()}


def describe(tps: list[TopicPartition] | set[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps))


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _cut(r: OffsetRange, pieces: int) -> list[OffsetRange]:
    """Nearly equal consecutive pieces; the last ones absorb the remainder."""
    pieces = max(1, min(pieces, r.size))
    out = []
    remaining, start = r.size, r.start
    for i in range(pieces):
        this = remaining // (pieces - i)
        remaining -= this
        out.append(OffsetRange(r.topic, r.partition, start, start + this))
        start += this
    return [p for p in out if p.size > 0]


def split_ranges(
    ranges: list[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Spark tasks for offset ranges, as Spark's ``KafkaOffsetRangeCalculator``: empty
    ranges dropped; ranges above ``max_records_per_partition`` cut; then, when fewer
    pieces than ``min_partitions`` remain, the budget is shared in proportion to size
    (``round(size / total * M)``, at least 1); ranges that get one piece stay whole and
    their unused share goes to the big ones."""
    work = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        work = [p for r in work for p in _cut(r, math.ceil(r.size / max_records_per_partition))]
    if not min_partitions or len(work) >= min_partitions:
        return work
    total = sum(r.size for r in work)
    if total == 0:
        return work
    parts = {i: max(1, round(r.size / total * min_partitions)) for i, r in enumerate(work)}
    small = [i for i, n in parts.items() if n == 1]
    big = [i for i in parts if i not in small]
    if big:
        budget = max(min_partitions - len(small), len(big))
        big_total = sum(work[i].size for i in big)
        for i in big:
            parts[i] = max(1, round(work[i].size / big_total * budget))
    out: list[OffsetRange] = []
    for i, r in enumerate(work):
        out += _cut(r, parts[i]) if parts[i] > 1 else [r]
    return out


def rate_limit(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    limit: int,
) -> dict[TopicPartition, int]:
    """End offsets of a batch capped at ``limit`` offsets in all, shared in proportion to
    each partition's backlog; a share below 1 is rounded up so small partitions are not
    starved (Spark's Kafka source: a batch may exceed ``limit`` by a few offsets)."""
    sizes = {tp: end - start[tp] for tp, end in latest.items() if end - start[tp] > 0}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out = dict(latest)
    for tp, size in sizes.items():
        share = limit * (size / total)
        n = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(latest[tp], start[tp] + n)
    return out
