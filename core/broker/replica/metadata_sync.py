"""Bringing this broker in line with the metadata store: the cache and the local replicas.

Kafka's brokers apply the controller's LeaderAndIsr requests; franz brokers read the
store when it announces a change (``MetadataEvent``) and apply what they find: the
topic's assignment, partition states (leader, epoch, ISR) and configs go to the
``MetadataCache``, and every partition with a replica here takes its role in the
``ReplicaManager`` (created, made leader or follower, or stopped and deleted). Syncs of
one topic are serialized, so an older read never overwrites a newer one. Event-loop only.

A partition this broker leads whose local log is offline (it could not be loaded) is
cached as Kafka shows an offline partition: no leader (-1) and an empty ISR, so
describing it (the v3 partition API and what reads it) and the active
controller's offline-partitions gauge tell the truth. Only the cache is changed, never
the store: the replica keeps its role and answers KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from core.broker.metadata.cache import MetadataCache, TopicMetadata
from core.broker.metadata.store import MetadataStore, PartitionState
from core.broker.replica.manager import ReplicaManager
from core.broker.types import TopicPartition
from core.storage.config import LogConfig

#: partitions whose logs a sync opens or creates between two yields to the event loop
#: (~1 ms each when created: a slice keeps other requests' waits in the tens of ms)
_PARTITIONS_PER_SLICE = 32

def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a shared sync's exception as seen (its callers re-raise it themselves)."""
    if not future.cancelled():
        future.exception()


class MetadataSync:
    """``log_defaults``: the broker's log properties (the defaults of topic configs)."""

    def __init__(self, store: MetadataStore, cache: MetadataCache, replicas: ReplicaManager,
                 log_defaults: Mapping[str, str]) -> None:
        self._store = store
        self._cache = cache
        self._replicas = replicas
        self._log_defaults = log_defaults
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, asyncio.Future[TopicMetadata | None]] = {}

    async def refresh_brokers(self) -> None:
        regs = await self._store.live_brokers()
        self._cache.set_brokers({r.broker_id: r for r in regs})

    async def sync_all(self) -> None:
        """The live brokers and every topic (at start, and after a new ZooKeeper
        session, where it gives back leadership fenced meanwhile)."""
        await self.refresh_brokers()
        for name in await self._store.topic_names():
            await self.sync_topic(name)

    async def sync_cached(self) -> None:
        """Every topic the cache knows (after the controller elected leaders)."""
        for name in list(self._cache.topics):
            await self.sync_topic(name)

    async def sync_topic(self, name: str) -> TopicMetadata | None:
        """Bring the cache and the local replicas of ``name`` in line with the store.

        Calls are coalesced: a call made while a sync of ``name`` waits for the topic's
        lock (not started reading yet) shares that sync, whose reads come after the call
        and so see what it was made for. A controller changing 100 partition states of a
        topic announces 100 changes; they cost two or three syncs, not 100 (each reads
        every partition state: a restarted broker regained leadership of ~1,000
        partitions at ~9 a second before)."""
        while (waiting := self._waiting.get(name)) is not None:
            try:
                return await asyncio.shield(waiting)
            except asyncio.CancelledError:
                if not waiting.cancelled():
                    raise  # this caller was cancelled
                # the sync it shared was cancelled: look again
        shared: asyncio.Future[TopicMetadata | None] = asyncio.get_running_loop().create_future()
        shared.add_done_callback(_retrieve)
        self._waiting[name] = shared
        try:
            async with self._locks.setdefault(name, asyncio.Lock()):
                del self._waiting[name]  # from here on, a new call needs a new sync
                result = await self._sync_topic(name)
        except BaseException as exc:
            if self._waiting.get(name) is shared:
                del self._waiting[name]
            if not shared.done():
                if isinstance(exc, asyncio.CancelledError):
                    shared.cancel()
                else:
                    shared.set_exception(exc)
            raise
        shared.set_result(result)
        return result

    async def _sync_topic(self, name: str) -> TopicMetadata | None:
        """``sync_topic``'s work, the topic's lock held."""
        rm = self._replicas
        assignment = await self._store.get_topic(name)
        if assignment is None:
            self._cache.remove_topic(name)
            for tp in [tp for tp in rm.partitions if tp.topic == name]:
                rm.stop_replica(tp, delete=True)
            return None
        configs = await self._store.get_topic_configs(name)
        states = await self._store.get_partition_states(name)
        log_config = LogConfig.from_overrides(configs, self._log_defaults)
        rm.update_config(name, log_config)
        for i, (p, replicas) in enumerate(assignment.partitions.items()):
            state = states.get(p)
            if state is not None:
                rm.apply_partition_state(TopicPartition(name, p), state, replicas, log_config)
            if i % _PARTITIONS_PER_SLICE == _PARTITIONS_PER_SLICE - 1:
                await asyncio.sleep(0)  # thousands of new logs must not stall the loop
        meta = TopicMetadata(assignment, self._offline_view(name, states), configs, log_config)
        self._cache.put_topic(name, meta)
        return meta

    def _offline_view(self, name: str, states: dict[int, PartitionState]) -> dict[int, PartitionState]:
        """``states`` with the partitions led here whose log is offline shown leaderless."""
        rm = self._replicas
        out = states
        for p, state in states.items():
            replica = rm.partitions.get(TopicPartition(name, p))
            if replica is not None and replica.offline and state.leader == rm.broker_id:
                if out is states:
                    out = dict(states)
                out[p] = dataclasses.replace(state, leader=-1, isr=())
        return out

    def delete_stray_logs(self) -> None:
        """Delete local logs no assignment gives this broker (see ReplicaManager)."""
        self._replicas.delete_stray_logs({n: m.assignment.partitions
                                          for n, m in self._cache.topics.items()})
