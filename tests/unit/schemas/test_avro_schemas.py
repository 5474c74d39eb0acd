"""AVRO schemas (core.broker.schemas.formats.avro): parsing and its refusals, the
canonical text, and Avro's schema resolution as compatibility, each change checked both
ways (the new schema reading old data: BACKWARD; the old one reading new data: FORWARD)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats import ParsedSchema, check, parse
from core.broker.schemas.model import Reference


def avro(schema: Any, refs: dict[str, ParsedSchema] | None = None, **kw: Any) -> ParsedSchema:
    return parse("AVRO", json.dumps(schema), refs or {}, **kw)


def record(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def directions(old: Any, new: Any) -> tuple[bool, bool]:
    """(backward, forward): new reads old, old reads new."""
    o, n = avro(old), avro(new)
    return not check(n, o), not check(o, n)


ENUM = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
LIST = record(f("v", "int"), f("next", ["null", "R"], default=None))

CASES: list[tuple[str, Any, Any, tuple[bool, bool]]] = [
    ("identical", record(f("a", "int")), record(f("a", "int")), (True, True)),
    ("field added with a default", record(f("a", "int")),
     record(f("a", "int"), f("b", "string", default="x")), (True, True)),
    ("field added without a default", record(f("a", "int")),
     record(f("a", "int"), f("b", "string")), (False, True)),
    ("field with a default removed", record(f("a", "int"), f("b", "string", default="x")),
     record(f("a", "int")), (True, True)),
    ("field without a default removed", record(f("a", "int"), f("b", "string")),
     record(f("a", "int")), (True, False)),
    ("int to long", record(f("a", "int")), record(f("a", "long")), (True, False)),
    ("long to int", record(f("a", "long")), record(f("a", "int")), (False, True)),
    ("int to float", record(f("a", "int")), record(f("a", "float")), (True, False)),
    ("int to double", record(f("a", "int")), record(f("a", "double")), (True, False)),
    ("long to float", record(f("a", "long")), record(f("a", "float")), (True, False)),
    ("long to double", record(f("a", "long")), record(f("a", "double")), (True, False)),
    ("float to double", record(f("a", "float")), record(f("a", "double")), (True, False)),
    ("double to float", record(f("a", "double")), record(f("a", "float")), (False, True)),
    ("string to bytes", record(f("a", "string")), record(f("a", "bytes")), (True, True)),
    ("bytes to string", record(f("a", "bytes")), record(f("a", "string")), (True, True)),
    ("string to int", record(f("a", "string")), record(f("a", "int")), (False, False)),
    ("boolean to int", record(f("a", "boolean")), record(f("a", "int")), (False, False)),
    ("enum symbol added", ENUM, {**ENUM, "symbols": ["A", "B", "C"]}, (True, False)),
    ("enum symbol removed", ENUM, {**ENUM, "symbols": ["A"]}, (False, True)),
    ("enum symbol added, old enum has a default", {**ENUM, "default": "A"},
     {**ENUM, "symbols": ["A", "B", "C"], "default": "A"}, (True, True)),
    ("enum renamed", ENUM, {**ENUM, "name": "F"}, (False, False)),
    ("int to a union with null", record(f("a", "int")),
     record(f("a", ["int", "null"])), (True, False)),
    ("a union with null to int", record(f("a", ["null", "int"], default=None)),
     record(f("a", "int")), (False, True)),
    ("union branch added", record(f("a", ["null", "int"], default=None)),
     record(f("a", ["null", "int", "string"], default=None)), (True, False)),
    ("union branch promoted", record(f("a", ["null", "int"], default=None)),
     record(f("a", ["null", "long"], default=None)), (True, False)),
    ("union to a plain type it promotes to", {"type": "array", "items": ["int", "long"]},
     {"type": "array", "items": "long"}, (True, True)),
    ("union to a plain type of one branch", {"type": "array", "items": ["int", "string"]},
     {"type": "array", "items": "int"}, (False, True)),
    ("record renamed", record(f("a", "int"), name="A"), record(f("a", "int"), name="B"),
     (False, False)),
    ("record renamed with an alias", record(f("a", "int"), name="A"),
     record(f("a", "int"), name="B", aliases=["A"]), (True, False)),
    ("namespace changed (names compare unqualified, as in Avro)",
     record(f("a", "int"), name="a.R"), record(f("a", "int"), name="b.R"), (True, True)),
    ("field renamed with an alias", record(f("a", "int")),
     record(f("b", "int", aliases=["a"])), (True, False)),
    ("fixed size changed", {"type": "fixed", "name": "F", "size": 4},
     {"type": "fixed", "name": "F", "size": 8}, (False, False)),
    ("fixed renamed", {"type": "fixed", "name": "F", "size": 4},
     {"type": "fixed", "name": "G", "size": 4}, (False, False)),
    ("array items promoted", {"type": "array", "items": "int"},
     {"type": "array", "items": "long"}, (True, False)),
    ("map values promoted", {"type": "map", "values": "int"},
     {"type": "map", "values": "long"}, (True, False)),
    ("array to map", {"type": "array", "items": "int"}, {"type": "map", "values": "int"},
     (False, False)),
    ("field added without a default in a record inside an array",
     {"type": "array", "items": record(f("a", "int"))},
     {"type": "array", "items": record(f("a", "int"), f("b", "int"))}, (False, True)),
    ("primitive to record", "int", record(f("a", "int")), (False, False)),
    ("recursive record, its value promoted", LIST,
     record(f("v", "long"), f("next", ["null", "R"], default=None)), (True, False)),
    ("logical type dropped (the underlying type decides)",
     record(f("d", {"type": "int", "logicalType": "date"})), record(f("d", "int")),
     (True, True)),
    ("field added with a default in a record inside a union",
     record(f("u", ["null", record(f("a", "int"), name="In")], default=None)),
     record(f("u", ["null", record(f("a", "int"), f("b", "int", default=0), name="In")],
              default=None)), (True, True)),
    ("null to a union of null and string", "null", ["null", "string"], (True, False)),
    ("field order changed", record(f("a", "int"), f("b", "string")),
     record(f("b", "string"), f("a", "int")), (True, True)),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_schema_resolution(old: Any, new: Any, expected: tuple[bool, bool]) -> None:
    assert directions(old, new) == expected


def test_incompatibilities_name_the_rule_and_the_place() -> None:
    old = avro(record(f("a", "int")))
    new = avro(record(f("a", "string"), f("b", "int")))
    found = {(i.kind, i.path) for i in check(new, old)}
    assert found == {("TYPE_MISMATCH", "/fields/0/type"),
                     ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1")}
    assert [i.kind for i in check(avro(ENUM), avro({**ENUM, "symbols": ["A", "B", "C"]}))] == [
        "MISSING_ENUM_SYMBOLS"]
    assert [i.kind for i in check(avro(["null", "int"]), avro("string"))] == [
        "MISSING_UNION_BRANCH"]
    assert [i.kind for i in check(avro(record(name="A")), avro(record(name="B")))] == [
        "NAME_MISMATCH"]
    fixed = {"type": "fixed", "name": "F", "size": 4}
    assert [i.kind for i in check(avro(fixed), avro({**fixed, "size": 2}))] == [
        "FIXED_SIZE_MISMATCH"]


def test_canonical_text_ignores_spacing_and_key_order() -> None:
    a = parse("AVRO", '{"type": "record", "name": "R",\n "fields": [{"type": "int", "name": "a"}]}',
              {})
    b = avro({"fields": [{"name": "a", "type": {"type": "int"}}], "name": "R", "type": "record"})
    assert a.canonical == b.canonical == a.text
    assert a.text == '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    assert avro({"type": "string"}).text == avro("string").text == '"string"'
    # attributes Avro does not know are kept, after the known ones
    c = avro(record(f("a", "int", doc="d", custom=1), connect_name="x"))
    assert json.loads(c.text)["connect_name"] == "x"
    assert json.loads(c.text)["fields"][0] == {"name": "a", "type": "int", "doc": "d", "custom": 1}


def test_normalized_form_writes_full_names() -> None:
    parsed = avro(record(f("a", record(name="In")), name="R", namespace="com.x"),
                  normalize=True)
    assert parsed.text == parsed.normalized
    assert json.loads(parsed.text)["name"] == "com.x.R"
    assert json.loads(parsed.text)["fields"][0]["type"]["name"] == "com.x.In"


BAD = [
    ("not JSON", "{nope"),
    ("a number", "5"),
    ("unknown type", '"strin"'),
    ("a record without fields", '{"type": "record", "name": "R"}'),
    ("an invalid name", json.dumps(record(name="1R"))),
    ("a field name used twice", json.dumps(record(f("a", "int"), f("a", "long")))),
    ("a union in a union", '["null", ["int", "long"]]'),
    ("two union branches of one type", '["int", "int"]'),
    ("an empty union", "[]"),
    ("a default of the wrong type", json.dumps(record(f("a", "int", default="x")))),
    ("a union default not of its first type",
     json.dumps(record(f("a", ["null", "string"], default="x")))),
    ("an enum symbol twice", '{"type": "enum", "name": "E", "symbols": ["A", "A"]}'),
    ("an enum default that is no symbol",
     '{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}'),
    ("a fixed without a size", '{"type": "fixed", "name": "F"}'),
    ("an array without items", '{"type": "array"}'),
    ("too deep", "[" * 70 + '"int"' + "]" * 70),
    ("fastavro's parsed marker does not skip the checks", json.dumps(
        {"__fastavro_parsed": True, "type": "record", "name": "R"})),
]


@pytest.mark.parametrize("text", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_invalid_schemas_are_refused(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        parse("AVRO", text, {})


def test_references_bring_their_named_types() -> None:
    address = avro(record(f("street", "string"), name="Address", namespace="com.x"))
    refs = (Reference("com.x.Address", "address", 1),)
    user = parse("AVRO", json.dumps(record(f("home", "Address"), name="User",
                                           namespace="com.x")),
                 {"com.x.Address": address}, refs)
    assert user.references == refs
    assert "com.x.Address" in user.model.named
    with pytest.raises(InvalidSchemaError, match="Address"):
        avro(record(f("home", "com.x.Address"), name="User"))  # without the reference
    with pytest.raises(InvalidSchemaError, match="cannot be redefined"):
        parse("AVRO", json.dumps(record(name="Address", namespace="com.x")),
              {"com.x.Address": address}, refs)
    # compatibility looks into referenced types
    address2 = avro(record(f("street", "string"), f("zip", "int"), name="Address",
                           namespace="com.x"))
    user2 = parse("AVRO", json.dumps(record(f("home", "Address"), name="User",
                                            namespace="com.x")),
                  {"com.x.Address": address2}, refs)
    assert [i.kind for i in check(user2, user)] == ["READER_FIELD_MISSING_DEFAULT_VALUE"]
    assert check(user, user2) == []
