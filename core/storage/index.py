"""Sparse offset and time indexes of one segment, memory-mapped like Kafka's.

Byte layouts (big-endian, fixed width, no header, no checksum)::

    <base>.index      OffsetIndex, 8-byte entries
        0  relativeOffset  int32   offset - segment base offset
        4  position        int32   byte position of a batch in <base>.log

    <base>.timeindex  TimeIndex, 12-byte entries
        0  timestamp       int64   largest record timestamp in the segment up to ...
        8  relativeOffset  int32   ... this offset (the batch that first reached it)

Life of an index file: it is created **preallocated** to ``segment.index.bytes``
rounded down to a multiple of the entry size, memory-mapped, filled from the front,
and **trimmed to the used size** when its segment is rolled or closed. On open the
entry count is ``file length / entry size``, so a file a crash left untrimmed looks
like a run of zero entries: :meth:`sanity_check` rejects that (zeros are not
increasing), and recovery rebuilds every index from the log anyway. Entries only grow:
relative offsets strictly increase in both indexes, and time-index timestamps strictly
increase. Lookups binary-search for the largest entry <= the target, probing the last
8 KiB of entries first (tail reads keep hitting the same pages).

Disk space: the preallocation is sparse (``ftruncate``), so the first write to a page
of the mapping is what allocates its block, and on a full disk the kernel answers that
write with SIGBUS, which kills the process. So before an entry is written, the bytes
up to the next ``RESERVE_CHUNK`` boundary past it get real blocks
(``posix_fallocate``, on a short-lived descriptor); the whole ``segment.index.bytes``
is never reserved up front. When the reservation fails (ENOSPC, EDQUOT, EIO) the
entry is **skipped**: the index is sparse by design, a missing entry only makes the
forward scan from the previous one longer, and the append that wanted it has already
written its batch (a disk that is really full refuses the ``.log`` write first, with
KafkaStorageError). Nothing is ever written to a page that has no block.

Mappings and descriptors (Kafka's ``LazyIndex``): an index maps its file only when
first used (a lookup, an append, reading an entry) through ``core.storage.mapped_file``,
which keeps no descriptor. Opening one only ``stat``s the file; ``sanity_check`` and
``last_entry`` of an unmapped index read the bytes with ``pread`` instead of mapping;
``resize`` (and so trimming at roll) unmaps, and the next use maps again. So loading a
log maps nothing but what the active segment uses, and a rolled segment's indexes are
unmapped until read. Files are opened only for the moment of a map, ``ftruncate``,
``posix_fallocate`` or ``fsync``.
"""

from __future__ import annotations

import errno
import logging
import mmap
import operator
import os
import struct
import sys
from array import array
from itertools import islice
from pathlib import Path

from core.storage import durability
from core.storage.errors import CorruptIndexError, NonMonotonicAppendError
from core.storage.mapped_file import Mapping, open_mapping

log = logging.getLogger(__name__)

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_WARM_BYTES = 8192
MAX_RELATIVE_OFFSET = 2**31 - 1
#: Bytes of an index given real blocks at a time, ahead of the write position (1024
#: offset entries: one reservation per ~4 MiB of log at the default index.interval.bytes).
RESERVE_CHUNK = 8192
_PAGE = mmap.PAGESIZE
#: posix_fallocate errors meaning "this file system cannot reserve": writes go ahead
#: unprotected, as before (glibc already emulates fallocate where the kernel lacks it).
_NO_FALLOCATE = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
_UNLIMITED = 1 << 62


