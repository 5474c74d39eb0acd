"""How the registry's routes answer: JSON in the registry's media type (plain
``application/json`` when the client accepts only that), versions and schemas in
Confluent's shape (``schemaType`` and ``references`` left out when AVRO and empty)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import Request
from starlette.responses import Response

from api.openapi import JSON_MEDIA
from api.schema_registry.errors import MEDIA
from core.broker.schemas.model import (
    AVRO,
    CompatibilityResult,
    Reference,
    SchemaVersion,
    StoredSchema,
)


def media(request: Request) -> str:
    accept = request.headers.get("accept", "")
    if accept and JSON_MEDIA in accept and "schemaregistry" not in accept and \
            "*/*" not in accept:
        return JSON_MEDIA
    return MEDIA


def json_answer(request: Request, doc: Any) -> Response:
    return Response(orjson.dumps(doc), media_type=media(request))


def text_answer(request: Request, text: str) -> Response:
    """A schema's text alone, as stored (Confluent sends it in the JSON media type)."""
    return Response(text, media_type=media(request))


def references(refs: Sequence[Reference]) -> list[dict[str, Any]]:
    return [{"name": r.name, "subject": r.subject, "version": r.version} for r in refs]


def version_doc(v: SchemaVersion) -> dict[str, Any]:
    doc: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id}
    if v.schema_type != AVRO:
        doc["schemaType"] = v.schema_type
    if v.references:
        doc["references"] = references(v.references)
    doc["schema"] = v.schema
    return doc


def schema_doc(s: StoredSchema) -> dict[str, Any]:
    doc: dict[str, Any] = {"schema": s.schema}
    if s.schema_type != AVRO:
        doc["schemaType"] = s.schema_type
    if s.references:
        doc["references"] = references(s.references)
    return doc


def compatibility_doc(result: CompatibilityResult, *, verbose: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"is_compatible": result.is_compatible}
    if verbose:
        doc["messages"] = list(result.messages)
    return doc
