"""New leaders' leader-epoch checkpoints, written off the event loop.

Becoming leader records ``(new epoch, log end offset)`` in the partition's leader-epoch
cache. Writing its checkpoint file at once (write, fsync, rename, fsync the directory:
~5 ms here) on the event loop made a broker restarting with 33,000 partitions spend
minutes in ``make_leader`` before it answered anything. The cache now changes in memory
and this writer puts the files on disk from the storage pool, every cache that changed
meanwhile in one pass (a few threads at once), as Kafka 3.7 moved the same fsync off its
request path (KAFKA-15046).

Nothing depends on the file being written first: an entry for an epoch that wrote no
batch before a crash is lost harmlessly, and the entries of epochs that wrote batches are
rebuilt from the batches' leader epochs when the log is recovered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from core.storage.blocking import run_blocking
from core.storage.errors import StorageError
from core.storage.leader_epoch import LeaderEpochCache

log = logging.getLogger(__name__)

PARALLEL_WRITES = 4  # storage-pool threads one pass uses at most


def _write(taken: list[tuple[LeaderEpochCache, tuple[int, list[tuple[int, int]]]]]) -> None:
    for cache, (version, entries) in taken:
        try:
            cache.write_taken(version, entries)
        except (OSError, StorageError) as exc:  # left dirty: written with its next change
            log.warning("cannot write %s: %s", cache.path, exc)


class EpochCheckpointWriter:
    """Event-loop side: ``add(cache)`` after a change, ``await drain()`` to be sure."""

    def __init__(self) -> None:
        self._pending: dict[int, LeaderEpochCache] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, cache: LeaderEpochCache) -> None:
        if not cache.dirty:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a synchronous caller): write now
            with contextlib.suppress(OSError, StorageError):
                cache.flush_if_dirty()
            return
        self._pending[id(cache)] = cache
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        while self._pending:
            caches = list(self._pending.values())
            self._pending.clear()
            taken = [(c, t) for c in caches if (t := c.take_unwritten()) is not None]
            step = max(1, -(-len(taken) // PARALLEL_WRITES))
            await asyncio.gather(*(run_blocking(_write, taken[i:i + step])
                                   for i in range(0, len(taken), step)))

    async def drain(self) -> None:
        """Return once every change so far is on disk (or failed and was logged)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
