"""The C accelerator of the hot read path, when it was built (``core/storage/_native.c``).

``render_batch`` walks the records of one whole v2 batch in C and writes each through
a JSON template the caller gives (the API's binary embedded format): no record objects,
no per-record Python. It answers None when the extension is missing (installed without
a C compiler) or the batch has record headers; callers then take their pure-Python
path, which gives the same bytes. ``record_sizes`` gives a batch's cumulative key +
value sizes (how reads cut at ``max_bytes``) without decoding its records either.
"""

from __future__ import annotations

from core.storage import codec
from core.storage.batch import HEADER_SIZE, LOG_APPEND_TIME, BatchHeader, parse_header
from core.storage.errors import CorruptRecordError

try:
    from core.storage import _native
except ImportError:  # built without a C compiler: callers use their Python path
    _native = None  # type: ignore[assignment]

AVAILABLE = _native is not None


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
