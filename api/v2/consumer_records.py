"""v2 ``GET /consumers/{group}/instances/{instance}/records``: the long-poll read.

Accept must match the instance's format (``api.content_types.records_format``;
mismatch 406 / 40601). ``timeout`` (ms) can only shorten the instance's
``consumer.request.timeout.ms``; ``max_bytes`` caps the answer. Both <= 0 or missing
mean the instance's defaults, as in Confluent (clients send ``timeout=-1``); both are
int32 (400 / 400 otherwise). No read waits
longer than the broker's ``consumer.request.timeout.max.ms`` (default 300000), whatever
the instance or the request asks. The broker answers as soon as a record is available
(no spurious empty reads, a record larger than ``max_bytes`` still comes back).

A json-format instance that meets bytes which are not JSON returns the records before
the bad one, and moves that partition's position back to it; when the bad record comes
first the read fails with 408 / 40801 (Confluent's serialization error) naming it, and
the client may seek past it. avro, jsonschema and protobuf instances decode keys and
values with the schemas their bytes name (``api.v2.schema_records``) and treat a record
they cannot decode the same way; when the Schema Registry cannot be reached the read
fails with its error and every position goes back to where the read started.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from api.content_types import EmbeddedFormat, records_format
from api.deps import broker_of, consumers_of, render_cache_of
from api.errors import ApiError, ErrorCode
from api.hot_routes import HotQuery, hot_route
from api.input_limits import INT32_MAX, INT32_MIN
from api.openapi import errors, records_ok
from api.security.authentication import principal_name
from api.security.authorization import Need, requires
from api.v2.consumers import INSTANCE
from api.v2.embedded import (
    NotJsonError,
    Polled,
    render_binary_chunks,
    render_records,
)
from api.v2.schema_records import render_schema_records
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition

router = APIRouter(tags=["Consumer (v2)"])

BINARY_EXAMPLE = [
    {
        "topic": "orders",
        "key": "a2V5",
        "value": "Y29uZmx1ZW50",
        "partition": 1,
        "offset": 100,
        "timestamp": 1727784000000,
        "timestamp_type": "CreateTime",
        "headers": [{"key": "trace-id", "value": "MTIz"}],
    }
]
JSON_EXAMPLE = [
    {
        "topic": "orders",
        "key": "user-1",
        "value": {"clicks": 3},
        "partition": 1,
        "offset": 101,
        "timestamp": 1727784000000,
        "timestamp_type": "CreateTime",
        "headers": [],
    }
]

_TIMEOUT_DOC = ("max wait in ms, int32, <= 0: the default (only shortens the instance's "
                "timeout; never more than the broker's consumer.request.timeout.max.ms)")
_MAX_BYTES_DOC = "cap on key+value bytes returned, int32 (<= 0: the default)"


class RecordsQuery(TypedDict, total=False):
    """The query parameters of a consumer read (a hot route: ``api.hot_routes``)."""

    timeout: Annotated[int | None, Field(ge=INT32_MIN, le=INT32_MAX, description=_TIMEOUT_DOC)]
    max_bytes: Annotated[int | None, Field(ge=INT32_MIN, le=INT32_MAX,
                                           description=_MAX_BYTES_DOC)]


RECORDS_QUERY = HotQuery(RecordsQuery)


def instance_format(info: Any) -> EmbeddedFormat:
    raw = info.format
    return EmbeddedFormat(str(getattr(raw, "value", raw)).lower())


def not_json_error(exc: NotJsonError) -> ApiError:
    return ApiError(
        408, ErrorCode.SERIALIZATION_ERROR, f"Error deserializing key/value as JSON: {exc}"
    )


def render_until_bad_json(
    fmt: EmbeddedFormat, items: Sequence[Polled]
) -> tuple[list[dict[str, Any]], dict[TopicPartition, int], NotJsonError | None]:
    """(rendered records, {partition: offset of its first non-JSON record}, first error).

    Records of a partition at or after its bad record are dropped; other partitions
    are kept."""
    bad: dict[TopicPartition, int] = {}
    first: NotJsonError | None = None
    rows = items
    while True:
        try:
            return render_records(fmt, rows), bad, first
        except NotJsonError as exc:
            first = first or exc
            tp = TopicPartition(exc.topic, exc.partition)
            bad[tp] = exc.offset
            rows = [x for x in rows if not (x[0] == tp and x[1].offset >= exc.offset)]


def _positive(value: int | None) -> int | None:
    return value if value is not None and value > 0 else None


@hot_route(
    router, "GET", INSTANCE + "/records", query=RECORDS_QUERY,
    operation_id="consumeRecords",
    summary="Read records (long poll)",
    description="Answers as soon as records are available, else after `timeout` (at most "
    "the instance's `consumer.request.timeout.ms`, and never more than the broker's "
    "`consumer.request.timeout.max.ms`, default 300000 ms). `timeout` and `max_bytes` are "
    "int32 (400 otherwise); <= 0 means the default. "
    "Records also carry `timestamp`, `timestamp_type` and `headers` (franz extensions).",
    responses={**records_ok(BINARY_EXAMPLE, JSON_EXAMPLE), **errors(400, 404, 406, 500)},
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it; READ on the topics read, checked by the coordinator on every read")
async def read_records(group: str, instance: str, request: Request) -> Response:
    q = RECORDS_QUERY.parse(request)
    timeout, max_bytes = q.get("timeout"), q.get("max_bytes")
    consumers = consumers_of(request)
    owner = principal_name(request)
    info = await consumers.get(group, instance, principal=owner)
    fmt, media = records_format(request.headers.get("accept"), instance_format(info))
    binary = fmt is EmbeddedFormat.BINARY
    polled = await consumers.poll(
        group, instance, timeout_ms=_positive(timeout), max_bytes=_positive(max_bytes),
        principal=owner)
    if binary:  # per-batch renderings, made once per fetched batch, then sliced
        return Response(render_binary_chunks(render_cache_of(request), polled.chunks),
                        media_type=media)
    if fmt is EmbeddedFormat.JSON:
        rows, bad, first = render_until_bad_json(fmt, polled)
        error = None if first is None else not_json_error(first)
    else:
        try:
            rendered = await render_schema_records(broker_of(request).schemas.resolver, fmt,
                                                   fmt, polled)
        except Exception:  # the registry unavailable: nothing was read
            await consumers.seek(group, instance, read_from(polled), principal=owner)
            raise
        rows, bad = rendered.rows, rendered.bad
        error = None if rendered.first is None else rendered.first.error()
    if bad:
        await consumers.seek(group, instance, bad, principal=owner)
        if not rows and error is not None:
            raise error
    return Response(orjson.dumps(rows), media_type=media)


def read_from(polled: Sequence[Polled]) -> dict[TopicPartition, int]:
    """Each partition's first offset in ``polled``: where the read started."""
    starts: dict[TopicPartition, int] = {}
    for tp, r in polled:
        starts.setdefault(TopicPartition(*tp), r.offset)
    return starts
