"""The API's renderings of fetched batches, made once per batch and kept beside it.

The core hands out fetched batches (``core.broker.replica.batch_cache.CachedBatch``)
and keeps the ones read recently in its batch cache; a batch read again is the same
object. ``RenderCache`` keys each batch's JSON fragments (one per record, in the v2
binary format) on that object, weakly: a rendering lives exactly as long as its batch
stays cached, and the core's memory budget of a cached batch counts one rendering.
One per application (``create_app``), so several brokers in one process share nothing.
Event-loop only.
"""

from __future__ import annotations

from collections.abc import Callable
from weakref import WeakKeyDictionary

from core.broker.replica.batch_cache import CachedBatch


class RenderCache:
    def __init__(self) -> None:
        self._binary: WeakKeyDictionary[CachedBatch, list[bytes]] = WeakKeyDictionary()

    def binary(self, batch: CachedBatch,
               render: Callable[[CachedBatch], list[bytes]]) -> list[bytes]:
        """The binary-format fragments of ``batch``: ``render(batch)`` the first time."""
        frags = self._binary.get(batch)
        if frags is None:
            frags = self._binary[batch] = render(batch)
        return frags

    def get(self, batch: CachedBatch) -> list[bytes] | None:
        """The binary-format fragments of ``batch`` if it was rendered, else None."""
        return self._binary.get(batch)

    def __len__(self) -> int:
        return len(self._binary)
