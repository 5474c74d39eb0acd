"""Each schema format's payloads, both ways: a JSON value as Confluent's REST Proxy takes
it -> the payload bytes (``encoder``), and payload bytes -> the JSON value it answers
(``decoder``). ``core.broker.schemas.encoding`` and ``decoding`` put Confluent's wire
header (``wire``) around them.

    base        what the formats share: the encoder and decoder types, their errors
    compiled    what a schema needs to encode or decode, made once per parsed schema
    avro        Avro's JSON encoding (fastavro)
    jsonschema  JSON text, validated when written (jsonschema)
    protobuf    protobuf's JSON mapping, with Confluent's message indexes (protobuf)

A format's module, and its library, is imported the first time a schema of that type
is encoded or decoded (``codec``), as ``formats`` imports them on the first parse.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Protocol, cast

from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import AVRO, JSON, PROTOBUF
from core.broker.schemas.serde.base import Payload, Read

_MODULES = {AVRO: "avro", JSON: "jsonschema", PROTOBUF: "protobuf"}


class Codec(Protocol):
    """What each format's module gives."""

    def encoder(self, parsed: ParsedSchema) -> Payload: ...

    def decoder(self, parsed: ParsedSchema, schema_id: int) -> Read: ...


@cache
def codec(schema_type: str) -> Codec:
    return cast(Codec, importlib.import_module(f"{__name__}.{_MODULES[schema_type]}"))
