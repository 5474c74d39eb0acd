"""Schema Registry calls from a broker that does not lead ``_schemas-0``
(core.broker.schemas.router): they travel to the leader as the internal API carries them
(JSON there, answers and domain errors back), and come back as the same values and the
same error classes a call on the leader gets."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from _schemas_log_fake import MemoryLog

from core.broker.cluster.client import _error_of_body
from core.broker.errors import CoordinatorNotAvailableError
from core.broker.schemas.errors import IncompatibleSchemaError, SubjectNotFoundError
from core.broker.schemas.model import LATEST, SchemaInput, SchemaVersion
from core.broker.schemas.registry import SchemaRegistry
from core.broker.schemas.router import SchemaRegistryRouter, serve
from core.clock import ManualClock
from core.errors import FranzError

LEADER = ("leader", 9092)


class RemoteLeader:
    """The leader's ``POST /internal/v1/schemas/{op}`` as api/internal serves it: the
    answer, or a domain error's JSON body that the cluster client raises again."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry
        self.calls: list[str] = []

    async def schemas_call(self, address: tuple[str, int], op: str, body: bytes) -> bytes:
        assert address == LEADER
        self.calls.append(op)
        try:
            return await serve(self.registry, op, body)
        except FranzError as exc:
            raise _error_of_body(409, orjson.dumps({
                "kafka_error_code": exc.error_code, "error_class": type(exc).__name__,
                "message": exc.message})) from None


class ElsewhereRouter:
    """``Router.call_leader`` when another broker leads the partition."""

    async def call_leader(self, tp: Any, call: Callable[[Any], Awaitable[Any]]) -> Any:
        assert (tp.topic, tp.partition) == ("_schemas", 0)
        return await call(LEADER)


class Cache:
    def __init__(self, exists: bool = True) -> None:
        self.exists = exists

    def topic(self, name: str) -> object | None:
        return object() if self.exists else None


@pytest.fixture
def remote() -> tuple[SchemaRegistryRouter, RemoteLeader]:
    leader = RemoteLeader(SchemaRegistry(MemoryLog(), ManualClock(0), append_timeout_ms=1000))
    local = SchemaRegistry(MemoryLog(), ManualClock(0), append_timeout_ms=1000)  # never used
    router = SchemaRegistryRouter(local, ElsewhereRouter(), Cache(), leader)  # type: ignore[arg-type]
    return router, leader


async def test_calls_and_answers_travel(remote: tuple[SchemaRegistryRouter, RemoteLeader]) -> None:
    router, leader = remote
    schema = SchemaInput(json.dumps({"type": "record", "name": "R",
                                     "fields": [{"name": "a", "type": "int"}]}))
    assert await router.call("register", subject="s", schema=schema) == 1
    got = await router.call("get_version", subject="s", version=LATEST)
    assert isinstance(got, SchemaVersion) and (got.subject, got.version, got.schema_id) == (
        "s", 1, 1)
    assert await router.call("subjects") == ["s"]
    assert leader.calls == ["register", "get_version", "subjects"]


async def test_errors_come_back_as_themselves(
        remote: tuple[SchemaRegistryRouter, RemoteLeader]) -> None:
    router, _leader = remote
    with pytest.raises(SubjectNotFoundError, match="Subject 'nope' not found"):
        await router.call("versions", subject="nope")
    await router.call("register", subject="s", schema=SchemaInput('"int"'))
    with pytest.raises(IncompatibleSchemaError):
        await router.call("register", subject="s", schema=SchemaInput('"string"'))


async def test_no_schemas_topic_yet() -> None:
    registry = SchemaRegistry(MemoryLog(), ManualClock(0), append_timeout_ms=1000)
    router = SchemaRegistryRouter(registry, ElsewhereRouter(),  # type: ignore[arg-type]
                                  Cache(exists=False), None)  # type: ignore[arg-type]
    with pytest.raises(CoordinatorNotAvailableError):
        await router.call("subjects")
