"""Idempotent-producer state of one partition (KIP-98), as Kafka 3.x's storage module
keeps it (``ProducerStateManager``, ``ProducerAppendInfo``, ``ProducerStateEntry``).

Per producer id: its epoch, the metadata of its last 5 batches (``BatchMetadata``), the
coordinator epoch (always -1 here: no transactions) and the last batch's max timestamp.

Rules for a client batch (``check``), in Kafka's order:

- ``producerId < 0``: not idempotent, nothing to check (one comparison).
- Duplicate: same epoch as the state and one of the cached batches has the same first
  and last sequence -> that batch's metadata is returned; the caller appends nothing and
  answers with the original offsets (``UnifiedLog.analyzeAndValidateProducerState``).
- Epoch below the state's -> ``InvalidProducerEpochError`` (47; ``checkProducerEpoch``).
- Higher epoch: the first sequence must be 0, unless the state has no epoch
  -> else ``OutOfOrderSequenceError`` (45; ``checkSequence``).
- Same epoch: first sequence = last sequence + 1, wrapping from 2^31-1 to 0
  -> else ``OutOfOrderSequenceError``. A retry older than the 5 cached batches gets this too.
- No state for the producer id (new, expired, evicted): any epoch and sequence is accepted,
  as Kafka does since KIP-360 (no more UNKNOWN_PRODUCER_ID from the broker).

Batches from replication or log recovery (``update``, ``load_batches``) change the state
without any check; an epoch going backwards is only logged, as Kafka's REPLICATION origin.
A batch's last sequence is ``baseSequence + lastOffsetDelta`` modulo 2^31.

Snapshots are Kafka's ``<20-digit offset>.snapshot`` files in the partition directory::

    int16  version (1)
    uint32 crc            CRC-32C of every byte after this field
    int32  count
    count x 46 bytes:     int64 producerId, int16 epoch, int32 lastSequence,
                          int64 lastOffset, int32 offsetDelta, int64 timestamp,
                          int32 coordinatorEpoch, int64 currentTxnFirstOffset (-1)

A snapshot keeps only each producer's last batch (as Kafka's), so after a reload only that
batch answers as a duplicate. Written to ``<name>.tmp``, fsynced, renamed, directory
fsynced. A corrupt snapshot is deleted and the next older one is tried; with none left the
state starts empty at the log start offset and the caller replays the log from there.

Use from the log (not thread-safe: the partition's owner serialises calls)::

    dup = state.check(header)            # check_batches(headers) for several batches
    if dup is not None: answer dup.first_offset .. dup.last_offset, append nothing
    ... write the batch ...
    state.update(header)                 # header with its assigned offsets
    state.update_map_end_offset(log_end_offset)
    # roll: state.take_snapshot(new_segment_base_offset, sync=False); later, off the
    #       event loop with the segment's fsync: state.sync_snapshots()
    # load: start = state.truncate_and_reload(log_start, log_end, now_ms)
    #       state.load_batches(headers of the log from start); state.update_map_end_offset(log_end)

``core.storage.log.PartitionLog`` owns one per partition and does exactly this
(``core.storage.log_loader.load_producer_state`` at load and truncation).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import re
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from core.storage import durability
from core.storage.batch import CONTROL_BIT, BatchHeader
from core.storage.codec import crc32c
from core.storage.durability import fsync_dir
from core.storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    KafkaStorageError,
    OutOfOrderSequenceError,
)

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NUM_BATCHES_TO_RETAIN = 5  # hence max.in.flight.requests.per.connection <= 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
#: Producer ids at or above it are transient: each names one produce request (the
#: brokers' Idempotency-Key requests, ``core.broker.idempotency``), not a long-lived
#: producer. A partition may see one per request, so they expire after
#: ``transient_expiration_ms`` (idempotency.producer.id.expiration.ms, 10 min) and are
#: left out of the snapshots taken at segment rolls (which would otherwise grow with the
#: request rate); the snapshot of a clean shutdown keeps them.
TRANSIENT_PRODUCER_ID_FLOOR = 1 << 62
DEFAULT_TRANSIENT_EXPIRATION_MS = 600_000
_SEQ_MASK = 0x7FFFFFFF  # sequences wrap modulo 2^31
_INT32_MAX = 2**31 - 1

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_NAME = re.compile(r"([0-9]+)\.snapshot")
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_END = 6  # the CRC covers bytes 6..end: the count and the entries
assert _SNAPSHOT_HEADER.size == 10 and _SNAPSHOT_ENTRY.size == 46


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's ``AppendOrigin``): client batches are checked, replicated
    and recovered ones are not."""

    CLIENT = "client"
    REPLICATION = "replication"


