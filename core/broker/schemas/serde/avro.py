"""AVRO payloads: Avro binary (fastavro) to and from Avro's JSON encoding, the form
Confluent's REST Proxy takes and answers (kafka-rest's ``AvroConverter``).

Writing (``encoder``): a union value is null or ``{"<branch>": value}`` (the branch's
type name, a named type's full name, or its short name when unambiguous); bytes and
fixed are strings of the code points U+0000..U+00FF; ``"NaN"``, ``"Infinity"``,
``"-Infinity"`` for float and double; a record field left out takes its default. The
value is checked against the schema first, so an error names where it is wrong.

Reading (``decoder``): the same encoding as kafka-rest answers it: a union value other
than null is ``{"<branch>": value}`` (the full name for named types: ``{"int": 1}``,
``{"shop.Money": {...}}``); ``bytes`` and ``fixed`` are strings of one character per
byte (ISO-8859-1); logical types are not applied (a decimal is its bytes, a timestamp
its number), as the deserializer kafka-rest configures leaves them; ``float`` values are
printed as Java prints a float (``1.1``, not ``1.100000023841858``); NaN and the
infinities are the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (Jackson's
default).
"""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.serde import compiled
from core.broker.schemas.serde.avro_depth import check_depth, has_empty_items, static_depth
from core.broker.schemas.serde.base import (
    DecodeError,
    Invalid,
    Payload,
    Read,
    expected,
    show,
    why,
)
from core.json_depth import MAX_VALUE_DEPTH

Convert = Callable[[Any], Any]

_NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _branch_name(node: Any) -> str:
    """A union branch's name in Avro's JSON encoding (and fastavro's tuple notation)."""
    if isinstance(node, str):
        return node
    kind = node["type"]
    if not isinstance(kind, str):
        return _branch_name(kind)  # {"type": {"type": "int"}}
    if kind in _NAMED_KINDS:
        return str(node["name"])
    return kind  # a primitive (logical types are their primitive), array, map, a name


def encoder(parsed: ParsedSchema) -> Payload:
    model = parsed.model
    convert = _Converters(model.named).of(model.schema)
    schema = parse_schema({"type": "record", "name": _TOP_LEVEL,
                           "fields": [{"name": "v", "type": model.schema}]},
                          named_schemas=dict(model.named), _write_hint=True, _force=True)
    new_buffer = io.BytesIO

    def payload(value: Any) -> bytes:
        datum = convert(value)
        buffer = new_buffer()
        try:
            schemaless_writer(buffer, schema, {"v": datum})
        except Exception as exc:  # fastavro raises many kinds; the converter checked types
            raise Invalid(str(exc)[:300]) from None
        return buffer.getvalue()

    return payload


def decoder(parsed: ParsedSchema, schema_id: int) -> Read:
    schema, convert = compiled.once(parsed, "avro reader", _reader_schema)
    model = parsed.model
    walk = compiled.once(parsed, "avro walk", _needs_walk)

    def read(payload: memoryview) -> Any:
        if walk:  # before fastavro, which would recurse or allocate without bound
            try:
                check_depth(payload, model.schema, model.named, MAX_VALUE_DEPTH)
            except DecodeError as exc:
                raise DecodeError(f"the payload of schema {schema_id} is refused: "
                                  f"{exc}") from None
        try:
            value = schemaless_reader(io.BytesIO(payload), schema, None,
                                      return_named_type=True)
        except Exception as exc:  # fastavro raises many kinds on bad data
            raise DecodeError(f"the payload is not Avro data of schema {schema_id}: "
                              f"{why(exc)}") from None
        if convert is None:
            return value
        try:
            return convert(value)
        except RecursionError:  # not with the walk; kept as the last line of defence
            raise DecodeError(f"the payload of schema {schema_id} nests too deeply") from None

    return read


def _needs_walk(parsed: ParsedSchema) -> bool:
    """Whether payloads of ``parsed`` are walked before fastavro reads them
    (``avro_depth``): the schema can nest deeper than MAX_VALUE_DEPTH, or has arrays or
    maps of items that take no bytes."""
    model = parsed.model
    try:
        return (static_depth(model.schema, model.named, MAX_VALUE_DEPTH) > MAX_VALUE_DEPTH
                or has_empty_items(model.schema, model.named))
    except RecursionError:
        return True


# --- writing: Avro's JSON encoding -> fastavro's data, checked ------------------------------

