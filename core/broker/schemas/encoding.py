"""Keys and values written with a registered schema, as Confluent's REST Proxy writes
them (docs/schema-registry.md, "Producing with schemas").

Which schema (``writer``): a request names, for its keys or its values, a schema id, a
version of a subject, a schema text (registered under the subject when it is new) or
nothing (the subject's latest version). The subject is the one given, else the subject
name strategy's: TOPIC_NAME ``<topic>-key`` / ``<topic>-value`` (the default),
RECORD_NAME the schema's record name, TOPIC_RECORD_NAME ``<topic>-<record name>``. As in
Confluent, the schema must be registered under that subject: its version there is
reported with the records.

The bytes (``encode_records``, ``encode_items``): Confluent's wire format (``wire``:
magic byte 0, the schema id) in front of the payload of a value given in the JSON form
Confluent's REST Proxy takes:

    AVRO      Avro's JSON encoding (a union value is null or {"<branch type>": value},
              bytes and fixed are strings of the code points 0-255), written by fastavro
    JSON      validated against the JSON schema (jsonschema), then its compact JSON text
    PROTOBUF  protobuf's JSON mapping (json_format) into the file's first message, after
              Confluent's message indexes (a single 0 byte for the first message)

A null key or value is a Kafka null. Each schema is compiled once (fastavro's schema and
a converter, a validator, a message class) and kept beside its parsed form. Encoding is
CPU work: ``run`` keeps a small request on the event loop and gives a larger one to a
single thread, not a thread per record. The format libraries are imported on first use.
"""

from __future__ import annotations

import asyncio
import io
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any, Protocol, TypeVar

import orjson

from core.broker.schemas import formats, wire
from core.broker.schemas.errors import (
    InvalidSchemaError,
    KeySchemaMissingError,
    OperationNotPermittedError,
    RawSchemaInvalidError,
    SchemaChoiceError,
    SchemaLookupError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SchemaTooLargeError,
    SerializationError,
    ValueSchemaMissingError,
)
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import (
    AVRO,
    JSON,
    LATEST,
    MAX_ID,
    PROTOBUF,
    SchemaInput,
    SchemaVersion,
    parse_version,
)
from core.broker.schemas.resolver import SchemaResolver

#: values encoded on the event loop; a request with more is encoded in one thread
INLINE_VALUES = 64
COMPILED_CACHE = 256

T = TypeVar("T")
Payload = Callable[[Any], bytes]  # a JSON value -> its payload; raises _Invalid


class Registry(Protocol):
    """The registry as produce uses it (``router.SchemaRegistryRouter``)."""

    resolver: SchemaResolver

    async def call(self, op: str, **args: Any) -> Any: ...


class SubjectNameStrategy(StrEnum):
    TOPIC_NAME = "TOPIC_NAME"
    RECORD_NAME = "RECORD_NAME"
    TOPIC_RECORD_NAME = "TOPIC_RECORD_NAME"


@dataclass(frozen=True, slots=True)
class SchemaChoice:
    """What a request names for its keys or values: ``schema_id``; or ``version`` of
    the subject; or ``schema``, a text of ``schema_type`` (AVRO, JSON, PROTOBUF) to
    register; or none of them: the subject's latest version. The subject is
    ``subject``, else ``strategy``'s."""

    schema_type: str | None = None
    schema: str | None = None
    schema_id: int | None = None
    version: int | None = None
    subject: str | None = None
    strategy: SubjectNameStrategy = SubjectNameStrategy.TOPIC_NAME


@dataclass(frozen=True, slots=True)
class Writer:
    """The schema keys or values are written with: its subject, id and version there,
    type, and its compiled payload function."""

    subject: str
    schema_id: int
    version: int
    schema_type: str
    header: bytes
    payload: Payload


# --- which schema -------------------------------------------------------------------------

_SERIALIZING = "Error serializing message. "


