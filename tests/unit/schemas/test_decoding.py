"""Decoding Confluent wire-format data to JSON values (core.broker.schemas.decoding, each
format's decoder in core.broker.schemas.serde): Avro's JSON encoding as kafka-rest answers
it, JSON Schema payloads, protobuf messages found by their message indexes, and every way
data can fail to decode."""

from __future__ import annotations

import io
import json
import math
import struct
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from google.protobuf import descriptor_pool, message_factory

from core.broker.schemas import decoding, formats
from core.broker.schemas.decoding import schema_ids
from core.broker.schemas.encoding import payload_of
from core.broker.schemas.errors import InvalidSchemaError, SchemaNotFoundError
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import AVRO, JSON, PROTOBUF
from core.broker.schemas.serde import avro as avro_serde
from core.broker.schemas.serde.base import DecodeError
from core.broker.schemas.serde.protobuf import read_message_indexes
from core.broker.schemas.wire import header


class Resolver:
    """Parsed schemas by id, as ``SchemaResolver.by_id`` gives them."""

    def __init__(self, schemas: dict[int, ParsedSchema | Exception]) -> None:
        self.schemas = schemas
        self.calls: list[int] = []

    async def by_id(self, schema_id: int) -> ParsedSchema:
        self.calls.append(schema_id)
        found = self.schemas.get(schema_id)
        if found is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        if isinstance(found, Exception):
            raise found
        return found


def framed(schema_id: int, payload: bytes) -> bytes:
    return struct.pack(">bI", 0, schema_id) + payload


def avro_bytes(schema: Any, value: Any, named: dict[str, Any] | None = None) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema, named_schemas=dict(named or {})), value)
    return out.getvalue()


async def decoder(schema_type: str, schemas: dict[int, Any], ids: Any = None
                  ) -> decoding.SchemaDecoder:
    return await decoding.load(Resolver(schemas), schema_type, schemas if ids is None else ids)


# --- AVRO ---------------------------------------------------------------------------------

MONEY = {"type": "record", "name": "Money", "namespace": "shop",
         "fields": [{"name": "cents", "type": "long"}]}
ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "total", "type": "Money"},
    {"name": "any", "type": ["null", "Money", "string", "int", "long", "float", "boolean",
                             "bytes", {"type": "array", "items": "int"},
                             {"type": "map", "values": "bytes"}]},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "DONE"]}},
    {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 2}},
    {"name": "named", "type": ["null", "Id", "State"]},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6,
                               "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ratio", "type": "float"},
    {"name": "score", "type": "double"},
    {"name": "raw", "type": {"type": "map", "values": {"type": "array", "items": "bytes"}}},
]}


@pytest.fixture
def order_schema() -> ParsedSchema:
    money = formats.parse(AVRO, json.dumps(MONEY), {})
    return formats.parse(AVRO, json.dumps(ORDER), {"shop.Money": money})


def order(**changes: Any) -> dict[str, Any]:
    import datetime
    import decimal

    return {"total": {"cents": 5}, "any": None, "state": "DONE", "id": b"\x01\xe9",
            "named": ("shop.State", "NEW"), "price": decimal.Decimal("12.34"),
            "at": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC), "ratio": 1.1,
            "score": 0.25, "raw": {"k": [b"\x00\xff"]}, **changes}


def encode_order(value: dict[str, Any]) -> bytes:
    named: dict[str, Any] = {}
    parse_schema(MONEY, named_schemas=named)
    return framed(3, avro_bytes(ORDER, value, named))


