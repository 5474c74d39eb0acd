"""OpenAPI helpers: routes read raw bodies for speed, so request and response shapes are
declared here (``openapi_extra`` / ``responses``) and the TypedDict schemas are merged
into ``components/schemas`` when the document is built."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import TypeAdapter

from api.errors import V2_MEDIA

JSON_MEDIA = "application/json"
_REF = "#/components/schemas/{model}"

_ERROR_TEXT: dict[int, tuple[str, int, str]] = {
    400: ("Malformed JSON, wrong field type, unknown field or bad parameter", 400,
          "Unrecognized field: records[0].foo"),
    404: ("Unknown topic (40401), partition (40402) or consumer instance (40403)", 40401,
          "Topic 'orders' not found."),
    406: ("Accept does not match the consumer's format (40601)", 40601,
          "The requested embedded data format does not match the deserializer for this "
          "consumer instance (format json)"),
    409: ("Consumer instance exists (40902) or illegal consumer state (40903)", 40902,
          "Consumer with specified consumer ID already exists in the specified consumer group."),
    413: ("Record too large (413)", 413, "Record too large."),
    415: ("Unsupported Content-Type (415)", 415, "HTTP 415 Unsupported Media Type"),
    416: ("franz: offset outside [log start, high watermark] (41601)", 41601,
          "Offset 99 is out of range [0, 42] for orders-0"),
    422: ("Body failed validation (422), invalid consumer config (42204), "
          "schema format without Schema Registry (42206)", 422, "records may not be empty"),
    500: ("Kafka error (50002) or retriable Kafka error (50003)", 50003,
          "Retriable Kafka error."),
}


def ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def json_body(
    schema: str,
    example: Any,
    *,
    media: Iterable[str] = (V2_MEDIA, JSON_MEDIA),
    required: bool = True,
    description: str = "",
) -> dict[str, Any]:
    """``openapi_extra`` declaring a JSON request body read by hand in the route."""
    content = {m: {"schema": ref(schema), "example": example} for m in media}
    body: dict[str, Any] = {"required": required, "content": content}
    if description:
        body["description"] = description
    return {"requestBody": body}


def ok(
    schema: str | None,
    example: Any = None,
    *,
    status: int = 200,
    media: Iterable[str] = (V2_MEDIA,),
    description: str = "Success",
) -> dict[int | str, dict[str, Any]]:
    """A documented success response; ``schema=None`` for an empty body."""
    if schema is None:
        return {status: {"description": description}}
    content: dict[str, Any] = {}
    for m in media:
        entry: dict[str, Any] = {"schema": ref(schema)}
        if example is not None:
            entry["example"] = example
        content[m] = entry
    return {status: {"description": description, "content": content}}


def array_ok(item_schema: str, example: Any, *, media: Iterable[str]) -> dict[int | str, dict[str, Any]]:
    """A 200 whose body is a JSON array of ``item_schema``."""
    content = {
        m: {"schema": {"type": "array", "items": ref(item_schema)}, "example": example}
        for m in media
    }
    return {200: {"description": "Success", "content": content}}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Documented error responses, all with the Confluent error body."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        text, code, message = _ERROR_TEXT[status]
        out[status] = {
            "description": text,
            "content": {
                V2_MEDIA: {
                    "schema": ref("ErrorBody"),
                    "example": {"error_code": code, "message": message},
                }
            },
        }
    return out


def install_openapi(app: FastAPI, schemas: Mapping[str, Any]) -> None:
    """Build the document once, with ``schemas`` (TypedDicts) in components."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        for name, tp in schemas.items():
            schema = TypeAdapter(tp).json_schema(ref_template=_REF)
            components.update(schema.pop("$defs", {}))
            components[name] = schema
        _drop_default_json_content(doc)
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]


def _drop_default_json_content(doc: dict[str, Any]) -> None:
    """FastAPI adds an empty ``application/json`` entry for the route's default response
    class; where a route documents its own media types, that entry is noise."""
    for path_item in doc.get("paths", {}).values():
        for op in path_item.values():
            for resp in op.get("responses", {}).values():
                content = resp.get("content")
                if content and len(content) > 1 and content.get(JSON_MEDIA, {}).get("schema") == {}:
                    del content[JSON_MEDIA]

