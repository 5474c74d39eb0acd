"""v2 consumer instances: create, delete, subscription and manual assignment
(rest-api-reference §2.4). Instances are members of their group, held by the group
coordinator (``broker.consumers``), so any broker serves them and they survive a restart.

Create validates the settings Confluent takes (same names and aliases):
``format`` binary | json | avro | jsonschema | protobuf (case-insensitive; the schema
formats decode with franz's Schema Registry, ``api.v2.schema_records``; anything else
is "Invalid format type."): 422 / 42204;
``auto.offset.reset`` earliest | latest | none: 422 / 42204; ``auto.commit.enable``
"true" | "false" (or a JSON boolean): 422 / 42204; ``fetch.min.bytes`` outside
[-1, 10000000]: 422 / 40001 (Confluent, sic); ``consumer.request.timeout.ms`` outside
[0, 2^31-1]: 422 / 42204 (a larger one than the broker's
``consumer.request.timeout.max.ms`` is kept, and every read waits at most that long).

Names: an instance ``name`` (or ``id``) is 1..249 characters of ``[A-Za-z0-9._-]``, not
"." or ".." (what Kafka takes for ids in practice): 422 / 42204 otherwise. A new group's
id follows the same rule: 400 / 40002 (Kafka's INVALID_GROUP_ID) otherwise; groups that
exist already keep working whatever their id. Nothing is created on a refusal.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.content_types import EmbeddedFormat
from api.deps import broker_of, consumers_of
from api.errors import ApiError, ErrorCode
from api.openapi import errors, json_body, ok
from api.responses import check_accept, no_content, v2_json
from api.security.authentication import principal_name
from api.security.authorization import Need, require, requires
from api.v2.body import read_json, require_json
from api.v2.schemas import CREATE_CONSUMER, PARTITIONS, SUBSCRIPTION
from core.broker.consumer.instance import MAX_REQUEST_TIMEOUT_MS, id_problem
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition

router = APIRouter(tags=["Consumer (v2)"], dependencies=[Depends(check_accept)])

INSTANCE = "/consumers/{group}/instances/{instance}"
_FETCH_MIN_BYTES_MAX = 10_000_000
_OFFSET_RESETS = ("earliest", "latest", "none")
_TPS_EXAMPLE = {
    "partitions": [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]
}


def _invalid(message: str) -> ApiError:
    return ApiError(
        422, ErrorCode.INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: {message}"
    )


def _clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters (a hostile value must not fill the answer)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format(raw: str | None) -> str:
    """Every embedded format reads: the schema formats with franz's own registry."""
    if raw is None:
        return EmbeddedFormat.BINARY.value
    try:
        return EmbeddedFormat(raw.strip().lower()).value
    except ValueError:
        raise ApiError(422, ErrorCode.INVALID_CONSUMER_CONFIG, "Invalid format type.") from None


