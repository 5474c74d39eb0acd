"""What a read hands out: fetched batches and ranges of their records, decoded at most once.

A read of a partition answers whole record batches as bytes (``FetchData``). This module
turns them into the one type every reader of the core gets, :class:`FetchResult`: the
partition's positions plus ``chunks``, ranges ``(batch, lo, hi)`` of
:class:`CachedBatch` objects (the batch's bytes, its records' offsets and sizes, its
``Record`` objects decoded on first use only). Nothing is decoded for a reader that
works per batch (the API renders a batch's JSON once and slices it; the consumer read
cuts at ``max_bytes`` with the batch's cumulative sizes).

Readers near the tail (several groups, range readers, a consumer re-reading after a
seek) fetch the same batches again and again; decoding a 1000-record batch into
``Record`` objects costs about 1 ms here. ``BatchCache`` keeps the batches recently
read, so a batch read again is found with what was derived from it (its records here;
the API keys its renderings on the same objects, weakly).

Keys are ``(topic, partition, the batch's 61 header bytes)``. The header holds the
base offset, length, leader epoch, CRC-32C of everything after it (attributes,
timestamps, producer fields, every record), so two batches with the same key hold the
same records: nothing needs invalidating when a log is truncated, compacted or deleted
and rewritten (the new batch has another key; the old entry ages out of the LRU).
Memory is bounded by an estimate of each batch with what readers derive from it (one
JSON rendering by the API, decoded records) (``MAX_BYTES``). Event-loop only.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import attrgetter
from typing import Any

from core.storage import codec, native
from core.storage.batch import HEADER_SIZE, LOG_APPEND_TIME, BatchHeader, iter_batches
from core.storage.errors import CorruptRecordError
from core.storage.log import FetchData
from core.storage.records import Record, decode_batch

#: Estimated bytes of cached batches kept (raw bytes, an API rendering, decoded records).
MAX_BYTES = 128 * 1024 * 1024
#: Batches larger than this (bytes on disk) are decoded but not kept.
MAX_BATCH_BYTES = 4 * 1024 * 1024
# Estimates: a batch with one rendering (its records' JSON in one bytes object, ~190
# bytes of framing per record + base64 of key and value) and its raw bytes; Record objects (the object, key
# and value bytes objects, ints, a list slot) when a reader decodes them too.
_RENDERED_PER_RECORD, _RENDERED_PER_BYTE = 200, 2.5
_RECORDS_PER_RECORD, _RECORDS_PER_BYTE = 280, 1

_offset = attrgetter("offset")


class CachedBatch:
    """One fetched batch: its bytes (``raw``), its records' ``offsets`` (ascending) and
    the ``records`` decoded on first use. ``log_append_time`` is the batch's max
    timestamp for a LogAppendTime batch (it replaces every record's), else None. Weakly
    referenceable: readers may keep what they derive from a batch beside it, for as
    long as the batch lives."""

    __slots__ = ("__weakref__", "_records", "_sizes", "log_append_time", "nbytes", "offsets",
                 "owner", "raw")

    def __init__(self, raw: bytes, h: BatchHeader) -> None:
        self.raw = raw
        self.owner: BatchCache | None = None
        self._records: list[Record] | None = None
        self.log_append_time = h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else None
        self._sizes: list[int] | None = None
        # set before ``records`` is read below: decoding adds its own estimate to it
        self.nbytes = int(len(raw) * _RENDERED_PER_BYTE) + h.records_count * _RENDERED_PER_RECORD
        self.offsets: Sequence[int]
        if h.records_count == h.last_offset_delta + 1:  # not compacted: no gaps
            self.offsets = range(h.base_offset, h.last_offset + 1)
        else:  # compaction took records out (or left an empty batch): the offsets read
            self.offsets = list(map(_offset, self.records))

    @property
    def records(self) -> list[Record]:
        """The records as ``Record`` objects (decoded once)."""
        if self._records is None:
            self._records = decode_batch(self.raw, 0)
            extra = len(self.raw) * _RECORDS_PER_BYTE + len(self._records) * _RECORDS_PER_RECORD
            self.nbytes += extra
            if self.owner is not None:
                self.owner.grew(extra)
        return self._records

    def record_objects(self) -> Sequence[Any]:
        """Objects with the attributes of ``Record`` (offset, timestamp, timestamp_type,
        key, value, headers): the decoded records when there are, else the C decoder's
        own objects, cheaper to make (their ``timestamp`` is not replaced by
        ``log_append_time``)."""
        return self._records if self._records is not None else codec.batch_record_objects(
            self.raw)

    def cumulative_sizes(self) -> list[int]:
        """``s[i]`` = key + value bytes of ``records[:i]`` (``len(records) + 1`` items)."""
        if self._sizes is None:
            self._sizes = native.record_sizes(self.raw)  # None without the C extension
        if self._sizes is None:
            self._sizes = [0, *accumulate(
                len(r.key or b"") + len(r.value or b"") for r in self.record_objects())]
        return self._sizes


#: (batch, lo, hi): the records ``batch.records[lo:hi]``.
Chunk = tuple[CachedBatch, int, int]


class BatchCache:
    """One broker's cache (the facade owns it). Event-loop only."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._lru: OrderedDict[tuple[str, int, bytes], CachedBatch] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        self._lru.clear()
        self.nbytes = 0

    def batch(self, topic: str, partition: int, data: bytes | bytearray | memoryview,
              pos: int, h: BatchHeader) -> CachedBatch:
        key = (topic, partition, bytes(data[pos : pos + HEADER_SIZE]))
        lru = self._lru
        found = lru.get(key)
        if found is not None:
            lru.move_to_end(key)
            self.hits += 1
            return found
        self.misses += 1
        size = h.size
        if pos + size > len(data):
            raise CorruptRecordError("batch runs past the end of the buffer")
        batch = CachedBatch(bytes(data[pos : pos + size]), h)
        if h.size <= MAX_BATCH_BYTES and batch.nbytes <= self.max_bytes:
            lru[key] = batch
            batch.owner = self
            self.grew(batch.nbytes)
        return batch

    def grew(self, nbytes: int) -> None:
        """A kept batch (or a new one) takes ``nbytes`` more: evict the oldest to fit."""
        self.nbytes += nbytes
        lru = self._lru
        while self.nbytes > self.max_bytes and lru:
            _k, old = lru.popitem(last=False)
            old.owner = None
            self.nbytes -= old.nbytes

    def fetch_result(self, topic: str, partition: int, offset: int, data: FetchData, *,
                     high_watermark: int, log_start_offset: int) -> FetchResult:
        """The records of a read from ``offset`` (``data``: whole batches) below the HW."""
        chunks: list[Chunk] = []
        next_offset = offset
        if data.data:
            chunks = self.chunks(topic, partition, data.data, min_offset=offset,
                                 max_offset=high_watermark)
            if chunks:
                batch, _lo, hi = chunks[-1]
                next_offset = batch.offsets[hi - 1] + 1
            else:  # compacted gap: skip past the batches read
                next_offset = max(offset, min(data.high_offset, high_watermark))
        return FetchResult(topic, partition, high_watermark, log_start_offset, next_offset,
                           chunks)

    def chunks(self, topic: str, partition: int, data: bytes | bytearray | memoryview, *,
               min_offset: int, max_offset: int | None) -> list[Chunk]:
        """The records of ``data`` (fetched whole batches; a partial batch at the end is
        ignored, control batches skipped) with ``min_offset <= offset < max_offset``,
        as index ranges into cached batches, in offset order."""
        out: list[Chunk] = []
        for pos, h in iter_batches(data):
            if h.last_offset < min_offset or h.is_control:
                continue
            if max_offset is not None and h.base_offset >= max_offset:
                break
            batch = self.batch(topic, partition, data, pos, h)
            offs = batch.offsets
            lo, hi = 0, len(offs)
            if h.base_offset < min_offset:
                lo = bisect_left(offs, min_offset)
            if max_offset is not None and h.last_offset >= max_offset:
                hi = bisect_left(offs, max_offset, lo)
            if lo < hi:
                out.append((batch, lo, hi))
        return out


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One partition's read: the records from the offset asked for up to the high
    watermark as ranges of fetched batches (``chunks``, in offset order), the offset
    after them (``next_offset``; past a compacted gap when the batches read held no
    record in range), and the partition's positions at the time of the read."""

    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    next_offset: int
    chunks: Sequence[Chunk]

    @property
    def count(self) -> int:
        return sum(hi - lo for _b, lo, hi in self.chunks)

    @property
    def records(self) -> list[Record]:
        """The records as ``Record`` objects (each batch decoded once, in the cache)."""
        return list(iter_records(self.chunks))


def iter_records(chunks: Sequence[Chunk]) -> Iterator[Record]:
    for batch, lo, hi in chunks:
        records = batch.records
        yield from (records if lo == 0 and hi == len(records) else records[lo:hi])
