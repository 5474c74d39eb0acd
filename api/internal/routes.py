"""Internal (broker-to-broker) routes; mounted under ``/internal/v1`` with
``include_in_schema=False``.

Every route serves from this broker's own replicas and never forwards again, so a stale
route cannot bounce a request between brokers. Domain errors answer HTTP 409 with
``{"kafka_error_code": N, "message": ...}`` (Kafka's wire code, not Confluent's), which
``core.broker.cluster.client`` turns back into the same domain error; a request refused
for what it is (a malformed call, records that do not decode, an internal topic) answers
400 the same way. Every route requires CLUSTER_ACTION on the cluster: only brokers (and
super users) call them. Appends are validated as fully as client produces, and never
accepted for internal topics: the group coordinator writes ``__consumer_offsets``
through its own replica manager, never through this API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import orjson
from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from api.deps import broker_of
from api.hot_routes import hot_route
from api.security.authorization import Need, requires
from core.broker.cluster.client import encode_fetch
from core.broker.replica.fetch_wire import decode_request, encode_response
from core.broker.security.acl import Operation, ResourceType
from core.errors import FranzError, InvalidRequestError
from core.storage.errors import CorruptRecordError, InvalidRecordError, InvalidTopicError

router = APIRouter(prefix="/internal/v1", include_in_schema=False)

OCTET = "application/octet-stream"


def _error(exc: FranzError, status: int = 409) -> Response:
    return Response(orjson.dumps({"kafka_error_code": exc.error_code,
                                  "error_class": type(exc).__name__, "message": exc.message}),
                    status_code=status, media_type="application/json")


@hot_route(router, "POST", "/replica/fetch")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def replica_fetch(request: Request) -> Response:
    broker = broker_of(request)
    try:
        req = decode_request(await request.body())
    except ValueError as exc:
        return Response(orjson.dumps({"kafka_error_code": 42, "message": str(exc)}),
                        status_code=400, media_type="application/json")
    results = await broker.replica_fetch(req)
    return Response(encode_response(results), media_type=OCTET)


@router.post("/append")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def append(request: Request, topic: str, partition: int, acks: int = 1,
                 timeout_ms: int = Query(30000, ge=0)) -> Response:
    broker = broker_of(request)
    data = bytearray(await request.body())
    try:
        info = await broker.local_append(topic, partition, data, acks=acks,
                                         timeout_ms=timeout_ms)
    except FranzError as exc:
        # records or a target refused for what they are (garbage, an internal topic) will
        # never succeed: 400; the rest (not leader, timeouts...) stay 409
        refused = isinstance(exc, CorruptRecordError | InvalidRecordError | InvalidTopicError)
        return _error(exc, status=400 if refused else 409)
    return Response(orjson.dumps({
        "first_offset": info.first_offset, "last_offset": info.last_offset,
        "max_timestamp": info.max_timestamp, "log_append_time": info.log_append_time,
        "num_records": info.num_records, "size": info.size,
        "log_start_offset": info.log_start_offset, "duplicate": info.duplicate}),
        media_type="application/json")


@router.get("/fetch")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def fetch(request: Request, topic: str, partition: int, offset: int,
                max_bytes: int = Query(1048576, ge=1), max_wait_ms: int = Query(0, ge=0)) -> Response:
    broker = broker_of(request)
    try:
        data, offs = await broker.local_fetch(topic, partition, offset, max_bytes=max_bytes,
                                              max_wait_ms=max_wait_ms)
    except FranzError as exc:
        return _error(exc)
    return Response(encode_fetch(data, offs), media_type=OCTET)


@router.get("/offsets")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def offsets(request: Request, topic: str, partition: int) -> Response:
    broker = broker_of(request)
    try:
        offs = await broker.local_offsets(topic, partition)
    except FranzError as exc:
        return _error(exc)
    return Response(orjson.dumps({"log_start_offset": offs.log_start_offset,
                                  "high_watermark": offs.high_watermark,
                                  "log_end_offset": offs.log_end_offset}),
                    media_type="application/json")


@router.get("/replicas")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def replicas(request: Request) -> Response:
    """This broker's replicas with role, epoch, ISR, HW and LEO (for tests and operators)."""
    broker = broker_of(request)
    out = [{"topic": tp.topic, "partition": tp.partition, "leader": p.leader_id,
            "leader_epoch": p.leader_epoch, "isr": list(p.isr),
            "high_watermark": p.high_watermark, "log_start_offset": p.log.log_start_offset,
            "log_end_offset": p.log.log_end_offset}
           for tp, p in broker.local_replicas()]
    return Response(orjson.dumps(out), media_type="application/json")


async def _coordinator_call(request: Request, serve: Callable[[bytes], Awaitable[bytes]],
                            media_type: str) -> Response:
    """A call for a coordinator living here, run by ``serve(body)``: a malformed call is
    400 (nothing ran), a domain error 409."""
    try:
        body = await serve(await request.body())
    except InvalidRequestError as exc:
        return _error(exc, status=400)
    except FranzError as exc:
        return _error(exc)
    return Response(body, media_type=media_type)


@router.post("/groups/{op}")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def group_call(request: Request, op: str) -> Response:
    """A consumer-group call for a group this broker coordinates (served here, never
    forwarded again; ``core.broker.consumer.wire``)."""
    broker = broker_of(request)
    return await _coordinator_call(request, partial(broker.serve_group_call, op), OCTET)


@router.post("/idempotency/{op}")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def idempotency_call(request: Request, op: str) -> Response:
    """An Idempotency-Key call for a key coordinated here (served here, never forwarded
    again; ``core.broker.idempotency.router``)."""
    broker = broker_of(request)
    return await _coordinator_call(request, partial(broker.serve_idempotency_call, op),
                                   "application/json")


@router.post("/schemas/{op}")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def schemas_call(request: Request, op: str) -> Response:
    """A Schema Registry call for the registry led here (served here, never forwarded
    again; ``core.broker.schemas.router``)."""
    broker = broker_of(request)
    return await _coordinator_call(request, partial(broker.serve_schemas_call, op),
                                   "application/json")


@router.post("/controlled_shutdown")
@requires(Need(Operation.CLUSTER_ACTION, ResourceType.CLUSTER))
async def controlled_shutdown(request: Request, broker_id: int) -> Response:
    broker = broker_of(request)
    try:
        remaining = await broker.controlled_shutdown_of(broker_id)
    except FranzError as exc:
        return _error(exc)
    return Response(orjson.dumps({"remaining": remaining}), media_type="application/json")
