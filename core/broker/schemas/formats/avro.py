"""AVRO schemas.

Parsing is fastavro's (``fastavro.schema.parse_schema``: names resolved to full names,
defaults checked against their types), completed by the checks of the Avro
specification fastavro leaves to the writer of the schema: valid names, unique field
names and enum symbols, no union directly inside a union, no two union branches of one
type, a union field's default of the union's first type.

The canonical text is the schema's JSON without white space and with the keys of each
record, field, enum, fixed, array and map in one order (Avro's own printing order: type,
name, namespace, doc, then the rest), ``{"type": "int"}`` printed as ``"int"``: so two
texts that differ in spacing or key order are one schema. The normalized form
(``normalize=true``) also writes every name in full.

Compatibility is Avro's schema resolution (the specification's "Schema Resolution",
as Avro's ``SchemaCompatibility`` applies it), reader against writer:

- the same primitive, or a promotion of the writer's type: int to long, float or double;
  long to float or double; float to double; string to bytes and bytes to string;
- records of the same (unqualified) name, or a reader alias naming the writer: each
  reader field is read from the writer's field of its name (or one of its aliases),
  else it needs a default; writer fields the reader lacks are skipped;
- enums of the same name: every writer symbol is a reader symbol, unless the reader has
  a default symbol; fixed of the same name and size; arrays and maps by their items and
  values;
- a writer union: the reader reads each of its branches; a reader union (writer not):
  one of its branches reads the writer's type;
- logical types are ignored (their underlying types decide), as in Avro.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from fastavro.schema import parse_schema

from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats.base import Incompatibility, ParsedSchema, dump_json, load_json
from core.broker.schemas.model import AVRO, Reference

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
COMPLEX = frozenset({"record", "error", "enum", "fixed", "array", "map"})
#: (writer type, reader type) pairs that resolve (the specification's promotions)
PROMOTIONS = frozenset({("int", "long"), ("int", "float"), ("int", "double"),
                        ("long", "float"), ("long", "double"), ("float", "double"),
                        ("string", "bytes"), ("bytes", "string")})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: Avro's printing order of the attributes of each kind of schema (and of a field)
_ORDER: dict[str, tuple[str, ...]] = {
    "record": ("type", "name", "namespace", "doc", "fields", "aliases"),
    "error": ("type", "name", "namespace", "doc", "fields", "aliases"),
    "enum": ("type", "name", "namespace", "doc", "symbols", "default", "aliases"),
    "fixed": ("type", "name", "namespace", "doc", "size", "aliases"),
    "array": ("type", "items"),
    "map": ("type", "values"),
}
_FIELD_ORDER = ("name", "type", "doc", "default", "order", "aliases")


@dataclass(frozen=True, slots=True)
class AvroModel:
    """fastavro's parsed form of the schema (full names; a named type is defined at its
    first use and named after that) and every named type it can see, by full name (its
    own and its references')."""

    schema: Any
    named: dict[str, Any]


def parse(text: str, references: Mapping[str, ParsedSchema], refs: tuple[Reference, ...],
          *, normalize: bool = False) -> ParsedSchema:
    doc = load_json(text, AVRO)
    if not isinstance(doc, (str, list, dict)):
        raise InvalidSchemaError("Invalid AVRO schema: a schema is a type name, an object or "
                                 "a union (an array)")
    named: dict[str, Any] = {}
    for name, dep in references.items():
        if dep.schema_type != AVRO:
            raise InvalidSchemaError(f"Invalid AVRO schema: the reference {name!r} is a "
                                     f"{dep.schema_type} schema")
        named.update(dep.model.named)
    inherited = set(named)
    _require_fields(doc)
    try:
        parsed = parse_schema(doc, named_schemas=named, _write_hint=False, _force=True)
    except Exception as exc:  # fastavro raises many kinds on bad input
        raise InvalidSchemaError(f"Invalid AVRO schema: {_reason(exc)}") from None
    try:
        _Validator(named, inherited).check(parsed, "")
    except RecursionError:
        raise InvalidSchemaError("Invalid AVRO schema: nested too deeply") from None
    canonical = dump_json(_ordered(doc))
    normalized = dump_json(_ordered(parsed))
    return ParsedSchema(AVRO, normalized if normalize else canonical, canonical, normalized,
                        refs, AvroModel(parsed, named))


def _require_fields(doc: Any) -> None:
    """Every record of the text has its ``fields`` (fastavro supplies an empty list)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if node.get("type") in ("record", "error") and not isinstance(node.get("fields"),
                                                                          list):
                raise InvalidSchemaError(f"Invalid AVRO schema: the record {node.get('name')!r} "
                                         "has no list of fields")
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, KeyError):
        return f"missing attribute {text}"
    return text[:500]


# --- the checks fastavro leaves out -------------------------------------------------


def _full_name_ok(name: object) -> bool:
    return isinstance(name, str) and all(_NAME.match(part) for part in name.split("."))


class _Validator:
    """``inherited``: the names the references define (the schema may not redefine them)."""

    def __init__(self, named: dict[str, Any], inherited: set[str]) -> None:
        self.named = named
        self.inherited = inherited

    def define(self, node: dict[str, Any], path: str) -> None:
        name = node.get("name")
        if not _full_name_ok(name):
            self.fail(path, f"invalid name {name!r}")
        if name in self.inherited:
            self.fail(path, f"{name} is already defined by a reference: it cannot be redefined")

    def fail(self, path: str, what: str) -> NoReturn:
        raise InvalidSchemaError(f"Invalid AVRO schema at '{path or '/'}': {what}")

    def check(self, node: Any, path: str) -> None:
        if isinstance(node, str):
            if node not in PRIMITIVES and node not in self.named:
                self.fail(path, f"unknown type {node!r}")
            return
        if isinstance(node, list):
            self.union(node, path)
            return
        if not isinstance(node, dict):
            self.fail(path, "a schema is a type name, an object or a union (an array)")
        kind = node.get("type")
        if kind in ("record", "error"):
            self.record(node, path)
        elif kind == "enum":
            self.enum(node, path)
        elif kind == "fixed":
            self.define(node, path)
            size = node.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                self.fail(path, "the size of a fixed is a non-negative integer")
        elif kind == "array":
            self.check(node.get("items"), f"{path}/items")
        elif kind == "map":
            self.check(node.get("values"), f"{path}/values")
        else:
            self.check(kind, f"{path}/type")

    def union(self, branches: list[Any], path: str) -> None:
        if not branches:
            self.fail(path, "a union has at least one branch")
        seen: set[str] = set()
        for i, branch in enumerate(branches):
            if isinstance(branch, list):
                self.fail(f"{path}/{i}", "a union may not directly contain a union")
            self.check(branch, f"{path}/{i}")
            key = _branch_key(branch, self.named)
            if key in seen:
                self.fail(f"{path}/{i}", f"the union has two branches of type {key}")
            seen.add(key)

    def record(self, node: dict[str, Any], path: str) -> None:
        self.define(node, path)
        fields = node.get("fields")
        if not isinstance(fields, list):
            self.fail(path, "a record has a list of fields")
        names: set[str] = set()
        for i, field in enumerate(fields):
            where = f"{path}/fields/{i}"
            if not isinstance(field, dict) or not isinstance(field.get("name"), str) or \
                    not _NAME.match(field["name"]):
                self.fail(where, "a field has a valid name")
            if field["name"] in names:
                self.fail(where, f"the field name {field['name']!r} is used twice")
            names.add(field["name"])
            self.check(field.get("type"), f"{where}/type")
            if "default" in field and not _default_ok(field["type"], field["default"],
                                                      self.named, depth=0):
                self.fail(where, f"the default value of field {field['name']!r} does not "
                                 "match its type (a union's default matches its first type)")

    def enum(self, node: dict[str, Any], path: str) -> None:
        self.define(node, path)
        symbols = node.get("symbols")
        if not isinstance(symbols, list) or not all(
                isinstance(s, str) and _NAME.match(s) for s in symbols):
            self.fail(path, "an enum's symbols are valid names")
        if len(set(symbols)) != len(symbols):
            self.fail(path, "an enum's symbols are unique")
        if "default" in node and node["default"] not in symbols:
            self.fail(path, f"the enum default {node['default']!r} is not one of its symbols")


def _resolve(node: Any, named: Mapping[str, Any]) -> Any:
    """``node`` with a named reference replaced by its definition, and a primitive in
    object form (``{"type": "int", "logicalType": ...}``) by its name."""
    for _ in range(64):
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            node = named.get(node, node)
            if isinstance(node, str):
                return node
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind in COMPLEX:
                return node
            node = kind
        else:
            return node
    return node


def _branch_key(node: Any, named: Mapping[str, Any]) -> str:
    node = _resolve(node, named)
    if isinstance(node, dict):
        kind = node.get("type")
        return str(node.get("name")) if kind in ("record", "error", "enum", "fixed") else str(kind)
    return str(node)


def _default_ok(node: Any, value: Any, named: Mapping[str, Any], *, depth: int) -> bool:
    """Whether ``value`` (JSON) is a valid default of ``node``."""
    if depth > 64:
        return True
    node = _resolve(node, named)
    if isinstance(node, list):
        return bool(node) and _default_ok(node[0], value, named, depth=depth + 1)
    if isinstance(node, str):
        return _primitive_ok(node, value)
    kind = node.get("type")
    if kind == "enum":
        return isinstance(value, str) and value in node.get("symbols", ())
    if kind == "fixed":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list) and all(
            _default_ok(node.get("items"), v, named, depth=depth + 1) for v in value)
    if kind == "map":
        return isinstance(value, dict) and all(
            _default_ok(node.get("values"), v, named, depth=depth + 1) for v in value.values())
    if kind in ("record", "error"):
        if not isinstance(value, dict):
            return False
        for field in node.get("fields", ()):
            if field["name"] in value:
                if not _default_ok(field["type"], value[field["name"]], named, depth=depth + 1):
                    return False
            elif "default" not in field:
                return False
        return True
    return True


def _primitive_ok(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "double"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in ("bytes", "string"):
        return isinstance(value, str)
    return True


# --- canonical text -----------------------------------------------------------------


def _ordered(node: Any) -> Any:
    """``node`` with its attributes in Avro's printing order, recursively; a bare
    primitive in object form as its name."""
    if isinstance(node, list):
        return [_ordered(branch) for branch in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if isinstance(kind, str) and kind in PRIMITIVES and len(node) == 1:
        return kind
    order = _ORDER.get(kind, ("type",)) if isinstance(kind, str) else ("type",)
    out: dict[str, Any] = {}
    for key in order:
        if key in node:
            out[key] = node[key]
    for key, value in node.items():
        if key not in out:
            out[key] = value
    if kind in ("record", "error") and isinstance(out.get("fields"), list):
        out["fields"] = [_ordered_field(f) for f in out["fields"]]
    elif kind == "array" and "items" in out:
        out["items"] = _ordered(out["items"])
    elif kind == "map" and "values" in out:
        out["values"] = _ordered(out["values"])
    elif isinstance(kind, (dict, list)):
        out["type"] = _ordered(kind)
    return out


def _ordered_field(field: Any) -> Any:
    if not isinstance(field, dict):
        return field
    out = {key: field[key] for key in _FIELD_ORDER if key in field}
    out.update((k, v) for k, v in field.items() if k not in out)
    if "type" in out:
        out["type"] = _ordered(out["type"])
    return out


# --- compatibility: can ``reader`` read what ``writer`` wrote ------------------------


def check(reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
    r, w = reader.model, writer.model
    checker = _Resolution(r.named, w.named)
    try:
        checker.check(r.schema, w.schema, "")
    except RecursionError:
        checker.out.append(Incompatibility("TYPE_MISMATCH", "/", "the schemas nest too deeply "
                                           "to be compared"))
    return checker.out


def _namespace(full_name: str) -> str:
    return full_name.rpartition(".")[0]


def _short(full_name: str) -> str:
    return full_name.rpartition(".")[2]


def _aliases(node: dict[str, Any]) -> set[str]:
    space = _namespace(str(node.get("name", "")))
    out = set()
    for alias in node.get("aliases") or ():
        if isinstance(alias, str):
            out.add(alias if "." in alias or not space else f"{space}.{alias}")
    return out


def _describe(node: Any) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, dict):
        kind = node.get("type")
        name = node.get("name")
        return f"{kind} {name}" if name else str(kind)
    return str(node)


class _Resolution:
    def __init__(self, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]) -> None:
        self.rn = reader_named
        self.wn = writer_named
        self.out: list[Incompatibility] = []
        self._in_progress: set[tuple[str, str]] = set()

    def add(self, kind: str, path: str, description: str) -> None:
        self.out.append(Incompatibility(kind, path or "/", description))

    def compatible(self, reader: Any, writer: Any, path: str) -> bool:
        """``check`` without recording what fails."""
        saved = self.out
        self.out = []
        try:
            self.check(reader, writer, path)
            return not self.out
        finally:
            self.out = saved

    def check(self, reader: Any, writer: Any, path: str) -> None:
        r = _resolve(reader, self.rn)
        w = _resolve(writer, self.wn)
        if isinstance(w, list):  # each branch the writer may have written
            for branch in w:
                self.check(r, branch, path)
            return
        if isinstance(r, list):
            if not any(self.compatible(branch, w, path) for branch in r):
                self.add("MISSING_UNION_BRANCH", path,
                         f"the reader's union has no branch for the writer's {_describe(w)}")
            return
        if isinstance(r, str) or isinstance(w, str):
            if isinstance(r, str) and isinstance(w, str) and (r == w or (w, r) in PROMOTIONS):
                return
            self.add("TYPE_MISMATCH", path, f"the reader's type {_describe(r)} cannot read the "
                                            f"writer's {_describe(w)}")
            return
        rk, wk = r.get("type"), w.get("type")
        if rk == "error":
            rk = "record"
        if wk == "error":
            wk = "record"
        if rk != wk:
            self.add("TYPE_MISMATCH", path, f"the reader's type {_describe(r)} cannot read the "
                                            f"writer's {_describe(w)}")
            return
        if rk == "array":
            self.check(r.get("items"), w.get("items"), f"{path}/items")
        elif rk == "map":
            self.check(r.get("values"), w.get("values"), f"{path}/values")
        elif not self._same_name(r, w, path):
            return
        elif rk == "fixed":
            if r.get("size") != w.get("size"):
                self.add("FIXED_SIZE_MISMATCH", f"{path}/size",
                         f"the reader's fixed {r.get('name')} has size {r.get('size')}, the "
                         f"writer's {w.get('size')}")
        elif rk == "enum":
            missing = [s for s in w.get("symbols", ()) if s not in set(r.get("symbols", ()))]
            if missing and "default" not in r:
                self.add("MISSING_ENUM_SYMBOLS", f"{path}/symbols",
                         f"the reader's enum {r.get('name')} lacks the writer's symbols "
                         f"{missing} and has no default")
        elif rk == "record":
            self._record(r, w, path)

    def _same_name(self, r: dict[str, Any], w: dict[str, Any], path: str) -> bool:
        rname, wname = str(r.get("name")), str(w.get("name"))
        if _short(rname) == _short(wname) or wname in _aliases(r):
            return True
        self.add("NAME_MISMATCH", f"{path}/name",
                 f"the reader's {r.get('type')} {rname} does not match the writer's {wname}")
        return False

    def _record(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        key = (str(r.get("name")), str(w.get("name")))
        if key in self._in_progress:
            return  # a recursive type: compared where it started
        self._in_progress.add(key)
        try:
            writer_fields = {f["name"]: f for f in w.get("fields", ())}
            for i, field in enumerate(r.get("fields", ())):
                where = f"{path}/fields/{i}"
                wf = writer_fields.get(field["name"])
                if wf is None:
                    wf = next((writer_fields[a] for a in field.get("aliases") or ()
                               if a in writer_fields), None)
                if wf is not None:
                    self.check(field["type"], wf["type"], f"{where}/type")
                elif "default" not in field:
                    self.add("READER_FIELD_MISSING_DEFAULT_VALUE", where,
                             f"the reader's field '{field['name']}' has no default value and "
                             "is missing in the writer's schema")
        finally:
            self._in_progress.discard(key)
