"""The Schema Registry at the leader of ``_schemas-0``: its one reader and writer.

The registry's state is the partition's records applied in order (``state``), loaded the
first time a call needs it and again whenever the partition's leader epoch moved (another
broker may have written meanwhile). Every change is checked against that state and
appended with acks=all under one lock, then applied: registrations, deletions, levels
and modes are serialized, and an id or version is never handed out twice. A failed
append drops the state, so the next call reads the log again.

Ids are cluster-wide: a schema (type, canonical text, references) registered before,
under any subject, gets its id again; a new one gets the highest id ever seen plus one.
Re-registering a subject's live schema answers its id and adds no version.

Schemas are parsed off the event loop and kept by id (``parsed.ParsedSchemas``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

import orjson

from core.broker.coordination.runtime import CoordinatorRuntime, Shard
from core.broker.errors import NotCoordinatorError
from core.broker.schemas import records
from core.broker.schemas.compatibility import incompatibilities, versions_to_check
from core.broker.schemas.errors import (
    IdDoesNotMatchError,
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaNotFoundError,
    SubjectCompatibilityNotConfiguredError,
    SubjectModeNotConfiguredError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import (
    DEFAULT_LEVEL,
    DEFAULT_MODE,
    IMPORT,
    LATEST,
    MAX_ID,
    MAX_VERSION,
    READONLY,
    READONLY_OVERRIDE,
    CompatibilityResult,
    SchemaInput,
    SchemaVersion,
    StoredSchema,
    SubjectVersion,
    check_level,
    check_mode,
    check_subject,
    parse_version,
)
from core.broker.schemas.parsed import Identity, ParsedSchemas
from core.broker.schemas.state import RegistryState
from core.clock import Clock
from core.storage.records import NewRecord, Record, build_batch

log = logging.getLogger(__name__)

PARTITION = 0  # _schemas has one partition
ACKS_ALL = -1
Change = tuple[bytes, bytes | None]  # (key, value) of a record to append


class SchemaLog(Protocol):
    """``_schemas``'s partition as the registry uses it (``InternalTopicLog``)."""

    topic: str

    def leader_epoch(self, partition: int) -> int: ...
    async def append(self, partition: int, batch: bytes, *, acks: int, timeout_ms: int,
                     leader_epoch: int | None = None) -> int: ...
    def read(self, partition: int) -> AsyncIterator[Record]: ...


def _not_found(subject: str) -> SubjectNotFoundError:
    return SubjectNotFoundError(f"Subject '{subject}' not found.")


def _read_only(state: RegistryState, subject: str) -> None:
    if state.mode(subject) in (READONLY, READONLY_OVERRIDE):
        raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")


