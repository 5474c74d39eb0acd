"""Records of a v2 read whose keys or values are decoded with schemas: the avro,
jsonschema and protobuf embedded formats (``core.broker.schemas.decoding``), and the
range read's ``key_format`` when it differs from the values' format.

Keys and values are decoded each with its side's format; a consumer instance uses its
one format for both, as Confluent's REST Proxy configures one deserializer for keys and
values (a key that is not in the schema wire format fails the read there and here). A
null key or value stays null. The schema ids a response names are resolved first
(``SchemaResolver``, cached), then the whole response is decoded in one
``asyncio.to_thread`` call.

A record that cannot be decoded (not in the wire format, an unknown schema id, a schema
of another type, bytes the schema does not read) ends its partition's part of the
answer, as for a json-format reader meeting bytes that are not JSON: the records before
it are answered, and ``bad`` names its offset so the caller moves the position back
there; when nothing comes before it, the read fails with 408 / 40801 (Confluent's
serialization error) naming the partition, the offset and why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from api.content_types import SCHEMA_TYPES, EmbeddedFormat
from api.errors import ApiError, ErrorCode
from api.v2.embedded import TIMESTAMP_TYPES, Polled, b64encode
from core.broker.schemas import decoding
from core.broker.schemas.serde.base import DecodeError
from core.broker.types import TopicPartition

Decode = Callable[[bytes], Any]


@dataclass(slots=True)
class Undecodable:
    """The first record of a read that could not be decoded."""

    topic: str
    partition: int
    offset: int
    side: str  # "key" | "value"
    reason: str

    def error(self) -> ApiError:
        return ApiError(
            408, ErrorCode.SERIALIZATION_ERROR,
            f"Error deserializing {self.side} for partition {self.topic}-{self.partition} "
            f"at offset {self.offset}: {self.reason}. If needed, please seek past the record "
            "to continue consumption.")


@dataclass(slots=True)
class Rendered:
    """Response records; per partition the offset of its first undecodable record (its
    later records are left out); the first such record."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    bad: dict[TopicPartition, int] = field(default_factory=dict)
    first: Undecodable | None = None


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise DecodeError("not valid JSON") from None


def _binary(data: bytes) -> Any:
    return b64encode(data)


async def _decoder(resolver: decoding.ParsedById, fmt: EmbeddedFormat,
                   datas: Iterable[bytes | None]) -> Decode:
    schema_type = SCHEMA_TYPES.get(fmt)
    if schema_type is None:
        return _binary if fmt is EmbeddedFormat.BINARY else _json
    schemas = await decoding.load(resolver, schema_type, decoding.schema_ids(datas))
    return schemas.decode


async def render_schema_records(resolver: decoding.ParsedById, key_format: EmbeddedFormat,
                                value_format: EmbeddedFormat,
                                items: Iterable[Polled]) -> Rendered:
    """``items`` rendered with keys in ``key_format`` and values in ``value_format``.
    Registry errors other than an unknown or unusable schema (the registry unavailable)
    raise, before anything is decoded."""
    pairs = list(items)
    if not pairs:
        return Rendered()
    decode_key = await _decoder(resolver, key_format, (r.key for _, r in pairs))
    decode_value = await _decoder(resolver, value_format, (r.value for _, r in pairs))
    return await asyncio.to_thread(_render, decode_key, decode_value, pairs)


def _render(decode_key: Decode, decode_value: Decode, pairs: Sequence[Polled]) -> Rendered:
    out = Rendered()
    rows, bad, types = out.rows, out.bad, TIMESTAMP_TYPES
    for tp, r in pairs:
        if bad and tp in bad:
            continue
        side = "key"
        try:
            key = None if r.key is None else decode_key(r.key)
            side = "value"
            value = None if r.value is None else decode_value(r.value)
        except DecodeError as exc:
            bad[TopicPartition(*tp)] = r.offset
            if out.first is None:
                out.first = Undecodable(tp[0], tp[1], r.offset, side, str(exc))
            continue
        rows.append({
            "topic": tp[0],
            "key": key,
            "value": value,
            "partition": tp[1],
            "offset": r.offset,
            "timestamp": r.timestamp,
            "timestamp_type": types[r.timestamp_type & 1],
            "headers": [{"key": k, "value": b64encode(v)} for k, v in r.headers]
            if r.headers else [],
        })
    return out
