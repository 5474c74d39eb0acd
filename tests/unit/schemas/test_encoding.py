"""Keys and values written with a schema (core.broker.schemas.encoding, each format's
encoder in core.broker.schemas.serde): each format's payload read back with its own
library (fastavro, JSON, protobuf), Confluent's header and message indexes, values a
schema refuses (with where), the record order of request errors, the subject name
strategies, and which schema a request's choice resolves to on a registry in memory
(core.broker.schemas.subjects)."""

from __future__ import annotations

import asyncio
import datetime
import io
import json
from typing import Any

import pytest
from _schemas_log_fake import MemoryLog
from fastavro import parse_schema, schemaless_reader
from test_schema_registry_router import Cache, ElsewhereRouter, RemoteLeader

from core.broker.schemas import encoding, formats, subjects
from core.broker.schemas.encoding import Writer, encode_items, encode_records, payload_of
from core.broker.schemas.errors import (
    KeySchemaMissingError,
    RawSchemaInvalidError,
    SchemaChoiceError,
    SchemaLookupError,
    SerializationError,
    ValueSchemaMissingError,
)
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import Reference, SchemaInput
from core.broker.schemas.registry import SchemaRegistry
from core.broker.schemas.router import SchemaRegistryRouter
from core.broker.schemas.serde import protobuf
from core.broker.schemas.serde.base import Invalid, Payload
from core.broker.schemas.subjects import (
    SchemaChoice,
    SubjectNameStrategy,
    record_name,
    subject_name,
)
from core.broker.schemas.wire import header, split
from core.clock import ManualClock

USER = {"type": "record", "name": "User", "namespace": "t", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": ["null", "int"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    {"name": "scores", "type": {"type": "map", "values": "double"}, "default": {}},
    {"name": "raw", "type": "bytes", "default": "\u00ff"},
    {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 2}, "default": "ab"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]},
     "default": "A"},
    {"name": "ratio", "type": "float", "default": 0.5},
    {"name": "big", "type": "long", "default": 0},
    {"name": "ok", "type": "boolean", "default": True},
    {"name": "next", "type": ["null", "User"], "default": None},
]}
PROTO = """syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  int64 qty = 2;
  google.protobuf.Timestamp at = 3;
  Line line = 4;
  message Line { string sku = 1; }
}
message Refund { string order_id = 1; }
"""


def avro(schema: Any, refs: dict[str, ParsedSchema] | None = None) -> ParsedSchema:
    return formats.parse("AVRO", json.dumps(schema), refs or {},
                         tuple(Reference(n, n, 1) for n in refs or {}))


def read_avro(schema: Any, payload: bytes, named: dict[str, Any] | None = None) -> Any:
    parsed = parse_schema(schema, named_schemas=named if named is not None else {})
    return schemaless_reader(io.BytesIO(payload), parsed, None)


def writer(parsed: ParsedSchema, schema_id: int = 7) -> Writer:
    return Writer("s", schema_id, 1, parsed.schema_type, header(schema_id),
                  payload_of(parsed))


def refused(payload: Payload, value: Any) -> str:
    with pytest.raises(Invalid) as info:
        payload(value)
    return f"{info.value.where()}: {info.value.detail}"


# --- AVRO -----------------------------------------------------------------------------------


def test_avro_reads_back_with_fastavro_defaults_filled() -> None:
    payload = payload_of(avro(USER))
    value = {"name": "ada", "age": {"int": 36}, "tags": ["x"], "scores": {"m": 1},
             "raw": "\u0000\u00ffA", "id": "zz", "kind": "B", "ratio": "NaN",
             "big": 2**62, "ok": False,
             "next": {"t.User": {"name": "bob", "age": None}}}
    got = read_avro(USER, payload(value))
    assert got["name"] == "ada" and got["age"] == 36 and got["tags"] == ["x"]
    assert got["scores"] == {"m": 1.0} and got["raw"] == b"\x00\xffA" and got["id"] == b"zz"
    assert got["kind"] == "B" and got["big"] == 2**62 and got["ok"] is False
    assert got["ratio"] != got["ratio"]  # NaN
    assert got["next"]["name"] == "bob" and got["next"]["raw"] == b"\xff"  # defaults
    assert got["next"]["id"] == b"ab" and got["next"]["next"] is None
    assert read_avro(USER, payload({"name": "x", "next": {"User": {"name": "y"}}}))["next"][
        "name"] == "y"  # a named branch by its short name too


