"""OpenAPI helpers: routes read raw bodies for speed, so request and response shapes are
declared here (``openapi_extra`` / ``responses``) and the TypedDict schemas are merged
into ``components/schemas`` when the document is built."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import TypeAdapter

from api.errors import V2_MEDIA

if TYPE_CHECKING:
    from api.openapi_links import Link

JSON_MEDIA = "application/json"
_REF = "#/components/schemas/{model}"

_ERROR_TEXT: dict[int, tuple[str, int, str]] = {
    400: (
        "Malformed JSON, wrong field type, unknown field or bad parameter",
        400,
        "Unrecognized field: records[0].foo",
    ),
    404: (
        "Unknown topic (40401), partition (40402) or consumer instance (40403)",
        40401,
        "Topic 'orders' not found.",
    ),
    406: (
        "Accept does not match the consumer's format (40601)",
        40601,
        "The requested embedded data format does not match the deserializer for this "
        "consumer instance (format json)",
    ),
    409: (
        "Consumer instance exists (40902) or illegal consumer state (40903)",
        40902,
        "Consumer with specified consumer ID already exists in the specified consumer group.",
    ),
    413: ("Record too large (413)", 413, "Record too large."),
    415: ("Unsupported Content-Type (415)", 415, "HTTP 415 Unsupported Media Type"),
    416: (
        "franz: offset outside [log start, high watermark] (41601)",
        41601,
        "Offset 99 is out of range [0, 42] for orders-0",
    ),
    422: (
        "Body failed validation (422), invalid consumer config (42204), "
        "schema format without Schema Registry (42206)",
        422,
        "records may not be empty",
    ),
    500: ("Kafka error (50002) or retriable Kafka error (50003)", 50003, "Retriable Kafka error."),
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


def array_ok(
    item_schema: str, example: Any, *, media: Iterable[str]
) -> dict[int | str, dict[str, Any]]:
    """A 200 whose body is a JSON array of ``item_schema``."""
    content = {
        m: {"schema": {"type": "array", "items": ref(item_schema)}, "example": example}
        for m in media
    }
    return {200: {"description": "Success", "content": content}}


def records_ok(binary_example: Any, json_example: Any) -> dict[int | str, dict[str, Any]]:
    """A 200 with an array of consumed records, per embedded format."""

    def arr(name: str, example: Any) -> dict[str, Any]:
        return {"schema": {"type": "array", "items": ref(name)}, "example": example}

    return {
        200: {
            "description": "Records (possibly none)",
            "content": {
                "application/vnd.kafka.binary.v2+json": arr("BinaryRecordOut", binary_example),
                "application/vnd.kafka.json.v2+json": arr("JsonRecordOut", json_example),
                JSON_MEDIA: arr("JsonRecordOut", json_example),
            },
        }
    }


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Documented error responses, all with the Confluent error body."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        out.update(error_doc(status, *_ERROR_TEXT[status]))
    return out


def error_doc(status: int, text: str, code: int, message: str) -> dict[int | str, dict[str, Any]]:
    """One documented error response with the Confluent error body, for a route whose
    wording differs from ``errors``' shared table."""
    example = {"error_code": code, "message": message}
    return {status: {"description": text, "content": {
        V2_MEDIA: {"schema": ref("ErrorBody"), "example": example}}}}


def install_openapi(
    app: FastAPI, schemas: Mapping[str, Any], links: Iterable[Link] = ()
) -> None:
    """Build the document once, with ``schemas`` (TypedDicts) in components and
    ``links`` (``api.openapi_links``) in the responses they start from."""

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
        _restore_examples(doc, app.routes)
        _tidy(doc)
        add_links(doc, links)
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]


def _operation(doc: dict[str, Any], ref: str) -> dict[str, Any]:
    method, _, path = ref.partition(" ")
    op = doc.get("paths", {}).get(path, {}).get(method.lower())
    if op is None:
        raise ValueError(f"OpenAPI link: no operation {ref!r} in the document")
    return op  # type: ignore[no-any-return]


def add_links(doc: dict[str, Any], links: Iterable[Link]) -> None:
    """Each link into its source response's ``links``, naming the target by
    ``operationId``; a link whose source, status or target is not documented is an
    error (a renamed route must not leave a dangling link)."""
    for link in links:
        source = _operation(doc, link.source)
        target = _operation(doc, link.target)
        response = source.get("responses", {}).get(str(link.status))
        if response is None:
            raise ValueError(f"OpenAPI link {link.name}: {link.source} documents no {link.status}")
        entry: dict[str, Any] = {"operationId": target["operationId"]}
        if link.parameters:
            entry["parameters"] = dict(link.parameters)
        if link.description:
            entry["description"] = link.description
        named = response.setdefault("links", {})
        if link.name in named:
            raise ValueError(f"OpenAPI link {link.name}: twice on {link.source} {link.status}")
        named[link.name] = entry


def _merge(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    for key, value in src.items():
        if isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            _merge(dst[key], value)
        else:
            dst[key] = value


def _api_routes(routes: Iterable[Any]) -> list[Any]:
    """The API routes, also inside included routers (FastAPI >= 0.120 keeps those as
    lazily resolved branches; ``iter_route_contexts`` flattens them)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - older FastAPI flattens on include
        return [r for r in routes if isinstance(r, APIRoute)]
    return [c for c in iter_route_contexts(list(routes)) if isinstance(c.original_route, APIRoute)]


def _restore_examples(doc: dict[str, Any], routes: Iterable[Any]) -> None:
    """FastAPI drops ``None`` values (also inside examples) when it builds the
    document; merge each route's declared ``responses`` and ``openapi_extra`` back."""
    for route in _api_routes(routes):
        if not route.include_in_schema:
            continue
        for method in route.methods:
            op = doc["paths"].get(route.path_format, {}).get(method.lower())
            if op is None:
                continue
            declared = {str(k): v for k, v in route.responses.items()}
            _merge(op.setdefault("responses", {}), declared)
            if route.openapi_extra:
                _merge(op, route.openapi_extra)


def _tidy(doc: dict[str, Any]) -> None:
    """Remove what FastAPI infers for hand-parsed routes: a ``type`` beside a ``$ref``,
    an empty ``application/json`` entry next to the declared media types, and the
    pydantic 422 (franz answers bad parameters with Confluent's error body)."""
    for path_item in doc.get("paths", {}).values():
        for op in path_item.values():
            responses = op.get("responses", {})
            if "HTTPValidationError" in str(responses.get("422", "")):
                del responses["422"]
            for resp in responses.values():
                content = resp.get("content") or {}
                for media in (JSON_MEDIA, V2_MEDIA):
                    if len(content) > 1 and content.get(media, {}).get("schema") in (
                        {},
                        {"type": "string"},
                    ):
                        del content[media]
                for entry in content.values():
                    schema = entry.get("schema", {})
                    if "$ref" in schema:
                        schema.pop("type", None)
    schemas = doc.get("components", {}).get("schemas", {})
    if "HTTPValidationError" not in str(doc.get("paths")):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
