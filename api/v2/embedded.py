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


def produce_records(fmt: EmbeddedFormat, rows: Sequence[Any]) -> list[ProduceRecord]:
    """Validated request records -> broker ProduceRecords, in order."""
    out: list[ProduceRecord] = []
    append = out.append
    binary = fmt is EmbeddedFormat.BINARY
    for i, r in enumerate(rows):
        key = r.get("key")
        value = r.get("value")
        if binary:
            kb = None if key is None else b64decode(key, f"records[{i}].key")
            vb = None if value is None else b64decode(value, f"records[{i}].value")
        else:
            kb = _json_bytes(key, f"records[{i}].key")
            vb = _json_bytes(value, f"records[{i}].value")
        append(ProduceRecord(vb, kb, _headers_in(r.get("headers"), i), r.get("timestamp"),
                             r.get("partition")))
    return out


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


def render_binary(topic: str, partition: int, r: Record) -> dict[str, Any]:
    return {
        "topic": topic,
        "key": None if r.key is None else _b2a(r.key, newline=False).decode("ascii"),
        "value": None if r.value is None else _b2a(r.value, newline=False).decode("ascii"),
        "partition": partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": TIMESTAMP_TYPES[r.timestamp_type & 1],
        "headers": _headers_out(r.headers) if r.headers else [],
    }


def render_json(topic: str, partition: int, r: Record) -> dict[str, Any]:
    """Raises orjson.JSONDecodeError when the key or value is not JSON."""
    loads = orjson.loads
    return {
        "topic": topic,
        "key": None if r.key is None else loads(r.key),
        "value": None if r.value is None else loads(r.value),
        "partition": partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": TIMESTAMP_TYPES[r.timestamp_type & 1],
        "headers": _headers_out(r.headers) if r.headers else [],
    }


def render_records(
    fmt: EmbeddedFormat, items: Iterable[tuple[str, int, Record]]
) -> list[dict[str, Any]]:
    """(topic, partition, record) triples -> response dicts; raises NotJsonError (with
    the failing index) when a json-format reader meets bytes that are not JSON."""
    if fmt is EmbeddedFormat.BINARY:
        return [render_binary(t, p, r) for t, p, r in items]
    out: list[dict[str, Any]] = []
    for i, (t, p, r) in enumerate(items):
        try:
            out.append(render_json(t, p, r))
        except orjson.JSONDecodeError:
            raise NotJsonError(i, t, p, r.offset) from None
    return out