_INT32 = 2**31
_INT64 = 2**63
_FLOAT_MAX = 3.4028234663852886e38
_TOP_LEVEL = "franz_top_level_value"  # a record of one field encodes as that field alone


def _null(v: Any) -> Any:
    if v is None:
        return None
    raise expected("null", v)


def _boolean(v: Any) -> Any:
    if v is True or v is False:
        return v
    raise expected("a boolean", v)


def _int(v: Any) -> Any:
    if type(v) is int and -_INT32 <= v < _INT32:
        return v
    raise expected("an int (32 bits)", v)


def _long(v: Any) -> Any:
    if type(v) is int and -_INT64 <= v < _INT64:
        return v
    raise expected("a long (64 bits)", v)


def _double(v: Any) -> Any:
    kind = type(v)
    if kind is float or kind is int:
        return v
    if kind is str and v in _NONFINITE:
        return _NONFINITE[v]
    raise expected("a number", v)


def _float(v: Any) -> Any:
    v = _double(v)
    # compared, not math.isinf(v): an int past a double's range does not convert
    if abs(v) > _FLOAT_MAX and abs(v) != math.inf:
        raise Invalid(f"{show(v)} is out of range for a float (32 bits)")
    return v


def _string(v: Any) -> Any:
    if type(v) is str:
        return v
    raise expected("a string", v)


def _latin1(v: Any, what: str) -> bytes:
    if type(v) is not str:
        raise expected(f"{what} as a string of code points U+0000..U+00FF", v)
    try:
        return v.encode("latin-1")
    except UnicodeEncodeError:
        raise Invalid(f"{what} are a string of code points U+0000..U+00FF: "
                      f"{show(v)} has others") from None


def _bytes(v: Any) -> Any:
    return _latin1(v, "bytes")


_PRIMITIVES: dict[str, Convert] = {
    "null": _null, "boolean": _boolean, "int": _int, "long": _long, "float": _float,
    "double": _double, "string": _string, "bytes": _bytes,
}


class _Converters:
    """Converters from Avro's JSON encoding to fastavro's data, one per schema node;
    named types once each (a recursive type refers to itself through a cell).
    ``defaults``: converters of default values, where a union's value is its first
    branch's, unwrapped."""

    def __init__(self, named: dict[str, Any], *, defaults: bool = False) -> None:
        self.named = named
        self.defaults = defaults
        self.by_name: dict[str, Convert] = {}
        self._default_converters: _Converters | None = None

    def of(self, node: Any) -> Convert:
        if isinstance(node, str):
            found = _PRIMITIVES.get(node)
            return found if found is not None else self._named(node)
        if isinstance(node, list):
            return self._union(node)
        kind = node["type"]
        if isinstance(kind, (dict, list)):
            return self.of(kind)
        if kind in _PRIMITIVES:  # with attributes (a logical type): its underlying type
            return _PRIMITIVES[kind]
        if kind in ("array", "map"):
            items = self.of(node["items"] if kind == "array" else node["values"])
            return _array(items) if kind == "array" else _map(items)
        return self._defined(node)

    def _named(self, name: str) -> Convert:
        found = self.by_name.get(name)
        return found if found is not None else self.of(self.named[name])

    def _defined(self, node: dict[str, Any]) -> Convert:
        name = node["name"]
        found = self.by_name.get(name)
        if found is not None:
            return found
        cell: list[Convert] = []
        self.by_name[name] = lambda v: cell[0](v)
        kind = node["type"]
        if kind == "enum":
            built = _enum(name, frozenset(node["symbols"]))
        elif kind == "fixed":
            built = _fixed(name, int(node["size"]))
        else:
            built = self._record(node)
        cell.append(built)
        self.by_name[name] = built
        return built

    def _default_of(self, node: Any) -> Convert:
        """A converter of ``node``'s default values, made when first needed."""
        holder: list[Convert] = []

        def convert(v: Any) -> Any:
            if not holder:
                if self._default_converters is None:
                    self._default_converters = (
                        self if self.defaults else _Converters(self.named, defaults=True))
                holder.append(self._default_converters.of(node))
            return holder[0](v)

        return convert

    def _record(self, node: dict[str, Any]) -> Convert:
        name = node["name"]
        fields = []
        for f in node["fields"]:
            default = self._default_of(f["type"]) if "default" in f else None
            fields.append((f["name"], self.of(f["type"]), default, f.get("default")))
        names = frozenset(f[0] for f in fields)
        defaults_mode = self.defaults

        def convert(v: Any) -> Any:
            if type(v) is not dict:
                raise expected(f"an object (record {name})", v)
            out = {}
            matched = 0
            for fname, conv, default, raw_default in fields:
                if fname in v:
                    matched += 1
                    try:
                        out[fname] = conv(v[fname])
                    except Invalid as exc:
                        exc.path.append(f".{fname}")
                        raise
                elif default is not None:
                    out[fname] = default(raw_default)
                elif not defaults_mode:
                    raise Invalid(f"record {name} needs field {fname!r} (it has no default)")
            if matched != len(v):
                raise Invalid(f"record {name} has no field {min(v.keys() - names)!r}")
            return out

        return convert

    def _union(self, branches: list[Any]) -> Convert:
        if self.defaults:  # a default value is the first branch's
            first, first_name = self.of(branches[0]), _branch_name(branches[0])

            def default(v: Any) -> Any:
                datum = first(v)
                return None if datum is None else (first_name, datum)

            return default
        by_name: dict[str, tuple[str, Convert]] = {}
        short: dict[str, list[str]] = {}
        for node in branches:
            name = _branch_name(node)
            by_name[name] = (name, self.of(node))
            short.setdefault(name.rsplit(".", 1)[-1], []).append(name)
        for alias, full in short.items():  # an unambiguous short name of a named type
            if len(full) == 1 and alias not in by_name:
                by_name[alias] = by_name[full[0]]
        nullable = "null" in by_name
        names = ", ".join(_branch_name(n) for n in branches)

        def convert(v: Any) -> Any:
            if v is None:
                if nullable:
                    return None
                raise Invalid(f"null is not one of the union's types [{names}]")
            if type(v) is dict and len(v) == 1:
                ((key, inner),) = v.items()
                found = by_name.get(key)
                if found is not None:
                    return found[0], found[1](inner)
            raise expected(f'a union value: null or {{"<type>": value}} with a type of [{names}]',
                           v)

        return convert


