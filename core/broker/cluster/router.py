"""Where a partition call is served: by this broker's replica, or forwarded to the leader.

design.md section 1: any broker accepts any request. A produce, fetch or offsets call for
a partition led by another broker goes to that broker's internal API as raw bytes
(``ForwardingClient``, implemented by ``core.broker.cluster.client``); its errors come
back as our domain errors. The router holds the one leader-wait and retry policy:

- a call that finds no leader, or a leader that just lost the role (NOT_LEADER, no
  leader, leader unreachable), is retried for at most ``ROUTE_PATIENCE_S`` while the
  metadata catches up, re-reading the topic's metadata (``resync_topic``) between tries;
- a forwarded call still in flight when the metadata names a new leader, or when the
  leader's registration goes, is abandoned and sent to the new one (at-least-once, like
  the retry of a non-idempotent Kafka producer; idempotent forwarding is issue 15).

In standalone (a cluster of one) every partition is led here and nothing is forwarded.
Event-loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from core.broker.cluster.topic_stats import BrokerTopicStats
from core.broker.errors import (
    BrokerNotAvailableError,
    CoordinatorLoadInProgressError,
    LeaderNotAvailableError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
)
from core.broker.metadata.cache import MetadataCache
from core.broker.replica.delayed import abandon
from core.broker.replica.manager import ReplicaManager
from core.broker.types import PartitionOffsets, TopicPartition
from core.errors import FranzError
from core.storage.log import AppendInfo, FetchData

Address = tuple[str, int]
T = TypeVar("T")

ROUTE_RETRY_S = 0.1  # between attempts while the metadata catches up
ROUTE_PATIENCE_S = 10.0  # how long a request waits for a leader at most
LEADER_WATCH_S = 0.1  # how often a forwarded call checks that its target still leads


class ForwardingClient(Protocol):
    """The leader's internal API, as the router forwards to it."""

    async def append(self, address: Address, topic: str, partition: int, data: bytes, *,
                     acks: int, timeout_ms: int) -> AppendInfo: ...
    async def fetch(self, address: Address, topic: str, partition: int, offset: int, *,
                    max_bytes: int, max_wait_ms: int) -> tuple[FetchData, PartitionOffsets]: ...
    async def offsets(self, address: Address, topic: str, partition: int) -> PartitionOffsets: ...


@dataclass(frozen=True, slots=True)
class FetchedData:
    """A fetch's batches (``FetchData``) with the leader's offsets at the time of the read,
    whichever broker served it."""

    data: FetchData
    offsets: PartitionOffsets


