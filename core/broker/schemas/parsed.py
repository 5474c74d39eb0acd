"""Parsed schemas of one registry state: each stored schema parsed once (with its
references resolved in that state), kept by id (the most recently used
``PARSED_CACHE``), and the index of schema identities to ids that gives a schema
registered before its id again.

Parsing is CPU work: it runs off the event loop (``asyncio.to_thread``). Everything here
belongs to the state given to ``reset``; the registry resets it whenever it loads the
log again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from core.broker.schemas import formats
from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import (
    LATEST,
    MAX_REFERENCE_DEPTH,
    Reference,
    SchemaInput,
    SchemaVersion,
    check_input,
    parse_version,
)
from core.broker.schemas.state import RegistryState

log = logging.getLogger(__name__)

PARSED_CACHE = 1000
Identity = tuple[str, str, tuple[Reference, ...]]


def _parse(schema_type: str, text: str, deps: Mapping[str, ParsedSchema],
           refs: tuple[Reference, ...], normalize: bool) -> ParsedSchema:
    return formats.parse(schema_type, text, deps, refs, normalize=normalize)


class ParsedSchemas:
    def __init__(self, topic: str) -> None:
        self._topic = topic
        self._state: RegistryState | None = None
        self._parsed: OrderedDict[int, ParsedSchema] = OrderedDict()
        self._indexes: dict[bool, dict[Identity, int]] = {}  # normalized? -> identity -> id

    def reset(self, state: RegistryState) -> None:
        self._state = state
        self._parsed.clear()
        self._indexes.clear()

    async def of(self, state: RegistryState, schema_id: int, depth: int = 0) -> ParsedSchema:
        """Stored schema ``schema_id``, parsed (InvalidSchemaError if it does not parse)."""
        cached = self._parsed.get(schema_id)
        if cached is not None:
            self._parsed.move_to_end(schema_id)
            return cached
        stored = state.schemas[schema_id]
        deps = await self.dependencies(state, stored.references, depth + 1, deleted=True)
        parsed = await asyncio.to_thread(_parse, stored.schema_type, stored.schema, deps,
                                         stored.references, False)
        if state is self._state:
            self._parsed[schema_id] = parsed
            while len(self._parsed) > PARSED_CACHE:
                self._parsed.popitem(last=False)
        return parsed

    async def dependencies(self, state: RegistryState, refs: Sequence[Reference], depth: int,
                           *, deleted: bool) -> dict[str, ParsedSchema]:
        """The parsed schemas ``refs`` name, by reference name (soft-deleted versions too
        when ``deleted``)."""
        if depth > MAX_REFERENCE_DEPTH:
            raise InvalidSchemaError(f"Invalid schema: references nest deeper than "
                                     f"{MAX_REFERENCE_DEPTH}")
        deps = {}
        for ref in refs:
            target = state.version(ref.subject, ref.version, deleted=deleted)
            if target is None:
                raise InvalidSchemaError(
                    f"Invalid schema: the reference {ref.name!r} names subject "
                    f"'{ref.subject}' version {ref.version}, which is not registered")
            deps[ref.name] = await self.of(state, target.schema_id, depth)
        return deps

    async def parse_input(self, state: RegistryState, schema: SchemaInput, *,
                          normalize: bool) -> ParsedSchema:
        """A client's schema, parsed with its references (``latest`` resolved to the
        version it names now)."""
        check_input(schema)
        refs = []
        for ref in schema.references:
            if parse_version(ref.version) == LATEST:
                latest = state.version(ref.subject, LATEST)
                ref = Reference(ref.name, ref.subject, latest.version if latest else LATEST)
            refs.append(ref)
        deps = await self.dependencies(state, refs, 1, deleted=False)
        return await asyncio.to_thread(_parse, schema.schema_type.upper(), schema.schema, deps,
                                       tuple(refs), normalize)

    async def identity(self, state: RegistryState, schema_id: int, *,
                       normalized: bool) -> Identity | None:
        try:
            return (await self.of(state, schema_id)).identity(normalized=normalized)
        except InvalidSchemaError as exc:  # stored by another version or tool
            log.warning("schema %d in %s cannot be parsed: %s", schema_id, self._topic, exc)
            return None

    async def index(self, state: RegistryState, *, normalized: bool) -> dict[Identity, int]:
        """Every stored schema's identity -> its id (the lowest when two share one)."""
        index = self._indexes.get(normalized)
        if index is None:
            index = {}
            for schema_id in sorted(state.schemas):
                identity = await self.identity(state, schema_id, normalized=normalized)
                if identity is not None:
                    index.setdefault(identity, schema_id)
            if state is self._state:
                self._indexes[normalized] = index
        return index

    async def matching(self, state: RegistryState, candidates: Sequence[SchemaVersion],
                       identity: Identity, *, normalized: bool) -> SchemaVersion | None:
        """The last of ``candidates`` whose schema has ``identity``."""
        for v in reversed(candidates):
            if await self.identity(state, v.schema_id, normalized=normalized) == identity:
                return v
        return None

    async def rendered(self, state: RegistryState, schema_id: int, text: str,
                       fmt: str | None) -> str:
        """``text`` (schema ``schema_id``'s), or in format ``fmt`` (``serialized``)."""
        if fmt != "serialized":
            return text
        return formats.render(await self.of(state, schema_id), fmt)

    def remember(self, schema_id: int, parsed: ParsedSchema, *, stored_text: str,
                 normalized: bool) -> None:
        """A new id was registered for ``parsed``, stored as ``stored_text``."""
        if normalized or parsed.text != stored_text:
            self._indexes.clear()  # the stored text is not what was parsed: parse it again
            return
        self._parsed[schema_id] = parsed
        for normalized_index, index in self._indexes.items():
            index.setdefault(parsed.identity(normalized=normalized_index), schema_id)

    def forget(self, schema_id: int) -> None:
        """Schema ``schema_id`` is gone for good."""
        self._parsed.pop(schema_id, None)
        for index in self._indexes.values():
            for key in [k for k, v in index.items() if v == schema_id]:
                del index[key]