class _MappedIndex:
    """Shared machinery: the lazily mapped file, entry count, binary search, resize and
    trim.

    Lifecycle: created by its ``LogSegment`` (which opens, resizes, truncates and closes
    it); ``close`` trims the file and releases the mapping. ``created`` tells whether
    the file was missing (made preallocated here). Not thread-safe: the owning
    segment's owner serialises access.
    """

    ENTRY_SIZE = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._map: Mapping | None = None
        self._mm: memoryview | None = None  # the mapping's view while mapped
        self._closed = False
        self._dirty = False  # entries written since the last flush
        # [0, _reserved) of the file is known to have real blocks (reserved by this
        # object). 0 on open: an existing file may be sparse (left untrimmed by a crash),
        # and re-reserving blocks a file already has is a cheap no-op.
        self._reserved = 0
        self._backed_entries = 0  # entries that fit in [0, _reserved): the append's test
        self._can_reserve = True
        self._reserve_failing = False
        try:
            length = os.stat(path).st_size
            entries = length // self.ENTRY_SIZE
            self.created = False
        except FileNotFoundError:  # preallocate; an existing empty file stays empty
            length, entries = self._round(max_index_size), 0
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, length)
            finally:
                os.close(fd)
            self.created = True
        self._length = length
        self._entries = entries
        self._max_entries = length // self.ENTRY_SIZE

    # --- sizes -----------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def file_length(self) -> int:
        return self._length

    @property
    def valid_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def _round(self, size: int) -> int:
        return size // self.ENTRY_SIZE * self.ENTRY_SIZE

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries (never below
        the used entries) and remap it. Returns whether the length changed."""
        rounded = max(self._round(new_size), self.valid_bytes)
        if rounded == self._length:
            return False
        self._unmap()  # mapped again on next use, at the new length
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, rounded)
        finally:
            os.close(fd)
        self._length = rounded
        self._max_entries = rounded // self.ENTRY_SIZE
        self._reserved = min(self._reserved, rounded)
        self._backed_entries = (
            self._reserved // self.ENTRY_SIZE if self._can_reserve else _UNLIMITED
        )
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.valid_bytes)

    def reset(self) -> None:
        """Drop every entry and grow back to the maximum size (before a rebuild)."""
        self._entries = 0
        self.resize(self.max_index_size)

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = min(self._entries, max(0, entries))

    # --- disk space ------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``<topic>-<partition>/<file>``: how messages name the file (never the
        absolute path, which may reach clients)."""
        return f"{self.path.parent.name}/{self.path.name}"

    @property
    def reserved_bytes(self) -> int:
        """Bytes at the front of the file this index has given real blocks."""
        return self._reserved

    def _ensure_backed(self, end: int) -> bool:
        """Give bytes ``[0, end)`` of the file real blocks before the mapping writes
        there, reserving up to the next ``RESERVE_CHUNK`` boundary (never past the
        file's length). False when the disk refuses: the caller must not write."""
        if end <= self._reserved:
            return True
        if not self._can_reserve:
            self._backed_entries = _UNLIMITED  # never asked again
            return True
        start = self._reserved // _PAGE * _PAGE
        stop = min(self._length, -(-end // RESERVE_CHUNK) * RESERVE_CHUNK)
        if stop < end:
            return False  # beyond the file: the caller's bug, never write there
        try:
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, start, stop - start)
            finally:
                os.close(fd)
        except OSError as exc:
            if exc.errno in _NO_FALLOCATE:
                log.warning("%s: the file system cannot reserve index blocks (%s); index "
                            "writes are not protected against a full disk", self.name,
                            exc.strerror)
                self._can_reserve = False
                self._backed_entries = _UNLIMITED
                return True
            if not self._reserve_failing:
                log.warning("%s: cannot reserve index space (%s); index entries are skipped "
                            "until there is room", self.name, exc.strerror)
                self._reserve_failing = True
            return False
        if self._reserve_failing:
            log.info("%s: index space reserved again", self.name)
            self._reserve_failing = False
        self._reserved = stop
        self._backed_entries = stop // self.ENTRY_SIZE
        return True

    # --- file handling ---------------------------------------------------------------

    @property
    def is_mapped(self) -> bool:
        return self._map is not None

    def flush(self) -> None:
        """msync the mapping; an unmapped index written since the last flush is
        fsynced (its pages were written through an earlier mapping)."""
        mapping = self._map
        if mapping is not None:
            self._dirty = False
            if not durability.deferring():
                mapping.flush()
        elif self._dirty and not self._closed:
            self._dirty = False
            fd = os.open(self.path, os.O_RDONLY)
            try:
                durability.fsync(fd)
            finally:
                os.close(fd)

    def close(self, *, trim: bool = True) -> None:
        if trim and not self._closed:
            self.trim_to_valid_size()
        self._unmap()
        self._closed = True

    def delete(self) -> None:
        self._unmap()
        self._closed = True
        self.path.unlink(missing_ok=True)

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def unmap(self) -> None:
        """Release the mapping (the next use maps the file again)."""
        self._unmap()

    def _unmap(self) -> None:
        mapping, self._map, self._mm = self._map, None, None
        if mapping is not None:
            mapping.close()

    def _mapped(self) -> memoryview | None:
        """The mapped view, mapping the file now if needed; None when it is empty."""
        view = self._mm
        if view is not None:
            return view
        if self._closed or not self._length:
            return None
        fd = os.open(self.path, os.O_RDWR)
        try:
            mapping = open_mapping(fd, self._length)
        finally:
            os.close(fd)
        self._map, self._mm = mapping, mapping.view
        return self._mm

    def _valid_bytes_now(self) -> bytes:
        """The bytes of the used entries, read without mapping an unmapped file."""
        n = self.valid_bytes
        view = self._mm
        if view is not None:
            return bytes(view[:n])
        if not n:
            return b""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, n, 0)
        finally:
            os.close(fd)
        if len(data) < n:
            raise CorruptIndexError(f"index file {self.name} is shorter than it was")
        return data

    def _read_entry(self, fmt: struct.Struct, slot: int) -> tuple[int, int]:
        """Entry ``slot`` from the mapping, or with a ``pread`` when unmapped."""
        view = self._mm
        if view is not None:
            return fmt.unpack_from(view, slot * self.ENTRY_SIZE)
        if self._closed:
            raise ValueError(f"index {self.name} is closed")
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, self.ENTRY_SIZE, slot * self.ENTRY_SIZE)
        finally:
            os.close(fd)
        if len(data) < self.ENTRY_SIZE:
            raise ValueError(f"index {self.name} has no entry {slot}")
        return fmt.unpack(data)

    # --- search ----------------------------------------------------------------------

    def _search(self, target: int, field: struct.Struct, at: int) -> int:
        """Slot of the largest entry whose field (``field`` at byte ``at`` of each entry,
        never decreasing) is <= ``target``, or -1. Probes the warm tail first."""
        n, size = self._entries, self.ENTRY_SIZE
        if n == 0:
            return -1
        mm = self._mm if self._mm is not None else self._mapped()
        if mm is None:
            return -1
        unpack = field.unpack_from
        if unpack(mm, at)[0] > target:
            return -1
        warm_first = max(0, n - _WARM_BYTES // size)
        if unpack(mm, warm_first * size + at)[0] <= target:
            lo, hi = warm_first, n - 1
        else:
            lo, hi = 0, warm_first - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size + at)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _require_mapped(self) -> memoryview:
        mm = self._mm if self._mm is not None else self._mapped()
        if mm is None:
            raise ValueError(f"index {self.name} is closed or has no room")
        return mm

    def _check_length(self) -> None:
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"index file {self.name} has length {self._length}, "
                f"not a multiple of the entry size {self.ENTRY_SIZE}"
            )


