"""Embedded formats: request keys/values -> bytes, stored records -> response dicts.

binary  key/value are standard base64 strings (RFC 4648 ``+/`` alphabet, padded) of the
        raw bytes, both ways. A non-string or undecodable string is 400 / 400.
json    key/value are any JSON value; stored as its compact UTF-8 JSON text (no schema,
        no magic byte); consumed records embed the parsed value.
avro, jsonschema, protobuf
        key/value are JSON values written with a Schema Registry schema
        (``core.broker.schemas.encoding``, called by ``api.v2.produce``); ``schema_records``
        puts the bytes it wrote beside the rows' other fields.

A JSON ``null`` or a missing field is a Kafka null, not empty bytes. Consumed records
carry (franz extensions) ``timestamp`` (epoch ms), ``timestamp_type`` (``CreateTime`` or
``LogAppendTime``) and ``headers``, a list of ``{"key": str, "value": base64 | null}``
in record order (duplicates kept) whatever the embedded format.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

import orjson

from api import native_render as native
from api.content_types import EmbeddedFormat
from api.errors import ApiError, ErrorCode
from api.render_cache import RenderCache, Rendering
from core.broker.replica.batch_cache import CachedBatch
from core.broker.types import ProduceColumns
from core.json_depth import MAX_VALUE_DEPTH, SHALLOW_VALUE_BYTES, value_depth_exceeds
from core.storage.records import Record

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

_a2b = binascii.a2b_base64
_b2a = binascii.b2a_base64


def b64encode(data: bytes | None) -> str | None:
    return None if data is None else _b2a(data, newline=False).decode("ascii")


def b64decode(text: object, where: str) -> bytes:
    """Standard padded base64 -> bytes; 400 / 400 naming ``where`` otherwise."""
    if not isinstance(text, str):
        raise ApiError(400, ErrorCode.BAD_REQUEST, f"{where}={text!r} is not a base64 string.")
    try:
        return _a2b(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise ApiError(
            400, ErrorCode.BAD_REQUEST, f"{where}={_clip(text)} is not a valid base64 string."
        ) from None


def _clip(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _headers_in(raw: Sequence[Any] | None, i: int) -> list[tuple[str, bytes | None]]:
    if not raw:
        return []
    out: list[tuple[str, bytes | None]] = []
    for j, h in enumerate(raw):
        value = h.get("value")
        where = f"records[{i}].headers[{j}].value"
        out.append((h["key"], None if value is None else b64decode(value, where)))
    return out


def _json_bytes(value: Any, where: str) -> bytes | None:
    if value is None:
        return None
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        raise ApiError(400, ErrorCode.BAD_REQUEST, f"{where}: {exc}") from None


_get_value = itemgetter("value")
_get_key = itemgetter("key")


def binary_columns_fast(rows: Sequence[Any]) -> ProduceColumns | None:
    """Every row exactly ``{"value": str}``, or every row exactly ``{"key": str, "value":
    str}`` (the usual requests): the shape is checked with C-level ``sum(map(len))`` and
    ``itemgetter``, and each column is one comprehension of ``a2b_base64`` calls (no
    per-record objects, no per-record branches). None when the rows are anything else
    (nulls, partitions, headers, timestamps, mixed shapes, non-dict rows) or a string
    is not strict base64; the general path then decides, and names the bad field."""
    n = len(rows)
    try:
        width = sum(map(len, rows))
        if width == n:  # each row has one field; KeyError unless it is "value"
            return ProduceColumns(_b64_column(list(map(_get_value, rows))))
        if width == 2 * n:  # each row has two fields; KeyError unless "key" and "value"
            values = _b64_column(list(map(_get_value, rows)))
            return ProduceColumns(values, _b64_column(list(map(_get_key, rows))))
    except (KeyError, TypeError, ValueError):  # binascii.Error is a ValueError
        return None
    return None


def _b64_column(texts: list[Any]) -> list[bytes]:
    """Strict base64 decoding of a column: one C call (``core.storage.native``) when
    every text is canonical, else ``a2b_base64`` per text (raising on bad ones)."""
    out = native.b64decode_list(texts)
    if out is None:
        a2b = _a2b
        out = [a2b(v, strict_mode=True) for v in texts]
    return out


def _binary_records(rows: Sequence[Any]) -> ProduceColumns:
    """Hot path: see ``binary_columns_fast``; otherwise one loop that fills columns
    (no per-record objects). On a decoding failure the rows are scanned again with
    ``b64decode`` to name the bad field."""
    fast = binary_columns_fast(rows)
    if fast is not None:
        return fast
    a2b = _a2b
    values: list[bytes | None] = []
    keys: list[bytes | None] = []
    headers: list[list[tuple[str, bytes | None]]] = []
    stamps: list[int | None] = []
    parts: list[int | None] = []
    try:
        for i, r in enumerate(rows):
            v, k, h = r.get("value"), r.get("key"), r.get("headers")
            values.append(None if v is None else a2b(v, strict_mode=True))
            keys.append(None if k is None else a2b(k, strict_mode=True))
            headers.append(_headers_in(h, i) if h else [])
            stamps.append(r.get("timestamp"))
            parts.append(r.get("partition"))
    except (binascii.Error, ValueError, TypeError):
        for i, r in enumerate(rows):
            for name in ("key", "value"):
                if r.get(name) is not None:
                    b64decode(r[name], f"records[{i}].{name}")
        raise
    return _columns(values, keys, headers, stamps, parts)


def _columns(
    values: list[bytes | None],
    keys: list[bytes | None],
    headers: list[list[tuple[str, bytes | None]]],
    stamps: list[int | None],
    parts: list[int | None],
) -> ProduceColumns:
    """Columns, with those that hold nothing dropped (None)."""
    return ProduceColumns(
        values,
        keys if any(k is not None for k in keys) else None,
        headers if any(headers) else None,
        stamps if any(t is not None for t in stamps) else None,
        parts if any(p is not None for p in parts) else None,
    )


def produce_records(fmt: EmbeddedFormat, rows: Sequence[Any]) -> ProduceColumns:
    """Validated request records -> the broker's produce input (a sequence of
    ProduceRecord, held as columns), in order."""
    if fmt is EmbeddedFormat.BINARY:
        return _binary_records(rows)
    values: list[bytes | None] = []
    keys: list[bytes | None] = []
    headers: list[list[tuple[str, bytes | None]]] = []
    for i, r in enumerate(rows):
        values.append(_json_bytes(r.get("value"), f"records[{i}].value"))
        keys.append(_json_bytes(r.get("key"), f"records[{i}].key"))
        headers.append(_headers_in(r.get("headers"), i))
    return _columns(
        values, keys, headers, [r.get("timestamp") for r in rows], [r.get("partition") for r in rows]
    )


def schema_records(rows: Sequence[Any], keys: list[bytes | None],
                   values: list[bytes | None]) -> ProduceColumns:
    """Validated request records whose keys and values are already written (the schema
    formats) -> the broker's produce input."""
    return _columns(
        values, keys, [_headers_in(r.get("headers"), i) for i, r in enumerate(rows)],
        [r.get("timestamp") for r in rows], [r.get("partition") for r in rows]
    )


