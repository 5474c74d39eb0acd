"""The ZooKeeper metadata store: ``MetadataStore`` on Kafka's znode layout, for a cluster.

Znodes and their JSON are in ``core.broker.zk_paths`` (one object per znode, as Kafka's
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

Events: the same kinds and ``extra`` as the embedded store. A write made through this
store is announced on the event loop right after it committed, before the call returns.
Changes made by others arrive through kazoo ``DataWatch``/``ChildrenWatch`` on
``/brokers/ids``, ``/controller``, ``/brokers/topics``, each topic znode and partition
state, and ``/config/changes``. Watch callbacks run on kazoo threads and only hand the
changed key to the loop (``call_soon_threadsafe``); there one task re-reads the key and
compares it with the store's view of the cluster, announcing what differs. Writes and
re-reads take the same lock, and ZooKeeper answers one session in order, so a re-read
never sees state older than a write it follows: no change is announced twice. As with
any ZooKeeper watch, changes in quick succession may be seen as one (a re-read sees the
latest state); listeners should re-read what an event names rather than replay events.

Sessions: on expiry (kazoo LOST) ZooKeeper has dropped the ephemeral nodes; when kazoo is
connected on a new session, the brokers registered through this store are registered
again (new epoch) and ``BROKERS_CHANGED`` announced - unless another session registered
the id meanwhile (a new incarnation of the broker): that is logged as an error and left
alone, so two processes never fight over an id. The controller role is not taken back:
the broker must run for it again (``CONTROLLER_CHANGED`` tells it the role is free).

Errors: kazoo exceptions are translated here. NoNode, NodeExists and BadVersion become
``UnknownTopicError``/``UnknownPartitionError``, ``TopicAlreadyExistsError`` and
``BadVersionError`` where they mean that; connection loss, session expiry, timeouts and
anything unexpected become the embedded store's ``MetadataStoreError`` (retriable), so
callers handle one class for both backends. Every ZooKeeper call this store makes is
bounded by the session timeout and runs off the loop through
``core.storage.blocking.run_blocking``; the watch recipes read on kazoo's own threads.
Lifecycle: ``start()``, calls from the event loop, ``close()`` (ends the session, so the
ephemeral nodes go at once).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient, TransactionRequest
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from core.broker.embedded_store import MetadataStoreError, new_cluster_id
from core.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from core.broker.metadata import (
    BadVersionError,
    BrokerRegistration,
    EventKind,
    Listener,
    MetadataEvent,
    PartitionState,
    TopicAssignment,
)
from core.broker.zk_paths import (
    PERSISTENT_PATHS,
    TOPIC_CONFIG_ENTITY,
    BrokerIdsZNode,
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
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
from core.clock import Clock
from core.storage.blocking import run_blocking

log = logging.getLogger(__name__)

T = TypeVar("T")
_Key = tuple[Any, ...]  # what a watch reports changed: ("brokers",), ("state", topic, p), ...

_RACE_RETRIES = 5  # re-reads after a lost optimistic race before giving up
_REFRESH_RETRY_S = 1.0  # a re-read that failed (connection loss) is tried again after this


class _OpFailed(Exception):
    """One operation of a multi-op failed; ``path`` names its znode."""

    def __init__(self, path: str, cause: Exception) -> None:
        super().__init__(f"{path}: {type(cause).__name__}")
        self.path = path
        self.cause = cause


@dataclasses.dataclass(frozen=True, slots=True)
class _Fence:
    """The controller role this store won: its epoch and the zkVersion it set."""

    broker_id: int
    epoch: int
    zk_version: int


@dataclasses.dataclass(slots=True)
class _TopicView:
    topic_id: str
    partitions: frozenset[int]
    versions: dict[int, int]  # partition -> state zkVersion, for partitions with a state


class _Txn:
    """A kazoo multi-op that remembers each operation's path, led by the controller-epoch
    check when a fence is given. ``commit`` returns the results of the caller's
    operations, or raises ``NotControllerError`` (fence) or ``_OpFailed``."""

    def __init__(self, zk: KazooClient, fence: _Fence | None, timeout_s: float) -> None:
        self._t: TransactionRequest = zk.transaction()
        self._paths: list[str] = []
        self._fence = fence
        self._timeout_s = timeout_s
        if fence is not None:
            self.check(ControllerEpochZNode.path, fence.zk_version)

    def check(self, path: str, version: int) -> None:
        self._t.check(path, version)
        self._paths.append(path)

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self._t.create(path, data, ephemeral=ephemeral, sequence=sequence)
        self._paths.append(path)

    def set_data(self, path: str, data: bytes, version: int = -1) -> None:
        self._t.set_data(path, data, version)
        self._paths.append(path)

    def delete(self, path: str, version: int = -1) -> None:
        self._t.delete(path, version)
        self._paths.append(path)

    def commit(self) -> list[Any]:
        results = self._t.commit_async().get(timeout=self._timeout_s)
        for i, (path, result) in enumerate(zip(self._paths, results, strict=True)):
            if not isinstance(result, Exception) or isinstance(
                    result, kz.RolledBackError | kz.RuntimeInconsistency):
                continue  # succeeded, or not run because another op failed
            if self._fence is not None and i == 0:
                raise NotControllerError(
                    f"controller epoch {self._fence.epoch} is no longer current: another "
                    f"broker was elected controller, this write was fenced") from result
            raise _OpFailed(path, result)
        return list(results[1:] if self._fence is not None else results)


class ZkMetadataStore:
    """``MetadataStore`` on ZooKeeper through kazoo, for franz in a cluster.

    All public methods are coroutines for the event loop; ZooKeeper calls run on the
    blocking-work pool. Listeners are called on the event loop (see the module docstring
    for which events and when). Reads of an unknown topic return empty results; writes to
    one raise ``UnknownTopicError``. Not for use from several event loops.
    """

    def __init__(self, connect: str, *, clock: Clock, session_timeout_s: float = 18.0) -> None:
        self._hosts, self._chroot = _split_connect(connect)
        self._clock = clock
        self._timeout_s = session_timeout_s
        self._zk: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[Listener] = []
        self._cluster_id: str | None = None
        self._fence: _Fence | None = None
        self._registrations: dict[int, BrokerRegistration] = {}
        self._session_lost = False  # set on a kazoo thread, read there
        # The store's view of the cluster, compared with re-reads to find what changed.
        self._lock = asyncio.Lock()  # one write or re-read at a time
        self._brokers: dict[int, int] = {}  # broker id -> czxid
        self._controller: int | None = None
        self._topics: dict[str, _TopicView] = {}
        self._config_changes: set[str] = set()  # notification names already handled
        # Watches: a watch whose token is no longer here stops at its next callback.
        self._armed: dict[_Key, object] = {}
        self._dirty: dict[_Key, None] = {}  # keys to re-read, in arrival order
        self._refresher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        if self._zk is not None:
            raise RuntimeError("ZkMetadataStore already started")
        self._loop = asyncio.get_running_loop()
        try:
            self._zk = await run_blocking(self._connect)
        except (kz.KazooException, KazooTimeoutError) as exc:
            raise MetadataStoreError(
                f"metadata store: cannot connect to ZooKeeper at {self._hosts}: "
                f"{type(exc).__name__} {exc}") from exc
        try:
            async with self._lock:
                await self._load_view()
        except BaseException:
            await self.close()
            raise
        self._arm([(("brokers",), BrokerIdsZNode.path, True),
                   (("topics",), TopicsZNode.path, True),
                   (("config_changes",), ConfigEntityChangeNotificationZNode.path, True),
                   (("controller",), ControllerZNode.path, False),
                   *(w for name, view in self._topics.items()
                     for w in _topic_watches(name, view.partitions))])

    async def close(self) -> None:
        zk, self._zk = self._zk, None
        self._armed.clear()
        self._dirty.clear()
        tasks = [*self._tasks, *([self._refresher] if self._refresher else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        if zk is not None:
            await run_blocking(_stop_client, zk)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

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
            self._brokers[reg.broker_id] = stored.epoch
            self._emit(_brokers_event(reg.broker_id, registered=True))
            self._maybe_released(released)
        return stored

    async def unregister_broker(self, broker_id: int) -> None:
        self._registrations.pop(broker_id, None)
        async with self._lock:
            removed, released = await self._call(self._unregister_broker, broker_id)
            if removed:
                self._brokers.pop(broker_id, None)
                self._emit(_brokers_event(broker_id, registered=False))
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
                self._controller = broker_id
                self._emit(_controller_event(broker_id, epoch))
        return epoch

    async def controller_id(self) -> int | None:
        return await self._call(self._controller_id)

    # --- topics ------------------------------------------------------------------------

    async def create_topic(
        self, assignment: TopicAssignment, configs: Mapping[str, str],
        states: Mapping[int, PartitionState],
    ) -> None:
        _check_states_within(states, assignment.partitions, what="create_topic")
        async with self._lock:
            await self._call(self._create_topic, assignment, dict(configs), dict(states))
            self._track_topic(assignment.name, _TopicView(
                assignment.topic_id, frozenset(assignment.partitions), dict.fromkeys(states, 0)))
            self._emit(MetadataEvent(EventKind.TOPIC_CREATED, assignment.name,
                                     extra={"partitions": len(assignment.partitions)}))

    async def topic_names(self) -> list[str]:
        return sorted(await self._call(self._children, TopicsZNode.path))

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
            view = self._topics.get(assignment.name)
            if view is not None:
                view.partitions |= frozenset(added)
                view.versions.update({p: 0 for p in added if p in states})
                self._arm(_state_watches(assignment.name, added))
            self._emit(MetadataEvent(EventKind.TOPIC_CHANGED, assignment.name,
                                     extra={"added_partitions": added}))

    async def delete_topic(self, name: str) -> None:
        async with self._lock:
            await self._call(self._delete_topic, name)
            self._untrack_topic(name)
            self._emit(MetadataEvent(EventKind.TOPIC_DELETED, name))

    async def get_topic_configs(self, name: str) -> dict[str, str]:
        return await self._call(self._get_topic_configs, name)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides with ``configs`` and notify ``/config/changes``."""
        async with self._lock:
            notification = await self._call(self._set_topic_configs, name, dict(configs))
            self._config_changes.add(notification)
            self._emit(MetadataEvent(EventKind.CONFIG_CHANGED, name))

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
            view = self._topics.get(topic)
            if view is not None:
                view.versions[partition] = stored.version
            self._emit(_state_event(topic, partition, stored))
        return stored

    # --- plumbing ----------------------------------------------------------------------

    @property
    def _client(self) -> KazooClient:
        if self._zk is None:
            raise RuntimeError("ZkMetadataStore is not started")
        return self._zk

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking body on the pool; translate what the body left untranslated."""
        if self._zk is None:
            raise RuntimeError("ZkMetadataStore is not started")
        try:
            return await run_blocking(fn, *args, **kwargs)
        except _OpFailed as exc:
            raise MetadataStoreError(f"metadata store: ZooKeeper multi-op failed at {exc}") \
                from exc.cause
        except (kz.KazooException, KazooTimeoutError) as exc:
            raise MetadataStoreError(
                f"metadata store: ZooKeeper {type(exc).__name__} {exc}".rstrip()) from exc
        except MalformedZNodeError as exc:
            raise MetadataStoreError(f"metadata store: {exc}") from exc

    def _emit(self, ev: MetadataEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(ev)
            except Exception:
                log.exception("metadata listener %r failed on %s", listener, ev)

    def _maybe_released(self, released: int | None) -> None:
        if released is not None:
            self._controller = None
            self._emit(_controller_event(None, released))

    def _post(self, fn: Callable[..., None], *args: Any) -> bool:
        """From a kazoo thread: run ``fn(*args)`` on the loop. False once closed."""
        loop = self._loop
        if loop is None or self._zk is None:
            return False
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed
            return False
        return True

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- bounded kazoo calls (blocking; on the pool) ------------------------------------

    def _get(self, path: str) -> tuple[bytes, ZnodeStat]:
        result: tuple[bytes, ZnodeStat] = self._client.get_async(path).get(timeout=self._timeout_s)
        return result

    def _get_or_none(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            return self._get(path)
        except kz.NoNodeError:
            return None

    def _exists(self, path: str) -> ZnodeStat | None:
        stat: ZnodeStat | None = self._client.exists_async(path).get(timeout=self._timeout_s)
        return stat

    def _children(self, path: str) -> list[str]:
        try:
            children: list[str] = self._client.get_children_async(path).get(
                timeout=self._timeout_s)
        except kz.NoNodeError:
            return []
        return children

    def _create(self, path: str, data: bytes = b"", *, ephemeral: bool = False) -> ZnodeStat:
        _, stat = self._client.create_async(path, data, ephemeral=ephemeral,
                                            include_data=True).get(timeout=self._timeout_s)
        return stat

    def _get_many(self, paths: Iterable[str]) -> dict[str, tuple[bytes, ZnodeStat]]:
        """Pipelined reads; missing znodes are left out."""
        pending = [(p, self._client.get_async(p)) for p in paths]
        found = {}
        for path, result in pending:
            try:
                found[path] = result.get(timeout=self._timeout_s)
            except kz.NoNodeError:
                continue
        return found

    def _txn(self, *, fenced: bool = True) -> _Txn:
        return _Txn(self._client, self._fence if fenced else None, self._timeout_s)

    # --- blocking bodies: session and brokers --------------------------------------------

    def _connect(self) -> KazooClient:
        if self._chroot:
            boot = KazooClient(hosts=self._hosts, timeout=self._timeout_s)
            boot.start(timeout=self._timeout_s)
            try:
                boot.ensure_path_async(self._chroot).get(timeout=self._timeout_s)
            finally:
                _stop_client(boot)
        zk = KazooClient(hosts=self._hosts + self._chroot, timeout=self._timeout_s)
        zk.add_listener(self._on_session_state)
        zk.start(timeout=self._timeout_s)
        try:
            pending = [zk.ensure_path_async(p) for p in PERSISTENT_PATHS]
            for result in pending:
                result.get(timeout=self._timeout_s)
        except BaseException:
            _stop_client(zk)
            raise
        log.info("connected to ZooKeeper %s%s (session 0x%x)", self._hosts, self._chroot,
                 zk.client_id[0])
        return zk

    def _get_or_create_cluster_id(self) -> str:
        found = self._get_or_none(ClusterIdZNode.path)
        if found is not None:
            return ClusterIdZNode.decode(found[0])
        cid = new_cluster_id()
        try:
            self._client.ensure_path_async("/cluster").get(timeout=self._timeout_s)
            self._create(ClusterIdZNode.path, ClusterIdZNode.encode(cid))
        except kz.NodeExistsError:
            return ClusterIdZNode.decode(self._get(ClusterIdZNode.path)[0])
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
                stat = self._create(path, data, ephemeral=True)
                return dataclasses.replace(reg, epoch=stat.czxid), None
            except kz.NodeExistsError:
                pass
            old = self._exists(path)
            if old is None:
                continue
            if not replace and old.ephemeralOwner != self._client.client_id[0]:
                return None, None
            replaced, released = self._replace_registration(reg.broker_id, path, data, old)
            if not replaced:
                continue
            stat = self._exists(path)
            if stat is None:
                continue
            log.info("replaced the registration of broker %d (session 0x%x, epoch %d -> %d)",
                     reg.broker_id, old.ephemeralOwner, old.czxid, stat.czxid)
            return dataclasses.replace(reg, epoch=stat.czxid), released
        raise MetadataStoreError(f"metadata store: registering broker {reg.broker_id} kept "
                                 "racing with other writers")

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
        except _OpFailed:
            return False, None
        return True, None if controller is None else self._released_role(broker_id)

    def _unregister_broker(self, broker_id: int) -> tuple[bool, int | None]:
        path = BrokerIdZNode.path(broker_id)
        for _ in range(_RACE_RETRIES):
            reg, controller = self._exists(path), self._controller_held_by(broker_id)
            if reg is None and controller is None:
                return False, None
            txn = self._txn(fenced=False)
            if reg is not None:
                txn.delete(path, reg.version)
            if controller is not None:
                txn.delete(ControllerZNode.path, controller.version)
            try:
                txn.commit()
            except _OpFailed:
                continue
            return reg is not None, (None if controller is None
                                     else self._released_role(broker_id))
        raise MetadataStoreError(f"metadata store: unregistering broker {broker_id} kept "
                                 "racing with other writers")

    def _controller_held_by(self, broker_id: int) -> ZnodeStat | None:
        found = self._get_or_none(ControllerZNode.path)
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
        ids = sorted(int(c) for c in self._children(BrokerIdsZNode.path) if c.isdigit())
        found = self._get_many(BrokerIdZNode.path(i) for i in ids)
        brokers = []
        for i in ids:
            got = found.get(BrokerIdZNode.path(i))
            if got is not None:
                brokers.append(BrokerIdZNode.decode(i, got[0], czxid=got[1].czxid))
        return brokers

    # --- blocking bodies: controller -------------------------------------------------------

    def _try_elect(self, broker_id: int) -> int | None:
        holder = self._get_or_none(ControllerZNode.path)
        if holder is not None:
            return self._adopt_or_yield(broker_id, ControllerZNode.decode(holder[0]), holder[1])
        reg = self._exists(BrokerIdZNode.path(broker_id))
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
        except _OpFailed as lost:
            log.debug("broker %d lost the controller election: %s", broker_id, lost)
            self._drop_fence("it lost an election")
            return None
        self._fence = _Fence(broker_id, epoch + 1, results[-1].version)
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
            self._fence = _Fence(broker_id, epoch, epoch_stat.version)
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
        found = self._get_or_none(ControllerEpochZNode.path)
        if found is None:
            try:
                self._create(ControllerEpochZNode.path, ControllerEpochZNode.encode(0))
            except kz.NodeExistsError:
                pass
            found = self._get(ControllerEpochZNode.path)
        return ControllerEpochZNode.decode(found[0]), found[1]

    def _controller_id(self) -> int | None:
        """A controller whose broker is not registered counts as none."""
        found = self._get_or_none(ControllerZNode.path)
        if found is None:
            return None
        holder = ControllerZNode.decode(found[0])
        return holder if self._exists(BrokerIdZNode.path(holder)) is not None else None

    # --- blocking bodies: topics and configs ------------------------------------------------

    def _create_topic(
        self, assignment: TopicAssignment, configs: dict[str, str],
        states: dict[int, PartitionState],
    ) -> None:
        name = assignment.name
        config_path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        config_exists = self._exists(config_path) is not None  # e.g. left by Kafka's admin
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
        except _OpFailed as failed:
            if failed.path == TopicZNode.path(name) and isinstance(failed.cause,
                                                                   kz.NodeExistsError):
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from failed.cause
            raise

    def _get_topic(self, name: str) -> TopicAssignment | None:
        found = self._get_or_none(TopicZNode.path(name))
        return None if found is None else TopicZNode.decode(name, found[0])

    def _add_partitions(
        self, assignment: TopicAssignment, states: dict[int, PartitionState]
    ) -> list[int]:
        name = assignment.name
        for _ in range(_RACE_RETRIES):
            found = self._get_or_none(TopicZNode.path(name))
            if found is None:
                raise UnknownTopicError(f"Topic '{name}' not found.")
            current = TopicZNode.decode(name, found[0])
            added = _partitions_to_add(current, assignment)
            _check_states_within(states, added, what="add_partitions")
            if not added:
                return []
            grown = TopicAssignment(name, current.topic_id or assignment.topic_id,
                                    {**current.partitions, **added})
            txn = self._txn()
            txn.set_data(TopicZNode.path(name), TopicZNode.encode(grown), found[1].version)
            if self._exists(TopicPartitionsZNode.path(name)) is None:
                txn.create(TopicPartitionsZNode.path(name))
            for p in sorted(added):
                txn.create(TopicPartitionZNode.path(name, p))
                if p in states:
                    txn.create(TopicPartitionStateZNode.path(name, p),
                               TopicPartitionStateZNode.encode(states[p]))
            try:
                txn.commit()
            except _OpFailed as failed:
                if failed.path == TopicZNode.path(name):
                    continue  # changed or deleted meanwhile: read again
                raise
            return sorted(added)
        raise MetadataStoreError(f"metadata store: topic '{name}' kept changing while adding "
                                 "partitions")

    def _delete_topic(self, name: str) -> None:
        topic_path = TopicZNode.path(name)
        if self._exists(topic_path) is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        try:
            self._create(DeleteTopicsTopicZNode.path(name))
        except kz.NodeExistsError:
            pass  # an earlier request, not completed
        config_path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        for _ in range(_RACE_RETRIES):
            subtree = self._subtree(topic_path)
            if not subtree:
                raise UnknownTopicError(f"Topic '{name}' not found.")
            txn = self._txn()
            for path in subtree:
                txn.delete(path)
            if self._exists(config_path) is not None:
                txn.delete(config_path)
            if self._exists(DeleteTopicsTopicZNode.path(name)) is not None:
                txn.delete(DeleteTopicsTopicZNode.path(name))
            try:
                txn.commit()
            except _OpFailed as failed:
                if isinstance(failed.cause, kz.NotEmptyError | kz.NoNodeError):
                    continue  # a znode appeared or went meanwhile: list again
                raise
            return
        raise MetadataStoreError(f"metadata store: topic '{name}' kept changing while "
                                 "deleting it")

    def _subtree(self, root: str) -> list[str]:
        """``root`` and every znode under it, deepest first (a multi-op deletes children
        before parents); empty if ``root`` does not exist."""
        if self._exists(root) is None:
            return []
        levels = [[root]]
        while levels[-1]:
            pending = [(p, self._client.get_children_async(p)) for p in levels[-1]]
            below = []
            for parent, result in pending:
                try:
                    below += [f"{parent}/{c}" for c in result.get(timeout=self._timeout_s)]
                except kz.NoNodeError:
                    continue
            levels.append(below)
        return [path for level in reversed(levels) for path in level]

    def _get_topic_configs(self, name: str) -> dict[str, str]:
        found = self._get_or_none(ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name))
        return {} if found is None else ConfigEntityZNode.decode(found[0])

    def _set_topic_configs(self, name: str, configs: dict[str, str]) -> str:
        """Returns the name of the change notification written."""
        path = ConfigEntityZNode.path(TOPIC_CONFIG_ENTITY, name)
        note = ConfigEntityChangeNotificationSequenceZNode
        for _ in range(_RACE_RETRIES):
            exists = self._exists(path) is not None
            txn = self._txn()
            txn.check(TopicZNode.path(name), -1)  # the topic must exist
            if exists:
                txn.set_data(path, ConfigEntityZNode.encode(configs))
            else:
                txn.create(path, ConfigEntityZNode.encode(configs))
            txn.create(note.prefix_path, note.encode(TOPIC_CONFIG_ENTITY, name), sequence=True)
            try:
                results = txn.commit()
            except _OpFailed as failed:
                if failed.path == TopicZNode.path(name):
                    raise UnknownTopicError(f"Topic '{name}' not found.") from failed.cause
                if failed.path == path:
                    continue  # created or deleted meanwhile
                raise
            return str(results[-1]).rsplit("/", 1)[-1]
        raise MetadataStoreError(f"metadata store: configs of '{name}' kept changing")

    # --- blocking bodies: partition state ---------------------------------------------------

    def _get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        partitions = sorted(int(c) for c in self._children(TopicPartitionsZNode.path(topic))
                            if c.isdigit())
        found = self._get_many(TopicPartitionStateZNode.path(topic, p) for p in partitions)
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
        except _OpFailed as failed:
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
        if self._exists(TopicPartitionsZNode.path(topic)) is None:
            txn.create(TopicPartitionsZNode.path(topic))
        if self._exists(TopicPartitionZNode.path(topic, partition)) is None:
            txn.create(TopicPartitionZNode.path(topic, partition))
        txn.create(path, data)
        txn.set_data(path, data, 0)  # version 1, as the embedded store's first write
        try:
            results = txn.commit()
        except _OpFailed as failed:
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
        stat = self._exists(TopicPartitionStateZNode.path(topic, partition))
        actual = 0 if stat is None else stat.version
        return BadVersionError(
            f"partition state {topic}-{partition}: expected version {expected}, "
            f"stored version is {actual}")

    # --- the view of the cluster, and re-reads when a watch fires ----------------------------

    async def _load_view(self) -> None:
        self._brokers = await self._call(self._read_brokers)
        self._controller, _ = await self._call(self._read_controller)
        self._config_changes = set(await self._call(self._children,
                                                    ConfigEntityChangeNotificationZNode.path))
        for name in await self._call(self._children, TopicsZNode.path):
            view = await self._call(self._read_topic_view, name)
            if view is not None:
                self._topics[name] = view

    def _arm(self, watches: Iterable[tuple[_Key, str, bool]]) -> None:
        """Start kazoo watches: (key reported, path, children watch?). Their first reads
        happen on a kazoo thread (kazoo retries them across connection loss, off our pool);
        each first callback marks its key dirty, so a change made before the watch was
        set is not missed."""
        specs = []
        for key, path, children in watches:
            token = object()
            self._armed[key] = token
            specs.append((key, path, children, token))
        if specs:
            self._client.handler.spawn(self._start_watches, specs)

    def _start_watches(self, specs: list[tuple[_Key, str, bool, object]]) -> None:
        for key, path, children, token in specs:
            zk = self._zk
            if zk is None or self._armed.get(key) is not token:
                continue
            recipe = ChildrenWatch if children else DataWatch
            try:
                recipe(zk, path, functools.partial(self._on_watch, key, token))
            except kz.ConnectionClosedError:
                return  # closed meanwhile
            except Exception:
                log.exception("metadata store: cannot watch %s", path)

    def _on_watch(self, key: _Key, token: object, *_args: Any) -> bool:
        """Kazoo thread. Returning False ends the watch."""
        if self._armed.get(key) is not token:
            return False
        return self._post(self._mark_dirty, key)

    def _track_topic(self, name: str, view: _TopicView) -> None:
        self._untrack_topic(name)
        self._topics[name] = view
        self._arm(_topic_watches(name, view.partitions))

    def _untrack_topic(self, name: str) -> None:
        view = self._topics.pop(name, None)
        if view is None:
            return
        self._armed.pop(("topic", name), None)
        for p in view.partitions:
            self._armed.pop(("state", name, p), None)

    def _mark_dirty(self, key: _Key) -> None:
        if self._zk is None:
            return
        self._dirty[key] = None
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_dirty())

    async def _refresh_dirty(self) -> None:
        while self._dirty and self._zk is not None:
            key = next(iter(self._dirty))
            del self._dirty[key]
            try:
                async with self._lock:
                    await self._refresh(key)
            except (MetadataStoreError, RuntimeError) as exc:
                log.warning("metadata store: re-reading %s failed (%s); retrying", key, exc)
                if self._loop is not None and self._zk is not None:
                    self._loop.call_later(_REFRESH_RETRY_S, self._mark_dirty, key)
            except Exception:
                log.exception("metadata store: re-reading %s failed", key)

    async def _refresh(self, key: _Key) -> None:
        kind = key[0]
        if kind == "brokers":
            self._apply_brokers(await self._call(self._read_brokers))
        elif kind == "controller":
            self._apply_controller(*await self._call(self._read_controller))
        elif kind == "topics":
            await self._refresh_topics()
        elif kind == "topic":
            await self._refresh_topic(key[1])
        elif kind == "state":
            await self._refresh_state(key[1], key[2])
        elif kind == "config_changes":
            await self._refresh_config_changes()

    def _apply_brokers(self, seen: dict[int, int]) -> None:
        for broker_id in sorted(set(self._brokers) | set(seen)):
            if self._brokers.get(broker_id) != seen.get(broker_id):  # gone, new or bounced
                self._emit(_brokers_event(broker_id, registered=broker_id in seen))
        self._brokers = seen

    def _apply_controller(self, holder: int | None, epoch: int) -> None:
        if holder != self._controller:
            self._controller = holder
            self._emit(_controller_event(holder, epoch))

    async def _refresh_topics(self) -> None:
        names = set(await self._call(self._children, TopicsZNode.path))
        for name in sorted(set(self._topics) - names):
            self._untrack_topic(name)
            self._emit(MetadataEvent(EventKind.TOPIC_DELETED, name))
        for name in sorted(names - set(self._topics)):
            view = await self._call(self._read_topic_view, name)
            if view is not None:
                self._track_topic(name, view)
                self._emit(MetadataEvent(EventKind.TOPIC_CREATED, name,
                                         extra={"partitions": len(view.partitions)}))

    async def _refresh_topic(self, name: str) -> None:
        known = self._topics.get(name)
        if known is None:
            return  # not created yet as far as we know: the topics re-read announces it
        view = await self._call(self._read_topic_view, name)
        if view is None:
            self._mark_dirty(("topics",))
        elif view.topic_id != known.topic_id:  # deleted and created again meanwhile
            self._untrack_topic(name)
            self._emit(MetadataEvent(EventKind.TOPIC_DELETED, name))
            self._track_topic(name, view)
            self._emit(MetadataEvent(EventKind.TOPIC_CREATED, name,
                                     extra={"partitions": len(view.partitions)}))
        elif added := sorted(view.partitions - known.partitions):
            known.partitions = view.partitions
            known.versions.update({p: view.versions[p] for p in added if p in view.versions})
            self._arm(_state_watches(name, added))
            self._emit(MetadataEvent(EventKind.TOPIC_CHANGED, name,
                                     extra={"added_partitions": added}))

    async def _refresh_state(self, topic: str, partition: int) -> None:
        known = self._topics.get(topic)
        if known is None or partition not in known.partitions:
            return
        found = await self._call(self._get_or_none, TopicPartitionStateZNode.path(topic,
                                                                                  partition))
        if found is None:
            known.versions.pop(partition, None)
            return
        if known.versions.get(partition) == found[1].version:
            return
        state = TopicPartitionStateZNode.decode(found[0], zk_version=found[1].version)
        known.versions[partition] = state.version
        self._emit(_state_event(topic, partition, state))

    async def _refresh_config_changes(self) -> None:
        names, changed = await self._call(self._read_config_changes,
                                          frozenset(self._config_changes))
        self._config_changes = set(names)
        for entity_type, name in changed:
            if entity_type == TOPIC_CONFIG_ENTITY:
                self._emit(MetadataEvent(EventKind.CONFIG_CHANGED, name))

    # blocking reads behind the re-reads

    def _read_brokers(self) -> dict[int, int]:
        ids = [int(c) for c in self._children(BrokerIdsZNode.path) if c.isdigit()]
        pending = [(i, self._client.exists_async(BrokerIdZNode.path(i))) for i in ids]
        stats = [(i, result.get(timeout=self._timeout_s)) for i, result in pending]
        return {i: stat.czxid for i, stat in stats if stat is not None}

    def _read_controller(self) -> tuple[int | None, int]:
        found = self._get_or_none(ControllerZNode.path)
        epoch = self._get_or_none(ControllerEpochZNode.path)
        return (None if found is None else ControllerZNode.decode(found[0]),
                0 if epoch is None else ControllerEpochZNode.decode(epoch[0]))

    def _read_topic_view(self, name: str) -> _TopicView | None:
        assignment = self._get_topic(name)
        if assignment is None:
            return None
        pending = [(p, self._client.exists_async(TopicPartitionStateZNode.path(name, p)))
                   for p in assignment.partitions]
        stats = [(p, result.get(timeout=self._timeout_s)) for p, result in pending]
        return _TopicView(assignment.topic_id, frozenset(assignment.partitions),
                          {p: stat.version for p, stat in stats if stat is not None})

    def _read_config_changes(
        self, handled: frozenset[str]
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """All notification names, and the (entity type, name) of those not handled yet,
        in sequence order."""
        names = sorted(self._children(ConfigEntityChangeNotificationZNode.path))
        new = [n for n in names if n not in handled]
        base = ConfigEntityChangeNotificationZNode.path
        found = self._get_many(f"{base}/{n}" for n in new)
        changed = [ConfigEntityChangeNotificationSequenceZNode.decode(found[f"{base}/{n}"][0])
                   for n in new if f"{base}/{n}" in found]
        return names, changed

    # --- session --------------------------------------------------------------------------

    def _on_session_state(self, state: str) -> None:
        """Kazoo's connection thread: must not block or call ZooKeeper."""
        if self._zk is None:
            return  # closing, or still connecting in start()
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("metadata store: ZooKeeper session lost; its ephemeral nodes are gone")
        elif state == KazooState.SUSPENDED:
            log.warning("metadata store: disconnected from ZooKeeper; reconnecting")
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._post(self._on_new_session)

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
                    await asyncio.sleep(_REFRESH_RETRY_S)

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
            self._brokers[broker_id] = stored.epoch
            log.info("broker %d registered again on a new session (epoch %d)",
                     broker_id, stored.epoch)
            self._emit(_brokers_event(broker_id, registered=True))
            self._maybe_released(released)


