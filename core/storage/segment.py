"""One log segment: ``<base>.log`` with its ``.index`` and ``.timeindex``.

File names are the base offset as 20 zero-padded digits plus the extension, plus a
transient suffix while compaction or deletion is under way (``.cleaned``, ``.swap``,
``.deleted``), e.g. ``00000000000000368769.log.swap``. The ``.log`` holds v2 record
batches back to back, exactly as they travel on the wire (``core.storage.batch``).

Index entries follow Kafka's rule: keep the bytes written since the last entry; when
that count *exceeds* ``index.interval.bytes`` before an append, add an offset-index
entry for the append's last offset at the position where it starts, and a time-index
entry with the segment's running max timestamp, then reset the count. Appends that
pass their batches (``batches=``) apply the rule per batch, as Kafka 3.8+ and recovery
do; other appends apply it once for the whole data.

Blocks: each write first makes sure the file has real blocks up to ``reserve_bytes``
(1 MiB, at most ``segment.bytes``) past its end, reserved with ``fallocate``'s
``FALLOC_FL_KEEP_SIZE`` (``native.reserve_blocks``): the file's size is unchanged, so
readers, recovery and ``size`` see exactly the batches written, but the writes that fill
the reserved bytes skip ext4's per-block delayed allocation, and the fdatasync of
``flush.messages`` finds the blocks already allocated (same-run measurements in
docs/storage.md). What is reserved past the end is given back (``ftruncate`` to the
size) when the segment rolls, is truncated or closes; a segment that a crash left with
a reservation is noticed when opened (allocated well past its size) and trimmed at its
roll or close. A file system that cannot reserve, or a full disk, only turns it off for
the segment: writes allocate as before.

Resources: the ``.log`` descriptor comes from the process-wide ``DescriptorCache``
(``core.storage.fd_cache``), opened on demand and pinned for each use; the indexes map
their files only when first used (``core.storage.index``). Opening a segment only
``stat``s its files: the first batch's timestamp and the time index's last entry are
read when first asked for.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core.clock import Clock
from core.storage import durability, native
from core.storage.batch import HEADER_SIZE, BatchHeader, is_crc_valid, parse_header
from core.storage.batch_scan import (
    SCAN_CHUNK,
    Frame,
    scan_frames,
    scan_headers,
    validated_batches,
    whole_batches,
)
from core.storage.errors import CorruptIndexError, CorruptRecordError, KafkaStorageError
from core.storage.fd_cache import SegmentFile, descriptor_cache
from core.storage.file_region import FileRegion
from core.storage.index import MAX_RELATIVE_OFFSET, OffsetIndex, TimeIndex
from core.storage.records import decode_batch

if TYPE_CHECKING:
    from core.storage.config import LogConfig

log = logging.getLogger(__name__)

LOG_EXT = ".log"
INDEX_EXT = ".index"
TIME_INDEX_EXT = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_BASE_OFFSET = struct.Struct(">q")  # the first field of a batch
MAX_OFFSET = (1 << 63) - 1
_UNKNOWN = -2  # a lazily read value not read yet (-1 and None are real values)
RESERVE_BYTES = 1 << 20  # blocks reserved past a written segment's end (module docstring)
# allocated this far past the end (blocks rounded up): a reservation a crash left behind
_LEFT_RESERVED = 64 << 10

BatchSpan = tuple[int, int, int, int]
"""One batch of an append: ``(position in the data, size, last offset, max timestamp)``."""


def segment_file_name(base_offset: int, ext: str, suffix: str = "") -> str:
    return f"{base_offset:020d}{ext}{suffix}"


class EpochSink(Protocol):
    """Where recovery reports leader epochs (``LeaderEpochCache`` satisfies it)."""

    @property
    def latest_epoch(self) -> int: ...

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> None: ...


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """Whole batches read from a segment: ``data`` starts at ``position`` with the batch
    whose base offset is ``first_offset``; ``next_offset`` follows the last batch. Empty
    ``data`` means a batch exists but the limits allowed none of it."""

    position: int
    data: bytes
    first_offset: int
    next_offset: int


class LogSegment:
    """A ``.log`` file and its two indexes, sharing one base offset.

    Lifecycle: ``LogSegment.open`` creates or opens the files (an index file that was
    missing is created preallocated and ``indexes_missing`` is set so the loader rebuilds
    it). The owning ``PartitionLog`` appends to the active (last) segment only, calls
    ``on_become_inactive`` when it rolls, and ``close`` or ``delete`` at the end. The
    ``.log`` descriptor is borrowed from the descriptor cache for each use: appends
    ``write`` to it (``O_APPEND``) and reads ``pread`` it, so hot tail reads come from
    the page cache.

    Not thread-safe: the partition's owner serialises all calls (a flush on a worker
    thread beside appends is fine: the descriptor is pinned by each).
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        clock: Clock,
        suffix: str = "",
        roll_jitter_ms: int = 0,
        reserve_bytes: int = RESERVE_BYTES,
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.suffix = suffix
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self.created_ms = clock.now_ms()
        cache = descriptor_cache()
        self.reserve_bytes = reserve_bytes
        try:
            st = os.stat(self.log_path)
            self.size = st.st_size
            self._file = SegmentFile(self.log_path, cache)
            allocated = st.st_blocks * 512
            #: the file has blocks up to here (what a crash left reserved is trimmed later)
            self._reserved_end = allocated if allocated > st.st_size + _LEFT_RESERVED \
                else st.st_size
        except FileNotFoundError:  # a new segment: create it (its descriptor is cached)
            self._file = SegmentFile(self.log_path, cache, create=True)
            self.size = self._reserved_end = 0
        try:
            self.offset_index = OffsetIndex(self._path(INDEX_EXT), base_offset, max_index_bytes)
            self.time_index = TimeIndex(self._path(TIME_INDEX_EXT), base_offset, max_index_bytes)
        except BaseException:
            self._file.close()
            raise
        missing = self.offset_index.created or self.time_index.created
        self.indexes_missing = missing and self.size > 0
        self._bytes_since_last_index_entry = 0
        self._next_offset: int | None = None if self.size else base_offset
        #: the batch of the last single-batch append: tail readers (long polls woken by
        #: that append) find it without an index lookup and a scan of frames
        self._last_frame: Frame | None = None
        # read when first asked for (_UNKNOWN): loading many segments reads nothing
        self._max_timestamp = _UNKNOWN if self.time_index.entries else -1
        self._max_timestamp_offset = base_offset
        self._first_batch_timestamp: int | None = _UNKNOWN if self.size else None

    # --- lazily read values --------------------------------------------------------

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp seen (-1: none)."""
        if self._max_timestamp == _UNKNOWN:
            self._max_timestamp, self._max_timestamp_offset = self.time_index.last_entry()
        return self._max_timestamp

    @max_timestamp.setter
    def max_timestamp(self, value: int) -> None:
        self._max_timestamp = value

    @property
    def max_timestamp_offset(self) -> int:
        """The offset of the record with ``max_timestamp``."""
        if self._max_timestamp == _UNKNOWN:
            self._max_timestamp, self._max_timestamp_offset = self.time_index.last_entry()
        return self._max_timestamp_offset

    @max_timestamp_offset.setter
    def max_timestamp_offset(self, value: int) -> None:
        self._max_timestamp_offset = value

    @property
    def first_batch_timestamp(self) -> int | None:
        """The max timestamp of the first batch (``segment.ms`` rolls count from it)."""
        if self._first_batch_timestamp == _UNKNOWN:
            self._first_batch_timestamp = self._read_first_batch_timestamp()
        return self._first_batch_timestamp

    @first_batch_timestamp.setter
    def first_batch_timestamp(self, value: int | None) -> None:
        self._first_batch_timestamp = value

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        clock: Clock,
        suffix: str = "",
        roll_jitter_ms: int = 0,
    ) -> LogSegment:
        """Open (or create) the segment ``<base_offset>.log<suffix>`` in ``directory``.
        The compactor creates its output with ``suffix=CLEANED_SUFFIX``."""
        return cls(
            directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            clock=clock,
            suffix=suffix,
            roll_jitter_ms=roll_jitter_ms,
            reserve_bytes=min(RESERVE_BYTES, config.segment_bytes),
        )

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"

    # --- paths ---------------------------------------------------------------------

    def _path(self, ext: str, suffix: str | None = None) -> Path:
        sfx = self.suffix if suffix is None else suffix
        return self.dir / segment_file_name(self.base_offset, ext, sfx)

    @property
    def log_path(self) -> Path:
        return self._path(LOG_EXT)

    def rename_suffix(self, old: str, new: str) -> None:
        """Rename all three files from suffix ``old`` to ``new`` (fds and maps stay valid)."""
        if old != self.suffix:
            raise ValueError(f"{self.log_path} does not have suffix {old!r}")
        self._file.rename_to(self._path(LOG_EXT, new))
        self.offset_index.rename_to(self._path(INDEX_EXT, new))
        self.time_index.rename_to(self._path(TIME_INDEX_EXT, new))
        self.suffix = new

    # --- appending -----------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview,
        *,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        max_timestamp_offset: int,
        batches: Sequence[BatchSpan] | None = None,
    ) -> None:
        """Write whole batches covering ``[first_offset, last_offset]`` at the end."""
        if not len(data):
            return
        if first_offset < self.base_offset or last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            raise ValueError(
                f"offsets [{first_offset}, {last_offset}] do not fit segment {self.log_path}"
            )
        position = self.size
        self._write(data)
        if position == 0:
            self.first_batch_timestamp = max_timestamp
        if batches is None:
            batches = ((0, len(data), last_offset, max_timestamp),)
            self._note_timestamp(max_timestamp, max_timestamp_offset)
        for rel_pos, size, batch_last, batch_max_ts in batches:
            self._note_timestamp(batch_max_ts, batch_last)
            self._maybe_index(batch_last, position + rel_pos)
            self._bytes_since_last_index_entry += size
        self.size = position + len(data)
        self._next_offset = last_offset + 1
        self._last_frame = (
            Frame(position, len(data), _BASE_OFFSET.unpack_from(data, 0)[0], last_offset)
            if len(batches) == 1 else None
        )

    def _maybe_index(self, last_offset: int, position: int) -> None:
        if self._bytes_since_last_index_entry <= self.index_interval_bytes:
            return
        if not self.offset_index.is_full():
            self.offset_index.append(last_offset, position)
        if not self.time_index.is_full():
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
        self._bytes_since_last_index_entry = 0

    def _write(self, data: bytes | bytearray | memoryview) -> None:
        f = self._file
        try:
            fd = f.acquire()
        except OSError as exc:
            raise KafkaStorageError(f"cannot append to {self.log_path}: {exc}") from exc
        try:
            if self.size + len(data) > self._reserved_end and self.reserve_bytes:
                self._reserve(fd, self.size + len(data))
            written = os.write(fd, data)
            if written < len(data):
                view = memoryview(data)
                while written < len(view):
                    written += os.write(fd, view[written:])
        except OSError as exc:
            try:  # do not leave half a batch behind (nor blocks reserved past the end)
                os.ftruncate(fd, self.size)
                self._reserved_end = self.size
            except OSError:
                log.exception("cannot undo a partial write to %s", self.log_path)
            raise KafkaStorageError(f"cannot append to {self.log_path}: {exc}") from exc
        finally:
            f.release()

    def _reserve(self, fd: int, end: int) -> None:
        """Blocks up to ``reserve_bytes`` past ``end`` (the file's end after a write);
        when the file system or the disk refuses, none from now on for this segment."""
        start = max(self._reserved_end, self.size)
        stop = end + self.reserve_bytes
        if native.reserve_blocks(fd, start, stop - start):
            self._reserved_end = stop
        else:
            self.reserve_bytes = 0

    def _release_reserved(self) -> None:
        """Give back the blocks reserved past the end (``ftruncate`` to the size frees
        them). A failure only keeps them: logged."""
        if self._reserved_end <= self.size or self._file.closed:
            return
        try:
            with self._file.pin() as fd:
                os.ftruncate(fd, self.size)
        except OSError as exc:
            log.warning("cannot give back the blocks reserved past the end of %s: %s",
                        self.log_path, exc)
            return
        self._reserved_end = self.size

    def should_roll(
        self, *, incoming_size: int, max_timestamp: int, last_offset: int, now_ms: int,
        segment_bytes: int, max_segment_ms: int,
    ) -> bool:  # fmt: skip
        """Kafka's roll rule: the data would not fit, the segment is old enough by record
        time (``segment.ms`` minus jitter), an index is full, or the offsets overflow."""
        if self.size > segment_bytes - incoming_size:
            return True
        if (
            self.size > 0
            and self._time_waited(now_ms, max_timestamp) > max_segment_ms - self.roll_jitter_ms
        ):
            return True
        if self.offset_index.is_full() or self.time_index.is_full():
            return True
        return last_offset - self.base_offset > MAX_RELATIVE_OFFSET

    def _time_waited(self, now_ms: int, max_timestamp: int) -> int:
        first = self.first_batch_timestamp
        if first is not None and first >= 0:
            return max_timestamp - first
        return now_ms - self.created_ms

    # --- reading -------------------------------------------------------------------

    def _pread(self, size: int, position: int) -> bytes:
        f = self._file
        fd = f.acquire()
        try:
            return os.pread(fd, size, position)
        finally:
            f.release()

    def _scan(self, start: int) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each whole batch from ``start`` to the end (the
        descriptor is pinned until the iterator is exhausted or dropped)."""
        with self._file.pin() as fd:
            yield from scan_headers(fd, start, self.size)

    def _frames(self, start: int) -> Iterator[Frame]:
        with self._file.pin() as fd:
            yield from scan_frames(fd, start, self.size)

    def iter_batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of every batch from byte ``start_position`` (a batch
        boundary: 0, or a position ``locate`` answered), in file order."""
        return self._scan(start_position)

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return self._pread(header.size, position)

    def locate(self, offset: int, start_position: int = 0) -> Frame | None:
        """The first batch whose last offset >= ``offset`` (index lookup, then a forward
        scan of frames), without parsing its full header."""
        last = self._last_frame
        if last is not None and last.base_offset <= offset <= last.last_offset \
                and last.position >= start_position:
            return last  # every batch before it ends below its base offset
        _, index_pos = self.offset_index.lookup(offset)
        # index entries a chunk or more apart on average: large batches (one entry
        # each), read just the frames, not a chunk of the batch before the one wanted
        large = self.size >= SCAN_CHUNK * (self.offset_index.entries + 1)
        f = self._file
        fd = f.acquire()
        try:
            for frame in scan_frames(fd, max(index_pos, start_position), self.size,
                                     large=large):
                if frame.last_offset >= offset:
                    return frame
        finally:
            f.release()
        return None

    def translate_offset(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset >= ``offset``."""
        frame = self.locate(offset, start_position)
        if frame is None:
            return None
        return frame.position, parse_header(self._pread(HEADER_SIZE, frame.position))

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_position: int | None = None,
        min_one_batch: bool = True,
        max_offset: int | None = None,
    ) -> tuple[int, bytes] | None:
        """Whole batches from the one holding ``start_offset``: ``(position, bytes)``, or
        None if no batch reaches ``start_offset``. See ``read_slice``."""
        found = self.read_slice(
            start_offset, max_bytes, max_position=max_position,
            min_one_batch=min_one_batch, max_offset=max_offset,
        )  # fmt: skip
        return None if found is None else (found.position, found.data)

    def read_slice(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_position: int | None = None,
        min_one_batch: bool = True,
        max_offset: int | None = None,
        max_records: int | None = None,
    ) -> SegmentSlice | None:
        """Whole batches, starting with the first whose last offset >= ``start_offset``,
        up to ``max_bytes`` (at least that first batch if ``min_one_batch``), ending
        before byte ``max_position`` and before the first batch whose base offset is >=
        ``max_offset``; only the first batch when it holds ``max_records`` records from
        ``start_offset`` on (a count-limited read). None if no batch in this segment
        reaches ``start_offset``."""
        first = self.locate(start_offset)
        if first is None:
            return None
        if max_records is not None and first.last_offset - start_offset + 1 >= max_records:
            max_bytes = min(max_bytes, first.size)
        pos = first.position
        limit = self.size if max_position is None else min(max_position, self.size)
        budget = max(max_bytes, first.size) if min_one_batch else max_bytes
        want = min(budget, limit - pos)
        if want < first.size or (max_offset is not None and first.base_offset >= max_offset):
            return SegmentSlice(pos, b"", start_offset, start_offset)
        buf = self._pread(want, pos)
        used, next_offset = whole_batches(buf, max_offset)
        return SegmentSlice(
            pos, buf if used == len(buf) else buf[:used], first.base_offset, next_offset
        )

    def read_region(self, start_offset: int, max_bytes: int, *,
                    max_offset: int | None = None) -> FileRegion | None:
        """As ``read_slice`` (at least the first batch), as a range of the file rather
        than its bytes: only batch frames are read to find where it ends."""
        first = self.locate(start_offset)
        if first is None:
            return None
        if max_offset is not None and first.base_offset >= max_offset:
            return FileRegion(self._file, first.position, 0, start_offset, start_offset)
        budget = max(max_bytes, first.size)
        end, nxt = first.position + first.size, first.last_offset + 1
        stop = min(self.size, first.position + budget)
        if stop - end >= HEADER_SIZE:
            with self._file.pin() as fd:
                # the batches before one the index places whole within ``stop`` and
                # below ``max_offset`` are in the region: the walk of frames starts at
                # that batch (its frame gives the region's next offset if it ends it)
                skip = self.offset_index.batch_before(
                    stop - HEADER_SIZE, MAX_OFFSET if max_offset is None else max_offset)
                if skip is not None and skip[1] > end:
                    end = skip[1]
                for frame in scan_frames(fd, end, stop, large=first.size >= SCAN_CHUNK):
                    if max_offset is not None and frame.base_offset >= max_offset:
                        break
                    end, nxt = frame.position + frame.size, frame.last_offset + 1
        return FileRegion(self._file, first.position, end - first.position,
                          first.base_offset, nxt)

    def find_offset_by_timestamp(
        self, timestamp: int, start_offset: int = 0
    ) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp`` and
        offset >= ``start_offset``, or None."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, start_offset))
        for position, header in self._scan(pos):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            for rec in decode_batch(self.read_batch(position, header)):
                if rec.timestamp >= timestamp and rec.offset >= start_offset:
                    return rec.offset, rec.timestamp
        return None

    def next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        if self._next_offset is None:
            nxt = self.base_offset
            for frame in self._frames(self.offset_index.last_entry()[1]):
                nxt = frame.last_offset + 1
            self._next_offset = nxt
        return self._next_offset

    def _read_first_batch_timestamp(self) -> int | None:
        if self.size < HEADER_SIZE:
            return None
        try:
            return parse_header(self._pread(HEADER_SIZE, 0)).max_timestamp
        except (CorruptRecordError, OSError):
            return None

    # --- recovery and truncation ---------------------------------------------------

    @property
    def name(self) -> str:
        """``<topic>-<partition>/<base>.log``: how messages name the segment (never the
        absolute path, which may reach clients)."""
        return f"{self.dir.name}/{self.log_path.name}"

    def sanity_check(self) -> None:
        """CorruptIndexError if an index is missing or malformed (then rebuild it)."""
        if self.indexes_missing:
            raise CorruptIndexError(f"an index of {self.name} is missing")
        self.offset_index.sanity_check(log_size=self.size)
        self.time_index.sanity_check()

    def check_batches(
        self, start: int = 0, *, expect_last_offset: int | None = None
    ) -> tuple[int, str] | None:
        """Validate, without changing anything, every batch from byte ``start`` (a batch
        boundary) to the end of the ``.log``: framing (sane header, whole batch inside
        the file), CRC-32C, offsets above the previous batch and inside the segment, and,
        when given, ``expect_last_offset`` as the first batch's last offset (what the
        index entry pointing at ``start`` says). None when all is well, else the position
        of the first bad or partial batch and why (recovery truncates there)."""
        expected, end = self.base_offset, start
        try:
            for pos, header in self._scan(start):
                if pos == start and expect_last_offset is not None \
                        and header.last_offset != expect_last_offset:
                    return pos, (f"the index says the batch at byte {pos} ends at offset "
                                 f"{expect_last_offset}, it ends at {header.last_offset}")
                if header.base_offset < expected or \
                        header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    return pos, f"out-of-order offsets in the batch at byte {pos}"
                if not is_crc_valid(self.read_batch(pos, header), 0, header):
                    return pos, f"CRC mismatch in the batch at byte {pos}"
                expected, end = header.next_offset, pos + header.size
        except CorruptRecordError as exc:
            return end, f"bad batch header at byte {end}: {exc}"
        if end < self.size:
            return end, f"partial batch at byte {end} ({self.size - end} bytes to the end)"
        return None

    def recover(
        self, max_message_bytes: int, *, leader_epoch_cache: EpochSink | None = None
    ) -> int:
        """Re-validate every batch from position 0 and rebuild both indexes; truncate the
        ``.log`` at the first invalid or partial batch. Returns the bytes truncated.

        A batch is valid if its header is sane, it fits in the file, it is at most
        ``max_message_bytes``, its CRC matches, and its offsets lie above the previous
        batch's and fit the segment. Epochs above ``leader_epoch_cache``'s latest are
        recorded with the batch's base offset (the caller flushes the cache)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp, self.max_timestamp_offset = -1, self.base_offset
        self.first_batch_timestamp = None
        self._bytes_since_last_index_entry = 0
        with self._file.pin() as fd:
            truncated = self._recover_batches(fd, max_message_bytes, leader_epoch_cache)
        self.on_become_inactive()  # final time-index entry, trimmed indexes
        self.indexes_missing = False
        return truncated

    def _recover_batches(
        self, fd: int, max_message_bytes: int, leader_epoch_cache: EpochSink | None
    ) -> int:
        file_size = os.fstat(fd).st_size
        valid, next_offset = 0, self.base_offset
        for pos, header in validated_batches(
            fd, file_size, base_offset=self.base_offset,
            max_message_bytes=max_message_bytes, name=self.log_path,
        ):  # fmt: skip
            if pos == 0:
                self.first_batch_timestamp = header.max_timestamp
            self._note_timestamp(header.max_timestamp, header.last_offset)
            self._maybe_index(header.last_offset, pos)
            self._bytes_since_last_index_entry += header.size
            epoch = header.partition_leader_epoch
            epochs = leader_epoch_cache
            if epochs is not None and epoch >= 0 and epoch > epochs.latest_epoch:
                epochs.assign(epoch, header.base_offset, flush=False)
            valid, next_offset = pos + header.size, header.next_offset
        truncated = file_size - valid
        if truncated:
            log.warning(
                "%s: truncating segment %d at byte %d: %d bytes from the first invalid or "
                "partial batch on are dropped", self.dir.name, self.base_offset, valid, truncated,
            )  # fmt: skip
            os.ftruncate(fd, valid)  # what was reserved past the end goes too
            self._reserved_end = valid
        self.size, self._next_offset, self._last_frame = valid, next_offset, None
        return truncated

    def _note_timestamp(self, timestamp: int, offset: int) -> None:
        if timestamp > self.max_timestamp:
            self.max_timestamp, self.max_timestamp_offset = timestamp, offset

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (a batch holding
        ``offset`` goes whole); trims the indexes. Returns the bytes removed."""
        found = self.locate(offset)
        if found is None:
            return 0
        position = found.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        with self._file.pin() as fd:
            os.ftruncate(fd, position)  # what was reserved past the end goes too
        truncated = self.size - position
        self.size = self._reserved_end = position
        self._last_frame = None
        self._next_offset = None if position else self.base_offset
        self._bytes_since_last_index_entry = 0
        if position == 0:
            self.created_ms = self._clock.now_ms()
            self.first_batch_timestamp = None
        self._reload_max_timestamp()
        return truncated

    def _reload_max_timestamp(self) -> None:
        self.max_timestamp, self.max_timestamp_offset = self.time_index.last_entry()
        if self.max_timestamp < 0:
            self.max_timestamp_offset = self.base_offset
        _, pos = self.offset_index.lookup(self.max_timestamp_offset)
        for _, header in self._scan(pos):
            self._note_timestamp(header.max_timestamp, header.last_offset)

    # --- lifecycle -----------------------------------------------------------------

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def _final_time_entry(self) -> None:
        if self.max_timestamp >= 0:
            ts, offset = self.max_timestamp, self.max_timestamp_offset
            self.time_index.maybe_append(ts, offset, skip_full_check=True)

    def on_become_inactive(self) -> None:
        """At roll: force the final time-index entry, trim both indexes (which unmaps
        them: an inactive segment's indexes are mapped again on first use) and give back
        the blocks reserved past the end."""
        self._release_reserved()
        self._final_time_entry()
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def pin_file(self) -> AbstractContextManager[int]:
        """The ``.log`` descriptor, kept open for the ``with`` block (an fdatasync of the
        group commit in flight off the loop: ``core.storage.data_sync``)."""
        return self._file.pin()

    def flush(self) -> None:
        """fsync the ``.log`` and msync (or fsync) both indexes."""
        try:
            with self._file.pin() as fd:
                durability.fsync(fd)
            self.offset_index.flush()
            self.time_index.flush()
        except OSError as exc:
            raise KafkaStorageError(f"cannot flush {self.log_path}: {exc}") from exc

    def close(self) -> None:
        """Force the final time-index entry, trim the indexes, release the files."""
        if self._file.closed:
            return
        self._release_reserved()
        self._final_time_entry()
        self.offset_index.close()
        self.time_index.close()
        self._file.close()

    def delete(self) -> None:
        """Release and remove all three files."""
        self._file.close()
        self.offset_index.delete()
        self.time_index.delete()
        self.log_path.unlink(missing_ok=True)