@pytest.mark.parametrize(("branch", "rendered"), [
    (None, None),
    ({"cents": 7}, {"shop.Money": {"cents": 7}}),
    ("text", {"string": "text"}),
    (("int", 3), {"int": 3}),
    (("long", 2**40), {"long": 2**40}),
    (("float", 0.5), {"float": 0.5}),
    (True, {"boolean": True}),
    (b"\x00\x7f\x80", {"bytes": "\u0000\u007f\u0080"}),
    ([1, 2], {"array": [1, 2]}),
    ({"k": b"A"}, {"map": {"k": "A"}}),
])
async def test_avro_json_encoding(order_schema: ParsedSchema, branch: Any,
                                  rendered: Any) -> None:
    got = (await decoder(AVRO, {3: order_schema})).decode(encode_order(order(any=branch)))
    assert got == {
        "total": {"cents": 5},
        "any": rendered,  # a union: {"<branch>": value}, its full name for named types
        "state": "DONE",
        "id": "\u0001\u00e9",  # fixed and bytes: one character per byte (ISO-8859-1)
        "named": {"shop.State": "NEW"},
        "price": "\u0004\u00d2",  # logical types not applied: the decimal's bytes (1234)
        "at": 1_704_067_200_000,  # the timestamp's number
        "ratio": 1.1,  # as Java prints the float, not 1.100000023841858
        "score": 0.25,
        "raw": {"k": ["\u0000\u00ff"]},
    }


async def test_avro_float_and_double_specials(order_schema: ParsedSchema) -> None:
    dec = await decoder(AVRO, {3: order_schema})
    for value, expected in ((math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")):
        got = dec.decode(encode_order(order(ratio=value, score=value)))
        assert (got["ratio"], got["score"]) == (expected, expected)
    for ratio in (3.4028234663852886e38, 1e-45, 0.1, 16777217.0, -2.5):
        got = dec.decode(encode_order(order(ratio=ratio)))["ratio"]
        assert struct.pack("<f", got) == struct.pack("<f", ratio)  # the same float32
        assert len(repr(got)) <= len(repr(struct.unpack("<f", struct.pack("<f", ratio))[0]))


async def test_avro_recursive_and_primitive_schemas() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "bytes"}, {"name": "next", "type": ["null", "Node"]},
        {"name": "kids", "type": {"type": "array", "items": "Node"}}]}
    value = {"v": b"a", "next": {"v": b"b", "next": None, "kids": []},
             "kids": [{"v": b"c", "next": None, "kids": []}]}
    schemas = {1: formats.parse(AVRO, json.dumps(node), {}),
               2: formats.parse(AVRO, '"string"', {}),
               3: formats.parse(AVRO, '["null", "string"]', {}),
               4: formats.parse(AVRO, '"bytes"', {})}
    dec = await decoder(AVRO, schemas)
    assert dec.decode(framed(1, avro_bytes(node, value))) == {
        "v": "a", "next": {"Node": {"v": "b", "next": None, "kids": []}},
        "kids": [{"v": "c", "next": None, "kids": []}]}
    assert dec.decode(framed(2, avro_bytes("string", "k1"))) == "k1"
    assert dec.decode(framed(3, avro_bytes(["null", "string"], "x"))) == {"string": "x"}
    assert dec.decode(framed(3, avro_bytes(["null", "string"], None))) is None
    assert dec.decode(framed(4, avro_bytes("bytes", b"\xe9"))) == "\u00e9"


async def test_avro_bad_payloads(order_schema: ParsedSchema) -> None:
    dec = await decoder(AVRO, {3: order_schema})
    good = encode_order(order())
    assert dec.decode(good + b"trailing bytes are ignored")["state"] == "DONE"
    with pytest.raises(DecodeError, match="^the payload is not Avro data of schema 3: EOFError"):
        dec.decode(good[:12])
    bad_union = bytearray(good)
    bad_union[5 + 1] = 0x7E  # the union index of "any": 63, no such branch
    with pytest.raises(DecodeError, match="not Avro data of schema 3"):
        dec.decode(bytes(bad_union))


