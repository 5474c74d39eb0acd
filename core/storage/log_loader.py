"""Opening a partition directory: leftover files, segment loading and recovery
(Kafka's ``LogLoader``).

Steps, in order:

1. Leftovers of interrupted work: ``*.deleted`` and ``*.cleaned`` files are deleted;
   each ``<base>.log.swap`` (compaction output that was ready) completes its swap: it
   is recovered (indexes rebuilt), the plain segments whose base offsets fall in its
   range ``[base, its next offset)`` are deleted, and ``.swap`` is stripped. Index
   ``.swap`` files and index files without a ``.log`` are deleted.
2. Every ``<base>.log`` is opened, sorted by base offset.
3. Clean shutdown: each segment's indexes are sanity-checked; a missing or corrupt
   index is rebuilt from its ``.log``. Unclean shutdown: the same for segments below
   the recovery point, then every segment from the one containing the recovery point
   to the end is recovered (``LogSegment.recover``); at the first invalid or partial
   batch that segment is truncated and all later segments are deleted.
4. The clean-shutdown marker is not trusted blindly: after a clean shutdown the tail of
   the active segment (from the batch of its last index entry, or of the recovery
   point when that is lower) is still checked, framing and CRC-32C; a damaged tail is
   recovered as after a crash (the segment truncated at its first bad batch, logged
   with the partition's name), so nothing is ever appended after bad bytes.
5. Producer state (``load_producer_state``, called by ``PartitionLog`` once the log
   start and end are known, and again after a truncation): snapshots above the log end
   or at/below the log start are deleted, the latest remaining one is loaded (a corrupt
   one is deleted and the next older tried), and the batch *headers* of the log from
   its offset to the log end are replayed (records are never decoded; only batches
   with a producer id change anything). After a clean shutdown the snapshot at the log
   end makes this a file read; after a crash the replay covers what follows the
   latest snapshot (snapshots are taken at every roll: the active segment at most).
   A log shut down cleanly with no snapshot at all predates producer state (Kafka's
   LogLoader makes the same assumption) and starts with none, without reading it.

Only the tail may be cut: the active segment after a clean shutdown, the segments from
the recovery point on after an unclean one. A segment below that whose index must be
rebuilt is first checked without changing it; if its batches are bad the log is
**corrupt below its tail** and ``LogLoadError`` is raised with nothing truncated, as for
any file that cannot be read: the caller (``PartitionLog.open``) takes that partition
offline and the broker serves the others.
"""

from __future__ import annotations

import bisect
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from core.clock import Clock
from core.storage.errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    KafkaStorageError,
)
from core.storage.leader_epoch import LeaderEpochCache
from core.storage.producer_state import ProducerStateManager
from core.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_EXT,
    LOG_EXT,
    SWAP_SUFFIX,
    TIME_INDEX_EXT,
    EpochSink,
    LogSegment,
)

if TYPE_CHECKING:
    from core.storage.config import LogConfig

log = logging.getLogger(__name__)