class SchemaRegistry:
    def __init__(self, log_: SchemaLog, clock: Clock, *, append_timeout_ms: int) -> None:
        self._log = log_
        self._clock = clock
        self._append_timeout_ms = append_timeout_ms
        self._write_lock = asyncio.Lock()
        self._schemas = ParsedSchemas(log_.topic)
        # loaded per leader epoch of _schemas-0 (core.broker.coordination.runtime)
        self._runtime: CoordinatorRuntime[RegistryState] = CoordinatorRuntime(
            log_, lambda _p, _epoch: self._load(), loaded=self._installed)

    # --- state --------------------------------------------------------------------

    def on_role_change(self, partition: int, leader_epoch: int | None) -> None:
        """The replica of ``_schemas``-``partition`` here leads at ``leader_epoch`` now
        (None: not at all); the replica manager calls it."""
        self._runtime.on_role_change(partition, leader_epoch)

    def _installed(self, shard: Shard[RegistryState]) -> None:
        self._schemas.reset(shard.state)

    @property
    def _state(self) -> RegistryState | None:
        """The state loaded at the current leader epoch, if any."""
        shard = self._runtime.current(PARTITION)
        return None if shard is None else shard.state

    async def _current(self) -> RegistryState:
        """The state for the partition's current leader epoch (NotCoordinatorError when
        this broker does not lead it)."""
        return (await self._runtime.shard(PARTITION)).state

    async def _load(self) -> RegistryState:
        state, skipped, count = RegistryState(), 0, 0
        async for record in self._log.read(PARTITION):
            count += 1
            if record.key is None:
                skipped += 1
                continue
            try:
                decoded = records.decode(record.key, record.value)
            except (ValueError, TypeError, KeyError, orjson.JSONDecodeError):
                skipped += 1
                continue
            if decoded is not None:
                state.apply(decoded)
        log.info("loaded %s-%d: %d subjects, %d schemas from %d records (%d skipped)",
                 self._log.topic, PARTITION, len(state.subjects), len(state.schemas), count,
                 skipped)
        return state

    async def _write(self, state: RegistryState, changes: Sequence[Change]) -> None:
        """Append ``changes`` (acks=all, fenced by the leader epoch ``state`` was loaded
        at), then apply them to ``state``."""
        shard = self._runtime.current(PARTITION)
        if shard is None or shard.state is not state:
            raise NotCoordinatorError(
                f"{self._log.topic}-{PARTITION} changed leadership while the request was "
                "decided; nothing was written, retry")
        batch = build_batch([NewRecord(value, key) for key, value in changes],
                            now_ms=self._clock.now_ms())
        try:
            await self._runtime.append(PARTITION, shard.epoch, bytes(batch), acks=ACKS_ALL,
                                       timeout_ms=self._append_timeout_ms)
        except BaseException:
            if self._runtime.current(PARTITION) is shard:
                self._runtime.unload(PARTITION)  # written or not: the log decides next
            raise
        if self._runtime.current(PARTITION) is not shard:
            return  # reloaded meanwhile (a new epoch): the load read it
        for key, value in changes:
            decoded = records.decode(key, value)
            if decoded is not None:
                state.apply(decoded)

    # --- reads --------------------------------------------------------------------

    async def subjects(self, *, prefix: str = "", deleted: bool = False,
                       deleted_only: bool = False) -> list[str]:
        state = await self._current()
        out = []
        for subject in sorted(state.subjects):
            if not subject.startswith(prefix):
                continue
            versions = state.versions(subject, deleted=True)
            live = any(not v.deleted for v in versions)
            if (deleted_only and not live) or (not deleted_only and (live or deleted)):
                out.append(subject)
        return out

    async def versions(self, *, subject: str, deleted: bool = False,
                       deleted_only: bool = False) -> list[int]:
        state = await self._current()
        found = state.versions(subject, deleted=deleted or deleted_only)
        if not found or (not (deleted or deleted_only) and not any(not v.deleted for v in found)):
            raise _not_found(subject)
        if deleted_only:
            return [v.version for v in found if v.deleted]
        return [v.version for v in found]

    async def get_version(self, *, subject: str, version: int, deleted: bool = False,
                          fmt: str | None = None) -> SchemaVersion:
        state = await self._current()
        found = self._version(state, subject, version, deleted=deleted)
        text = await self._schemas.rendered(state, found.schema_id, found.schema, fmt)
        return SchemaVersion(found.subject, found.version, found.schema_id, found.schema_type,
                             text, found.references, found.deleted)

    @staticmethod
    def _version(state: RegistryState, subject: str, version: int, *,
                 deleted: bool) -> SchemaVersion:
        if not state.versions(subject, deleted=deleted):
            raise _not_found(subject)
        found = state.version(subject, version, deleted=deleted)
        if found is None:
            shown = "latest" if version == LATEST else version
            raise VersionNotFoundError(f"Version {shown} not found.")
        return found

    async def referenced_by(self, *, subject: str, version: int) -> list[int]:
        state = await self._current()
        found = self._version(state, subject, version, deleted=False)
        return state.referenced_by(subject, found.version)

    async def lookup(self, *, subject: str, schema: SchemaInput, deleted: bool = False,
                     normalize: bool = False) -> SchemaVersion:
        """The version of ``subject`` that has ``schema`` (the latest one)."""
        state = await self._current()
        candidates = state.versions(subject, deleted=deleted)
        if not candidates:
            raise _not_found(subject)
        parsed = await self._schemas.parse_input(state, schema, normalize=normalize)
        identity = parsed.identity(normalized=normalize)
        found = await self._schemas.matching(state, candidates, identity, normalized=normalize)
        if found is None:
            raise SchemaNotFoundError("Schema not found")
        return found

    async def schema_by_id(self, *, schema_id: int, fmt: str | None = None) -> StoredSchema:
        state = await self._current()
        stored = state.schemas.get(schema_id)
        if stored is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        text = await self._schemas.rendered(state, schema_id, stored.schema, fmt)
        return StoredSchema(stored.schema_id, stored.schema_type, text, stored.references)

    async def id_versions(self, *, schema_id: int, deleted: bool = False) -> list[SubjectVersion]:
        state = await self._current()
        if schema_id not in state.schemas:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return [SubjectVersion(v.subject, v.version) for v in state.all_versions()
                if v.schema_id == schema_id and (deleted or not v.deleted)]

    async def id_subjects(self, *, schema_id: int, deleted: bool = False) -> list[str]:
        found = await self.id_versions(schema_id=schema_id, deleted=deleted)
        return sorted({v.subject for v in found})

    async def list_schemas(self, *, prefix: str = "", deleted: bool = False,
                           latest_only: bool = False) -> list[SchemaVersion]:
        state = await self._current()
        out: list[SchemaVersion] = []
        for subject in sorted(state.subjects):
            if subject.startswith(prefix):
                found = state.versions(subject, deleted=deleted)
                out += found[-1:] if latest_only else found
        return out

    async def get_config(self, *, subject: str | None = None,
                         default_to_global: bool = False) -> str:
        state = await self._current()
        return _subject_setting(
            state.configs, state.level(None), subject, default_to_global,
            lambda: SubjectCompatibilityNotConfiguredError(
                f"Subject '{subject}' does not have subject-level compatibility configured"))

    async def get_mode(self, *, subject: str | None = None,
                       default_to_global: bool = False) -> str:
        state = await self._current()
        return _subject_setting(
            state.modes, state.mode(None), subject, default_to_global,
            lambda: SubjectModeNotConfiguredError(
                f"Subject '{subject}' does not have subject-level mode configured"))

    async def check_compatibility(self, *, subject: str, schema: SchemaInput,
                                  version: int | None = None,
                                  normalize: bool = False) -> CompatibilityResult:
        """``schema`` against ``version`` of ``subject`` (LATEST: the latest, compatible
        when there is none), or None: against the versions the subject's level names."""
        state = await self._current()
        check_subject(subject)
        parsed = await self._schemas.parse_input(state, schema, normalize=normalize)
        level = state.level(subject)
        live = state.versions(subject)
        if version is None:
            targets = versions_to_check(level, [v.version for v in live])
        elif version == LATEST:
            targets = [live[-1].version] if live else []
        else:
            targets = [self._version(state, subject, version, deleted=False).version]
        by_number = {v.version: v for v in live}
        previous = [(n, await self._schemas.of(state, by_number[n].schema_id))
                    for n in targets]
        problems = await asyncio.to_thread(incompatibilities, level, parsed, previous)
        return CompatibilityResult(not problems, tuple(problems))

    # --- changes --------------------------------------------------------------------

    async def register(self, *, subject: str, schema: SchemaInput, normalize: bool = False,
                       schema_id: int | None = None, version: int | None = None) -> int:
        """The id of ``schema`` under ``subject``: a new version unless a live version of
        the subject already has it. ``schema_id`` / ``version``: IMPORT mode's explicit id
        and version."""
        check_subject(subject)
        async with self._write_lock:
            state = await self._current()
            _read_only(state, subject)
            importing = state.mode(subject) == IMPORT
            if (schema_id is not None or version is not None) and not importing:
                raise OperationNotPermittedError(f"Subject {subject} is not in import mode")
            if schema_id is not None and not 1 <= schema_id <= MAX_ID:
                raise InvalidSchemaError(f"Invalid schema id {schema_id}: ids are 1 .. {MAX_ID}")
            if version is not None:
                version = parse_version(version, latest=False)
            parsed = await self._schemas.parse_input(state, schema, normalize=normalize)
            identity = parsed.identity(normalized=normalize)
            live = state.versions(subject)
            same = await self._schemas.matching(state, live, identity, normalized=normalize)
            if same is not None:
                if schema_id is not None and schema_id != same.schema_id:
                    raise IdDoesNotMatchError(f"Schema already registered with id "
                                              f"{same.schema_id} instead of input id {schema_id}")
                return same.schema_id
            if not importing:
                await self._check_level(state, subject, parsed, live)
            new_id = await self._new_id(state, parsed, identity, schema_id, normalized=normalize)
            every = state.versions(subject, deleted=True)
            if version is None:
                version = every[-1].version + 1 if every else 1
                if version > MAX_VERSION:
                    raise InvalidVersionError(f"Subject {subject} has no version numbers left")
            elif any(v.version == version for v in every):
                raise OperationNotPermittedError(
                    f"Version {version} of subject {subject} already exists")
            stored = state.schemas.get(new_id)
            text = stored.schema if stored is not None else parsed.text
            entry = SchemaVersion(subject, version, new_id, parsed.schema_type, text,
                                  parsed.references)
            await self._write(state, [(records.schema_key(subject, version),
                                       records.schema_value(entry))])
            if stored is None and self._state is state:
                self._schemas.remember(new_id, parsed, stored_text=text, normalized=normalize)
            return new_id

    async def _check_level(self, state: RegistryState, subject: str, parsed: ParsedSchema,
                           live: Sequence[SchemaVersion]) -> None:
        level = state.level(subject)
        targets = set(versions_to_check(level, [v.version for v in live]))
        previous = [(v.version, await self._schemas.of(state, v.schema_id))
                    for v in live if v.version in targets]
        problems = await asyncio.to_thread(incompatibilities, level, parsed, previous)
        if problems:
            raise IncompatibleSchemaError(
                f"Schema being registered is incompatible with an earlier schema for subject "
                f"\"{subject}\", details: [{', '.join(problems)}]")

    async def _new_id(self, state: RegistryState, parsed: ParsedSchema, identity: Identity,
                      schema_id: int | None, *, normalized: bool) -> int:
        existing = (await self._schemas.index(state, normalized=normalized)).get(identity)
        if schema_id is None:
            if existing is not None:
                return existing
            if state.max_id >= MAX_ID:
                raise OperationNotPermittedError("No schema ids are left")
            return state.max_id + 1
        if existing is not None and existing != schema_id:
            raise IdDoesNotMatchError(f"Schema already registered with id {existing} instead "
                                      f"of input id {schema_id}")
        if schema_id in state.schemas and await self._schemas.identity(
                state, schema_id, normalized=normalized) != identity:
            raise OperationNotPermittedError(
                f"Overwrite new schema with id {schema_id} is not permitted.")
        return schema_id

    def _referenced(self, state: RegistryState, subject: str, version: int, *,
                    deleted: bool) -> None:
        if state.referenced_by(subject, version, deleted=deleted):
            raise ReferenceExistsError(
                "One or more references exist to the schema "
                f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}.")

    async def delete_version(self, *, subject: str, version: int, permanent: bool = False) -> int:
        async with self._write_lock:
            state = await self._current()
            _read_only(state, subject)
            every = state.versions(subject, deleted=True)
            if not every:
                raise _not_found(subject)
            if version == LATEST:
                target = every[-1] if permanent else state.version(subject, LATEST)
            else:
                target = next((v for v in every if v.version == version), None)
            if target is None:
                raise VersionNotFoundError(
                    f"Version {'latest' if version == LATEST else version} not found.")
            if permanent:
                if not target.deleted:
                    raise VersionNotSoftDeletedError(
                        f"Subject '{subject}' Version {target.version} was not deleted first "
                        "before being permanently deleted")
                self._referenced(state, subject, target.version, deleted=True)
                await self._write(state, [(records.schema_key(subject, target.version), None)])
                self._forget(target.schema_id)
            else:
                if target.deleted:
                    raise VersionSoftDeletedError(
                        f"Subject '{subject}' Version {target.version} was soft deleted. Set "
                        "permanent=true to delete permanently")
                self._referenced(state, subject, target.version, deleted=False)
                gone = SchemaVersion(target.subject, target.version, target.schema_id,
                                     target.schema_type, target.schema, target.references,
                                     deleted=True)
                await self._write(state, [(records.schema_key(subject, target.version),
                                           records.schema_value(gone))])
            return target.version

    async def delete_subject(self, *, subject: str, permanent: bool = False) -> list[int]:
        async with self._write_lock:
            state = await self._current()
            _read_only(state, subject)
            every = state.versions(subject, deleted=True)
            if not every:
                raise _not_found(subject)
            live = [v for v in every if not v.deleted]
            changes: list[Change]
            if permanent:
                if live:
                    raise SubjectNotSoftDeletedError(
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted")
                for v in every:
                    self._referenced(state, subject, v.version, deleted=True)
                changes = [(records.schema_key(subject, v.version), None) for v in every]
                changes.append((records.delete_subject_key(subject), None))
                await self._write(state, changes)
                for v in every:
                    self._forget(v.schema_id)
                return [v.version for v in every]
            if not live:
                raise SubjectSoftDeletedError(
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                    "permanently")
            for v in live:
                self._referenced(state, subject, v.version, deleted=False)
            changes = [(records.delete_subject_key(subject),
                        records.delete_subject_value(subject, every[-1].version))]
            if subject in state.configs:
                changes.append((records.config_key(subject), None))
            if subject in state.modes:
                changes.append((records.mode_key(subject), None))
            await self._write(state, changes)
            return [v.version for v in live]

    def _forget(self, schema_id: int) -> None:
        """After a version went for good: its id may have gone with it."""
        state = self._state
        if state is None or schema_id not in state.schemas:
            self._schemas.forget(schema_id)

    async def set_config(self, *, level: str, subject: str | None = None) -> str:
        level = check_level(level)
        if subject is not None:
            check_subject(subject)
        async with self._write_lock:
            state = await self._current()
            await self._write(state, [(records.config_key(subject), records.config_value(level))])
        return level

    async def delete_config(self, *, subject: str | None = None) -> str:
        async with self._write_lock:
            state = await self._current()
            if subject is None:
                previous = state.level(None)
                if None in state.configs:
                    await self._write(state, [(records.config_key(None), None)])
                return previous if previous else DEFAULT_LEVEL
            if subject not in state.configs:
                if not state.versions(subject, deleted=True):
                    raise _not_found(subject)
                raise SubjectCompatibilityNotConfiguredError(
                    f"Subject '{subject}' does not have subject-level compatibility configured")
            previous = state.configs[subject]
            await self._write(state, [(records.config_key(subject), None)])
            return previous

    async def set_mode(self, *, mode: str, subject: str | None = None,
                       force: bool = False) -> str:
        mode = check_mode(mode)
        if subject is not None:
            check_subject(subject)
        async with self._write_lock:
            state = await self._current()
            if mode == IMPORT and not force:
                busy = state.versions(subject) if subject is not None else [
                    s for s in state.subjects if state.versions(s)]
                if busy:
                    raise OperationNotPermittedError(
                        "Cannot import since found existing subjects")
            await self._write(state, [(records.mode_key(subject), records.mode_value(mode))])
        return mode

    async def delete_mode(self, *, subject: str | None = None) -> str:
        async with self._write_lock:
            state = await self._current()
            if subject is None:
                previous = state.mode(None)
                if None in state.modes:
                    await self._write(state, [(records.mode_key(None), None)])
                return previous or DEFAULT_MODE
            if subject not in state.modes:
                if not state.versions(subject, deleted=True):
                    raise _not_found(subject)
                raise SubjectModeNotConfiguredError(
                    f"Subject '{subject}' does not have subject-level mode configured")
            previous = state.modes[subject]
            await self._write(state, [(records.mode_key(subject), None)])
            return previous


#: the registry's calls as the router sends them (op name -> method name)
OPS: dict[str, str] = {name: name for name in (
    "subjects", "versions", "get_version", "referenced_by", "lookup", "schema_by_id",
    "id_versions", "id_subjects", "list_schemas", "get_config", "get_mode",
    "check_compatibility", "register", "delete_version", "delete_subject", "set_config",
    "delete_config", "set_mode", "delete_mode")}


def method_of(registry: SchemaRegistry, op: str) -> Callable[..., Any]:
    """The registry's method for call ``op`` (KeyError for an unknown one)."""
    return getattr(registry, OPS[op])  # type: ignore[no-any-return]


def _subject_setting(values: Mapping[str | None, str], global_value: str, subject: str | None,
                     default_to_global: bool, missing: Callable[[], Exception]) -> str:
    """A subject's compatibility level or mode: its own, else (``default_to_global``, or
    no subject asked) the global one, else ``missing()`` raised."""
    if subject is None:
        return global_value
    value = values.get(subject)
    if value is not None:
        return value
    if default_to_global:
        return global_value
    raise missing()
