"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs: topic configs on the same
TopicAdmin rules as the REST API (the same validation, the same errors); the broker's
own properties are described (franz has no dynamic broker configs: altering them is
refused with a message saying so)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from core.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from core.errors import FranzError, InvalidRequestError
from core.storage.config import ConfigEntry

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
MAX_RESOURCES = 1000

_SOURCES = {"DYNAMIC_TOPIC_CONFIG": 1, "DYNAMIC_BROKER_CONFIG": 2,
            "DYNAMIC_DEFAULT_BROKER_CONFIG": 3, "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5}
_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7,
          "CLASS": 8, "PASSWORD": 9}


def _entry(e: ConfigEntry, version: int, *, synonyms: bool, documentation: bool) -> dict[str, Any]:
    return {
        "name": e.name, "value": None if e.is_sensitive else e.value,
        "read_only": e.is_read_only, "is_default": e.is_default,
        "config_source": _SOURCES.get(str(e.source), 0), "is_sensitive": e.is_sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": _SOURCES.get(str(s.source), 0)}
                     for s in e.synonyms] if synonyms else [],
        "config_type": _TYPES.get(str(e.type), 0),
        "documentation": e.documentation if documentation else None,
    }


def _broker_name_ok(ctx: RequestContext, name: str) -> bool:
    return name in ("", str(ctx.broker.broker_id))


@api("DescribeConfigs", 0, 4)
async def describe_configs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    results = []
    for r in req["resources"][:MAX_RESOURCES]:
        kind, name, keys = r["resource_type"], r["resource_name"], r["configuration_keys"]
        answer: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": kind,
                                  "resource_name": name, "configs": []}
        results.append(answer)
        try:
            if kind == TOPIC:
                if not ctx.allowed(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
                    answer["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                    continue
                entries = await ctx.broker.describe_topic_configs(name)
            elif kind == BROKER:
                if not ctx.allowed(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
                    answer["error_code"] = errors.CLUSTER_AUTHORIZATION_FAILED
                    continue
                if not _broker_name_ok(ctx, name):
                    answer.update(error_code=errors.INVALID_REQUEST, error_message=(
                        f"broker {name}'s configs are described by broker {name} itself"))
                    continue
                entries = await ctx.broker.describe_broker_configs()
            else:
                answer.update(error_code=errors.INVALID_REQUEST,
                              error_message=f"resource type {kind} has no configs in franz")
                continue
        except FranzError as exc:
            answer.update(error_code=errors.code_of(exc), error_message=errors.message_of(exc))
            continue
        wanted = None if keys is None else set(keys)
        answer["configs"] = [
            _entry(e, ctx.version, synonyms=bool(req["include_synonyms"]),
                   documentation=bool(req["include_documentation"]))
            for e in entries if wanted is None or e.name in wanted]
    return {"throttle_time_ms": 0, "results": results}


def _refuse_broker(answer: dict[str, Any]) -> None:
    answer.update(error_code=errors.INVALID_REQUEST, error_message=(
        "franz has no dynamic broker configs: set broker properties in its properties "
        "file or environment and restart it"))


Changes = tuple[dict[str, str], list[str]]  # (values to set, names to reset)
Planner = Callable[[RequestContext, str, dict[str, Any]], Awaitable[Changes]]


async def _alter_topics(ctx: RequestContext, req: dict[str, Any], plan: Planner) -> dict[str, Any]:
    """Both alter calls: per resource, broker configs refused, ALTER_CONFIGS checked,
    then ``plan``'s changes applied through the topic admin (its validation, its errors)."""
    out = []
    for r in req["resources"][:MAX_RESOURCES]:
        kind, name = r["resource_type"], r["resource_name"]
        answer: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": kind,
                                  "resource_name": name}
        out.append(answer)
        if kind != TOPIC:
            _refuse_broker(answer)
            continue
        if not ctx.allowed(Operation.ALTER_CONFIGS, ResourceType.TOPIC, name):
            answer["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
            continue
        try:
            set_values, reset = await plan(ctx, name, r)
            await ctx.broker.alter_topic_configs(name, set_values=set_values, reset=reset,
                                                 validate_only=bool(req["validate_only"]))
        except FranzError as exc:
            answer.update(error_code=errors.code_of(exc), error_message=errors.message_of(exc))
    return {"throttle_time_ms": 0, "responses": out}


async def _replace_all(ctx: RequestContext, name: str, resource: dict[str, Any]) -> Changes:
    """Kafka's legacy AlterConfigs: the topic's overrides become exactly those given."""
    values = {c["name"]: c["value"] for c in resource["configs"] if c["value"] is not None}
    current = {e.name for e in await ctx.broker.describe_topic_configs(name)
               if str(e.source) == "DYNAMIC_TOPIC_CONFIG"}
    return values, sorted(current - set(values))


async def _incremental(ctx: RequestContext, name: str, resource: dict[str, Any]) -> Changes:
    """SET, DELETE, and APPEND / SUBTRACT on list values (from the effective value)."""
    effective = {e.name: e.value for e in await ctx.broker.describe_topic_configs(name)}
    set_values: dict[str, str] = {}
    reset: list[str] = []
    for c in resource["configs"]:
        key, op, value = c["name"], c["config_operation"], c["value"]
        if op == SET and value is not None:
            set_values[key] = value
        elif op == DELETE:
            reset.append(key)
        elif op in (APPEND, SUBTRACT) and value is not None:
            items = [v for v in (set_values.get(key) or effective.get(key) or "").split(",") if v]
            given = [v.strip() for v in value.split(",") if v.strip()]
            items = items + [v for v in given if v not in items] if op == APPEND \
                else [v for v in items if v not in given]
            set_values[key] = ",".join(items)
        else:
            raise InvalidRequestError(f"config {key}: operation {op} with value {value!r} is not valid")
    return set_values, reset


@api("AlterConfigs", 0, 2)
async def alter_configs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    return await _alter_topics(ctx, req, _replace_all)


@api("IncrementalAlterConfigs", 0, 1)
async def incremental_alter_configs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    return await _alter_topics(ctx, req, _incremental)