class NotJsonError(Exception):
    """A stored key or value is not JSON, so a json-format reader cannot embed it."""

    def __init__(self, index: int, topic: str, partition: int, offset: int,
                 why: str = "is not valid JSON") -> None:
        super().__init__(f"record at offset {offset} of {topic}-{partition} {why}")
        self.index = index
        self.topic = topic
        self.partition = partition
        self.offset = offset


def _headers_out(headers: Iterable[tuple[str, bytes | None]]) -> list[dict[str, Any]]:
    return [{"key": k, "value": b64encode(v)} for k, v in headers]


#: One polled record: ((topic, partition), record), e.g. ``(TopicPartition, Record)``.
Polled = tuple[tuple[str, int], Record]


def render_binary(items: Iterable[Polled]) -> list[dict[str, Any]]:
    b2a, types = _b2a, TIMESTAMP_TYPES
    return [
        {
            "topic": t,
            "key": None if r.key is None else b2a(r.key, newline=False).decode("ascii"),
            "value": None if r.value is None else b2a(r.value, newline=False).decode("ascii"),
            "partition": p,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "timestamp_type": types[r.timestamp_type & 1],
            "headers": _headers_out(r.headers) if r.headers else [],
        }
        for (t, p), r in items
    ]


_TOO_DEEP = f"nests deeper than {MAX_VALUE_DEPTH} levels, more than a JSON answer can hold"


