"""v2 ``GET /brokers`` and the root liveness routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.deps import broker_of
from api.openapi import ok
from api.responses import check_accept, v2_json
from api.security.authorization import authenticated_only

router = APIRouter(tags=["Broker (v2)"], dependencies=[Depends(check_accept)])

_EMPTY: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Always `{}`",
        "content": {"application/vnd.kafka.v2+json": {
            "schema": {"type": "object", "maxProperties": 0,
                       "description": "An empty object"},
            "example": {}}},
    }
}


@router.get("/", operation_id="getApiRoot", summary="Liveness: answers {}", responses=_EMPTY)
@authenticated_only("the API root")
async def root(request: Request) -> Response:
    return v2_json(request, {})


@router.post("/", operation_id="postApiRoot", summary="Liveness: answers {}",
             responses=_EMPTY)
@authenticated_only("the API root")
async def root_post(request: Request) -> Response:
    return v2_json(request, {})


@router.get(
    "/brokers",
    operation_id="listBrokers",
    summary="List broker ids",
    responses=ok("BrokersOut", {"brokers": [0, 1, 2]}),
)
@authenticated_only("the broker list, which Kafka's metadata gives every client")
async def list_brokers(request: Request) -> Response:
    brokers = await broker_of(request).list_brokers()
    return v2_json(request, {"brokers": [b.broker_id for b in brokers]})
