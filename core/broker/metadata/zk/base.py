"""What the parts of the ZooKeeper store share: ``ZkStoreBase``.

The state every part of ``ZkMetadataStore`` uses: the kazoo client once started
(``_client``; ``None`` before ``start()`` and after ``close()``), the lock that one write or
re-read holds at a time (``_lock``), the store's view of the cluster that the watches keep
current (``_view``, ``core.broker.metadata.zk.watches``), the listeners (``_emit``) and the
tasks to cancel on close (``_spawn``). ``_call`` runs a blocking body on the blocking-work
pool through ``core.broker.metadata.zk.client.call``, which bounds it by the session timeout
and translates what the body left untranslated.

The mixins built on it add their own state: ``election`` (the controller fence),
``brokers`` (registrations, session handling); ``store`` starts and closes it all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from core.broker.metadata.events import Listeners
from core.broker.metadata.store import MetadataEvent
from core.broker.metadata.zk.client import ZkClient, call, split_connect
from core.broker.metadata.zk.watches import ZkClusterView
from core.clock import Clock

log = logging.getLogger(__name__)

T = TypeVar("T")

RACE_RETRIES = 5  # re-reads after a lost optimistic race before giving up


class ZkStoreBase:
    """The shared state and plumbing of ``ZkMetadataStore`` (see the module docstring)."""

    def __init__(self, connect: str, *, clock: Clock, session_timeout_s: float = 18.0) -> None:
        self._hosts, self._chroot = split_connect(connect)
        self._clock = clock
        self._timeout_s = session_timeout_s
        self._zk: ZkClient | None = None
        self._listeners = Listeners(log)
        self._lock = asyncio.Lock()  # one write or re-read at a time
        # The store's view of the cluster, compared with re-reads to find what changed.
        self._view = ZkClusterView(lock=self._lock, emit=self._emit)
        self._tasks: set[asyncio.Task[None]] = set()

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

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