@pytest.mark.parametrize(("schema", "value", "expected"), [
    ("string", "hé", "hé"),
    ("int", -5, -5),
    ("bytes", "\u00fe", b"\xfe"),
    (["null", "string", {"type": "map", "values": "long"}], {"map": {"a": 1}}, {"a": 1}),
    (["null", "string"], None, None),
    (["string", "long"], {"long": 3}, 3),
    ({"type": "int", "logicalType": "date"}, 19000, datetime.date(2022, 1, 8)),
    ({"type": "array", "items": ["null", "int"]}, [None, {"int": 1}], [None, 1]),
])
def test_avro_top_level_types(schema: Any, value: Any, expected: Any) -> None:
    assert read_avro(schema, payload_of(avro(schema))(value)) == expected


def test_avro_named_type_from_a_reference() -> None:
    dep = avro({"type": "enum", "name": "Color", "namespace": "c", "symbols": ["RED", "BLUE"]})
    outer = {"type": "record", "name": "Car", "fields": [
        {"name": "color", "type": "c.Color"},
        {"name": "alt", "type": ["null", "c.Color"], "default": None}]}
    parsed = avro(outer, {"c.Color": dep})
    named: dict[str, Any] = {}
    parse_schema(json.loads(dep.text), named_schemas=named)
    got = read_avro(outer, payload_of(parsed)({"color": "BLUE", "alt": {"c.Color": "RED"}}),
                    named)
    assert got == {"color": "BLUE", "alt": "RED"}


@pytest.mark.parametrize(("value", "message"), [
    ({"name": 1}, ".name: expected a string, got 1"),
    ({"name": "a", "age": 3}, ".age: expected a union value: null or {\"<type>\": value} "
                              "with a type of [null, int], got 3"),
    ({"name": "a", "age": {"long": 3}}, ".age: expected a union value"),
    ({"name": "a", "zz": 1}, ": record t.User has no field 'zz'"),
    ({"age": None}, ": record t.User needs field 'name' (it has no default)"),
    ({"name": "a", "tags": ["x", 2]}, ".tags[1]: expected a string, got 2"),
    ({"name": "a", "scores": {"k": "x"}}, '.scores["k"]: expected a number, got "x"'),
    ({"name": "a", "kind": "C"}, ".kind: expected a symbol of enum t.Kind (A, B), got \"C\""),
    ({"name": "a", "id": "abc"}, ".id: fixed t.Id has 2 bytes, \"abc\" has 3"),
    ({"name": "a", "raw": "\u0100"}, ".raw: bytes are a string of code points"),
    ({"name": "a", "ratio": 1e39}, ".ratio: 1e+39 is out of range for a float (32 bits)"),
    ({"name": "a", "big": 2**63}, ".big: expected a long (64 bits)"),
    ({"name": "a", "ok": 1}, ".ok: expected a boolean, got 1"),
    ({"name": "a", "next": {"t.User": {"name": 5}}}, ".next.name: expected a string, got 5"),
    ([1], ": expected an object (record t.User), got [1]"),
])
def test_avro_refuses_values_naming_where(value: Any, message: str) -> None:
    assert refused(payload_of(avro(USER)), value).startswith(message)


def test_avro_int_range_and_types() -> None:
    payload = payload_of(avro("int"))
    assert refused(payload, 2**31).startswith(": expected an int (32 bits)")
    assert refused(payload, True).startswith(": expected an int")
    assert refused(payload, 1.5).startswith(": expected an int")