class LogLoadError(KafkaStorageError):
    """A partition's log cannot be loaded: a file is unreadable or the log is corrupt
    below its tail. Its message names the topic-partition, never a file path."""


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``orders-3`` -> ``("orders", 3)``; the partition follows the *last* ``-``."""
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{dir_name!r} is not a partition directory name (<topic>-<partition>)")
    return topic, int(partition)


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    clock: Clock,
    recovery_point: int,
    log_start_offset: int,
    clean_shutdown: bool,
    names: list[str] | None = None,
) -> tuple[list[LogSegment], LeaderEpochCache]:
    """All the steps of the module docstring: the surviving segments (at least one; an
    empty directory gets an empty segment at ``log_start_offset``), the last one's
    indexes grown back to full size, and the leader-epoch cache (rebuilt from the batch
    headers if its checkpoint is unreadable). ``names``: the directory's listing, when
    the caller has it (one listing per log: loading 10,000 logs lists each once)."""
    parse_topic_partition(directory.name)
    if names is None:
        directory.mkdir(parents=True, exist_ok=True)
        names = os.listdir(directory)
    if _has_leftovers(names):
        remove_leftovers(directory, config, clock=clock)
        names = os.listdir(directory)
    try:
        epochs, rebuild_epochs = LeaderEpochCache.load(directory), False
    except (CorruptCheckpointError, ValueError) as exc:
        log.warning("%s; rebuilding the leader epoch cache from the log", exc)
        epochs, rebuild_epochs = LeaderEpochCache(directory), True
    present = set(names)
    try:
        segments = open_segments(directory, config, clock=clock, names=names)
    except BaseException:
        _remove_created_indexes(directory, present)
        raise
    try:
        segments = recover_segments(
            segments, config, recovery_point=recovery_point,
            clean_shutdown=clean_shutdown, epochs=epochs,
        )  # fmt: skip
        if not segments:
            segments = [LogSegment.open(directory, log_start_offset, config, clock=clock)]
        if rebuild_epochs:
            for seg in segments:
                for _, header in seg.iter_batches():
                    epoch = header.partition_leader_epoch
                    if epoch >= 0 and epoch > epochs.latest_epoch:
                        epochs.assign(epoch, header.base_offset, flush=False)
        segments[-1].resize_indexes(config.segment_index_bytes)
    except BaseException:
        release_segments(segments)
        _remove_created_indexes(directory, present)
        raise
    return segments, epochs


def _remove_created_indexes(directory: Path, present: set[str]) -> None:
    """After a failed load: delete the index files opening the segments created, so the
    directory is left as it was found (and the next load sees the indexes missing)."""
    try:
        for path in directory.iterdir():
            if path.name not in present and path.name.endswith((INDEX_EXT, TIME_INDEX_EXT)):
                path.unlink(missing_ok=True)
    except OSError:
        log.warning("%s: cannot remove the index files of a failed load", directory.name,
                    exc_info=True)


def release_segments(segments: list[LogSegment]) -> None:
    """Close segments a failed load opened (errors are logged: the load already failed)."""
    for seg in segments:
        try:
            seg.close()
        except Exception:  # noqa: BLE001 - best effort, the load's own error is raised
            log.warning("%s: closing segment %d after a failed load failed too",
                        seg.dir.name, seg.base_offset, exc_info=True)



def _base_offset(name: str) -> int | None:
    digits = name.split(".", 1)[0]
    return int(digits) if len(digits) == 20 and digits.isdigit() else None


def _has_leftovers(names: list[str]) -> bool:
    """Whether ``remove_leftovers`` has anything to do among ``names`` (checked from
    the listing alone, without a ``stat`` per file)."""
    logs = set()
    indexes = []
    for name in names:
        if _base_offset(name) is None:
            continue
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)):
            return True
        if name.endswith(LOG_EXT):
            logs.add(name[: -len(LOG_EXT)])
        elif name.endswith((INDEX_EXT, TIME_INDEX_EXT)):
            indexes.append(name.rsplit(".", 1)[0])
    return any(stem not in logs for stem in indexes)


def remove_leftovers(directory: Path, config: LogConfig, *, clock: Clock) -> None:
    """Step 1 of the module docstring."""
    swaps: list[int] = []
    for path in sorted(directory.iterdir()):
        name = path.name
        if not path.is_file() or _base_offset(name) is None:
            continue
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
            log.info("deleting leftover file %s", path)
            path.unlink(missing_ok=True)
        elif name.endswith(LOG_EXT + SWAP_SUFFIX):
            swaps.append(_base_offset(name))  # type: ignore[arg-type]
        elif name.endswith(SWAP_SUFFIX):
            path.unlink(missing_ok=True)  # index swap files are rebuilt from the .log
    for base in sorted(swaps):
        _complete_swap(directory, base, config, clock=clock)
    for path in directory.iterdir():
        is_index = path.name.endswith((INDEX_EXT, TIME_INDEX_EXT))
        if is_index and _base_offset(path.name) is not None and not _log_of(path).exists():
            log.info("deleting orphan index file %s", path)
            path.unlink(missing_ok=True)


def _log_of(index_path: Path) -> Path:
    return index_path.with_name(index_path.name.rsplit(".", 1)[0] + LOG_EXT)


def _complete_swap(directory: Path, base: int, config: LogConfig, *, clock: Clock) -> None:
    swap = LogSegment.open(directory, base, config, clock=clock, suffix=SWAP_SUFFIX)
    try:
        swap.recover(config.max_message_bytes)
        end = swap.next_offset()
        for path in directory.iterdir():
            other = _base_offset(path.name)
            if (
                path.name.endswith(LOG_EXT)
                and other is not None
                and base <= other < max(end, base + 1)
            ):
                log.info("completing swap of %s: deleting replaced segment %s", swap.log_path, path)
                for ext in (LOG_EXT, INDEX_EXT, TIME_INDEX_EXT):
                    (directory / f"{other:020d}{ext}").unlink(missing_ok=True)
        swap.rename_suffix(SWAP_SUFFIX, "")
    finally:
        swap.close()


def open_segments(
    directory: Path, config: LogConfig, *, clock: Clock, names: list[str] | None = None
) -> list[LogSegment]:
    """Step 2: every plain ``.log`` in the directory, sorted by base offset."""
    listing = os.listdir(directory) if names is None else names
    bases = sorted(
        b for name in listing
        if name.endswith(LOG_EXT) and (b := _base_offset(name)) is not None
    )  # fmt: skip
    segments: list[LogSegment] = []
    try:
        for base in bases:
            segments.append(LogSegment.open(directory, base, config, clock=clock))
    except BaseException:
        for seg in segments:
            seg.close()
        raise
    return segments


def check_or_rebuild(
    segment: LogSegment, config: LogConfig, epochs: EpochSink | None, *, may_truncate: bool = True
) -> None:
    """Sanity-check the indexes; rebuild them from the ``.log`` if they fail. A segment
    below the log's tail (``may_truncate`` False) is checked first and never cut:
    LogLoadError when its batches are bad."""
    try:
        segment.sanity_check()
    except CorruptIndexError as exc:
        log.warning("%s: rebuilding the indexes of segment %d: %s", segment.dir.name,
                    segment.base_offset, exc)
        if not may_truncate:
            bad = segment.check_batches()
            if bad is not None:
                raise LogLoadError(
                    f"{segment.dir.name}: segment {segment.base_offset} is corrupt below the "
                    f"log's tail ({bad[1]}); nothing was truncated"
                ) from exc
        truncated = segment.recover(config.max_message_bytes, leader_epoch_cache=epochs)
        if truncated:
            log.warning("%s: rebuilding segment %d also truncated %d bytes", segment.dir.name,
                        segment.base_offset, truncated)


def check_active_tail(
    segment: LogSegment, config: LogConfig, epochs: EpochSink | None, *, recovery_point: int
) -> int:
    """Step 4: check the active segment from its last index entry (or the recovery
    point's entry, when lower) to the end; recover the segment if anything there is bad.
    Returns the bytes truncated."""
    last_offset, start = segment.offset_index.last_entry()
    expect: int | None = last_offset if segment.offset_index.entries else None
    if segment.base_offset <= recovery_point < last_offset:
        rp_offset, rp_start = segment.offset_index.lookup(recovery_point)
        if rp_start < start:
            start, expect = rp_start, (rp_offset if rp_start else None)
    bad = segment.check_batches(start, expect_last_offset=expect)
    if bad is None:
        return 0
    log.warning(
        "%s: the active segment %d has a damaged tail although the broker shut down "
        "cleanly (%s); recovering it", segment.dir.name, segment.base_offset, bad[1],
    )  # fmt: skip
    truncated = segment.recover(config.max_message_bytes, leader_epoch_cache=epochs)
    log.warning("%s: %d bytes after the last valid batch of segment %d were dropped",
                segment.dir.name, truncated, segment.base_offset)
    return truncated


def recover_segments(
    segments: list[LogSegment],
    config: LogConfig,
    *,
    recovery_point: int,
    clean_shutdown: bool,
    epochs: EpochSink | None,
) -> list[LogSegment]:
    """Steps 3 and 4: returns the segments that survive (later ones are deleted)."""
    if clean_shutdown:
        for seg in segments[:-1]:
            check_or_rebuild(seg, config, epochs, may_truncate=False)
        if segments:
            check_or_rebuild(segments[-1], config, epochs)
            check_active_tail(segments[-1], config, epochs, recovery_point=recovery_point)
        return segments
    first_unflushed = max(
        0, bisect.bisect_right([s.base_offset for s in segments], recovery_point) - 1
    )
    for seg in segments[:first_unflushed]:
        check_or_rebuild(seg, config, epochs, may_truncate=False)
    for i in range(first_unflushed, len(segments)):
        truncated = segments[i].recover(config.max_message_bytes, leader_epoch_cache=epochs)
        if truncated:
            doomed = segments[i + 1 :]
            log.warning(
                "%s: recovery truncated %d bytes of segment %d; deleting %d later segments",
                segments[i].dir.name, truncated, segments[i].base_offset, len(doomed),
            )  # fmt: skip
            for seg in doomed:
                seg.delete()
            return segments[: i + 1]
    return segments


def load_producer_state(
    state: ProducerStateManager,
    segments: list[LogSegment],
    *,
    log_start_offset: int,
    log_end_offset: int,
    now_ms: int,
    clean_shutdown: bool = False,
) -> int:
    """Step 5 of the module docstring (Kafka's ``UnifiedLog.rebuildProducerState``):
    bring ``state`` to ``log_end_offset``. Also used after a truncation (then
    ``state.map_end_offset`` must differ from ``log_end_offset`` so it reloads). Returns
    the offset the replay started from (``log_end_offset``: nothing was read).
    LogLoadError if a header in the replayed range is impossible."""
    if clean_shutdown and state.latest_snapshot_offset is None:
        state.truncate_and_reload(log_start_offset, log_end_offset, now_ms)
        state.update_map_end_offset(log_end_offset)
        return log_end_offset
    start = state.truncate_and_reload(log_start_offset, log_end_offset, now_ms)
    if start < log_end_offset:
        try:
            replay_producer_batches(state, segments, start, log_end_offset)
        except CorruptRecordError as exc:
            where = segments[0].dir.name if segments else "log"
            raise LogLoadError(
                f"{where}: the producer state cannot be rebuilt from offset {start}: {exc}"
            ) from exc
    state.update_map_end_offset(log_end_offset)
    return start


def replay_producer_batches(
    state: ProducerStateManager, segments: list[LogSegment], start: int, end: int
) -> None:
    """Apply to ``state`` every batch with a producer id in ``[start, end)``, in log order,
    from the headers alone (Kafka's ``loadProducersFromRecords``). The first segment is
    entered at ``start`` through its offset index."""
    bases = [s.base_offset for s in segments]
    first = max(0, bisect.bisect_right(bases, start) - 1)
    update = state.update
    for seg in segments[first:]:
        if seg.base_offset >= end:
            break
        position = 0
        if start > seg.base_offset:
            frame = seg.locate(start)
            if frame is None:
                continue
            position = frame.position
        for _pos, header in seg.iter_batches(position):
            if header.base_offset >= end:
                break
            if header.producer_id >= 0 and header.last_offset >= start:
                update(header)