async def test_compiled_once_per_parsed_schema(order_schema: ParsedSchema,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    real = avro_serde._reader_schema

    def counting(parsed: ParsedSchema) -> Any:
        made.append(parsed)
        return real(parsed)

    monkeypatch.setattr(avro_serde, "_reader_schema", counting)
    for _ in range(2):
        dec = await decoder(AVRO, {3: order_schema})
        dec.decode(encode_order(order()))
        dec.decode(encode_order(order()))
    assert len(made) == 1


# --- JSON ---------------------------------------------------------------------------------


async def test_json_schema_payloads() -> None:
    schema = formats.parse(JSON, json.dumps({"type": "object"}), {})
    dec = await decoder(JSON, {5: schema})
    doc = {"a": [1, 2.5, None, "é"], "b": {"c": True}}
    assert dec.decode(framed(5, json.dumps(doc).encode())) == doc
    assert dec.decode(framed(5, b'"not validated against the schema"')) == (
        "not validated against the schema")
    with pytest.raises(DecodeError, match="not valid JSON"):
        dec.decode(framed(5, b"{nope"))


# --- PROTOBUF -----------------------------------------------------------------------------

PROTO = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";

enum State { NEW = 0; DONE = 1; }
message Order {
  message Line { string sku = 1; int32 unit_count = 2; }
  string order_id = 1;
  int64 total_cents = 2;
  State state = 3;
  repeated Line lines = 4;
  map<string, int32> counts = 5;
  google.protobuf.Timestamp at = 6;
  optional string note = 7;
}
message Refund { string order_id = 1; bytes proof = 2; }
"""


@pytest.fixture
def proto() -> tuple[ParsedSchema, dict[str, Any]]:
    """The parsed schema and message classes of its file (in a pool of their own)."""
    parsed = formats.parse(PROTOBUF, PROTO, {})
    pool = descriptor_pool.DescriptorPool()
    for dep in parsed.model.deps.values():
        pool.AddSerializedFile(dep.SerializeToString())
    pool.AddSerializedFile(parsed.model.file.SerializeToString())
    classes = {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop.v1.{name}"))
               for name in ("Order", "Order.Line", "Refund")}
    return parsed, classes


@pytest.mark.parametrize(("data", "indexes", "used"), [
    (b"\x00", (0,), 1),  # the usual case: one 0 byte for [0]
    (b"\x02\x02", (1,), 2),  # [1]: count 1, index 1, each a zigzag varint
    (b"\x04\x00\x00", (0, 0), 3),
    (b"\x02\x80\x01", (64,), 3),  # a two-byte varint
])
def test_message_indexes(data: bytes, indexes: tuple[int, ...], used: int) -> None:
    assert read_message_indexes(memoryview(data + b"rest")) == (indexes, used)


@pytest.mark.parametrize(("data", "why"), [
    (b"", "cut short"),
    (b"\x04\x00", "cut short"),
    (b"\x01", "-1 message indexes"),
    (b"\x02\x01", "negative message index -1"),
    (b"\xff\xff\xff\xff\xff\x01", "not a valid varint"),
])
def test_bad_message_indexes(data: bytes, why: str) -> None:
    with pytest.raises(DecodeError, match=why):
        read_message_indexes(memoryview(data))


async def test_protobuf_messages(proto: tuple[ParsedSchema, dict[str, Any]]) -> None:
    parsed, classes = proto
    dec = await decoder(PROTOBUF, {9: parsed})
    order = classes["Order"](order_id="o-1", total_cents=2**40, state=1,
                             lines=[classes["Order.Line"](sku="a", unit_count=2)],
                             counts={"x": 1})
    order.at.FromSeconds(1_700_000_000)
    # protobuf's JSON mapping as Confluent prints it (defaults of fields without presence)
    assert dec.decode(framed(9, b"\x00" + order.SerializeToString())) == {
        "orderId": "o-1", "totalCents": str(2**40), "state": "DONE",
        "lines": [{"sku": "a", "unitCount": 2}], "counts": {"x": 1},
        "at": "2023-11-14T22:13:20Z"}
    assert dec.decode(framed(9, b"\x00")) == {
        "orderId": "", "totalCents": "0", "state": "NEW", "lines": [], "counts": {}}
    refund = classes["Refund"](order_id="o-1", proof=b"\xff")
    assert dec.decode(framed(9, b"\x02\x02" + refund.SerializeToString())) == {
        "orderId": "o-1", "proof": "/w=="}
    line = classes["Order.Line"](sku="z")
    assert dec.decode(framed(9, b"\x04\x00\x00" + line.SerializeToString())) == {
        "sku": "z", "unitCount": 0}
    with pytest.raises(DecodeError, match=r"\[2\]: the file has no message number 2"):
        dec.decode(framed(9, b"\x02\x04"))
    # nested types count as in the descriptor, map entries too (as the serializers count)
    assert dec.decode(framed(9, b"\x04\x00\x02" + order.lines[0].SerializeToString())) == {
        "key": "a", "value": 2}  # Order.CountsEntry read from a Line's bytes
    with pytest.raises(DecodeError, match=r"message shop.v1.Order has no message number 2"):
        dec.decode(framed(9, b"\x04\x00\x04"))
    with pytest.raises(DecodeError, match="not a shop.v1.Order message of schema 9"):
        dec.decode(framed(9, b"\x00\xff\xff\xff"))


# --- what every format shares -------------------------------------------------------------


def test_schema_ids() -> None:
    assert schema_ids([None, b"", b"\x00\x00\x00\x00\x07x", b"\x00\x00\x00\x01\x00",
                       b"\x01\x00\x00\x00\x09", b"\x00\x00\x00",
                       b"\x00\x00\x00\x00\x00", b"\x00\xff\xff\xff\xff"]) == {7, 256}


async def test_unusable_schemas_fail_the_data_that_names_them() -> None:
    avro = formats.parse(AVRO, '"string"', {})
    resolver = Resolver({1: avro, 2: InvalidSchemaError("Invalid AVRO schema: nope")})
    dec = await decoding.load(resolver, JSON, [1, 2, 3])
    assert resolver.calls == [1, 2, 3]
    cases = [
        (b"\x05\x00\x00\x00\x01{}", "not in the schema wire format: unknown magic byte 5"),
        (b"\x00\x00", "too short"),
        (b"\x00\x00\x00\x00\x00{}", "schema id 0 is not in 1"),
        (framed(1, b"{}"), "schema 1 is of type AVRO, not JSON"),
        (framed(2, b"{}"), "schema 2 cannot be parsed: Invalid AVRO schema: nope"),
        (framed(3, b"{}"), "schema id 3 is not registered"),
        (framed(4, b"{}"), "schema id 4 was not loaded"),
    ]
    for data, why in cases:
        with pytest.raises(DecodeError, match=why):
            dec.decode(data)


async def test_other_registry_errors_raise() -> None:
    resolver = Resolver({1: RuntimeError("registry unavailable")})
    with pytest.raises(RuntimeError, match="unavailable"):
        await decoding.load(resolver, AVRO, [1])


async def test_a_schema_the_decoder_cannot_use_fails_its_data(
        order_schema: ParsedSchema, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(parsed: ParsedSchema) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(avro_serde, "_reader_schema", broken)
    dec = await decoder(AVRO, {3: order_schema})
    with pytest.raises(DecodeError, match="^schema 3 cannot be used to decode: boom"):
        dec.decode(encode_order(order()))


@pytest.mark.parametrize(("schema_type", "text", "value"), [
    (AVRO, json.dumps(MONEY), {"cents": 12}),
    (AVRO, '["null", "bytes", "float"]', {"float": 1.1}),
    (JSON, '{"type": "object"}', {"a": [1, "é", None]}),
    (PROTOBUF, PROTO, {"orderId": "o-1", "totalCents": "7", "state": "DONE",
                       "lines": [{"sku": "a", "unitCount": 2}], "counts": {"x": 1}}),
])
async def test_what_is_encoded_decodes_to_the_same_value(schema_type: str, text: str,
                                                         value: Any) -> None:
    parsed = formats.parse(schema_type, text, {})
    data = header(11) + payload_of(parsed)(value)
    assert (await decoder(schema_type, {11: parsed})).decode(data) == value
