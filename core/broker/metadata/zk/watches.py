"""The ZooKeeper store's view of the cluster, and the watches that keep it current.

``zk_store`` announces its own writes itself; changes made by other sessions arrive
here. Kazoo ``DataWatch``/``ChildrenWatch`` recipes watch ``/brokers/ids``,
``/controller``, ``/brokers/topics``, each topic znode and ``/config/changes``. Partition
states (one znode per partition: 100,000 in a large cluster) are watched with plain
one-shot watches instead, set by the re-reads themselves in pipelined batches: a recipe
per znode reads it once when created and again on every change, one synchronous
round trip at a time on kazoo's single callback thread, which made a restarted broker of
33,000 partitions take many minutes to see its leaderships. Callbacks run on kazoo
threads and only hand the changed *key* to the event loop (``call_soon_threadsafe``)::

    ("brokers",)  ("controller",)  ("topics",)  ("config_changes",)
    ("topic", name)  ("state", name, partition)  ("admin", request name)

There one task drains the dirty keys in arrival order (a run of partition-state keys
in one pipelined read of up to ``STATE_READ_BATCH``, which also sets their next
watches): it re-reads each under the store's lock, compares it with the view (broker czxids, controller, topics with their
partitions and state zkVersions, config-change notifications already handled) and
emits an event for what differs. Writes and re-reads take the same lock and ZooKeeper
answers one session in order, so a re-read never sees state older than a write it
follows: no change is announced twice. A re-read that fails on connection loss is
tried again after ``REFRESH_RETRY_S``. As with any ZooKeeper watch, changes in quick
succession may be seen as one.

Each armed watch holds a token; disarming (a topic untracked, the view detached)
drops the token and the watch ends at its next callback. A partition-state watch is
set by a pipelined read outside the store's lock (a broker starting with 33,000
partitions goes on with its startup meanwhile), compared with what the view holds.
Kazoo fires every watch (with no path) when the connection is lost, so each state key
is re-read, and its watch set again, once the connection is back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable, Collection, Iterable
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from core.broker.metadata.events import (
    brokers_event,
    config_changed_event,
    controller_event,
    state_event,
    topic_changed_event,
    topic_created_event,
    topic_deleted_event,
)
from core.broker.metadata.store import EventKind, MetadataEvent, MetadataStoreError, TopicAssignment
from core.broker.metadata.zk.client import ZkClient, call
from core.broker.metadata.zk.paths import (
    TOPIC_CONFIG_ENTITY,
    AdminRequestZNode,
    BrokerIdsZNode,
    BrokerIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ControllerEpochZNode,
    ControllerZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Key = tuple[Any, ...]  # what a watch reports changed: ("brokers",), ("state", topic, p), ...

REFRESH_RETRY_S = 1.0  # a re-read that failed (connection loss) is tried again after this
STATE_READ_BATCH = 1000  # partition states re-read (and watched again) in one pipelined read


@dataclasses.dataclass(slots=True)
class TopicView:
    topic_id: str
    partitions: frozenset[int]
    versions: dict[int, int]  # partition -> state zkVersion, for partitions with a state
    replicas: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)


class ZkClusterView:
    """What ``ZkMetadataStore`` knows of the cluster, kept current by kazoo watches.

    Lifecycle: ``attach`` (after connecting), ``load`` (under the lock), ``arm_all``;
    the store reports its own writes through the ``*_written``/``*_removed`` methods
    while holding ``lock``; ``detach`` on close. Event-loop methods only, except ``post`` and
    the watch callbacks, which run on kazoo threads.
    """

    def __init__(self, *, lock: asyncio.Lock, emit: Callable[[MetadataEvent], None]) -> None:
        self._lock = lock  # the store's: one write or re-read at a time
        self._emit = emit
        self._zk: ZkClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._brokers: dict[int, int] = {}  # broker id -> czxid
        self._controller: int | None = None
        self._topics: dict[str, TopicView] = {}
        self._config_changes: set[str] = set()  # notification names already handled
        self._admin: dict[str, bytes | None] = {}  # admin request name -> its JSON, if any
        # Watches: a watch whose token is no longer here stops at its next callback.
        self._armed: dict[Key, object] = {}
        # the one watcher object of each partition-state key (kazoo keeps a set of
        # watchers per path: the same object set again is not called twice)
        self._state_watchers: dict[Key, Callable[[Any], None]] = {}
        self._dirty: dict[Key, None] = {}  # keys to re-read, in arrival order
        self._unwatched: dict[Key, None] = {}  # partition-state keys whose watch is not set
        self._refresher: asyncio.Task[None] | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def attach(self, zk: ZkClient, loop: asyncio.AbstractEventLoop) -> None:
        self._zk, self._loop = zk, loop

    def detach(self) -> asyncio.Task[None] | None:
        """Stop every watch and re-read; returns the re-read task, for the caller to cancel."""
        self._zk = None
        self._armed.clear()
        self._state_watchers.clear()
        self._dirty.clear()
        self._unwatched.clear()
        return self._refresher

    async def load(self) -> None:
        """Read the whole view (caller holds the lock)."""
        self._brokers = await self._call(self._read_brokers)
        self._controller, _ = await self._call(self._read_controller)
        self._config_changes = set(await self._call(self._client.children,
                                                    ConfigEntityChangeNotificationZNode.path))
        for name in await self._call(self._client.children, TopicsZNode.path):
            view = await self._call(self._read_topic_view, name)
            if view is not None:
                self._topics[name] = view

    def arm_all(self) -> None:
        self._arm([(("brokers",), BrokerIdsZNode.path, True),
                   (("topics",), TopicsZNode.path, True),
                   (("config_changes",), ConfigEntityChangeNotificationZNode.path, True),
                   (("controller",), ControllerZNode.path, False),
                   *((("admin", name), AdminRequestZNode.path(name), False)
                     for name in AdminRequestZNode.names),
                   *(w for name, view in self._topics.items()
                     for w in _topic_watches(name, view.partitions))])

    def post(self, fn: Callable[..., None], *args: Any) -> bool:
        """From a kazoo thread: run ``fn(*args)`` on the loop. False once closed."""
        loop = self._loop
        if loop is None or self._zk is None:
            return False
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed
            return False
        return True

    # --- the store's own writes (caller holds the lock) --------------------------------------

    def broker_written(self, broker_id: int, czxid: int) -> None:
        self._brokers[broker_id] = czxid

    def broker_removed(self, broker_id: int) -> None:
        self._brokers.pop(broker_id, None)

    def controller_written(self, holder: int | None) -> None:
        self._controller = holder

    def topic_written(self, assignment: TopicAssignment, with_state: Iterable[int]) -> None:
        """A topic created with states (at version 0) for the partitions ``with_state``."""
        self._track_topic(assignment.name, TopicView(
            assignment.topic_id, frozenset(assignment.partitions), dict.fromkeys(with_state, 0),
            dict(assignment.partitions)))

    def assignment_written(self, assignment: TopicAssignment) -> None:
        view = self._topics.get(assignment.name)
        if view is not None:
            view.replicas = dict(assignment.partitions)

    def admin_written(self, name: str, data: bytes | None) -> None:
        self._admin[name] = data

    def topic_removed(self, name: str) -> None:
        self._untrack_topic(name)

    def partitions_written(
        self, name: str, added: list[int], with_state: Collection[int]
    ) -> None:
        """Partitions ``added`` to a tracked topic, those in ``with_state`` at version 0."""
        view = self._topics.get(name)
        if view is None:
            return
        view.partitions |= frozenset(added)
        view.versions.update({p: 0 for p in added if p in with_state})
        self._arm(_state_watches(name, added))

    def state_written(self, topic: str, partition: int, version: int) -> None:
        view = self._topics.get(topic)
        if view is not None:
            view.versions[partition] = version

    def config_change_written(self, notification: str) -> None:
        self._config_changes.add(notification)

    # --- watches ---------------------------------------------------------------------------

    @property
    def _client(self) -> ZkClient:
        if self._zk is None:
            raise RuntimeError("ZkMetadataStore is not started")
        return self._zk

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._zk is None:
            raise RuntimeError("ZkMetadataStore is not started")
        return await call(fn, *args)

    def _arm(self, watches: Iterable[tuple[Key, str, bool]]) -> None:
        """Start watches: (key reported, path, children watch?). Recipes' first reads
        happen on a kazoo thread (kazoo retries them across connection loss, off our pool);
        each first callback marks its key dirty, so a change made before the watch was
        set is not missed. Partition states go to the refresher, which sets their watches
        in batches (``_set_state_watches``)."""
        specs, states = [], []
        for key, path, children in watches:
            token = object()
            self._armed[key] = token
            if key[0] == "state":
                self._state_watchers[key] = functools.partial(self._on_state_watch, key, token)
                states.append(key)
            else:
                specs.append((key, path, children, token))
        if specs:
            self._client.kazoo.handler.spawn(self._start_watches, specs)
        if states and self._zk is not None:  # set by the refresher, in batches
            self._unwatched.update(dict.fromkeys(states))
            self._ensure_refresher()

    def _start_watches(self, specs: list[tuple[Key, str, bool, object]]) -> None:
        for key, path, children, token in specs:
            zk = self._zk
            if zk is None or self._armed.get(key) is not token:
                continue
            recipe = ChildrenWatch if children else DataWatch
            try:
                recipe(zk.kazoo, path, functools.partial(self._on_watch, key, token))
            except kz.ConnectionClosedError:
                return  # closed meanwhile
            except Exception:
                log.exception("metadata store: cannot watch %s", path)

    def _on_watch(self, key: Key, token: object, *_args: Any) -> bool:
        """Kazoo thread. Returning False ends the watch."""
        if self._armed.get(key) is not token:
            return False
        return self.post(self._mark_dirty, key)

    def _on_state_watch(self, key: Key, token: object, _event: Any) -> None:
        """Kazoo thread: a partition state changed, was created or deleted, or the
        connection was lost. One-shot: the re-read it asks for sets the next one."""
        if self._armed.get(key) is token:
            self.post(self._mark_dirty, key)

    def _track_topic(self, name: str, view: TopicView) -> None:
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
            self._state_watchers.pop(("state", name, p), None)

    # --- re-reads --------------------------------------------------------------------------

    def _mark_dirty(self, key: Key) -> None:
        if self._zk is None:
            return
        self._dirty[key] = None
        self._ensure_refresher()

    def _ensure_refresher(self) -> None:
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_dirty())

    async def _refresh_dirty(self) -> None:
        while (self._dirty or self._unwatched) and self._zk is not None:
            if self._unwatched:  # one batch of watches, then one re-read, and so on
                await self._set_state_watches()
                if not self._dirty:
                    continue
            key = next(iter(self._dirty))
            keys = self._state_run() if key[0] == "state" else [key]
            for k in keys:
                del self._dirty[k]
            try:
                async with self._lock:
                    if key[0] == "state":
                        await self._refresh_states(keys)
                    else:
                        await self._refresh(key)
            except (MetadataStoreError, RuntimeError) as exc:
                log.warning("metadata store: re-reading %s%s failed (%s); retrying", key,
                            f" and {len(keys) - 1} more" if len(keys) > 1 else "", exc)
                if self._loop is not None and self._zk is not None:
                    for k in keys:
                        self._loop.call_later(REFRESH_RETRY_S, self._mark_dirty, k)
            except Exception:
                log.exception("metadata store: re-reading %s failed", key)

    async def _set_state_watches(self) -> None:
        """Set the watches of up to ``STATE_READ_BATCH`` partition states just armed,
        outside the store's lock (startup's reads and writes go on meanwhile): a
        pipelined read with watches, compared with the view; a state that differs from
        it (changed since the view read it) is re-read under the lock. A state that
        changes after its watch was set fires the watch. On failure the keys are
        re-read the usual way, which sets their watches too."""
        keys = list(itertools.islice(self._unwatched, STATE_READ_BATCH))
        for key in keys:
            del self._unwatched[key]
        try:
            read = await self._read_states_watched(keys)
        except (MetadataStoreError, RuntimeError) as exc:
            log.warning("metadata store: watching %d partition states failed (%s); "
                        "re-reading them", len(keys), exc)
            for key in keys:
                self._mark_dirty(key)
            return
        for key, known, got, appeared in read:
            version = None if got is None else got[1].version
            if version != known.versions.get(key[2]) or appeared:
                self._mark_dirty(key)

    async def _read_states_watched(
        self, keys: list[Key]
    ) -> list[tuple[Key, TopicView, tuple[bytes, Any] | None, bool]]:
        """One pipelined read of the partition states of ``keys`` still tracked, which
        sets their next watches: ``(key, topic view, (data, stat) or None if missing,
        created after its read)`` for those still tracked once it answers."""
        watched = [(key, TopicPartitionStateZNode.path(key[1], key[2])) for key in keys
                   if key in self._state_watchers and self._tracked(key) is not None]
        if not watched:
            return []
        found, appeared = await self._call(
            self._client.get_many_watched,
            [(path, self._state_watchers[key]) for key, path in watched])
        out = []
        for key, path in watched:
            known = self._tracked(key)
            if known is not None:
                out.append((key, known, found.get(path), path in appeared))
        return out

    def _tracked(self, key: Key) -> TopicView | None:
        """The view of the topic of partition-state ``key``, if it tracks that partition."""
        known = self._topics.get(key[1])
        return known if known is not None and key[2] in known.partitions else None

    def _state_run(self) -> list[Key]:
        """The partition-state keys at the front of the dirty keys, up to
        ``STATE_READ_BATCH`` (arrival order is kept: the run stops at another key)."""
        return list(itertools.takewhile(lambda k: k[0] == "state",
                                        itertools.islice(self._dirty, STATE_READ_BATCH)))

    async def _refresh(self, key: Key) -> None:
        kind = key[0]
        if kind == "brokers":
            self._apply_brokers(await self._call(self._read_brokers))
        elif kind == "controller":
            self._apply_controller(*await self._call(self._read_controller))
        elif kind == "topics":
            await self._refresh_topics()
        elif kind == "topic":
            await self._refresh_topic(key[1])
        elif kind == "config_changes":
            await self._refresh_config_changes()
        elif kind == "admin":
            await self._refresh_admin(key[1])

    def _apply_brokers(self, seen: dict[int, int]) -> None:
        for broker_id in sorted(set(self._brokers) | set(seen)):
            if self._brokers.get(broker_id) != seen.get(broker_id):  # gone, new or bounced
                self._emit(brokers_event(broker_id, registered=broker_id in seen))
        self._brokers = seen

    def _apply_controller(self, holder: int | None, epoch: int) -> None:
        if holder != self._controller:
            self._controller = holder
            self._emit(controller_event(holder, epoch))

    async def _refresh_topics(self) -> None:
        names = set(await self._call(self._client.children, TopicsZNode.path))
        for name in sorted(set(self._topics) - names):
            self._untrack_topic(name)
            self._emit(topic_deleted_event(name))
        for name in sorted(names - set(self._topics)):
            view = await self._call(self._read_topic_view, name)
            if view is not None:
                self._track_topic(name, view)
                self._emit(topic_created_event(name, len(view.partitions)))

    async def _refresh_topic(self, name: str) -> None:
        known = self._topics.get(name)
        if known is None:
            return  # not created yet as far as we know: the topics re-read announces it
        view = await self._call(self._read_topic_view, name)
        if view is None:
            self._mark_dirty(("topics",))
        elif view.topic_id != known.topic_id:  # deleted and created again meanwhile
            self._untrack_topic(name)
            self._emit(topic_deleted_event(name))
            self._track_topic(name, view)
            self._emit(topic_created_event(name, len(view.partitions)))
        elif added := sorted(view.partitions - known.partitions):
            known.partitions = view.partitions
            known.versions.update({p: view.versions[p] for p in added if p in view.versions})
            known.replicas = view.replicas
            self._arm(_state_watches(name, added))
            self._emit(topic_changed_event(name, added))
        elif view.replicas != known.replicas:  # replicas moved (a reassignment step)
            known.replicas = view.replicas
            self._emit(topic_changed_event(name, []))

    async def _refresh_states(self, keys: list[Key]) -> None:
        """Re-read the partition states of ``keys`` in one pipelined read that sets
        their next watches, and announce those whose zkVersion changed."""
        for key, known, got, appeared in await self._read_states_watched(keys):
            _, topic, partition = key
            if got is None:
                known.versions.pop(partition, None)
                if appeared:  # created after its read: read it now
                    self._mark_dirty(key)
                continue
            if known.versions.get(partition) == got[1].version:
                continue
            state = TopicPartitionStateZNode.decode(got[0], zk_version=got[1].version)
            known.versions[partition] = state.version
            self._emit(state_event(topic, partition, state))

    async def _refresh_admin(self, name: str) -> None:
        found = await self._call(self._client.get_or_none, AdminRequestZNode.path(name))
        data = None if found is None else found[0]
        if data == self._admin.get(name):
            return
        self._admin[name] = data
        if data is not None:
            self._emit(MetadataEvent(EventKind.ADMIN_REQUEST, extra={"name": name}))

    async def _refresh_config_changes(self) -> None:
        names, changed = await self._call(self._read_config_changes,
                                          frozenset(self._config_changes))
        self._config_changes = set(names)
        for entity_type, name in changed:
            if entity_type == TOPIC_CONFIG_ENTITY:
                self._emit(config_changed_event(name))

    # --- blocking reads behind the re-reads (on the pool) -------------------------------------

    def _read_brokers(self) -> dict[int, int]:
        zk = self._client
        ids = [int(c) for c in zk.children(BrokerIdsZNode.path) if c.isdigit()]
        stats = zip(ids, zk.exists_many(BrokerIdZNode.path(i) for i in ids), strict=True)
        return {i: stat.czxid for i, stat in stats if stat is not None}

    def _read_controller(self) -> tuple[int | None, int]:
        found = self._client.get_or_none(ControllerZNode.path)
        epoch = self._client.get_or_none(ControllerEpochZNode.path)
        return (None if found is None else ControllerZNode.decode(found[0]),
                0 if epoch is None else ControllerEpochZNode.decode(epoch[0]))

    def _read_topic_view(self, name: str) -> TopicView | None:
        zk = self._client
        found = zk.get_or_none(TopicZNode.path(name))
        if found is None:
            return None
        assignment = TopicZNode.decode(name, found[0])
        partitions = list(assignment.partitions)
        stats = zip(partitions, zk.exists_many(TopicPartitionStateZNode.path(name, p)
                                               for p in partitions), strict=True)
        return TopicView(assignment.topic_id, frozenset(assignment.partitions),
                         {p: stat.version for p, stat in stats if stat is not None},
                         dict(assignment.partitions))

    def _read_config_changes(
        self, handled: frozenset[str]
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """All notification names, and the (entity type, name) of those not handled yet,
        in sequence order."""
        zk = self._client
        names = sorted(zk.children(ConfigEntityChangeNotificationZNode.path))
        new = [n for n in names if n not in handled]
        base = ConfigEntityChangeNotificationZNode.path
        found = zk.get_many(f"{base}/{n}" for n in new)
        changed = [ConfigEntityChangeNotificationSequenceZNode.decode(found[f"{base}/{n}"][0])
                   for n in new if f"{base}/{n}" in found]
        return names, changed


def _topic_watches(name: str, partitions: Iterable[int]) -> list[tuple[Key, str, bool]]:
    return [(("topic", name), TopicZNode.path(name), False), *_state_watches(name, partitions)]


def _state_watches(name: str, partitions: Iterable[int]) -> list[tuple[Key, str, bool]]:
    return [(("state", name, p), TopicPartitionStateZNode.path(name, p), False)
            for p in sorted(partitions)]
