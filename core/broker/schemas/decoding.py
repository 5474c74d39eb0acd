"""Keys and values in Confluent's wire format -> the JSON values Confluent's REST Proxy
answers for them (kafka-rest's ``AvroConverter`` / ``JsonSchemaConverter`` /
``ProtobufConverter``), decoded with the writer's schema, the one the bytes name.

- AVRO: read by fastavro (``schemaless_reader``) and written as Avro's JSON encoding,
  which kafka-rest answers: a union value other than null is ``{"<branch>": value}``
  (the branch's full name for named types, else its type name: ``{"int": 1}``,
  ``{"shop.Money": {...}}``); ``bytes`` and ``fixed`` are strings of one character per
  byte (ISO-8859-1); logical types are not applied (a decimal is its bytes, a timestamp
  its number), as the deserializer kafka-rest configures leaves them; ``float`` values
  are printed as Java prints a float (``1.1``, not ``1.100000023841858``); NaN and the
  infinities are the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (Jackson's
  default).
- JSON: the payload is JSON text; it is not validated against the schema (Confluent's
  default).
- PROTOBUF: the payload starts with the message indexes (zigzag varints: how many, then
  the index of the message in the file and in each nested level; a single 0 means the
  file's first message); the message is rendered with protobuf's JSON mapping as
  Confluent's printer does: lowerCamelCase names, fields with no presence printed with
  their defaults, 64-bit integers as strings, enums by name.

``schema_ids`` lists the ids some data names, ``load`` gets their parsed schemas from
the resolver (async; cached there), and ``SchemaDecoder.decode`` is the CPU work, meant
to run off the event loop for a whole response at once. What each schema needs to
decode (fastavro's parsed schema, protobuf's message classes) is made once per parsed
schema and kept (``COMPILED_CACHE`` of them). fastavro and protobuf are imported on the
first decode, as ``formats`` imports them on the first parse.
"""

from __future__ import annotations

import asyncio
import io
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from core.broker.schemas import wire
from core.broker.schemas.errors import InvalidSchemaError, SchemaNotFoundError
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import AVRO, JSON, MAX_ID, PROTOBUF

COMPILED_CACHE = 1000

Convert = Callable[[Any], Any]
Read = Callable[[memoryview], Any]  # a payload (after the header) -> its JSON value


class DecodeError(ValueError):
    """Bytes that cannot be decoded; the message says why."""


class ParsedById(Protocol):
    async def by_id(self, schema_id: int) -> ParsedSchema: ...


def schema_ids(datas: Iterable[bytes | None]) -> set[int]:
    """The valid schema ids the wire-format items of ``datas`` name (others are skipped:
    they fail to decode without a registry call)."""
    found: set[int] = set()
    for data in datas:
        if data is not None and len(data) >= wire.HEADER_SIZE and data[0] == wire.MAGIC:
            found.add(int.from_bytes(data[1:wire.HEADER_SIZE], "big"))
    return {i for i in found if 1 <= i <= MAX_ID}


async def load(resolver: ParsedById, schema_type: str, ids: Iterable[int]) -> SchemaDecoder:
    """A decoder of ``schema_type`` data written with the schemas ``ids`` (looked up all
    at once). An id that is not registered, names another type or does not parse is kept
    with the reason, so the data naming it fails to decode; other errors (the registry
    unavailable) raise."""
    wanted = sorted(ids)
    answers = await asyncio.gather(*(resolver.by_id(i) for i in wanted),
                                   return_exceptions=True)
    found: dict[int, ParsedSchema | str] = {}
    for schema_id, parsed in zip(wanted, answers, strict=True):
        if isinstance(parsed, SchemaNotFoundError):
            found[schema_id] = f"schema id {schema_id} is not registered"
        elif isinstance(parsed, InvalidSchemaError):
            found[schema_id] = f"schema {schema_id} cannot be parsed: {parsed}"
        elif isinstance(parsed, BaseException):
            raise parsed
        elif parsed.schema_type != schema_type:
            found[schema_id] = (f"schema {schema_id} is of type {parsed.schema_type}, "
                                f"not {schema_type}")
        else:
            found[schema_id] = parsed
    return SchemaDecoder(schema_type, found)


