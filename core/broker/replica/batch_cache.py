"""Decode each fetched batch once: a bounded LRU of decoded batches for readers.

Readers near the tail (several groups, range readers, a consumer re-reading after a
seek) fetch the same batches again and again; decoding a 1000-record batch into
``Record`` objects costs about 1 ms here. ``chunks`` decodes a fetched buffer batch by
batch through this cache and answers index ranges into the cached batches; the API
keeps a JSON-ready rendering of a batch beside it (``CachedBatch.rendered``), so a
batch read again is neither decoded nor rendered again.

Keys are ``(topic, partition, the batch's 61 header bytes)``. The header holds the
base offset, length, leader epoch, CRC-32C of everything after it (attributes,
timestamps, producer fields, every record), so two batches with the same key hold the
same records: nothing needs invalidating when a log is truncated, compacted or deleted
and rewritten (the new batch has another key; the old entry ages out of the LRU).
Memory is bounded by an estimate of the decoded and rendered size (``MAX_BYTES``).
Event-loop only.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from itertools import accumulate
from operator import attrgetter
from typing import Any

from core.broker.types import FetchResult
from core.storage import codec, native
from core.storage.batch import HEADER_SIZE, LOG_APPEND_TIME, BatchHeader, iter_batches
from core.storage.errors import CorruptRecordError
from core.storage.log import FetchData
from core.storage.records import Record, decode_batch

#: Estimated bytes of cached batches kept (raw bytes, renderings, decoded records).
MAX_BYTES = 128 * 1024 * 1024
#: Batches larger than this (bytes on disk) are decoded but not kept.
MAX_BATCH_BYTES = 4 * 1024 * 1024
# Estimates: a batch with one rendering (a bytes object per record, ~190 bytes of JSON
# framing + base64 of key and value) and its raw bytes; Record objects (the object, key
# and value bytes objects, ints, a list slot) when a reader decodes them too.
_RENDERED_PER_RECORD, _RENDERED_PER_BYTE = 200, 2.5
_RECORDS_PER_RECORD, _RECORDS_PER_BYTE = 280, 1

_offset = attrgetter("offset")


class CachedBatch:
    """One fetched batch: its bytes (``raw``), its records' ``offsets`` (ascending), the
    ``records`` decoded on first use, and ``rendered``, a slot for the API's per-format
    renderings (format -> list parallel to the records). ``log_append_time`` is the
    batch's max timestamp for a LogAppendTime batch (it replaces every record's), else
    None."""

    __slots__ = ("_records", "_sizes", "log_append_time", "nbytes", "offsets", "owner", "raw",
                 "rendered")

    def __init__(self, raw: bytes, h: BatchHeader) -> None:
        self.raw = raw
        self.owner: BatchCache | None = None
        self._records: list[Record] | None = None
        self.log_append_time = h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else None
        self.offsets: Sequence[int]
        if h.records_count == h.last_offset_delta + 1:  # not compacted: no gaps
            self.offsets = range(h.base_offset, h.last_offset + 1)
        else:
            self.offsets = list(map(_offset, self.records))
        self.rendered: dict[str, list[bytes]] = {}
        self._sizes: list[int] | None = None
        self.nbytes = int(len(raw) * _RENDERED_PER_BYTE) + h.records_count * _RENDERED_PER_RECORD

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
                     high_watermark: int, log_start_offset: int,
                     decode: bool = True) -> FetchResult:
        """The records of a fetch from ``offset`` (``data``: whole batches) below the HW
        as a ``FetchResult`` whose records are ``FetchedRecords`` (left undecoded with
        ``decode=False``)."""
        records: list[Record] = []
        next_offset = offset
        if data.data:
            fetched = records = FetchedRecords(
                self.chunks(topic, partition, data.data, min_offset=offset,
                            max_offset=high_watermark), decode=decode)
            next_offset = fetched.next_offset or offset
        if data.data and next_offset == offset:  # compacted gap: skip past the batches read
            next_offset = max(offset, min(data.high_offset, high_watermark))
        return FetchResult(topic, partition, high_watermark, log_start_offset, records,
                           next_offset)

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


class FetchedRecords(list[Record]):
    """A fetch's records (a plain list of ``Record``) that also knows the cached batch
    ranges they come from (``chunks``), for readers that work per batch. With
    ``decode=False`` the list stays empty: readers that answer from per-batch
    renderings never pay for ``Record`` objects; ``count`` is the number of records
    either way."""

    __slots__ = ("chunks", "count")

    def __init__(self, chunks: list[Chunk], *, decode: bool = True) -> None:
        super().__init__()
        self.chunks = chunks
        self.count = sum(hi - lo for _b, lo, hi in chunks)
        if decode:
            extend = self.extend
            for batch, lo, hi in chunks:
                extend(batch.records if lo == 0 and hi == len(batch.records)
                       else batch.records[lo:hi])

    @property
    def next_offset(self) -> int | None:
        """The offset after the last record, None when there is none."""
        if not self.chunks:
            return None
        batch, _lo, hi = self.chunks[-1]
        return batch.offsets[hi - 1] + 1


