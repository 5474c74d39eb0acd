"""Confluent's wire format of a schema'd key or value: magic byte 0, the schema id as a
4-byte big-endian integer, then the payload (for PROTOBUF the payload starts with the
message indexes, see ``core.broker.schemas.serde.protobuf``)."""

from __future__ import annotations

import struct

from core.broker.schemas.model import MAX_ID

MAGIC = 0
HEADER_SIZE = 5
_HEADER = struct.Struct(">bI")


class WireFormatError(ValueError):
    """Bytes that are not in Confluent's wire format."""


def header(schema_id: int) -> bytes:
    """The 5 bytes in front of a payload written with schema ``schema_id``."""
    if not 1 <= schema_id <= MAX_ID:
        raise ValueError(f"schema id {schema_id} is not in 1 .. {MAX_ID}")
    return _HEADER.pack(MAGIC, schema_id)


def split(data: bytes) -> tuple[int, memoryview]:
    """``data``'s schema id and payload; WireFormatError when it has no valid header."""
    if len(data) < HEADER_SIZE:
        raise WireFormatError(f"{len(data)} bytes are too short for the 5-byte schema header")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise WireFormatError(f"unknown magic byte {magic} (expected {MAGIC})")
    if not 1 <= schema_id <= MAX_ID:
        raise WireFormatError(f"schema id {schema_id} is not in 1 .. {MAX_ID}")
    return schema_id, memoryview(data)[HEADER_SIZE:]
