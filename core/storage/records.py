"""Records inside batches: build a v2 batch from records, decode batches into records.

Record layout inside a batch (ZigZag varints)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headersCount varint | (headerKeyLength varint | key utf-8 |
                           headerValueLength varint (-1 null) | value)*

The per-record loops run in the record-batch codec of ``core.storage.codec`` (aiokafka's
compiled one, or franz's pure-Python one: ``core.storage.batch_codec``), and the common
produce request in ``core.storage.native`` when the C extension is built; this module
adds the names.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from itertools import repeat

from core.storage import codec, native
from core.storage.batch import LOG_APPEND_TIME, BatchHeader, iter_batches, parse_header
from core.storage.errors import CorruptRecordError

Headers = list[tuple[str, "bytes | None"]]
_NO_HEADERS: Headers = []  # shared, never mutated (the builders only read it)
_consume: Callable[[Iterable[object]], object] = partial(deque, maxlen=0)  # drain, in C


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a consumer sees it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to be written: offsets are assigned at append time."""

    value: bytes | None
    key: bytes | None = None
    headers: Headers = field(default_factory=list)
    timestamp: int | None = None  # ms; None = now


def build_batch(
    records: Sequence[NewRecord],
    *,
    now_ms: int,
    compression: int = codec.NONE,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytearray:
    """Encode ``records`` as one v2 batch with offset deltas 0..n-1."""
    if not records:
        raise ValueError("a batch needs at least one record")
    builder = codec.new_batch_builder(
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
    )
    append = builder.append
    for i, r in enumerate(records):
        ts = now_ms if r.timestamp is None else r.timestamp
        append(i, ts, r.key, r.value, r.headers)
    buf = builder.build()
    if base_offset:
        from core.storage.batch import patch_base_offset

        patch_base_offset(buf, 0, base_offset)
    return buf


def build_batch_from_tuples(
    rows: Iterable[tuple[bytes | None, bytes | None, Headers, int]],
    *,
    compression: int = codec.NONE,
) -> bytearray:
    """Hot-path variant: ``(key, value, headers, timestamp_ms)`` tuples, no dataclasses."""
    builder = codec.new_batch_builder(compression=compression)
    append = builder.append
    n = 0
    for n, (key, value, headers, ts) in enumerate(rows):  # noqa: B007
        append(n, ts, key, value, headers)
    if builder.size() <= 61:
        raise ValueError("a batch needs at least one record")
    return builder.build()


def build_batch_from_columns(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    headers: Sequence[Headers] | None,
    timestamp: int | Sequence[int],
    *,
    compression: int = codec.NONE,
) -> bytearray:
    """Hot-path variant over columns: ``keys`` / ``headers`` None = none, ``timestamp``
    one value for all or one per record. The per-record calls into the codec's builder
    are driven by ``map`` (no Python-level loop)."""
    n = len(values)
    if not n:
        raise ValueError("a batch needs at least one record")
    if (headers is None and type(timestamp) is int and type(values) is list
            and (keys is None or type(keys) is list)):
        try:  # the common produce request: one pass in C when the extension is built
            built = native.encode_batch(values, keys, timestamp, compression)
        except TypeError:  # keys or values not all bytes: the general builder decides
            built = None
        if built is not None:
            return built
    builder = codec.new_batch_builder(compression=compression)
    _consume(map(
        builder.append,
        range(n),
        repeat(timestamp, n) if isinstance(timestamp, int) else timestamp,
        repeat(None, n) if keys is None else keys,
        values,
        repeat(_NO_HEADERS, n) if headers is None else headers,
    ))
    return builder.build()


def build_batch_at(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    headers: Sequence[Headers] | None,
    timestamps: Sequence[int | None] | None,
    now_ms: int,
    idxs: Sequence[int],
    *,
    max_bytes: int,
    producer: tuple[int, int, int] = native.NO_PRODUCER,
) -> bytearray | None:
    """One uncompressed batch of the records ``idxs`` of the columns (a ``range`` or a
    list of indexes), written in one pass by the C extension: keys, headers and per-record
    timestamps (None = ``now_ms``) included, stamped with ``producer`` (id, epoch, base
    sequence; none by default). None when that cannot be done here: the
    extension is not built, a column is not a list or holds what the general builder
    must judge, or the batch would be larger than ``max_bytes`` before compression
    (the caller then splits the records)."""
    if type(values) is not list:
        return None
    n = len(values)
    at: list[int] | None
    if isinstance(idxs, range):
        at = None if idxs == range(n) else list(idxs)
    else:
        at = idxs if type(idxs) is list else list(idxs)
    try:
        built = native.encode_batch(
            values, keys if keys is None or type(keys) is list else list(keys), now_ms,
            codec.NONE, headers=headers if headers is None or type(headers) is list
            else list(headers),
            timestamps=timestamps if timestamps is None or type(timestamps) is list
            else list(timestamps), idxs=at, producer=producer)
    except (TypeError, OverflowError):
        return None
    if built is None or len(built) > max_bytes:
        return None
    return built


# Records are made on every read: bypass the frozen dataclass ``__init__`` (six
# ``object.__setattr__`` calls through Python) and set the slots directly, which makes
# the same objects about twice as fast. Only while Record stays a plain frozen slotted
# dataclass with exactly these fields and no __post_init__; otherwise the constructor.
_RECORD_FIELDS = ("offset", "timestamp", "key", "value", "headers", "timestamp_type")
_FAST_RECORDS = (
    tuple(f.name for f in fields(Record)) == _RECORD_FIELDS
    and not hasattr(Record, "__post_init__")
    and Record.__slots__ == _RECORD_FIELDS  # type: ignore[attr-defined]
)


def _append_records(
    out: list[Record], buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader,
    min_offset: int, max_offset: int | None,
) -> None:
    """Decode the batch at ``pos`` into ``out``, keeping ``min_offset <= offset <
    max_offset``."""
    if pos + h.size > len(buf):
        raise CorruptRecordError("batch runs past the end of the buffer")
    rows = codec.iter_batch_records(memoryview(buf)[pos : pos + h.size])
    log_append = h.timestamp_type == LOG_APPEND_TIME
    # record timestamps are not rewritten for LogAppendTime; the batch max is the truth
    ts_type, max_ts = (LOG_APPEND_TIME, h.max_timestamp) if log_append else (0, 0)
    whole = h.base_offset >= min_offset and (max_offset is None or h.last_offset < max_offset)
    hi = h.last_offset + 1 if max_offset is None else max_offset
    append = out.append
    if not _FAST_RECORDS:  # pragma: no cover - only if Record changes shape
        for off, ts, _tt, key, value, headers in rows:
            if whole or min_offset <= off < hi:
                append(Record(off, max_ts if log_append else ts, key, value, headers, ts_type))
        return
    new = object.__new__
    cls = Record
    s_off, s_ts, s_key, s_val, s_hdr, s_tt = (getattr(Record, n).__set__ for n in _RECORD_FIELDS)
    for off, ts, _tt, key, value, headers in rows:
        if not whole and not (min_offset <= off < hi):
            continue
        r = new(cls)
        s_off(r, off)
        s_ts(r, max_ts if log_append else ts)
        s_key(r, key)
        s_val(r, value)
        s_hdr(r, headers)
        s_tt(r, ts_type)
        append(r)


def decode_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> list[Record]:
    """Decode the whole batch at ``pos`` into records with absolute offsets."""
    header = parse_header(buf, pos)
    out: list[Record] = []
    _append_records(out, buf, pos, header, 0, None)
    return out


def decode_records(
    data: bytes | bytearray | memoryview, *, min_offset: int = 0, max_offset: int | None = None
) -> list[Record]:
    """Decode every whole batch in ``data`` (a fetch result may end with a partial batch,
    which is ignored), keeping records with ``min_offset <= offset < max_offset``."""
    out: list[Record] = []
    for pos, h in iter_batches(data):
        if h.last_offset < min_offset or h.is_control:
            continue
        if max_offset is not None and h.base_offset >= max_offset:
            break
        _append_records(out, data, pos, h, min_offset, max_offset)
    return out


def iter_raw_records(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader):
    """``(offset, timestamp, timestamp_type, key, value, headers)`` tuples of one batch,
    for hot paths that build JSON directly."""
    return codec.iter_batch_records(memoryview(buf)[pos : pos + header.size])
