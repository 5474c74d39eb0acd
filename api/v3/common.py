"""What every v3 route shares: the JSON response class, the cluster check, links and
CRNs, reading JSON bodies, and the documented error answers.

Resource envelopes (rest-api-reference §3.1)::

    {"kind": "KafkaTopic",
     "metadata": {"self": "<absolute URL>", "resource_name": "crn:///kafka=<c>/topic=<t>"},
     ...fields..., "partitions": {"related": "<absolute URL>"}}
    {"kind": "KafkaTopicList", "metadata": {"self": "<URL>", "next": null}, "data": [...]}

URLs are absolute: ``advertised.host`` (and the listener port) when configured, else the
scheme, host and port the request came in on. CRNs have an empty authority, as
Confluent's do by default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

import orjson
from fastapi import Depends, Path, Request
from pydantic import TypeAdapter, ValidationError
from starlette.responses import JSONResponse, Response

from api.content_types import bare_type
from api.deps import broker_of
from api.errors import V3_MEDIA, ApiError, ErrorCode, validation_api_error
from api.input_limits import check_json_depth
from api.openapi import ref

T = TypeVar("T")
PAYLOAD_ERROR = "Payload error. "


class V3Response(JSONResponse):
    """orjson-rendered ``application/json``: the default response class of v3 routes (a
    JSONResponse, so the OpenAPI document shows each route's ``response_model``)."""

    media_type = V3_MEDIA

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def v3_json(content: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(content), status_code=status, media_type=V3_MEDIA, headers=headers)


def no_content() -> Response:
    return Response(status_code=204)


def not_found(message: str) -> ApiError:
    """Confluent's plain 404 (``error_code`` 404) for an unknown resource."""
    return ApiError(404, ErrorCode.NOT_FOUND, message)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_timestamp(ms: int) -> str:
    """Epoch ms -> ``2024-05-01T12:00:00.123Z`` (Confluent's Instant, always with ms)."""
    when = _EPOCH + timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _segment(part: str | int) -> str:
    return quote(str(part), safe="")


@dataclass(frozen=True, slots=True)
class Links:
    """Absolute URLs and CRNs of one cluster's v3 resources, for one request."""

    root: str  # ".../v3"
    cluster_id: str

    @classmethod
    def of(cls, request: Request, cluster_id: str) -> Links:
        config = broker_of(request).config
        advertised = str(config["advertised.host"] or "")
        if advertised:
            root_path = request.scope.get("root_path", "")
            base = f"{request.url.scheme}://{advertised}:{config['port']}{root_path}/"
        else:
            base = str(request.base_url)
        return cls(base + "v3", cluster_id)

    def url(self, *parts: str | int) -> str:
        """The URL of ``/v3/clusters/<cluster>/<parts...>`` (each part path-quoted)."""
        tail = "".join("/" + _segment(p) for p in parts)
        return f"{self.root}/clusters/{_segment(self.cluster_id)}{tail}"

    def rel(self, *parts: str | int) -> dict[str, str]:
        return {"related": self.url(*parts)}

    def crn(self, *pairs: tuple[str, Any]) -> str:
        """``crn:///kafka=<cluster>/<type>=<id>/...``; a None id leaves ``<type>`` alone."""
        out = f"crn:///kafka={self.cluster_id}"
        for kind, ident in pairs:
            out += f"/{kind}" if ident is None else f"/{kind}={ident}"
        return out

    def resource(
        self, kind: str, parts: Iterable[str | int], crn: Iterable[tuple[str, Any]]
    ) -> dict[str, Any]:
        """The ``kind`` and ``metadata`` head of a single resource."""
        return {
            "kind": kind,
            "metadata": {"self": self.url(*parts), "resource_name": self.crn(*crn)},
        }

    def collection(self, kind: str, parts: Iterable[str | int], data: list[Any]) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"self": self.url(*parts), "next": None}, "data": data}


ClusterIdParam = Annotated[str, Path(description="The cluster id (`GET /v3/clusters`)")]


