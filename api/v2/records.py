"""franz extension: the stateless range read, for tools and Spark.

``GET /topics/{topic}/partitions/{partition}/records?offset=&max_bytes=&timeout=&count=``

Records with offset >= ``offset`` below the high watermark, in the same shape as a
consumer instance's ``GET .../records`` (binary unless Accept asks for json, avro,
jsonschema or protobuf). No consumer, no group, nothing committed.

- ``offset`` (required, 0..2^63-2); outside [log start offset, high watermark]: 416 / 41601.
- ``max_bytes``: cap on the answer (1..2^31-1; default 1 MiB, Kafka's
  ``max.partition.fetch.bytes``; ceiling ``consumer.request.max.bytes``); the first record
  comes back even when it is larger, so a reader always progresses.
- ``timeout``: ms to wait when no record is available yet (default 0, at most the
  broker's ``consumer.request.timeout.max.ms``, default 300000); the answer comes as
  soon as one arrives.
- ``count``: at most this many records (1..2^31-1).
- ``key_format``: the keys' embedded format when it is not the values' (the Accept's):
  ``binary``, ``json``, ``avro``, ``jsonschema`` or ``protobuf``; e.g. plain string
  keys as base64 beside avro values (``key_format=binary``, Accept avro).

A parameter outside its range is 400 / 400. Keys or values in a schema format are
decoded as a consumer instance of that format decodes them (``api.v2.schema_records``):
the answer stops before a record that cannot be decoded (``X-Franz-Next-Offset`` is its
offset); when it is the first, 408 / 40801 names it.

Response headers: ``X-Franz-Next-Offset`` (the offset to ask for next),
``X-Franz-High-Watermark``, ``X-Franz-Log-Start-Offset``. Unknown topic 404 / 40401,
unknown partition 404 / 40402, immediately.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Required

import orjson
from fastapi import APIRouter, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from api.content_types import (
    SCHEMA_TYPES,
    EmbeddedFormat,
    accept_ranges,
    media_of,
    parse_media,
    range_read_format,
)
from api.deps import broker_of, render_cache_of
from api.errors import ApiError
from api.hot_routes import HotQuery, hot_route
from api.input_limits import INT32_MAX, MAX_OFFSET, check_timeout_param
from api.openapi import errors, records_ok
from api.render_cache import RenderCache
from api.security.authorization import Need, requires
from api.v2.consumer_records import (
    BINARY_EXAMPLE,
    JSON_EXAMPLE,
    not_json_error,
    render_until_bad_json,
)
from api.v2.embedded import binary_range_text
from api.v2.schema_records import render_schema_records
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition

if TYPE_CHECKING:
    from core.broker.broker import Broker

router = APIRouter(tags=["Partition (v2)"])

DEFAULT_MAX_BYTES = 1024 * 1024
_HEADERS_DOC = {
    "X-Franz-Next-Offset": {"description": "offset to read next", "schema": {"type": "integer"}},
    "X-Franz-High-Watermark": {"description": "high watermark", "schema": {"type": "integer"}},
    "X-Franz-Log-Start-Offset": {"description": "log start offset", "schema": {"type": "integer"}},
}


def _responses() -> dict[int | str, dict[str, object]]:
    out: dict[int | str, dict[str, object]] = {
        **records_ok(BINARY_EXAMPLE, JSON_EXAMPLE),
        **errors(400, 404, 406, 416),
    }
    out[200]["headers"] = _HEADERS_DOC
    return out


class RangeQuery(TypedDict, total=False):
    """The query parameters of the range read (a hot route: ``api.hot_routes``)."""

    offset: Required[Annotated[int, Field(ge=0, le=MAX_OFFSET,
                                          description="first offset to return")]]
    max_bytes: Annotated[int | None, Field(ge=1, le=INT32_MAX,
                                           description="cap on bytes returned")]
    timeout: Annotated[int, Field(ge=0, le=INT32_MAX,
                                  description="max wait, ms; at most the broker's "
                                  "consumer.request.timeout.max.ms (default 300000)",
                                  json_schema_extra={"default": 0})]
    count: Annotated[int | None, Field(ge=1, le=INT32_MAX,
                                       description="at most this many records")]
    key_format: Annotated[Literal["binary", "json", "avro", "jsonschema", "protobuf"] | None,
                          Field(description="embedded format of the keys (default: the "
                                "values', from Accept)")]


RANGE_QUERY = HotQuery(RangeQuery)


def _range_format(accept: str | None) -> tuple[EmbeddedFormat, str]:
    """``range_read_format``; a schema format too, when that refuses an Accept naming
    one (its preference order: the first schema format named)."""
    try:
        return range_read_format(accept)
    except ApiError:
        for mt in accept_ranges(accept or ""):
            media = parse_media(mt)
            if media is not None and media.format in SCHEMA_TYPES:
                return media.format, media_of(media.format)
        raise


@hot_route(
    router, "GET", "/topics/{topic}/partitions/{partition}/records", query=RANGE_QUERY,
    operation_id="readPartitionRecords",
    summary="Read a range of a partition without a consumer (franz)",
    description="Waits up to `timeout` ms for the first record; `timeout` may not exceed "
    "the broker's `consumer.request.timeout.max.ms` (default 300000; 400 above it).",
    responses=_responses(),
)
@requires(Need(Operation.READ, ResourceType.TOPIC, "topic"))
async def read_range(topic: str, partition: int, request: Request) -> Response:
    q = RANGE_QUERY.parse(request)
    offset, max_bytes = q["offset"], q.get("max_bytes")
    timeout, count = q.get("timeout", 0), q.get("count")
    fmt, media = _range_format(request.headers.get("accept"))
    key_format = EmbeddedFormat(q.get("key_format") or fmt)
    broker = broker_of(request)
    timeout = check_timeout_param(timeout, broker.config)
    cap = int(broker.config["consumer.request.max.bytes"])
    if fmt is EmbeddedFormat.BINARY and key_format is fmt:
        return await _read_binary(
            broker, render_cache_of(request), topic, partition, offset, media,
            max_bytes=min(max_bytes or DEFAULT_MAX_BYTES, cap), timeout=timeout, count=count,
        )
    result = await broker.fetch(
        topic,
        partition,
        offset,
        max_bytes=min(max_bytes or DEFAULT_MAX_BYTES, cap),
        max_wait_ms=timeout,
        max_records=count,
    )
    records = result.records if count is None else result.records[:count]
    tp = TopicPartition(topic, partition)
    items = [(tp, r) for r in records]
    if fmt is EmbeddedFormat.JSON and key_format is fmt:
        rows, _bad, first = render_until_bad_json(fmt, items)
        error = None if first is None else not_json_error(first)
    else:
        rendered = await render_schema_records(broker.schemas.resolver, key_format, fmt, items)
        rows = rendered.rows
        error = None if rendered.first is None else rendered.first.error()
    if not rows and error is not None:
        raise error
    next_offset = rows[-1]["offset"] + 1 if rows else result.next_offset
    return Response(
        orjson.dumps(rows),
        media_type=media,
        headers=_headers(next_offset, result.high_watermark, result.log_start_offset),
    )


def _headers(next_offset: int, high_watermark: int, log_start_offset: int) -> dict[str, str]:
    return {
        "X-Franz-Next-Offset": str(next_offset),
        "X-Franz-High-Watermark": str(high_watermark),
        "X-Franz-Log-Start-Offset": str(log_start_offset),
    }


async def _read_binary(
    broker: Broker, cache: RenderCache, topic: str, partition: int, offset: int, media: str, *,
    max_bytes: int, timeout: int, count: int | None,
) -> Response:
    """The binary format from per-batch JSON renderings (each batch rendered once while
    it stays in the broker's batch cache, then sliced: ``api.render_cache``); the same
    answer as ``Broker.fetch`` + ``render_records``."""
    result = await broker.fetch(topic, partition, offset, max_bytes=max_bytes,
                                max_wait_ms=timeout, max_records=count)
    # rendered once per fetched batch (api.render_cache) and sliced, or the few records
    # asked for of a batch not rendered yet alone (``binary_range_text``)
    parts: list[bytes] = []
    left = count if count is not None else 1 << 62
    next_offset = result.next_offset
    for batch, lo, hi in result.chunks:
        hi = min(hi, lo + left)
        if hi > lo:
            parts.append(binary_range_text(cache, topic, partition, batch, lo, hi))
        left -= hi - lo
        if left <= 0:  # cut by count: the next read starts after the last record sent
            next_offset = batch.offsets[hi - 1] + 1
            break
    body = b"[" + b",".join(parts) + b"]"
    return Response(body, media_type=media, headers=_headers(
        next_offset, result.high_watermark, result.log_start_offset))
