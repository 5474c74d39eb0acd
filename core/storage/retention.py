"""Which segments of a partition log have expired: pure decisions, time passed in.

Kafka's rules (``UnifiedLog.deleteOldSegments``), checked every
``log.retention.check.interval.ms``:

- Walk the segments oldest first and stop at the first one that is not deletable, so
  deletion only ever removes a prefix and the log stays contiguous.
- A segment is deletable only if it lies entirely below the high watermark: the next
  segment's base offset (or the log end offset for the last segment) is <= HW. Data a
  follower may still need is never deleted.
- ...and at least one rule says it expired:

  * time (``retention.ms``): ``now - segment.max_timestamp > retention.ms``, using the
    largest *record* timestamp in the segment (the ``.log`` file's mtime when it holds
    no timestamp). Future-dated records therefore delay deletion.
  * size (``retention.bytes``, per partition): with ``total`` the size of every segment
    (active included), delete while ``total - segment.size >= retention.bytes``.
  * log start (``DeleteRecords`` or a follower's leader moved it): the next segment's
    base offset is <= the log start offset. This rule applies even to compacted topics.

  ``-1`` disables the time or size rule; both apply only if ``cleanup.policy`` contains
  ``delete``.
- The active (last) segment may expire too; the log then rolls a fresh empty segment
  so a partition always has one (``PartitionLog.delete_segments``). An empty last
  segment is never returned: deleting it would only roll another empty one.

The caller applies the decision with ``PartitionLog.delete_segments``.
``segments_below_log_start`` is the log-start rule alone (DeleteRecords applies it at
once, ``PartitionLog.delete_records_before``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from core.storage.config import LogConfig

log = logging.getLogger(__name__)

DISABLED = -1
"""``retention.ms`` / ``retention.bytes`` value that switches the rule off."""


class RetentionSegment(Protocol):
    """What retention needs to know about a segment (``LogSegment`` satisfies it)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def max_timestamp(self) -> int: ...

    @property
    def log_path(self) -> Path: ...


S = TypeVar("S", bound=RetentionSegment)


def segments_to_delete(
    segments: Sequence[S],
    *,
    config: LogConfig,
    high_watermark: int,
    log_start_offset: int,
    log_end_offset: int,
    now_ms: int,
) -> list[S]:
    """The oldest-first prefix of ``segments`` (sorted by base offset) that may be deleted.

    See the module docstring for the rules. ``now_ms`` is wall-clock milliseconds.
    """
    delete_policy = config.delete
    retention_ms = config.retention_ms if delete_policy else DISABLED
    retention_bytes = config.retention_bytes if delete_policy else DISABLED
    remaining = sum(s.size for s in segments)
    out: list[S] = []
    for i, seg in enumerate(segments):
        is_last = i == len(segments) - 1
        upper = log_end_offset if is_last else segments[i + 1].base_offset
        if upper > high_watermark or (is_last and seg.size == 0):
            break
        expired = (
            _breaches_time(seg, retention_ms, now_ms)
            or _breaches_size(seg, retention_bytes, remaining)
            or upper <= log_start_offset
        )
        if not expired:
            break
        out.append(seg)
        remaining -= seg.size
    return out


def segments_below_log_start(
    segments: Sequence[S], *, log_start_offset: int, log_end_offset: int
) -> list[S]:
    """The oldest-first prefix of ``segments`` lying wholly below ``log_start_offset``
    (the log-start rule alone: what DeleteRecords frees at once). As in
    ``segments_to_delete``, an empty last segment is never returned."""
    out: list[S] = []
    for i, seg in enumerate(segments):
        is_last = i == len(segments) - 1
        upper = log_end_offset if is_last else segments[i + 1].base_offset
        if upper > log_start_offset or (is_last and seg.size == 0):
            break
        out.append(seg)
    return out


def largest_timestamp(segment: RetentionSegment) -> int:
    """The segment's largest record timestamp, or its ``.log`` mtime (ms) if it has none."""
    if segment.max_timestamp >= 0:
        return segment.max_timestamp
    try:
        return segment.log_path.stat().st_mtime_ns // 1_000_000
    except FileNotFoundError:
        log.warning("segment file %s vanished; treating it as timeless", segment.log_path)
        return -1


def _breaches_time(segment: RetentionSegment, retention_ms: int, now_ms: int) -> bool:
    if retention_ms < 0:
        return False
    largest = largest_timestamp(segment)
    return largest >= 0 and now_ms - largest > retention_ms


def _breaches_size(segment: RetentionSegment, retention_bytes: int, remaining: int) -> bool:
    return retention_bytes >= 0 and remaining - segment.size >= retention_bytes
