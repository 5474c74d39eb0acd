"""franz's pure-Python ``RecordBatchCodec`` (``core.storage.batch_codec``): Kafka's
DefaultRecord layout, for machines without aiokafka's compiled codec and for tests.

Each record in the (possibly compressed) records section of a v2 batch::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headersCount varint | (headerKeyLength varint | key utf-8 |
                           headerValueLength varint (-1 null) | value)*

Varints are ZigZag, at most 10 bytes. Under LogAppendTime (attribute bit 3) every
record reads as the batch maxTimestamp. Compression and CRC-32C are the functions the
codec is given (``core.storage.codec``'s), so this module imports no library.

The record attributes are Kafka's int8; aiokafka's reader takes them as a varint, so
the two differ only on corrupt batches (a byte >= 0x80 there), where aiokafka rejects
what this reads.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from operator import index
from typing import Any, NamedTuple

from core.storage.batch_codec import Buffer, Headers, RecordTuple
from core.storage.errors import CorruptRecordError

_HEADER = struct.Struct(">qiibIhiqqqhii")  # core.storage.batch.HEADER
_HEADER_SIZE = _HEADER.size  # 61
_CRC = struct.Struct(">I")
_CRC_AT, _ATTRIBUTES_AT = 17, 21
_TIMESTAMP_TYPE_BIT, _TRANSACTIONAL_BIT = 0x08, 0x10
_I64 = 2**63
_NULL = b"\x01"  # varint -1
_SMALL_N = 2048


def zigzag_varint(n: int) -> bytes:
    """ZigZag varint of a signed 64-bit ``n`` (Kafka's ``ByteUtils.writeVarlong``)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [zigzag_varint(n) for n in range(_SMALL_N)]  # 0..2047: the usual lengths and deltas


def _varint_tail(buf: bytes, pos: int, first: int) -> tuple[int, int]:
    """The rest of a varint whose first byte ``first`` (at ``pos - 1``) has bit 7 set."""
    z, shift = first & 0x7F, 7
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if not b & 0x80:
            z &= 0xFFFFFFFFFFFFFFFF  # bits past 64 are dropped, as aiokafka's reader does
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    return _varint_tail(buf, pos + 1, b) if b & 0x80 else ((b >> 1) ^ -(b & 1), pos + 1)


def _blob(obj: Any) -> bytes:
    """``obj`` as bytes if it is bytes-like; TypeError otherwise (as aiokafka's)."""
    return obj if type(obj) is bytes else memoryview(obj).tobytes()


class DecodedRecord(NamedTuple):
    """The pure-Python codec's record object (also a ``RecordTuple``)."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class PurePythonCodec:
    """``RecordBatchCodec`` in Python, compressing and checksumming with the given
    functions."""

    name = "pure-python"

    def __init__(self, *, compress: Callable[[int, Buffer], bytes],
                 decompress: Callable[[int, Buffer], bytes],
                 crc32c: Callable[[Buffer], int]) -> None:
        self._compress, self._decompress, self._crc32c = compress, decompress, crc32c

    def __repr__(self) -> str:
        return "<PurePythonCodec>"

    def new_builder(self, *, compression: int = 0, producer_id: int = -1,
                    producer_epoch: int = -1, base_sequence: int = -1,
                    transactional: bool = False) -> _Builder:
        return _Builder(self, compression & 0x07, transactional, producer_id, producer_epoch,
                        base_sequence)

    def record_objects(self, batch: bytes) -> list[Any]:
        return list(map(DecodedRecord._make, self.iter_records(batch)))

    def iter_records(self, batch: Buffer) -> Iterator[RecordTuple]:
        try:
            buf = batch if type(batch) is bytes else bytes(batch)
            if len(buf) < _HEADER_SIZE:
                raise CorruptRecordError("record batch shorter than its header")
            (base, _len, _epoch, _magic, _crc, attributes, _lod, first_ts, max_ts, _pid,
             _pepoch, _seq, count) = _HEADER.unpack_from(buf)
            compression = attributes & 0x07
            pos = _HEADER_SIZE
            if compression:
                buf, pos = self._decompress(compression, memoryview(buf)[pos:]), 0
            end = len(buf)
            ts_type = 1 if attributes & _TIMESTAMP_TYPE_BIT else 0
            tail = _varint_tail
            # Varints are read inline when they take one or two bytes (the usual case).
            for _ in range(count):
                b = buf[pos]
                if b < 0x80:
                    length = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif (c := buf[pos + 1]) < 0x80:  # two bytes
                    b = (b & 0x7F) | (c << 7)
                    length = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    length, pos = tail(buf, pos + 1, b)
                start = pos
                pos += 1  # attributes int8, unused
                b = buf[pos]
                if b < 0x80:
                    ts_delta = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif (c := buf[pos + 1]) < 0x80:  # two bytes
                    b = (b & 0x7F) | (c << 7)
                    ts_delta = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    ts_delta, pos = tail(buf, pos + 1, b)
                b = buf[pos]
                if b < 0x80:
                    delta = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif (c := buf[pos + 1]) < 0x80:  # two bytes
                    b = (b & 0x7F) | (c << 7)
                    delta = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    delta, pos = tail(buf, pos + 1, b)
                b = buf[pos]
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif (c := buf[pos + 1]) < 0x80:  # two bytes
                    b = (b & 0x7F) | (c << 7)
                    n = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    n, pos = tail(buf, pos + 1, b)
                key = None
                if n >= 0:
                    if pos + n > end:
                        raise CorruptRecordError("record key runs past the batch")
                    key = buf[pos : pos + n]
                    pos += n
                b = buf[pos]
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif (c := buf[pos + 1]) < 0x80:  # two bytes
                    b = (b & 0x7F) | (c << 7)
                    n = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    n, pos = tail(buf, pos + 1, b)
                value = None
                if n >= 0:
                    if pos + n > end:
                        raise CorruptRecordError("record value runs past the batch")
                    value = buf[pos : pos + n]
                    pos += n
                if buf[pos] == 0:  # no headers
                    pos += 1
                    headers: Headers = []
                else:
                    headers, pos = _read_headers(buf, pos, end)
                if pos - start != length:
                    raise CorruptRecordError(
                        f"record length {length} but its fields took {pos - start} bytes")
                yield (base + delta, max_ts if ts_type else first_ts + ts_delta, ts_type, key,
                       value, headers)
            if pos != end:
                raise CorruptRecordError(f"{end - pos} unconsumed bytes after all records")
        except CorruptRecordError:
            raise
        except (IndexError, ValueError) as exc:  # truncated; bad UTF-8 in a header key
            raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc


def _read_headers(buf: bytes, pos: int, end: int) -> tuple[Headers, int]:
    count, pos = _read_varint(buf, pos)
    if count < 0:
        raise CorruptRecordError(f"negative record header count {count}")
    headers: Headers = []
    for _ in range(count):
        n, pos = _read_varint(buf, pos)
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"bad record header key length {n}")
        h_key = buf[pos : pos + n].decode("utf-8")
        pos += n
        n, pos = _read_varint(buf, pos)
        h_value = None
        if n >= 0:
            if pos + n > end:
                raise CorruptRecordError("record header value runs past the batch")
            h_value = buf[pos : pos + n]
            pos += n
        headers.append((h_key, h_value))
    return headers, pos


def _encode_headers(headers: Headers) -> bytes:
    parts = [zigzag_varint(len(headers))]
    for h_key, h_value in headers:
        if type(h_key) is not str:
            raise TypeError(f"record header key must be str, not {type(h_key).__name__}")
        raw = h_key.encode("utf-8")
        parts += (zigzag_varint(len(raw)), raw)
        if h_value is None:
            parts.append(_NULL)
        else:
            h_value = _blob(h_value)
            parts += (zigzag_varint(len(h_value)), h_value)
    return b"".join(parts)


def encode_record(offset_delta: int, timestamp_delta: int, key: Buffer | None,
                  value: Buffer | None, headers: Headers) -> bytes:
    """One record as it stands in a batch's records section, its length varint first
    (also compaction's re-encode, ``core.storage.batch_rewrite``)."""
    small = _SMALL
    n = timestamp_delta
    record = b"\x00" + (small[n] if 0 <= n < _SMALL_N else zigzag_varint(n)) + (
        small[offset_delta] if 0 <= offset_delta < _SMALL_N else zigzag_varint(offset_delta))
    if key is None:
        record += _NULL
    else:
        if type(key) is not bytes:
            key = _blob(key)
        n = len(key)
        record += (small[n] if n < _SMALL_N else zigzag_varint(n)) + key
    if value is None:
        record += _NULL
    else:
        if type(value) is not bytes:
            value = _blob(value)
        n = len(value)
        record += (small[n] if n < _SMALL_N else zigzag_varint(n)) + value
    record += _encode_headers(headers) if headers else b"\x00"
    n = len(record)
    return (small[n] if n < _SMALL_N else zigzag_varint(n)) + record


class _Builder:
    """The pure-Python ``BatchBuilder``."""

    __slots__ = ("_codec", "_compression", "_transactional", "_producer", "_buf", "_count",
                 "_first_ts", "_max_ts", "_last_offset")

    def __init__(self, codec: PurePythonCodec, compression: int, transactional: bool,
                 producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        self._codec = codec
        self._compression = compression
        self._transactional = transactional
        self._producer = (producer_id, producer_epoch, base_sequence)
        self._buf = bytearray(_HEADER_SIZE)
        self._count = 0
        self._first_ts: int | None = None
        self._max_ts = -1
        self._last_offset = 0

    def append(self, offset: int, timestamp: int | None, key: Buffer | None,
               value: Buffer | None, headers: Headers, /) -> None:
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        if type(offset) is not int or type(timestamp) is not int:
            offset, timestamp = index(offset), index(timestamp)  # TypeError if not ints
        if not (-_I64 <= timestamp < _I64 and -_I64 <= offset < _I64):
            raise OverflowError("offset or timestamp out of the int64 range")
        first = self._first_ts
        if first is None:
            self._first_ts = self._max_ts = first = timestamp
        elif timestamp > self._max_ts:
            self._max_ts = timestamp
        self._buf += encode_record(offset, timestamp - first, key, value, headers)
        self._count += 1
        self._last_offset = offset

    def size(self) -> int:
        return len(self._buf)

    def build(self) -> bytearray:
        buf = self._buf
        attributes = self._compression | (_TRANSACTIONAL_BIT if self._transactional else 0)
        if self._compression:
            payload = self._codec._compress(self._compression, memoryview(buf)[_HEADER_SIZE:])
            del buf[_HEADER_SIZE:]  # the view above is gone: the call has returned
            buf += payload
        first = -1 if self._first_ts is None else self._first_ts
        _HEADER.pack_into(buf, 0, 0, len(buf) - 12, -1, 2, 0, attributes,
                          self._last_offset, first, self._max_ts, *self._producer, self._count)
        _CRC.pack_into(buf, _CRC_AT, self._codec._crc32c(memoryview(buf)[_ATTRIBUTES_AT:]))
        return buf
