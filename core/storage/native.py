"""The C accelerator of Kafka's record format, when it was built (``core/storage/_native.c``).

``record_sizes`` gives a batch's cumulative key + value sizes (how reads cut at
``max_bytes``) without decoding its records; ``encode_batch`` writes the batch of a
produce request with one timestamp and no headers. Both answer None when the extension
is missing (installed without a C compiler); callers then take their pure-Python path,
which gives the same results. The API's JSON rendering has its own accelerator
(``api.native_render``).
"""

from __future__ import annotations

from core.storage import codec
from core.storage.batch import (
    HEADER_SIZE,
    BatchHeader,
    assemble_batch,
    parse_header,
)
from core.storage.errors import CorruptRecordError

try:
    from core.storage import _native
except ImportError:  # built without a C compiler: callers use their Python path
    _native = None  # type: ignore[assignment]

AVAILABLE = _native is not None


def encode_batch(values: list[bytes | None], keys: list[bytes | None] | None, timestamp: int,
                 compression: int) -> bytearray | None:
    """A v2 batch (base offset 0, no producer, CRC set) of records with one timestamp and
    no headers, the bytes the C builder of ``core.storage.records`` writes; None when
    the extension is not built."""
    if _native is None:
        return None
    body = _native.encode_records(values, keys)
    if compression != codec.NONE:
        body = codec.compress(compression, body)
    n = len(values)
    return assemble_batch(BatchHeader(0, 0, -1, 2, 0, compression, n - 1, timestamp, timestamp,
                                      -1, -1, -1, n), body)


def records_section(raw: bytes, h: BatchHeader) -> bytes | memoryview:
    """The records of the batch ``raw`` (header ``h``) as they are on disk, decompressed."""
    body: bytes | memoryview = memoryview(raw)[HEADER_SIZE : h.size]
    if h.compression != codec.NONE:
        body = codec.decompress(h.compression, body)
    return body


def record_sizes(raw: bytes, header: BatchHeader | None = None) -> list[int] | None:
    """``s[i]`` = key + value bytes of the first ``i`` records of the batch ``raw``
    (``records_count + 1`` items); None when the extension is not built."""
    if _native is None:
        return None
    h = header if header is not None else parse_header(raw, 0)
    try:
        return _native.record_sizes(records_section(raw, h), h.records_count)
    except ValueError as exc:
        raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc
