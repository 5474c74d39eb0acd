"""The API's renderings of fetched batches, made once per batch and kept beside it.

The core hands out fetched batches (``core.broker.replica.batch_cache.CachedBatch``)
and keeps the ones read recently in its batch cache; a batch read again is the same
object. ``RenderCache`` keys each batch's JSON fragments (one per record, in the v2
binary format, joined in one ``Rendering``) on that object, weakly: a rendering lives
exactly as long as its batch stays cached, and the core's memory budget of a cached
batch counts one rendering.
One per application (``create_app``), so several brokers in one process share nothing.
Event-loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate
from weakref import WeakKeyDictionary

from core.broker.replica.batch_cache import CachedBatch


class Rendering:
    """A batch's records rendered: their JSON fragments joined by commas in ``text``,
    fragment i ending (exclusive) at ``ends[i]``. One bytes object for the batch, not
    one per record: made, sliced and freed whole."""

    __slots__ = ("ends", "text")

    def __init__(self, text: bytes, ends: Sequence[int]) -> None:
        self.text = text
        self.ends = ends

    @classmethod
    def of_fragments(cls, fragments: list[bytes]) -> Rendering:
        ends = list(accumulate(len(f) + 1 for f in fragments))  # each with its comma
        return cls(b",".join(fragments), [end - 1 for end in ends])

    def __len__(self) -> int:
        return len(self.ends)

    def span(self, lo: int, hi: int) -> bytes:
        """Fragments ``lo..hi-1`` joined by commas (b"" when none)."""
        if hi <= lo:
            return b""
        start = self.ends[lo - 1] + 1 if lo else 0
        end = self.ends[hi - 1]
        text = self.text
        return text if start == 0 and end == len(text) else text[start:end]


class RenderCache:
    def __init__(self) -> None:
        self._binary: WeakKeyDictionary[CachedBatch, Rendering] = WeakKeyDictionary()

    def binary(self, batch: CachedBatch,
               render: Callable[[CachedBatch], Rendering]) -> Rendering:
        """The binary-format rendering of ``batch``: ``render(batch)`` the first time."""
        rendering = self._binary.get(batch)
        if rendering is None:
            rendering = self._binary[batch] = render(batch)
        return rendering

    def get(self, batch: CachedBatch) -> Rendering | None:
        """The binary-format rendering of ``batch`` if it was made, else None."""
        return self._binary.get(batch)

    def __len__(self) -> int:
        return len(self._binary)