def _strictly_increasing(values: array[int] | list[int]) -> bool:
    return all(map(operator.lt, values, islice(values, 1, None)))


def _non_decreasing(values: array[int] | list[int]) -> bool:
    return all(map(operator.le, values, islice(values, 1, None)))


class OffsetIndex(_MappedIndex):
    """``<base>.index``: sparse map offset -> byte position of the batch holding it.

    An entry ``(O, P)`` says the batch starting at position ``P`` of the ``.log`` has
    last offset ``O``. Lifecycle and thread-safety: see ``_MappedIndex``.
    """

    ENTRY_SIZE = 8

    def entry(self, slot: int) -> tuple[int, int]:
        """``(absolute offset, position)`` of entry ``slot``."""
        rel, pos = self._read_entry(_OFFSET_ENTRY, slot)
        return self.base_offset + rel, pos

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self.entry(self._entries - 1)[0] if self._entries else self.base_offset

    def last_entry(self) -> tuple[int, int]:
        return self.entry(self._entries - 1) if self._entries else (self.base_offset, 0)

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; offsets must strictly increase."""
        if self._mm is None:
            self._mapped()  # an append is followed by more: map now, not pread the last
        if self._entries and offset <= self.last_offset:
            raise NonMonotonicAppendError(
                f"attempt to append offset {offset} at position {position} to {self.name}, "
                f"no larger than its last offset {self.last_offset}"
            )
        rel = offset - self.base_offset
        if not 0 <= rel <= MAX_RELATIVE_OFFSET:
            raise ValueError(
                f"offset {offset} does not fit index {self.name} (base {self.base_offset})"
            )
        if self.is_full():
            raise ValueError(
                f"attempt to append to a full index {self.name} ({self._entries} entries)"
            )
        n = self._entries
        if n >= self._backed_entries and not self._ensure_backed(n * 8 + 8):
            return  # no block for the page: skip the entry (see the module docstring)
        _OFFSET_ENTRY.pack_into(self._require_mapped(), n * 8, rel, position)
        self._entries = n + 1
        self._dirty = True

    def lookup(self, target: int) -> tuple[int, int]:
        """Largest ``(offset, position)`` entry with offset <= target, else (base, 0)."""
        slot = self._search(target - self.base_offset, _INT32, 0)
        return (self.base_offset, 0) if slot < 0 else self.entry(slot)

    def batch_before(self, position: int, below_offset: int) -> tuple[int, int] | None:
        """An indexed batch that ends before the last indexed batch starting at or
        before byte ``position`` with last offset below ``below_offset``: the entry
        before that one, as ``(last offset, position)``, or None. A walk of frames may
        start there knowing the batch it starts with is whole and within both bounds
        (both fields only grow, so the slot is the earlier of two searches)."""
        by_position = self._search(position, _INT32, 4)
        by_offset = self._search(below_offset - 1 - self.base_offset, _INT32, 0)
        slot = min(by_position, by_offset) - 1
        return None if slot < 0 else self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        slot = self._search(offset - self.base_offset, _INT32, 0)
        if slot < 0:
            self._truncate_to_entries(0)
        else:
            self._truncate_to_entries(slot if self.entry(slot)[0] == offset else slot + 1)

    def sanity_check(self, *, log_size: int | None = None) -> None:
        """CorruptIndexError unless the file is whole entries with increasing offsets
        and positions, all at or above the base offset (and below ``log_size`` when
        given). Does not map an unmapped file."""
        self._check_length()
        if not self._entries:
            return
        ints = array("i")
        ints.frombytes(self._valid_bytes_now())
        if sys.byteorder == "little":
            ints.byteswap()
        rel, pos = ints[0::2], ints[1::2]
        if rel[0] < 0 or not _strictly_increasing(rel):
            raise CorruptIndexError(f"offset index {self.name} has offsets that do not increase")
        if pos[0] < 0 or not _strictly_increasing(pos):
            raise CorruptIndexError(f"offset index {self.name} has positions that do not increase")
        if log_size is not None and pos[-1] >= log_size:
            raise CorruptIndexError(f"offset index {self.name} points past the log end")


class TimeIndex(_MappedIndex):
    """``<base>.timeindex``: sparse map max-timestamp-so-far -> offset.

    An entry ``(T, O)`` says the largest timestamp in the segment up to offset ``O`` is
    ``T``. Only strictly increasing timestamps are written. One slot is kept free for
    the final entry forced when the segment is rolled or closed, so ``is_full`` is true
    one entry early (Kafka). Lifecycle and thread-safety: see ``_MappedIndex``.
    """

    ENTRY_SIZE = 12

    def is_full(self) -> bool:
        return self._entries >= self._max_entries - 1

    def entry(self, slot: int) -> tuple[int, int]:
        """``(timestamp, absolute offset)`` of entry ``slot``."""
        ts, rel = self._read_entry(_TIME_ENTRY, slot)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        """The last ``(timestamp, offset)``, or ``(-1, base offset)`` when empty."""
        return self.entry(self._entries - 1) if self._entries else (-1, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add ``(timestamp, offset)`` if ``timestamp`` is above the last entry's."""
        if not skip_full_check and self.is_full():
            raise ValueError(f"attempt to append to a full time index {self.name}")
        if self._mm is None:
            self._mapped()
        last_ts, last_off = self.last_entry()
        if timestamp <= last_ts:
            return
        if self._entries and offset < last_off:
            raise NonMonotonicAppendError(
                f"attempt to append offset {offset} to time index {self.name}, "
                f"below its last offset {last_off}"
            )
        rel = offset - self.base_offset
        if not 0 <= rel <= MAX_RELATIVE_OFFSET:
            raise ValueError(
                f"offset {offset} does not fit index {self.name} (base {self.base_offset})"
            )
        n = self._entries
        # the forced final entry of a trimmed file grows it by one entry first
        grown = n >= self._max_entries and self.resize(self._length + self.ENTRY_SIZE)
        if n >= self._backed_entries and not self._ensure_backed(n * 12 + 12):
            if grown:
                self.trim_to_valid_size()
            return  # no block for the page: skip the entry (see the module docstring)
        _TIME_ENTRY.pack_into(self._require_mapped(), n * 12, timestamp, rel)
        self._entries = n + 1
        self._dirty = True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest ``(timestamp, offset)`` entry with timestamp <= target, else (-1, base)."""
        slot = self._search(timestamp, _INT64, 0)
        return (-1, self.base_offset) if slot < 0 else self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        slot = self._search(offset - self.base_offset, _INT32, 8)
        while slot >= 0 and self.entry(slot)[1] >= offset:
            slot -= 1
        self._truncate_to_entries(slot + 1)

    def sanity_check(self) -> None:
        """CorruptIndexError unless the file is whole entries with strictly increasing
        timestamps and non-decreasing offsets at or above the base offset."""
        self._check_length()
        if not self._entries:
            return
        rows = list(_TIME_ENTRY.iter_unpack(self._valid_bytes_now()))
        stamps = [ts for ts, _ in rows]
        rels = [rel for _, rel in rows]
        if not _strictly_increasing(stamps):
            raise CorruptIndexError(f"time index {self.name} has timestamps that do not increase")
        if rels[0] < 0 or not _non_decreasing(rels):
            raise CorruptIndexError(f"time index {self.name} has offsets that decrease")
