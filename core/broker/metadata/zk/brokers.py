"""Broker registrations in the ZooKeeper store, and what a session expiry does to them.

- ``cluster_id``: ``/cluster/id``, created by the first store that asks.
- ``register_broker``: ephemeral ``/brokers/ids/<id>`` (its endpoint's scheme the store's
  ``listener_scheme`` when given); the broker epoch is its czxid. A
  registration of the same id left by another session (an unclean restart whose session
  has not expired yet) is replaced, and the controller role it held released with it, as
  the embedded store does; unless its endpoint still accepts connections (a live broker
  holds the id): ``BrokerIdInUseError``.
- ``unregister_broker``: deletes the registration and the controller role it holds in one
  multi-op (``election`` drops this store's fence with it).

Sessions: on expiry (kazoo LOST) ZooKeeper has dropped the ephemeral nodes; when kazoo is
connected on a new session, the brokers registered through this store are registered
again (new epoch) and ``BROKERS_CHANGED`` announced - unless another session registered
the id meanwhile (a new incarnation of the broker): that is logged as an error and left
alone, so two processes never fight over an id. The controller role is not taken back:
the broker must run for it again (``CONTROLLER_CHANGED`` tells it the role is free).

State: ``_registrations`` (the brokers registered through this store), ``_cluster_id``
(read once), ``_session_lost`` (set and read on kazoo's connection thread).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket

from kazoo import exceptions as kz
from kazoo.protocol.states import KazooState, ZnodeStat

from core.broker.metadata.events import brokers_event
from core.broker.metadata.rules import new_cluster_id
from core.broker.metadata.store import (
    BrokerIdInUseError,
    BrokerRegistration,
    EventKind,
    MetadataEvent,
    MetadataStoreError,
)
from core.broker.metadata.zk.base import RACE_RETRIES
from core.broker.metadata.zk.client import OpFailed
from core.broker.metadata.zk.election import ZkControllerElection
from core.broker.metadata.zk.paths import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ClusterIdZNode,
    ControllerZNode,
    MalformedZNodeError,
)
from core.broker.metadata.zk.watches import REFRESH_RETRY_S
from core.clock import Clock

log = logging.getLogger(__name__)


class ZkBrokers(ZkControllerElection):
    """The cluster id, broker registrations and session handling (module docstring)."""

    def __init__(self, connect: str, *, clock: Clock, session_timeout_s: float = 18.0,
                 listener_scheme: str | None = None) -> None:
        super().__init__(connect, clock=clock, session_timeout_s=session_timeout_s)
        # The scheme of the broker's first listener, given to the store by the process
        # that knows its listeners (``app.assembly``); None: the registrations' own.
        self._listener_scheme = listener_scheme
        self._cluster_id: str | None = None
        self._registrations: dict[int, BrokerRegistration] = {}
        self._session_lost = False  # set on a kazoo thread, read there

    # --- cluster and brokers ------------------------------------------------------------------

    async def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = await self._call(self._get_or_create_cluster_id)
        return self._cluster_id

    async def register_broker(self, reg: BrokerRegistration) -> BrokerRegistration:
        reg = dataclasses.replace(reg, timestamp_ms=reg.timestamp_ms or self._clock.now_ms(),
                                  scheme=self._listener_scheme or reg.scheme)
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

    # --- blocking bodies: cluster and brokers -------------------------------------------------

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
        for _ in range(RACE_RETRIES):
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
                self._refuse_if_alive(reg, path, old)
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

    def _refuse_if_alive(self, reg: BrokerRegistration, path: str, old: ZnodeStat) -> None:
        """Another session holds ``reg.broker_id``: a stale registration of a process that
        died (its session not expired yet) is taken over, but if the registered endpoint
        accepts connections a live broker holds the id: BrokerIdInUseError. A registration
        at this broker's own endpoint is its own previous life: this process listens
        there already (the listeners are bound before the broker registers), so no other
        broker can."""
        broker_id = reg.broker_id
        found = self._client.get_or_none(path)
        if found is None:
            return
        try:
            holder = BrokerIdZNode.decode(broker_id, found[0], czxid=found[1].czxid)
        except MalformedZNodeError:
            return
        if (holder.host, holder.port) == (reg.host, reg.port):
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
        for _ in range(RACE_RETRIES):
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

    def _live_brokers(self) -> list[BrokerRegistration]:
        ids = sorted(int(c) for c in self._client.children(BrokerIdsZNode.path) if c.isdigit())
        found = self._client.get_many(BrokerIdZNode.path(i) for i in ids)
        brokers = []
        for i in ids:
            got = found.get(BrokerIdZNode.path(i))
            if got is not None:
                brokers.append(BrokerIdZNode.decode(i, got[0], czxid=got[1].czxid))
        return brokers

    # --- session ------------------------------------------------------------------------------

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
