"""The ZooKeeper metadata store: ``MetadataStore`` on Kafka's znode layout, for a cluster.

Znodes and their JSON are in ``core.broker.metadata.zk.paths`` (one object per znode, as Kafka's
``ZkData``). ``connect`` is ``host:port[,host:port...][/chroot]``; ``start()`` creates the
chroot if missing (through a short chroot-less session, as Kafka does), then Kafka's
persistent parents under it.

Writes, each one ZooKeeper multi-op unless said otherwise:

- ``register_broker``: ephemeral ``/brokers/ids/<id>``; the broker epoch is its czxid. A
  registration of the same id left by another session (an unclean restart whose session
  has not expired yet) is replaced, and the controller role it held released with it, as
  the embedded store does.
- ``try_elect_controller`` (Kafka's ``registerControllerAndIncrementControllerEpoch``):
  read ``/controller``; if absent, read ``/controller_epoch`` (created as ``0``) and in
  one multi-op check the candidate's registration, create ephemeral ``/controller`` and
  set ``/controller_epoch`` to epoch+1 at the zkVersion read. NODEEXISTS/BADVERSION: lost.
- Epoch fencing: the winning store keeps (epoch, zkVersion of ``/controller_epoch``) and
  starts every topic, config and partition-state multi-op with a ``check`` of that
  zkVersion, so once another broker has been elected these writes fail with
  ``NotControllerError`` (Kafka's ControllerMovedException), also after this store's
  session expired. The fence is dropped only when this store itself releases the role
  (``unregister_broker``, or a registration replaced) or when a later
  ``try_elect_controller`` fails while another session holds ``/controller``; from then
  on the store's writes go unchecked, as a plain broker's.
- ``create_topic``: topic znode, ``partitions`` parents, the given states and the config
  znode together. ``update_partition_state``: ``set_data`` at the expected zkVersion. A
  partition whose state was never written counts as version 0, as in the embedded store:
  its first write creates the state znode and sets it once in the same multi-op, so it
  comes back as version 1 on both backends.
- ``set_topic_configs``: ``/config/topics/<t>`` plus a sequential
  ``/config/changes/config_change_`` notification (not purged here; Kafka purges them
  after 15 minutes).
- ``delete_topic``: writes ``/admin/delete_topics/<t>`` (the durable request), then
  deletes the topic's znodes, its config and the request in one multi-op. Kafka's
  controller deletes only once every replica stopped; here the controller (the only
  caller) deletes at once and brokers drop their replicas on ``TOPIC_DELETED``. A request
  left behind by a crash between the two steps is completed by the next
  ``delete_topic`` of that name; nothing watches ``/admin/delete_topics``.

Events: the same kinds and ``extra`` as the embedded store (``core.broker.metadata.events``).
A write made through this store is announced on the event loop right after it committed,
before the call returns. Changes made by others arrive through kazoo watches and are
re-read and compared with the store's view of the cluster (``core.broker.metadata.zk.watches``).
Writes and re-reads take the same lock, and ZooKeeper answers one session in order, so a
re-read never sees state older than a write it follows: no change is announced twice. As
with any ZooKeeper watch, changes in quick succession may be seen as one (a re-read sees
the latest state); listeners should re-read what an event names rather than replay events.

Sessions: on expiry (kazoo LOST) ZooKeeper has dropped the ephemeral nodes; when kazoo is
connected on a new session, the brokers registered through this store are registered
again (new epoch) and ``BROKERS_CHANGED`` announced - unless another session registered
the id meanwhile (a new incarnation of the broker): that is logged as an error and left
alone, so two processes never fight over an id. The controller role is not taken back:
the broker must run for it again (``CONTROLLER_CHANGED`` tells it the role is free).

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
import dataclasses
import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.protocol.states import KazooState, ZnodeStat

from core.broker.errors import TopicAlreadyExistsError, UnknownPartitionError, UnknownTopicError
from core.broker.metadata.events import (
    Listeners,
    brokers_event,
    config_changed_event,
    controller_event,
    state_event,
    topic_changed_event,
    topic_created_event,
    topic_deleted_event,
)
from core.broker.metadata.rules import check_states_within, new_cluster_id, partitions_to_add
from core.broker.metadata.store import (
    BadVersionError,
    BrokerIdInUseError,
    BrokerRegistration,
    EventKind,
    Listener,
    MetadataEvent,
    MetadataStoreError,
    PartitionState,
    TopicAssignment,
)
from core.broker.metadata.zk.client import (
    Fence,
    OpFailed,
    Txn,
    ZkClient,
    call,
    connect,
    split_connect,
    stop_client,
)
from core.broker.metadata.zk.paths import (
    TOPIC_CONFIG_ENTITY,
    AdminRequestZNode,
    BrokerIdsZNode,
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    MalformedZNodeError,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
)
from core.broker.metadata.zk.watches import REFRESH_RETRY_S, ZkClusterView
from core.clock import Clock
from core.storage.blocking import run_blocking

log = logging.getLogger(__name__)

T = TypeVar("T")

_RACE_RETRIES = 5  # re-reads after a lost optimistic race before giving up


class ZkMetadataStore:
    """``MetadataStore`` on ZooKeeper through kazoo, for franz in a cluster.

    All public methods are coroutines for the event loop; ZooKeeper calls run on the
    blocking-work pool. Listeners are called on the event loop (see the module docstring
    for which events and when). Reads of an unknown topic return empty results; writes to
    one raise ``UnknownTopicError``. Not for use from several event loops.
    """

    def __init__(self, connect: str, *, clock: Clock, session_timeout_s: float = 18.0) -> None:
        self._hosts, self._chroot = split_connect(connect)
        self._clock = clock
        self._timeout_s = session_timeout_s
        self._zk: ZkClient | None = None
        self._listeners = Listeners(log)
        self._cluster_id: str | None = None
        self._fence: Fence | None = None
        self._registrations: dict[int, BrokerRegistration] = {}
        self._session_lost = False  # set on a kazoo thread, read there
        self._lock = asyncio.Lock()  # one write or re-read at a time
        # The store's view of the cluster, compared with re-reads to find what changed.
        self._view = ZkClusterView(lock=self._lock, emit=self._emit)
        self._tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle ---------------------------------------------------------------------

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

    # --- cluster and brokers -----------------------------------------------------------

    async def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = await self._call(self._get_or_create_cluster_id)
        return self._cluster_id

    async def register_broker(self, reg: BrokerRegistration) -> BrokerRegistration:
        reg = dataclasses.replace(reg, timestamp_ms=reg.timestamp_ms or self._clock.now_ms())
        async with self._lock:
            stored, released = await self._call(self._register_broker, reg)
            assert stored is not None  # replace=True always registers
            self._registrations[reg.broker_id] = reg
            self._view.broker_written(reg.broker_id, stored.epoch)
            self._emit(brokers_event(reg.broker_id, registered=True))
            self._maybe_released(released)
        return stored

    async def unregister_broker(self, broker_id: int) -> None:
        self._registrations.pop(broker_id, None)
        async with self._lock:
            removed, released = await self._call(self._unregister_broker, broker_id)
            if removed:
                self._view.broker_removed(broker_id)
                self._emit(brokers_event(broker_id, registered=False))
            self._maybe_released(released)

    async def live_brokers(self) -> list[BrokerRegistration]:
        return await self._call(self._live_brokers)

    # --- controller --------------------------------------------------------------------

    async def try_elect_controller(self, broker_id: int) -> int | None:
        """Take the controller role if nobody holds it. Only a registered broker can win.
        Returns the new controller epoch, or None."""
        async with self._lock:
            epoch = await self._call(self._try_elect, broker_id)
            if epoch is not None:
                log.info("broker %d elected controller (epoch %d)", broker_id, epoch)
                self._view.controller_written(broker_id)
                self._emit(controller_event(broker_id, epoch))
        return epoch

    async def controller_id(self) -> int | None:
        return await self._call(self._controller_id)

    # --- topics ------------------------------------------------------------------------

    async def create_topic(
        self, assignment: TopicAssignment, configs: Mapping[str, str],
        states: Mapping[int, PartitionState],
    ) -> None:
        check_states_within(states, assignment.partitions, what="create_topic")
        async with self._lock:
            await self._call(self._create_topic, assignment, dict(configs), dict(states))
            self._view.topic_written(assignment, states)
            self._emit(topic_created_event(assignment.name, len(assignment.partitions)))

    async def topic_names(self) -> list[str]:
        return sorted(await self._call(self._client.children, TopicsZNode.path))

    async def get_topic(self, name: str) -> TopicAssignment | None:
        return await self._call(self._get_topic, name)

    async def add_partitions(
        self, assignment: TopicAssignment, states: Mapping[int, PartitionState]
    ) -> None:
        """Add the partitions of ``assignment`` the topic does not have yet, with their
        states. Existing partitions must appear unchanged; adding nothing is a no-op."""
        async with self._lock:
            added = await self._call(self._add_partitions, assignment, dict(states))
            if not added:
                return
            self._view.partitions_written(assignment.name, added, states)
            self._emit(topic_changed_event(assignment.name, added))

    async def delete_topic(self, name: str) -> None:
        async with self._lock:
            await self._call(self._delete_topic, name)
            self._view.topic_removed(name)
            self._emit(topic_deleted_event(name))

    async def get_topic_configs(self, name: str) -> dict[str, str]:
        return await self._call(self._get_topic_configs, name)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides with ``configs`` and notify ``/config/changes``."""
        async with self._lock:
            notification = await self._call(self._set_topic_configs, name, dict(configs))
            self._view.config_change_written(notification)
            self._emit(config_changed_event(name))

    async def set_assignment(self, assignment: TopicAssignment) -> None:
        """Replace the replicas (and ``adding``/``removing``) of the topic's existing
        partitions: a reassignment step. Fenced like every controller write."""
        async with self._lock:
            await self._call(self._set_assignment, assignment)
            self._view.assignment_written(assignment)
            self._emit(topic_changed_event(assignment.name, []))

    # --- admin requests (/admin/reassign_partitions, /admin/preferred_replica_election) ---

    async def get_admin_request(self, name: str) -> bytes | None:
        found = await self._call(self._client.get_or_none, AdminRequestZNode.path(name))
        return None if found is None else found[0]

    async def create_admin_request(self, name: str, data: bytes) -> bool:
        async with self._lock:
            created = await self._call(self._create_admin_request, name, data)
            if created:
                self._view.admin_written(name, data)
                self._emit(MetadataEvent(EventKind.ADMIN_REQUEST, extra={"name": name}))
        return created

    async def delete_admin_request(self, name: str) -> None:
        async with self._lock:
            await self._call(self._delete_admin_request, name)
            self._view.admin_written(name, None)

    # --- partition state ---------------------------------------------------------------

    async def get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        return await self._call(self._get_partition_states, topic)

    async def update_partition_state(
        self, topic: str, partition: int, state: PartitionState, *, expected_version: int
    ) -> PartitionState:
        """Conditional write; returns the state with its new version. BadVersionError on a
        race, NotControllerError if this store's controller epoch was superseded."""
        async with self._lock:
            stored = await self._call(self._update_partition_state, topic, partition, state,
                                      expected_version)
            self._view.state_written(topic, partition, stored.version)
            self._emit(state_event(topic, partition, stored))
        return stored

    # --- plumbing ----------------------------------------------------------------------

    @property
    def _client(self) -> ZkClient:
        if self._zk is None:
            raise RuntimeError("ZkMetadataStore is not started")
        return self._zk

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking body on the pool; translate what the body left untranslated."""
        if self._zk is None:
            raise RuntimeError("ZkMetadataStore is not started")
        return await call(fn, *args, **kwargs)

    def _emit(self, ev: MetadataEvent) -> None:
        self._listeners.emit(ev)

    def _maybe_released(self, released: int | None) -> None:
        if released is not None:
            self._view.controller_written(None)
            self._emit(controller_event(None, released))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _txn(self, *, fenced: bool = True) -> Txn:
        return self._client.txn(self._fence if fenced else None)

    # --- blocking bodies: cluster and brokers ----------------------------------------------

    def _get_or_create_cluster_id(self) -> str:
        found = self._client.get_or_none(ClusterIdZNode.path)
        if found is not None:
            return ClusterIdZNode.decode(found[0])
        cid = new_cluster_id()
        try:
            self._client.ensure_path("/cluster")
            self._client.create(ClusterIdZNode.path, ClusterIdZNode.encode(cid))
        except kz.NodeExistsError:
            return ClusterIdZNode.decode(self._client.get(ClusterIdZNode.path)[0])
        log.info("created cluster id %s", cid)
        return cid

    def _register_broker(
        self, reg: BrokerRegistration, *, replace: bool = True
    ) -> tuple[BrokerRegistration | None, int | None]:
        """Returns the stored registration and, if the registration it replaced held the
        controller role, the controller epoch that was released. With ``replace=False`` a
        registration of another session is left alone and the result is (None, None)."""
        path, data = BrokerIdZNode.path(reg.broker_id), BrokerIdZNode.encode(reg)
        for _ in range(_RACE_RETRIES):
            try:
                stat = self._client.create(path, data, ephemeral=True)
                return dataclasses.replace(reg, epoch=stat.czxid), None
            except kz.NodeExistsError:
                pass
            old = self._client.exists(path)
            if old is None:
                continue
            if old.ephemeralOwner != self._client.client_id[0]:
                if not replace:
                    return None, None
                self._refuse_if_alive(reg.broker_id, path, old)
            replaced, released = self._replace_registration(reg.broker_id, path, data, old)
            if not replaced:
                continue
            stat = self._client.exists(path)
            if stat is None:
                continue
            log.info("replaced the registration of broker %d (session 0x%x, epoch %d -> %d)",
                     reg.broker_id, old.ephemeralOwner, old.czxid, stat.czxid)
            return dataclasses.replace(reg, epoch=stat.czxid), released
        raise MetadataStoreError(f"metadata store: registering broker {reg.broker_id} kept "
                                 "racing with other writers")

    def _refuse_if_alive(self, broker_id: int, path: str, old: ZnodeStat) -> None:
        """Another session holds ``broker_id``: a stale registration of a process that died
        (its session not expired yet) is taken over, but if the registered endpoint
        accepts connections a live broker holds the id: BrokerIdInUseError."""
        found = self._client.get_or_none(path)
        if found is None:
            return
        try:
            holder = BrokerIdZNode.decode(broker_id, found[0], czxid=found[1].czxid)
        except MalformedZNodeError:
            return
        if _accepts_connections(holder.host, holder.port, timeout_s=1.0):
            raise BrokerIdInUseError(
                f"broker.id {broker_id} is already registered in ZooKeeper by a live broker at "
                f"{holder.host}:{holder.port} (session 0x{old.ephemeralOwner:x}): give this "
                "broker another broker.id, or stop that one first")

    def _replace_registration(
        self, broker_id: int, path: str, data: bytes, old: ZnodeStat
    ) -> tuple[bool, int | None]:
        """Delete the old registration (and the controller role it holds) and create ours
        in one multi-op. Returns (False, None) after a lost race, else (True, the released
        controller epoch or None)."""
        controller = self._controller_held_by(broker_id)
        txn = self._txn(fenced=False)
        txn.delete(path, old.version)
        if controller is not None:
            txn.delete(ControllerZNode.path, controller.version)
        txn.create(path, data, ephemeral=True)
        try:
            txn.commit()
        except OpFailed:
            return False, None
        return True, None if controller is None else self._released_role(broker_id)

    def _unregister_broker(self, broker_id: int) -> tuple[bool, int | None]:
        path = BrokerIdZNode.path(broker_id)
        for _ in range(_RACE_RETRIES):
            reg, controller = self._client.exists(path), self._controller_held_by(broker_id)
            if reg is None and controller is None:
                return False, None
            txn = self._txn(fenced=False)
            if reg is not None:
                txn.delete(path, reg.version)
            if controller is not None:
                txn.delete(ControllerZNode.path, controller.version)
            try:
                txn.commit()
            except OpFailed:
                continue
            return reg is not None, (None if controller is None
                                     else self._released_role(broker_id))
        raise MetadataStoreError(f"metadata store: unregistering broker {broker_id} kept "
                                 "racing with other writers")

    def _controller_held_by(self, broker_id: int) -> ZnodeStat | None:
        found = self._client.get_or_none(ControllerZNode.path)
        if found is None or ControllerZNode.decode(found[0]) != broker_id:
            return None
        return found[1]

    def _released_role(self, broker_id: int) -> int:
        """This store deleted ``broker_id``'s ``/controller``: drop the fence if it was
        ours; returns the epoch that ended."""
        if self._fence is not None and self._fence.broker_id == broker_id:
            self._fence = None
        log.info("broker %d released the controller role", broker_id)
        return self._read_epoch()[0]

    def _live_brokers(self) -> list[BrokerRegistration]:
        ids = sorted(int(c) for c in self._client.children(BrokerIdsZNode.path) if c.isdigit())
        found = self._client.get_many(BrokerIdZNode.path(i) for i in ids)
        brokers = []
        for i in ids:
            got = found.get(BrokerIdZNode.path(i))
            if got is not None:
                brokers.append(BrokerIdZNode.decode(i, got[0], czxid=got[1].czxid))
        return brokers

    # --- blocking bodies: controller -------------------------------------------------------

    def _try_elect(self, broker_id: int) -> int | None:
        holder = self._client.get_or_none(ControllerZNode.path)
        if holder is not None:
            return self._adopt_or_yield(broker_id, ControllerZNode.decode(holder[0]), holder[1])
        reg = self._client.exists(BrokerIdZNode.path(broker_id))
        if reg is None:
            return None
        epoch, epoch_stat = self._read_epoch()
        txn = self._txn(fenced=False)
        txn.check(BrokerIdZNode.path(broker_id), reg.version)
        txn.create(ControllerZNode.path, ControllerZNode.encode(broker_id, self._clock.now_ms()),
                   ephemeral=True)
        txn.set_data(ControllerEpochZNode.path, ControllerEpochZNode.encode(epoch + 1),
                     epoch_stat.version)
        try:
            results = txn.commit()
        except OpFailed as lost:
            log.debug("broker %d lost the controller election: %s", broker_id, lost)
            self._drop_fence("it lost an election")
            return None
        self._fence = Fence(broker_id, epoch + 1, results[-1].version)
        return epoch + 1

    def _adopt_or_yield(self, broker_id: int, holder: int, stat: ZnodeStat) -> int | None:
        """``/controller`` exists. If it is ``broker_id``'s, created by this session, and this
        store holds no fence for it, our multi-op won but its answer was lost (connection
        loss): adopt the role and return its epoch. Otherwise None; a fence this store
        holds is dropped when the role is now another session's."""
        fence = self._fence
        ours = holder == broker_id and stat.ephemeralOwner == self._client.client_id[0]
        if ours and (fence is None or fence.broker_id != broker_id):
            epoch, epoch_stat = self._read_epoch()
            self._fence = Fence(broker_id, epoch, epoch_stat.version)
            return epoch
        if fence is not None and not (holder == fence.broker_id and
                                      stat.ephemeralOwner == self._client.client_id[0]):
            self._drop_fence(f"broker {holder} holds the role")
        return None

    def _drop_fence(self, why: str) -> None:
        fence, self._fence = self._fence, None
        if fence is not None:
            log.info("broker %d is no longer controller (epoch %d): %s; its writes are no "
                     "longer fenced", fence.broker_id, fence.epoch, why)

    def _read_epoch(self) -> tuple[int, ZnodeStat]:
        found = self._client.get_or_none(ControllerEpochZNode.path)
        if found is None:
            try:
                self._client.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(0))
            except kz.NodeExistsError:
                pass
            found = self._client.get(ControllerEpochZNode.path)
        return ControllerEpochZNode.decode(found[0]), found[1]

    def _controller_id(self) -> int | None:
        """A controller whose broker is not registered counts as none."""
        found = self._client.get_or_none(ControllerZNode.path)
        if found is None:
            return None
        holder = ControllerZNode.decode(found[0])
        return holder if self._client.exists(BrokerIdZNode.path(holder)) is not None else None

    # --- blocking bodies: topics and configs ------------------------------------------------

    def _create_topic(
        self, assignment: TopicAssignment, configs: dict[str, str],
        states: dict[int, PartitionState],
    ) -> None:
        name = assignment.name
        config_path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        config_exists = self._client.exists(config_path) is not None  # e.g. left by Kafka's admin
        txn = self._txn()
        txn.create(TopicZNode.path(name), TopicZNode.encode(assignment))
        txn.create(TopicPartitionsZNode.path(name))
        for p in sorted(assignment.partitions):
            txn.create(TopicPartitionZNode.path(name, p))
            if p in states:
                txn.create(TopicPartitionStateZNode.path(name, p),
                           TopicPartitionStateZNode.encode(states[p]))
        if config_exists:
            txn.set_data(config_path, ConfigEntityZNode.encode(configs))
        else:
            txn.create(config_path, ConfigEntityZNode.encode(configs))
        try:
            txn.commit()
        except OpFailed as failed:
            if failed.path == TopicZNode.path(name) and isinstance(failed.cause,
                                                                   kz.NodeExistsError):
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from failed.cause
            raise

    def _get_topic(self, name: str) -> TopicAssignment | None:
        found = self._client.get_or_none(TopicZNode.path(name))
        return None if found is None else TopicZNode.decode(name, found[0])

    def _add_partitions(
        self, assignment: TopicAssignment, states: dict[int, PartitionState]
    ) -> list[int]:
        name = assignment.name
        for _ in range(_RACE_RETRIES):
            found = self._client.get_or_none(TopicZNode.path(name))
            if found is None:
                raise UnknownTopicError(f"Topic '{name}' not found.")
            current = TopicZNode.decode(name, found[0])
            added = partitions_to_add(name, current.partitions, assignment.partitions)
            check_states_within(states, added, what="add_partitions")
            if not added:
                return []
            grown = TopicAssignment(name, current.topic_id or assignment.topic_id,
                                    {**current.partitions, **added})
            txn = self._txn()
            txn.set_data(TopicZNode.path(name), TopicZNode.encode(grown), found[1].version)
            if self._client.exists(TopicPartitionsZNode.path(name)) is None:
                txn.create(TopicPartitionsZNode.path(name))
            for p in sorted(added):
                txn.create(TopicPartitionZNode.path(name, p))
                if p in states:
                    txn.create(TopicPartitionStateZNode.path(name, p),
                               TopicPartitionStateZNode.encode(states[p]))
            try:
                txn.commit()
            except OpFailed as failed:
                if failed.path == TopicZNode.path(name):
                    continue  # changed or deleted meanwhile: read again
                raise
            return sorted(added)
        raise MetadataStoreError(f"metadata store: topic '{name}' kept changing while adding "
                                 "partitions")

    def _delete_topic(self, name: str) -> None:
        topic_path = TopicZNode.path(name)
        if self._client.exists(topic_path) is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        try:
            self._client.create(DeleteTopicsTopicZNode.path(name))
        except kz.NodeExistsError:
            pass  # an earlier request, not completed
        config_path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        for _ in range(_RACE_RETRIES):
            subtree = self._client.subtree(topic_path)
            if not subtree:
                raise UnknownTopicError(f"Topic '{name}' not found.")
            txn = self._txn()
            for path in subtree:
                txn.delete(path)
            if self._client.exists(config_path) is not None:
                txn.delete(config_path)
            if self._client.exists(DeleteTopicsTopicZNode.path(name)) is not None:
                txn.delete(DeleteTopicsTopicZNode.path(name))
            try:
                txn.commit()
            except OpFailed as failed:
                if isinstance(failed.cause, kz.NotEmptyError | kz.NoNodeError):
                    continue  # a znode appeared or went meanwhile: list again
                raise
            return
        raise MetadataStoreError(f"metadata store: topic '{name}' kept changing while "
                                 "deleting it")

    def _set_assignment(self, assignment: TopicAssignment) -> None:
        name = assignment.name
        found = self._client.get_or_none(TopicZNode.path(name))
        if found is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        current = TopicZNode.decode(name, found[0])
        if set(current.partitions) != set(assignment.partitions):
            raise MetadataStoreError(f"metadata store: set_assignment of '{name}' must keep "
                                     f"its partitions {sorted(current.partitions)}")
        grown = dataclasses.replace(assignment, topic_id=current.topic_id or assignment.topic_id)
        txn = self._txn()
        txn.set_data(TopicZNode.path(name), TopicZNode.encode(grown), found[1].version)
        try:
            txn.commit()
        except OpFailed as failed:
            raise MetadataStoreError(f"metadata store: topic '{name}' changed while moving "
                                     "replicas; try again") from failed.cause

    def _create_admin_request(self, name: str, data: bytes) -> bool:
        try:
            self._client.create(AdminRequestZNode.path(name), data)
        except kz.NodeExistsError:
            return False
        return True

    def _delete_admin_request(self, name: str) -> None:
        try:
            self._client.kazoo.delete_async(AdminRequestZNode.path(name)).get(
                timeout=self._client.timeout_s)
        except kz.NoNodeError:
            pass

    def _get_topic_configs(self, name: str) -> dict[str, str]:
        found = self._client.get_or_none(ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name))
        return {} if found is None else ConfigEntityZNode.decode(found[0])

    def _set_topic_configs(self, name: str, configs: dict[str, str]) -> str:
        """Returns the name of the change notification written."""
        path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        note = ConfigEntityChangeNotificationSequenceZNode
        for _ in range(_RACE_RETRIES):
            exists = self._client.exists(path) is not None
            txn = self._txn()
            txn.check(TopicZNode.path(name), -1)  # the topic must exist
            if exists:
                txn.set_data(path, ConfigEntityZNode.encode(configs))
            else:
                txn.create(path, ConfigEntityZNode.encode(configs))
            txn.create(note.prefix_path, note.encode(TOPIC_CONFIG_ENTITY, name), sequence=True)
            try:
                results = txn.commit()
            except OpFailed as failed:
                if failed.path == TopicZNode.path(name):
                    raise UnknownTopicError(f"Topic '{name}' not found.") from failed.cause
                if failed.path == path:
                    continue  # created or deleted meanwhile
                raise
            return str(results[-1]).rsplit("/", 1)[-1]
        raise MetadataStoreError(f"metadata store: configs of '{name}' kept changing")

    # --- blocking bodies: partition state ---------------------------------------------------

    def _get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        partitions = sorted(int(c) for c in self._client.children(TopicPartitionsZNode.path(topic))
                            if c.isdigit())
        found = self._client.get_many(TopicPartitionStateZNode.path(topic, p) for p in partitions)
        states = {}
        for p in partitions:
            got = found.get(TopicPartitionStateZNode.path(topic, p))
            if got is not None:
                states[p] = TopicPartitionStateZNode.decode(got[0], zk_version=got[1].version)
        return states

    def _update_partition_state(
        self, topic: str, partition: int, state: PartitionState, expected_version: int
    ) -> PartitionState:
        path, data = TopicPartitionStateZNode.path(topic, partition), \
            TopicPartitionStateZNode.encode(state)
        txn = self._txn()
        txn.set_data(path, data, expected_version)
        try:
            (stat,) = txn.commit()
            return dataclasses.replace(state, version=stat.version)
        except OpFailed as failed:
            if isinstance(failed.cause, kz.BadVersionError):
                raise self._bad_version(topic, partition, expected_version) from failed.cause
            if not isinstance(failed.cause, kz.NoNodeError):
                raise
        self._require_partition(topic, partition)  # no state written yet: version 0
        if expected_version != 0:
            raise self._bad_version(topic, partition, expected_version)
        return self._create_first_state(topic, partition, state)

    def _create_first_state(
        self, topic: str, partition: int, state: PartitionState
    ) -> PartitionState:
        path, data = TopicPartitionStateZNode.path(topic, partition), \
            TopicPartitionStateZNode.encode(state)
        txn = self._txn()
        if self._client.exists(TopicPartitionsZNode.path(topic)) is None:
            txn.create(TopicPartitionsZNode.path(topic))
        if self._client.exists(TopicPartitionZNode.path(topic, partition)) is None:
            txn.create(TopicPartitionZNode.path(topic, partition))
        txn.create(path, data)
        txn.set_data(path, data, 0)  # version 1, as the embedded store's first write
        try:
            results = txn.commit()
        except OpFailed as failed:
            if isinstance(failed.cause, kz.NodeExistsError):  # someone wrote it first
                raise self._bad_version(topic, partition, 0) from failed.cause
            raise
        return dataclasses.replace(state, version=results[-1].version)

    def _require_partition(self, topic: str, partition: int) -> None:
        assignment = self._get_topic(topic)
        if assignment is None:
            raise UnknownTopicError(f"Topic '{topic}' not found.")
        if partition not in assignment.partitions:
            raise UnknownPartitionError(f"Topic '{topic}' has no partition {partition}.")

    def _bad_version(self, topic: str, partition: int, expected: int) -> BadVersionError:
        stat = self._client.exists(TopicPartitionStateZNode.path(topic, partition))
        actual = 0 if stat is None else stat.version
        return BadVersionError(
            f"partition state {topic}-{partition}: expected version {expected}, "
            f"stored version is {actual}")

    # --- session --------------------------------------------------------------------------

    def _on_session_state(self, state: str) -> None:
        """Kazoo's connection thread: must not block or call ZooKeeper."""
        if self._zk is None:
            return  # closing, or still connecting in start()
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("metadata store: ZooKeeper session lost; its ephemeral nodes are gone")
            self._view.post(self._emit, MetadataEvent(EventKind.SESSION_EXPIRED))
        elif state == KazooState.SUSPENDED:
            log.warning("metadata store: disconnected from ZooKeeper; reconnecting")
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._view.post(self._on_new_session)

    def _on_new_session(self) -> None:
        if self._zk is not None and self._registrations:
            self._spawn(self._register_again())

    async def _register_again(self) -> None:
        """Register on the new session the brokers registered through this store, unless
        another session registered the id meanwhile (a new incarnation of the broker:
        taking the id back would make two processes fight over it)."""
        for broker_id in sorted(self._registrations):
            while self._zk is not None and broker_id in self._registrations:
                try:
                    await self._register_one_again(broker_id)
                    break
                except MetadataStoreError as exc:
                    log.warning("metadata store: registering broker %d again failed (%s); "
                                "retrying", broker_id, exc)
                    await asyncio.sleep(REFRESH_RETRY_S)

    async def _register_one_again(self, broker_id: int) -> None:
        async with self._lock:
            reg = self._registrations.get(broker_id)
            if reg is None:
                return
            reg = dataclasses.replace(reg, timestamp_ms=self._clock.now_ms())
            stored, released = await self._call(self._register_broker, reg, replace=False)
            if stored is None:
                del self._registrations[broker_id]
                log.error("broker %d was registered by another session while this one was "
                          "expired; not registering it again", broker_id)
                return
            self._registrations[broker_id] = reg
            self._view.broker_written(broker_id, stored.epoch)
            log.info("broker %d registered again on a new session (epoch %d)",
                     broker_id, stored.epoch)
            self._emit(brokers_event(broker_id, registered=True))
            self._maybe_released(released)
            self._emit(MetadataEvent(EventKind.SESSION_RESTORED, extra={"broker_id": broker_id}))



def _accepts_connections(host: str, port: int, *, timeout_s: float) -> bool:
    """Whether something listens at host:port (a stopped process still accepts: its
    socket's backlog does)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
