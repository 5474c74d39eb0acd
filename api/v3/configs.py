"""v3 configs: a topic's (read and altered live), a broker's and the cluster's (read-only).

Topic configs list every topic-level key with its effective value and source
(``DYNAMIC_TOPIC_CONFIG`` for an override, ``STATIC_BROKER_CONFIG`` for a broker
default, ``DEFAULT_CONFIG`` for Kafka's), sorted by name. Changes take effect at once:
the broker hands the partitions a new log config (retention, segment size,
max.message.bytes, ...).

- ``PUT .../configs/{name}`` ``{"value": "..."}``: set one override, 204. Numbers and
  booleans are taken as their text (Jackson does the same).
- ``DELETE .../configs/{name}``: drop the override (back to the default), 204.
- ``POST .../configs:alter`` ``{"data": [{"name", "value", "operation": "SET"|"DELETE"}],
  "validate_only": false}``: all in one step or none, 204.

Errors: unknown topic 404 / 40403; unknown config name 404 / 404 "Config x cannot be
found for TOPIC t in cluster C."; invalid value 400 / 40002 naming the key; a null value
to set 400 / 40002. Broker configs are franz's static properties (``is_read_only``);
there are no dynamic cluster-wide broker configs, so ``/broker-configs`` is empty.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.deps import broker_of
from api.errors import ApiError, ErrorCode
from api.security.authorization import Need, requires, visible
from api.v3.clusters import find_broker
from api.v3.common import (
    ClusterLinks,
    Links,
    V3Response,
    body_doc,
    cluster_links,
    errors,
    no_content,
    not_found,
    read_body,
    v3_json,
)
from api.v3.models import (
    ALTER_CONFIGS,
    UPDATE_CONFIG,
    ConfigValueIn,
    KafkaBrokerConfig,
    KafkaBrokerConfigList,
    KafkaClusterConfig,
    KafkaClusterConfigList,
    KafkaTopicConfig,
    KafkaTopicConfigList,
)
from core.broker.security.acl import Operation, ResourceType
from core.storage.config import ConfigEntry
from core.storage.errors import InvalidConfigError

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Configs (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

_CONFIG = "/topics/{topic_name}/configs"
_ALTER_EXAMPLE = {
    "data": [
        {"name": "retention.ms", "value": "86400000"},
        {"name": "cleanup.policy", "operation": "DELETE"},
    ],
    "validate_only": False,
}


def config_text(value: ConfigValueIn) -> str | None:
    """A config value as Kafka takes it: text (numbers and booleans as Jackson writes them)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_fields(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": None if entry.is_sensitive else entry.value,
        "is_default": entry.is_default,
        "is_read_only": entry.is_read_only,
        "is_sensitive": entry.is_sensitive,
        "source": entry.source.value,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": s.source.value} for s in entry.synonyms
        ],
    }


def topic_config_data(links: Links, topic: str, entry: ConfigEntry) -> dict[str, Any]:
    parts = ("topics", topic, "configs", entry.name)
    out = links.resource("KafkaTopicConfig", parts, [("topic", topic), ("config", entry.name)])
    out.update(cluster_id=links.cluster_id, topic_name=topic, **_config_fields(entry))
    return out


def broker_config_data(links: Links, broker_id: int, entry: ConfigEntry) -> dict[str, Any]:
    parts = ("brokers", broker_id, "configs", entry.name)
    crn = [("broker", broker_id), ("config", entry.name)]
    out = links.resource("KafkaBrokerConfig", parts, crn)
    out.update(cluster_id=links.cluster_id, broker_id=broker_id, **_config_fields(entry))
    return out


def _unknown_config(links: Links, kind: str, owner: str | int, name: str) -> ApiError:
    return not_found(
        f"Config {name} cannot be found for {kind} {owner} in cluster {links.cluster_id}."
    )


async def _topic_entries(request: Request, topic: str) -> dict[str, ConfigEntry]:
    return {e.name: e for e in await broker_of(request).describe_topic_configs(topic)}


def _set_value(name: str, value: ConfigValueIn) -> str:
    text = config_text(value)
    if text is None:
        raise InvalidConfigError(
            f"Null value not supported for topic config {name}: DELETE it to reset it"
        )
    return text


# --- topic configs --------------------------------------------------------------------------


@router.get(
    "/topics/-/configs",
    operation_id="listKafkaAllTopicConfigs",
    summary="List the configs of every topic",
    response_model=KafkaTopicConfigList,
    responses=errors(404),
)
@requires(also="lists only the topics the principal may DESCRIBE_CONFIGS")
async def list_all_topic_configs(links: ClusterLinks, request: Request) -> Response:
    broker = broker_of(request)
    data = []
    topics = visible(request, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                     await broker.list_topics())
    for topic in topics:
        data += [
            topic_config_data(links, topic, e) for e in await broker.describe_topic_configs(topic)
        ]
    return v3_json(links.collection("KafkaTopicConfigList", ("topics", "-", "configs"), data))


@router.get(
    _CONFIG,
    operation_id="listKafkaTopicConfigs",
    summary="List a topic's configs (effective values, sorted by name)",
    response_model=KafkaTopicConfigList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "topic_name"))
async def list_topic_configs(topic_name: str, links: ClusterLinks, request: Request) -> Response:
    entries = await broker_of(request).describe_topic_configs(topic_name)
    data = [topic_config_data(links, topic_name, e) for e in entries]
    return v3_json(
        links.collection("KafkaTopicConfigList", ("topics", topic_name, "configs"), data)
    )


@router.get(
    _CONFIG + "/{name}",
    operation_id="getKafkaTopicConfig",
    summary="Describe one topic config",
    response_model=KafkaTopicConfig,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "topic_name"))