def check_cluster(request: Request, cluster_id: ClusterIdParam) -> str:
    """Router dependency: 404 / 404 unless ``cluster_id`` is this broker's cluster."""
    if cluster_id != broker_of(request).cluster_id:
        raise not_found(f"Cluster {cluster_id} cannot be found.")
    return cluster_id


def cluster_links(request: Request, cluster_id: ClusterIdParam) -> Links:
    """``check_cluster``, then the links of the cluster's resources for this request."""
    return Links.of(request, check_cluster(request, cluster_id))


ClusterLinks = Annotated[Links, Depends(cluster_links)]


# --- request bodies ------------------------------------------------------------------------


def require_json_type(request: Request) -> None:
    """v3 bodies are ``application/json`` (parameters such as charset allowed); else 415."""
    content_type = request.headers.get("content-type")
    if not content_type or bare_type(content_type) != V3_MEDIA:
        raise ApiError(415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, "HTTP 415 Unsupported Media Type")


def empty_body_error() -> ApiError:
    return ApiError(
        422, ErrorCode.PAYLOAD_ERROR, PAYLOAD_ERROR + "Request body is empty. Data is required."
    )


def _v3_validation_error(exc: ValidationError) -> ApiError:
    """Jackson-like failures stay 400 / 400; a missing or out-of-range value is
    Confluent v3's payload error, 422 / 42206."""
    err = validation_api_error(exc)
    if err.status == 422:
        return ApiError(422, ErrorCode.PAYLOAD_ERROR, PAYLOAD_ERROR + err.message)
    return err


async def read_body(request: Request, adapter: TypeAdapter[T]) -> T:
    """The validated JSON body: 415 for another content type, 422 / 42206 when empty,
    400 / 400 for malformed JSON (nested deeper than 64 levels included), a wrong type
    or an unknown field."""
    require_json_type(request)
    body = await request.body()
    if not body.strip():
        raise empty_body_error()
    check_json_depth(body)
    try:
        return adapter.validate_json(body)
    except ValidationError as exc:
        raise _v3_validation_error(exc) from None


# --- OpenAPI -------------------------------------------------------------------------------

_ERRORS: dict[int, tuple[str, int, str]] = {
    400: (
        "Malformed JSON, wrong field type or unknown field (400); Kafka refused the "
        "request (40002)",
        40002,
        "Topic 'orders' already exists.",
    ),
    404: (
        "Unknown cluster, broker, group, consumer or config (404); unknown topic or "
        "partition (40403)",
        40403,
        "This server does not host this topic-partition.",
    ),
    409: ("A request with the same Idempotency-Key is in progress (409); nothing is written",
          409, "A request with this Idempotency-Key is in progress; retry once it answered"),
    413: ("Request too large (413)", 413, "Record too large."),
    415: ("Content-Type is not application/json (415)", 415, "HTTP 415 Unsupported Media Type"),
    416: (
        "franz: offset outside [log start, high watermark] (41601)",
        41601,
        "Offset 99 is out of range [0, 42] for orders-0",
    ),
    422: (
        "Empty body, missing or invalid value, invalid topic name (42206)",
        42206,
        "Payload error. Request body is empty. Data is required.",
    ),
    500: ("Kafka error (50002) or retriable Kafka error (50003)", 50003, "Retriable Kafka error."),
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Documented v3 error answers, all ``{"error_code", "message"}`` in application/json."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        text, code, message = _ERRORS[status]
        example = {"error_code": code, "message": message}
        out[status] = {
            "description": text,
            "content": {V3_MEDIA: {"schema": ref("ErrorBody"), "example": example}},
        }
    return out


def body_doc(schema: str, example: Any, *, description: str = "",
             required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` for a JSON body read by hand."""
    body: dict[str, Any] = {
        "required": required,
        "content": {V3_MEDIA: {"schema": ref(schema), "example": example}},
    }
    if description:
        body["description"] = description
    return {"requestBody": body}
