"""With ``core.storage.batch_codec`` (which loads aiokafka), the one place that sees the
C libraries: CRC-32C, compression codecs, and the record-batch codec (per-record
building and decoding).

Everything else in franz goes through these names, so a library can be swapped here
without touching the log. Libraries: ``crc32c`` (SSE4.2 CRC-32C), ``cramjam``
(snappy/lz4/zstd/gzip in Rust), and for per-record work the ``RecordBatchCodec`` chosen
once at import (``core.storage.batch_codec``): aiokafka's public, compiled
``DefaultRecordBatch`` / ``DefaultRecordBatchBuilder`` when they load, else franz's
pure-Python codec. Set ``FRANZ_PURE_PYTHON_CODEC=1`` (read once, at import) to force
the pure-Python one. ``CODEC`` is the one in use; ``AIOKAFKA`` (None when unavailable)
and ``PURE_PYTHON`` are both kept for tests.

Codec ids are Kafka's attribute bits 0-2: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
Framing Kafka expects: gzip stream; snappy in xerial snappy-java framing (bare raw
snappy accepted on read); lz4 frame with independent blocks; zstd frame.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import overload

import cramjam
from crc32c import crc32c as _crc32c

from core.storage.batch_codec import RecordBatchCodec, load_aiokafka_codec, select_codec
from core.storage.batch_codec import RecordTuple as RecordTuple  # re-exported
from core.storage.errors import CorruptRecordError
from core.storage.pure_codec import PurePythonCodec

try:  # a bytearray whose pages are untouched until written (core.storage.native.new_buffer)
    from core.storage._native import new_buffer as _new_buffer
except ImportError:  # built without a C compiler: zeros
    _new_buffer = bytearray

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()} | {"uncompressed": NONE}

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) as Kafka computes it for v2 batches."""
    return _crc32c(data)


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: gzip container
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_snappy_compress(bytes(data))
    if codec == LZ4:
        comp = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
        comp.compress(bytes(data))
        return bytes(comp.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data), level=3))
    raise CorruptRecordError(f"unknown compression codec id {codec}")


@overload
def decompress(codec: int, data: bytes | bytearray | memoryview, *,
               max_size: None = None) -> bytes: ...
@overload
def decompress(codec: int, data: bytes | bytearray | memoryview, *,
               max_size: int | None) -> bytes | memoryview: ...
def decompress(codec: int, data: bytes | bytearray | memoryview, *,
               max_size: int | None = None) -> bytes | memoryview:
    """The decompressed bytes. With ``max_size`` (data from outside this process: a
    client's batch), CorruptRecordError as soon as the output would pass it, before
    that much memory is written: a small batch cannot inflate into gigabytes."""
    try:
        if codec == NONE:
            return bytes(data)
        if max_size is not None:
            return _decompress_bounded(codec, data, max_size)
        if codec == GZIP:
            return zlib.decompress(data, 47)  # wbits 47: gzip or zlib header
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except Exception as exc:  # the libraries raise assorted types on garbage input
        bound = "" if max_size is None else f" (at most {max_size} bytes decompressed)"
        raise CorruptRecordError(
            f"cannot decompress {CODEC_NAMES.get(codec, codec)} data{bound}: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _decompress_bounded(codec: int, data: bytes | bytearray | memoryview,
                        max_size: int) -> bytes | memoryview:
    too_large = CorruptRecordError(
        f"{CODEC_NAMES[codec]} data decompresses past {max_size} bytes, the most a record "
        f"batch may hold")
    if codec == GZIP:
        d = zlib.decompressobj(47)
        out = d.decompress(data, max_size + 1)
        if len(out) > max_size:
            raise too_large
        if not d.eof:
            raise CorruptRecordError("truncated gzip data")
        return out
    if codec == SNAPPY:
        return _snappy_decompress(bytes(data), max_size=max_size)
    if codec in (LZ4, ZSTD):
        buf = _new_buffer(max_size + 1)  # pages become memory only as they are written
        lib = cramjam.lz4 if codec == LZ4 else cramjam.zstd
        n = lib.decompress_into(bytes(data), buf)
        if n > max_size:
            raise too_large
        return memoryview(buf)[:n]
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _xerial_snappy_compress(data: bytes) -> bytes:
    out = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data: bytes, *, max_size: int | None = None) -> bytes:
    """Raw snappy or Xerial's framing of it (what Kafka clients send). With ``max_size``
    each block's length, which snappy writes first, is checked before it is inflated."""
    def inflate(block: bytes, total: int) -> bytes:
        if max_size is not None and total + cramjam.snappy.decompress_raw_len(block) > max_size:
            raise CorruptRecordError(
                f"snappy data decompresses past {max_size} bytes, the most a record batch "
                f"may hold")
        return bytes(cramjam.snappy.decompress_raw(block))

    if not data.startswith(_XERIAL_HEADER[:8]):
        return inflate(data, 0)
    pos, out, total = 16, [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block length")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptRecordError("truncated xerial snappy block")
        block = inflate(data[pos : pos + size], total)
        out.append(block)
        total += len(block)
        pos += size
    return b"".join(out)


# --- per-record work ---------------------------------------------------------------

PURE_PYTHON: RecordBatchCodec = PurePythonCodec(
    compress=compress, decompress=decompress, crc32c=crc32c)
AIOKAFKA: RecordBatchCodec | None = load_aiokafka_codec()
CODEC: RecordBatchCodec = select_codec(os.environ, aiokafka=AIOKAFKA, pure=PURE_PYTHON)

#: ``new_batch_builder(*, compression, producer_id, producer_epoch, base_sequence,
#: transactional)``: a builder with ``append(offset_delta, timestamp_ms, key, value,
#: headers)``, ``size()`` and ``build() -> bytearray`` (base offset 0, CRC computed).
new_batch_builder = CODEC.new_builder
#: ``(offset, timestamp, timestamp_type, key, value, headers)`` for every record of one
#: whole batch (decompressing it if needed); CorruptRecordError on garbage.
iter_batch_records = CODEC.iter_records
#: The records of one whole batch as objects with the attributes ``offset``,
#: ``timestamp``, ``timestamp_type``, ``key``, ``value``, ``headers``, for hot paths that
#: read a few attributes of every record; CorruptRecordError on garbage.
batch_record_objects = CODEC.record_objects