def _enum(name: str, symbols: frozenset[str]) -> Convert:
    def convert(v: Any) -> Any:
        if type(v) is str and v in symbols:
            return v
        raise expected(f"a symbol of enum {name} ({', '.join(sorted(symbols))})", v)

    return convert


def _fixed(name: str, size: int) -> Convert:
    def convert(v: Any) -> Any:
        data = _latin1(v, f"fixed {name}")
        if len(data) != size:
            raise Invalid(f"fixed {name} has {size} bytes, {show(v)} has {len(data)}")
        return data

    return convert


def _array(items: Convert) -> Convert:
    def convert(v: Any) -> Any:
        if type(v) is not list:
            raise expected("an array", v)
        try:
            return [items(x) for x in v]
        except Invalid:
            _raise_placed(items, ((f"[{i}]", x) for i, x in enumerate(v)))
            raise

    return convert


def _map(values: Convert) -> Convert:
    def convert(v: Any) -> Any:
        if type(v) is not dict:
            raise expected("an object (map)", v)
        try:
            return {k: values(x) for k, x in v.items()}
        except Invalid:
            _raise_placed(values, ((f"[{show(k)}]", x) for k, x in v.items()))
            raise

    return convert


def _raise_placed(convert: Convert, placed: Iterable[tuple[str, Any]]) -> None:
    """Converts the items again, one by one, to raise the first that fails with its
    place added to the error's path."""
    for place, x in placed:
        try:
            convert(x)
        except Invalid as exc:
            exc.path.append(place)
            raise


# --- reading: fastavro's data -> Avro's JSON encoding ---------------------------------------

_UNION_WRAPPER = "__franz_union_"
_F32 = struct.Struct("<f")


def _nonfinite(x: float) -> str:
    return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")


def _read_double(x: float) -> Any:
    return x if x - x == 0.0 else _nonfinite(x)  # x - x is NaN for NaN and the infinities


def _read_float(x: float) -> Any:
    """A float32 as Java prints it: the shortest decimal that reads back as that float."""
    if x - x != 0.0:
        return _nonfinite(x)
    packed = _F32.pack(x)
    for digits in range(6, 10):
        short = float(f"{x:.{digits}g}")
        if _F32.pack(short) == packed:
            return short
    return x


def _read_latin1(data: bytes) -> str:
    return data.decode("latin-1")


_READ_CONVERT: dict[str, Convert] = {"float": _read_float, "double": _read_double,
                                     "bytes": _read_latin1}


