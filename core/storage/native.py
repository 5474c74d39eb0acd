"""The C accelerator of the hot read path, when it was built (``core/storage/_native.c``).

``render_batch`` walks the records of one whole v2 batch in C and writes each through
a JSON template the caller gives (the API's binary embedded format): no record objects,
no per-record Python. It answers None when the extension is missing (installed without
a C compiler) or the batch has record headers; callers then take their pure-Python
path, which gives the same bytes. ``record_sizes`` gives a batch's cumulative key +
value sizes (how reads cut at ``max_bytes``) without decoding its records either;
``b64decode_list`` decodes the base64 columns of a produce request in one call and
``encode_batch`` writes the batch of such a request (one timestamp, no headers).
"""

from __future__ import annotations

from core.storage import codec
from core.storage.batch import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
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


def b64decode_list(items: list[object]) -> list[bytes] | None:
    """Each item, a ``str`` of canonical standard base64 (padded, zero padding bits),
    decoded: what ``binascii.a2b_base64(item, strict_mode=True)`` gives for such text.
    None when the extension is not built or any item is something else (the caller's
    general path then decides, and names the bad item)."""
    return None if _native is None else _native.b64decode_list(items)


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


def _records_section(raw: bytes, h: BatchHeader) -> bytes | memoryview:
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
        return _native.record_sizes(_records_section(raw, h), h.records_count)
    except ValueError as exc:
        raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc


def render_batch(raw: bytes, head: bytes, mid: bytes,
                 header: BatchHeader | None = None) -> list[bytes] | None:
    """One JSON fragment per record of the batch ``raw``:

    ``head KEY ,"value": VALUE mid OFFSET ,"timestamp": TS ,"timestamp_type":"T","headers":[]}``

    KEY and VALUE are ``null`` or the quoted padded standard base64 of the bytes; TS is
    the batch's max timestamp for every record of a LogAppendTime batch. None when the
    extension is not built or a record has headers; CorruptRecordError when the batch
    does not parse."""
    if _native is None:
        return None
    h = header if header is not None else parse_header(raw, 0)
    body = _records_section(raw, h)
    lat = h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else None
    try:
        return _native.render_records(body, h.records_count, h.base_offset, h.base_timestamp,
                                      lat, head, mid)
    except ValueError as exc:
        raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc
