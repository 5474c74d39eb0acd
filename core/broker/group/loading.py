"""Which ``__consumer_offsets`` partitions the coordinator has loaded, and loading them.

A partition is unknown (not ours), loading (one task; requests wait for it, or get
COORDINATOR_LOAD_IN_PROGRESS when they cannot wait), or loaded. Loading reads the
partition from the log start through the backend, applies the records in order
(``group_records.PartitionLoader``) and hands the groups to the coordinator. A backend
that says "not leader" makes the load fail with NOT_COORDINATOR; a later request tries
again, so a missed leadership notice heals itself.

Event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from core.broker.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    LeaderNotAvailableError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from core.broker.group.backend import GroupBackend
from core.broker.group.group import Group
from core.broker.group.records import PartitionLoader
from core.clock import Clock

log = logging.getLogger(__name__)

LoadedFn = Callable[[int, dict[str, Group]], None]


class OffsetsPartitions:
    """Load state of the offsets partitions; ``on_loaded(partition, groups)`` receives
    each partition's groups once its load has finished."""

    def __init__(self, backend: GroupBackend, clock: Clock, on_loaded: LoadedFn) -> None:
        self._backend = backend
        self._clock = clock
        self._on_loaded = on_loaded
        self.loaded: set[int] = set()
        self._loads: dict[int, asyncio.Task[None]] = {}

    def schedule(self, partition: int) -> asyncio.Task[None]:
        """Start loading ``partition`` unless loaded or loading; the task of the load."""
        task = self._loads.get(partition)
        if task is None or (task.done() and partition not in self.loaded):
            task = asyncio.ensure_future(self._load(partition))
            task.add_done_callback(_retrieve_exception)  # callers may have gone away
            self._loads[partition] = task
        return task

    def forget(self, partition: int) -> None:
        """Not ours any more: cancel a load in progress, mark it unknown."""
        task = self._loads.pop(partition, None)
        if task is not None and not task.done():
            task.cancel()
        self.loaded.discard(partition)

    async def load_all(self) -> list[int]:
        """Try every partition; the ones that loaded (this broker leads them)."""
        tasks = [self.schedule(p) for p in range(self._backend.offsets_topic_partitions)]
        await asyncio.gather(*tasks, return_exceptions=True)
        return sorted(self.loaded)

    async def ensure(self, partition: int) -> None:
        """Return once ``partition`` is loaded (loading it if nobody did yet)."""
        if partition in self.loaded:
            return
        task = self.schedule(partition)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # we were cancelled, not the load
            raise NotCoordinatorError(
                f"__consumer_offsets-{partition} moved away while loading"
            ) from None

    def check(self, partition: int) -> None:
        """Synchronously: loaded, or the error a client should see."""
        if partition in self.loaded:
            return
        task = self._loads.get(partition)
        if task is not None and not task.done():
            raise CoordinatorLoadInProgressError(f"loading __consumer_offsets-{partition}")
        raise NotCoordinatorError(f"this broker is not the coordinator of partition {partition}")

    async def _load(self, partition: int) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        loader = PartitionLoader(partition)
        try:
            async for record in self._backend.read_offsets(partition):
                loader.apply(record)
        except (NotLeaderOrFollowerError, UnknownTopicOrPartitionError) as exc:
            # not the leader, or no replica here at all
            raise NotCoordinatorError(
                f"this broker does not lead __consumer_offsets-{partition}"
            ) from exc
        except LeaderNotAvailableError as exc:
            raise CoordinatorNotAvailableError(f"__consumer_offsets-{partition}: {exc}") from exc
        groups = loader.groups(self._clock.now_ms())
        self._on_loaded(partition, groups)
        self.loaded.add(partition)
        log.info(
            "loaded __consumer_offsets-%d: %d groups in %.0f ms (%d records skipped)",
            partition,
            len(groups),
            (loop.time() - started) * 1000,
            loader.skipped,
        )


def _retrieve_exception(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