class Router:
    """Serve a partition call locally or forward it to the leader. ``client`` None: a
    broker without peers (nothing is ever forwarded). Client traffic served through it
    is counted in ``stats``."""

    def __init__(self, broker_id: int, replicas: ReplicaManager, cache: MetadataCache,
                 client: ForwardingClient | None, *, stats: BrokerTopicStats,
                 resync_topic: Callable[[str], Awaitable[object]]) -> None:
        self.broker_id = broker_id
        self._replicas = replicas
        self._cache = cache
        self._client = client
        self.stats = stats
        self._resync_topic = resync_topic

    # --- the calls --------------------------------------------------------------------

    async def append(self, tp: TopicPartition, data: bytearray, *, acks: int,
                     timeout_ms: int) -> AppendInfo:
        async def call(address: Address | None) -> AppendInfo:
            if address is None:
                return await self._replicas.append(tp, data, acks=acks, timeout_ms=timeout_ms)
            assert self._client is not None
            return await self._client.append(address, tp.topic, tp.partition, bytes(data),
                                             acks=acks, timeout_ms=timeout_ms)

        info = await self.call_leader(tp, call)
        self.stats.record_append(tp.topic, records=info.num_records, size=len(data))
        return info

    async def append_many(self, items: Sequence[tuple[TopicPartition, bytearray]], *,
                          acks: int, timeout_ms: int) -> list[AppendInfo | FranzError]:
        """``append`` of several partitions (one produce request's batches): those led
        here in one synchronous pass (``ReplicaManager.append_many``: no event-loop step
        per partition), the others through ``append`` (forwarded, retried) concurrently.
        One result per item: an AppendInfo, or the FranzError of that partition alone."""
        local: list[int] = []
        out: list[AppendInfo | FranzError | None] = [None] * len(items)
        remote: list[int] = []
        for i, (tp, _data) in enumerate(items):
            p = self._replicas.partitions.get(tp)
            (local if p is not None and p.is_leader else remote).append(i)
        if local:
            done = await self._replicas.append_many(
                [items[i] for i in local], acks=acks, timeout_ms=timeout_ms)
            for i, result in zip(local, done, strict=True):
                if isinstance(result, NotLeaderOrFollowerError):
                    remote.append(i)  # lost the lead meanwhile: routed as any other
                    continue
                out[i] = result
                if not isinstance(result, FranzError):
                    tp, data = items[i]
                    self.stats.record_append(tp.topic, records=result.num_records,
                                             size=len(data))
        if remote:
            routed = await asyncio.gather(
                *(self.append(items[i][0], items[i][1], acks=acks, timeout_ms=timeout_ms)
                  for i in remote), return_exceptions=True)
            for i, got in zip(remote, routed, strict=True):
                if isinstance(got, BaseException) and not isinstance(got, FranzError):
                    raise got
                out[i] = got
        return out  # type: ignore[return-value]

    async def fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int,
                    max_wait_ms: int, max_records: int | None = None) -> FetchedData:
        """Whole batches from ``offset`` below the HW (waiting up to ``max_wait_ms`` for
        some), with the leader's offsets. ``max_records`` bounds a local read only (a
        forwarded one reads up to ``max_bytes``)."""
        async def call(address: Address | None) -> FetchedData:
            if address is None:
                data, p = await self._replicas.fetch(tp, offset, max_bytes=max_bytes,
                                                     max_wait_ms=max_wait_ms,
                                                     max_records=max_records)
                return FetchedData(data, p.offsets())
            assert self._client is not None
            data, offs = await self._client.fetch(address, tp.topic, tp.partition, offset,
                                                  max_bytes=max_bytes, max_wait_ms=max_wait_ms)
            return FetchedData(data, offs)

        fetched = await self.call_leader(tp, call)
        self.stats.record_fetch(tp.topic, fetched.data, offset=offset,
                                high_watermark=fetched.offsets.high_watermark)
        return fetched

    async def partition_offsets(self, tp: TopicPartition) -> PartitionOffsets:
        async def call(address: Address | None) -> PartitionOffsets:
            if address is None:
                return await self._replicas.client_offsets(tp)
            assert self._client is not None
            return await self._client.offsets(address, tp.topic, tp.partition)

        return await self.call_leader(tp, call)

    # --- the policy -------------------------------------------------------------------

    async def route(self, tp: TopicPartition) -> Address | None:
        """None: serve here. Else the leader's address. Waits (bounded) for a leader."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ROUTE_PATIENCE_S
        while True:
            p = self._replicas.partitions.get(tp)
            if p is not None and p.is_leader:
                return None
            leader = self._cache.leader_of(*tp)
            if leader == self.broker_id or self._client is None or not self._clustered():
                return None  # the local path raises its precise error
            address = None if leader < 0 else self._cache.address_of(leader)
            if address is not None:
                return address
            if loop.time() >= deadline:
                raise LeaderNotAvailableError(
                    f"no leader is available for {tp.topic}-{tp.partition} right now")
            await asyncio.sleep(ROUTE_RETRY_S)

    def _clustered(self) -> bool:
        """Other brokers exist: worth waiting for leadership to settle."""
        return any(b != self.broker_id for b in self._cache.brokers) or \
            any(len(p.replicas) > 1 for p in self._replicas.partitions.values())

    async def call_leader(self, tp: TopicPartition,
                            call: Callable[[Address | None], Awaitable[T]]) -> T:
        """Run ``call(address_or_None)`` at the leader of ``tp`` (None: here); retry while
        leadership is moving. A forwarded call is abandoned as soon as the leader changes
        (``_forward``). Also the way to any coordinator that lives at a partition's leader
        (``core.broker.idempotency.router``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ROUTE_PATIENCE_S
        while True:
            address = await self.route(tp)
            try:
                if address is None:
                    return await call(None)
                return await self._forward(tp, address, call)
            except (NotLeaderOrFollowerError, LeaderNotAvailableError, BrokerNotAvailableError,
                    NotCoordinatorError, CoordinatorLoadInProgressError):
                # A coordinator at the leader answers "not coordinator" while its
                # partition's leadership moves, or "loading" while it reads the log.
                # At-least-once: an acks=all append whose leader moved while it waited is
                # retried too (as a non-idempotent Kafka producer would).
                if loop.time() >= deadline or not self._clustered():
                    raise
                await asyncio.sleep(ROUTE_RETRY_S)
                await self._resync_topic(tp.topic)

    async def _forward(self, tp: TopicPartition, address: Address,
                       call: Callable[[Address | None], Awaitable[T]]) -> T:
        """``call(address)``, abandoned with NOT_LEADER (so ``call_leader`` routes it
        again) as soon as the metadata names another leader or the leader's registration
        goes while it is in flight. A leader that hangs (paused, partitioned: its
        connections stay open) would otherwise hold every forwarded request until
        ``replica.socket.timeout.ms``, long after the controller has moved its partitions."""
        leader = self._cache.leader_of(*tp)
        task = asyncio.ensure_future(call(address))
        try:
            while True:
                done, _ = await asyncio.wait((task,), timeout=LEADER_WATCH_S)
                if done:
                    return task.result()
                if self._cache.leader_of(*tp) != leader or \
                        self._cache.address_of(leader) != address:
                    raise NotLeaderOrFollowerError(
                        f"the leader of {tp.topic}-{tp.partition} changed from broker {leader} "
                        "while the request was in flight")
        finally:
            if not task.done():
                abandon(task)