# --- helpers ------------------------------------------------------------------------------


def _split_connect(connect: str) -> tuple[str, str]:
    """``h1:2181,h2:2181/franz/a`` -> (``h1:2181,h2:2181``, ``/franz/a``)."""
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(f"ZooKeeper connect string without hosts: {connect!r}")
    return hosts, ("/" + chroot.strip("/")).rstrip("/") if slash else ""


def _stop_client(zk: KazooClient) -> None:
    try:
        zk.stop()
    finally:
        zk.close()


def _topic_watches(name: str, partitions: Iterable[int]) -> list[tuple[_Key, str, bool]]:
    return [(("topic", name), TopicZNode.path(name), False), *_state_watches(name, partitions)]


def _state_watches(name: str, partitions: Iterable[int]) -> list[tuple[_Key, str, bool]]:
    return [(("state", name, p), TopicPartitionStateZNode.path(name, p), False)
            for p in sorted(partitions)]


def _partitions_to_add(
    current: TopicAssignment, wanted: TopicAssignment
) -> dict[int, tuple[int, ...]]:
    name = current.name
    missing = sorted(set(current.partitions) - set(wanted.partitions))
    if missing:
        raise InvalidPartitionsError(
            f"Topic '{name}': partitions cannot be removed (missing {missing})")
    changed = sorted(p for p, r in current.partitions.items()
                     if tuple(wanted.partitions[p]) != r)
    if changed:
        raise InvalidReplicaAssignmentError(
            f"Topic '{name}': replicas of existing partitions {changed} cannot change here")
    return {p: tuple(r) for p, r in wanted.partitions.items() if p not in current.partitions}


def _check_states_within(
    states: Mapping[int, PartitionState], partitions: Mapping[int, object], *, what: str
) -> None:
    stray = sorted(set(states) - set(partitions))
    if stray:
        raise ValueError(f"{what}: states for partitions {stray} not being created")


def _brokers_event(broker_id: int, *, registered: bool) -> MetadataEvent:
    return MetadataEvent(EventKind.BROKERS_CHANGED,
                         extra={"broker_id": broker_id, "registered": registered})


def _controller_event(controller_id: int | None, epoch: int) -> MetadataEvent:
    return MetadataEvent(EventKind.CONTROLLER_CHANGED,
                         extra={"controller_id": controller_id, "epoch": epoch})


def _state_event(topic: str, partition: int, state: PartitionState) -> MetadataEvent:
    return MetadataEvent(EventKind.PARTITION_STATE_CHANGED, topic, partition,
                         extra={"leader": state.leader, "leader_epoch": state.leader_epoch,
                                "version": state.version})
