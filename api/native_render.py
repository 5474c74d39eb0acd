"""The C accelerator of the API's hot paths, when it was built (``api/_render.c``).

``render_batch_joined`` walks the records of one whole v2 batch in C and writes each
through a JSON template the caller gives (the binary embedded format), into one text:
no record objects, no per-record Python. ``b64decode_list`` decodes the base64 columns
of a produce request in one call; ``produce_columns`` reads them straight from the usual
body's JSON text.
Each answers None when the extension is missing (installed without a C compiler) or the
input is outside its fast case; callers then take their pure-Python path, which gives
the same result.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.storage.batch import LOG_APPEND_TIME, BatchHeader, parse_header
from core.storage.errors import CorruptRecordError
from core.storage.native import records_section

try:
    from api import _render
except ImportError:  # built without a C compiler: callers use their Python path
    _render = None  # type: ignore[assignment]

AVAILABLE = _render is not None


def b64decode_list(items: list[object]) -> list[bytes] | None:
    """Each item, a ``str`` of canonical standard base64 (padded, zero padding bits),
    decoded: what ``binascii.a2b_base64(item, strict_mode=True)`` gives for such text.
    None when the extension is not built or any item is something else (the caller's
    general path then decides, and names the bad item)."""
    return None if _render is None else _render.b64decode_list(items)


def produce_columns(body: bytes, max_records: int
                    ) -> tuple[list[bytes], list[bytes] | None] | None:
    """``(values, keys)`` of a binary-format v2 produce body read straight from its JSON
    text (keys None when no row has one), when the body is exactly
    ``{"records":[ROW, ...]}`` (any JSON whitespace between tokens) with 1 to
    ``max_records`` rows, every row ``{"value": B64}`` or every row ``{"key": B64,
    "value": B64}`` (either order), every B64 canonical standard base64 without escapes:
    what ``orjson.loads`` and ``b64decode_list`` would give, without a dict or str per
    record. None for any other body, or when the extension is not built: the caller's
    general parse then decides, and names what is wrong."""
    return None if _render is None else _render.produce_columns(body, max_records)


def produce_offsets(partitions: list[int], offsets: list[int]) -> bytes | None:
    """The items of a v2 produce answer's ``offsets`` array, comma-separated, every
    record successful: ``{"partition":P,"offset":O,"error_code":null,"error":null}``, the
    bytes orjson writes for those dicts. None when the extension is not built."""
    return None if _render is None else _render.produce_offsets(partitions, offsets)


def produce_offsets_runs(total: int, runs: list[tuple[int, int, Sequence[int]]]
                         ) -> bytes | None:
    """``produce_offsets`` of a request spread over several partitions, read from its
    runs (``ProduceResults.runs``: partition, first offset, the input indexes appended
    there in log order) without the per-record lists. None when the extension is not
    built or the runs do not cover every record exactly once."""
    return None if _render is None else _render.produce_offsets_runs(total, runs)


def produce_offsets_range(partition: int, first: int, count: int) -> bytes | None:
    """``produce_offsets`` of ``count`` records appended to ``partition`` at consecutive
    offsets from ``first``. None when the extension is not built."""
    return None if _render is None else _render.produce_offsets_range(partition, first, count)


def render_batch_joined(raw: bytes, head: bytes, mid: bytes,
                        header: BatchHeader | None = None,
                        records: tuple[int, int] | None = None
                        ) -> tuple[bytes, memoryview] | None:
    """The JSON fragments of the records of the batch ``raw`` (of its records
    ``lo..hi-1`` when ``records`` is ``(lo, hi)``) joined by commas in one bytes, and the
    end of each in it (a memoryview of unsigned 64-bit ints): no object per record.
    A fragment is

    ``head KEY ,"value": VALUE mid OFFSET ,"timestamp": TS ,"timestamp_type":"T","headers":[]}``

    KEY and VALUE are ``null`` or the quoted padded standard base64 of the bytes; TS is
    the batch's max timestamp for every record of a LogAppendTime batch. None when the
    extension is not built or a record has headers; CorruptRecordError when the batch
    does not parse."""
    if _render is None:
        return None
    h = header if header is not None else parse_header(raw, 0)
    body = records_section(raw, h)
    lat = h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else None
    try:
        out = _render.render_records(body, h.records_count, h.base_offset, h.base_timestamp,
                                     lat, head, mid, *(records or ()))
    except ValueError as exc:
        raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc
    return None if out is None else (out[0], memoryview(out[1]).cast("Q"))


def render_batch(raw: bytes, head: bytes, mid: bytes,
                 header: BatchHeader | None = None,
                 records: tuple[int, int] | None = None) -> list[bytes] | None:
    """``render_batch_joined`` as one bytes per record (what the per-record Python
    renderer gives, for comparing the two)."""
    joined = render_batch_joined(raw, head, mid, header, records)
    if joined is None:
        return None
    text, ends = joined
    starts = [0, *(end + 1 for end in ends[:-1])] if len(ends) else []
    return [text[start:end] for start, end in zip(starts, ends, strict=True)]
