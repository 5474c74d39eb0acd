"""v2 consumer positions and offsets: seek, commit, committed (rest-api-reference §2.4).

Commit semantics are Confluent's: the client sends the offset of the last record it
processed and franz commits ``offset + 1``; reading committed offsets returns the stored
(next-to-read) value, so committing 20 reads back 21. An empty commit body commits the
instance's current positions. Commit answers 200 with ``[]``; it needs READ on the
group and on each topic it writes, the body's or the positions' (403 / 40301, nothing
committed, otherwise). ``GET .../offsets`` needs a
JSON body listing partitions; without one it is 404 / 40402 (Confluent, odd but real).

Ranges (``api.input_limits``): offsets 0..2^63-2 (a commit stores ``offset + 1``, an
int64), partitions int32, epoch-ms timestamps 0..2^63-1: 422 / 422 outside them, and an
ISO-8601 timestamp before 1970 is 400 / 400. Nothing is sought or committed then.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from api.deps import consumers_of
from api.errors import ApiError, ErrorCode
from api.input_limits import INT64_MAX
from api.openapi import errors, json_body, ok
from api.responses import check_accept, no_content, v2_json
from api.security.authentication import client_host_of, principal_name
from api.security.authorization import Need, require, requires
from api.v2.body import read_json, require_json
from api.v2.consumers import INSTANCE, topic_partitions
from api.v2.schemas import COMMIT, PARTITIONS, POSITIONS
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition

router = APIRouter(tags=["Consumer (v2)"], dependencies=[Depends(check_accept)])

_TPS_EXAMPLE = {"partitions": [{"topic": "orders", "partition": 0}]}


def timestamp_ms(raw: str | int, where: str) -> int:
    """ISO-8601 (naive means UTC) or epoch milliseconds -> epoch milliseconds (epoch ms
    outside [0, 2^63-1] is 422 / 422, a date before 1970 400 / 400)."""
    if isinstance(raw, int):
        if not 0 <= raw <= INT64_MAX:
            raise ApiError(
                422, ErrorCode.UNPROCESSABLE_ENTITY,
                f"{where}: epoch milliseconds must lie in [0, {INT64_MAX}] (got {raw})",
            )
        return raw
    try:
        dt = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ApiError(
            400, ErrorCode.BAD_REQUEST, f"{where}={_clip(raw)} is not an ISO-8601 date-time"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    ms = int(dt.timestamp() * 1000)
    if ms < 0:
        raise ApiError(400, ErrorCode.BAD_REQUEST, f"{where}={_clip(raw)} is before 1970")
    return ms


def _clip(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def commit_offsets(rows: list[Any]) -> dict[TopicPartition, tuple[int, str]]:
    """Request rows -> ``{tp: (offset + 1, metadata)}``."""
    return {
        TopicPartition(r["topic"], r["partition"]): (r["offset"] + 1, r.get("metadata") or "")
        for r in rows
    }


@router.post(
    INSTANCE + "/positions",
    status_code=204,
    operation_id="seek",
    summary="Seek to offsets and/or timestamps",
    description="`offset` is the next offset to read; `timestamp` (ISO-8601, or epoch ms "
    "as a franz extension) seeks to the first record at or after that time.",
    openapi_extra=json_body(
        "PositionsRequest",
        {
            "offsets": [{"topic": "orders", "partition": 0, "offset": 20}],
            "timestamps": [
                {"topic": "orders", "partition": 1, "timestamp": "2024-10-01T12:00:00Z"}
            ],
        },
    ),
    responses={
        **ok(None, status=204, description="Positions set"),
        **errors(400, 404, 409, 415, 422),
    },
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it")
async def seek(group: str, instance: str, request: Request) -> Response:
    req = await require_json(request, POSITIONS)
    consumers = consumers_of(request)
    offsets = req.get("offsets") or []
    stamps = {  # converted first: a bad timestamp moves nothing
        TopicPartition(r["topic"], r["partition"]): timestamp_ms(
            r["timestamp"], f"timestamps[{i}].timestamp"
        )
        for i, r in enumerate(req.get("timestamps") or [])
    }
    if offsets:
        await consumers.seek(
            group,
            instance,
            {TopicPartition(r["topic"], r["partition"]): r["offset"] for r in offsets},
            principal=principal_name(request),
        )
    if stamps:
        await consumers.seek_to_timestamp(
            group, instance, stamps, principal=principal_name(request)
        )
    return no_content()


@router.post(
    INSTANCE + "/positions/beginning",
    status_code=204,
    operation_id="seekToBeginning",
    summary="Seek partitions to their first offset",
    openapi_extra=json_body("PartitionsRequest", _TPS_EXAMPLE),
    responses={
        **ok(None, status=204, description="Positions set"),
        **errors(400, 404, 409, 415, 422),
    },
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it")
async def seek_to_beginning(group: str, instance: str, request: Request) -> Response:
    req = await require_json(request, PARTITIONS)
    await consumers_of(request).seek_to_beginning(
        group, instance, topic_partitions(req["partitions"]), principal=principal_name(request)
    )
    return no_content()


@router.post(
    INSTANCE + "/positions/end",
    status_code=204,
    operation_id="seekToEnd",
    summary="Seek partitions to their end (the high watermark)",
    openapi_extra=json_body("PartitionsRequest", _TPS_EXAMPLE),
    responses={
        **ok(None, status=204, description="Positions set"),
        **errors(400, 404, 409, 415, 422),
    },
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it")
async def seek_to_end(group: str, instance: str, request: Request) -> Response:
    req = await require_json(request, PARTITIONS)
    await consumers_of(request).seek_to_end(group, instance, topic_partitions(req["partitions"]),
                                            principal=principal_name(request))
    return no_content()


@router.post(
    INSTANCE + "/offsets",
    operation_id="commitOffsets",
    summary="Commit offsets (last processed offset; franz stores offset + 1)",
    description="An empty body commits the instance's current positions.",
    openapi_extra=json_body(
        "CommitRequest",
        {
            "offsets": [
                {"topic": "orders", "partition": 0, "offset": 20},
                {"topic": "orders", "partition": 1, "offset": 30, "metadata": "m"},
            ]
        },
        required=False,
    ),
    responses={
        200: {
            "description": "Committed; the body is `[]`",
            "content": {
                "application/vnd.kafka.v2+json": {
                    "schema": {"type": "array", "maxItems": 0, "items": {
                        "description": "None: the array is always empty"}},
                    "example": [],
                }
            },
        },
        **errors(400, 404, 409, 415, 422, 500),
    },
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it; READ on the group and on each topic committed, checked by the coordinator when it commits (with or without a body: the positions a seek set)")
async def commit(
    group: str,
    instance: str,
    request: Request,
    async_: Annotated[str | None, Query(alias="async", description="accepted, ignored")] = None,
) -> Response:
    req = await read_json(request, COMMIT)
    offsets = None if req is None else commit_offsets(req["offsets"])
    for topic in dict.fromkeys(tp.topic for tp in offsets or ()):
        require(request, Operation.READ, ResourceType.TOPIC, topic)
    # the coordinator checks again, for the offsets it writes: without a body those are
    # the instance's positions (where a seek put them), known only there
    await consumers_of(request).commit(group, instance, offsets, principal=principal_name(request),
                                       client_host=client_host_of(request))
    return v2_json(request, [])


@router.get(
    INSTANCE + "/offsets",
    operation_id="getCommittedOffsets",
    summary="Committed offsets of partitions (GET with a JSON body)",
    description="The body lists the partitions; partitions without a commit are left out.",
    openapi_extra=json_body("PartitionsRequest", _TPS_EXAMPLE),
    responses={
        **ok(
            "CommittedOffsetsOut",
            {"offsets": [{"topic": "orders", "partition": 0, "offset": 21, "metadata": ""}]},
        ),
        **errors(400, 404, 415, 422),
    },
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it")
async def committed(group: str, instance: str, request: Request) -> Response:
    req = await read_json(request, PARTITIONS)
    if req is None:
        raise ApiError(404, ErrorCode.PARTITION_NOT_FOUND, "Partition not found.")
    tps = topic_partitions(req["partitions"])
    found = await consumers_of(request).committed(group, instance, tps,
                                                  principal=principal_name(request))
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "offset": found[tp][0],
            "metadata": found[tp][1] or "",
        }
        for tp in dict.fromkeys(tps)
        if tp in found
    ]
    return v2_json(request, {"offsets": rows})