class SchemaDecoder:
    """Decodes data of one schema type written with any of the schemas it was given.
    One per response, used by one thread at a time."""

    def __init__(self, schema_type: str, schemas: Mapping[int, ParsedSchema | str]) -> None:
        self.schema_type = schema_type
        self._schemas = dict(schemas)
        self._readers: dict[int, Read] = {}

    def decode(self, data: bytes) -> Any:
        """``data``'s JSON value; DecodeError when it cannot be decoded."""
        try:
            schema_id, payload = wire.split(data)
        except wire.WireFormatError as exc:
            raise DecodeError(f"not in the schema wire format: {exc}") from None
        read = self._readers.get(schema_id)
        if read is None:
            read = self._readers[schema_id] = self._reader(schema_id)
        return read(payload)

    def _reader(self, schema_id: int) -> Read:
        parsed = self._schemas.get(schema_id, f"schema id {schema_id} was not loaded")
        if isinstance(parsed, str):
            return _failing(parsed)
        try:
            return _READERS[self.schema_type](parsed, schema_id)
        except DecodeError as exc:
            return _failing(str(exc))


def _failing(reason: str) -> Read:
    def read(payload: memoryview) -> Any:
        raise DecodeError(reason)

    return read


def _why(exc: Exception) -> str:
    text = str(exc)
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]


# --- compiled schemas, kept per parsed schema -----------------------------------------------

_compiled: OrderedDict[int, tuple[ParsedSchema, Any]] = OrderedDict()
_compiled_lock = threading.Lock()


def _compiled_for(parsed: ParsedSchema, schema_id: int, compile_: Callable[[Any], Any]) -> Any:
    """``compile_(parsed.model)``, made once per parsed schema: the resolver hands out one
    object per id, so its identity is the key (the entry keeps it alive: no reuse)."""
    key = id(parsed)
    with _compiled_lock:
        hit = _compiled.get(key)
        if hit is not None and hit[0] is parsed:
            _compiled.move_to_end(key)
            made = hit[1]
        else:
            made = None
    if made is None:
        try:
            made = compile_(parsed.model)
        except Exception as exc:  # a schema the decoder cannot use: every datum fails
            made = DecodeError(f"schema {schema_id} cannot be used to decode: {exc}")
        with _compiled_lock:
            _compiled[key] = (parsed, made)
            while len(_compiled) > COMPILED_CACHE:
                _compiled.popitem(last=False)
    if isinstance(made, DecodeError):
        raise made
    return made


# --- JSON ---------------------------------------------------------------------------------


def _read_json(payload: memoryview) -> Any:
    import orjson

    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"the payload is not valid JSON: {exc}") from None


def _json_reader(parsed: ParsedSchema, schema_id: int) -> Read:
    return _read_json


# --- AVRO ---------------------------------------------------------------------------------

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes",
                         "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
_WRAPPER = "__franz_union_"
_F32 = struct.Struct("<f")


def _nonfinite(x: float) -> str:
    return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")


def _double(x: float) -> Any:
    return x if x - x == 0.0 else _nonfinite(x)  # x - x is NaN for NaN and the infinities


def _float(x: float) -> Any:
    """A float32 as Java prints it: the shortest decimal that reads back as that float."""
    if x - x != 0.0:
        return _nonfinite(x)
    packed = _F32.pack(x)
    for digits in range(6, 10):
        short = float(f"{x:.{digits}g}")
        if _F32.pack(short) == packed:
            return short
    return x


def _latin1(data: bytes) -> str:
    return data.decode("latin-1")


_PRIMITIVE_CONVERT: dict[str, Convert] = {"float": _float, "double": _double,
                                          "bytes": _latin1}


class _Late:
    """The converter of a named type still being compiled (recursive types)."""

    __slots__ = ("target",)

    def __init__(self) -> None:
        self.target: Convert | None = None

    def __call__(self, value: Any) -> Any:
        target = self.target
        return value if target is None else target(value)


class _AvroCompiler:
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
                return node, _PRIMITIVE_CONVERT.get(node)
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
            self.converts[node["name"]] = _latin1
            return self._named({"type": "fixed", "size": node["size"]}, node), _latin1
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
            label = _label(branch)
            schema, convert = self.node(branch)
            number = len(self.branches)
            self.branches.append((label, convert))
            out.append({"type": "record", "name": f"{_WRAPPER}{number}",
                        "fields": [{"name": "v", "type": schema}]})
        return out, self.union_value

    def union_value(self, value: Any) -> Any:
        if value is None:
            return None
        name, wrapper = value
        label, convert = self.branches[int(name[name.rindex("_") + 1:])]
        inner = wrapper["v"]
        return {label: inner if convert is None else convert(inner)}


def _label(branch: Any) -> str:
    """The name Avro's JSON encoding gives a union branch."""
    if isinstance(branch, str):
        return branch
    kind = branch["type"]
    if not isinstance(kind, str):
        return _label(kind)  # {"type": {"type": "int"}}
    if kind in _NAMED:
        return str(branch["name"])
    return kind  # a primitive (logical types are their primitive), array, map, a name


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


