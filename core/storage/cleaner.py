"""Log compaction for ``cleanup.policy`` containing ``compact`` (Kafka's ``LogCleaner``).

One cleaning of one partition log, synchronous (the broker schedules it):

1. The cleanable range is ``[first_dirty, end)`` with ``end`` = min(high watermark,
   active segment base offset, base offset of the first segment holding data newer
   than ``now - min.compaction.lag.ms``). ``first_dirty`` comes from the cleaner
   checkpoint. The active segment is never cleaned.
2. Build a key -> latest offset map over the range (keys as MD5 digests, as Kafka
   does). At most ``max_keys`` keys: a range with more is cut short at a batch
   boundary and the rest waits for the next cleaning.
3. Recopy every segment from the log start up to the end of the mapped range, in
   groups whose total size fits one segment, into ``<base>.log.cleaned`` segments,
   keeping a record iff it is the latest version of its key and not an expired
   tombstone (``core.storage.batch_rewrite`` holds the per-batch rules: keyless
   records dropped, delete horizon on tombstones, empty batch kept for the last batch
   of each producer the log's producer state holds, Kafka's rule: a rebuild of the
   state from the log finds its epoch and sequence). Offsets never change, so a
   compacted log has offset gaps.
4. ``PartitionLog.replace_segments(new, old)`` swaps each group in (``.cleaned`` ->
   ``.swap`` -> old segments deleted -> suffix stripped); a crash part way is completed
   or rolled back when the log is reopened.

The caller stores ``CleanResult.first_dirty_after`` in the cleaner checkpoint.

Not implemented (franz writes no transactions yet): dropping records of aborted
transactions and obsolete transaction markers; control batches are always kept.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.storage.batch import BatchHeader
from core.storage.batch_rewrite import FilteredBatch, filter_batch
from core.storage.records import iter_raw_records
from core.storage.retention import largest_timestamp
from core.storage.segment import CLEANED_SUFFIX, LogSegment, segment_file_name

if TYPE_CHECKING:
    from core.clock import Clock
    from core.storage.log import PartitionLog

logger = logging.getLogger(__name__)

DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024
"""Kafka's ``log.cleaner.dedupe.buffer.size`` default."""
DEFAULT_MAX_KEYS = int(DEDUPE_BUFFER_BYTES * 0.9) // 24
"""Keys one cleaning maps: Kafka's 24-byte slots (MD5 + offset) at load factor 0.9."""
MAX_RELATIVE_OFFSET = 2**31 - 1
_WRITE_BUFFER_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one cleaning did. ``first_dirty_after`` is the new cleaner checkpoint."""

    first_dirty_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int


class OffsetMap:
    """Key -> offset of the key's latest record in the mapped range (MD5 of the key)."""

    def __init__(self) -> None:
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[_digest(key)] = offset

    def get(self, key: bytes) -> int:
        """The mapped offset of ``key``, or -1 if the range does not hold the key."""
        return self._offsets.get(_digest(key), -1)


def _digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


# --- deciding ----------------------------------------------------------------------


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
                return seg.base_offset
    return end


def dirty_ratio(
    log: PartitionLog, first_dirty: int, *, first_uncleanable: int | None = None
) -> float:
    """Bytes in ``[first_dirty, first_uncleanable)`` over bytes in ``[log start,
    first_uncleanable)``, counted in whole segments (a segment holding
    ``first_dirty`` counts as dirty). ``first_uncleanable`` defaults to the active
    segment's base offset."""
    end = log.active_segment.base_offset if first_uncleanable is None else first_uncleanable
    clean_bytes = dirty_bytes = 0
    for seg, upper in _segments_with_upper(log):
        if seg.base_offset >= end:
            break
        if upper <= first_dirty:
            clean_bytes += seg.size
        else:
            dirty_bytes += seg.size
    total = clean_bytes + dirty_bytes
    return dirty_bytes / total if total else 0.0


def compaction_overdue(log: PartitionLog, first_dirty: int, *, now_ms: int) -> bool:
    """True if a dirty, inactive segment's first batch is older than
    ``max.compaction.lag.ms``: the log must be cleaned whatever its dirty ratio."""
    max_lag = log.config.max_compaction_lag_ms
    for seg, upper in _segments_with_upper(log):
        if seg is log.active_segment:
            break
        first_ts = seg.first_batch_timestamp
        if upper > first_dirty and first_ts is not None and 0 <= first_ts < now_ms - max_lag:
            return True
    return False