class BatchMetadata(NamedTuple):
    """One cached batch of a producer (Kafka's ``BatchMetadata``)."""

    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int  # last_offset - first offset (the header's lastOffsetDelta)
    timestamp: int  # the batch's max timestamp

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence (Kafka's ``DefaultRecordBatch.lastSequence``)."""
    if base_sequence < 0:
        return NO_SEQUENCE
    return (base_sequence + last_offset_delta) & _SEQ_MASK


def _first_sequence(last_seq: int, offset_delta: int) -> int:
    return NO_SEQUENCE if last_seq < 0 else (last_seq - offset_delta) & _SEQ_MASK


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateEntry:
    """The state of one producer id (Kafka's ``ProducerStateEntry``): epoch, the last
    ``NUM_BATCHES_TO_RETAIN`` batches (oldest first), coordinator epoch, last timestamp."""

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "batches")

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = -1,
        batches: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.batches: deque[BatchMetadata] = deque(batches, NUM_BATCHES_TO_RETAIN)

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        """The last offset written by this producer, -1 when no batch is cached."""
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def apply(self, header: BatchHeader) -> None:
        """Record an appended batch (its offsets assigned). A new epoch drops the cached
        batches; a control batch (transaction marker) sets the epoch and timestamp only."""
        epoch = header.producer_epoch
        if epoch != self.producer_epoch:
            if epoch < self.producer_epoch:
                log.warning("producer %d: epoch %d at offset %d is below the last seen %d",
                            self.producer_id, epoch, header.base_offset, self.producer_epoch)
            self.batches.clear()
            self.producer_epoch = epoch
        self.last_timestamp = header.max_timestamp
        if header.attributes & CONTROL_BIT:
            return
        delta = header.last_offset_delta
        self.batches.append(BatchMetadata(
            header.base_sequence, last_sequence(header.base_sequence, delta),
            header.base_offset + delta, delta, header.max_timestamp))

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch,
                                  self.coordinator_epoch, self.last_timestamp, self.batches)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (self.producer_id, self.producer_epoch, self.coordinator_epoch,
                self.last_timestamp, list(self.batches)) == (
                other.producer_id, other.producer_epoch, other.coordinator_epoch,
                other.last_timestamp, list(other.batches))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, "
                f"epoch={self.producer_epoch}, coordinator_epoch={self.coordinator_epoch}, "
                f"last_timestamp={self.last_timestamp}, batches={list(self.batches)})")


def _validate(
    producer_id: int, base_epoch: int, epoch_now: int, last_seq_now: int,
    header: BatchHeader, offset: int,
) -> None:
    """Kafka's ``checkProducerEpoch`` + ``checkSequence`` for a client batch.
    ``base_epoch``: the stored state's epoch (-1 without state); ``epoch_now`` and
    ``last_seq_now``: after the earlier batches of the same append; ``offset``: the
    batch's base offset, named in the errors."""
    epoch = header.producer_epoch
    first_seq = header.base_sequence
    if epoch < epoch_now:
        raise InvalidProducerEpochError(
            f"epoch {epoch} of producer {producer_id} at offset {offset} is "
            f"older than the last seen epoch {epoch_now}")
    if epoch != epoch_now:
        if first_seq != 0 and epoch_now != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} started epoch {epoch} (after {epoch_now}) with "
                f"sequence {first_seq} at offset {offset}; expected 0")
    elif base_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq_now, first_seq):
        raise OutOfOrderSequenceError(
            f"out of order sequence for producer {producer_id} epoch {epoch} at offset "
            f"{offset}: {first_seq} does not follow {last_seq_now}")


# --- snapshot files --------------------------------------------------------------------


def snapshot_file_name(offset: int) -> str:
    """``00000000000000001234.snapshot`` (Kafka's ``LogFileUtils.producerSnapshotFile``)."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot file content for ``entries`` (written in the given order)."""
    body = [_SNAPSHOT_ENTRY.pack(
        e.producer_id, e.producer_epoch, e.last_seq, e.last_offset, e.last_offset_delta,
        e.last_timestamp, e.coordinator_epoch, -1) for e in entries]
    data = bytearray(_SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, 0, len(body)))
    data += b"".join(body)
    struct.pack_into(">I", data, 2, crc32c(memoryview(data)[_CRC_END:]))
    return bytes(data)


