"""Log compaction for ``cleanup.policy`` containing ``compact`` (Kafka's ``LogCleaner``).

One cleaning of one partition log, synchronous (the broker runs it off the event loop):

1. The cleanable range is ``[first_dirty, end)`` with ``end`` = min(high watermark,
   active segment base offset, base offset of the first segment holding data newer than
   ``now - min.compaction.lag.ms``). ``first_dirty`` comes from the cleaner checkpoint.
2. Build a key -> latest offset map over the range (keys as MD5 digests, 16 bytes each,
   as Kafka does). At most ``max_keys`` entries: a range with more keys is cut short at
   a batch boundary and the rest waits for the next cleaning.
3. Recopy every segment from the log start up to the end of the mapped range, in groups
   whose total size fits one segment, into ``<base>.log.cleaned`` segments, keeping a
   record iff it is the latest version of its key and it is not an expired tombstone
   (``core.storage.batch_rewrite`` has the per-batch rules). Offsets never change, so a
   compacted log has offset gaps.
4. ``PartitionLog.replace_segments(new, old)`` swaps each group in (``.cleaned`` ->
   ``.swap`` -> old segments deleted -> ``.swap`` stripped); a crash part way is
   completed or rolled back when the log is reopened.

The caller records ``CleanResult.first_dirty_after`` in the cleaner checkpoint.

Not implemented (nothing in franz writes them yet): dropping records of aborted
transactions and transaction markers; control batches are always kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.storage.batch_rewrite import filter_batch
from core.storage.retention import largest_timestamp

if TYPE_CHECKING:
    from core.storage.log import PartitionLog
    from core.storage.segment import LogSegment

log = logging.getLogger(__name__)

DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024
"""Kafka's ``log.cleaner.dedupe.buffer.size``."""
DEFAULT_MAX_KEYS = int(DEDUPE_BUFFER_BYTES * 0.9) // 24
"""Keys one cleaning maps: Kafka's 24-byte slots (MD5 + offset) at load factor 0.9."""
MAX_RELATIVE_OFFSET = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one cleaning did. ``first_dirty_after`` is the new cleaner checkpoint."""

    first_dirty_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int


class OffsetMap:
    """Key digest -> offset of the latest record with that key in the mapped range."""

    def __init__(self) -> None:
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[_digest(key)] = offset

    def get(self, key: bytes) -> int:
        """The mapped offset for ``key``, or -1 if the key is not in the range."""
        return self._offsets.get(_digest(key), -1)


def _digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


# --- deciding what to clean -------------------------------------------------------


def first_uncleanable_offset(log: PartitionLog, *, now_ms: int, high_watermark: int) -> int:
    """The end of the cleanable range: min(HW, active segment base, first segment with
    data newer than ``now - min.compaction.lag.ms``)."""
    end = min(high_watermark, log.active_segment.base_offset)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in log.segments:
            if seg.base_offset >= end:
                break
            if largest_timestamp(seg) > now_ms - lag:
                return min(end, seg.base_offset)
    return end


def dirty_ratio(log: PartitionLog, first_dirty: int, *, first_uncleanable: int | None = None) -> float:
    """Bytes in ``[first_dirty, first_uncleanable)`` over bytes in ``[log start,
    first_uncleanable)``, counted in whole segments (``first_uncleanable`` defaults to
    the active segment's base offset)."""
    end = log.active_segment.base_offset if first_uncleanable is None else first_uncleanable
    clean = dirty = 0
    for seg, upper in _with_upper_offsets(log):
        if seg.base_offset >= end:
            break
        if upper <= first_dirty:
            clean += seg.size
        else:
            dirty += seg.size
    total = clean + dirty
    return dirty / total if total else 0.0


def compaction_overdue(log: PartitionLog, first_dirty: int, *, now_ms: int) -> bool:
    """True if some dirty, non-active segment's first batch is older than
    ``max.compaction.lag.ms``: the log must be cleaned whatever its dirty ratio."""
    max_lag = log.config.max_compaction_lag_ms
    for seg, upper in _with_upper_offsets(log):
        if seg is log.active_segment:
            break
        first_ts = seg.first_batch_timestamp
        if upper > first_dirty and first_ts is not None and first_ts >= 0:
            if now_ms - first_ts > max_lag:
                return True
    return False


# --- cleaning ---------------------------------------------------------------------


def clean(
    log: PartitionLog,
    *,
    first_dirty: int,
    now_ms: int,
    high_watermark: int,
    max_keys: int = DEFAULT_MAX_KEYS,
) -> CleanResult:
    """Compact ``log`` once (see the module docstring) and swap the cleaned segments in."""
    first_dirty = max(first_dirty, log.log_start_offset)
    end = first_uncleanable_offset(log, now_ms=now_ms, high_watermark=high_watermark)
    if first_dirty >= end:
        return CleanResult(first_dirty, 0, 0, 0)
    offset_map, map_end = build_offset_map(log, first_dirty, end, max_keys=max_keys)
    if map_end <= first_dirty:
        return CleanResult(first_dirty, 0, 0, 0)
    last_batches = _last_batch_of_producers(log.segments)
    groups = group_segments(
        [s for s in log.segments if s.base_offset < map_end],
        max_bytes=log.config.segment_bytes,
        upper_offsets=dict((s.base_offset, u) for s, u in _with_upper_offsets(log)),
    )
    before = after = removed = 0
    for group in groups:
        new_seg, group_removed = _clean_group(
            log, group, offset_map, map_end, now_ms=now_ms, producer_last_batch=last_batches
        )
        before += sum(s.size for s in group)
        after += new_seg.size
        removed += group_removed
        log.replace_segments([new_seg], list(group))
    log_info = "cleaned %s-%d [%d, %d): %d -> %d bytes, %d records removed"
    log.info if False else None  # noqa: B018 (placeholder removed below)
    _log.info(log_info, log.topic, log.partition, first_dirty, map_end, before, after, removed)
    return CleanResult(map_end, before, after, removed)
