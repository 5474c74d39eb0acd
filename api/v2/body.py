"""Reading v2 JSON request bodies: raw bytes, Content-Type check, TypeAdapter validation.

Status codes follow Confluent (rest-api-reference §1.5): malformed JSON, a wrong JSON
type or an unknown field is 400 / 400; a missing or empty required value is 422 / 422;
a body with a non-JSON Content-Type is 415 / 415.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from api.content_types import check_body_type
from api.errors import ApiError, ErrorCode, validation_api_error

T = TypeVar("T")


def empty_body_error() -> ApiError:
    return ApiError(422, ErrorCode.UNPROCESSABLE_ENTITY, "Request body may not be empty")


def parse(adapter: TypeAdapter[T], body: bytes) -> T:
    """Validate ``body`` (JSON bytes) or raise the matching ApiError."""
    try:
        return adapter.validate_json(body)
    except ValidationError as exc:
        raise validation_api_error(exc) from None


async def read_json(request: Request, adapter: TypeAdapter[T]) -> T | None:
    """The validated body, or None when the body is empty (the caller decides whether
    that is allowed)."""
    body = await request.body()
    if not body.strip():
        return None
    check_body_type(request.headers.get("content-type"))
    return parse(adapter, body)


async def require_json(request: Request, adapter: TypeAdapter[T]) -> T:
    """Like ``read_json`` but an empty body is 422."""
    value = await read_json(request, adapter)
    if value is None:
        raise empty_body_error()
    return value


def query(request: Request, adapter: TypeAdapter[T], empty: T | None = None) -> T:
    """The query string validated as FastAPI validates declared ``Query`` parameters:
    the same pydantic rules (lax, the last value of a repeated name) and on failure the
    same ``RequestValidationError`` (locations ``("query", name)``), so the same 400
    answer. Hot routes use this instead of declared parameters, which cost FastAPI
    tens of microseconds each per request; they document the parameters through
    ``openapi_extra`` instead. ``empty`` (when given) is the answer for an empty query
    string."""
    if empty is not None and not request.scope.get("query_string"):
        return empty
    try:
        return adapter.validate_python(dict(request.query_params))
    except ValidationError as exc:
        errors: list[dict[str, Any]] = [
            {**e, "loc": ("query", *e["loc"])} for e in exc.errors(include_url=False)
        ]
        raise RequestValidationError(errors) from None


def param_doc(name: str, where: str, description: str | None, schema: dict[str, Any],
               *, required: bool = False) -> dict[str, Any]:
    """One OpenAPI parameter as FastAPI writes it (for routes that validate their query
    with ``query`` and document it through ``openapi_extra``)."""
    doc: dict[str, Any] = {"in": where, "name": name, "required": required}
    if description is not None:
        doc["description"] = description
        schema = {**schema, "description": description}
    doc["schema"] = schema
    return doc


def optional_int(title: str, **limits: int) -> dict[str, Any]:
    """FastAPI's schema of an ``int | None`` parameter."""
    return {"anyOf": [{"type": "integer", **limits}, {"type": "null"}], "title": title}
