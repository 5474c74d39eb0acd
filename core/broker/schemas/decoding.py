"""Keys and values in Confluent's wire format -> the JSON values Confluent's REST Proxy
answers for them (kafka-rest's ``AvroConverter`` / ``JsonSchemaConverter`` /
``ProtobufConverter``), decoded with the writer's schema, the one the bytes name: the
header is ``wire``'s, the payload its format's (``serde``).

``schema_ids`` lists the ids some data names, ``load`` gets their parsed schemas from
the resolver (async; cached there), and ``SchemaDecoder.decode`` is the CPU work, meant
to run off the event loop for a whole response at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from core.broker.schemas import wire
from core.broker.schemas.errors import InvalidSchemaError, SchemaNotFoundError
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import MAX_ID
from core.broker.schemas.serde import codec
from core.broker.schemas.serde.base import DecodeError, Read


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
            return codec(self.schema_type).decoder(parsed, schema_id)
        except Exception as exc:  # a schema the decoder cannot use: every datum fails
            return _failing(f"schema {schema_id} cannot be used to decode: {exc}")


def _failing(reason: str) -> Read:
    def read(payload: memoryview) -> Any:
        raise DecodeError(reason)

    return read
