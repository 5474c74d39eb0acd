"""The Schema Registry at the leader of ``_schemas-0`` (core.broker.schemas.registry) over
an in-memory partition: ids and versions, lookups, soft and permanent deletes, references,
compatibility levels (each level against a sequence of versions), modes, reloads after a
leadership change, compaction and failed appends; the internal-call codec (router)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from _schemas_log_fake import MemoryLog

from core.broker.errors import NotCoordinatorError, RequestTimedOutError
from core.broker.schemas import records
from core.broker.schemas.errors import (
    IdDoesNotMatchError,
    IncompatibleSchemaError,
    InvalidCompatibilityLevelError,
    InvalidModeError,
    InvalidSchemaError,
    InvalidSubjectError,
    InvalidVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaNotFoundError,
    SchemaTooLargeError,
    SubjectCompatibilityNotConfiguredError,
    SubjectModeNotConfiguredError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from core.broker.schemas.model import (
    LATEST,
    MAX_SCHEMA_CHARS,
    CompatibilityResult,
    Reference,
    SchemaInput,
    SchemaVersion,
    parse_version,
)
from core.broker.schemas.registry import SchemaRegistry
from core.broker.schemas.router import from_wire, serve, to_wire
from core.clock import ManualClock
from core.errors import InvalidRequestError


def rec(*fields: tuple[str, str] | tuple[str, str, Any], name: str = "R") -> SchemaInput:
    out = []
    for field in fields:
        doc: dict[str, Any] = {"name": field[0], "type": field[1]}
        if len(field) == 3:
            doc["default"] = field[2]
        out.append(doc)
    return SchemaInput(json.dumps({"type": "record", "name": name, "fields": out}))


A1 = rec(("a", "int"))
A2 = rec(("a", "int"), ("b", "string", "x"))  # BACKWARD and FORWARD compatible with A1
A3 = rec(("a", "int"), ("b", "string", "x"), ("c", "long", 0))


@pytest.fixture
def log() -> MemoryLog:
    return MemoryLog()


@pytest.fixture
def reg(log: MemoryLog) -> SchemaRegistry:
    return SchemaRegistry(log, ManualClock(1_700_000_000_000), append_timeout_ms=1000)


def fresh(log: MemoryLog) -> SchemaRegistry:
    return SchemaRegistry(log, ManualClock(1_700_000_000_000), append_timeout_ms=1000)


# --- ids and versions -------------------------------------------------------------------


async def test_one_schema_one_id_across_subjects_and_no_new_version(reg: SchemaRegistry,
                                                                    log: MemoryLog) -> None:
    assert await reg.register(subject="a", schema=A1) == 1
    assert await reg.register(subject="a", schema=A1) == 1  # again: same id, no version
    assert await reg.versions(subject="a") == [1]
    spaced = SchemaInput(json.dumps(json.loads(A1.schema), indent=2))
    assert await reg.register(subject="b", schema=spaced) == 1  # other subject, same id
    assert await reg.register(subject="a", schema=A2) == 2
    assert await reg.versions(subject="a") == [1, 2]
    assert log.appends == 3
    assert [v.subject for v in await reg.id_versions(schema_id=1)] == ["a", "b"]
    assert await reg.id_subjects(schema_id=1) == ["a", "b"]


async def test_versions_continue_after_deletes_and_ids_are_never_reused(
        reg: SchemaRegistry) -> None:
    await reg.register(subject="s", schema=A1)
    await reg.register(subject="s", schema=A2)
    assert await reg.delete_version(subject="s", version=2) == 2
    # the soft-deleted schema again: a new version with its id
    assert await reg.register(subject="s", schema=A2) == 2
    assert await reg.versions(subject="s") == [1, 3]
    assert await reg.versions(subject="s", deleted=True) == [1, 2, 3]
    assert await reg.versions(subject="s", deleted_only=True) == [2]
    await reg.delete_subject(subject="s")
    await reg.delete_subject(subject="s", permanent=True)
    with pytest.raises(SchemaNotFoundError):
        await reg.schema_by_id(schema_id=2)
    # A2 is gone for good: it gets a new id, never 2 again
    assert await reg.register(subject="t", schema=A2) == 3
    assert await reg.versions(subject="t") == [1]


async def test_reads(reg: SchemaRegistry) -> None:
    await reg.register(subject="s", schema=A1)
    await reg.register(subject="s", schema=A2)
    latest = await reg.get_version(subject="s", version=LATEST)
    assert (latest.version, latest.schema_id, latest.schema_type) == (2, 2, "AVRO")
    assert (await reg.get_version(subject="s", version=1)).schema == json.dumps(
        json.loads(A1.schema), separators=(",", ":"))
    with pytest.raises(VersionNotFoundError, match="Version 3 not found"):
        await reg.get_version(subject="s", version=3)
    with pytest.raises(SubjectNotFoundError, match="Subject 'nope' not found"):
        await reg.get_version(subject="nope", version=1)
    with pytest.raises(SubjectNotFoundError):
        await reg.versions(subject="nope")
    found = await reg.lookup(subject="s", schema=A1)
    assert (found.version, found.schema_id) == (1, 1)
    with pytest.raises(SchemaNotFoundError, match="Schema not found"):
        await reg.lookup(subject="s", schema=A3)
    with pytest.raises(SubjectNotFoundError):
        await reg.lookup(subject="nope", schema=A1)
    assert await reg.subjects() == ["s"]
    stored = await reg.schema_by_id(schema_id=2)
    assert stored.schema_type == "AVRO" and "\"b\"" in stored.schema
    with pytest.raises(SchemaNotFoundError, match="Schema 9 not found"):
        await reg.schema_by_id(schema_id=9)
    assert [v.version for v in await reg.list_schemas()] == [1, 2]
    assert [v.version for v in await reg.list_schemas(latest_only=True)] == [2]


async def test_soft_deleted_versions_and_subjects(reg: SchemaRegistry) -> None:
    await reg.register(subject="s", schema=A1)
    await reg.register(subject="s", schema=A2)
    await reg.delete_version(subject="s", version=1)
    with pytest.raises(VersionSoftDeletedError, match="Version 1 was soft deleted"):
        await reg.delete_version(subject="s", version=1)
    with pytest.raises(VersionNotFoundError):
        await reg.get_version(subject="s", version=1)
    assert (await reg.get_version(subject="s", version=1, deleted=True)).deleted
    with pytest.raises(SchemaNotFoundError):
        await reg.lookup(subject="s", schema=A1)
    assert (await reg.lookup(subject="s", schema=A1, deleted=True)).version == 1
    with pytest.raises(VersionNotSoftDeletedError, match="not deleted first"):
        await reg.delete_version(subject="s", version=2, permanent=True)
    assert await reg.delete_version(subject="s", version=1, permanent=True) == 1
    with pytest.raises(VersionNotFoundError):
        await reg.delete_version(subject="s", version=1)
    with pytest.raises(SubjectNotSoftDeletedError, match="not deleted first"):
        await reg.delete_subject(subject="s", permanent=True)
    await reg.set_config(subject="s", level="FULL")
    await reg.set_mode(subject="s", mode="READWRITE")
    assert await reg.delete_subject(subject="s") == [2]
    with pytest.raises(SubjectSoftDeletedError, match="was soft deleted"):
        await reg.delete_subject(subject="s")
    assert await reg.subjects() == [] and await reg.subjects(deleted=True) == ["s"]
    assert await reg.subjects(deleted_only=True) == ["s"]
    with pytest.raises(SubjectNotFoundError):
        await reg.versions(subject="s")
    # a soft delete of the subject takes its level and mode with it (as Confluent)
    with pytest.raises(SubjectCompatibilityNotConfiguredError):
        await reg.get_config(subject="s")
    with pytest.raises(SubjectModeNotConfiguredError):
        await reg.get_mode(subject="s")
    assert await reg.delete_subject(subject="s", permanent=True) == [2]
    with pytest.raises(SubjectNotFoundError):
        await reg.delete_subject(subject="s")
    with pytest.raises(SubjectNotFoundError):
        await reg.delete_version(subject="s", version=LATEST)


# --- references -------------------------------------------------------------------------

ADDRESS = SchemaInput(json.dumps({"type": "record", "name": "Address", "namespace": "x",
                                  "fields": [{"name": "street", "type": "string"}]}))
USER = json.dumps({"type": "record", "name": "User", "namespace": "x",
                   "fields": [{"name": "home", "type": "Address"}]})


async def test_references(reg: SchemaRegistry) -> None:
    await reg.register(subject="address", schema=ADDRESS)
    ref = Reference("x.Address", "address", LATEST)
    user_id = await reg.register(subject="user", schema=SchemaInput(USER, "AVRO", (ref,)))
    stored = await reg.schema_by_id(schema_id=user_id)
    assert stored.references == (Reference("x.Address", "address", 1),)  # latest resolved
    assert await reg.referenced_by(subject="address", version=1) == [user_id]
    # the same schema with the same references is the same schema
    again = SchemaInput(USER, "AVRO", (Reference("x.Address", "address", 1),))
    assert await reg.register(subject="user2", schema=again) == user_id
    with pytest.raises(ReferenceExistsError, match="subject=address,version=1"):
        await reg.delete_version(subject="address", version=1)
    with pytest.raises(ReferenceExistsError):
        await reg.delete_subject(subject="address")
    with pytest.raises(InvalidSchemaError, match="not registered"):
        await reg.register(subject="u3", schema=SchemaInput(
            USER, "AVRO", (Reference("x.Address", "address", 7),)))
    with pytest.raises(InvalidSchemaError, match="Address"):
        await reg.register(subject="u3", schema=SchemaInput(USER))  # unresolved name
    # once the referencing versions are gone, the referenced one may go
    for subject in ("user", "user2"):
        await reg.delete_subject(subject=subject)
    await reg.delete_subject(subject="address")  # its referrers are soft-deleted
    with pytest.raises(ReferenceExistsError):  # ... and still hold it for good
        await reg.delete_subject(subject="address", permanent=True)
    for subject in ("user", "user2"):
        await reg.delete_subject(subject=subject, permanent=True)
    await reg.delete_subject(subject="address", permanent=True)


# --- levels -----------------------------------------------------------------------------

# v1 -> v2 -> v3, where v3 is compatible with v2 and not with v1 in the level's direction
BACKWARD_CHAIN = [rec(("a", "int")), rec(("a", "int"), ("b", "string", "x")),
                  rec(("a", "int"), ("b", "string"))]
FORWARD_CHAIN = [rec(("a", "int"), ("b", "string")), rec(("a", "int"), ("b", "string", "x")),
                 rec(("a", "int"))]
PROMOTED = [A1, A2, rec(("a", "long"), ("b", "string", "x"))]  # new reads old, not back


@pytest.mark.parametrize(("level", "chain", "third_ok"), [
    ("BACKWARD", BACKWARD_CHAIN, True),
    ("BACKWARD_TRANSITIVE", BACKWARD_CHAIN, False),
    ("FORWARD", FORWARD_CHAIN, True),
    ("FORWARD_TRANSITIVE", FORWARD_CHAIN, False),
    ("FULL", [A1, A2, A3], True),
    ("FULL_TRANSITIVE", [A1, A2, A3], True),
    ("NONE", [A1, rec(("a", "string")), rec(("z", "bytes"))], True),
    ("FULL_TRANSITIVE", BACKWARD_CHAIN, False),
    ("FULL_TRANSITIVE", FORWARD_CHAIN, False),
    ("FULL", FORWARD_CHAIN, True),
    ("BACKWARD", PROMOTED, True),
    ("FORWARD", PROMOTED, False),
    ("FULL", PROMOTED, False),
])
async def test_levels_against_a_chain(reg: SchemaRegistry, level: str, chain: list[SchemaInput],
                                      third_ok: bool) -> None:
    await reg.set_config(subject="s", level=level.lower())
    await reg.register(subject="s", schema=chain[0])
    await reg.register(subject="s", schema=chain[1])
    result = await reg.check_compatibility(subject="s", schema=chain[2])
    assert result.is_compatible is third_ok
    if third_ok:
        assert await reg.register(subject="s", schema=chain[2]) == 3
    else:
        with pytest.raises(IncompatibleSchemaError, match='subject "s"'):
            await reg.register(subject="s", schema=chain[2])
        assert result.messages and f"{{compatibility: '{level}'}}" in result.messages


async def test_default_level_is_backward_and_checks_only_live_versions(
        reg: SchemaRegistry) -> None:
    assert await reg.get_config() == "BACKWARD"
    await reg.register(subject="s", schema=A1)
    breaking = rec(("a", "string"))
    with pytest.raises(IncompatibleSchemaError) as info:
        await reg.register(subject="s", schema=breaking)
    assert "TYPE_MISMATCH" in info.value.message and "{oldSchemaVersion: 1}" in info.value.message
    await reg.delete_version(subject="s", version=1)
    assert await reg.register(subject="s", schema=breaking) == 2  # nothing live to break


async def test_compatibility_checks(reg: SchemaRegistry) -> None:
    # latest of a subject without versions: compatible (Confluent)
    assert (await reg.check_compatibility(subject="new", schema=A1, version=LATEST)
            ).is_compatible
    await reg.register(subject="s", schema=A1)
    await reg.register(subject="s", schema=A2)
    with pytest.raises(VersionNotFoundError):
        await reg.check_compatibility(subject="s", schema=A1, version=5)
    with pytest.raises(SubjectNotFoundError):
        await reg.check_compatibility(subject="nope", schema=A1, version=1)
    bad = rec(("a", "string"))
    result = await reg.check_compatibility(subject="s", schema=bad, version=1)
    assert result == CompatibilityResult(False, result.messages)
    assert any("TYPE_MISMATCH" in m for m in result.messages)
    with pytest.raises(InvalidSchemaError):
        await reg.check_compatibility(subject="s", schema=SchemaInput("{"), version=1)


async def test_config(reg: SchemaRegistry) -> None:
    with pytest.raises(SubjectCompatibilityNotConfiguredError, match="subject-level"):
        await reg.get_config(subject="s")
    assert await reg.get_config(subject="s", default_to_global=True) == "BACKWARD"
    assert await reg.set_config(level="full") == "FULL"
    assert await reg.get_config(subject="s", default_to_global=True) == "FULL"
    assert await reg.set_config(subject="s", level="NONE") == "NONE"
    assert await reg.get_config(subject="s") == "NONE"
    with pytest.raises(InvalidCompatibilityLevelError):
        await reg.set_config(level="SIDEWAYS")
    assert await reg.delete_config(subject="s") == "NONE"
    with pytest.raises(SubjectNotFoundError):
        await reg.delete_config(subject="s")  # no level, no versions
    await reg.register(subject="s", schema=A1)
    with pytest.raises(SubjectCompatibilityNotConfiguredError):
        await reg.delete_config(subject="s")
    assert await reg.delete_config() == "FULL"
    assert await reg.get_config() == "BACKWARD"


# --- modes ------------------------------------------------------------------------------


async def test_read_only_mode(reg: SchemaRegistry) -> None:
    await reg.register(subject="s", schema=A1)
    assert await reg.set_mode(mode="readonly") == "READONLY"
    with pytest.raises(OperationNotPermittedError, match="read-only"):
        await reg.register(subject="s", schema=A2)
    with pytest.raises(OperationNotPermittedError):
        await reg.delete_version(subject="s", version=1)
    with pytest.raises(OperationNotPermittedError):
        await reg.delete_subject(subject="s")
    assert (await reg.lookup(subject="s", schema=A1)).version == 1  # reads go on
    await reg.set_mode(subject="s", mode="READWRITE")  # a subject's own mode wins
    assert await reg.register(subject="s", schema=A2) == 2
    assert await reg.get_mode(subject="s") == "READWRITE"
    assert await reg.delete_mode(subject="s") == "READWRITE"
    with pytest.raises(SubjectModeNotConfiguredError):
        await reg.get_mode(subject="s")
    assert await reg.get_mode(subject="s", default_to_global=True) == "READONLY"
    assert await reg.delete_mode() == "READONLY"
    assert await reg.get_mode() == "READWRITE"
    with pytest.raises(InvalidModeError):
        await reg.set_mode(mode="SOMETIMES")


async def test_import_mode(reg: SchemaRegistry) -> None:
    with pytest.raises(OperationNotPermittedError, match="not in import mode"):
        await reg.register(subject="s", schema=A1, schema_id=10)
    await reg.register(subject="busy", schema=A1)
    with pytest.raises(OperationNotPermittedError, match="existing subjects"):
        await reg.set_mode(mode="IMPORT")
    assert await reg.set_mode(mode="IMPORT", force=True) == "IMPORT"
    # explicit ids and versions, no compatibility check
    assert await reg.register(subject="s", schema=A2, schema_id=10, version=5) == 10
    assert await reg.register(subject="s", schema=rec(("a", "string")), schema_id=11,
                              version=6) == 11
    assert await reg.versions(subject="s") == [5, 6]
    with pytest.raises(IdDoesNotMatchError, match="id 10 instead of input id 12"):
        await reg.register(subject="t", schema=A2, schema_id=12)
    with pytest.raises(OperationNotPermittedError, match="Overwrite"):
        await reg.register(subject="t", schema=A3, schema_id=10)
    with pytest.raises(OperationNotPermittedError, match="already exists"):
        await reg.register(subject="s", schema=A3, schema_id=12, version=5)
    await reg.set_mode(mode="READWRITE")
    assert await reg.register(subject="u", schema=A3) == 12  # after the highest id


# --- the log --------------------------------------------------------------------------


async def test_a_new_leader_loads_everything(reg: SchemaRegistry, log: MemoryLog) -> None:
    await reg.register(subject="s", schema=A1)
    await reg.register(subject="s", schema=A2)
    await reg.register(subject="t", schema=A1)
    await reg.delete_version(subject="s", version=1)
    await reg.set_config(subject="t", level="FULL")
    await reg.set_mode(subject="t", mode="READONLY")
    other = fresh(log)
    assert await other.versions(subject="s", deleted=True) == [1, 2]
    assert await other.versions(subject="s") == [2]
    assert await other.get_config(subject="t") == "FULL"
    assert await other.get_mode(subject="t") == "READONLY"
    assert await other.register(subject="u", schema=A3) == 3
    # the first registry, on the next epoch, sees what the other wrote
    log.epoch += 1
    assert await reg.versions(subject="u") == [1]
    assert await reg.register(subject="u", schema=A3) == 3


async def test_compaction_keeps_the_state(reg: SchemaRegistry, log: MemoryLog) -> None:
    for schema in (A1, A2, A3):
        await reg.register(subject="s", schema=schema)
    await reg.register(subject="t", schema=A1)
    await reg.delete_version(subject="s", version=1)
    await reg.delete_version(subject="s", version=1, permanent=True)
    await reg.delete_subject(subject="t")
    await reg.set_config(level="FULL")
    await reg.set_config(level="NONE")
    before = [await reg.versions(subject="s"), await reg.subjects(deleted=True),
              await reg.get_config()]
    log.compact()
    after_reg = fresh(log)
    after = [await after_reg.versions(subject="s"), await after_reg.subjects(deleted=True),
             await after_reg.get_config()]
    assert before == after == [[2, 3], ["s", "t"], "NONE"]


async def test_a_failed_append_leaves_nothing_behind(reg: SchemaRegistry, log: MemoryLog) -> None:
    await reg.register(subject="s", schema=A1)
    log.fail_next = RequestTimedOutError("no ack in time")
    with pytest.raises(RequestTimedOutError):
        await reg.register(subject="s", schema=A2)
    assert await reg.versions(subject="s") == [1]  # re-read from the log
    assert await reg.register(subject="s", schema=A2) == 2


async def test_not_the_leader(reg: SchemaRegistry, log: MemoryLog) -> None:
    log.epoch = -1
    with pytest.raises(NotCoordinatorError):
        await reg.subjects()


async def test_records_of_other_writers(log: MemoryLog) -> None:
    """Confluent's own records read as well (schemaType absent means AVRO, NOOP keys and
    garbage skipped)."""
    from core.storage.records import NewRecord, build_batch
    value = {"subject": "c", "version": 1, "id": 7, "schema": A1.schema, "deleted": False}
    rows = [NewRecord(orjson.dumps(value), b'{"keytype":"SCHEMA","subject":"c","version":1,'
                                           b'"magic":1}'),
            NewRecord(b"{}", b'{"keytype":"NOOP","magic":0}'),
            NewRecord(b"not json", b"neither"),
            NewRecord(b'{"compatibilityLevel":"FULL"}', b'{"keytype":"CONFIG","magic":0}')]
    await log.append(0, bytes(build_batch(rows, now_ms=1)), acks=-1, timeout_ms=1)
    reg = fresh(log)
    assert (await reg.get_version(subject="c", version=1)).schema_id == 7
    assert await reg.get_config() == "FULL"
    assert await reg.register(subject="d", schema=A2) == 8


async def test_normalize(reg: SchemaRegistry) -> None:
    one = SchemaInput(json.dumps({"type": "record", "name": "R", "namespace": "n",
                                  "fields": [{"name": "a", "type": "int"}]}))
    two = SchemaInput(json.dumps({"namespace": "n", "name": "R", "type": "record",
                                  "fields": [{"type": "int", "name": "a"}]}))
    first = await reg.register(subject="s", schema=one, normalize=True)
    assert json.loads((await reg.schema_by_id(schema_id=first)).schema)["name"] == "n.R"
    assert await reg.register(subject="s", schema=two, normalize=True) == first
    assert (await reg.lookup(subject="s", schema=two, normalize=True)).version == 1


async def test_input_bounds(reg: SchemaRegistry) -> None:
    with pytest.raises(InvalidSubjectError):
        await reg.register(subject="", schema=A1)
    with pytest.raises(InvalidSubjectError):
        await reg.register(subject="a\x00b", schema=A1)
    with pytest.raises(InvalidSubjectError):
        await reg.register(subject="x" * 2000, schema=A1)
    with pytest.raises(SchemaTooLargeError):
        await reg.register(subject="s", schema=SchemaInput(
            json.dumps({"type": "string", "doc": "x" * MAX_SCHEMA_CHARS})))
    with pytest.raises(InvalidSchemaError, match="Empty schema"):
        await reg.register(subject="s", schema=SchemaInput("  "))
    with pytest.raises(InvalidSchemaError, match="schema type"):
        await reg.register(subject="s", schema=SchemaInput("{}", "XML"))
    with pytest.raises(InvalidSchemaError, match="twice"):
        await reg.register(subject="s", schema=SchemaInput(
            USER, "AVRO", (Reference("a", "s", 1), Reference("a", "s", 2))))
    for text in ("0", "-2", "2147483648", "x", "1.5"):
        with pytest.raises(InvalidVersionError, match="not a valid version"):
            parse_version(text)
    assert parse_version("latest") == parse_version("-1") == LATEST
    assert parse_version("2147483647") == 2**31 - 1


# --- the internal call codec ------------------------------------------------------------


async def test_calls_travel_as_json(reg: SchemaRegistry) -> None:
    value = [SchemaVersion("s", 1, 1, "AVRO", "{}", (Reference("n", "t", 2),), False),
             CompatibilityResult(False, ("m",))]
    assert from_wire(orjson.loads(orjson.dumps(to_wire(value)))) == value
    body = orjson.dumps(to_wire({"subject": "s", "schema": A1}))
    assert orjson.loads(await serve(reg, "register", body)) == 1
    assert from_wire(orjson.loads(await serve(reg, "get_version", orjson.dumps(
        {"subject": "s", "version": 1})))).schema_id == 1
    for op, body in (("nope", b"{}"), ("register", b"[1]"), ("register", b"{"),
                     ("register", b'{"subject": "s", "bogus": 1}'),
                     ("register", b'{"subject": "s", "schema": {"@type": "Nope"}}')):
        with pytest.raises(InvalidRequestError):
            await serve(reg, op, body)


def test_schema_records_layout() -> None:
    v = SchemaVersion("s", 3, 9, "JSON", "{}", (Reference("r", "t", 1),), True)
    key, value = records.schema_key("s", 3), records.schema_value(v)
    assert key == b'{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}'
    assert orjson.loads(value) == {"subject": "s", "version": 3, "id": 9, "schema": "{}",
                                   "schemaType": "JSON", "deleted": True,
                                   "references": [{"name": "r", "subject": "t", "version": 1}]}
    assert records.decode(key, value) == records.SchemaRecord("s", 3, v)
    assert b"schemaType" not in records.schema_value(
        SchemaVersion("s", 1, 1, "AVRO", "{}"))  # as Confluent: AVRO is the default
    assert records.config_key(None) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert records.decode(records.mode_key("s"), None) == records.ModeRecord("s", None)