async def get_topic_config(
    topic_name: str, name: str, links: ClusterLinks, request: Request
) -> Response:
    entry = (await _topic_entries(request, topic_name)).get(name)
    if entry is None:
        raise _unknown_config(links, "TOPIC", topic_name, name)
    return v3_json(topic_config_data(links, topic_name, entry))


@router.put(
    _CONFIG + "/{name}",
    operation_id="updateKafkaTopicConfig",
    summary="Set one topic config (applied at once)",
    status_code=204,
    openapi_extra=body_doc("UpdateConfigRequest", {"value": "86400000"}),
    responses=errors(400, 404, 415, 422),
)
@requires(Need(Operation.ALTER_CONFIGS, ResourceType.TOPIC, "topic_name"), audited=True)
async def update_topic_config(
    topic_name: str, name: str, links: ClusterLinks, request: Request
) -> Response:
    req = await read_body(request, UPDATE_CONFIG)
    if name not in await _topic_entries(request, topic_name):
        raise _unknown_config(links, "TOPIC", topic_name, name)
    value = _set_value(name, req["value"])
    await broker_of(request).alter_topic_configs(topic_name, set_values={name: value})
    return no_content()


@router.delete(
    _CONFIG + "/{name}",
    operation_id="deleteKafkaTopicConfig",
    summary="Reset one topic config to its default",
    status_code=204,
    responses=errors(404),
)
@requires(Need(Operation.ALTER_CONFIGS, ResourceType.TOPIC, "topic_name"), audited=True)
async def reset_topic_config(
    topic_name: str, name: str, links: ClusterLinks, request: Request
) -> Response:
    if name not in await _topic_entries(request, topic_name):
        raise _unknown_config(links, "TOPIC", topic_name, name)
    await broker_of(request).alter_topic_configs(topic_name, reset=[name])
    return no_content()


@router.post(
    _CONFIG + ":alter",
    operation_id="updateKafkaTopicConfigBatch",
    summary="Set and reset several topic configs at once",
    description="All changes apply together or none does. `operation` is `SET` (default) "
    "or `DELETE`; `validate_only` checks without applying.",
    status_code=204,
    openapi_extra=body_doc("AlterConfigBatchRequest", _ALTER_EXAMPLE),
    responses=errors(400, 404, 415, 422),
)
@requires(Need(Operation.ALTER_CONFIGS, ResourceType.TOPIC, "topic_name"), audited=True)
async def alter_topic_configs(topic_name: str, links: ClusterLinks, request: Request) -> Response:
    req = await read_body(request, ALTER_CONFIGS)
    known = await _topic_entries(request, topic_name)
    set_values: dict[str, str] = {}
    reset: list[str] = []
    for i, entry in enumerate(req["data"]):
        name = entry["name"]
        operation = (entry.get("operation") or "SET").upper()
        if operation not in ("SET", "DELETE"):
            raise ApiError(
                400,
                ErrorCode.BAD_REQUEST,
                f"data[{i}].operation: {entry.get('operation')!r} is not one of SET, DELETE",
            )
        if name not in known:
            raise _unknown_config(links, "TOPIC", topic_name, name)
        if operation == "SET":
            set_values[name] = _set_value(name, entry.get("value"))
        else:
            reset.append(name)
    await broker_of(request).alter_topic_configs(
        topic_name,
        set_values=set_values,
        reset=reset,
        validate_only=bool(req.get("validate_only")),
    )
    return no_content()


# --- broker and cluster configs (read-only) --------------------------------------------------


async def _broker_entries(request: Request, broker_id: int) -> list[ConfigEntry]:
    await find_broker(request, broker_id)
    broker = broker_of(request)
    if broker_id != broker.broker_id:
        raise not_found(
            f"The configs of broker {broker_id} are served by that broker, "
            f"not by broker {broker.broker_id}."
        )
    return await broker.describe_broker_configs()


@router.get(
    "/brokers/{broker_id}/configs",
    operation_id="listKafkaBrokerConfigs",
    summary="List a broker's configs (static: read-only)",
    response_model=KafkaBrokerConfigList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER))
async def list_broker_configs(broker_id: int, links: ClusterLinks, request: Request) -> Response:
    data = [
        broker_config_data(links, broker_id, e) for e in await _broker_entries(request, broker_id)
    ]
    return v3_json(
        links.collection("KafkaBrokerConfigList", ("brokers", broker_id, "configs"), data)
    )


@router.get(
    "/brokers/{broker_id}/configs/{name}",
    operation_id="getKafkaBrokerConfig",
    summary="Describe one broker config",
    response_model=KafkaBrokerConfig,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER))
async def get_broker_config(
    broker_id: int, name: str, links: ClusterLinks, request: Request
) -> Response:
    for entry in await _broker_entries(request, broker_id):
        if entry.name == name:
            return v3_json(broker_config_data(links, broker_id, entry))
    raise _unknown_config(links, "BROKER", broker_id, name)


@router.get(
    "/broker-configs",
    operation_id="listKafkaClusterConfigs",
    summary="List dynamic cluster-wide broker configs (franz has none)",
    response_model=KafkaClusterConfigList,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER))
async def list_cluster_configs(links: ClusterLinks) -> Response:
    return v3_json(links.collection("KafkaClusterConfigList", ("broker-configs",), []))


@router.get(
    "/broker-configs/{name}",
    operation_id="getKafkaClusterConfig",
    summary="Describe a dynamic cluster-wide broker config (franz has none: 404)",
    response_model=KafkaClusterConfig,
    responses=errors(404),
)
@requires(Need(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER))
async def get_cluster_config(name: str, links: ClusterLinks) -> Response:
    raise _unknown_config(links, "BROKER", "(cluster default)", name)
