"""Schemas as produce and consume resolve them (core.broker.schemas.resolver, .wire):
parsed by id with their references, registered once per (subject, schema), a subject's
latest version seen again within the cache time, the Confluent 5-byte header."""

from __future__ import annotations

import json

import pytest
from _schemas_log_fake import MemoryLog
from test_schema_registry_router import Cache, ElsewhereRouter, RemoteLeader

from core.broker.schemas.errors import SchemaNotFoundError, SubjectNotFoundError
from core.broker.schemas.model import LATEST, Reference, SchemaInput
from core.broker.schemas.registry import SchemaRegistry
from core.broker.schemas.resolver import LATEST_TTL_S
from core.broker.schemas.router import SchemaRegistryRouter
from core.broker.schemas.wire import WireFormatError, header, split
from core.clock import ManualClock

RECORD = SchemaInput(json.dumps({"type": "record", "name": "R",
                                 "fields": [{"name": "a", "type": "int"}]}))


class Now:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def setup() -> tuple[SchemaRegistryRouter, RemoteLeader, Now]:
    leader = RemoteLeader(SchemaRegistry(MemoryLog(), ManualClock(0), append_timeout_ms=1000))
    local = SchemaRegistry(MemoryLog(), ManualClock(0), append_timeout_ms=1000)
    router = SchemaRegistryRouter(local, ElsewhereRouter(), Cache(), leader)  # type: ignore[arg-type]
    now = Now()
    router.resolver._clock = now
    return router, leader, now


async def test_register_once_then_from_cache(setup) -> None:
    router, leader, _ = setup
    resolver = router.resolver
    assert await resolver.register("t-value", RECORD) == 1
    assert await resolver.register("t-value", RECORD) == 1
    assert leader.calls == ["register"]
    assert await resolver.register("u-value", RECORD) == 1  # same schema, other subject
    assert leader.calls == ["register", "register"]


async def test_by_id_parses_with_references(setup) -> None:
    router, leader, _ = setup
    resolver = router.resolver
    inner = SchemaInput(json.dumps({"type": "record", "name": "Inner", "namespace": "n",
                                    "fields": [{"name": "x", "type": "long"}]}))
    inner_id = await resolver.register("inner", inner)
    outer = SchemaInput(json.dumps({"type": "record", "name": "Outer",
                                    "fields": [{"name": "i", "type": "n.Inner"}]}),
                        references=(Reference("n.Inner", "inner", 1),))
    outer_id = await resolver.register("outer", outer)
    parsed = await resolver.by_id(outer_id)
    assert parsed.schema_type == "AVRO" and "Outer" in parsed.text
    calls = len(leader.calls)
    assert await resolver.by_id(outer_id) is parsed  # cached
    assert json.loads((await resolver.by_id(inner_id)).text) == json.loads(inner.schema)
    assert len(leader.calls) == calls
    with pytest.raises(SchemaNotFoundError):
        await resolver.by_id(99)


async def test_latest_is_cached_for_its_ttl(setup) -> None:
    router, _, now = setup
    resolver = router.resolver
    with pytest.raises(SubjectNotFoundError):
        await resolver.version("s", LATEST)
    await router.call("register", subject="s", schema=RECORD)
    assert (await resolver.version("s", LATEST)).version == 1
    wider = SchemaInput(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}]}))
    await router.call("register", subject="s", schema=wider)
    assert (await resolver.version("s", LATEST)).version == 1  # still cached
    now.t += LATEST_TTL_S
    assert (await resolver.version("s", LATEST)).version == 2
    assert (await resolver.version("s", 1)).schema_id == 1


def test_wire_header_round_trip_and_errors() -> None:
    data = header(258) + b"payload"
    assert data[:5] == b"\x00\x00\x00\x01\x02"
    schema_id, payload = split(data)
    assert (schema_id, bytes(payload)) == (258, b"payload")
    for bad, why in [(b"\x00\x00\x00", "too short"), (b"\x01\x00\x00\x00\x01", "magic"),
                     (b"\x00\x00\x00\x00\x00", "schema id 0")]:
        with pytest.raises(WireFormatError, match=why):
            split(bad)
    with pytest.raises(ValueError):
        header(0)