def _bool(raw: str | bool, name: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise _invalid(f'{name} must be "true" or "false", not {_clip(repr(raw))}')
    return text == "true"


def create_kwargs(req: dict[str, Any]) -> dict[str, Any]:
    """Validated create request -> keyword arguments of ``ConsumerManager.create``
    (settings the client did not give are left to the broker's defaults)."""
    name = req.get("id") or req.get("name")
    if name is not None:
        problem = id_problem("name", name)
        if problem is not None:
            raise _invalid(_clip(problem))
    kwargs: dict[str, Any] = {"name": name, "format": _format(req.get("format"))}
    reset = req.get("auto.offset.reset")
    if reset is not None:
        if reset.strip().lower() not in _OFFSET_RESETS:
            raise _invalid(
                f"auto.offset.reset must be one of earliest, latest, none, not "
                f"{_clip(repr(reset))}"
            )
        kwargs["auto_offset_reset"] = reset.strip().lower()
    commit = req.get("auto.commit.enable")
    if commit is not None:
        kwargs["auto_commit"] = _bool(commit, "auto.commit.enable")
    min_bytes = req.get("fetch.min.bytes", req.get("responseMinBytes"))
    if min_bytes is not None:
        if not -1 <= min_bytes <= _FETCH_MIN_BYTES_MAX:
            raise ApiError(
                422,
                ErrorCode.FETCH_MIN_BYTES_OUT_OF_RANGE,
                f"fetch.min.bytes must be between -1 and {_FETCH_MIN_BYTES_MAX}",
            )
        kwargs["fetch_min_bytes"] = min_bytes
    wait = req.get("consumer.request.timeout.ms", req.get("requestWaitMs"))
    if wait is not None:
        if not 0 <= wait <= MAX_REQUEST_TIMEOUT_MS:
            raise _invalid(
                f"consumer.request.timeout.ms must lie in [0, {MAX_REQUEST_TIMEOUT_MS}] "
                f"(got {_clip(str(wait))}); reads wait at most the broker's "
                "consumer.request.timeout.max.ms"
            )
        kwargs["request_timeout_ms"] = wait
    return kwargs


def base_uri(request: Request, group: str, instance_id: str) -> str:
    """Absolute URL of the instance: ``advertised.host`` when configured, else the
    scheme, host and port the request came in on."""
    config = broker_of(request).config
    advertised = str(config["advertised.host"] or "")
    if advertised:
        base = f"{request.url.scheme}://{advertised}:{config['port']}{request.scope.get('root_path', '')}/"
    else:
        base = str(request.base_url)
    return f"{base}consumers/{quote(group, safe='')}/instances/{quote(instance_id, safe='')}"


def topic_partitions(rows: list[Any]) -> list[TopicPartition]:
    return [TopicPartition(r["topic"], r["partition"]) for r in rows]


@router.post(
    "/consumers/{group}",
    operation_id="createConsumer",
    summary="Create a consumer instance in a group",
    description="`name`: 1..249 characters of `[A-Za-z0-9._-]` (422 / 42204 otherwise); a "
    "new group's id likewise (400 / 40002). `consumer.request.timeout.ms`: 0..2^31-1 "
    "(422 / 42204 otherwise); reads wait at most the broker's "
    "`consumer.request.timeout.max.ms` (default 300000) whatever it says.",
    openapi_extra=json_body(
        "CreateConsumerRequest",
        {
            "name": "my_consumer",
            "format": "json",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "false",
        },
        required=False,
        description="All fields optional; an empty body means all defaults.",
    ),
    responses={
        **ok(
            "CreateConsumerResponse",
            {
                "instance_id": "my_consumer",
                "base_uri": "http://localhost:8082/consumers/my_group/instances/my_consumer",
            },
        ),
        **errors(400, 409, 415, 422),
    },
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the new instance belongs to the principal")
async def create_consumer(group: str, request: Request) -> Response:
    req = await read_json(request, CREATE_CONSUMER) or {}
    info = await consumers_of(request).create(group, **create_kwargs(dict(req)),
                                              owner=principal_name(request))
    instance_id = info.instance_id
    return v2_json(
        request, {"instance_id": instance_id, "base_uri": base_uri(request, group, instance_id)}
    )


@router.delete(
    INSTANCE,
    status_code=204,
    operation_id="deleteConsumer",
    summary="Delete a consumer instance",
    responses={**ok(None, status=204, description="Deleted"), **errors(404)},
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it")
async def delete_consumer(group: str, instance: str, request: Request) -> Response:
    await consumers_of(request).delete(group, instance, principal=principal_name(request))
    return no_content()


@router.post(
    INSTANCE + "/subscription",
    status_code=204,
    operation_id="subscribe",
    summary="Subscribe to topics or a pattern",
    description="`topics` wins when both are given; replaces the previous subscription.",
    openapi_extra=json_body("SubscriptionRequest", {"topics": ["orders", "payments"]}),
    responses={**ok(None, status=204, description="Subscribed"), **errors(400, 404, 409, 415, 422)},
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it; READ on each topic named (a pattern subscribes to the matching topics the principal may READ)")
async def subscribe(group: str, instance: str, request: Request) -> Response:
    req = await require_json(request, SUBSCRIPTION)
    topics, pattern = req.get("topics"), req.get("topic_pattern")
    owner = principal_name(request)
    if topics:
        for topic in dict.fromkeys(topics):
            require(request, Operation.READ, ResourceType.TOPIC, topic)
        await consumers_of(request).subscribe(group, instance, topics=list(topics),
                                              principal=owner)
    elif pattern:
        await consumers_of(request).subscribe(group, instance, pattern=pattern, principal=owner)
    else:
        raise ApiError(
            422,
            ErrorCode.UNPROCESSABLE_ENTITY,
            "topics or topic_pattern is required and may not be empty",
        )
    return no_content()


@router.get(
    INSTANCE + "/subscription",
    operation_id="getSubscription",
    summary="Current subscription",
    responses={**ok("SubscriptionOut", {"topics": ["orders", "payments"]}), **errors(404)},
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it")
async def get_subscription(group: str, instance: str, request: Request) -> Response:
    topics = await consumers_of(request).subscription(group, instance,
                                                      principal=principal_name(request))
    return v2_json(request, {"topics": list(topics)})


@router.delete(
    INSTANCE + "/subscription",
    status_code=204,
    operation_id="unsubscribe",
    summary="Unsubscribe from all",
    responses={**ok(None, status=204, description="Unsubscribed"), **errors(404)},
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it")
async def unsubscribe(group: str, instance: str, request: Request) -> Response:
    await consumers_of(request).unsubscribe(group, instance, principal=principal_name(request))
    return no_content()


@router.post(
    INSTANCE + "/assignments",
    status_code=204,
    operation_id="assignPartitions",
    summary="Assign partitions manually",
    openapi_extra=json_body("PartitionsRequest", _TPS_EXAMPLE),
    responses={**ok(None, status=204, description="Assigned"), **errors(400, 404, 409, 415, 422)},
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it; READ on each topic assigned")
async def assign(group: str, instance: str, request: Request) -> Response:
    req = await require_json(request, PARTITIONS)
    partitions = topic_partitions(req["partitions"])
    for topic in dict.fromkeys(tp.topic for tp in partitions):
        require(request, Operation.READ, ResourceType.TOPIC, topic)
    await consumers_of(request).assign(group, instance, partitions,
                                       principal=principal_name(request))
    return no_content()


@router.get(
    INSTANCE + "/assignments",
    operation_id="getAssignments",
    summary="Current assignment (manual or from the group)",
    responses={**ok("AssignmentsOut", _TPS_EXAMPLE), **errors(404)},
)
@requires(Need(Operation.READ, ResourceType.GROUP, "group"), also="the consumer instance belongs to the principal that created it")
async def get_assignments(group: str, instance: str, request: Request) -> Response:
    tps = await consumers_of(request).assignment(group, instance,
                                                 principal=principal_name(request))
    return v2_json(request, {"partitions": [{"topic": t, "partition": p} for t, p in tps]})
