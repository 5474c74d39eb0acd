"""Validation and offset assignment for appends (Kafka's ``LogValidator`` and
``UnifiedLog.analyzeAndValidateRecords``), on whole v2 batches.

All checks work per batch from the 61-byte header, never per record, except the key
check on compacted topics, which has to decode the records (in C), and
``validate_untrusted_records`` for payloads built outside this process (the internal
API's appends), which decodes every record as readers will. Client timestamps
are bounded at batch level: ``baseTimestamp`` (the first record's) against
``message.timestamp.before.max.ms`` and ``maxTimestamp`` against
``message.timestamp.after.max.ms``; a record inside a batch that is older than the
batch's first record is not checked on its own.

Offsets and the leader epoch are patched in place (bytes 0-7 and 12-15, outside the
CRC); LogAppendTime rewrites maxTimestamp and the attributes and recomputes the CRC.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from core.storage import codec, native
from core.storage.batch import (
    BatchHeader,
    BuiltBatch,
    CheckedBatches,
    is_crc_valid,
    parse_header,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
    split_batches,
)
from core.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    NonMonotonicAppendError,
)
from core.storage.segment import BatchSpan

if TYPE_CHECKING:
    from core.storage.config import LogConfig

Buffer = bytes | bytearray | memoryview

NO_TIMESTAMP = -1
LOG_APPEND_TIME_NAME = "LogAppendTime"


class ValidatedAppend(NamedTuple):
    """Batches ready to be written: ``data`` carries final offsets and epochs."""

    data: bytearray
    first_offset: int
    last_offset: int
    max_timestamp: int
    max_timestamp_offset: int
    num_records: int
    spans: list[BatchSpan]


def as_buffer(data: bytes | bytearray | memoryview) -> bytearray:
    """The append buffer: a ``bytearray`` is patched in place, anything else is copied."""
    return data if isinstance(data, bytearray) else bytearray(data)


def validate_client_batches(
    buf: bytearray, config: LogConfig, *, now_ms: int, where: str
) -> list[tuple[int, BatchHeader]]:
    """Every batch of a produce payload, or the first error found (nothing is written
    by the caller if this raises). ``where`` names the partition in messages. A
    ``BuiltBatch`` (this process's produce path built it) is checked against the
    topic's configuration only (its CRC, ~5 us per 110 KB, was just computed); the
    batches of ``CheckedBatches`` (``validate_untrusted_records``) skip their CRC."""
    if type(buf) is BuiltBatch:
        h = parse_header(buf, 0)
        if h.size == len(buf):
            _check_size(h, config, where=where)
            _check_records_against_config(buf, 0, h, config, now_ms=now_ms, where=where)
            return [(0, h)]
    checked = type(buf) is CheckedBatches
    batches = buf.batches if checked else split_batches(buf)  # type: ignore[attr-defined]
    for pos, header in batches:
        _validate_client_batch(buf, pos, header, config, now_ms=now_ms, where=where,
                               crc_checked=checked)
    return batches


def _validate_client_batch(
    buf: bytearray, pos: int, h: BatchHeader, config: LogConfig, *, now_ms: int, where: str,
    crc_checked: bool = False,
) -> None:
    _check_size(h, config, where=where)
    if not crc_checked:
        _check_crc(buf, pos, h, where=where)
    if h.last_offset_delta + 1 != h.records_count:
        raise InvalidRecordError(
            f"record batch in the append to {where} has lastOffsetDelta {h.last_offset_delta} "
            f"but {h.records_count} records"
        )
    if h.is_control:
        raise InvalidRecordError(f"clients may not write control batches (append to {where})")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {h.base_sequence} in a batch of producer {h.producer_id}"
        )
    _check_records_against_config(buf, pos, h, config, now_ms=now_ms, where=where)


def _check_size(h: BatchHeader, config: LogConfig, *, where: str) -> None:
    if h.size > config.max_message_bytes:
        raise MessageTooLargeError(
            f"the record batch size in the append to {where} is {h.size} bytes, which exceeds "
            f"the maximum configured value of {config.max_message_bytes} (max.message.bytes)"
        )


def _check_records_against_config(
    buf: bytearray, pos: int, h: BatchHeader, config: LogConfig, *, now_ms: int, where: str
) -> None:
    """Timestamps within the topic's bounds; every record keyed on a compacted topic."""
    if config.message_timestamp_type != LOG_APPEND_TIME_NAME:
        _validate_timestamps(h, config, now_ms=now_ms, where=where)
    if config.compact:
        _validate_keys(buf, pos, h, where=where)


def _check_crc(buf: Buffer, pos: int, h: BatchHeader, *, where: str) -> None:
    if not is_crc_valid(buf, pos, h):
        raise CorruptRecordError(
            f"record batch at byte {pos} of the append to {where} fails its CRC"
        )


def validate_untrusted_records(data: Buffer, *, where: str) -> CheckedBatches:
    """Decode every record of a payload built outside this process (a Kafka client's
    produce, the internal API's appends) the way readers will, so nothing written can
    fail a later read: whole batches, CRCs, record lengths, key/value/header framing,
    the record count and consecutive offset deltas. Client produces skip this: franz
    built their batches. CorruptRecordError (framing, CRC, decoding) or
    InvalidRecordError (offsets). The answer is a copy of ``data`` the append trusts
    for what was checked here, so no CRC is computed twice."""
    buf = CheckedBatches(data)
    batches = split_batches(buf)
    for pos, h in batches:
        _check_crc(buf, pos, h, where=where)
        _check_records(buf, pos, h, where=where)
    buf.batches = batches
    return buf


def _check_records(buf: CheckedBatches, pos: int, h: BatchHeader, *, where: str) -> None:
    raw = memoryview(buf)[pos : pos + h.size]
    try:
        if native.AVAILABLE:
            fault = native.record_fault(raw, h)
            if fault is not None:
                _raise_record_fault(fault, h, where=where)
            return
        _check_records_in_python(bytes(raw), h, where=where)
    except CorruptRecordError as exc:
        raise CorruptRecordError(
            f"record batch at byte {pos} of the append to {where} does not decode: {exc}"
        ) from exc
    finally:
        raw.release()


def _raise_record_fault(fault: tuple[int, str, str], h: BatchHeader, *, where: str) -> None:
    index, message, kind = fault
    if kind == "offset":
        raise InvalidRecordError(
            f"record {index} of the batch at offset {h.base_offset} in the append to "
            f"{where} has {message}: deltas must count up from 0"
        )
    if kind == "key":
        raise InvalidRecordError(
            f"compacted topic cannot accept a record without a key (append to {where}, "
            f"record {index} of its batch)"
        )
    raise CorruptRecordError(f"record {index} of the batch: {message}")


def _check_records_in_python(raw: bytes, h: BatchHeader, *, where: str) -> None:
    """Without the C extension: the codec's own decoder, record by record, and the
    attributes bytes the C checker refuses."""
    _check_attributes(native.records_section(raw, h, untrusted=True), h.records_count)
    expected = h.base_offset
    # the codec reads exactly recordsCount records and refuses bytes left after them
    for offset, *_ in codec.iter_batch_records(raw):
        if offset != expected:
            raise InvalidRecordError(
                f"record {expected - h.base_offset} of the batch at offset {h.base_offset} in "
                f"the append to {where} has offset delta {offset - h.base_offset}: deltas "
                f"must count up from 0"
            )
        expected += 1


def _check_attributes(records: bytes | memoryview, count: int) -> None:
    """Every record's attributes byte (unused in v2) below 0x80: aiokafka's decoder
    would read one with the high bit as a varint, and the record's fields wrongly."""
    pos = 0
    for index in range(count):
        length = shift = 0
        while True:  # the record's length, a zigzag varint
            if pos >= len(records) or shift > 63:
                raise CorruptRecordError(f"record {index} of the batch: bad record length")
            b = records[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        length = (length >> 1) ^ -(length & 1)
        if length < 1 or pos + length > len(records):
            raise CorruptRecordError(f"record {index} of the batch: bad record length")
        if records[pos] & 0x80:
            raise CorruptRecordError(
                f"record {index} of the batch: record attributes byte has its high bit set")
        pos += length


def _validate_timestamps(h: BatchHeader, config: LogConfig, *, now_ms: int, where: str) -> None:
    earliest = now_ms - config.message_timestamp_before_max_ms
    latest = now_ms + config.message_timestamp_after_max_ms
    first, last = h.base_timestamp, h.max_timestamp
    if (first != NO_TIMESTAMP and first < earliest) or (last != NO_TIMESTAMP and last > latest):
        bad = first if first != NO_TIMESTAMP and first < earliest else last
        raise InvalidTimestampError(
            f"timestamp {bad} of a record batch in the append to {where} is out of range: "
            f"it must lie within [{earliest}, {latest}] (message.timestamp.before/after.max.ms)"
        )


def _validate_keys(buf: bytearray, pos: int, h: BatchHeader, *, where: str) -> None:
    view = memoryview(buf)[pos : pos + h.size]
    if native.AVAILABLE:
        fault = native.record_fault(view, h, keys_required=True)
        if fault is not None:  # a framing fault of a trusted batch reads as corrupt too
            _raise_record_fault(fault, h, where=where)
        return
    for offset, _ts, _type, key, _value, _headers in codec.iter_batch_records(view):
        if key is None:
            raise InvalidRecordError(
                f"compacted topic cannot accept a record without a key (append to {where}, "
                f"record {offset} of its batch)"
            )


def assign_offsets(
    buf: bytearray,
    batches: list[tuple[int, BatchHeader]],
    *,
    first_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> ValidatedAppend:
    """Give the batches consecutive offsets from ``first_offset`` and stamp the epoch
    (and LogAppendTime when ``log_append_time_ms`` is set), in place."""
    offset = first_offset
    max_ts, max_ts_offset, records = NO_TIMESTAMP, first_offset, 0
    spans: list[BatchSpan] = []
    for pos, h in batches:
        patch_base_offset(buf, pos, offset)
        patch_leader_epoch(buf, pos, leader_epoch)
        last = offset + h.last_offset_delta
        batch_max = h.max_timestamp
        if log_append_time_ms is not None:
            set_log_append_time(buf, pos, h, log_append_time_ms)
            batch_max = log_append_time_ms
        if batch_max > max_ts:
            max_ts, max_ts_offset = batch_max, last
        spans.append((pos, h.size, last, batch_max))
        records += h.records_count
        offset = last + 1
    return ValidatedAppend(buf, first_offset, offset - 1, max_ts, max_ts_offset, records, spans)


def validate_replicated_batches(
    buf: bytearray, *, log_end_offset: int, where: str
) -> ValidatedAppend:
    """Batches fetched from the leader keep their offsets: check CRCs and that offsets
    start at or above ``log_end_offset`` and increase (gaps are fine: compaction)."""
    batches = split_batches(buf)
    expected = log_end_offset
    max_ts, max_ts_offset, records = NO_TIMESTAMP, log_end_offset, 0
    spans: list[BatchSpan] = []
    for pos, h in batches:
        if not is_crc_valid(buf, pos, h):
            raise CorruptRecordError(
                f"replicated batch at offset {h.base_offset} for {where} fails its CRC"
            )
        if h.base_offset < expected:
            raise NonMonotonicAppendError(
                f"replicated batch for {where} starts at offset {h.base_offset}, below "
                f"{'the log end offset' if expected == log_end_offset else 'the previous batch end'} {expected}"
            )
        if h.max_timestamp > max_ts:
            max_ts, max_ts_offset = h.max_timestamp, h.last_offset
        spans.append((pos, h.size, h.last_offset, h.max_timestamp))
        records += h.records_count
        expected = h.next_offset
    first = batches[0][1].base_offset if batches else log_end_offset
    return ValidatedAppend(buf, first, expected - 1, max_ts, max_ts_offset, records, spans)


def split_into_runs(append: ValidatedAppend, limit: int) -> list[ValidatedAppend]:
    """Cut an append into runs of whole batches of at most ``limit`` bytes each, so each
    run can go to one segment; a batch larger than ``limit`` is a run of its own (it
    then fills a fresh segment alone, so no ``segment.bytes`` makes a log unwritable)."""
    if len(append.data) <= limit:
        return [append]
    runs, start, spans = [], 0, append.spans
    while start < len(spans):
        end, base_pos = start + 1, spans[start][0]  # the first batch goes in, whatever its size
        while end < len(spans) and spans[end][0] + spans[end][1] - base_pos <= limit:
            end += 1
        chunk = spans[start:end]
        data = append.data[base_pos : chunk[-1][0] + chunk[-1][1]]
        first = int.from_bytes(data[0:8], "big", signed=True)
        max_ts, max_off = max(((ts, last) for _, _, last, ts in chunk), key=lambda t: t[0])
        rel = [(p - base_pos, size, last, ts) for p, size, last, ts in chunk]
        runs.append(ValidatedAppend(data, first, chunk[-1][2], max_ts, max_off, 0, rel))
        start = end
    return runs
