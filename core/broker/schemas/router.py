"""Schema Registry calls to the registry: this broker's own when it leads ``_schemas-0``,
else the leader's over the internal API (``POST /internal/v1/schemas/{op}``, served by
``serve`` there and never forwarded again), through the router's ``call_leader`` (the
one leader-wait and retry policy, as for the Idempotency-Key coordinator).

A call travels as JSON: its keyword arguments and its answer, the registry's values
(``model``) tagged with their class. Errors travel as every domain error does (their
class name), so a caller on another broker gets the same error as one on the leader.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import orjson

from core.broker.cluster.router import Router
from core.broker.errors import CoordinatorNotAvailableError
from core.broker.metadata.cache import MetadataCache
from core.broker.schemas.model import (
    CompatibilityResult,
    Reference,
    SchemaInput,
    SchemaVersion,
    StoredSchema,
    SubjectVersion,
)
from core.broker.schemas.registry import OPS, SchemaRegistry, method_of
from core.broker.schemas.resolver import SchemaResolver
from core.broker.types import SCHEMAS_TOPIC, TopicPartition
from core.errors import InvalidRequestError

Address = tuple[str, int]
_TYPES: dict[str, type[Any]] = {cls.__name__: cls for cls in (
    Reference, SchemaInput, StoredSchema, SchemaVersion, SubjectVersion, CompatibilityResult)}
_TAG = "@type"


class SchemaCallClient(Protocol):
    async def schemas_call(self, address: Address, op: str, body: bytes) -> bytes: ...


def to_wire(value: Any) -> Any:
    """``value`` (the registry's values, lists, primitives) as JSON-able data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        doc = {_TAG: type(value).__name__}
        for f in dataclasses.fields(value):
            doc[f.name] = to_wire(getattr(value, f.name))
        return doc
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    return value


def from_wire(value: Any) -> Any:
    """``to_wire``'s inverse; sequences inside values come back as tuples. ValueError,
    TypeError or KeyError for data that is not of this shape."""
    if isinstance(value, dict):
        if _TAG not in value:
            return {str(k): from_wire(v) for k, v in value.items()}
        cls = _TYPES[value[_TAG]]
        args = {}
        for k, v in value.items():
            if k != _TAG:
                decoded = from_wire(v)
                args[k] = tuple(decoded) if isinstance(decoded, list) else decoded
        return cls(**args)
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    return value


async def run(registry: SchemaRegistry, op: str, args: dict[str, Any]) -> Any:
    """Call ``op`` on this broker's registry; its answer as JSON-able data."""
    return to_wire(await method_of(registry, op)(**args))


async def serve(registry: SchemaRegistry, op: str, body: bytes) -> bytes:
    """Run a forwarded call here (``InvalidRequestError`` for a malformed one)."""
    if op not in OPS:
        raise InvalidRequestError(f"unknown schema registry call {op!r}")
    try:
        args = from_wire(orjson.loads(body))
        if not isinstance(args, dict):
            raise TypeError("the arguments are not an object")
        call = method_of(registry, op)
    except (KeyError, TypeError, ValueError, orjson.JSONDecodeError) as exc:
        raise InvalidRequestError(f"malformed schema registry call: {exc}") from None
    try:
        result = await call(**args)
    except TypeError as exc:  # arguments the method does not take
        raise InvalidRequestError(f"malformed schema registry call: {exc}") from None
    return orjson.dumps(to_wire(result))


class SchemaRegistryRouter:
    """The registry as ``api/`` calls it, from any broker. ``client`` None: a broker
    without peers (every call is served here)."""

    def __init__(self, registry: SchemaRegistry, router: Router, cache: MetadataCache,
                 client: SchemaCallClient | None) -> None:
        self.registry = registry
        self._router = router
        self._cache = cache
        self._client = client
        self.resolver = SchemaResolver(self)  # parsed and registered schemas, cached

    async def call(self, op: str, **args: Any) -> Any:
        """``op`` at the leader of ``_schemas-0``, its answer as the registry's values."""
        if self._cache.topic(SCHEMAS_TOPIC) is None:
            raise CoordinatorNotAvailableError(
                f"{SCHEMAS_TOPIC} does not exist yet (it is created with the cluster's "
                "consumer-offsets topic); retry")
        client, registry = self._client, self.registry
        body = orjson.dumps(to_wire(args))

        async def at(address: Address | None) -> Any:
            if address is None or client is None:
                return await run(registry, op, args)
            return orjson.loads(await client.schemas_call(address, op, body))

        return from_wire(await self._router.call_leader(TopicPartition(SCHEMAS_TOPIC, 0), at))