def _clip(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters: a subject or a registry message in an error
    may echo a client's input."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _lookup_error(asked: str, reason: str) -> SchemaLookupError:
    """Confluent's 42207 text: what was asked of the registry, and why it failed."""
    return SchemaLookupError(f"{_SERIALIZING}{asked}: {_clip(reason, 500)}")


def record_name(parsed: ParsedSchema) -> str | None:
    """The schema's record name (Confluent's ``ParsedSchema.name()``): the full name of
    an Avro record, enum or fixed, of a .proto's first message; a JSON schema's
    ``title``."""
    model = parsed.model
    if parsed.schema_type == AVRO:
        node = model.schema
        if isinstance(node, str) and node in model.named:  # a referenced named type
            node = model.named[node]
        if isinstance(node, dict) and node.get("type") in ("record", "error", "enum", "fixed"):
            return str(node["name"])
        return None
    if parsed.schema_type == PROTOBUF:
        fdp = model.file
        if not fdp.message_type:
            return None
        name = fdp.message_type[0].name
        return f"{fdp.package}.{name}" if fdp.package else name
    title = model.document.get("title") if isinstance(model.document, dict) else None
    return title if isinstance(title, str) and title else None


def subject_name(strategy: SubjectNameStrategy, topic: str, *, is_key: bool,
                 parsed: ParsedSchema | None) -> str:
    """The subject ``strategy`` names for ``topic``'s keys or values written with
    ``parsed`` (None: no schema known yet, as for a version or the latest one)."""
    if strategy is SubjectNameStrategy.TOPIC_NAME:
        return f"{topic}-{'key' if is_key else 'value'}"
    if parsed is None:
        raise SchemaChoiceError(f"Cannot use schema_subject_strategy={strategy} without "
                                "schema_id or schema.")
    name = record_name(parsed)
    if name is None:
        side = "key" if is_key else "value"
        raise SchemaLookupError(
            f"{_SERIALIZING}With {strategy} the {side} schema must have a record name: an "
            "Avro record, enum or fixed, a Protobuf message, or a JSON schema with a title.")
    return name if strategy is SubjectNameStrategy.RECORD_NAME else f"{topic}-{name}"


async def writer(registry: Registry, topic: str, choice: SchemaChoice, *, is_key: bool,
                 schema_type: str | None = None) -> Writer:
    """The schema ``choice`` names for ``topic``'s keys (``is_key``) or values, compiled;
    ``schema_type``: the type the request's format writes (refused otherwise)."""
    if choice.schema_id is not None:
        subject, schema_id, version, parsed = await _by_id(registry, topic, choice, is_key)
    elif choice.version is not None:
        subject, schema_id, version, parsed = await _by_version(registry, topic, choice,
                                                                is_key)
    elif choice.schema is not None:
        subject, schema_id, version, parsed = await _by_text(registry, topic, choice, is_key)
    else:
        subject, schema_id, version, parsed = await _latest(registry, topic, choice, is_key)
    if schema_type is not None and parsed.schema_type != schema_type:
        raise SchemaLookupError(f"{_SERIALIZING}Schema {schema_id} is a {parsed.schema_type} "
                                f"schema, not {schema_type}.")
    return Writer(subject, schema_id, version, parsed.schema_type, wire.header(schema_id),
                  _payload_of(parsed))


def _subject_of(choice: SchemaChoice, topic: str, is_key: bool,
                parsed: ParsedSchema | None) -> str:
    if choice.subject is not None:
        return choice.subject
    return subject_name(choice.strategy, topic, is_key=is_key, parsed=parsed)


async def _parsed(registry: Registry, schema_id: int) -> ParsedSchema:
    try:
        if not 1 <= schema_id <= MAX_ID:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return await registry.resolver.by_id(schema_id)
    except SchemaRegistryError as exc:
        raise _lookup_error(f"Error when fetching schema by id. schemaId = {schema_id}",
                            exc.message) from None


async def _version_of(registry: Registry, subject: str, schema_id: int) -> int:
    """The (latest) version of ``subject`` that has schema ``schema_id``."""
    try:
        latest = await registry.resolver.version(subject, LATEST)
        if latest.schema_id == schema_id:
            return latest.version
        found = await registry.call("id_versions", schema_id=schema_id)
        versions = [v.version for v in found if v.subject == subject]
        if not versions:
            raise SchemaNotFoundError("the schema is not registered under the subject")
    except SchemaRegistryError as exc:
        raise _lookup_error(f"Error when fetching schema version. subject = {_clip(subject)}, "
                            f"schemaId = {schema_id}", exc.message) from None
    return max(versions)


Resolved = tuple[str, int, int, ParsedSchema]  # subject, id, version, schema


async def _by_id(registry: Registry, topic: str, choice: SchemaChoice,
                 is_key: bool) -> Resolved:
    assert choice.schema_id is not None
    parsed = await _parsed(registry, choice.schema_id)
    subject = _subject_of(choice, topic, is_key, parsed)
    return subject, choice.schema_id, await _version_of(registry, subject, choice.schema_id), \
        parsed


async def _by_version(registry: Registry, topic: str, choice: SchemaChoice,
                      is_key: bool) -> Resolved:
    assert choice.version is not None
    subject = _subject_of(choice, topic, is_key, None)
    try:
        found: SchemaVersion = await registry.resolver.version(
            subject, parse_version(choice.version))
    except SchemaRegistryError:
        raise SchemaChoiceError(f"Schema does not exist for subject: {_clip(subject)}, "
                                f"version: {choice.version}") from None
    return subject, found.schema_id, found.version, await _parsed(registry, found.schema_id)


@lru_cache(maxsize=32)
def _parse_text(schema_type: str, text: str) -> ParsedSchema:
    return formats.parse(schema_type, text, {})


async def _by_text(registry: Registry, topic: str, choice: SchemaChoice,
                   is_key: bool) -> Resolved:
    assert choice.schema is not None and choice.schema_type is not None
    schema = SchemaInput(choice.schema, choice.schema_type)
    subject = choice.subject
    try:
        if subject is None:
            named = None  # the record-name strategies name the subject after the schema
            if choice.strategy is not SubjectNameStrategy.TOPIC_NAME:
                named = await asyncio.to_thread(_parse_text, schema.schema_type, schema.schema)
            subject = subject_name(choice.strategy, topic, is_key=is_key, parsed=named)
        schema_id = await _registered(registry, subject, schema)
    except (InvalidSchemaError, SchemaTooLargeError) as exc:
        side = "key" if is_key else "value"
        raise RawSchemaInvalidError(
            f"Invalid schema: the {side} schema: {_clip(exc.message, 500)}") from None
    except SchemaRegistryError as exc:
        raise _lookup_error(f"Error when registering schema. format = {choice.schema_type}, "
                            f"subject = {_clip(str(subject))}", exc.message) from None
    return subject, schema_id, await _version_of(registry, subject, schema_id), \
        await _parsed(registry, schema_id)


async def _registered(registry: Registry, subject: str, schema: SchemaInput) -> int:
    """The id of ``schema`` under ``subject``, registered when it is new there. A
    read-only subject still answers for a schema it has (Confluent looks up first)."""
    try:
        return await registry.resolver.register(subject, schema)
    except OperationNotPermittedError:
        try:
            found: SchemaVersion = await registry.call("lookup", subject=subject,
                                                       schema=schema)
        except SchemaRegistryError:
            raise OperationNotPermittedError(
                f"Subject {_clip(subject)} is read-only and does not have this schema") from None
        return found.schema_id


async def _latest(registry: Registry, topic: str, choice: SchemaChoice,
                  is_key: bool) -> Resolved:
    subject = _subject_of(choice, topic, is_key, None)
    try:
        found: SchemaVersion = await registry.resolver.version(subject, LATEST)
    except SchemaRegistryError as exc:
        raise _lookup_error(f"Error when fetching latest schema version. subject = "
                            f"{_clip(subject)}", exc.message) from None
    return subject, found.schema_id, found.version, await _parsed(registry, found.schema_id)


# --- the bytes ------------------------------------------------------------------------------


class _Invalid(Exception):
    """A value that does not match its schema: what is wrong, and where (path parts
    added innermost first as the error leaves the converters)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.path: list[str] = []

    def where(self) -> str:
        return "".join(reversed(self.path))


def _conversion_error(label: str, exc: _Invalid) -> SerializationError:
    return SerializationError(f"Conversion of JSON to Object failed: {label}{exc.where()}: "
                              f"{exc.detail}")


def _one(w: Writer, value: Any, i: int, side: str) -> bytes:
    try:
        return w.header + w.payload(value)
    except _Invalid as exc:
        raise _conversion_error(f"records[{i}].{side}", exc) from None


def encode_records(key_writer: Writer | None, keys: Sequence[Any],
                   value_writer: Writer | None,
                   values: Sequence[Any]) -> tuple[list[bytes | None], list[bytes | None]]:
    """The stored keys and values of a request's records (``records[i]``), in record
    order, key before value, as Confluent's REST Proxy writes them: the first key
    without a key writer fails (KeySchemaMissingError), the first value without a
    value writer (ValueSchemaMissingError), the first key or value its schema refuses
    (SerializationError)."""
    out_keys: list[bytes | None] = []
    out_values: list[bytes | None] = []
    add_key, add_value = out_keys.append, out_values.append
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        if k is None:
            add_key(None)
        elif key_writer is None:
            raise KeySchemaMissingError("Request includes keys but does not include key schema")
        else:
            add_key(_one(key_writer, k, i, "key"))
        if v is None:
            add_value(None)
        elif value_writer is None:
            raise ValueSchemaMissingError(
                "Request includes values but does not include value schema")
        else:
            add_value(_one(value_writer, v, i, "value"))
    return out_keys, out_values


def encode_items(items: Iterable[tuple[Writer, Any, str]]
                 ) -> list[bytes | None | SerializationError]:
    """Each ``(writer, value, label)`` encoded (None for a null value), or the error
    naming ``label`` when its schema refuses it."""
    out: list[bytes | None | SerializationError] = []
    for w, value, label in items:
        if value is None:
            out.append(None)
            continue
        try:
            out.append(w.header + w.payload(value))
        except _Invalid as exc:
            out.append(_conversion_error(label, exc))
    return out


async def run(count: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, encoding ``count`` values: here when few, else in one thread."""
    if count <= INLINE_VALUES:
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


# --- compiled schemas ------------------------------------------------------------------------

_COMPILED: OrderedDict[int, tuple[ParsedSchema, Payload]] = OrderedDict()


def _payload_of(parsed: ParsedSchema) -> Payload:
    """``parsed``'s payload function, compiled once while ``parsed`` (the resolver's
    cached object) is in use."""
    key = id(parsed)
    hit = _COMPILED.get(key)
    if hit is not None and hit[0] is parsed:
        _COMPILED.move_to_end(key)
        return hit[1]
    payload = _COMPILERS[parsed.schema_type](parsed)
    _COMPILED[key] = (parsed, payload)
    while len(_COMPILED) > COMPILED_CACHE:
        _COMPILED.popitem(last=False)
    return payload


def payload_function(parsed: ParsedSchema, message: str | None = None) -> Payload:
    """A payload function of ``parsed`` not cached (tests, tools); ``message``: the
    full name of the PROTOBUF message to write (default the file's first)."""
    if message is not None:
        return _protobuf(parsed, message)
    return _COMPILERS[parsed.schema_type](parsed)


def _show(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- AVRO: Avro's JSON encoding to fastavro's data ---------------------------------------

_INT32 = 2**31
_INT64 = 2**63
_FLOAT_MAX = 3.4028234663852886e38
_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_NAMED_KINDS = ("record", "error", "enum", "fixed")
_WRAPPER = "franz_top_level_value"  # a record of one field encodes as that field alone

Convert = Callable[[Any], Any]


def _fail(expected: str, value: Any) -> _Invalid:
    return _Invalid(f"expected {expected}, got {_show(value)}")


def _null(v: Any) -> Any:
    if v is None:
        return None
    raise _fail("null", v)


def _boolean(v: Any) -> Any:
    if v is True or v is False:
        return v
    raise _fail("a boolean", v)


def _int(v: Any) -> Any:
    if type(v) is int and -_INT32 <= v < _INT32:
        return v
    raise _fail("an int (32 bits)", v)


def _long(v: Any) -> Any:
    if type(v) is int and -_INT64 <= v < _INT64:
        return v
    raise _fail("a long (64 bits)", v)


def _double(v: Any) -> Any:
    kind = type(v)
    if kind is float or kind is int:
        return v
    if kind is str and v in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[v]
    raise _fail("a number", v)


def _float(v: Any) -> Any:
    v = _double(v)
    if abs(v) > _FLOAT_MAX and not math.isinf(v):
        raise _Invalid(f"{_show(v)} is out of range for a float (32 bits)")
    return v


def _string(v: Any) -> Any:
    if type(v) is str:
        return v
    raise _fail("a string", v)


def _latin1(v: Any, what: str) -> bytes:
    if type(v) is not str:
        raise _fail(f"{what} as a string of code points U+0000..U+00FF", v)
    try:
        return v.encode("latin-1")
    except UnicodeEncodeError:
        raise _Invalid(f"{what} are a string of code points U+0000..U+00FF: "
                       f"{_show(v)} has others") from None


def _bytes(v: Any) -> Any:
    return _latin1(v, "bytes")


_PRIMITIVES: dict[str, Convert] = {
    "null": _null, "boolean": _boolean, "int": _int, "long": _long, "float": _float,
    "double": _double, "string": _string, "bytes": _bytes,
}


def _branch_name(node: Any) -> str:
    """A union branch's name in Avro's JSON encoding (and fastavro's tuple notation)."""
    if isinstance(node, str):
        return node
    kind = node["type"]
    return str(node["name"]) if kind in _NAMED_KINDS else str(kind)


class _AvroConverters:
    """Converters from Avro's JSON encoding to fastavro's data, one per schema node;
    named types once each (a recursive type refers to itself through a cell).
    ``defaults``: converters of default values, where a union's value is its first
    branch's, unwrapped."""

    def __init__(self, named: dict[str, Any], *, defaults: bool = False) -> None:
        self.named = named
        self.defaults = defaults
        self.by_name: dict[str, Convert] = {}
        self._default_converters: _AvroConverters | None = None

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
                        self if self.defaults else _AvroConverters(self.named, defaults=True))
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
                raise _fail(f"an object (record {name})", v)
            out = {}
            matched = 0
            for fname, conv, default, raw_default in fields:
                if fname in v:
                    matched += 1
                    try:
                        out[fname] = conv(v[fname])
                    except _Invalid as exc:
                        exc.path.append(f".{fname}")
                        raise
                elif default is not None:
                    out[fname] = default(raw_default)
                elif not defaults_mode:
                    raise _Invalid(f"record {name} needs field {fname!r} (it has no default)")
            if matched != len(v):
                raise _Invalid(f"record {name} has no field {min(v.keys() - names)!r}")
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
                raise _Invalid(f"null is not one of the union's types [{names}]")
            if type(v) is dict and len(v) == 1:
                ((key, inner),) = v.items()
                found = by_name.get(key)
                if found is not None:
                    return found[0], found[1](inner)
            raise _fail(f'a union value: null or {{"<type>": value}} with a type of [{names}]', v)

        return convert


def _enum(name: str, symbols: frozenset[str]) -> Convert:
    def convert(v: Any) -> Any:
        if type(v) is str and v in symbols:
            return v
        raise _fail(f"a symbol of enum {name} ({', '.join(sorted(symbols))})", v)

    return convert


def _fixed(name: str, size: int) -> Convert:
    def convert(v: Any) -> Any:
        data = _latin1(v, f"fixed {name}")
        if len(data) != size:
            raise _Invalid(f"fixed {name} has {size} bytes, {_show(v)} has {len(data)}")
        return data

    return convert


def _array(items: Convert) -> Convert:
    def convert(v: Any) -> Any:
        if type(v) is not list:
            raise _fail("an array", v)
        try:
            return [items(x) for x in v]
        except _Invalid:
            for i, x in enumerate(v):  # again, to name the item
                try:
                    items(x)
                except _Invalid as exc:
                    exc.path.append(f"[{i}]")
                    raise
            raise

    return convert


def _map(values: Convert) -> Convert:
    def convert(v: Any) -> Any:
        if type(v) is not dict:
            raise _fail("an object (map)", v)
        try:
            return {k: values(x) for k, x in v.items()}
        except _Invalid:
            for k, x in v.items():
                try:
                    values(x)
                except _Invalid as exc:
                    exc.path.append(f"[{_show(k)}]")
                    raise
            raise

    return convert


def _avro(parsed: ParsedSchema) -> Payload:
    from fastavro import parse_schema, schemaless_writer

    model = parsed.model
    convert = _AvroConverters(model.named).of(model.schema)
    schema = parse_schema({"type": "record", "name": _WRAPPER,
                           "fields": [{"name": "v", "type": model.schema}]},
                          named_schemas=dict(model.named), _write_hint=True, _force=True)
    new_buffer = io.BytesIO

    def payload(value: Any) -> bytes:
        datum = convert(value)
        buffer = new_buffer()
        try:
            schemaless_writer(buffer, schema, {"v": datum})
        except Exception as exc:  # fastavro raises many kinds; the converter checked types
            raise _Invalid(str(exc)[:300]) from None
        return buffer.getvalue()

    return payload


# --- JSON ---------------------------------------------------------------------------------


def _json(parsed: ParsedSchema) -> Payload:
    from jsonschema import exceptions, validators
    from referencing import Registry as Resources
    from referencing import Resource
    from referencing.jsonschema import DRAFT7

    model = parsed.model
    resources = Resources().with_resources(
        (uri, Resource.from_contents(doc, default_specification=DRAFT7))
        for uri, doc in model.resources.items())
    cls = validators.validator_for(model.document, default=validators.Draft7Validator)
    validator = cls(model.document, registry=resources)
    best_match, dumps = exceptions.best_match, orjson.dumps

    def payload(value: Any) -> bytes:
        try:
            error = next(validator.iter_errors(value), None)
            if error is not None:
                error = best_match(validator.iter_errors(value)) or error
        except Exception as exc:  # a $ref that does not resolve, recursion
            raise _Invalid(f"cannot be validated: {str(exc)[:300]}") from None
        if error is not None:
            invalid = _Invalid(error.message[:300])
            invalid.path = [f"[{p}]" if isinstance(p, int) else f".{p}"
                            for p in reversed(error.absolute_path)]
            raise invalid
        try:
            return dumps(value)
        except orjson.JSONEncodeError as exc:
            raise _Invalid(str(exc)) from None

    return payload


# --- PROTOBUF -----------------------------------------------------------------------------


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def message_indexes(path: Sequence[int]) -> bytes:
    """Confluent's message indexes of the message at ``path`` (its index in the file,
    then in each enclosing message): zigzag varints, the count first; ``[0]``, the
    first message, is written as a single 0."""
    if list(path) == [0]:
        return b"\x00"
    return _zigzag_varint(len(path)) + b"".join(_zigzag_varint(i) for i in path)


def _message_path(fdp: Any, full_name: str | None) -> tuple[str, list[int]]:
    """(full name, index path) of message ``full_name`` in ``fdp`` (None: the first)."""
    prefix = f"{fdp.package}." if fdp.package else ""
    if full_name is None:
        return prefix + fdp.message_type[0].name, [0]
    stack = [(prefix + m.name, [i], m) for i, m in enumerate(fdp.message_type)]
    while stack:
        name, path, msg = stack.pop()
        if name == full_name:
            return name, path
        stack.extend((f"{name}.{n.name}", [*path, i], n) for i, n in enumerate(msg.nested_type))
    raise SchemaChoiceError(f"The PROTOBUF schema has no message {full_name}")


def _protobuf(parsed: ParsedSchema, message: str | None = None) -> Payload:
    from google.protobuf import descriptor_pool, json_format, message_factory

    model = parsed.model
    if not model.file.message_type:
        def no_message(value: Any) -> bytes:
            raise _Invalid("the PROTOBUF schema defines no message")
        return no_message
    pool = descriptor_pool.DescriptorPool()
    for dep in model.deps.values():  # in import order
        pool.Add(dep)
    pool.Add(model.file)
    full_name, path = _message_path(model.file, message)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
    prefix, parse_dict = message_indexes(path), json_format.ParseDict

    def payload(value: Any) -> bytes:
        if type(value) is not dict:
            raise _fail(f"an object (message {full_name})", value)
        try:
            return prefix + parse_dict(value, cls()).SerializeToString()
        except Exception as exc:  # ParseError, EncodeError (proto2 required), recursion
            raise _Invalid(" ".join(str(exc).split())[:300]) from None

    return payload


_COMPILERS: dict[str, Callable[[ParsedSchema], Payload]] = {
    AVRO: _avro, JSON: _json, PROTOBUF: _protobuf,
}
