"""The v2 (magic 2) record batch header and batch framing.

Layout (big-endian), 61 bytes, then the records section::

    0  baseOffset            int64   patched by the leader; not covered by the CRC
    8  batchLength           int32   bytes after this field = batch size - 12
    12 partitionLeaderEpoch  int32   patched by the leader; not covered by the CRC
    16 magic                 int8    2
    17 crc                   uint32  CRC-32C of bytes 21..end
    21 attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional,
                                     5 control, 6 delete horizon set
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records (possibly compressed as a whole)

Assigning offsets and the leader epoch touches only bytes 0-7 and 12-15, so the
leader patches them in place and the CRC stays valid.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from core.storage.codec import crc32c
from core.storage.errors import CorruptRecordError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
assert HEADER_SIZE == 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
FRAME = struct.Struct(">qiib")  # the first 17 bytes: enough to walk a file
_EPOCH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_MAX_TS = struct.Struct(">q")
_ATTRS = struct.Struct(">h")
_CRC = struct.Struct(">I")

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The parsed 61-byte header of one batch (a tuple: parsing is on every hot path)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)


_new_header = tuple.__new__


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; CorruptRecordError if it is not a sane v2 header."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch header at byte {pos} is truncated")
    h = _new_header(BatchHeader, HEADER.unpack_from(buf, pos))
    if h.magic != 2:
        raise CorruptRecordError(f"unsupported record batch magic {h.magic} (only v2 is accepted)")
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {h.batch_length} is below the v2 minimum")
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise CorruptRecordError("negative lastOffsetDelta or recordsCount")
    return h


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch at ``pos`` of ``size`` bytes."""
    return crc32c(memoryview(buf)[pos + 21 : pos + size])


class BuiltBatch(bytearray):
    """One whole v2 batch the produce path's record builder wrote in this process
    (``native.encode_batch``): framing, CRC, record count, offset deltas and sequence
    fields are right by construction, so a leader's append checks only what the topic's
    configuration may refuse (``log_validator.validate_client_batches``). Only this exact
    type is trusted; a slice, a copy as bytes or bytearray, or several batches joined
    are plain buffers again and are checked in full."""

    __slots__ = ()


class CheckedBatches(bytearray):
    """Whole v2 batches from outside this process whose CRCs and every record
    ``log_validator.validate_untrusted_records`` checked here, with their headers
    (``batches``: ``(position, header)`` each): the leader's append checks what the
    topic's configuration and the producer state may refuse, not the CRC again. Only
    this exact type is trusted, and only as that function made it: franz never changes
    its bytes before the append."""

    __slots__ = ("batches",)
    batches: list[tuple[int, BatchHeader]]


def assemble_batch(header: BatchHeader, payload: bytes | bytearray | memoryview,
                   cls: type[bytearray] = bytearray) -> bytearray:
    """A whole batch: ``header``'s fields (its ``batch_length``, ``magic`` and ``crc``
    ignored: set from ``payload``, 2, and computed) followed by ``payload`` (the records
    section, compressed or not), as a ``cls``."""
    size = HEADER_SIZE + len(payload)
    buf = cls(size)
    HEADER.pack_into(buf, 0, header.base_offset, size - LOG_OVERHEAD,
                     header.partition_leader_epoch, 2, 0, *header[5:])
    buf[HEADER_SIZE:] = payload
    _CRC.pack_into(buf, 17, compute_crc(buf, 0, size))
    return buf


def is_crc_valid(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def patch_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    _OFFSET.pack_into(buf, pos, base_offset)


def patch_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    _EPOCH.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray, pos: int, header: BatchHeader, now_ms: int) -> None:
    """Stamp LogAppendTime: set the attribute bit and maxTimestamp, then recompute the CRC
    (both fields are covered by it)."""
    _ATTRS.pack_into(buf, pos + 21, header.attributes | TIMESTAMP_TYPE_BIT)
    _MAX_TS.pack_into(buf, pos + 35, now_ms)
    _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, header.size))


_PRODUCER = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at 43


def set_producer(buf: bytearray, producer_id: int, producer_epoch: int,
                 base_sequence: int) -> int:
    """Stamp every batch of ``buf`` (whole batches) with an idempotent producer: the id
    and epoch, and sequences running on from ``base_sequence`` (each batch's base is the
    previous one's plus its records, modulo 2^31, as Kafka's producer numbers them);
    CRCs recomputed. Returns the records stamped."""
    seq, total = base_sequence, 0
    for pos, h in split_batches(buf):
        _PRODUCER.pack_into(buf, pos + 43, producer_id, producer_epoch, seq)
        _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, h.size))
        seq = (seq + h.records_count) % 2**31
        total += h.records_count
    return total


def iter_batches(
    buf: bytes | bytearray | memoryview, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Walk whole batches in ``buf[start:end]``: yields ``(position, header)``.

    Stops silently at a partial batch at the end (a torn tail or a cut read); raises
    CorruptRecordError for an impossible header. CRCs are not checked here.
    """
    end = len(buf) if end is None else end
    pos = start
    while end - pos >= HEADER_SIZE:
        h = parse_header(buf, pos)
        if pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def split_batches(data: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """All batches of a produce payload, which must consist of whole batches only."""
    out = list(iter_batches(data))
    used = out[-1][0] + out[-1][1].size if out else 0
    if used != len(data):
        raise CorruptRecordError(
            f"record data has {len(data) - used} trailing bytes that are not a whole batch"
        )
    return out