def _reader_schema(parsed: ParsedSchema) -> tuple[Any, Convert | None]:
    """fastavro's parsed reading schema of ``parsed``, and the converter of what it
    reads (None: nothing to convert)."""
    model = parsed.model
    schema, convert = _Rewriter(model.named).node(model.schema)
    return parse_schema(schema), convert


class _Late:
    """The converter of a named type still being compiled (recursive types)."""

    __slots__ = ("target",)

    def __init__(self) -> None:
        self.target: Convert | None = None

    def __call__(self, value: Any) -> Any:
        target = self.target
        return value if target is None else target(value)


class _Rewriter:
    """The writer schema rewritten for fastavro, and how to turn what fastavro reads into
    Avro's JSON encoding.

    fastavro gives a union's value without its branch, so every branch but null is
    wrapped in a record of one field ``v`` (binary-identical: a record is its fields one
    after the other) and read with ``return_named_type``: the wrapper's name says which
    branch it was. Logical types are dropped (raw values), so are defaults, docs and
    aliases (reading does not need them)."""

    def __init__(self, named: Mapping[str, Any]) -> None:
        self.named = named
        self.converts: dict[str, Convert | None] = {}  # named types compiled so far
        self.branches: list[tuple[str, Convert | None]] = []  # by wrapper number

    def node(self, node: Any) -> tuple[Any, Convert | None]:
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return node, _READ_CONVERT.get(node)
            return self.reference(node)
        if isinstance(node, list):
            return self.union(node)
        kind = node["type"]
        if kind in ("record", "error"):
            return self.record(node)
        if kind == "enum":
            self.converts[node["name"]] = None
            return self._named({"type": "enum", "symbols": list(node["symbols"])}, node), None
        if kind == "fixed":
            self.converts[node["name"]] = _read_latin1
            return self._named({"type": "fixed", "size": node["size"]}, node), _read_latin1
        if kind == "array":
            items, convert = self.node(node["items"])
            return {"type": "array", "items": items}, _each(convert)
        if kind == "map":
            values, convert = self.node(node["values"])
            return {"type": "map", "values": values}, _each_value(convert)
        return self.node(kind)  # {"type": "int", "logicalType": ...}, {"type": "a.Name"}

    def reference(self, name: str) -> tuple[Any, Convert | None]:
        if name in self.converts:
            return name, self.converts[name]
        definition = self.named.get(name)
        if definition is None:
            raise ValueError(f"unknown type {name!r}")
        return self.node(definition)  # defined here, at its first use

    @staticmethod
    def _named(out: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
        name = node["name"]
        out["name"] = name
        if "." not in name:
            out["namespace"] = ""
        return out

    def record(self, node: dict[str, Any]) -> tuple[Any, Convert | None]:
        late = _Late()
        self.converts[node["name"]] = late
        fields, converts = [], []
        for field in node["fields"]:
            schema, convert = self.node(field["type"])
            fields.append({"name": field["name"], "type": schema})
            if convert is not None:
                converts.append((field["name"], convert))
        convert = _record(tuple(converts)) if converts else None
        late.target = convert
        self.converts[node["name"]] = convert
        return self._named({"type": "record", "fields": fields}, node), convert

    def union(self, branches: list[Any]) -> tuple[Any, Convert | None]:
        out: list[Any] = []
        for branch in branches:
            if branch == "null" or (isinstance(branch, dict) and branch.get("type") == "null"):
                out.append("null")
                continue
            label = _branch_name(branch)
            schema, convert = self.node(branch)
            number = len(self.branches)
            self.branches.append((label, convert))
            out.append({"type": "record", "name": f"{_UNION_WRAPPER}{number}",
                        "fields": [{"name": "v", "type": schema}]})
        return out, self.union_value

    def union_value(self, value: Any) -> Any:
        if value is None:
            return None
        name, wrapper = value
        label, convert = self.branches[int(name[name.rindex("_") + 1:])]
        inner = wrapper["v"]
        return {label: inner if convert is None else convert(inner)}


def _each(convert: Convert | None) -> Convert | None:
    if convert is None:
        return None
    return lambda items: [convert(x) for x in items]


def _each_value(convert: Convert | None) -> Convert | None:
    if convert is None:
        return None
    return lambda values: {k: convert(v) for k, v in values.items()}


def _record(converts: tuple[tuple[str, Convert], ...]) -> Convert:
    def convert(record: dict[str, Any]) -> dict[str, Any]:
        for name, field_convert in converts:
            record[name] = field_convert(record[name])
        return record

    return convert
