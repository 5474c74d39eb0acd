"""Hostile Avro payloads are refused before fastavro reads them (core.broker.schemas.serde
.avro_depth): a recursive schema's payload nested thousands of levels deep (which made
fastavro overflow the C stack and kill the broker), one nested deeper than a JSON answer
can hold, and a few bytes of array count asking for billions of nulls. Shallow payloads
of the same schemas still decode."""

from __future__ import annotations

import io
import json
import struct
import time
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer

from core.broker.schemas import decoding, formats
from core.broker.schemas.model import AVRO, JSON
from core.broker.schemas.serde.avro_depth import (
    ITEMS_BEYOND_BYTES,
    check_depth,
    has_empty_items,
    static_depth,
)
from core.broker.schemas.serde.base import DecodeError
from core.json_depth import MAX_VALUE_DEPTH

LIST = {"type": "record", "name": "L", "fields": [{"name": "n", "type": ["null", "L"]}]}
NULLS = {"type": "array", "items": "null"}
ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "note", "type": ["null", "string"]},
]}


def zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def linked(depth: int) -> bytes:
    """A linked list ``depth`` records long: union index 1 per link, then null."""
    return b"\x02" * (depth - 1) + b"\x00"


def parsed(schema: Any, schema_type: str = AVRO) -> formats.ParsedSchema:
    return formats.parse(schema_type, json.dumps(schema), {})


def decode(schema: Any, payload: bytes, schema_type: str = AVRO) -> Any:
    d = decoding.SchemaDecoder(schema_type, {1: parsed(schema, schema_type)})
    return d.decode(struct.pack(">bI", 0, 1) + payload)


def test_static_depth() -> None:
    named: dict[str, Any] = {}
    order = parse_schema(ORDER, named_schemas=named)
    assert static_depth(order, named, MAX_VALUE_DEPTH) == 2  # the record, its array
    named = {}
    ll = parse_schema(LIST, named_schemas=named)
    assert static_depth(ll, named, MAX_VALUE_DEPTH) == MAX_VALUE_DEPTH + 1  # recursive
    deep: Any = "int"
    for _ in range(MAX_VALUE_DEPTH + 5):
        deep = {"type": "array", "items": deep}
    assert static_depth(deep, {}, MAX_VALUE_DEPTH) == MAX_VALUE_DEPTH + 1


def test_empty_items() -> None:
    assert has_empty_items(NULLS, {})
    assert has_empty_items({"type": "map", "values": {"type": "record", "name": "E",
                                                      "fields": []}}, {})
    assert has_empty_items({"type": "array", "items": {"type": "fixed", "name": "F",
                                                       "size": 0}}, {})
    assert not has_empty_items({"type": "array", "items": "boolean"}, {})
    assert not has_empty_items({"type": "array", "items": ["null", "int"]}, {})
    named: dict[str, Any] = {}
    assert not has_empty_items(parse_schema(ORDER, named_schemas=named), named)


def test_check_depth_counts_levels_as_the_json_answer() -> None:
    named: dict[str, Any] = {}
    ll = parse_schema(LIST, named_schemas=named)
    # each link is a record and a union branch: two levels
    check_depth(memoryview(linked(MAX_VALUE_DEPTH // 2)), ll, named, MAX_VALUE_DEPTH)
    with pytest.raises(DecodeError, match=f"deeper than {MAX_VALUE_DEPTH} levels"):
        check_depth(memoryview(linked(MAX_VALUE_DEPTH // 2 + 1)), ll, named, MAX_VALUE_DEPTH)
    check_depth(memoryview(b"\x02\x02"), ll, named, MAX_VALUE_DEPTH)  # short: fastavro says


def test_recursive_payloads_decode_or_fail_cleanly() -> None:
    value = decode(LIST, linked(3))
    assert value == {"n": {"L": {"n": {"L": {"n": None}}}}}
    for depth in (MAX_VALUE_DEPTH, 5_000, 1_000_000):  # 1 M levels: a crash before
        t0 = time.monotonic()
        with pytest.raises(DecodeError, match="nests deeper than 128 levels"):
            decode(LIST, linked(depth))
        assert time.monotonic() - t0 < 5


def test_array_counts_beyond_the_payload_are_refused() -> None:
    assert decode(NULLS, zigzag(3) + b"\x00") == [None, None, None]
    assert len(decode(NULLS, zigzag(ITEMS_BEYOND_BYTES) + b"\x00")) == ITEMS_BEYOND_BYTES
    for count in (10**6, 2**62):
        with pytest.raises(DecodeError, match="more array or map items than its"):
            decode(NULLS, zigzag(count) + b"\x00")
    # a negative count (a block with its byte size) is counted the same
    with pytest.raises(DecodeError, match="more array or map items"):
        decode(NULLS, zigzag(-(10**9)) + zigzag(0) + b"\x00")


def test_usual_schemas_are_not_walked() -> None:
    from core.broker.schemas.serde.avro import _needs_walk  # noqa: PLC0415
    assert not _needs_walk(parsed(ORDER))
    assert _needs_walk(parsed(LIST))
    assert _needs_walk(parsed(NULLS))
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(ORDER), {"id": "a", "tags": ["x"], "note": None})
    assert decode(ORDER, out.getvalue()) == {"id": "a", "tags": ["x"], "note": None}


def test_json_schema_values_nested_too_deep() -> None:
    schema = {"type": "array"}
    assert decode(schema, b"[[[]]]", JSON) == [[[]]]
    ok = b"[" * MAX_VALUE_DEPTH + b"]" * MAX_VALUE_DEPTH
    assert decode(schema, ok, JSON) is not None
    deep = b"[" * (MAX_VALUE_DEPTH + 1) + b"]" * (MAX_VALUE_DEPTH + 1)
    with pytest.raises(DecodeError, match="nests deeper than 128 levels"):
        decode(schema, deep, JSON)
    # brackets inside strings do not nest
    text = b'["' + b"[" * 1000 + b'"]'
    assert decode(schema, text, JSON) == ["[" * 1000]
