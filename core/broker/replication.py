"""Cluster wiring of one broker: replica fetchers, ISR shrink, request forwarding and
controlled shutdown. The same object runs in standalone (a cluster of one, where every
partition is led here, no fetcher ever starts and nothing is forwarded).

- ``attach()`` (after the ReplicaManager exists): ISR changes are written through the
  metadata store (conditional on the zkVersion), liveness comes from the broker
  registrations in the metadata cache, and role changes go to the fetcher manager.
- ``start()``: the ISR shrink check every ``replica.lag.time.max.ms / 2``.
- Forwarding (design.md section 1): a produce, fetch or offsets call for a partition
  led by another broker goes to that broker's internal API as raw bytes; its errors
  come back as our domain errors. A call that finds no leader, or a leader that just
  lost the role, is retried for a short, bounded time while the metadata catches up
  (only failures that happen before anything was appended are retried). A forwarded
  call still in flight when the metadata names a new leader is abandoned and sent to the
  new one (at-least-once, like the retry of a non-idempotent Kafka producer).
- ``stop()``: controlled shutdown first (kafka-internals 3.3): the controller moves the
  leadership of this broker's partitions away (``shutting_down``) and drops it from the
  ISRs, then fetchers stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from core.broker.errors import (
    BrokerNotAvailableError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
)
from core.broker.replica.delayed import abandon
from core.broker.replica.fetch_wire import ReplicaFetchRequest, ReplicaFetchResult
from core.broker.replica.fetcher import ReplicaFetcherManager
from core.broker.types import PartitionOffsets, TopicPartition
from core.storage.config import LogConfig
from core.storage.log import AppendInfo, FetchData

if TYPE_CHECKING:
    from core.broker.broker import Broker

log = logging.getLogger(__name__)

Address = tuple[str, int]
_ROUTE_RETRY_S = 0.1  # between attempts while the metadata catches up
_ROUTE_PATIENCE_S = 10.0  # how long a request waits for a leader at most
_LEADER_WATCH_S = 0.1  # how often a forwarded call checks that its target still leads


class ClusterClient(Protocol):
    """What this module needs from the other brokers (``core.broker.cluster.client``)."""

    async def replica_fetch(self, address: Address, req: ReplicaFetchRequest) -> list[ReplicaFetchResult]: ...
    async def append(self, address: Address, topic: str, partition: int, data: bytes, *,
                     acks: int, timeout_ms: int) -> AppendInfo: ...
    async def fetch(self, address: Address, topic: str, partition: int, offset: int, *,
                    max_bytes: int, max_wait_ms: int) -> tuple[FetchData, PartitionOffsets]: ...
    async def offsets(self, address: Address, topic: str, partition: int) -> PartitionOffsets: ...
    async def controlled_shutdown(self, address: Address, broker_id: int) -> int: ...
    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _RemoteLog:
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class RemoteReplicaView:
    """The leader's offsets for a forwarded fetch, shaped like the parts of a
    ``Partition`` that ``Broker.fetch`` reads."""

    high_watermark: int
    log: _RemoteLog


class ReplicationService:
    """Lifecycle: ``attach()`` once the replica manager exists, ``start()`` once the
    topics are synced, ``await stop()`` before the logs close. Event-loop only."""

    def __init__(self, broker: Broker, client: ClusterClient | None) -> None:
        self.broker = broker
        self.client = client
        self.fetchers: ReplicaFetcherManager | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle ----------------------------------------------------------------------

    def attach(self) -> None:
        b, c = self.broker, self.broker.config
        rm = b._rm
        rm.isr_store = b.store
        rm.is_alive = lambda broker_id: broker_id in b.cache.brokers
        b.controller.unclean_default = LogConfig.from_overrides(
            {}, c.log_defaults).unclean_leader_election_enable
        if self.client is not None:
            self.fetchers = ReplicaFetcherManager(
                b.broker_id, rm, self.client, self.address_of,
                max_wait_ms=c["replica.fetch.wait.max.ms"], max_bytes=c["replica.fetch.max.bytes"],
                response_max_bytes=c["replica.fetch.response.max.bytes"],
                backoff_ms=c["replica.fetch.backoff.ms"])
            rm.role_listeners.append(self.fetchers.on_role_change)

    async def start(self) -> None:
        """Start the ISR shrink check; as controller, elect leaders for partitions left
        without one (a restart of a one-broker cluster, or brokers gone meanwhile)."""
        lag = int(self.broker.config["replica.lag.time.max.ms"])
        self._tasks.append(asyncio.get_running_loop().create_task(self._shrink_loop(lag)))
        b = self.broker
        if b.controller.is_active and await b.controller.reconcile():
            for name in list(b.cache.topics):
                await b._sync_topic(name)

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.controlled_shutdown()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        await self.broker.controller.stop()
        if self.fetchers is not None:
            await self.fetchers.stop()
        if self.client is not None:
            await self.client.close()

    async def _shrink_loop(self, lag_ms: int) -> None:
        while True:
            await asyncio.sleep(max(lag_ms, 2) / 2000)
            try:
                self.broker._rm.maybe_shrink_isrs(lag_ms)
            except Exception:
                log.exception("ISR shrink check failed")

    # --- controlled shutdown ----------------------------------------------------------

    async def controlled_shutdown(self) -> None:
        b = self.broker
        if not b.config["controlled.shutdown.enable"] or len(b.cache.brokers) <= 1:
            return
        deadline = asyncio.get_running_loop().time() + b.config["controlled.shutdown.timeout.ms"] / 1000
        while asyncio.get_running_loop().time() < deadline:
            if not any(p.is_leader and len(p.replicas) > 1 for p in b._rm.partitions.values()):
                return
            try:
                await self._request_shutdown()
            except Exception as exc:  # best effort: a plain shutdown follows
                log.warning("controlled shutdown request failed: %s", exc)
            await asyncio.sleep(0.2)
        log.warning("controlled shutdown: some partitions are still led here; exiting anyway")

    async def _request_shutdown(self) -> None:
        b = self.broker
        if b.controller.is_active:
            await b.controller.controlled_shutdown(b.broker_id)
            return
        controller = await b.store.controller_id()
        address = None if controller is None else self.address_of(controller)
        if address is None or self.client is None:
            return
        await self.client.controlled_shutdown(address, b.broker_id)

    # --- routing ----------------------------------------------------------------------

    def address_of(self, broker_id: int) -> Address | None:
        reg = self.broker.cache.brokers.get(broker_id)
        return None if reg is None else (reg.host, reg.port)

    def _leader_of(self, tp: TopicPartition) -> int:
        meta = self.broker.cache.topic(tp.topic)
        state = None if meta is None else meta.states.get(tp.partition)
        return -1 if state is None else state.leader

    async def _route(self, tp: TopicPartition) -> Address | None:
        """None: lead here. Else the leader's address. Waits (bounded) for a leader."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _ROUTE_PATIENCE_S
        while True:
            p = self.broker._rm.partitions.get(tp)
            if p is not None and p.is_leader:
                return None
            leader = self._leader_of(tp)
            if leader == self.broker.broker_id or self.client is None or not self._clustered():
                return None  # the local path raises its precise error
            address = None if leader < 0 else self.address_of(leader)
            if address is not None:
                return address
            if loop.time() >= deadline:
                raise LeaderNotAvailableError(
                    f"no leader is available for {tp.topic}-{tp.partition} right now")
            await asyncio.sleep(_ROUTE_RETRY_S)

    def _clustered(self) -> bool:
        """Other brokers exist: worth waiting for leadership to settle."""
        return any(b != self.broker.broker_id for b in self.broker.cache.brokers) or \
            any(len(p.replicas) > 1 for p in self.broker._rm.partitions.values())

    async def _with_retries(self, tp: TopicPartition, call):  # noqa: ANN001, ANN202
        """Run ``call(address_or_None)``; retry while leadership is moving (before any
        append happened: NOT_LEADER, no leader, leader unreachable)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _ROUTE_PATIENCE_S
        while True:
            address = await self._route(tp)
            try:
                if address is None:
                    return await call(None)
                return await self._forward(tp, address, call)
            except (NotLeaderOrFollowerError, LeaderNotAvailableError, BrokerNotAvailableError):
                # At-least-once: an acks=all append whose leader moved while it waited is
                # retried too (as a non-idempotent Kafka producer would).
                if loop.time() >= deadline or not self._clustered():
                    raise
                await asyncio.sleep(_ROUTE_RETRY_S)
                await self.broker._sync_topic(tp.topic)

    async def _forward(self, tp: TopicPartition, address: Address, call):  # noqa: ANN001, ANN202
        """``call(address)``, abandoned with NOT_LEADER (so ``_with_retries`` routes it
        again) as soon as the metadata names another leader or the leader's registration
        goes while it is in flight. A leader that hangs (paused, partitioned: its
        connections stay open) would otherwise hold every forwarded request until
        ``replica.socket.timeout.ms``, long after the controller has moved its partitions."""
        leader = self._leader_of(tp)
        task = asyncio.ensure_future(call(address))
        try:
            while True:
                done, _ = await asyncio.wait((task,), timeout=_LEADER_WATCH_S)
                if done:
                    return task.result()
                if self._leader_of(tp) != leader or self.address_of(leader) != address:
                    raise NotLeaderOrFollowerError(
                        f"the leader of {tp.topic}-{tp.partition} changed from broker {leader} "
                        "while the request was in flight")
        finally:
            if not task.done():
                abandon(task)

    async def append(self, tp: TopicPartition, data: bytearray, acks: int, timeout_ms: int) -> AppendInfo:
        rm = self.broker._rm

        async def call(address: Address | None) -> AppendInfo:
            if address is None:
                return await rm.append(tp, data, acks=acks, timeout_ms=timeout_ms)
            assert self.client is not None
            return await self.client.append(address, tp.topic, tp.partition, bytes(data),
                                            acks=acks, timeout_ms=timeout_ms)

        return await self._with_retries(tp, call)

    async def fetch_raw(self, tp: TopicPartition, offset: int, *, max_bytes: int, max_wait_ms: int):  # noqa: ANN201
        rm = self.broker._rm

        async def call(address: Address | None):  # noqa: ANN202
            if address is None:
                return await rm.fetch(tp, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms)
            assert self.client is not None
            data, offs = await self.client.fetch(address, tp.topic, tp.partition, offset,
                                                 max_bytes=max_bytes, max_wait_ms=max_wait_ms)
            return data, RemoteReplicaView(offs.high_watermark,
                                           _RemoteLog(offs.log_start_offset, offs.log_end_offset))

        return await self._with_retries(tp, call)

    async def partition_offsets(self, tp: TopicPartition) -> PartitionOffsets:
        rm = self.broker._rm

        async def call(address: Address | None) -> PartitionOffsets:
            if address is None:
                return rm.leader_partition(tp).offsets()
            assert self.client is not None
            return await self.client.offsets(address, tp.topic, tp.partition)

        return await self._with_retries(tp, call)
