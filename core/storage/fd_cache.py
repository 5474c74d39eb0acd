"""A bounded, process-wide cache of open ``.log`` descriptors (issue "holds at scale").

A segment no longer keeps its ``.log`` open for life: it holds a ``SegmentFile``, which
opens the file on demand (``O_RDWR | O_APPEND``: appends land at the end whatever the
offset of an earlier descriptor, reads use ``pread``) and registers the descriptor in
the ``DescriptorCache``, an LRU of at most ``capacity`` open files
(``log.segment.open.files.max``). Opening one more closes the least recently used.

**Pinning.** Storage work runs on several threads (the event loop, and
``core.storage.blocking`` workers doing fsync, compaction, recovery). Closing a
descriptor another thread is about to ``write`` to would let the kernel reuse the
number for the next file opened and the write land in the wrong file. So every use is
bracketed by ``acquire`` (pin, returns the descriptor) and ``release`` (unpin); a
pinned file is never closed: eviction skips it (the cache may then hold a few more than
``capacity`` until the pins go), and ``SegmentFile.close`` of a pinned file only marks
it, the last ``release`` closes it. Pins, the LRU order and every close happen under
one lock, so the check "unpinned" and the close cannot be separated by another
thread's pin.

Cost of a use whose descriptor is cached: one lock round trip to pin (with an
``OrderedDict.move_to_end`` unless it already is the most recent) and one to unpin,
inlined in ``SegmentFile`` (~0.4 µs on the 2-core test machine).
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from itertools import islice
from pathlib import Path

log = logging.getLogger(__name__)

_FLAGS = os.O_RDWR | os.O_APPEND
#: smallest capacity: a broker below it cannot even compact one log while serving
MIN_CAPACITY = 16
#: look this far past the excess for unpinned victims (pins are few: one per thread or
#: open generator), so eviction stays O(1) per open
_SCAN_SLACK = 16


def default_capacity(open_files: int | None = None) -> int:
    """Half the soft open-files limit (the rest for connections, index work, SQLite,
    checkpoints), at least ``MIN_CAPACITY``."""
    if open_files is None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        open_files = soft if soft != resource.RLIM_INFINITY else 1 << 20
    return max(MIN_CAPACITY, open_files // 2)


class DescriptorCache:
    """The LRU of open segment descriptors. Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self._capacity = max(1, capacity)
        self._lock = threading.Lock()
        self._open: OrderedDict[SegmentFile, None] = OrderedDict()
        self._mru: SegmentFile | None = None  # the last entry of _open (skips move_to_end)
        self.opens = 0  # descriptors opened (cache misses), for tests and benchmarks
        self.closes = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def set_capacity(self, capacity: int) -> None:
        with self._lock:
            self._capacity = max(1, capacity)
            self._evict()

    def __len__(self) -> int:
        return len(self._open)

    def acquire(self, f: SegmentFile) -> int:
        """Pin ``f`` and return its descriptor, opening it if it is not cached."""
        with self._lock:
            fd = f._fd
            if fd >= 0:
                if self._mru is not f:
                    self._open.move_to_end(f)
                    self._mru = f
                f._pins += 1
                return fd
            if f._closed:
                raise OSError(errno.EBADF, "segment file is closed", f.path.name)
            fd = self._open_locked(f.path, _FLAGS)
            f._fd, f._pins = fd, f._pins + 1
            self._open[f] = None
            self._mru = f
            self._evict()
            return fd

    def release(self, f: SegmentFile) -> None:
        """Unpin ``f``; the last unpin of a closed (or surplus) file closes it."""
        with self._lock:
            f._pins -= 1
            if not f._pins:
                self._after_last_release_locked(f)

    def _after_last_release_locked(self, f: SegmentFile) -> None:
        if f._closed:
            self._close_locked(f)
        elif len(self._open) > self._capacity:
            self._evict()

    def register_new(self, f: SegmentFile) -> None:
        """Create ``f``'s file (``O_CREAT``) and cache its descriptor."""
        with self._lock:
            fd = self._open_locked(f.path, _FLAGS | os.O_CREAT)
            f._fd = fd
            self._open[f] = None
            self._mru = f
            self._evict()

    def close(self, f: SegmentFile) -> None:
        """Close ``f`` now, or at its last ``release`` if it is pinned."""
        with self._lock:
            f._closed = True
            if not f._pins:
                self._close_locked(f)

    def _open_locked(self, path: Path, flags: int) -> int:
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            # the process is out of descriptors: give back every unpinned one, retry once
            log.warning("out of file descriptors opening %s; closing %d cached segment "
                        "files", path.name, len(self._open))
            for victim in [v for v in self._open if not v._pins]:
                self._close_locked(victim)
            fd = os.open(path, flags, 0o644)
        self.opens += 1
        return fd

    def _evict(self) -> None:
        excess = len(self._open) - self._capacity
        if excess <= 0:
            return
        for victim in list(islice(self._open, excess + _SCAN_SLACK)):
            if not victim._pins:
                self._close_locked(victim)
                excess -= 1
                if not excess:
                    return

    def _close_locked(self, f: SegmentFile) -> None:
        fd, f._fd = f._fd, -1
        self._open.pop(f, None)
        if self._mru is f:
            self._mru = None
        if fd >= 0:
            self.closes += 1
            try:
                os.close(fd)
            except OSError:  # nothing to undo: the number is released either way
                log.warning("closing %s failed", f.path.name, exc_info=True)


