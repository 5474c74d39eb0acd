"""Keys and values written with a registered schema, as Confluent's REST Proxy writes
them (docs/schema-registry.md, "Producing with schemas"); which schema a request writes
with is ``subjects``'s.

The bytes (``encode_records``, ``encode_items``): Confluent's wire format (``wire``:
magic byte 0, the schema id) in front of the payload of a value given in the JSON form
Confluent's REST Proxy takes (``serde``: AVRO Avro's JSON encoding, JSON any value valid
against the schema, PROTOBUF protobuf's JSON mapping). A null key or value is a Kafka
null. Each schema's payload function is compiled once (``payload_of``). Encoding is CPU
work: ``run`` keeps a small request on the event loop and gives a larger one to a single
thread, not a thread per record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from core.broker.schemas.errors import (
    KeySchemaMissingError,
    SerializationError,
    ValueSchemaMissingError,
)
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.serde import codec, compiled
from core.broker.schemas.serde.base import Invalid, Payload

#: values encoded on the event loop; a request with more is encoded in one thread
INLINE_VALUES = 64

T = TypeVar("T")


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


def payload_of(parsed: ParsedSchema) -> Payload:
    """``parsed``'s payload function, compiled once while ``parsed`` (the resolver's
    cached object) is in use."""
    return compiled.once(parsed, "payload", _compile)


def _compile(parsed: ParsedSchema) -> Payload:
    return codec(parsed.schema_type).encoder(parsed)


def _conversion_error(label: str, exc: Invalid) -> SerializationError:
    return SerializationError(f"Conversion of JSON to Object failed: {label}{exc.where()}: "
                              f"{exc.detail}")


def _one(w: Writer, value: Any, i: int, side: str) -> bytes:
    try:
        return w.header + w.payload(value)
    except Invalid as exc:
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
        except Invalid as exc:
            out.append(_conversion_error(label, exc))
    return out


async def run(count: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, encoding ``count`` values: here when few, else in one thread."""
    if count <= INLINE_VALUES:
        return fn(*args)
    return await asyncio.to_thread(fn, *args)