def cleanable_ratio(
    log: PartitionLog, first_dirty: int, *, now_ms: int, high_watermark: int
) -> float | None:
    """The log's dirty ratio if it should be cleaned now (ratio above
    ``min.cleanable.dirty.ratio``, or compaction overdue, and a non-empty cleanable
    range), else None."""
    end = first_uncleanable_offset(log, now_ms=now_ms, high_watermark=high_watermark)
    if first_dirty >= end:
        return None
    ratio = dirty_ratio(log, first_dirty, first_uncleanable=end)
    if ratio > log.config.min_cleanable_dirty_ratio:
        return ratio
    return ratio if compaction_overdue(log, first_dirty, now_ms=now_ms) else None


def _segments_with_upper(log: PartitionLog) -> Iterator[tuple[LogSegment, int]]:
    """Each segment with the offset just above it (next base offset, or LEO)."""
    segs = log.segments
    for i, seg in enumerate(segs):
        yield seg, segs[i + 1].base_offset if i + 1 < len(segs) else log.log_end_offset


# --- cleaning ----------------------------------------------------------------------


def clean(
    log: PartitionLog,
    *,
    first_dirty: int,
    now_ms: int,
    high_watermark: int,
    max_keys: int = DEFAULT_MAX_KEYS,
) -> CleanResult:
    """Compact ``log`` once (see the module docstring), swapping cleaned segments in."""
    first_dirty = max(first_dirty, log.log_start_offset)
    end = first_uncleanable_offset(log, now_ms=now_ms, high_watermark=high_watermark)
    if first_dirty >= end:
        return CleanResult(first_dirty, 0, 0, 0)
    offset_map, map_end = build_offset_map(log, first_dirty, end, max_keys=max_keys)
    if map_end <= first_dirty:
        return CleanResult(first_dirty, 0, 0, 0)
    cleaner = _GroupCleaner(
        log, offset_map, map_end, now_ms=now_ms, clock=_FixedClock(now_ms),
        producer_last_batch=_last_batch_of_producers(log),
    )  # fmt: skip
    upper = {seg.base_offset: up for seg, up in _segments_with_upper(log)}
    groups = group_segments(
        [s for s in log.segments if s.base_offset < map_end],
        max_bytes=log.config.segment_bytes,
        upper_offsets=upper,
    )
    before = after = removed = 0
    for group in groups:
        new_seg, group_removed = cleaner.clean_group(group)
        before += sum(s.size for s in group)
        after += new_seg.size
        removed += group_removed
        log.replace_segments([new_seg], list(group))
    logger.info(
        "cleaned %s [%d, %d): %d -> %d bytes, %d records removed",
        log.dir.name, first_dirty, map_end, before, after, removed,
    )  # fmt: skip
    return CleanResult(map_end, before, after, removed)


def build_offset_map(
    log: PartitionLog, start: int, end: int, *, max_keys: int
) -> tuple[OffsetMap, int]:
    """Map every key in the batches of ``[start, end)`` to its latest offset.

    Returns the map and the end of the mapped range: ``end``, or the base offset of the
    first batch left out (it straddles ``end``, or its keys would overflow
    ``max_keys`` once at least one batch is mapped).
    """
    offset_map = OffsetMap()
    for seg, upper in _segments_with_upper(log):
        if upper <= start:
            continue
        if seg.base_offset >= end:
            break
        for pos, header in seg.iter_batches():
            if header.last_offset < start:
                continue
            if header.last_offset >= end or (
                len(offset_map) and len(offset_map) + header.records_count > max_keys
            ):
                return offset_map, max(start, header.base_offset)
            if header.is_control:
                continue
            batch = seg.read_batch(pos, header)
            for offset, _ts, _tt, key, _value, _headers in iter_raw_records(batch, 0, header):
                if key is not None:
                    offset_map.put(key, offset)
    return offset_map, end


def group_segments(
    segments: Sequence[LogSegment], *, max_bytes: int, upper_offsets: dict[int, int]
) -> list[list[LogSegment]]:
    """Split consecutive ``segments`` into groups to be cleaned into one segment each:
    a group's total size stays within ``max_bytes`` and its offsets within 2^31 - 1 of
    its base offset (``upper_offsets`` maps a base offset to the offset after the
    segment). A segment larger than ``max_bytes`` forms its own group."""
    groups: list[list[LogSegment]] = []
    for seg in segments:
        group = groups[-1] if groups else None
        if (
            group is not None
            and sum(s.size for s in group) + seg.size <= max_bytes
            and upper_offsets[seg.base_offset] - 1 - group[0].base_offset <= MAX_RELATIVE_OFFSET
        ):
            group.append(seg)
        else:
            groups.append([seg])
    return groups