def render_json(items: Iterable[Polled]) -> list[dict[str, Any]]:
    """Raises NotJsonError (with the failing index) at the first key or value that is
    not JSON, or nests deeper than MAX_VALUE_DEPTH."""
    loads, types, too_deep = orjson.loads, TIMESTAMP_TYPES, value_depth_exceeds
    deep = SHALLOW_VALUE_BYTES
    out: list[dict[str, Any]] = []
    append = out.append
    for i, ((t, p), r) in enumerate(items):
        k, v = r.key, r.value
        try:
            key = None if k is None else loads(k)
            value = None if v is None else loads(v)
        except orjson.JSONDecodeError:
            raise NotJsonError(i, t, p, r.offset) from None
        # value_depth_exceeds' own length test, inline: no call for the usual record
        if ((v is not None and len(v) > deep and too_deep(v))
                or (k is not None and len(k) > deep and too_deep(k))):
            raise NotJsonError(i, t, p, r.offset, _TOO_DEEP)
        append(
            {
                "topic": t,
                "key": key,
                "value": value,
                "partition": p,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "timestamp_type": types[r.timestamp_type & 1],
                "headers": _headers_out(r.headers) if r.headers else [],
            }
        )
    return out


# --- binary records straight to JSON bytes -------------------------------------------
#
# The hot read paths skip the dicts: every record is one ``bytes %`` of a template made
# once per (topic, partition), with the base64 text of the value (base64 never needs
# JSON escaping). The bytes equal ``orjson.dumps(render_binary(...))``.

_TS_NAMES = tuple(name.encode() for name in TIMESTAMP_TYPES)


class _BinaryTemplates:
    __slots__ = ("any", "head", "keyed", "partition", "plain")

    def __init__(self, topic: str, partition: int) -> None:
        head = b'{"topic":' + orjson.dumps(topic).replace(b"%", b"%%") + b',"key":'
        self.head, self.partition = head, partition
        tail = b',"partition":%d,"offset":%%d,"timestamp":%%d,"timestamp_type":"' % partition
        #: key null, value, no headers / key, value, no headers, by timestamp type
        self.plain = tuple(
            head + b'null,"value":"%s"' + tail + name + b'","headers":[]}' for name in _TS_NAMES
        )
        self.keyed = tuple(
            head + b'"%s","value":"%s"' + tail + name + b'","headers":[]}' for name in _TS_NAMES
        )
        #: anything: key, value, offset, timestamp, type name, headers (JSON texts)
        self.any = (
            head + b'%s,"value":%s,"partition":'
            + str(partition).encode()
            + b',"offset":%d,"timestamp":%d,"timestamp_type":"%s","headers":%s}'
        )


    def _at(self, key: bytes, tt: int, ts: int) -> bytes:
        return (self.head + key + b',"value":"%s","partition":' + b"%d" % self.partition
                + b',"offset":%d,"timestamp":' + b"%d" % ts + b',"timestamp_type":"'
                + _TS_NAMES[tt] + b'","headers":[]}')

    def plain_at(self, tt: int, ts: int) -> bytes:
        """``plain[tt]`` with the timestamp written in: (value base64, offset)."""
        return self._at(b"null", tt, ts)

    def keyed_at(self, tt: int, ts: int) -> bytes:
        """``keyed[tt]`` with the timestamp written in: (key, value base64, offset)."""
        return self._at(b'"%s"', tt, ts)


def _b64_json(data: bytes | None) -> bytes:
    return b"null" if data is None else b'"' + _b2a(data, newline=False) + b'"'


def _headers_json(headers: Iterable[tuple[str, bytes | None]]) -> bytes:
    return orjson.dumps(_headers_out(headers)) if headers else b"[]"


def _render_any(
    t: _BinaryTemplates, off: int, ts: int, tt: int, key: bytes | None, value: bytes | None,
    headers: list[tuple[str, bytes | None]],
) -> bytes:
    return t.any % (
        _b64_json(key), _b64_json(value), off, ts, _TS_NAMES[tt & 1], _headers_json(headers)
    )


