"""The ZooKeeper metadata store: ``MetadataStore`` on Kafka's znode layout, for a cluster.

Znodes and their JSON are in ``core.broker.metadata.zk.paths`` (one object per znode, as Kafka's
``ZkData``). ``connect`` is ``host:port[,host:port...][/chroot]``; ``start()`` creates the
chroot if missing (through a short chroot-less session, as Kafka does), then Kafka's
persistent parents under it.

``ZkMetadataStore`` is the lifecycle (``start``, ``close``) and the listeners, over one
mixin per concept, each in its own module with what it writes and how:

- ``base``: the state every part shares (client, lock, view of the cluster, listeners)
  and the plumbing that runs ZooKeeper calls off the loop;
- ``election``: the controller election, the controller-epoch fence on every topic,
  config and partition-state write, and the admin request znodes;
- ``brokers``: the cluster id, broker registrations, and the session handling that
  registers them again on a new session;
- ``topics``: topics, their assignments, configs and partition states.

Events: the same kinds and ``extra`` as the embedded store (``core.broker.metadata.events``).
A write made through this store is announced on the event loop right after it committed,
before the call returns. Changes made by others arrive through kazoo watches and are
re-read and compared with the store's view of the cluster (``core.broker.metadata.zk.watches``).
Writes and re-reads take the same lock, and ZooKeeper answers one session in order, so a
re-read never sees state older than a write it follows: no change is announced twice. As
with any ZooKeeper watch, changes in quick succession may be seen as one (a re-read sees
the latest state); listeners should re-read what an event names rather than replay events.

Errors: NoNode, NodeExists and BadVersion become ``UnknownTopicError``/
``UnknownPartitionError``, ``TopicAlreadyExistsError`` and ``BadVersionError`` here, where
they mean that; connection loss, session expiry, timeouts and anything unexpected become
``MetadataStoreError`` (retriable) in ``core.broker.metadata.zk.client``, so callers handle one
class for both backends. Every ZooKeeper call this store makes is bounded by the session
timeout and runs off the loop through ``zk_client.call``; the watch recipes read on
kazoo's own threads.
Lifecycle: ``start()``, calls from the event loop, ``close()`` (ends the session, so the
ephemeral nodes go at once).
"""

from __future__ import annotations

import asyncio
import logging

from core.broker.metadata.store import Listener
from core.broker.metadata.zk.brokers import ZkBrokers
from core.broker.metadata.zk.client import connect, stop_client
from core.broker.metadata.zk.producer_ids import ZkProducerIds
from core.broker.metadata.zk.topics import ZkTopics
from core.storage.blocking import run_blocking

log = logging.getLogger(__name__)


class ZkMetadataStore(ZkBrokers, ZkTopics, ZkProducerIds):
    """``MetadataStore`` on ZooKeeper through kazoo, for franz in a cluster.

    All public methods are coroutines for the event loop; ZooKeeper calls run on the
    blocking-work pool. Listeners are called on the event loop (see the module docstring
    for which events and when). Reads of an unknown topic return empty results; writes to
    one raise ``UnknownTopicError``. Not for use from several event loops.
    """

    # The constructor, ``(connect, *, clock, session_timeout_s=18.0)``, is the mixins': each
    # sets up its own state, ``ZkStoreBase`` the shared one.

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._zk is not None:
            raise RuntimeError("ZkMetadataStore already started")
        loop = asyncio.get_running_loop()
        zk = await connect(self._hosts, self._chroot, timeout_s=self._timeout_s,
                           listener=self._on_session_state)
        log.info("connected to ZooKeeper %s%s (session 0x%x)", self._hosts, self._chroot,
                 zk.client_id[0])
        self._zk = zk
        self._view.attach(zk, loop)
        try:
            async with self._lock:
                await self._view.load()
        except BaseException:
            await self.close()
            raise
        self._view.arm_all()

    async def close(self) -> None:
        zk, self._zk = self._zk, None
        refresher = self._view.detach()
        tasks = [*self._tasks, *([refresher] if refresher else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        if zk is not None:
            await run_blocking(stop_client, zk.kazoo)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.add(listener)

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners.remove(listener)
