"""v3 batch produce: ``POST /v3/clusters/{c}/topics/{t}/records:batch`` (Confluent's
ProduceBatchAction; rest-api-reference §3.5).

    {"entries": [{"id": "1", "value": {"type": "STRING", "data": "first"}},
                 {"id": "2", "partition_id": 0, "key": ..., "headers": ..., "timestamp": ...}]}

    207 {"successes": [{"id": "1", "cluster_id", "topic_name", "partition_id", "offset",
                        "timestamp", "key"?: {"type", "size"}, "value"?: {...}}],
         "failures":  [{"id": "2", "error_code": 40402, "message": "..."}]}

Each entry is a v3 produce record plus an ``id`` and is checked and written as one
(``api.v3.produce``: ``parse_record``, ``Batch``, ``produce_batch``; keys and values
with Schema Registry schemas too, each schema the batch names resolved once): a bad
entry fails alone, in ``failures``, with the error code its record would get from
``POST .../records`` (a schema problem: 400, 42203, 42205, 42207); the others are
written in one call (acks=all). Both lists keep the request's order.

The whole request fails, nothing written, as Confluent's does: 422 / 42208 when an id
is missing, not a string or not 1 to 80 of ``[0-9a-zA-Z-_]``, when two entries share
an id, when ``entries`` is empty, or when it has more than
``api.v3.produce.batch.maximum.entries`` (default 10, 1 to 50) entries; 400 / 400 for
malformed JSON (nested deeper than 64 levels included), a body that is not
``{"entries": [...]}`` or an unknown top-level field; 415 another content type;
422 / 42206 an empty body; 413 a body over ``max.request.size`` (``api.request_limits``);
404 an unknown cluster, or an unknown topic when topics are not auto-created.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.deps import broker_of
from api.errors import V3_MEDIA, ApiError, ErrorCode
from api.idempotency import OPENAPI_PARAMETER as IDEMPOTENCY_PARAMETER
from api.idempotency import idempotent_request
from api.input_limits import check_json_depth
from api.security.authorization import Need, may_create_topic, requires
from api.v3.common import (
    V3Response,
    body_doc,
    check_cluster,
    empty_body_error,
    errors,
    require_json_type,
)
from api.v3.models import BATCH_ENTRIES_CEILING, BATCH_ID_PATTERN, ProduceBatchResponse
from api.v3.produce import ACKS_ALL, Batch, produce_batch
from core.broker.security.acl import Operation, ResourceType

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Records (v3)"],
    dependencies=[Depends(check_cluster)],
    default_response_class=V3Response,
)

MAX_ENTRIES_PROPERTY = "api.v3.produce.batch.maximum.entries"
_ID = re.compile(BATCH_ID_PATTERN)
_INVALID_ID = "Batch entry identifiers must be strings of 1 to 80 of [0-9a-zA-Z-_]."
_NOT_DISTINCT = "Batch entry identifiers are not distinct."
_EMPTY = "Batch is empty."

_EXAMPLE = {"entries": [
    {"id": "1", "value": {"type": "STRING", "data": "My first message"}},
    {"id": "2", "partition_id": 0, "key": {"type": "STRING", "data": "user-1"},
     "value": {"type": "JSON", "data": {"clicks": 3}}},
]}
_ANSWER_EXAMPLE = {
    "successes": [{"id": "1", "cluster_id": "fRaNz-cluster-id", "topic_name": "orders",
                   "partition_id": 1, "offset": 7, "timestamp": "2024-05-01T12:00:00.123Z",
                   "value": {"type": "STRING", "size": 16}}],
    "failures": [{"id": "2", "error_code": 40402,
                  "message": "Partition 0 of topic 'orders' not found."}],
}


def _bad_batch(message: str) -> ApiError:
    return ApiError(422, ErrorCode.BAD_BATCH, message)


def _bad(message: str) -> ApiError:
    return ApiError(400, ErrorCode.BAD_REQUEST, "Bad Request: " + message)


def _entries(body: bytes) -> list[Any]:
    """The ``entries`` of a JSON body, not yet checked one by one."""
    if not body.strip():
        raise empty_body_error()
    check_json_depth(body)
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, ErrorCode.BAD_REQUEST, f"Malformed JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _bad("the body is not an object with entries.")
    extra = doc.keys() - {"entries"}
    if extra:
        raise _bad(f"Unrecognized field: {min(extra)}")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise _bad("entries is not a list.")
    return entries


def checked_entries(body: bytes, max_entries: int) -> tuple[list[str], list[dict[str, Any]]]:
    """(ids, records without their ids) of a batch body; ApiError when the whole
    request fails (Confluent's order: ids, distinct ids, empty, too many)."""
    entries = _entries(body)
    ids: list[str] = []
    for entry in entries:
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(entry_id, str) or not _ID.match(entry_id):
            raise _bad_batch(_INVALID_ID)
        ids.append(entry_id)
    if len(set(ids)) != len(ids):
        raise _bad_batch(_NOT_DISTINCT)
    if not entries:
        raise _bad_batch(_EMPTY)
    if len(entries) > max_entries:
        raise _bad_batch(f"Too many entries in batch: {len(entries)}; at most {max_entries} "
                         f"({MAX_ENTRIES_PROPERTY}).")
    records = [{k: v for k, v in entry.items() if k != "id"} for entry in entries]
    return ids, records


def _answer(ids: list[str], reports: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    successes: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for entry_id, report in zip(ids, reports, strict=True):
        code = report.pop("error_code")
        if code == 200:
            successes.append({"id": entry_id, **report})
        else:
            failures.append({"id": entry_id, "error_code": code, "message": report["message"]})
    return {"successes": successes, "failures": failures}


@router.post(
    "/topics/{topic_name}/records:batch",
    status_code=207,
    operation_id="produceRecordsBatch",
    summary="Produce a batch of records",
    description="Up to `api.v3.produce.batch.maximum.entries` (default 10, at most "
    f"{BATCH_ENTRIES_CEILING}) records, each with an `id` (1 to 80 of `[0-9a-zA-Z-_]`, "
    "unique in the batch). HTTP 207: each entry in `successes` or `failures` (its own "
    "`error_code`), in request order; a bad entry fails alone. A bad, duplicate or "
    "missing id, an empty batch or too many entries fail the whole request with 422 / "
    "42208, nothing written. The body is at most `max.request.size` bytes; JSON nested "
    "deeper than 64 levels is 400.",
    response_model=ProduceBatchResponse,
    openapi_extra={**body_doc("ProduceBatchRequest", _EXAMPLE),
                   "parameters": [IDEMPOTENCY_PARAMETER]},
    responses={
        207: {"description": "Multi-Status: one entry per record",
              "content": {V3_MEDIA: {"example": _ANSWER_EXAMPLE}}},
        **errors(400, 404, 409, 413, 415, 422),
    },
)
@requires(Need(Operation.WRITE, ResourceType.TOPIC, "topic_name"))
async def produce_records_batch(topic_name: str, request: Request) -> Response:
    require_json_type(request)
    broker = broker_of(request)
    body = await request.body()
    ids, records = checked_entries(body, int(broker.config[MAX_ENTRIES_PROPERTY]))
    reports = await produce_batch(broker, Batch.of(topic_name, records), first=True,
                                  may_create=may_create_topic(request),
                                  idempotency=idempotent_request(request, body, acks=ACKS_ALL))
    return Response(orjson.dumps(_answer(ids, reports)), status_code=207, media_type=V3_MEDIA)