def _last_batch_of_producers(log: PartitionLog) -> dict[int, int]:
    """Producer id -> last offset of its last batch, for each producer in the log's
    producer state (Kafka's ``lastRecordsOfActiveProducers``; the state is built from
    the whole log, so no scan is needed). Expired producers are not in it: their
    batches go like any other, as in Kafka."""
    return {
        pid: entry.last_offset
        for pid, entry in log.producer_state.producers.items()
        if entry.last_offset >= 0
    }


class _GroupCleaner:
    """One cleaning's writer: each group of old segments becomes one ``.cleaned`` segment."""

    def __init__(
        self,
        log: PartitionLog,
        offset_map: OffsetMap,
        map_end: int,
        *,
        now_ms: int,
        clock: Clock,
        producer_last_batch: dict[int, int],
    ) -> None:
        """``producer_last_batch``: producer id -> last offset of the batch to keep."""
        self.log = log
        self.offset_map = offset_map
        self.map_end = map_end
        self.now_ms = now_ms
        self.clock = clock
        self.producer_last_batch = producer_last_batch

    def _is_latest(self, offset: int, key: bytes) -> bool:
        return offset >= self.map_end or offset >= self.offset_map.get(key)

    def clean_group(self, group: Sequence[LogSegment]) -> tuple[LogSegment, int]:
        """The cleaned, flushed segment for ``group`` and the records it dropped."""
        dest = self._new_segment(group[0].base_offset)
        removed = 0
        pending = _PendingAppend()
        try:
            for seg in group:
                for pos, header in seg.iter_batches():
                    result = self._filter(seg.read_batch(pos, header), header)
                    removed += result.removed
                    if result.data is not None:
                        pending.add(result, header)
                        if pending.size >= _WRITE_BUFFER_BYTES:
                            pending.flush_into(dest)
            pending.flush_into(dest)
            dest.on_become_inactive()
            dest.flush()
            # Time retention falls back to the file mtime for segments without
            # timestamps: keep the age of the data, not of the cleaning.
            mtime = max(s.log_path.stat().st_mtime_ns for s in group)
            os.utime(dest.log_path, ns=(mtime, mtime))
        except BaseException:
            dest.delete()
            raise
        return dest, removed

    def _filter(self, batch: bytes, header: BatchHeader) -> FilteredBatch:
        last_of_producer = self.producer_last_batch.get(header.producer_id)
        return filter_batch(
            batch,
            header,
            is_latest=self._is_latest,
            now_ms=self.now_ms,
            delete_retention_ms=self.log.config.delete_retention_ms,
            retain_empty=last_of_producer == header.last_offset,
            mapped_end=self.map_end,
        )

    def _new_segment(self, base_offset: int) -> LogSegment:
        stale = self.log.dir / segment_file_name(base_offset, ".log", CLEANED_SUFFIX)
        if stale.exists():  # left by a crash; the loader normally removes these
            LogSegment.open(self.log.dir, base_offset, self.log.config, clock=self.clock,
                            suffix=CLEANED_SUFFIX).delete()  # fmt: skip
        return LogSegment.open(
            self.log.dir, base_offset, self.log.config, clock=self.clock, suffix=CLEANED_SUFFIX
        )


class _FixedClock:
    """The cleaning's ``now``, as the creation time of the segments it writes."""

    def __init__(self, now_ms: int) -> None:
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._now_ms / 1000.0


class _PendingAppend:
    """Batches collected for one ``LogSegment.append`` call (indexed per batch)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.chunks: list[bytes] = []
        self.spans: list[tuple[int, int, int, int]] = []
        self.size = 0
        self.first_offset = -1
        self.last_offset = -1
        self.max_timestamp = -1
        self.max_timestamp_offset = -1

    def add(self, result: FilteredBatch, header: BatchHeader) -> None:
        assert result.data is not None
        if not self.chunks:
            self.first_offset = header.base_offset
        self.spans.append((self.size, len(result.data), header.last_offset, result.max_timestamp))
        self.chunks.append(result.data)
        self.size += len(result.data)
        self.last_offset = header.last_offset
        if result.max_timestamp > self.max_timestamp:
            self.max_timestamp = result.max_timestamp
            self.max_timestamp_offset = result.max_timestamp_offset

    def flush_into(self, dest: LogSegment) -> None:
        if not self.chunks:
            return
        dest.append(
            b"".join(self.chunks),
            first_offset=self.first_offset,
            last_offset=self.last_offset,
            max_timestamp=self.max_timestamp,
            max_timestamp_offset=self.max_timestamp_offset,
            batches=self.spans,
        )
        self.reset()