def test_avro_float_range() -> None:
    payload = payload_of(avro("float"))
    assert refused(payload, 1e39) == ": 1e+39 is out of range for a float (32 bits)"
    assert refused(payload, 10**400).endswith("is out of range for a float (32 bits)")
    assert read_avro("float", payload("-Infinity")) == float("-inf")


# --- JSON -----------------------------------------------------------------------------------


def test_json_validates_then_writes_compact_json() -> None:
    other = formats.parse("JSON", json.dumps({"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"]}), {})
    doc = {"type": "object", "properties": {"o": {"$ref": "other.json"},
                                            "l": {"type": "array", "items": {"type": "string"}}}}
    parsed = formats.parse("JSON", json.dumps(doc), {"other.json": other},
                           (Reference("other.json", "other", 1),))
    payload = payload_of(parsed)
    value = {"o": {"n": 1}, "l": ["a", "b"]}
    assert payload(value) == b'{"o":{"n":1},"l":["a","b"]}'
    assert json.loads(payload(value)) == value
    assert refused(payload, {"o": {"n": "x"}}) == ".o.n: 'x' is not of type 'integer'"
    assert refused(payload, {"o": {}}) == ".o: 'n' is a required property"
    assert refused(payload, {"l": ["a", 2]}) == ".l[1]: 2 is not of type 'string'"
    assert refused(payload, 5) == ": 5 is not of type 'object'"


