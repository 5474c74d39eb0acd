"""The leader-epoch cache of one partition (KIP-101, KIP-279): which leader epoch wrote
which offsets, persisted in ``<partition dir>/leader-epoch-checkpoint``.

Entries are ``(epoch, start_offset)`` pairs, both strictly ascending: epoch ``E`` covers
``[start_offset(E), start_offset(next epoch))``, the last one up to the log end offset.
A new leader assigns ``(new epoch, its LEO)`` before its first append; followers and
recovery assign an epoch when they meet a batch stamped with a larger one.
"""

from __future__ import annotations

import bisect
import logging
import threading
from pathlib import Path

from core.storage.checkpoint import LeaderEpochCheckpointFile

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    """Ascending ``(epoch, start_offset)`` entries, written through to the checkpoint
    file on every change (unless a caller batches changes with ``flush=False`` and
    calls ``flush`` itself, as recovery does, or writes them later: ``take_unwritten``
    on the owner's thread, ``write_taken`` on any thread, as a new leader's entry is;
    a write never replaces a newer one).

    Lifecycle: ``PartitionLog`` loads it when the log opens (``load``) and keeps it in
    step with appends, truncations and log-start moves. Not thread-safe: the
    partition's owner serialises access (``write_taken`` aside).
    """

    def __init__(self, directory: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = directory / CHECKPOINT_NAME
        self._file = LeaderEpochCheckpointFile(self.path)
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        #: entries differ from the checkpoint file (or it was never written)
        self.dirty = True
        self._version = 0  # of the entries: +1 per change
        self._written = -1  # the version the file holds
        self._write_lock = threading.Lock()
        for epoch, start in entries or []:
            self.assign(epoch, start, flush=False)

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache:
        """Read the checkpoint (CorruptCheckpointError if it is malformed)."""
        cache = cls(directory)
        for epoch, start in cache._file.read():
            cache.assign(epoch, start, flush=False)
        cache.dirty = False  # a missing file reads as no entries: nothing to write
        return cache

    # --- reading ---------------------------------------------------------------------

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or -1 when there is none."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset`` (the last entry starting at or before it)."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch', end offset)`` for OffsetsForLeaderEpoch: ``epoch'`` is the largest
        known epoch <= ``epoch``; the end offset is the start of the first epoch above
        ``epoch`` (``log_end_offset`` when ``epoch`` is the latest). ``(-1, -1)`` when
        ``epoch`` is undefined or newer than every known epoch."""
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:  # older than every entry: it ends where the first one starts
            return epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # --- changing --------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> None:
        """Record that ``epoch`` starts at ``start_offset``. Entries with an epoch >=
        ``epoch`` or a start offset >= ``start_offset`` are dropped first."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            removed.append((self._epochs.pop(), self._offsets.pop()))
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            log.warning(
                "%s: new entry (%d, %d) replaced non-monotonic entries %s",
                self.path, epoch, start_offset, removed,
            )  # fmt: skip
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        self.dirty = True
        self._version += 1
        if flush:
            self.flush()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated)."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._offsets, end_offset)
        del self._epochs[keep:], self._offsets[keep:]
        self._version += 1
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget offsets below ``start_offset`` (the log start moved): entries starting
        at or before it collapse into one for the epoch in force at ``start_offset``."""
        if start_offset < 0:
            return
        upto = bisect.bisect_right(self._offsets, start_offset)
        if upto == 0:
            return
        if upto == 1 and self._offsets[0] == start_offset:
            return
        epoch = self._epochs[upto - 1]
        del self._epochs[:upto], self._offsets[:upto]
        self._epochs.insert(0, epoch)
        self._offsets.insert(0, start_offset)
        self._version += 1
        self.flush()

    def clear(self) -> None:
        """Drop every entry (the log was emptied) and write the empty checkpoint."""
        self._epochs.clear()
        self._offsets.clear()
        self._version += 1
        self.flush()

    def flush(self) -> None:
        """Write the entries to the checkpoint file (atomically, fsynced)."""
        self.dirty = False
        try:
            self.write_taken(self._version, self.entries)
        except BaseException:
            self.dirty = True
            raise

    def take_unwritten(self) -> tuple[int, list[tuple[int, int]]] | None:
        """On the owner's thread: the entries to write (with their version) when the file
        does not hold them, for ``write_taken`` on another thread; None when it does."""
        if not self.dirty:
            return None
        self.dirty = False
        return self._version, self.entries

    def write_taken(self, version: int, entries: list[tuple[int, int]]) -> None:
        """Write ``entries`` of ``version`` unless the file already holds these or newer
        ones (any thread). A failed write leaves the cache dirty (written again with the
        next change or pass)."""
        with self._write_lock:
            if version <= self._written:
                return
            try:
                self._file.write(entries)
            except BaseException:
                self.dirty = True
                raise
            self._written = version

    def flush_if_dirty(self) -> None:
        """``flush`` unless the file already holds the entries (a log load must not
        fsync a file per partition for nothing: 10,000 of them at start)."""
        if self.dirty:
            self.flush()
