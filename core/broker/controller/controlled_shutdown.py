"""A broker's controlled shutdown (kafka-internals 3.3), as the broker going away asks it.

Before its fetchers stop and its logs close, a broker that leads partitions with other
replicas asks the active controller (itself, or another broker over the internal API)
to move that leadership away and drop it from the ISRs; it asks again every
``RETRY_S`` until it leads none of them or ``controlled.shutdown.timeout.ms`` has
passed (then it stops anyway: a plain shutdown, the controller reacts to its session
ending). A broker alone in its cluster has nothing to hand over, and it stops asking as
soon as the controller answers that nothing it leads can move any more (every other
replica is gone or shutting down too: a whole cluster stopping at once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from core.broker.controller.controller import Controller
from core.broker.metadata.store import MetadataStore

log = logging.getLogger(__name__)

Address = tuple[str, int]
RETRY_S = 0.2


class ShutdownClient(Protocol):
    """The controller's internal API, as a broker going away calls it."""

    async def controlled_shutdown(self, address: Address, broker_id: int) -> int: ...


class ControlledShutdown:
    """``leads_shared_partitions()``: this broker still leads a partition with other
    replicas; ``live_brokers()``: how many brokers are registered."""

    def __init__(self, broker_id: int, controller: Controller, store: MetadataStore,
                 client: ShutdownClient | None, *,
                 address_of: Callable[[int], Address | None],
                 leads_shared_partitions: Callable[[], bool],
                 live_brokers: Callable[[], int],
                 enabled: bool = True, timeout_ms: int = 30_000) -> None:
        self._broker_id = broker_id
        self._controller = controller
        self._store = store
        self._client = client
        self._address_of = address_of
        self._leads_shared_partitions = leads_shared_partitions
        self._live_brokers = live_brokers
        self._enabled = enabled
        self._timeout_s = timeout_ms / 1000

    async def run(self) -> None:
        if not self._enabled or self._live_brokers() <= 1:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        while loop.time() < deadline:
            if not self._leads_shared_partitions() or self._live_brokers() <= 1:
                return  # nothing to hand over, or nobody left to take it
            try:
                movable = await self._request()
            except Exception as exc:  # best effort: a plain shutdown follows
                log.warning("controlled shutdown request failed: %s", exc)
                movable = None
            if movable == 0:
                log.info("controlled shutdown: what is still led here has no other replica "
                         "that can take it")
                return
            await asyncio.sleep(RETRY_S)
        log.warning("controlled shutdown: some partitions are still led here; exiting anyway")

    async def _request(self) -> int | None:
        """The controller's answer: how many partitions led here can still move (None:
        no controller to ask right now)."""
        if self._controller.is_active:
            return await self._controller.controlled_shutdown(self._broker_id)
        controller = await self._store.controller_id()
        address = None if controller is None else self._address_of(controller)
        if address is None or self._client is None:
            return None
        return await self._client.controlled_shutdown(address, self._broker_id)
