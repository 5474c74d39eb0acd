"""PROTOBUF payloads: Confluent's message indexes, then the message; a value is
protobuf's JSON mapping (``json_format``).

The message indexes name the message of the file the payload holds: zigzag varints, how
many, then its index in the file and in each enclosing message (nested types counted as
in the descriptor, map entries too); a single 0 means the file's first message.

Writing (``encoder``): the file's first message (or the one named), from its JSON
mapping (camelCase or field names, int64 as strings or numbers, well-known types);
unknown fields are refused. Reading (``decoder``): the message the indexes name,
rendered as Confluent's printer does: lowerCamelCase names, fields with no presence
printed with their defaults, 64-bit integers as strings, enums by name.

Both directions use one descriptor pool per schema and its message classes
(``Messages``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pool, json_format, message_factory

from core.broker.schemas.errors import SchemaChoiceError
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.serde import compiled
from core.broker.schemas.serde.base import (
    DecodeError,
    Invalid,
    Payload,
    Read,
    expected,
    why,
)
from core.storage.pure_codec import zigzag_varint

MAX_MESSAGE_INDEXES = 64

Indexes = tuple[int, ...]


class Messages:
    """A schema's descriptor pool (its file after the files it imports) and the classes
    of its messages, by message indexes, each made when first asked for."""

    def __init__(self, parsed: ParsedSchema) -> None:
        model = parsed.model
        self.file = model.file
        self.pool = descriptor_pool.DescriptorPool()
        for dep in model.deps.values():  # in import order, as the registry added them
            self.pool.AddSerializedFile(dep.SerializeToString())
        self.pool.AddSerializedFile(self.file.SerializeToString())
        self._classes: dict[Indexes, Any] = {}
        self._lock = threading.Lock()

    def message_class(self, indexes: Indexes) -> Any:
        found = self._classes.get(indexes)
        if found is None:
            name = self._name(indexes)
            with self._lock:
                found = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))
                self._classes[indexes] = found
        return found

    def _name(self, indexes: Indexes) -> str:
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


def _messages(parsed: ParsedSchema) -> Messages:
    return compiled.once(parsed, "protobuf messages", Messages)


def encoder(parsed: ParsedSchema, message: str | None = None) -> Payload:
    """``message``: the full name of the message to write (default the file's first)."""
    file = parsed.model.file
    if not file.message_type:
        def no_message(value: Any) -> bytes:
            raise Invalid("the PROTOBUF schema defines no message")
        return no_message
    full_name, path = _message_path(file, message)
    cls = _messages(parsed).message_class(path)
    prefix, parse_dict = message_indexes(path), json_format.ParseDict

    def payload(value: Any) -> bytes:
        if type(value) is not dict:
            raise expected(f"an object (message {full_name})", value)
        try:
            return prefix + parse_dict(value, cls()).SerializeToString()
        except Exception as exc:  # ParseError, EncodeError (proto2 required), recursion
            raise Invalid(" ".join(str(exc).split())[:300]) from None

    return payload


def decoder(parsed: ParsedSchema, schema_id: int) -> Read:
    messages = _messages(parsed)
    to_dict, pool = json_format.MessageToDict, messages.pool

    def read(payload: memoryview) -> Any:
        indexes, start = read_message_indexes(payload)
        cls = messages.message_class(indexes)
        try:
            message = cls.FromString(bytes(payload[start:]))
            return to_dict(message, always_print_fields_with_no_presence=True,
                           descriptor_pool=pool)
        except Exception as exc:  # DecodeError, an Any of an unknown type...
            raise DecodeError(f"the payload is not a {cls.DESCRIPTOR.full_name} message of "
                              f"schema {schema_id}: {why(exc)}") from None

    return read


def _message_path(file: Any, full_name: str | None) -> tuple[str, Indexes]:
    """(full name, message indexes) of message ``full_name`` in ``file`` (None: the
    first)."""
    prefix = f"{file.package}." if file.package else ""
    if full_name is None:
        return prefix + file.message_type[0].name, (0,)
    stack: list[tuple[str, Indexes, Any]] = [
        (prefix + m.name, (i,), m) for i, m in enumerate(file.message_type)]
    while stack:
        name, path, msg = stack.pop()
        if name == full_name:
            return name, path
        stack.extend((f"{name}.{n.name}", (*path, i), n) for i, n in enumerate(msg.nested_type))
    raise SchemaChoiceError(f"The PROTOBUF schema has no message {full_name}")


# --- message indexes ------------------------------------------------------------------------


def message_indexes(path: Sequence[int]) -> bytes:
    """The message indexes of the message at ``path``; ``[0]``, the first message, is
    written as a single 0."""
    if tuple(path) == (0,):
        return b"\x00"
    return zigzag_varint(len(path)) + b"".join(zigzag_varint(i) for i in path)


def read_message_indexes(payload: memoryview) -> tuple[Indexes, int]:
    """The message indexes in front of a payload, and where the message starts. A
    count of 0 means ``[0]``."""
    count, pos = _read_varint(payload, 0)
    if count == 0:
        return (0,), pos
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise DecodeError(f"{count} message indexes")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(payload, pos)
        if index < 0:
            raise DecodeError(f"negative message index {index}")
        indexes.append(index)
    return tuple(indexes), pos


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
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