class SegmentFile:
    """One segment's ``.log``, opened through a ``DescriptorCache``.

    ``path`` follows renames (``rename_to``); an open descriptor stays valid across
    them. Use: ``fd = f.acquire()`` ... ``f.release()`` (try/finally), or ``with f.pin()
    as fd``. After ``close`` an ``acquire`` raises OSError(EBADF)."""

    __slots__ = ("path", "_cache", "_fd", "_pins", "_closed")

    def __init__(self, path: Path, cache: DescriptorCache, *, create: bool = False) -> None:
        self.path = path
        self._cache = cache
        self._fd = -1
        self._pins = 0
        self._closed = False
        if create:
            cache.register_new(self)

    def acquire(self) -> int:
        # the cached case inlined (the append and read hot path); the rest in the cache
        cache = self._cache
        lock = cache._lock
        lock.acquire()
        try:
            fd = self._fd
            if fd >= 0:
                if cache._mru is not self:
                    cache._open.move_to_end(self)
                    cache._mru = self
                self._pins += 1
                return fd
        finally:
            lock.release()
        return cache.acquire(self)  # opens it (checking again under the lock)

    def release(self) -> None:
        cache = self._cache
        lock = cache._lock
        lock.acquire()
        try:
            pins = self._pins - 1
            self._pins = pins
            if not pins and (self._closed or len(cache._open) > cache._capacity):
                cache._after_last_release_locked(self)
        finally:
            lock.release()

    def pin(self) -> _Pin:
        return _Pin(self)

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is cached now (tests, diagnostics)."""
        return self._fd >= 0

    @property
    def closed(self) -> bool:
        return self._closed

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def close(self) -> None:
        self._cache.close(self)


class _Pin:
    """``with file.pin() as fd``: acquire on entry, release on exit."""

    __slots__ = ("_f",)

    def __init__(self, f: SegmentFile) -> None:
        self._f = f

    def __enter__(self) -> int:
        return self._f.acquire()

    def __exit__(self, *exc: object) -> None:
        self._f.release()


_CACHE = DescriptorCache(default_capacity())


def descriptor_cache() -> DescriptorCache:
    """The process-wide cache (its capacity set by ``LogManager`` from
    ``log.segment.open.files.max``)."""
    return _CACHE


def capacity_from_property(raw: str | None, open_files: int | None = None) -> int:
    """The cache capacity ``log.segment.open.files.max`` asks for: 0 or unset gives
    ``default_capacity``; a value the open-files limit cannot hold (beside a reserve of
    min(1024, limit / 4) for everything else) is lowered to it, with a warning."""
    if open_files is None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        open_files = soft if soft != resource.RLIM_INFINITY else 1 << 20
    wanted = int(raw.strip()) if raw and raw.strip() else 0
    if wanted < 0:
        raise ValueError(f"log.segment.open.files.max must be >= 0, not {wanted}")
    if wanted == 0:
        return default_capacity(open_files)
    room = max(MIN_CAPACITY, open_files - min(1024, open_files // 4))
    if wanted > room:
        log.warning("log.segment.open.files.max=%d does not fit the open-files limit %d; "
                    "using %d", wanted, open_files, room)
        return room
    return max(MIN_CAPACITY, wanted)
