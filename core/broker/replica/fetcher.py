"""Follower side of replication: one fetcher per source (leader) broker.

``ReplicaFetcherManager`` hears of role changes from the ``ReplicaManager`` (which owns
it): a
partition that becomes a follower of broker L is handed to L's fetcher (and taken away
from any other); one that becomes leader, goes offline or is stopped is removed.

Each ``ReplicaFetcher`` loops: ONE long-poll request to its source broker covering all
its partitions (fetch offset = own LEO, the current leader epoch, and the epoch of the
last fetched batch), then per partition of the answer (kafka-internals 2.2, 2.5):

- records: appended as they are (``append_as_follower``; offsets and epochs unchanged),
  then follower HW = min(leader HW, own LEO) and the log start follows the leader's
  (written to log-start-offset-checkpoint before the next fetch reports it: the leader's
  DeleteRecords waits for the followers' log starts);
- ``diverging_epoch`` (E, O): truncate to min(O, own end offset of E) when this replica
  knows E, else to its own end of the largest epoch below E (the next fetch iterates);
  only when the leader knows no epoch at all does it fall back to the HW (as Kafka);
- OFFSET_OUT_OF_RANGE: own LEO past the leader's (after an unclean election) -> truncate
  to the leader's LEO; below the leader's log start -> restart empty at the log start;
- FENCED / UNKNOWN_LEADER_EPOCH, NOT_LEADER: wait for the metadata (ZooKeeper watches) to
  move the partition; the fetcher backs off a little.

Transport errors back off ``replica.fetch.backoff.ms`` and retry. Event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from core.broker.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from core.broker.replica.fetch_wire import (
    ReplicaFetchPartition,
    ReplicaFetchRequest,
    ReplicaFetchResult,
)
from core.broker.replica.partition import Partition
from core.broker.types import TopicPartition
from core.errors import FranzError
from core.storage.errors import OffsetOutOfRangeError

log = logging.getLogger(__name__)

Address = tuple[str, int]

_EPOCH_ERRORS = {FencedLeaderEpochError.error_code, UnknownLeaderEpochError.error_code,
                 NotLeaderOrFollowerError.error_code}


class ReplicaFetchClient(Protocol):
    async def replica_fetch(self, address: Address, req: ReplicaFetchRequest) -> list[ReplicaFetchResult]: ...


class ReplicaFetcherManager:
    """Owns the fetchers of this broker. ``partitions`` is the replica manager's live map
    of hosted replicas. Lifecycle: role changes arrive through ``on_role_change``;
    ``await stop()`` once."""

    def __init__(self, broker_id: int, partitions: Mapping[TopicPartition, Partition],
                 client: ReplicaFetchClient,
                 address_of: Callable[[int], Address | None], *, max_wait_ms: int = 500,
                 max_bytes: int = 1048576, response_max_bytes: int = 10485760,
                 backoff_ms: int = 1000,
                 write_log_starts: Callable[[], Awaitable[None]] | None = None) -> None:
        self.broker_id = broker_id
        self.partitions = partitions
        self.client = client
        self.address_of = address_of
        self.max_wait_ms, self.max_bytes = max_wait_ms, max_bytes
        self.response_max_bytes, self.backoff_ms = response_max_bytes, backoff_ms
        # makes the log starts durable (log-start-offset-checkpoint); awaited after a round
        # that moved one, so a follower reports a log start only once it survives a crash
        self.write_log_starts = write_log_starts
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._stopped = False

    def on_role_change(self, p: Partition) -> None:
        if self._stopped:
            return
        tp = p.tp
        hosted = self.partitions.get(tp) is p
        source = (p.leader_id if hosted and not p.is_leader and p.leader_id >= 0
                  and not p.offline else None)
        for sid, fetcher in list(self.fetchers.items()):
            if sid != source:
                fetcher.remove(tp)
        if source is not None:
            target = self.fetchers.get(source)
            if target is None:
                target = self.fetchers[source] = ReplicaFetcher(self, source)
            target.add(tp)

    def source_of(self, tp: TopicPartition) -> int | None:
        return next((sid for sid, f in self.fetchers.items() if tp in f.partitions), None)

    async def stop(self) -> None:
        self._stopped = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for f in fetchers:
            await f.stop()


class ReplicaFetcher:
    """Fetches every partition this broker follows from one source broker."""

    def __init__(self, manager: ReplicaFetcherManager, source: int) -> None:
        self.m = manager
        self.source = source
        self.partitions: set[TopicPartition] = set()
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add(self, tp: TopicPartition) -> None:
        if tp not in self.partitions:
            self.partitions.add(tp)
            log.info("fetcher for broker %d: now fetching %s-%d", self.source, *tp)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        if tp in self.partitions:
            self.partitions.discard(tp)
            log.info("fetcher for broker %d: stopped fetching %s-%d", self.source, *tp)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

    async def _run(self) -> None:
        while True:
            try:
                backoff = await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher for broker %d failed", self.source)
                backoff = self.m.backoff_ms
            if backoff:
                await asyncio.sleep(backoff / 1000)

    async def _fetch_once(self) -> int:
        """One round; returns how long to back off (ms) before the next."""
        parts = self._fetchable()
        if not parts:
            self._wake.clear()
            await self._wake.wait()
            return 0
        address = self.m.address_of(self.source)
        if address is None:
            return self.m.backoff_ms
        req = ReplicaFetchRequest(self.m.broker_id, self.m.max_wait_ms, self.m.response_max_bytes,
                                  tuple(ReplicaFetchPartition(
                                      tp.topic, tp.partition, p.log.log_end_offset, p.leader_epoch,
                                      p.log.leader_epoch_cache.latest_epoch, self.m.max_bytes,
                                      p.log.log_start_offset)
                                      for tp, p in parts))
        epochs = {tp: p.leader_epoch for tp, p in parts}
        try:
            results = await self.m.client.replica_fetch(address, req)
        except FranzError as exc:
            log.warning("fetch from broker %d failed: %s", self.source, exc)
            return self.m.backoff_ms
        backoff = 0
        starts_moved = False
        for r in results:
            tp = TopicPartition(r.topic, r.partition)
            p = self.m.partitions.get(tp)
            if p is None or p.is_leader or p.leader_id != self.source or \
                    p.leader_epoch != epochs.get(tp) or tp not in self.partitions:
                continue  # the partition moved while the fetch was in flight
            start = p.log.log_start_offset
            if not self._apply(p, r):
                backoff = min(self.m.backoff_ms, 200)
            starts_moved = starts_moved or p.log.log_start_offset != start
        if starts_moved and self.m.write_log_starts is not None:
            await self.m.write_log_starts()
        return backoff

    def _fetchable(self) -> list[tuple[TopicPartition, Partition]]:
        out = []
        for tp in sorted(self.partitions):
            p = self.m.partitions.get(tp)
            if p is not None and not p.is_leader and p.leader_id == self.source \
                    and not p.offline:
                out.append((tp, p))
        return out

    def _apply(self, p: Partition, r: ReplicaFetchResult) -> bool:
        """Apply one partition's answer; False when it calls for a back-off."""
        if r.error_code in _EPOCH_ERRORS:
            log.debug("%s-%d: fetch from %d answered error %d", *p.tp, self.source, r.error_code)
            return False
        if r.error_code == OffsetOutOfRangeError.error_code:
            self._out_of_range(p, r)
            return True
        if r.error_code:
            log.warning("%s-%d: fetch from broker %d answered error %d", *p.tp, self.source,
                        r.error_code)
            return False
        if r.diverging_epoch is not None:
            self._truncate_diverging(p, *r.diverging_epoch)
            return True
        p.append_as_follower(r.records, leader_hw=r.high_watermark,
                             leader_log_start=r.log_start_offset)
        return True

    def _out_of_range(self, p: Partition, r: ReplicaFetchResult) -> None:
        leo = p.log.log_end_offset
        if leo > r.log_end_offset >= 0:
            log.warning("%s-%d: log end %d is past the leader's %d; truncating", *p.tp, leo,
                        r.log_end_offset)
            p.truncate_to(r.log_end_offset)
        elif leo < r.log_start_offset:
            log.warning("%s-%d: log end %d is below the leader's log start %d; restarting there",
                        *p.tp, leo, r.log_start_offset)
            p.log.truncate_fully_and_start_at(r.log_start_offset)
            p.high_watermark = r.log_start_offset

    def _truncate_diverging(self, p: Partition, leader_epoch: int, leader_end: int) -> None:
        to = truncation_offset(p, leader_epoch, leader_end)
        if to < p.log.log_end_offset:
            log.info("%s-%d: diverging at leader epoch %d (leader end %d): truncating %d -> %d",
                     *p.tp, leader_epoch, leader_end, p.log.log_end_offset, to)
            p.truncate_to(to)
        else:  # nothing to cut, but epochs that start at the end (an empty term) must go
            p.log.leader_epoch_cache.truncate_from_end(to)


def truncation_offset(p: Partition, leader_epoch: int, leader_end: int) -> int:
    """Where a follower truncates on DivergingEpoch (KIP-279 rules; kafka-internals 2.5)."""
    leo = p.log.log_end_offset
    if leader_end < 0:
        return min(p.high_watermark, leo)  # the leader knows no epoch: Kafka's fallback
    if leader_epoch < 0:
        return min(leader_end, leo)
    own_epoch, own_end = p.log.leader_epoch_cache.end_offset_for(leader_epoch, leo)
    if own_end < 0:  # every epoch known here is older than the leader's: as Kafka, keep
        return min(leader_end, leo)  # what the leader has too
    if own_epoch == leader_epoch:
        return min(leader_end, own_end, leo)
    return min(own_end, leo)