def test_json_primitive_and_draft_2020() -> None:
    parsed = formats.parse("JSON", json.dumps({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array", "prefixItems": [{"type": "string"}], "items": False}), {})
    payload = payload_of(parsed)
    assert payload(["x"]) == b'["x"]'
    assert "Expected at most 1 item" in refused(payload, ["x", "y"])


# --- PROTOBUF -------------------------------------------------------------------------------


def proto_classes(parsed: ParsedSchema) -> Any:
    from google.protobuf import descriptor_pool, message_factory
    pool = descriptor_pool.DescriptorPool()
    for dep in parsed.model.deps.values():
        pool.Add(dep)
    pool.Add(parsed.model.file)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def test_protobuf_first_message_with_index_zero() -> None:
    parsed = formats.parse("PROTOBUF", PROTO, {})
    payload = payload_of(parsed)(
        {"id": "o-1", "qty": "5", "at": "2024-01-01T00:00:00Z", "line": {"sku": "x"}})
    assert payload[0] == 0  # message indexes [0]: a single 0
    order = proto_classes(parsed)("shop.v1.Order").FromString(payload[1:])
    assert (order.id, order.qty, order.at.seconds, order.line.sku) == (
        "o-1", 5, 1704067200, "x")


def test_protobuf_other_messages_and_their_indexes() -> None:
    parsed = formats.parse("PROTOBUF", PROTO, {})
    cls = proto_classes(parsed)
    refund = protobuf.encoder(parsed, "shop.v1.Refund")({"orderId": "o-1"})
    assert refund[:2] == b"\x02\x02"  # one index: 1
    assert cls("shop.v1.Refund").FromString(refund[2:]).order_id == "o-1"
    line = protobuf.encoder(parsed, "shop.v1.Order.Line")({"sku": "s"})
    assert line[:3] == b"\x04\x00\x00"  # two indexes: 0, 0
    assert cls("shop.v1.Order.Line").FromString(line[3:]).sku == "s"
    with pytest.raises(SchemaChoiceError):
        protobuf.encoder(parsed, "shop.v1.Nope")


@pytest.mark.parametrize(("path", "expected"), [
    ([0], b"\x00"), ([1], b"\x02\x02"), ([0, 0], b"\x04\x00\x00"), ([2, 70], b"\x04\x04\x8c\x01"),
])
def test_message_indexes(path: list[int], expected: bytes) -> None:
    assert protobuf.message_indexes(path) == expected


def test_protobuf_refuses_values() -> None:
    payload = payload_of(formats.parse("PROTOBUF", PROTO, {}))
    assert "has no field named" in refused(payload, {"nope": 1})
    assert "Failed to parse qty field" in refused(payload, {"qty": "many"})
    assert refused(payload, [1]) == ": expected an object (message shop.v1.Order), got [1]"
    enum_only = formats.parse("PROTOBUF", 'syntax = "proto3"; enum E { A = 0; }', {})
    assert "defines no message" in refused(payload_of(enum_only), {})


# --- requests: record order, nulls, errors --------------------------------------------------


def test_encode_records_frames_each_value_and_keeps_nulls() -> None:
    w = writer(avro("string"), 9)
    keys, values = encode_records(None, [None, None], w, ["a", None])
    assert keys == [None, None] and values[1] is None
    schema_id, payload = split(values[0])
    assert schema_id == 9 and bytes(payload) == b"\x02a"


def test_encode_records_fails_at_the_first_bad_record_key_first() -> None:
    w = writer(avro("string"))
    with pytest.raises(ValueSchemaMissingError, match="does not include value schema"):
        encode_records(w, ["k", "k"], None, [None, "v"])
    with pytest.raises(KeySchemaMissingError, match="does not include key schema"):
        encode_records(None, [None, "k"], w, ["v", "v"])
    with pytest.raises(SerializationError) as info:
        encode_records(w, ["k", 5], w, ["v", 6])
    assert info.value.message == ("Conversion of JSON to Object failed: records[1].key: "
                                  "expected a string, got 5")


def test_encode_items_returns_errors_in_place() -> None:
    w = writer(avro("long"))
    out = encode_items([(w, 1, "value.data"), (w, None, "key.data"), (w, "x", "value.data")])
    assert isinstance(out[0], bytes) and out[1] is None
    assert isinstance(out[2], SerializationError)
    assert out[2].message.startswith("Conversion of JSON to Object failed: value.data: ")


async def test_run_uses_one_thread_for_many_values(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    async def to_thread(fn: Any, *args: Any) -> Any:
        calls.append(fn)
        return fn(*args)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    assert await encoding.run(3, sum, [1, 2]) == 3
    assert calls == []
    assert await encoding.run(encoding.INLINE_VALUES + 1, sum, [1, 2]) == 3
    assert calls == [sum]


# --- subjects -------------------------------------------------------------------------------


def test_record_names_and_strategies() -> None:
    user, proto = avro(USER), formats.parse("PROTOBUF", PROTO, {})
    titled = formats.parse("JSON", '{"title": "Thing", "type": "object"}', {})
    assert (record_name(user), record_name(proto), record_name(titled)) == (
        "t.User", "shop.v1.Order", "Thing")
    assert record_name(avro("string")) is None
    assert record_name(formats.parse("JSON", '{"type": "object"}', {})) is None
    S = SubjectNameStrategy
    assert subject_name(S.TOPIC_NAME, "orders", is_key=True, parsed=None) == "orders-key"
    assert subject_name(S.TOPIC_NAME, "orders", is_key=False, parsed=user) == "orders-value"
    assert subject_name(S.RECORD_NAME, "orders", is_key=False, parsed=user) == "t.User"
    assert subject_name(S.TOPIC_RECORD_NAME, "o", is_key=True, parsed=proto) == "o-shop.v1.Order"
    with pytest.raises(SchemaChoiceError, match="without schema_id or schema"):
        subject_name(S.RECORD_NAME, "orders", is_key=False, parsed=None)
    with pytest.raises(SchemaLookupError, match="must have a record name"):
        subject_name(S.RECORD_NAME, "orders", is_key=False, parsed=avro("string"))


# --- which schema: on a registry in memory ---------------------------------------------------


@pytest.fixture
def registry() -> SchemaRegistryRouter:
    leader = RemoteLeader(SchemaRegistry(MemoryLog(), ManualClock(0), append_timeout_ms=1000))
    local = SchemaRegistry(MemoryLog(), ManualClock(0), append_timeout_ms=1000)
    return SchemaRegistryRouter(local, ElsewhereRouter(), Cache(), leader)  # type: ignore[arg-type]


USER_TEXT = json.dumps(USER)
V2_USER = json.dumps({**USER, "fields": [*USER["fields"], {
    "name": "email", "type": ["null", "string"], "default": None}]})


async def test_writer_by_text_registers_under_the_topic_subject(registry: Any) -> None:
    w = await subjects.writer(registry, "orders", SchemaChoice("AVRO", USER_TEXT), is_key=False,
                              schema_type="AVRO")
    assert (w.subject, w.schema_id, w.version, w.schema_type) == ("orders-value", 1, 1, "AVRO")
    again = await subjects.writer(registry, "orders", SchemaChoice("AVRO", V2_USER),
                                  is_key=False)
    assert (again.schema_id, again.version) == (2, 2)
    by_name = await subjects.writer(registry, "orders", SchemaChoice(
        "AVRO", USER_TEXT, strategy=SubjectNameStrategy.RECORD_NAME), is_key=False)
    assert (by_name.subject, by_name.schema_id, by_name.version) == ("t.User", 1, 1)
    with pytest.raises(RawSchemaInvalidError, match="Invalid schema: the key schema"):
        await subjects.writer(registry, "orders", SchemaChoice("AVRO", "{nope"), is_key=True)
    with pytest.raises(SchemaLookupError, match="Error when registering schema"):
        await subjects.writer(registry, "orders", SchemaChoice("AVRO", '"string"'),
                              is_key=False)  # incompatible with orders-value's latest


async def test_writer_by_id_version_and_latest(registry: Any) -> None:
    await registry.call("register", subject="orders-value", schema=SchemaInput(USER_TEXT))
    await registry.call("register", subject="orders-value", schema=SchemaInput(V2_USER))
    by_id = await subjects.writer(registry, "orders", SchemaChoice(schema_id=1), is_key=False)
    assert (by_id.subject, by_id.schema_id, by_id.version) == ("orders-value", 1, 1)
    by_version = await subjects.writer(registry, "orders", SchemaChoice(version=1),
                                       is_key=False)
    assert (by_version.schema_id, by_version.version) == (1, 1)
    latest = await subjects.writer(registry, "orders", SchemaChoice(), is_key=False)
    assert (latest.schema_id, latest.version) == (2, 2)
    other = await subjects.writer(registry, "x", SchemaChoice(subject="orders-value"),
                                  is_key=True)
    assert (other.subject, other.schema_id) == ("orders-value", 2)
    await registry.call("register", subject="s2", schema=SchemaInput('"string"'))
    with pytest.raises(SchemaLookupError, match="not registered under the subject"):
        await subjects.writer(registry, "elsewhere", SchemaChoice(schema_id=1, subject="s2"),
                              is_key=False)
    with pytest.raises(SchemaLookupError, match="Subject 'elsewhere-value' not found"):
        await subjects.writer(registry, "elsewhere", SchemaChoice(schema_id=1), is_key=False)
    with pytest.raises(SchemaLookupError, match="Schema 99 not found"):
        await subjects.writer(registry, "orders", SchemaChoice(schema_id=99), is_key=False)
    with pytest.raises(SchemaLookupError, match="Schema 0 not found"):
        await subjects.writer(registry, "orders", SchemaChoice(schema_id=0), is_key=False)
    with pytest.raises(SchemaChoiceError, match="subject: orders-value, version: 3"):
        await subjects.writer(registry, "orders", SchemaChoice(version=3), is_key=False)
    with pytest.raises(SchemaLookupError, match="latest schema version. subject = orders-key"):
        await subjects.writer(registry, "orders", SchemaChoice(), is_key=True)
    with pytest.raises(SchemaLookupError, match="is a AVRO schema, not PROTOBUF"):
        await subjects.writer(registry, "orders", SchemaChoice(schema_id=1), is_key=False,
                              schema_type="PROTOBUF")


async def test_writer_compiles_each_schema_once(registry: Any) -> None:
    choice = SchemaChoice("AVRO", USER_TEXT)
    first = await subjects.writer(registry, "t", choice, is_key=False)
    second = await subjects.writer(registry, "t", choice, is_key=False)
    assert first.payload is second.payload