def decode_snapshot(data: bytes | bytearray | memoryview) -> list[ProducerStateEntry]:
    """The entries of a snapshot file's content (Kafka's ``readSnapshot``);
    ``CorruptSnapshotError`` if the version, length or CRC is wrong."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is truncated")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c(memoryview(data)[_CRC_END:])
    if crc != computed:
        raise CorruptSnapshotError(f"snapshot CRC {crc:#010x} != computed {computed:#010x}")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes cannot hold {count} entries")
    entries = []
    for pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, _txn in (
        _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEADER.size:])
    ):
        # currentTxnFirstOffset is ignored: franz has no transactions.
        batches = ([BatchMetadata(_first_sequence(last_seq, delta), last_seq, last_offset,
                                  delta, ts)] if last_offset >= 0 else [])
        entries.append(ProducerStateEntry(pid, epoch, coordinator_epoch, ts, batches))
    return entries



def write_snapshot(
    path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool = True
) -> None:
    """Write a snapshot atomically: ``<path>.tmp``, fsync, rename, fsync the directory.
    ``sync=False`` skips both fsyncs (Kafka's ``takeSnapshot(false)`` at a roll: the
    caller fsyncs later, off the hot path); a file cut by a crash then fails its CRC
    and is ignored, as any corrupt snapshot."""
    data = encode_snapshot(entries)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                durability.fsync(f.fileno())
        os.replace(tmp, path)
        if sync:
            fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise KafkaStorageError(f"cannot write producer snapshot {path}: {exc}") from exc


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """The entries of a snapshot file (``CorruptSnapshotError``, ``FileNotFoundError``)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise KafkaStorageError(f"cannot read producer snapshot {path}: {exc}") from exc
    try:
        return decode_snapshot(data)
    except CorruptSnapshotError as exc:
        raise CorruptSnapshotError(f"{path}: {exc}") from None


# --- the manager -----------------------------------------------------------------------


