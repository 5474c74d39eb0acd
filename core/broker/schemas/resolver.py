"""Schemas as produce and consume use them, from any broker: parsed by id, registered or
looked up under a subject, the latest version of a subject, each answer cached here so a
request with a schema costs a registry call only the first time.

A schema id never changes meaning (ids are never reused; a permanently deleted schema
simply stops resolving), so parsed schemas are kept by id as Confluent's serializers keep
them; the ids of registered schemas are kept by (subject, schema); a subject's latest
version for ``LATEST_TTL_S`` (a newer version is seen within that time). Every cache
holds at most ``CACHE_SIZE`` entries, the least recently used going first.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from core.broker.schemas import formats
from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import (
    LATEST,
    MAX_REFERENCE_DEPTH,
    Reference,
    SchemaInput,
    SchemaVersion,
    StoredSchema,
    check_input,
)


class RegistryCalls(Protocol):
    """The registry's calls from any broker (``router.SchemaRegistryRouter``)."""

    async def call(self, op: str, **args: Any) -> Any: ...

CACHE_SIZE = 1000
LATEST_TTL_S = 1.0

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


class SchemaResolver:
    def __init__(self, registry: RegistryCalls, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._registry = registry
        self._clock = clock
        self._by_id: _Lru[int, ParsedSchema] = _Lru(CACHE_SIZE)
        self._ids: _Lru[tuple[str, SchemaInput], int] = _Lru(CACHE_SIZE)
        self._latest: _Lru[str, tuple[float, SchemaVersion]] = _Lru(CACHE_SIZE)

    async def by_id(self, schema_id: int) -> ParsedSchema:
        """Schema ``schema_id``, parsed. SchemaNotFoundError when there is none."""
        return await self._by_id_at(schema_id, 0)

    async def _by_id_at(self, schema_id: int, depth: int) -> ParsedSchema:
        parsed = self._by_id.get(schema_id)
        if parsed is None:
            stored: StoredSchema = await self._registry.call("schema_by_id", schema_id=schema_id)
            parsed = await self._parse(stored.schema_type, stored.schema, stored.references,
                                       depth)
            self._by_id.put(schema_id, parsed)
        return parsed

    async def _parse(self, schema_type: str, text: str, refs: tuple[Reference, ...],
                     depth: int) -> ParsedSchema:
        if depth > MAX_REFERENCE_DEPTH:
            raise InvalidSchemaError(
                f"Invalid schema: references nest deeper than {MAX_REFERENCE_DEPTH}")
        deps = {}
        for ref in refs:
            target = await self.version(ref.subject, ref.version, deleted=True)
            deps[ref.name] = await self._by_id_at(target.schema_id, depth + 1)
        return await asyncio.to_thread(formats.parse, schema_type, text, deps, refs)

    async def register(self, subject: str, schema: SchemaInput) -> int:
        """The id of ``schema`` under ``subject``, registering it as a new version when
        the subject does not have it (the subject's compatibility level applies:
        IncompatibleSchemaError, InvalidSchemaError)."""
        check_input(schema)
        key = (subject, schema)
        schema_id = self._ids.get(key)
        if schema_id is None:
            schema_id = await self._registry.call("register", subject=subject, schema=schema)
            self._ids.put(key, schema_id)
        return schema_id

    async def version(self, subject: str, version: int, *,
                      deleted: bool = False) -> SchemaVersion:
        """``subject``'s ``version`` (``LATEST``: cached for ``LATEST_TTL_S``).
        SubjectNotFoundError, VersionNotFoundError."""
        if version != LATEST:
            return await self._registry.call("get_version", subject=subject, version=version,
                                             deleted=deleted)
        now = self._clock()
        cached = self._latest.get(subject)
        if cached is not None and now - cached[0] < LATEST_TTL_S:
            return cached[1]
        found: SchemaVersion = await self._registry.call("get_version", subject=subject,
                                                         version=LATEST)
        self._latest.put(subject, (now, found))
        return found

    def forget(self) -> None:
        """Drop every cached answer (tests; a registry reset in place)."""
        self._by_id.clear()
        self._ids.clear()
        self._latest.clear()
