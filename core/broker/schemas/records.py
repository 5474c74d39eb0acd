"""The records of ``_schemas``, in Confluent Schema Registry's layout (JSON keys and
values), so the topic reads like Confluent's:

    key                                                        value (None: a tombstone)
    {"keytype":"SCHEMA","subject":s,"version":v,"magic":1}     {"subject","version","id",
                                                                "schema","schemaType",
                                                                "references","deleted"}
    {"keytype":"CONFIG","subject":s|null,"magic":0}            {"compatibilityLevel": L}
    {"keytype":"MODE","subject":s|null,"magic":0}              {"mode": M}
    {"keytype":"DELETE_SUBJECT","subject":s,"magic":0}         {"subject": s, "version": v}

``schemaType`` is left out for AVRO (as Confluent does); a missing one reads as AVRO.
A SCHEMA record with ``deleted`` true is a soft-deleted version, a tombstone a version
deleted for good. DELETE_SUBJECT soft-deletes every version of the subject up to
``version``. Keys are written with their fields in one order, so compaction keeps the
last record of each. Other key types (Confluent's NOOP) are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from core.broker.schemas.model import AVRO, Reference, SchemaVersion

SCHEMA, CONFIG, MODE, DELETE_SUBJECT = "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT"


@dataclass(frozen=True, slots=True)
class SchemaRecord:
    subject: str
    version: int
    value: SchemaVersion | None  # None: deleted for good


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    subject: str | None  # None: the global level
    level: str | None  # None: back to the default


@dataclass(frozen=True, slots=True)
class ModeRecord:
    subject: str | None
    mode: str | None


@dataclass(frozen=True, slots=True)
class DeleteSubjectRecord:
    subject: str
    version: int | None  # None: a tombstone (nothing to do)


Record = SchemaRecord | ConfigRecord | ModeRecord | DeleteSubjectRecord


# --- encoding ---------------------------------------------------------------------------


def schema_key(subject: str, version: int) -> bytes:
    return orjson.dumps({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def schema_value(v: SchemaVersion) -> bytes:
    doc: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id,
                           "schema": v.schema}
    if v.schema_type != AVRO:
        doc["schemaType"] = v.schema_type
    doc["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                         for r in v.references]
    doc["deleted"] = v.deleted
    return orjson.dumps(doc)


def config_key(subject: str | None) -> bytes:
    return orjson.dumps({"keytype": CONFIG, "subject": subject, "magic": 0})


def config_value(level: str) -> bytes:
    return orjson.dumps({"compatibilityLevel": level})


def mode_key(subject: str | None) -> bytes:
    return orjson.dumps({"keytype": MODE, "subject": subject, "magic": 0})


def mode_value(mode: str) -> bytes:
    return orjson.dumps({"mode": mode})


def delete_subject_key(subject: str) -> bytes:
    return orjson.dumps({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def delete_subject_value(subject: str, version: int) -> bytes:
    return orjson.dumps({"subject": subject, "version": version})


# --- decoding ---------------------------------------------------------------------------


def _subject(doc: dict[str, Any], *, optional: bool = False) -> str | None:
    subject = doc.get("subject")
    if subject is None and optional:
        return None
    if not isinstance(subject, str):
        raise ValueError("the record has no subject")
    return subject


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} is not an integer")
    return value


def decode(key: bytes, value: bytes | None) -> Record | None:
    """The record as one of the types above; None for a key type the registry does not
    use. ValueError when it is not a record of this layout."""
    doc = orjson.loads(key)
    if not isinstance(doc, dict):
        raise ValueError("the key is not a JSON object")
    keytype = doc.get("keytype")
    body = None if value is None else orjson.loads(value)
    if body is not None and not isinstance(body, dict):
        raise ValueError("the value is not a JSON object")
    if keytype == SCHEMA:
        subject = _subject(doc)
        assert subject is not None
        version = _int(doc.get("version"), "version")
        if body is None:
            return SchemaRecord(subject, version, None)
        refs = tuple(Reference(str(r["name"]), str(r["subject"]), _int(r["version"], "version"))
                     for r in body.get("references") or ())
        schema = body.get("schema")
        if not isinstance(schema, str):
            raise ValueError("the schema is not a string")
        return SchemaRecord(subject, version, SchemaVersion(
            subject, version, _int(body.get("id"), "id"), str(body.get("schemaType") or AVRO),
            schema, refs, bool(body.get("deleted", False))))
    if keytype == CONFIG:
        level = None if body is None else body.get("compatibilityLevel")
        return ConfigRecord(_subject(doc, optional=True),
                            None if level is None else str(level).upper())
    if keytype == MODE:
        mode = None if body is None else body.get("mode")
        return ModeRecord(_subject(doc, optional=True), None if mode is None else str(mode).upper())
    if keytype == DELETE_SUBJECT:
        subject = _subject(doc)
        assert subject is not None
        return DeleteSubjectRecord(subject, None if body is None else _int(body.get("version"),
                                                                            "version"))
    return None
