"""Embedded formats: request keys/values -> bytes, stored records -> response dicts.

binary  key/value are standard base64 strings (RFC 4648 ``+/`` alphabet, padded) of the
        raw bytes, both ways. A non-string or undecodable string is 400 / 400.
json    key/value are any JSON value; stored as its compact UTF-8 JSON text (no schema,
        no magic byte); consumed records embed the parsed value.

A JSON ``null`` or a missing field is a Kafka null, not empty bytes. Consumed records
carry (franz extensions) ``timestamp`` (epoch ms), ``timestamp_type`` (``CreateTime`` or
``LogAppendTime``) and ``headers``, a list of ``{"key": str, "value": base64 | null}``
in record order (duplicates kept) whatever the embedded format.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from api.content_types import EmbeddedFormat
from api.errors import ApiError, ErrorCode
from core.broker.types import ProduceRecord
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


def _binary_records(rows: Sequence[Any]) -> list[ProduceRecord]:
    """Hot path: no per-record strings; on a decoding failure the rows are scanned
    again with ``b64decode`` to name the bad field."""
    a2b, record = _a2b, ProduceRecord
    try:
        return [
            record(
                None if (v := r.get("value")) is None else a2b(v, strict_mode=True),
                None if (k := r.get("key")) is None else a2b(k, strict_mode=True),
                _headers_in(h, i) if (h := r.get("headers")) else [],
                r.get("timestamp"),
                r.get("partition"),
            )
            for i, r in enumerate(rows)
        ]
    except (binascii.Error, ValueError, TypeError):
        for i, r in enumerate(rows):
            for name in ("key", "value"):
                if r.get(name) is not None:
                    b64decode(r[name], f"records[{i}].{name}")
        raise


def produce_records(fmt: EmbeddedFormat, rows: Sequence[Any]) -> list[ProduceRecord]:
    """Validated request records -> broker ProduceRecords, in order."""
    if fmt is EmbeddedFormat.BINARY:
        return _binary_records(rows)
    return [
        ProduceRecord(
            _json_bytes(r.get("value"), f"records[{i}].value"),
            _json_bytes(r.get("key"), f"records[{i}].key"),
            _headers_in(r.get("headers"), i),
            r.get("timestamp"),
            r.get("partition"),
        )
        for i, r in enumerate(rows)
    ]


class NotJsonError(Exception):
    """A stored key or value is not JSON, so a json-format reader cannot embed it."""

    def __init__(self, index: int, topic: str, partition: int, offset: int) -> None:
        super().__init__(f"record at offset {offset} of {topic}-{partition} is not valid JSON")
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


def render_json(items: Iterable[Polled]) -> list[dict[str, Any]]:
    """Raises NotJsonError (with the failing index) at the first key or value that is
    not JSON."""
    loads, types = orjson.loads, TIMESTAMP_TYPES
    out: list[dict[str, Any]] = []
    append = out.append
    for i, ((t, p), r) in enumerate(items):
        try:
            key = None if r.key is None else loads(r.key)
            value = None if r.value is None else loads(r.value)
        except orjson.JSONDecodeError:
            raise NotJsonError(i, t, p, r.offset) from None
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


def render_records(fmt: EmbeddedFormat, items: Iterable[Polled]) -> list[dict[str, Any]]:
    """Polled records -> response dicts in the embedded format."""
    return render_binary(items) if fmt is EmbeddedFormat.BINARY else render_json(items)
