"""franz addition: read a range of one partition through v3.

``GET /v3/clusters/{c}/topics/{t}/partitions/{p}/records``
``?offset=&max_bytes=&timeout=&count=&key_format=&value_format=``

Records with offset >= ``offset`` (default: the log start offset) below the high
watermark, as a ``KafkaRecordList``; no consumer, no group, nothing committed. When
none is there yet the call waits up to ``timeout`` ms (default 0, at most the broker's
``consumer.request.timeout.max.ms``, default 300000) and answers as soon as one arrives
(long poll). ``offset`` lies in 0..2^63-2, ``max_bytes`` and ``count`` in 1..2^31-1.

- ``max_bytes``: cap on the keys and values returned (default 1 MiB; ceiling
  ``consumer.request.max.bytes``); the first record comes back even when larger, so a
  reader always progresses.
- ``count``: at most this many records.
- ``key_format`` / ``value_format``: ``BINARY`` (default: ``data`` is standard base64),
  ``JSON`` (the bytes parsed) or ``STRING`` (UTF-8 text); bytes that are not valid JSON
  or UTF-8 come back as ``BINARY`` (the ``type`` says which). A null key or value is null.
- Each record: ``partition_id``, ``offset``, ``timestamp`` (ISO-8601 UTC),
  ``timestamp_type``, ``headers`` (``[{"name", "value": base64 | null}]``, in record
  order), ``key``, ``value``.
- ``next_offset`` is the offset to ask for next (``metadata.next`` the URL for it);
  ``high_watermark`` and ``log_start_offset`` describe the partition.

Errors: unknown topic or partition 404 / 40403; ``offset`` outside [log start, high
watermark] 416 / 41601; a bad parameter 400 / 400.
"""

from __future__ import annotations

import binascii
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from api.deps import broker_of
from api.errors import ApiError, ErrorCode
from api.input_limits import INT32_MAX, MAX_OFFSET, check_timeout_param
from api.openapi import enum_parameter
from api.security.authorization import Need, requires
from api.v3.common import (
    ClusterLinks,
    V3Response,
    cluster_links,
    errors,
    iso_timestamp,
    v3_json,
)
from api.v3.models import KafkaRecordList
from core.broker.security.acl import Operation, ResourceType
from core.storage.records import Record

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Records (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

DEFAULT_MAX_BYTES = 1024 * 1024
FORMATS = ("BINARY", "JSON", "STRING")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

_b2a = binascii.b2a_base64


def _b64(data: bytes) -> str:
    return _b2a(data, newline=False).decode("ascii")


def _format(raw: str, name: str) -> str:
    fmt = raw.upper()
    if fmt not in FORMATS:
        raise ApiError(
            400,
            ErrorCode.BAD_REQUEST,
            f"Invalid query parameter {name}: {raw!r} is not one of BINARY, JSON, STRING",
        )
    return fmt


def _typed(data: bytes | None, fmt: str) -> dict[str, Any] | None:
    """Stored bytes as ``{"type", "data"}``; BINARY when they are not ``fmt``."""
    if data is None:
        return None
    if fmt == "JSON":
        try:
            return {"type": "JSON", "data": orjson.loads(data)}
        except orjson.JSONDecodeError:
            pass
    elif fmt == "STRING":
        try:
            return {"type": "STRING", "data": data.decode()}
        except UnicodeDecodeError:
            pass
    return {"type": "BINARY", "data": _b64(data)}


def _within(records: list[Record], max_bytes: int | None) -> list[Record]:
    """The leading records whose keys and values fit ``max_bytes`` (at least one): the
    broker answers whole batches, the API trims to records."""
    if max_bytes is None:
        return records
    total = 0
    for i, r in enumerate(records):
        total += len(r.key or b"") + len(r.value or b"")
        if total > max_bytes and i > 0:
            return records[:i]
    return records


def record_data(partition: int, r: Record, key_fmt: str, value_fmt: str) -> dict[str, Any]:
    return {
        "partition_id": partition,
        "offset": r.offset,
        "timestamp": iso_timestamp(r.timestamp),
        "timestamp_type": TIMESTAMP_TYPES[r.timestamp_type & 1],
        "headers": [
            {"name": k, "value": None if v is None else _b64(v)} for k, v in r.headers or ()
        ],
        "key": _typed(r.key, key_fmt),
        "value": _typed(r.value, value_fmt),
    }


@router.get(
    "/topics/{topic_name}/partitions/{partition_id}/records",
    operation_id="listKafkaRecords",
    summary="Read records of a partition (franz; long poll)",
    description="Records from `offset` (default: the log start) below the high watermark; "
    "waits up to `timeout` ms for the first one (at most the broker's "
    "`consumer.request.timeout.max.ms`, default 300000; 400 above it).",
    response_model=KafkaRecordList,
    openapi_extra={"parameters": [
        enum_parameter(name, FORMATS, f"How to show each record's {what}: BINARY "
                       "(base64), JSON or STRING (any case); bytes that are not valid "
                       "JSON or UTF-8 come as BINARY", default="BINARY")
        for name, what in (("key_format", "key"), ("value_format", "value"))]},
    responses=errors(400, 404, 416),
)
@requires(Need(Operation.READ, ResourceType.TOPIC, "topic_name"))
async def read_records(
    topic_name: str,
    partition_id: int,
    links: ClusterLinks,
    request: Request,
    offset: Annotated[int | None, Query(ge=0, le=MAX_OFFSET,
                                        description="first offset to return")] = None,
    max_bytes: Annotated[int | None, Query(ge=1, le=INT32_MAX,
                                           description="cap on bytes returned")] = None,
    timeout: Annotated[int, Query(ge=0, le=INT32_MAX,
                                  description="max wait, ms (at most the broker's "
                                  "consumer.request.timeout.max.ms)")] = 0,
    count: Annotated[int | None, Query(ge=1, le=INT32_MAX,
                                       description="at most this many records")] = None,
    key_format: Annotated[str, Query(description="BINARY, JSON or STRING")] = "BINARY",
    value_format: Annotated[str, Query(description="BINARY, JSON or STRING")] = "BINARY",
) -> Response:
    key_fmt, value_fmt = _format(key_format, "key_format"), _format(value_format, "value_format")
    broker = broker_of(request)
    timeout = check_timeout_param(timeout, broker.config)
    if offset is None:
        offset = (await broker.partition_offsets(topic_name, partition_id)).log_start_offset
    cap = int(broker.config["consumer.request.max.bytes"])
    result = await broker.fetch(
        topic_name,
        partition_id,
        offset,
        max_bytes=min(max_bytes or DEFAULT_MAX_BYTES, cap),
        max_wait_ms=timeout,
    )
    records = _within(result.records if count is None else result.records[:count], max_bytes)
    data = [record_data(partition_id, r, key_fmt, value_fmt) for r in records]
    next_offset = records[-1].offset + 1 if records else result.next_offset
    parts = ("topics", topic_name, "partitions", partition_id, "records")
    return v3_json(
        {
            "kind": "KafkaRecordList",
            "metadata": {
                "self": f"{links.url(*parts)}?offset={offset}",
                "next": f"{links.url(*parts)}?offset={next_offset}",
            },
            "cluster_id": links.cluster_id,
            "topic_name": topic_name,
            "partition_id": partition_id,
            "next_offset": next_offset,
            "high_watermark": result.high_watermark,
            "log_start_offset": result.log_start_offset,
            "data": data,
        }
    )
