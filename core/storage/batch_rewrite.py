"""Filter records out of a v2 batch and re-encode what is left (compaction's inner loop).

This is Kafka's ``MemoryRecords.filterTo`` for one batch. A rewritten batch keeps:

- its base offset and its original ``lastOffsetDelta`` (so the producer's last sequence
  survives), partition leader epoch, producer id/epoch, base sequence, timestamp type,
  transactional and control bits and its compression codec; only ``recordsCount``,
  ``maxTimestamp``, the records section and the CRC change. Kept records keep their
  offsets, so a compacted batch may have offset gaps and ``recordsCount`` below
  ``lastOffsetDelta + 1``;
- when it still holds tombstones and has no delete horizon yet (KIP-534): attribute
  bit 6 set and ``baseTimestamp = now + delete.retention.ms``. Record timestamp deltas
  are relative to ``baseTimestamp``, whatever it holds, so record timestamps survive.

Tombstones of a batch whose horizon has passed (``now >= horizon``) are dropped, and so
are records without a key. A batch with nothing left disappears unless it is the last
batch of an active producer, which stays as an empty batch (61 header bytes, no
records) so the producer's sequence numbers survive a reload. A batch from which
nothing is removed and which needs no horizon is copied byte for byte.

Record encoding (ZigZag varints, see ``core.storage.records``)::

    length | attributes int8 (0) | timestampDelta | offsetDelta | keyLength | key |
    valueLength | value | headersCount | (keyLength | key | valueLength | value)*
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.storage import codec
from core.storage.batch import (
    CODEC_MASK,
    DELETE_HORIZON_BIT,
    LOG_APPEND_TIME,
    BatchHeader,
    assemble_batch,
)
from core.storage.pure_codec import encode_record

MAX_LONG = 2**63 - 1

IsLatest = Callable[[int, bytes], bool]
"""``is_latest(offset, key)``: whether the record is the newest version of its key."""


@dataclass(frozen=True, slots=True)
class FilteredBatch:
    """The outcome of filtering one batch.

    ``data`` is the batch to write (``None``: drop it entirely); ``removed`` counts the
    records dropped; ``max_timestamp`` / ``max_timestamp_offset`` describe ``data``.
    """

    data: bytes | None
    removed: int
    max_timestamp: int
    max_timestamp_offset: int


def filter_batch(
    batch: bytes,
    header: BatchHeader,
    *,
    is_latest: IsLatest,
    now_ms: int,
    delete_retention_ms: int,
    retain_empty: bool,
    mapped_end: int,
) -> FilteredBatch:
    """Apply compaction's keep rules to ``batch`` (whole batch bytes, ``header`` parsed).

    ``retain_empty``: keep an empty batch if every record goes (the batch is the last
    one of an active producer). ``mapped_end``: the end of the offset map's range;
    tombstones at or above it are kept even past their horizon, because older values
    of their keys were not looked up in this cleaning and would reappear. Control
    batches are copied unchanged.
    """
    unchanged = FilteredBatch(batch, 0, header.max_timestamp, header.last_offset)
    if header.is_control:
        return unchanged
    retain_tombstones = not header.has_delete_horizon or now_ms < header.base_timestamp
    kept: list[codec.RecordTuple] = []
    removed = 0
    has_tombstone = False
    for rec in codec.iter_batch_records(batch):
        offset, _ts, _tt, key, value, _headers = rec
        expired_tombstone = value is None and not retain_tombstones and offset < mapped_end
        if key is None or expired_tombstone or not is_latest(offset, key):
            removed += 1
            continue
        kept.append(rec)
        has_tombstone = has_tombstone or value is None
    set_horizon = has_tombstone and not header.has_delete_horizon
    if removed == 0 and not set_horizon:
        return unchanged
    if not kept:
        if not retain_empty:
            return FilteredBatch(None, removed, -1, -1)
        return FilteredBatch(empty_batch(header), removed, header.max_timestamp, header.last_offset)
    horizon = min(now_ms + max(delete_retention_ms, 0), MAX_LONG) if set_horizon else None
    data, max_ts = encode_batch(header, kept, delete_horizon_ms=horizon)
    return FilteredBatch(data, removed, max_ts, header.last_offset)


def encode_batch(
    header: BatchHeader,
    records: list[codec.RecordTuple],
    *,
    delete_horizon_ms: int | None = None,
) -> tuple[bytes, int]:
    """Re-encode ``records`` (non-empty) under ``header``'s fields; returns the batch
    bytes and its maxTimestamp.

    ``delete_horizon_ms`` sets attribute bit 6 and stores the horizon in baseTimestamp;
    otherwise the original baseTimestamp (which may already be a horizon) is kept.
    """
    attributes = header.attributes
    base_ts = header.base_timestamp
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
        base_ts = delete_horizon_ms
    log_append = header.timestamp_type == LOG_APPEND_TIME
    body = bytearray()
    max_ts = -1
    for offset, ts, _tt, key, value, headers in records:
        # Under LogAppendTime readers report the batch maxTimestamp for every record,
        # and the decoder hands us that value, so the delta carries no information.
        body += encode_record(offset - header.base_offset, ts - base_ts, key, value, headers)
        max_ts = max(max_ts, ts)
    if log_append:
        max_ts = header.max_timestamp
    payload = codec.compress(attributes & CODEC_MASK, bytes(body))
    fields = header._replace(attributes=attributes, base_timestamp=base_ts,
                             max_timestamp=max_ts, records_count=len(records))
    return bytes(assemble_batch(fields, payload)), max_ts


def empty_batch(header: BatchHeader) -> bytes:
    """A record-less batch with ``header``'s offsets and producer fields (Kafka's
    ``writeEmptyHeader``): uncompressed, no delete horizon, timestamps = maxTimestamp."""
    attributes = header.attributes & ~(CODEC_MASK | DELETE_HORIZON_BIT)
    fields = header._replace(attributes=attributes, base_timestamp=header.max_timestamp,
                             records_count=0)
    return bytes(assemble_batch(fields, b""))