class _AvroReader:
    __slots__ = ("convert", "schema")

    def __init__(self, schema: Any, convert: Convert | None) -> None:
        self.schema = schema
        self.convert = convert


def _compile_avro(model: Any) -> _AvroReader:
    from fastavro import parse_schema

    compiler = _AvroCompiler(model.named)
    schema, convert = compiler.node(model.schema)
    return _AvroReader(parse_schema(schema), convert)


def _avro_reader(parsed: ParsedSchema, schema_id: int) -> Read:
    from fastavro import schemaless_reader

    compiled: _AvroReader = _compiled_for(parsed, schema_id, _compile_avro)
    schema, convert = compiled.schema, compiled.convert

    def read(payload: memoryview) -> Any:
        try:
            value = schemaless_reader(io.BytesIO(payload), schema, None,
                                      return_named_type=True)
        except Exception as exc:  # fastavro raises many kinds on bad data
            raise DecodeError(f"the payload is not Avro data of schema {schema_id}: "
                              f"{_why(exc)}") from None
        return value if convert is None else convert(value)

    return read


# --- PROTOBUF -----------------------------------------------------------------------------

MAX_MESSAGE_INDEXES = 64


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's ``ByteUtils.readVarint``, at most 5 bytes) at ``pos``."""
    raw = shift = 0
    while True:
        if pos >= len(data):
            raise DecodeError("the message indexes are cut short")
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 28:
            raise DecodeError("a message index is not a valid varint")


def message_indexes(payload: memoryview) -> tuple[tuple[int, ...], int]:
    """Confluent's message indexes in front of a PROTOBUF payload, and where the message
    starts. A count of 0 means ``[0]``."""
    count, pos = _varint(payload, 0)
    if count == 0:
        return (0,), pos
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise DecodeError(f"{count} message indexes")
    indexes = []
    for _ in range(count):
        index, pos = _varint(payload, pos)
        if index < 0:
            raise DecodeError(f"negative message index {index}")
        indexes.append(index)
    return tuple(indexes), pos


class _ProtoReader:
    """A schema's descriptor pool and its message classes, by message indexes."""

    def __init__(self, model: Any) -> None:
        from google.protobuf import descriptor_pool

        self.file = model.file
        self.pool = descriptor_pool.DescriptorPool()
        for dep in model.deps.values():  # in import order, as the registry added them
            self.pool.AddSerializedFile(dep.SerializeToString())
        self.pool.AddSerializedFile(self.file.SerializeToString())
        self._classes: dict[tuple[int, ...], Any] = {}
        self._lock = threading.Lock()

    def message_class(self, indexes: tuple[int, ...]) -> Any:
        found = self._classes.get(indexes)
        if found is None:
            from google.protobuf import message_factory

            name = self._name(indexes)
            with self._lock:
                found = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))
                self._classes[indexes] = found
        return found

    def _name(self, indexes: tuple[int, ...]) -> str:
        parts = [self.file.package] if self.file.package else []
        messages = self.file.message_type
        for depth, index in enumerate(indexes):
            if index >= len(messages):
                where = "the file" if depth == 0 else f"message {'.'.join(parts)}"
                raise DecodeError(f"message index {list(indexes)}: {where} has no message "
                                  f"number {index}")
            parts.append(messages[index].name)
            messages = messages[index].nested_type
        return ".".join(parts)


def _protobuf_reader(parsed: ParsedSchema, schema_id: int) -> Read:
    from google.protobuf import json_format

    compiled: _ProtoReader = _compiled_for(parsed, schema_id, _ProtoReader)
    to_dict, pool = json_format.MessageToDict, compiled.pool

    def read(payload: memoryview) -> Any:
        indexes, start = message_indexes(payload)
        cls = compiled.message_class(indexes)
        try:
            message = cls.FromString(bytes(payload[start:]))
            return to_dict(message, always_print_fields_with_no_presence=True,
                           descriptor_pool=pool)
        except Exception as exc:  # DecodeError, an Any of an unknown type...
            raise DecodeError(f"the payload is not a {cls.DESCRIPTOR.full_name} message of "
                              f"schema {schema_id}: {_why(exc)}") from None

    return read


#: Per schema type: (parsed schema, its id) -> how to read payloads written with it.
_READERS: dict[str, Callable[[ParsedSchema, int], Read]] = {
    AVRO: _avro_reader,
    JSON: _json_reader,
    PROTOBUF: _protobuf_reader,
}
