"""Reading v2 JSON request bodies: raw bytes, Content-Type check, TypeAdapter validation.

Status codes follow Confluent (rest-api-reference §1.5): malformed JSON, a wrong JSON
type or an unknown field is 400 / 400; a missing or empty required value is 422 / 422;
a body with a non-JSON Content-Type is 415 / 415; JSON nested deeper than
``MAX_JSON_DEPTH`` (64) levels is 400 / 400, before it is validated.
"""

from __future__ import annotations

from typing import TypeVar

from fastapi import Request
from pydantic import TypeAdapter, ValidationError

from api.content_types import check_body_type
from api.errors import ApiError, ErrorCode, validation_api_error
from api.input_limits import check_json_depth

T = TypeVar("T")


def empty_body_error() -> ApiError:
    return ApiError(422, ErrorCode.UNPROCESSABLE_ENTITY, "Request body may not be empty")


def parse(adapter: TypeAdapter[T], body: bytes) -> T:
    """Validate ``body`` (JSON bytes) or raise the matching ApiError."""
    check_json_depth(body)
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
