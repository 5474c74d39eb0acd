"""The registry as the records of ``_schemas`` left it: subjects and their versions,
schemas by id, compatibility levels and modes. Pure data: ``apply`` one record after
the other, in log order; reads never change it."""

from __future__ import annotations

from collections.abc import Iterator

from core.broker.schemas.model import (
    DEFAULT_LEVEL,
    DEFAULT_MODE,
    LATEST,
    SchemaVersion,
    StoredSchema,
)
from core.broker.schemas.records import (
    ConfigRecord,
    DeleteSubjectRecord,
    ModeRecord,
    Record,
    SchemaRecord,
)


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.schemas: dict[int, StoredSchema] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0  # the highest id ever seen, deleted ones included: never reused
        self._users: dict[int, int] = {}  # schema id -> versions that have it

    # --- changes --------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        if isinstance(record, SchemaRecord):
            self._apply_schema(record)
        elif isinstance(record, DeleteSubjectRecord):
            if record.version is not None:
                versions = self.subjects.get(record.subject, {})
                for number, v in list(versions.items()):
                    if number <= record.version and not v.deleted:
                        versions[number] = _with_deleted(v)
        elif isinstance(record, ConfigRecord):
            _set(self.configs, record.subject, record.level)
        elif isinstance(record, ModeRecord):
            _set(self.modes, record.subject, record.mode)

    def _apply_schema(self, record: SchemaRecord) -> None:
        versions = self.subjects.setdefault(record.subject, {})
        old = versions.pop(record.version, None)
        if old is not None:
            self._release(old.schema_id)
        new = record.value
        if new is not None:
            versions[record.version] = new
            self._users[new.schema_id] = self._users.get(new.schema_id, 0) + 1
            if new.schema_id not in self.schemas:
                self.schemas[new.schema_id] = StoredSchema(new.schema_id, new.schema_type,
                                                           new.schema, new.references)
            self.max_id = max(self.max_id, new.schema_id)
        if not versions:
            del self.subjects[record.subject]

    def _release(self, schema_id: int) -> None:
        left = self._users.get(schema_id, 0) - 1
        if left > 0:
            self._users[schema_id] = left
        else:
            self._users.pop(schema_id, None)
            self.schemas.pop(schema_id, None)

    # --- reads ----------------------------------------------------------------------

    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, ascending; soft-deleted ones only when ``deleted``."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def version(self, subject: str, number: int, *, deleted: bool = False) -> SchemaVersion | None:
        """Version ``number`` (LATEST: the latest) of ``subject``, None when there is none
        (or it is soft-deleted and ``deleted`` is false)."""
        if number == LATEST:
            live = self.versions(subject, deleted=deleted)
            return live[-1] if live else None
        found = self.subjects.get(subject, {}).get(number)
        if found is None or (found.deleted and not deleted):
            return None
        return found

    def all_versions(self) -> Iterator[SchemaVersion]:
        for subject in sorted(self.subjects):
            yield from self.versions(subject, deleted=True)

    def referenced_by(self, subject: str, version: int, *, deleted: bool = False) -> list[int]:
        """Ids of the schemas of versions that reference ``subject`` ``version`` (soft-
        deleted versions too when ``deleted``)."""
        out = set()
        for v in self.all_versions():
            if (deleted or not v.deleted) and any(
                    r.subject == subject and r.version == version for r in v.references):
                out.add(v.schema_id)
        return sorted(out)

    def level(self, subject: str | None) -> str:
        """The compatibility level in force for ``subject`` (its own, else the global)."""
        return self.configs.get(subject) or self.configs.get(None) or DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE


def _with_deleted(v: SchemaVersion) -> SchemaVersion:
    return SchemaVersion(v.subject, v.version, v.schema_id, v.schema_type, v.schema,
                         v.references, deleted=True)


def _set(table: dict[str | None, str], key: str | None, value: str | None) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value
