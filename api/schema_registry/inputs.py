"""What the registry's routes read from a request: query parameters (Confluent's
spellings and Java's boolean rule), path parameters, and JSON bodies read by hand (the
registry's own media types, bounded, every field checked before anything is written).

Boolean query parameters are true when they read ``true`` in any case, as in Java;
a bad integer one is 400 / 400; a body that is not JSON or not an object is 400 / 400,
one of another content type 415 / 415, one over ``MAX_BODY_BYTES`` 413 / 413; a
schema, level or mode that is not valid is its Confluent 422.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request

from api.schema_registry.errors import ACCEPTED_MEDIA, ApiProblem
from core.broker.schemas.errors import (
    InvalidCompatibilityLevelError,
    InvalidModeError,
    InvalidSchemaError,
    SchemaNotFoundError,
)
from core.broker.schemas.model import (
    AVRO,
    MAX_ID,
    SCHEMA_TYPES,
    Reference,
    SchemaInput,
    invalid_version,
    parse_version,
)

MAX_BODY_BYTES = 1024 * 1024  # request.body.max.bytes bounds it before the route too


# --- query and path -----------------------------------------------------------------------


def flag(request: Request, name: str, alias: str | None = None) -> bool:
    """A boolean query parameter; ``alias``: its other spelling (Confluent's Python client
    writes ``deleted_only`` where the server documents ``deletedOnly``)."""
    value = request.query_params.get(name)
    if value is None and alias is not None:
        value = request.query_params.get(alias)
    return (value or "").strip().lower() == "true"


def integer(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text, 10)
    except ValueError:
        raise ApiProblem(400, 400, f"Invalid query parameter {name}: {text[:64]!r} is not "
                                   "an integer") from None


def page(request: Request, items: list[Any]) -> list[Any]:
    """``items`` from ``offset``, at most ``limit`` of them (negative: all)."""
    offset = max(0, integer(request, "offset", 0))
    limit = integer(request, "limit", -1)
    return items[offset:] if limit < 0 else items[offset:offset + limit]


def output_format(request: Request) -> str | None:
    fmt = request.query_params.get("format")
    return fmt.strip().lower() if fmt else None


def schema_id(text: str) -> int:
    """An ``{id}`` of the path: not a number is no route (404 / 404), one out of range
    no schema (404 / 40403)."""
    try:
        number = int(text, 10)
    except ValueError:
        raise ApiProblem(404, 404, "HTTP 404 Not Found") from None
    if not 1 <= number <= MAX_ID:
        raise SchemaNotFoundError(f"Schema {text[:64]} not found")
    return number


# --- bodies -------------------------------------------------------------------------------


async def json_body(request: Request) -> dict[str, Any]:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media and media not in ACCEPTED_MEDIA:
        raise ApiProblem(415, 415, "HTTP 415 Unsupported Media Type")
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ApiProblem(413, 413, f"Request body of {len(raw)} bytes exceeds {MAX_BODY_BYTES}")
    if not raw.strip():
        raise ApiProblem(400, 400, "The request has no body")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiProblem(400, 400, f"Malformed JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ApiProblem(400, 400, "The request body is not a JSON object")
    return doc


def schema_input(doc: dict[str, Any]) -> SchemaInput:
    """The schema of a register, lookup or compatibility body."""
    schema = doc.get("schema")
    if schema is None or schema == "":
        raise InvalidSchemaError("Empty schema")
    if not isinstance(schema, str):
        raise InvalidSchemaError("schema: a schema is given as a string")
    schema_type = doc.get("schemaType")
    if schema_type is None:
        schema_type = AVRO
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise InvalidSchemaError(f"Invalid schema type {str(schema_type)[:64]}: valid types "
                                 f"are {', '.join(SCHEMA_TYPES)}")
    refs = doc.get("references")
    if refs is None:
        refs = []
    if not isinstance(refs, list):
        raise InvalidSchemaError("references: a list of {name, subject, version}")
    out = []
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or \
                not isinstance(ref.get("subject"), str):
            raise InvalidSchemaError(f"references[{i}]: a reference has a name and a subject "
                                     "(strings) and a version")
        version = ref.get("version")
        if isinstance(version, bool) or not isinstance(version, (int, str)):
            raise InvalidSchemaError(f"references[{i}].version: a version number or latest")
        try:
            number = parse_version(version)
        except Exception:
            raise InvalidSchemaError(f"references[{i}].version: {version!r} is not a valid "
                                     "version") from None
        out.append(Reference(ref["name"], ref["subject"], number))
    return SchemaInput(schema, schema_type.upper(), tuple(out))


def optional_int(doc: dict[str, Any], name: str) -> int | None:
    """IMPORT mode's ``id`` or ``version`` of a register body (0 or less: not given)."""
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if name == "version":
            raise invalid_version(value)
        raise InvalidSchemaError(f"{name}: an integer")
    return value if value > 0 else None


def level_of(doc: dict[str, Any]) -> str:
    level = doc.get("compatibility", doc.get("compatibilityLevel"))
    if not isinstance(level, str):
        raise InvalidCompatibilityLevelError(
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive")
    return level


def mode_of(doc: dict[str, Any]) -> str:
    mode = doc.get("mode")
    if not isinstance(mode, str):
        raise InvalidModeError(
            "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT")
    return mode
