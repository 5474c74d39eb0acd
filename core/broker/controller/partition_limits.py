"""How many partitions a topic and a broker may have: checked by the controller before a
topic is created or grown, so a request that would exceed them is refused with nothing
written (Kafka's POLICY_VIOLATION: 400 / 40002 over REST).

Two properties set the maxima: ``max.partitions.per.topic`` and
``max.partitions.per.broker`` (replicas hosted by one broker). The second is lowered to
what the process can afford. Descriptors no longer grow with partitions: ``.log``
files are opened through a bounded cache (``log.segment.open.files.max``,
``core.storage.fd_cache``) and index mappings keep no descriptor
(``core.storage.mapped_file``; only its fallback off glibc does, then two per
partition count). Memory mappings do: the active segment's ``.index`` and
``.timeindex`` of each replica (other segments map theirs only while read), so the
effective per-broker maximum is bounded by ``vm.max_map_count`` after a reserve for
everything else. A broker whose limits are lower than the controller's sees the
controller's (the controller decides for the cluster with its own budget;
docs/partition-limits.md).
"""

from __future__ import annotations

import resource
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.broker.errors import PolicyViolationError
from core.storage.mapped_file import HOLDS_DESCRIPTOR

#: descriptors a partition replica holds for itself: none (its .log descriptor comes
#: from the bounded cache, its index mappings keep none), except with the mmap.mmap
#: fallback, which dups one per mapped index
DESCRIPTORS_PER_PARTITION = 2 if HOLDS_DESCRIPTOR else 0
#: memory mappings a partition replica holds: its active segment's two indexes
MAPPINGS_PER_PARTITION = 2
#: descriptors and mappings kept for everything but partitions (connections, sockets of
#: other brokers, SQLite, ZooKeeper, Python's own, indexes of old segments being read);
#: a quarter of a smaller limit
RESERVED_DESCRIPTORS = 1024
RESERVED_MAPPINGS = 4096


#: what ``affordable_partitions`` answers when no limit bounds it
UNBOUNDED = 1 << 30


def _max_map_count() -> int | None:
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):  # not Linux
        return None


def affordable_partitions(open_files: int | None = None, max_map_count: int | None = None) -> int:
    """Partition replicas this process can host within its descriptor and mapping limits."""
    if open_files is None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        open_files = soft if soft != resource.RLIM_INFINITY else 1 << 20
    if max_map_count is None:
        max_map_count = _max_map_count()
    # a quarter kept for the rest when the limits are small
    bounds = [UNBOUNDED]
    if DESCRIPTORS_PER_PARTITION:
        bounds.append((open_files - min(RESERVED_DESCRIPTORS, open_files // 4))
                      // DESCRIPTORS_PER_PARTITION)
    if max_map_count is not None:
        bounds.append((max_map_count - min(RESERVED_MAPPINGS, max_map_count // 4))
                      // MAPPINGS_PER_PARTITION)
    return max(0, min(bounds))


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    """``per_topic`` / ``per_broker``: the properties; ``affordable``: what the process's
    descriptor and mapping limits allow (None: unbounded, for tests)."""

    per_topic: int = 10_000
    per_broker: int = 50_000
    affordable: int | None = None

    @classmethod
    def of_this_process(cls, per_topic: int, per_broker: int) -> PartitionLimits:
        return cls(per_topic, per_broker, affordable_partitions())

    @property
    def effective_per_broker(self) -> int:
        if self.affordable is None:
            return self.per_broker
        return min(self.per_broker, self.affordable)

    def check_topic(self, topic: str, total: int) -> None:
        if total > self.per_topic:
            raise PolicyViolationError(
                f"Topic '{topic}' would have {total} partitions, more than "
                f"max.partitions.per.topic={self.per_topic}")

    def check_brokers(self, hosted: Mapping[int, int],
                      added: Mapping[int, tuple[int, ...]]) -> None:
        """``hosted``: replicas each broker hosts now; ``added``: the new partitions'
        replica lists. Refuses when a broker would host more than it may."""
        after = dict(hosted)
        for replicas in added.values():
            for broker in replicas:
                after[broker] = after.get(broker, 0) + 1
        limit = self.effective_per_broker
        over = sorted(b for b, n in after.items() if n > limit and n > hosted.get(b, 0))
        if over:
            broker = over[0]
            why = ("max.partitions.per.broker" if limit == self.per_broker else
                   "what its file-descriptor and memory-mapping limits allow "
                   "(raise the open-files limit or vm.max_map_count)")
            raise PolicyViolationError(
                f"Broker {broker} would host {after[broker]} partition replicas, more than "
                f"{limit} ({why}); it hosts {hosted.get(broker, 0)} now")