class ProducerStateManager:
    """The producer ids of one partition and its snapshot files (Kafka's
    ``ProducerStateManager``).

    ``map_end_offset``: the log offset the state reflects (everything below it applied);
    snapshots are taken at it. Opening only lists the snapshot files (and deletes
    ``.snapshot.tmp`` leftovers); ``truncate_and_reload`` loads the state.
    """

    def __init__(
        self, directory: Path | str, *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        transient_expiration_ms: int = DEFAULT_TRANSIENT_EXPIRATION_MS,
        names: Iterable[str] | None = None,
    ) -> None:
        """``names``: the directory's listing when the caller has one (the log loader
        lists each partition directory once)."""
        self.directory = Path(directory)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.transient_expiration_ms = transient_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._snapshots: list[int] = self._list_snapshots(names)  # ascending offsets
        self._map_end_offset = 0
        self._last_snap_offset = 0
        # snapshots written with sync=False, fsynced by ``sync_snapshots`` (appended on
        # the thread that appends, popped by the one that flushes: a deque is safe)
        self._unsynced: deque[int] = deque()

    def _list_snapshots(self, names: Iterable[str] | None) -> list[int]:
        offsets = []
        if names is None:
            try:
                names = os.listdir(self.directory)
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise KafkaStorageError(f"cannot list {self.directory}: {exc}") from exc
        for name in names:
            if m := _SNAPSHOT_NAME.fullmatch(name):
                offsets.append(int(m.group(1)))
            elif name.endswith(SNAPSHOT_SUFFIX + ".tmp"):  # a write cut by a crash
                with contextlib.suppress(OSError):
                    (self.directory / name).unlink()
        return sorted(offsets)

    # --- reading -------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """The active producer ids (read-only view)."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return self._snapshots[0] if self._snapshots else None

    def snapshot_path(self, offset: int) -> Path:
        return self.directory / snapshot_file_name(offset)

    # --- appending -----------------------------------------------------------------

    def check(
        self, header: BatchHeader, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> BatchMetadata | None:
        """Check one batch before it is appended: the cached batch it duplicates (append
        nothing, answer with its offsets), or None (append it). Raises
        ``InvalidProducerEpochError`` / ``OutOfOrderSequenceError``. Changes nothing."""
        if header.producer_id < 0:
            return None
        if origin is not AppendOrigin.CLIENT:
            return None
        entry = self._producers.get(header.producer_id)
        if entry is None:  # KIP-360: no state, any epoch and sequence
            return None
        dup = entry.find_duplicate(header.producer_epoch, header.base_sequence,
                                   last_sequence(header.base_sequence, header.last_offset_delta))
        if dup is not None:
            return dup
        _validate(header.producer_id, entry.producer_epoch, entry.producer_epoch,
                  entry.last_seq, header, header.base_offset)
        return None

    def check_batches(
        self, headers: Iterable[BatchHeader], origin: AppendOrigin = AppendOrigin.CLIENT,
        *, first_offset: int | None = None,
    ) -> BatchMetadata | None:
        """``check`` for the batches of one append, in order: each is validated against
        the state the earlier ones would leave (Kafka's per-append ``ProducerAppendInfo``).
        Returns the first duplicate (of the stored state), after which nothing is checked;
        the caller then appends none of the batches, as Kafka. ``first_offset``: the
        offset the append would give the first batch (the errors name each batch's
        offset from it), else the headers' own."""
        if origin is not AppendOrigin.CLIENT:
            return None
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq)
        offset = first_offset
        for h in headers:
            at = h.base_offset if offset is None else offset
            if offset is not None:
                offset += h.last_offset_delta + 1
            pid = h.producer_id
            if pid < 0:
                continue
            entry = self._producers.get(pid)
            last_seq = last_sequence(h.base_sequence, h.last_offset_delta)
            if entry is not None:
                dup = entry.find_duplicate(h.producer_epoch, h.base_sequence, last_seq)
                if dup is not None:
                    return dup
            base_epoch = NO_PRODUCER_EPOCH if entry is None else entry.producer_epoch
            now = pending.get(pid)
            if now is None:
                now = (base_epoch, NO_SEQUENCE if entry is None else entry.last_seq)
            _validate(pid, base_epoch, now[0], now[1], h, at)
            pending[pid] = (h.producer_epoch, last_seq)
        return None

    def update(self, header: BatchHeader) -> None:
        """Apply a batch that was appended (offsets assigned), from a client after
        ``check``, a leader (replication) or the log (recovery). No checks."""
        pid = header.producer_id
        if pid < 0:
            return
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerStateEntry(pid)
        entry.apply(header)

    def load_batches(self, headers: Iterable[BatchHeader]) -> None:
        """Replay batches read from the log, in log order (Kafka's
        ``loadProducersFromRecords``), and move ``map_end_offset`` past the last one."""
        end = None
        for h in headers:
            self.update(h)
            end = h.base_offset + h.last_offset_delta + 1
        if end is not None and end > self._map_end_offset:
            self._map_end_offset = end

    def update_map_end_offset(self, offset: int) -> None:
        """The state now reflects the log below ``offset`` (call after each append)."""
        self._map_end_offset = offset

    def remove_expired(self, now_ms: int) -> list[int]:
        """Drop producers idle for ``producer.id.expiration.ms`` or more (Kafka's
        ``removeExpiredProducers``: ``now - lastTimestamp >= expiration``); their ids."""
        limit = now_ms - self.producer_id_expiration_ms
        transient = now_ms - self.transient_expiration_ms
        gone = [pid for pid, e in self._producers.items()
                if e.last_timestamp <= (transient if pid >= TRANSIENT_PRODUCER_ID_FLOOR
                                        else limit)]
        for pid in gone:
            del self._producers[pid]
        return gone

    # --- snapshots, truncation, loading ----------------------------------------------

    def take_snapshot(self, offset: int | None = None, *, sync: bool = True,
                      transient: bool = True) -> Path | None:
        """Write ``<map_end_offset>.snapshot`` unless one at or past it exists (Kafka's
        ``takeSnapshot``). ``offset``: set ``map_end_offset`` first (the new segment's
        base offset at a roll). ``sync=False``: no fsync now, ``sync_snapshots`` does it
        later (Kafka's roll). ``transient=False``: without the transient producer ids
        (a roll's). The path written, or None."""
        if offset is not None:
            self._map_end_offset = offset
        if self._map_end_offset <= self._last_snap_offset:
            return None
        path = self.snapshot_path(self._map_end_offset)
        pids = sorted(self._producers) if transient else sorted(
            pid for pid in self._producers if pid < TRANSIENT_PRODUCER_ID_FLOOR)
        write_snapshot(path, (self._producers[pid] for pid in pids), sync=sync)
        if self._map_end_offset not in self._snapshots:
            self._snapshots.append(self._map_end_offset)
            self._snapshots.sort()
        self._last_snap_offset = self._map_end_offset
        if not sync:
            self._unsynced.append(self._map_end_offset)
        return path

    def sync_snapshots(self) -> bool:
        """fsync the snapshot files written with ``sync=False`` since the last call
        (those deleted meanwhile are skipped). True if any was fsynced: the caller then
        fsyncs the directory, which holds their names. May run on another thread than
        the appends (it touches only the files and a deque)."""
        synced = False
        while True:
            try:
                offset = self._unsynced.popleft()
            except IndexError:
                return synced
            try:
                fd = os.open(self.snapshot_path(offset), os.O_RDONLY)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise KafkaStorageError(f"cannot fsync producer snapshot: {exc}") from exc
            try:
                durability.fsync(fd)
            except OSError as exc:
                raise KafkaStorageError(f"cannot fsync producer snapshot: {exc}") from exc
            finally:
                os.close(fd)
            synced = True

    def _delete_snapshot(self, offset: int) -> None:
        with contextlib.suppress(ValueError):
            self._snapshots.remove(offset)
        try:
            self.snapshot_path(offset).unlink(missing_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete producer snapshot: {exc}") from exc

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshots below ``offset`` (Kafka's ``deleteSnapshotsBefore``)."""
        for snap in [s for s in self._snapshots if s < offset]:
            self._delete_snapshot(snap)

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None
    ) -> int:
        """After loading or truncating the log (Kafka's ``truncateAndReload``): delete
        snapshots above ``log_end_offset`` or at/below ``log_start_offset``; unless the state
        already ends at ``log_end_offset``, reload it from the latest remaining readable
        snapshot (corrupt ones are deleted), without producers expired at ``now_ms`` (None:
        keep all), or start empty at ``log_start_offset``. Returns ``map_end_offset``: the
        caller replays the log from there to ``log_end_offset`` with ``load_batches``."""
        for snap in [s for s in self._snapshots if s > log_end_offset or s <= log_start_offset]:
            self._delete_snapshot(snap)
        if log_end_offset != self._map_end_offset:
            self._producers.clear()
            self._load_latest_snapshot(log_start_offset, now_ms)
        else:
            self._map_end_offset = max(self._map_end_offset, log_start_offset)
            self._last_snap_offset = self._snapshots[-1] if self._snapshots else log_start_offset
        return self._map_end_offset

    def _load_latest_snapshot(self, log_start_offset: int, now_ms: int | None) -> None:
        while self._snapshots:
            offset = self._snapshots[-1]
            path = self.snapshot_path(offset)
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, FileNotFoundError) as exc:
                log.warning("ignoring producer snapshot %s: %s", path, exc)
                self._delete_snapshot(offset)
                continue
            limit = None if now_ms is None else now_ms - self.producer_id_expiration_ms
            for entry in entries:
                if limit is None or entry.last_timestamp > limit:
                    self._producers[entry.producer_id] = entry
            self._map_end_offset = self._last_snap_offset = offset
            return
        self._map_end_offset = self._last_snap_offset = log_start_offset

    def truncate_head(self, log_start_offset: int, *, evict_producers: bool = False) -> None:
        """The log start offset moved up (retention, DeleteRecords): producers are kept
        until they expire, as Kafka 2.4+ does (KAFKA-7190: dropping them made a quiet
        producer's retries after retention look new); ``evict_producers`` drops those
        whose last offset is below it (Kafka before 2.4). Snapshots below it are deleted
        (``deleteSnapshotsBefore``; ``onLogStartOffsetIncremented``)."""
        if evict_producers:
            for pid in [p for p, e in self._producers.items() if e.last_offset < log_start_offset]:
                del self._producers[pid]
        if self._map_end_offset < log_start_offset:
            self._map_end_offset = log_start_offset
        self.delete_snapshots_before(log_start_offset)
        self._last_snap_offset = self._snapshots[-1] if self._snapshots else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and snapshot; the (empty) log restarts at ``offset``."""
        self._producers.clear()
        for snap in list(self._snapshots):
            self._delete_snapshot(snap)
        self._last_snap_offset = 0
        self._map_end_offset = offset
