"""Schema formats: ``parse`` a schema of any type (with its references, already parsed),
``check`` whether a reader schema reads what a writer schema wrote, ``render`` a schema
in a requested format.

Each format's module (and its library: fastavro, jsonschema, protobuf and the .proto
parser, ~100 ms of imports together) is imported the first time a schema of that type
is seen, not when the broker starts."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from types import ModuleType

from core.broker.schemas.formats.base import Incompatibility, ParsedSchema
from core.broker.schemas.model import AVRO, JSON, PROTOBUF, Reference, check_schema_type

__all__ = ["Incompatibility", "ParsedSchema", "check", "parse", "render"]

_MODULES = {AVRO: "avro", JSON: "jsonschema", PROTOBUF: "protobuf"}


@cache
def _format(schema_type: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{_MODULES[schema_type]}")


def parse(schema_type: str, text: str, references: Mapping[str, ParsedSchema],
          refs: tuple[Reference, ...] = (), *, normalize: bool = False) -> ParsedSchema:
    """``text`` as a schema of ``schema_type``; ``references``: the parsed schemas its
    references name, by reference name. InvalidSchemaError when it is not valid."""
    return _format(check_schema_type(schema_type)).parse(text, references, refs,
                                                         normalize=normalize)


def check(reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    if reader.schema_type != writer.schema_type:
        return [Incompatibility("TYPE_CHANGED", "/", f"a {reader.schema_type} schema cannot "
                                                     f"read {writer.schema_type} data")]
    return _format(reader.schema_type).check(reader, writer)


def render(parsed: ParsedSchema, fmt: str | None) -> str:
    """The schema's text; ``fmt`` ``serialized``: a PROTOBUF schema's descriptor in
    base64 (Confluent's ``format=serialized``)."""
    if fmt == "serialized" and parsed.schema_type == PROTOBUF:
        return _format(PROTOBUF).serialized(parsed)
    return parsed.text
