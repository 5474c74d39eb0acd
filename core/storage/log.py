"""The partition log: an ordered list of segments with a log start offset, a log end
offset (LEO) and a recovery point (Kafka's ``UnifiedLog`` + ``LocalLog``).

Invariants, kept by every method:

- ``log_start_offset <= log_end_offset``; ``recovery_point <= log_end_offset``.
- Segments are sorted by base offset and the last one is the active segment; the LEO
  is the active segment's ``next_offset()``.
- ``size_in_bytes`` is the sum of the segment sizes (kept incrementally).
- The leader-epoch cache has no entry above the LEO, nor below the log start;
  truncation drops the entries at or above the new LEO.

Durability: appends are written with ``write`` and not fsynced. A roll calls
``on_roll(log, new_base_offset)`` if the owner passed one (it should schedule
``flush(new_base_offset)`` off the event loop, as Kafka does); without it the rolled
segment is flushed synchronously. ``flush.messages`` is applied inline after appends;
``flush.ms`` is the owner's job (``core.storage.flusher``). A leader append may
leave the ``flush.messages`` fsync to its caller (``flush_inline=False``), as the broker
does to fsync off the event loop and group concurrent appends.

Idempotent producers (``core.storage.producer_state``): each log owns a
``ProducerStateManager`` for its directory. A leader append whose batches carry a
producer id is checked against it before anything is written (a duplicate of a cached
batch writes nothing and answers the original offsets, ``AppendInfo.duplicate``;
out-of-order sequences and fenced epochs raise); batches without one cost one
comparison each. Every append, leader or follower, updates it after the write. A
snapshot is written at each roll (named after the new segment's base offset, fsynced
by the next ``flush``) and at ``close``; loading and truncation rebuild the state from
the latest snapshot plus the batch headers after it (``log_loader.load_producer_state``);
retention deletes snapshots below the log start, keeping the producers (Kafka 2.4+);
``remove_expired_producers`` drops those idle for ``producer.id.expiration.ms``.

Deleted segments are renamed to ``.deleted`` and removed immediately, not after
``file.delete.delay.ms``: nothing in franz reads a deleted segment through an old
handle (reads go through this object), so there is nothing to wait for.

A log that exists on disk but cannot be loaded (a file unreadable, the log corrupt
below its tail: ``core.storage.log_loader``) opens as an ``OfflinePartitionLog``: its
files are left exactly as they are, every read and write of it raises
KafkaStorageError (Kafka's KAFKA_STORAGE_ERROR), its checkpointed recovery point and
log start are kept for the next start, and the broker goes on with its other logs.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from core.clock import Clock
from core.errors import FranzError
from core.storage import log_loader
from core.storage.batch import BatchHeader, parse_header
from core.storage.durability import fsync_dir
from core.storage.errors import (
    InvalidProducerEpochError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    StorageError,
)
from core.storage.file_region import FileRegion
from core.storage.leader_epoch import LeaderEpochCache
from core.storage.log_validator import (
    LOG_APPEND_TIME_NAME,
    ValidatedAppend,
    as_buffer,
    assign_offsets,
    split_into_runs,
    validate_client_batches,
    validate_replicated_batches,
)
from core.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    DEFAULT_TRANSIENT_EXPIRATION_MS,
    BatchMetadata,
    ProducerStateManager,
)
from core.storage.retention import segments_below_log_start
from core.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    RESERVE_BYTES,
    SWAP_SUFFIX,
    LogSegment,
)

if TYPE_CHECKING:
    from core.storage.config import LogConfig

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3

RollCallback = Callable[["PartitionLog", int], None]
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43  # byte of producerId in the batch header
_JITTER_RNG = random.Random()  # shared: seeding one per log costs a urandom read each


class AppendInfo(NamedTuple):
    """What an append wrote (a named tuple: one is made per partition append).
    ``log_append_time`` is -1 unless the topic uses LogAppendTime. An empty append has
    ``num_records == 0`` and ``last_offset == first_offset - 1``.

    ``duplicate``: the append repeated a batch the producer state still holds (same
    producer id, epoch and sequence range): nothing was written, ``first_offset`` /
    ``last_offset`` are those of the original batch, ``max_timestamp`` its max
    timestamp (also ``log_append_time`` under LogAppendTime), ``num_records`` and
    ``size`` 0 (nothing written). The produce succeeds, as Kafka answers it."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int
    num_records: int
    size: int
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole batches read from the log (the first may start below the requested offset)."""

    data: bytes
    first_offset: int  # base offset of the first batch, or the requested offset if empty
    high_offset: int  # offset just after the last batch returned


class PartitionLog:
    """One partition's log in ``<log dir>/<topic>-<partition>``.

    Lifecycle: ``PartitionLog.open`` loads (and if needed recovers) the directory;
    ``close`` trims indexes and releases files; ``delete`` removes the directory.

    Not thread-safe: the owner (``core.broker.replica.partition.Partition``) serialises every
    call. Blocking calls (``flush``, ``delete_segments``, ``replace_segments``,
    ``delete``) are plain methods the broker runs off the event loop.
    """

    #: True for an ``OfflinePartitionLog`` (the log could not be loaded).
    offline = False
    #: Why it is offline, naming the partition and never a file path.
    offline_reason: str | None = None

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochCache,
        clock: Clock,
        on_roll: RollCallback | None = None,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        """``producer_state``: the partition's producer state, already loaded (``_load``
        does it); None makes an empty one for ``directory``."""
        self.dir = directory
        self.topic, self.partition = log_loader.parse_topic_partition(directory.name)
        self.config = config
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        self._clock = clock
        self._rng = _JITTER_RNG
        self.on_roll = on_roll
        self.leader_epoch_cache = epoch_cache
        self.log_end_offset = self.active_segment.next_offset()
        self.log_start_offset = min(
            max(log_start_offset, segments[0].base_offset), self.log_end_offset
        )
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self._synced_to = 0  # offsets below it were fdatasynced (``mark_synced``)
        self.size_in_bytes = sum(s.size for s in segments)
        self.last_flush_ms = clock.now_ms()
        self._dir_dirty = False
        self.producer_state = (
            ProducerStateManager(directory) if producer_state is None else producer_state
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        clock: Clock,
        on_roll: RollCallback | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        transient_expiration_ms: int = DEFAULT_TRANSIENT_EXPIRATION_MS,
    ) -> PartitionLog:
        """Load ``directory`` (created if missing); see ``core.storage.log_loader``.
        ``producer_id_expiration_ms``: the broker's ``producer.id.expiration.ms``;
        ``transient_expiration_ms``: its ``idempotency.producer.id.expiration.ms``.

        A log that is on disk (its directory holds files) and cannot be loaded comes
        back as an ``OfflinePartitionLog``, its files untouched; creating a new log
        (no directory, or an empty one) that fails raises KafkaStorageError naming the
        partition."""
        names = _listing(directory)
        existed = names is None or bool(names)
        try:
            return cls._load(
                directory, config, recovery_point=recovery_point,
                log_start_offset=log_start_offset, clean_shutdown=clean_shutdown,
                clock=clock, on_roll=on_roll, names=names or None,
                producer_id_expiration_ms=producer_id_expiration_ms,
                transient_expiration_ms=transient_expiration_ms,
            )  # fmt: skip
        except Exception as exc:
            reason = describe_storage_failure(exc, directory)
            if not existed:
                raise KafkaStorageError(
                    f"cannot create the log of {directory.name}: {reason}"
                ) from exc
            log.error(
                "%s is OFFLINE: its log could not be loaded (%s). The broker serves its "
                "other partitions; this one answers KAFKA_STORAGE_ERROR until its directory "
                "is repaired and the broker restarted", directory.name, reason,
                exc_info=not isinstance(exc, log_loader.LogLoadError),
            )  # fmt: skip
            return OfflinePartitionLog(
                directory, config, recovery_point=recovery_point,
                log_start_offset=log_start_offset, clock=clock, reason=reason,
            )  # fmt: skip

    @classmethod
    def _load(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        clock: Clock,
        on_roll: RollCallback | None,
        names: list[str] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        transient_expiration_ms: int = DEFAULT_TRANSIENT_EXPIRATION_MS,
    ) -> PartitionLog:
        segments, epochs = log_loader.load_segments(
            directory, config, clock=clock, recovery_point=recovery_point,
            log_start_offset=log_start_offset, clean_shutdown=clean_shutdown, names=names,
        )  # fmt: skip
        try:
            # the listing is still right for snapshots: leftover removal touches none
            state = ProducerStateManager(
                directory, producer_id_expiration_ms=producer_id_expiration_ms,
                transient_expiration_ms=transient_expiration_ms, names=names
            )
            plog = cls(
                directory, config, segments=segments, log_start_offset=log_start_offset,
                recovery_point=recovery_point, epoch_cache=epochs, clock=clock, on_roll=on_roll,
                producer_state=state,
            )  # fmt: skip
            log_loader.load_producer_state(
                state, plog.segments, log_start_offset=plog.log_start_offset,
                log_end_offset=plog.log_end_offset, now_ms=clock.now_ms(),
                clean_shutdown=clean_shutdown,
            )  # fmt: skip
        except BaseException:
            log_loader.release_segments(segments)
            raise
        if clean_shutdown:
            plog.recovery_point = plog.log_end_offset
        try:
            epochs.truncate_from_end(plog.log_end_offset + 1)  # keeps a new leader's (epoch, LEO)
            epochs.truncate_from_start(plog.log_start_offset)
            epochs.flush_if_dirty()
        except (OSError, StorageError) as exc:  # e.g. a full disk: the cache is right in memory
            log.warning("%s: cannot write the leader epoch checkpoint (%s); it is written "
                        "with the next epoch change", directory.name,
                        describe_storage_failure(exc, directory))
        log.debug(  # debug: a broker loads thousands (LogManager logs the count)
            "loaded %s: segments=%d log_start=%d leo=%d recovery_point=%d",
            directory.name, len(segments), plog.log_start_offset, plog.log_end_offset, plog.recovery_point,
        )  # fmt: skip
        return plog

    # --- views -----------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended since the last flush (Kafka: LEO - recovery point)."""
        return self.log_end_offset - self.recovery_point

    def segment_for(self, offset: int) -> LogSegment | None:
        """The segment whose range holds ``offset`` (floor by base offset)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return self.segments[i] if i >= 0 else None

    def non_active_segments(self) -> list[LogSegment]:
        return self.segments[:-1]

    def _where(self) -> str:
        return f"{self.topic}-{self.partition}"

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (index sizes apply to segments created later)."""
        self.config = config
        for seg in self.segments:
            seg.index_interval_bytes = config.index_interval_bytes
        active = self.active_segment
        if active.reserve_bytes:  # 0: its file system cannot reserve
            active.reserve_bytes = min(RESERVE_BYTES, config.segment_bytes)

    # --- appending -------------------------------------------------------------------

    def append_as_leader(self, data: bytes | bytearray, *, leader_epoch: int,
                         flush_inline: bool = True) -> AppendInfo:
        """Validate a produce payload (whole v2 batches), assign offsets from the LEO,
        stamp ``leader_epoch`` and write it. Nothing is written if any batch is invalid.
        A ``bytearray`` is patched in place; other buffers are copied first. With
        ``flush_inline=False`` a ``flush.messages`` fsync is left to the caller
        (``flush_due`` says when one is owed).

        Batches with a producer id are checked against the producer state first
        (Kafka's ``analyzeAndValidateProducerState``): if one repeats a cached batch,
        nothing is written and the answer carries the original offsets with
        ``duplicate=True``; an out-of-order sequence raises OutOfOrderSequenceError, an
        old epoch InvalidProducerEpochError, and nothing is written."""
        now = self._clock.now_ms()
        buf = as_buffer(data)
        where = self._where()
        batches = validate_client_batches(buf, self.config, now_ms=now, where=where)
        if not batches:
            return self._empty_append_info()
        producers = False
        for _pos, h in batches:  # one comparison per batch without a producer id
            if h.producer_id >= 0:
                dup = self._check_producers(batches, where)
                if dup is not None:
                    return self._duplicate_append_info(dup)
                producers = True
                break
        log_append = self.config.message_timestamp_type == LOG_APPEND_TIME_NAME
        append = assign_offsets(
            buf, batches, first_offset=self.log_end_offset, leader_epoch=leader_epoch,
            log_append_time_ms=now if log_append else None,
        )  # fmt: skip
        self._write_in_runs(append, producers)
        if leader_epoch >= 0 and leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, append.first_offset)
        if flush_inline:
            self._maybe_flush_by_count()
        return self._append_info(append, log_append_time=now if log_append else -1)

    def append_as_follower(self, data: bytes | bytearray) -> AppendInfo:
        """Write batches fetched from the leader, offsets and epochs unchanged. The first
        base offset must be >= the LEO (gaps are fine). Nothing is written if any batch
        is invalid. Data larger than a segment is written in segment-sized runs (a batch
        larger than a segment alone in a fresh one, as the leader wrote it)."""
        buf = as_buffer(data)
        append = validate_replicated_batches(
            buf, log_end_offset=self.log_end_offset, where=self._where()
        )
        if not append.spans:
            return self._empty_append_info()
        producer_id, update = _PRODUCER_ID.unpack_from, self.producer_state.update
        for run in split_into_runs(append, self.config.segment_bytes):
            self._write(run)
            data = run.data
            for pos, _size, _last, _ts in run.spans:
                epoch = int.from_bytes(data[pos + 12 : pos + 16], "big", signed=True)
                if epoch >= 0 and epoch > self.leader_epoch_cache.latest_epoch:
                    base = int.from_bytes(data[pos : pos + 8], "big", signed=True)
                    self.leader_epoch_cache.assign(epoch, base)
                if producer_id(data, pos + _PRODUCER_ID_AT)[0] >= 0:
                    update(parse_header(data, pos))  # REPLICATION: no checks
            self.producer_state.update_map_end_offset(self.log_end_offset)
        self._maybe_flush_by_count()
        return self._append_info(append, log_append_time=-1)

    def _check_producers(
        self, batches: list[tuple[int, BatchHeader]], where: str
    ) -> BatchMetadata | None:
        """``ProducerStateManager.check_batches`` on the headers with the offsets they
        would get (its messages name them) and the partition named in its errors."""
        try:
            return self.producer_state.check_batches(
                [h for _pos, h in batches], first_offset=self.log_end_offset)
        except (OutOfOrderSequenceError, InvalidProducerEpochError) as exc:
            raise type(exc)(f"{exc.message} (append to {where})") from None

    def _write_in_runs(self, append: ValidatedAppend, producers: bool = False) -> None:
        """Write ``append`` in one segment when it fits one (the usual case), else in
        segment-sized runs of whole batches: a batch larger than ``segment.bytes`` (valid
        down to 14 bytes, below any batch) gets a fresh segment of its own instead of
        making the log unwritable. Kafka refuses such appends (RECORD_LIST_TOO_LARGE).
        ``producers``: some batch has a producer id; the producer state is updated after
        each run (before the next run's roll snapshots it)."""
        if len(append.data) <= self.config.segment_bytes:
            self._write(append)
            if producers:
                self._update_producers(append)
            return
        for run in split_into_runs(append, self.config.segment_bytes):
            self._write(run)
            if producers:
                self._update_producers(run)

    def _update_producers(self, run: ValidatedAppend) -> None:
        """Apply the written batches of ``run`` that carry a producer id (their headers
        as written: offsets assigned, LogAppendTime stamped) to the producer state."""
        data, update = run.data, self.producer_state.update
        for pos, _size, _last, _ts in run.spans:
            if _PRODUCER_ID.unpack_from(data, pos + _PRODUCER_ID_AT)[0] >= 0:
                update(parse_header(data, pos))
        self.producer_state.update_map_end_offset(self.log_end_offset)

    def _write(self, append: ValidatedAppend) -> None:
        segment = self._maybe_roll(append)
        segment.append(
            append.data, first_offset=append.first_offset, last_offset=append.last_offset,
            max_timestamp=append.max_timestamp, max_timestamp_offset=append.max_timestamp_offset,
            batches=append.spans,
        )  # fmt: skip
        self.log_end_offset = append.last_offset + 1
        self.size_in_bytes += len(append.data)

    def _maybe_roll(self, append: ValidatedAppend) -> LogSegment:
        seg = self.active_segment
        if seg.should_roll(
            incoming_size=len(append.data), max_timestamp=append.max_timestamp,
            last_offset=append.last_offset, now_ms=self._clock.now_ms(),
            segment_bytes=self.config.segment_bytes, max_segment_ms=self.config.max_segment_ms,
        ):  # fmt: skip
            return self.roll(append.first_offset)
        return seg

    @property
    def flush_due(self) -> bool:
        """``flush.messages`` or more messages were appended since the last fsync."""
        return self.unflushed_messages >= self.config.flush_messages

    def _maybe_flush_by_count(self) -> None:
        if self.flush_due:
            self.flush()

    def _empty_append_info(self) -> AppendInfo:
        leo = self.log_end_offset
        return AppendInfo(leo, leo - 1, -1, -1, 0, 0, self.log_start_offset)

    def _duplicate_append_info(self, dup: BatchMetadata) -> AppendInfo:
        log_append = self.config.message_timestamp_type == LOG_APPEND_TIME_NAME
        return AppendInfo(
            dup.first_offset, dup.last_offset, dup.timestamp,
            dup.timestamp if log_append else -1, 0, 0, self.log_start_offset, duplicate=True,
        )  # fmt: skip

    def _append_info(self, append: ValidatedAppend, *, log_append_time: int) -> AppendInfo:
        return AppendInfo(append.first_offset, append.last_offset, append.max_timestamp,
                          log_append_time, append.num_records, len(append.data),
                          self.log_start_offset)

    # --- rolling and flushing --------------------------------------------------------

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(``expected_next_offset``, LEO); an empty
        active segment already at that offset is kept as is."""
        base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == base and active.size == 0:
            return active
        if base <= active.base_offset:
            raise ValueError(
                f"cannot roll {self._where()} at {base}: active segment starts at {active.base_offset}"
            )
        active.on_become_inactive()
        jitter = (
            self._rng.randrange(self.config.segment_jitter_ms)
            if self.config.segment_jitter_ms > 0
            else 0
        )
        segment = LogSegment.open(
            self.dir, base, self.config, clock=self._clock, roll_jitter_ms=jitter
        )
        self.segments.append(segment)
        self._bases.append(base)
        self._dir_dirty = True
        self._snapshot_at_roll(base)
        log.debug("rolled %s at offset %d", self._where(), base)
        if self.on_roll is not None:
            self.on_roll(self, base)
        else:
            self.flush(base)
        return segment

    def _snapshot_at_roll(self, base: int) -> None:
        """Kafka's roll: a producer snapshot named after the new segment, written without
        fsync (the flush that follows the roll fsyncs it). A failure only lengthens a
        later replay: logged, the roll goes on."""
        try:
            self.producer_state.take_snapshot(base, sync=False, transient=False)
        except (OSError, StorageError) as exc:
            log.warning("%s: cannot write the producer snapshot at offset %d: %s",
                        self._where(), base, describe_storage_failure(exc, self.dir))

    @property
    def durable_offset(self) -> int:
        """Offsets below it are on disk: fsynced by a ``flush`` (the recovery point: the
        log, its indexes, the directory) or by a data sync (``flush.messages``'s group
        commit: the ``.log`` data alone; recovery still starts at the recovery point)."""
        return max(self.recovery_point, min(self._synced_to, self.log_end_offset))

    @property
    def sync_due(self) -> bool:
        """``flush.messages`` or more messages were appended since they were last made
        durable: an acknowledgement must wait for a data sync (Kafka fsyncs then)."""
        return self.log_end_offset - self.durable_offset >= self.config.flush_messages

    def data_sync_plan(self) -> tuple[int, list[LogSegment]] | None:
        """What makes every offset below the LEO durable by fdatasync alone: (the LEO,
        the segments holding offsets from ``durable_offset`` on). None when a ``flush``
        is needed instead: a segment created since the last one, whose directory entry
        only a directory fsync makes durable."""
        if self._dir_dirty:
            return None
        start, end = self.durable_offset, self.log_end_offset
        first = max(0, bisect.bisect_right(self._bases, start) - 1)
        return end, [seg for seg in self.segments[first:]
                     if seg.base_offset < end or seg is self.segments[first]]

    def mark_synced(self, offset: int) -> None:
        """Offsets below ``offset`` were fdatasynced (``data_sync_plan``'s segments)."""
        self._synced_to = max(self._synced_to, offset)

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``up_to_offset``)
        (default: the LEO) and the producer snapshots written since the last flush, and
        advance the recovery point to it."""
        snapshots = self.producer_state.sync_snapshots()
        up_to = (
            self.log_end_offset if up_to_offset is None else min(up_to_offset, self.log_end_offset)
        )
        if up_to <= self.recovery_point:
            if snapshots:
                fsync_dir(self.dir)
            return
        first = max(0, bisect.bisect_right(self._bases, self.recovery_point) - 1)
        for seg in self.segments[first:]:
            if seg.base_offset >= up_to and seg is not self.segments[first]:
                break
            seg.flush()
        if self._dir_dirty:
            fsync_dir(self.dir)
            self._dir_dirty = False
        self.recovery_point = up_to
        self.last_flush_ms = self._clock.now_ms()

    # --- reading ---------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        max_records: int | None = None,
    ) -> FetchData:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least
        one batch if ``min_one_batch``), none whose base offset is >= ``max_offset``;
        ``max_records``: the reader wants no more records than that (the offset's batch
        alone is read when it holds them: a 1-record read of an 11 GB log copied 1 MiB)."""
        self._check_in_range(offset)
        empty = FetchData(b"", offset, offset)
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return empty
        for i in range(max(0, bisect.bisect_right(self._bases, offset) - 1), len(self.segments)):
            found = self.segments[i].read_slice(
                offset, max_bytes, min_one_batch=min_one_batch, max_offset=max_offset,
                max_records=max_records,
            )
            if found is not None:
                return (
                    FetchData(found.data, found.first_offset, found.next_offset)
                    if found.data
                    else empty
                )
        return empty

    def _check_in_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self._where()}: log start "
                f"{self.log_start_offset}, log end {self.log_end_offset}"
            )

    def read_region(self, offset: int, max_bytes: int, *,
                    max_offset: int | None = None) -> FileRegion | None:
        """As ``read`` (at least one batch), as a range of one segment file for
        sendfile(2); None when there is nothing to send. Out-of-range offsets raise as
        ``read`` does."""
        self._check_in_range(offset)
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return None
        for i in range(max(0, bisect.bisect_right(self._bases, offset) - 1), len(self.segments)):
            found = self.segments[i].read_region(offset, max_bytes, max_offset=max_offset)
            if found is not None:
                return found if found.length else None
        return None

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)``: -2 gives the log start, -1 the LEO, -3 the record with
        the largest timestamp; otherwise the first record with timestamp >= it, or None."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        if timestamp == MAX_TIMESTAMP:
            best = max(self.segments, key=lambda s: s.max_timestamp)
            return (
                (best.max_timestamp_offset, best.max_timestamp) if best.max_timestamp >= 0 else None
            )
        for seg in self.segments:
            if seg.max_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    # --- truncation and deletion -----------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove everything at or above ``offset`` (a batch holding ``offset`` goes
        whole, so the LEO may end below ``offset``). No-op if ``offset`` >= LEO."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self._where()} to negative offset {offset}")
        if offset >= self.log_end_offset:
            return
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        old_leo = self.log_end_offset
        doomed = [s for s in self.segments if s.base_offset > offset]
        self._drop(doomed)
        active = self.active_segment
        active.truncate_to(offset)
        active.resize_indexes(self.config.segment_index_bytes)
        self.log_end_offset = active.next_offset()
        self.size_in_bytes = sum(s.size for s in self.segments)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._synced_to = min(self._synced_to, self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self._reload_producer_state(old_leo)
        log.info(
            "truncated %s to offset %d (leo now %d)", self._where(), offset, self.log_end_offset
        )

    def _reload_producer_state(self, old_log_end: int) -> None:
        """After a truncation (Kafka's ``loadProducerState``): the latest snapshot at or
        below the new LEO, plus a replay of the headers after it."""
        self.producer_state.update_map_end_offset(old_log_end)  # != LEO: forces the reload
        log_loader.load_producer_state(
            self.producer_state, self.segments, log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset, now_ms=self._clock.now_ms(),
        )  # fmt: skip

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart empty at ``offset`` (log start = LEO = it)."""
        self._drop(list(self.segments))
        segment = LogSegment.open(self.dir, offset, self.config, clock=self._clock)
        self.segments, self._bases = [segment], [offset]
        self._dir_dirty = True
        self.log_end_offset = self.log_start_offset = self.recovery_point = offset
        self._synced_to = offset
        self.size_in_bytes = 0
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)
        log.info("truncated %s fully; it restarts at offset %d", self._where(), offset)

    def delete_segments(self, segments: list[LogSegment], *, reason: str) -> None:
        """Delete ``segments`` (oldest first), then raise the log start to the first
        remaining segment's base. If the active segment goes, a fresh one is rolled at
        the LEO first, so the log always has one."""
        doomed = [s for s in segments if any(s is t for t in self.segments)]
        active = self.active_segment
        if any(s is active for s in doomed):
            if active.size == 0 and active.base_offset == self.log_end_offset:
                doomed = [s for s in doomed if s is not active]
            else:
                self.roll()
        if not doomed:
            return
        self._drop(doomed)
        self.size_in_bytes = sum(s.size for s in self.segments)
        if self.segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self.segments[0].base_offset
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        # producers stay until they expire (Kafka 2.4+); their snapshots below the log
        # start go with the segments
        self.producer_state.truncate_head(self.log_start_offset)
        log.info(
            "deleted %d segments of %s (%s); log start now %d",
            len(doomed), self._where(), reason, self.log_start_offset,
        )  # fmt: skip

    def _drop(self, doomed: list[LogSegment]) -> None:
        """Take ``doomed`` out of the segment list, rename to ``.deleted``, remove."""
        ids = {id(s) for s in doomed}
        self.segments = [s for s in self.segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self.segments]
        for seg in doomed:
            seg.rename_suffix(seg.suffix, DELETED_SUFFIX)
        for seg in doomed:
            seg.delete()
        self._dir_dirty = True  # the next flush makes the removals durable

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        """Move the log start up to ``offset`` (DeleteRecords, or following the leader);
        segments below it go with the next retention pass."""
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot move the log start of {self._where()} to {offset}: beyond the log end "
                f"{self.log_end_offset}"
            )
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)

    def delete_records_before(self, offset: int) -> bool:
        """DeleteRecords: records below ``offset`` are gone for readers (the log start
        moves up to it), and the segments wholly below it are deleted now, as the next
        retention pass would. False when the log start was at or past ``offset``
        already; OffsetOutOfRangeError past the log end. The new log start lives in
        memory until ``LogManager.checkpoint_log_start_offsets`` writes it: the caller
        writes it before it answers, so a crash does not bring the records back."""
        before = self.log_start_offset
        self.maybe_increment_log_start_offset(offset)
        if self.log_start_offset == before:
            return False
        doomed = segments_below_log_start(self.segments, log_start_offset=self.log_start_offset,
                                          log_end_offset=self.log_end_offset)
        if doomed:
            self.delete_segments(doomed, reason=f"records deleted below offset {offset}")
        return True

    def replace_segments(self, new: list[LogSegment], old: list[LogSegment]) -> None:
        """Swap compacted segments in (``new`` are ``.cleaned`` segments, fully written)
        for ``old``, crash-safely: flush new; rename them ``.swap`` (oldest first); take
        old out and delete them (``.deleted``, then removed); strip ``.swap``. The loader
        completes a swap interrupted after the first rename (``log_loader``)."""
        new = sorted(new, key=lambda s: s.base_offset)
        if any(s is self.active_segment for s in old):
            raise ValueError("the active segment cannot be replaced")
        for seg in new:
            seg.on_become_inactive()
            seg.flush()
            seg.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.dir)
        old_ids = {id(s) for s in old}
        kept = [s for s in self.segments if id(s) not in old_ids]
        self.segments = sorted(kept + new, key=lambda s: s.base_offset)
        self._bases = [s.base_offset for s in self.segments]
        for seg in old:
            seg.rename_suffix(seg.suffix, DELETED_SUFFIX)
        for seg in new:
            seg.rename_suffix(SWAP_SUFFIX, "")
        fsync_dir(self.dir)
        for seg in old:
            seg.delete()
        self.size_in_bytes = sum(s.size for s in self.segments)

    # --- lifecycle -------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget the producer ids idle for ``producer.id.expiration.ms`` or more (no
        write since ``now_ms - expiration``, by their batches' max timestamps, as Kafka);
        their ids. A later batch of one is accepted with any sequence (KIP-360)."""
        return self.producer_state.remove_expired(now_ms)

    def take_producer_snapshot(self) -> None:
        """Write and fsync the producer snapshot at the LEO (a clean shutdown: the next
        load reads it instead of replaying the log); nothing if one is there already,
        but one a roll wrote there without fsync is fsynced now."""
        self.producer_state.take_snapshot(self.log_end_offset)
        if self.producer_state.sync_snapshots():
            fsync_dir(self.dir)

    def close(self, *, snapshot: bool = True) -> None:
        """Write the producer snapshot at the LEO (unless ``snapshot`` is False: the log
        is about to be deleted), trim every index and release every file (write the
        clean-shutdown marker after). KafkaStorageError if the snapshot cannot be
        written (the files are released all the same): the shutdown must not count as
        clean then."""
        try:
            if snapshot:
                self.take_producer_snapshot()
        finally:
            for seg in self.segments:
                seg.close()

    def delete(self) -> None:
        """Release the files and remove the whole partition directory."""
        for seg in self.segments:
            seg.delete()
        shutil.rmtree(self.dir, ignore_errors=True)


def _listing(directory: Path) -> list[str] | None:
    """The names in ``directory`` ([] when it is missing); None when it cannot be
    listed (it counts as holding files: it must not be recreated empty)."""
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError:
        return None


def describe_storage_failure(exc: BaseException, directory: Path) -> str:
    """``exc`` in words for people and clients: the partition directory's name and the
    file's own name, never an absolute path."""
    if isinstance(exc, OSError) and exc.strerror:
        name = os.path.basename(str(exc.filename)) if exc.filename else ""
        return f"{exc.strerror}: {name}" if name else exc.strerror
    text = exc.message if isinstance(exc, FranzError) else (str(exc) or type(exc).__name__)
    for prefix in {str(directory.parent), str(directory.parent.resolve())}:
        text = text.replace(prefix + os.sep, "")
    return text


class _OfflineSegment:
    """What maintenance passes (retention, compaction, checkpoints) see of an offline
    log: one empty segment, so they find nothing to do."""

    suffix = ""
    size = 0
    max_timestamp = -1
    first_batch_timestamp: int | None = None

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.max_timestamp_offset = base_offset

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class _DetachedEpochCache(LeaderEpochCache):
    """An offline log's leader-epoch cache: in memory only; its checkpoint file is never
    read (it may be what failed) nor written."""

    def flush(self) -> None:
        pass


class OfflinePartitionLog(PartitionLog):
    """A partition log that could not be loaded (Kafka: a replica on an offline log
    dir). Nothing on disk is touched: reads, appends, truncations and rolls raise
    KafkaStorageError naming the partition; flush and close do nothing; the
    checkpointed ``recovery_point`` and ``log_start_offset`` are kept, so the
    checkpoints written at shutdown send the next start through the same load. ``delete``
    (the topic was deleted) removes the directory."""

    offline = True

    def __init__(  # noqa: PLR0913 - mirrors PartitionLog.open
        self,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int,
        log_start_offset: int,
        clock: Clock,
        reason: str,
    ) -> None:
        self.dir = directory
        self.topic, self.partition = log_loader.parse_topic_partition(directory.name)
        self.config = config
        self.offline_reason = reason
        self.segments = [_OfflineSegment(0)]  # type: ignore[list-item]
        self._bases = [0]
        self._clock = clock
        self._rng = random.Random()
        self.on_roll = None
        self.leader_epoch_cache = _DetachedEpochCache(directory)
        # empty and detached: its snapshot files are neither listed nor touched
        self.producer_state = ProducerStateManager(directory, names=())
        self.log_start_offset = max(0, log_start_offset)
        self.log_end_offset = max(recovery_point, self.log_start_offset)
        self.recovery_point = recovery_point
        self._synced_to = 0
        self.size_in_bytes = 0
        self.last_flush_ms = clock.now_ms()
        self._dir_dirty = False

    def storage_error(self) -> KafkaStorageError:
        return KafkaStorageError(
            f"{self._where()} is offline on this broker: its log could not be loaded "
            f"({self.offline_reason})"
        )

    def _refuse(self, *_args: object, **_kwargs: object) -> NoReturn:
        raise self.storage_error()

    append_as_leader = _refuse  # type: ignore[assignment]
    append_as_follower = _refuse  # type: ignore[assignment]
    read = _refuse  # type: ignore[assignment]
    offset_for_timestamp = _refuse  # type: ignore[assignment]
    truncate_to = _refuse  # type: ignore[assignment]
    truncate_fully_and_start_at = _refuse  # type: ignore[assignment]
    roll = _refuse  # type: ignore[assignment]
    replace_segments = _refuse  # type: ignore[assignment]
    maybe_increment_log_start_offset = _refuse  # type: ignore[assignment]
    delete_records_before = _refuse  # type: ignore[assignment]
    data_sync_plan = _refuse  # type: ignore[assignment]

    def delete_segments(self, segments: list[LogSegment], *, reason: str) -> None:
        pass

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        return []

    def take_producer_snapshot(self) -> None:
        pass

    def flush(self, up_to_offset: int | None = None) -> None:
        self.last_flush_ms = self._clock.now_ms()

    def close(self, *, snapshot: bool = True) -> None:
        pass

    def delete(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
