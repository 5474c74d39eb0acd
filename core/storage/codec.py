"""The one module that sees the C libraries: CRC-32C, compression codecs, and the
Cython record-batch builder/decoder.

Everything else in franz goes through these names, so a library can be swapped here
without touching the log. Libraries: ``crc32c`` (SSE4.2 CRC-32C), ``cramjam``
(snappy/lz4/zstd/gzip in Rust), and aiokafka's Cython ``DefaultRecordBatch`` /
``DefaultRecordBatchBuilder`` (pinned in pyproject) for per-record work.

Codec ids are Kafka's attribute bits 0-2: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
Framing Kafka expects: gzip stream; snappy in xerial snappy-java framing (bare raw
snappy accepted on read); lz4 frame with independent blocks; zstd frame.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Any

import cramjam
from aiokafka.record._crecords import (  # type: ignore[import-untyped]
    DefaultRecordBatch as _CBatch,
)
from aiokafka.record._crecords import (
    DefaultRecordBatchBuilder as _CBuilder,
)
from crc32c import crc32c as _crc32c

from core.storage.errors import CorruptRecordError

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


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    try:
        if codec == NONE:
            return bytes(data)
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
        raise CorruptRecordError(f"cannot decompress {CODEC_NAMES[codec]} data: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _xerial_snappy_compress(data: bytes) -> bytes:
    out = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_HEADER[:8]):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos, out = 16, []
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block length")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptRecordError("truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(out)


# --- per-record work, in C -------------------------------------------------------


def new_batch_builder(
    *,
    compression: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> Any:
    """A Cython v2 batch builder: ``append(offset_delta, timestamp_ms, key, value,
    headers)`` then ``build() -> bytearray`` (base offset 0, CRC computed)."""
    return _CBuilder(
        2, compression, int(transactional), producer_id, producer_epoch, base_sequence, 2**31 - 1
    )


RecordTuple = tuple[int, int, int, "bytes | None", "bytes | None", "list[tuple[str, bytes | None]]"]


def iter_batch_records(batch: bytes | bytearray | memoryview) -> Iterator[RecordTuple]:
    """Yield ``(offset, timestamp, timestamp_type, key, value, headers)`` for every record
    of one whole batch (decompressing it if needed). Raises CorruptRecordError on garbage.
    """
    try:
        cbatch = _CBatch(bytes(batch))
        for rec in cbatch:
            yield (rec.offset, rec.timestamp, rec.timestamp_type, rec.key, rec.value, rec.headers)
    except CorruptRecordError:
        raise
    except Exception as exc:
        raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc


def batch_record_objects(batch: bytes) -> list[Any]:
    """The C decoder's record objects of one whole batch (attributes ``offset``,
    ``timestamp``, ``timestamp_type``, ``key``, ``value``, ``headers``), for hot paths
    that read a few attributes of every record. Raises CorruptRecordError on garbage."""
    try:
        return list(_CBatch(batch))
    except Exception as exc:
        raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc
