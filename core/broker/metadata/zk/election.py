"""The controller's znodes in the ZooKeeper store: election, epoch fence, admin requests.

- ``try_elect_controller`` (Kafka's ``registerControllerAndIncrementControllerEpoch``):
  read ``/controller``; if absent, read ``/controller_epoch`` (created as ``0``) and in
  one multi-op check the candidate's registration, create ephemeral ``/controller`` and
  set ``/controller_epoch`` to epoch+1 at the zkVersion read. NODEEXISTS/BADVERSION: lost.
  A ``/controller`` of the candidate created by this session that the store holds no
  fence for is a won election whose answer was lost: the role is adopted.
- Epoch fencing: the winning store keeps (epoch, zkVersion of ``/controller_epoch``) and
  starts every topic, config and partition-state multi-op (``_txn``) with a ``check`` of
  that zkVersion, so once another broker has been elected these writes fail with
  ``NotControllerError`` (Kafka's ControllerMovedException), also after this store's
  session expired. The fence is dropped only when this store itself releases the role
  (``unregister_broker``, or a registration replaced: ``brokers``) or when a later
  ``try_elect_controller`` fails while another session holds ``/controller``; from then
  on the store's writes go unchecked, as a plain broker's.
- Admin requests (``/admin/reassign_partitions``, ``/admin/preferred_replica_election``):
  ``create_admin_request`` creates one unless one is pending (then False), the controller
  reads it and deletes it when done; these writes are not fenced.

State: ``_fence``, the controller role this store won (``Fence``), or None.
"""

from __future__ import annotations

import logging

from kazoo import exceptions as kz
from kazoo.protocol.states import ZnodeStat

from core.broker.metadata.events import controller_event
from core.broker.metadata.store import EventKind, MetadataEvent
from core.broker.metadata.zk.base import ZkStoreBase
from core.broker.metadata.zk.client import Fence, OpFailed, Txn
from core.broker.metadata.zk.paths import (
    AdminRequestZNode,
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
)
from core.clock import Clock

log = logging.getLogger(__name__)


class ZkControllerElection(ZkStoreBase):
    """The controller election, its fence and the admin requests (module docstring)."""

    def __init__(self, connect: str, *, clock: Clock, session_timeout_s: float = 18.0) -> None:
        super().__init__(connect, clock=clock, session_timeout_s=session_timeout_s)
        self._fence: Fence | None = None

    # --- controller ---------------------------------------------------------------------------

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

    # --- admin requests (/admin/reassign_partitions, /admin/preferred_replica_election) -------

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

    # --- the fence ----------------------------------------------------------------------------

    def _txn(self, *, fenced: bool = True) -> Txn:
        return self._client.txn(self._fence if fenced else None)

    def _maybe_released(self, released: int | None) -> None:
        if released is not None:
            self._view.controller_written(None)
            self._emit(controller_event(None, released))

    # --- blocking bodies: controller ----------------------------------------------------------

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

    # --- blocking bodies: admin requests ------------------------------------------------------

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
