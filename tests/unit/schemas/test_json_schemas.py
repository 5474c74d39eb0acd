"""JSON schemas (core.broker.schemas.formats.jsonschema): metaschema validation, the
canonical text, and compatibility as "every document the writer allowed, the reader
allows", each change checked both ways (BACKWARD: new reads old; FORWARD: old reads new)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats import ParsedSchema, check, parse
from core.broker.schemas.model import Reference


def js(schema: Any, refs: dict[str, ParsedSchema] | None = None,
       names: tuple[Reference, ...] = ()) -> ParsedSchema:
    return parse("JSON", json.dumps(schema), refs or {}, names)


def obj(props: dict[str, Any], *, required: list[str] | None = None, closed: bool = False,
        **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if required:
        doc["required"] = required
    if closed:
        doc["additionalProperties"] = False
    return doc


def directions(old: Any, new: Any) -> tuple[bool, bool]:
    o, n = js(old), js(new)
    return not check(n, o), not check(o, n)


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}

CASES: list[tuple[str, Any, Any, tuple[bool, bool]]] = [
    ("identical", obj({"a": STR}), obj({"a": STR}), (True, True)),
    ("type widened to a union with null", STR, {"type": ["string", "null"]}, (True, False)),
    ("integer to number", INT, NUM, (True, False)),
    ("number to integer", NUM, INT, (False, True)),
    ("string to integer", STR, INT, (False, False)),
    ("type added where there was none", {}, STR, (False, True)),
    ("property added to an open content model", obj({"a": STR}), obj({"a": STR, "b": INT}),
     (False, True)),
    ("property removed from an open content model", obj({"a": STR, "b": INT}), obj({"a": STR}),
     (True, False)),
    ("property added to a closed content model", obj({"a": STR}, closed=True),
     obj({"a": STR, "b": INT}, closed=True), (True, False)),
    ("property removed from a closed content model", obj({"a": STR, "b": INT}, closed=True),
     obj({"a": STR}, closed=True), (False, True)),
    ("required property added to a closed content model", obj({"a": STR}, closed=True),
     obj({"a": STR, "b": INT}, required=["b"], closed=True), (False, False)),
    ("existing property made required", obj({"a": STR, "b": INT}),
     obj({"a": STR, "b": INT}, required=["b"]), (False, True)),
    ("required dropped", obj({"a": STR}, required=["a"]), obj({"a": STR}), (True, False)),
    ("property type widened", obj({"a": INT}), obj({"a": NUM}), (True, False)),
    ("content model opened", obj({"a": STR}, closed=True), obj({"a": STR}), (True, False)),
    ("additionalProperties narrowed to a schema", obj({"a": STR}),
     obj({"a": STR}, additionalProperties=STR), (False, True)),
    ("added property covered by the writer's additionalProperties schema",
     obj({"a": STR}, additionalProperties=STR), obj({"a": STR, "b": STR}, additionalProperties=STR),
     (True, True)),
    ("enum value added", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, (True, False)),
    ("enum value removed", {"enum": ["a", "b"]}, {"enum": ["a"]}, (False, True)),
    ("const changed", {"const": 1}, {"const": 2}, (False, False)),
    ("a type where the writer had only values", {"enum": ["a", 1]}, INT, (False, False)),
    ("a type every written value has", {"enum": [1, 2.0]}, INT, (True, False)),
    ("maxLength decreased", {**STR, "maxLength": 10}, {**STR, "maxLength": 5}, (False, True)),
    ("minLength added", STR, {**STR, "minLength": 1}, (False, True)),
    ("minimum increased", {**INT, "minimum": 0}, {**INT, "minimum": 5}, (False, True)),
    ("maximum raised", {**INT, "maximum": 5}, {**INT, "maximum": 10}, (True, False)),
    ("exclusiveMaximum added", INT, {**INT, "exclusiveMaximum": 5}, (False, True)),
    ("multipleOf to a divisor", {**INT, "multipleOf": 4}, {**INT, "multipleOf": 2}, (True, False)),
    ("pattern added", STR, {**STR, "pattern": "^a"}, (False, True)),
    ("pattern changed", {**STR, "pattern": "^a"}, {**STR, "pattern": "^b"}, (False, False)),
    ("array items widened", {"type": "array", "items": INT}, {"type": "array", "items": NUM},
     (True, False)),
    ("maxItems added", {"type": "array", "items": STR}, {"type": "array", "items": STR,
                                                       "maxItems": 3}, (False, True)),
    ("uniqueItems added", {"type": "array"}, {"type": "array", "uniqueItems": True},
     (False, True)),
    ("tuple item widened", {"type": "array", "items": [INT, STR], "additionalItems": False},
     {"type": "array", "items": [NUM, STR], "additionalItems": False}, (True, False)),
    ("anyOf alternative added", {"anyOf": [STR, INT]}, {"anyOf": [STR, INT, {"type": "boolean"}]},
     (True, False)),
    ("oneOf alternative removed", {"oneOf": [STR, INT]}, {"oneOf": [STR]}, (False, True)),
    ("plain type to anyOf including it", STR, {"anyOf": [STR, INT]}, (True, False)),
    ("allOf member added", {"allOf": [obj({"a": STR})]},
     {"allOf": [obj({"a": STR}), {"required": ["a"]}]}, (False, True)),
    ("not added", STR, {**STR, "not": {"const": ""}}, (False, True)),
    ("nested property narrowed", obj({"o": obj({"x": NUM})}), obj({"o": obj({"x": INT})}),
     (False, True)),
    ("a local $ref's target widened",
     {"definitions": {"v": INT}, **obj({"a": {"$ref": "#/definitions/v"}})},
     {"definitions": {"v": NUM}, **obj({"a": {"$ref": "#/definitions/v"}})}, (True, False)),
    ("true to a schema", True, STR, (False, True)),
    ("false to anything", False, STR, (True, False)),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_compatibility(old: Any, new: Any, expected: tuple[bool, bool]) -> None:
    assert directions(old, new) == expected


# --- patternProperties, dependencies, if/then/else ------------------------------------------

_X = {"^x-": STR}  # extension properties: x-... are strings
_DRAFT_2020 = {"$schema": "https://json-schema.org/draft/2020-12/schema"}

PATTERN_CASES: list[tuple[str, Any, Any, tuple[bool, bool]]] = [
    ("same patternProperties", obj({"a": STR}, patternProperties=_X),
     obj({"a": STR}, patternProperties=_X), (True, True)),
    ("a pattern's schema widened", obj({}, patternProperties={"^x-": INT}, closed=True),
     obj({}, patternProperties={"^x-": NUM}, closed=True), (True, False)),
    ("a pattern added to an open content model", obj({"a": STR}),
     obj({"a": STR}, patternProperties=_X), (False, True)),
    ("a pattern that accepts anything added to an open content model", obj({"a": STR}),
     obj({"a": STR}, patternProperties={"^x-": {}}), (True, True)),
    ("a pattern added to a closed content model", obj({"a": STR}, closed=True),
     obj({"a": STR}, patternProperties=_X, closed=True), (True, False)),
    ("a property removed: covered by a reader pattern",
     obj({"a": STR, "x-id": STR}, closed=True), obj({"a": STR}, patternProperties=_X,
                                                    closed=True), (True, False)),
    ("a property removed: not covered by the reader's pattern",
     obj({"a": STR, "x-id": INT}, closed=True), obj({"a": STR}, patternProperties=_X,
                                                    closed=True), (False, False)),
    ("a property added: covered by the writer's pattern",
     obj({"a": STR}, patternProperties=_X, closed=True),
     obj({"a": STR, "x-id": STR}, patternProperties=_X, closed=True), (True, True)),
    ("a property added: narrower than the writer's pattern",
     obj({"a": STR}, patternProperties={"^x-": {}}, closed=True),
     obj({"a": STR, "x-id": INT}, patternProperties={"^x-": {}}, closed=True), (False, True)),
    ("a new pattern constrains an existing property", obj({"x-id": {}}),
     obj({"x-id": {}}, patternProperties=_X), (False, True)),
    ("a new pattern in a closed content model allows more names",
     obj({"x-id": STR}, closed=True), obj({"x-id": STR}, patternProperties=_X, closed=True),
     (True, False)),
    ("a pattern RE2 cannot run matches no name",
     obj({"a": STR, "x-id": STR}, closed=True),
     obj({"a": STR}, patternProperties={"^(?=x)x-": STR}, closed=True), (False, False)),
    ("dependencies: a property array added", obj({"a": STR, "b": STR}),
     obj({"a": STR, "b": STR}, dependencies={"a": ["b"]}), (False, True)),
    ("dependencies: an array narrowed",
     obj({"a": STR, "b": STR, "c": STR}, dependencies={"a": ["b", "c"]}),
     obj({"a": STR, "b": STR, "c": STR}, dependencies={"a": ["b"]}), (True, False)),
    ("dependencies: an array changed",
     obj({"a": STR, "b": STR, "c": STR}, dependencies={"a": ["b"]}),
     obj({"a": STR, "b": STR, "c": STR}, dependencies={"a": ["c"]}), (False, False)),
    ("dependencies: a name the writer always required",
     obj({"a": STR, "b": STR}, required=["b"]),
     obj({"a": STR, "b": STR}, required=["b"], dependencies={"a": ["b"]}), (True, True)),
    ("dependentRequired added (2020-12)", {**_DRAFT_2020, **obj({"a": STR, "b": STR})},
     {**_DRAFT_2020, **obj({"a": STR, "b": STR}, dependentRequired={"a": ["b"]})},
     (False, True)),
    ("dependencies: a schema added", obj({"a": STR, "b": NUM}),
     obj({"a": STR, "b": NUM}, dependencies={"a": obj({"b": INT})}), (False, True)),
    ("dependencies: a schema the writer's already implies", obj({"a": STR, "b": INT}),
     obj({"a": STR, "b": INT}, dependencies={"a": obj({"b": NUM})}), (True, True)),
    ("dependentSchemas widened (2020-12)",
     {**_DRAFT_2020, **obj({"a": STR}, dependentSchemas={"a": obj({"b": INT})})},
     {**_DRAFT_2020, **obj({"a": STR}, dependentSchemas={"a": obj({"b": NUM})})},
     (True, False)),
    ("if/then added", obj({"kind": STR, "n": NUM}),
     obj({"kind": STR, "n": NUM}, **{"if": obj({"kind": {"const": "int"}}), "then": obj({"n": INT})}),
     (False, True)),
    ("if/then added: the writer's schema already gives it", obj({"kind": STR, "n": INT}),
     obj({"kind": STR, "n": INT}, **{"if": obj({"kind": {"const": "int"}}), "then": obj({"n": NUM})}),
     (True, True)),
    ("the same if: then widened",
     obj({"n": NUM}, **{"if": obj({"k": {"const": 1}}), "then": obj({"n": INT})}),
     obj({"n": NUM}, **{"if": obj({"k": {"const": 1}}), "then": obj({"n": NUM})}),
     (True, False)),
    ("the same if: else added",
     obj({"n": NUM}, **{"if": obj({"k": {"const": 1}}), "then": obj({"n": INT})}),
     obj({"n": NUM}, **{"if": obj({"k": {"const": 1}}), "then": obj({"n": INT}),
                        "else": {"required": ["n"]}}), (False, True)),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in PATTERN_CASES],
                         ids=[c[0] for c in PATTERN_CASES])
def test_patterns_dependencies_and_conditions(old: Any, new: Any,
                                              expected: tuple[bool, bool]) -> None:
    assert directions(old, new) == expected


def _kinds(old: Any, new: Any) -> set[tuple[str, str]]:
    """What makes ``new`` unable to read ``old`` (BACKWARD), as (kind, path)."""
    return {(i.kind, i.path) for i in check(js(new), js(old))}


def test_pattern_incompatibilities_are_confluents() -> None:
    assert _kinds(obj({"a": STR}), obj({"a": STR}, patternProperties=_X)) == {
        ("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/patternProperties/^x-")}
    assert _kinds(obj({"a": STR, "x-id": INT}, closed=True),
                  obj({"a": STR}, patternProperties=_X, closed=True)) == {
        ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/x-id")}
    assert _kinds(obj({}, patternProperties=_X),
                  obj({}, patternProperties={"^y-": STR}, closed=True)) >= {
        ("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/patternProperties/^x-")}
    assert ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/x-id") in \
        _kinds(obj({"a": STR}, patternProperties={"^x-": {}}, closed=True),
               obj({"a": STR, "x-id": INT}, patternProperties={"^x-": {}}, closed=True))
    assert _kinds(obj({"x-id": {}}), obj({"x-id": {}}, patternProperties=_X)) == {
        ("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/patternProperties/^x-"),
        ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/properties/x-id")}


def test_dependency_incompatibilities_are_confluents() -> None:
    props = {"a": STR, "b": STR, "c": STR}
    assert _kinds(obj(props), obj(props, dependencies={"a": ["b"]})) == {
        ("DEPENDENCY_ARRAY_ADDED", "#/dependencies/a")}
    assert _kinds(obj(props, dependencies={"a": ["b"]}),
                  obj(props, dependencies={"a": ["b", "c"]})) == {
        ("DEPENDENCY_ARRAY_EXTENDED", "#/dependencies/a")}
    assert _kinds(obj(props, dependencies={"a": ["b"]}),
                  obj(props, dependencies={"a": ["c"]})) == {
        ("DEPENDENCY_ARRAY_CHANGED", "#/dependencies/a")}
    assert _kinds(obj(props), obj(props, dependencies={"a": {"required": ["c"]}})) == {
        ("DEPENDENCY_SCHEMA_ADDED", "#/dependencies/a")}
    assert _kinds(obj(props, dependencies={"a": obj({"b": NUM})}),
                  obj(props, dependencies={"a": obj({"b": INT})})) == {
        ("TYPE_NARROWED", "#/dependencies/a/properties/b/type")}


def test_conditional_incompatibilities() -> None:
    old = obj({"kind": STR, "n": NUM})
    new = obj({"kind": STR, "n": NUM},
              **{"if": obj({"kind": {"const": "int"}}), "then": obj({"n": INT})})
    assert _kinds(old, new) == {("PRODUCT_TYPE_EXTENDED", "#/then")}
    narrowed = obj({"n": NUM}, **{"if": obj({"k": {"const": 1}}), "then": obj({"n": NUM})})
    narrower = obj({"n": NUM}, **{"if": obj({"k": {"const": 1}}), "then": obj({"n": INT})})
    assert _kinds(narrowed, narrower) == {("TYPE_NARROWED", "#/then/properties/n/type")}


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    evil = {"^(a+)+$": STR}
    name = "a" * 5000 + "!"
    old = js(obj({name: INT}, closed=True))
    new = js(obj({}, patternProperties=evil, closed=True))
    assert [i.kind for i in check(new, old)] == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]


def test_incompatibilities_name_the_rule_and_the_place() -> None:
    old, new = js(obj({"a": STR})), js(obj({"a": INT, "b": STR}, required=["b"]))
    found = {(i.kind, i.path) for i in check(new, old)}
    assert ("TYPE_CHANGED", "#/properties/a/type") in found
    assert ("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/b") in found
    assert ("REQUIRED_ATTRIBUTE_ADDED", "#/required") in found


def test_recursive_refs_end() -> None:
    tree = {"$defs": {"node": obj({"v": INT, "kids": {"type": "array",
                                                    "items": {"$ref": "#/$defs/node"}}})},
            "$ref": "#/$defs/node"}
    assert check(js(tree), js(tree)) == []


def test_referenced_schemas_resolve() -> None:
    money = js(obj({"amount": NUM}))
    refs = (Reference("money.json", "money", 1),)
    order = parse("JSON", json.dumps(obj({"total": {"$ref": "money.json"}})),
                  {"money.json": money}, refs)
    assert order.model.resources["money.json"] == money.model.document
    tighter = js(obj({"amount": INT}))
    order2 = parse("JSON", json.dumps(obj({"total": {"$ref": "money.json"}})),
                   {"money.json": tighter}, refs)
    assert [i.kind for i in check(order2, order)] == ["TYPE_NARROWED"]
    assert check(order, order2) == []


def test_canonical_and_normalized_text() -> None:
    a = parse("JSON", '{"type": "object",\n "properties": {"b": {}, "a": {}}}', {})
    assert a.text == a.canonical == '{"type":"object","properties":{"b":{},"a":{}}}'
    assert a.normalized == '{"properties":{"a":{},"b":{}},"type":"object"}'
    b = parse("JSON", '{"properties": {"a": {}, "b": {}}, "type": "object"}', {},
              normalize=True)
    assert b.text == b.normalized == a.normalized


BAD = [
    ("not JSON", "{"),
    ("an array", "[]"),
    ("a string", '"x"'),
    ("an unknown type", '{"type": "strin"}'),
    ("a negative minLength", '{"minLength": -1}'),
    ("required not a list", '{"required": "a"}'),
    ("an invalid draft 2020-12 keyword value",
     '{"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": 5}'),
    ("too deep", '{"items":' * 70 + "{}" + "}" * 70),
    ("a $schema that is not a string", '{"$schema": true}'),
]


@pytest.mark.parametrize("text", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_invalid_schemas_are_refused(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        parse("JSON", text, {})


def test_drafts_by_their_schema_keyword() -> None:
    # draft 4's boolean exclusiveMaximum is valid there, not in draft 7
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer",
              "maximum": 5, "exclusiveMaximum": True}
    js(draft4)
    with pytest.raises(InvalidSchemaError):
        js({key: value for key, value in draft4.items() if key != "$schema"})