def binary_fragments(topic: str, partition: int, records: Sequence[Any],
                     log_append_time: int | None = None) -> list[bytes]:
    """``[orjson.dumps(render_binary([((topic, partition), r)])[0]) for r in records]``
    for ``Record`` objects; for the C decoder's objects of a LogAppendTime batch, pass
    ``log_append_time`` (it replaces every timestamp and sets the type)."""
    n = len(records)
    if not n:
        return []
    t = _BinaryTemplates(topic, partition)
    values = [r.value for r in records]
    if None not in values and not any([r.headers for r in records]):
        if log_append_time is None:
            types = {r.timestamp_type for r in records}
            stamps = [r.timestamp for r in records]
        else:
            types, stamps = {1}, [log_append_time]
        if len(types) == 1:
            tt = types.pop() & 1
            keys = [r.key for r in records]
            b2a = _b2a
            b64 = [b2a(v, newline=False) for v in values]
            offsets = [r.offset for r in records]
            if stamps.count(stamps[0]) == len(stamps):  # one timestamp: in the template
                ts = stamps[0]
                if keys.count(None) == n:
                    return list(map(t.plain_at(tt, ts).__mod__, zip(b64, offsets, strict=True)))
                if None not in keys:
                    return list(map(t.keyed_at(tt, ts).__mod__, zip(
                        [b2a(k, newline=False) for k in keys], b64, offsets, strict=True)))
            elif keys.count(None) == n:
                return list(map(t.plain[tt].__mod__, zip(b64, offsets, stamps, strict=True)))
            elif None not in keys:
                return list(map(t.keyed[tt].__mod__, zip(
                    [b2a(k, newline=False) for k in keys], b64, offsets, stamps, strict=True)))
    return [_render_one(t, r, log_append_time) for r in records]


def _render_one(t: _BinaryTemplates, r: Any, log_append_time: int | None) -> bytes:
    value, key, tt, ts = r.value, r.key, r.timestamp_type & 1, r.timestamp
    if log_append_time is not None:
        tt, ts = 1, log_append_time
    if value is None or r.headers:
        return _render_any(t, r.offset, ts, tt, key, value, r.headers)
    if key is None:
        return t.plain[tt] % (_b2a(value, newline=False), r.offset, ts)
    return t.keyed[tt] % (_b2a(key, newline=False), _b2a(value, newline=False), r.offset, ts)


def cached_binary_fragments(cache: RenderCache, topic: str, partition: int,
                            batch: CachedBatch) -> Rendering:
    """``binary_fragments`` of a fetched batch of ``topic``-``partition`` as one
    ``Rendering``, made once per batch while it stays cached."""
    def render(batch: CachedBatch) -> Rendering:
        joined = native.render_batch_joined(batch.raw, *_native_template(topic, partition))
        if joined is not None:
            return Rendering(*joined)
        # no C extension, or records with headers
        return Rendering.of_fragments(binary_fragments(topic, partition, batch.record_objects(),
                                                       batch.log_append_time))

    return cache.binary(batch, render)


#: A slice of at most 1/PARTIAL_SHARE of a batch not rendered yet is rendered alone.
PARTIAL_SHARE = 4


def binary_range_text(cache: RenderCache, topic: str, partition: int,
                      batch: CachedBatch, lo: int, hi: int) -> bytes:
    """The fragments of records ``lo..hi-1`` of a fetched batch joined by commas: a
    slice of its kept rendering; for a few records of a batch not rendered yet (a
    count-limited read), those records alone, not kept (a 1-record read of a
    1000-record batch renders one record, not 1000, and a later read of the whole batch
    renders it then)."""
    rendering = cache.get(batch)
    if rendering is None and (hi - lo) * PARTIAL_SHARE <= len(batch.offsets):
        part = native.render_batch_joined(batch.raw, *_native_template(topic, partition),
                                          records=(lo, hi))
        if part is not None:
            return part[0]
    if rendering is None:
        rendering = cached_binary_fragments(cache, topic, partition, batch)
    return rendering.span(lo, hi)


def _native_template(topic: str, partition: int) -> tuple[bytes, bytes]:
    """``native.render_batch_joined``'s head and mid for the binary format (the text before
    the key, and between the value and the offset)."""
    return b'{"topic":' + orjson.dumps(topic) + b',"key":', b',"partition":%d,"offset":' % partition


def render_binary_chunks(cache: RenderCache,
                         chunks: Iterable[tuple[tuple[str, int], CachedBatch, int, int]]
                         ) -> bytes:
    """``orjson.dumps(render_binary(...))`` of the records of ``(partition, batch, lo, hi)``
    ranges, from each batch's rendering (made once per fetched batch)."""
    parts = [binary_range_text(cache, topic, partition, batch, lo, hi)
             for (topic, partition), batch, lo, hi in chunks]
    return b"[" + b",".join([p for p in parts if p]) + b"]"


def render_records(fmt: EmbeddedFormat, items: Iterable[Polled]) -> list[dict[str, Any]]:
    """Polled records -> response dicts in the embedded format."""
    return render_binary(items) if fmt is EmbeddedFormat.BINARY else render_json(items)
