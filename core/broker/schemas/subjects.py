"""Which registered schema a produce request writes its keys or values with
(docs/schema-registry.md, "Producing with schemas"): ``writer``.

A request names, for its keys or its values, a schema id, a version of a subject, a
schema text (registered under the subject when it is new) or nothing (the subject's
latest version). The subject is the one given, else the subject name strategy's:
TOPIC_NAME ``<topic>-key`` / ``<topic>-value`` (the default), RECORD_NAME the schema's
record name, TOPIC_RECORD_NAME ``<topic>-<record name>``. As in Confluent, the schema
must be registered under that subject: its version there is reported with the records.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any, Protocol

from core.broker.schemas import formats, wire
from core.broker.schemas.encoding import Writer, payload_of
from core.broker.schemas.errors import (
    InvalidSchemaError,
    OperationNotPermittedError,
    RawSchemaInvalidError,
    SchemaChoiceError,
    SchemaLookupError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SchemaTooLargeError,
)
from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.model import (
    AVRO,
    LATEST,
    MAX_ID,
    PROTOBUF,
    SchemaInput,
    SchemaVersion,
    parse_version,
)
from core.broker.schemas.resolver import SchemaResolver


class Registry(Protocol):
    """The registry as produce uses it (``router.SchemaRegistryRouter``)."""

    resolver: SchemaResolver

    async def call(self, op: str, **args: Any) -> Any: ...


class SubjectNameStrategy(StrEnum):
    TOPIC_NAME = "TOPIC_NAME"
    RECORD_NAME = "RECORD_NAME"
    TOPIC_RECORD_NAME = "TOPIC_RECORD_NAME"


@dataclass(frozen=True, slots=True)
class SchemaChoice:
    """What a request names for its keys or values: ``schema_id``; or ``version`` of
    the subject; or ``schema``, a text of ``schema_type`` (AVRO, JSON, PROTOBUF) to
    register; or none of them: the subject's latest version. The subject is
    ``subject``, else ``strategy``'s."""

    schema_type: str | None = None
    schema: str | None = None
    schema_id: int | None = None
    version: int | None = None
    subject: str | None = None
    strategy: SubjectNameStrategy = SubjectNameStrategy.TOPIC_NAME


_SERIALIZING = "Error serializing message. "


def _clip(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters: a subject or a registry message in an error
    may echo a client's input."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _lookup_error(asked: str, reason: str) -> SchemaLookupError:
    """Confluent's 42207 text: what was asked of the registry, and why it failed."""
    return SchemaLookupError(f"{_SERIALIZING}{asked}: {_clip(reason, 500)}")


def record_name(parsed: ParsedSchema) -> str | None:
    """The schema's record name (Confluent's ``ParsedSchema.name()``): the full name of
    an Avro record, enum or fixed, of a .proto's first message; a JSON schema's
    ``title``."""
    model = parsed.model
    if parsed.schema_type == AVRO:
        node = model.schema
        if isinstance(node, str) and node in model.named:  # a referenced named type
            node = model.named[node]
        if isinstance(node, dict) and node.get("type") in ("record", "error", "enum", "fixed"):
            return str(node["name"])
        return None
    if parsed.schema_type == PROTOBUF:
        fdp = model.file
        if not fdp.message_type:
            return None
        name = fdp.message_type[0].name
        return f"{fdp.package}.{name}" if fdp.package else name
    title = model.document.get("title") if isinstance(model.document, dict) else None
    return title if isinstance(title, str) and title else None


def subject_name(strategy: SubjectNameStrategy, topic: str, *, is_key: bool,
                 parsed: ParsedSchema | None) -> str:
    """The subject ``strategy`` names for ``topic``'s keys or values written with
    ``parsed`` (None: no schema known yet, as for a version or the latest one)."""
    if strategy is SubjectNameStrategy.TOPIC_NAME:
        return f"{topic}-{'key' if is_key else 'value'}"
    if parsed is None:
        raise SchemaChoiceError(f"Cannot use schema_subject_strategy={strategy} without "
                                "schema_id or schema.")
    name = record_name(parsed)
    if name is None:
        side = "key" if is_key else "value"
        raise SchemaLookupError(
            f"{_SERIALIZING}With {strategy} the {side} schema must have a record name: an "
            "Avro record, enum or fixed, a Protobuf message, or a JSON schema with a title.")
    return name if strategy is SubjectNameStrategy.RECORD_NAME else f"{topic}-{name}"


async def writer(registry: Registry, topic: str, choice: SchemaChoice, *, is_key: bool,
                 schema_type: str | None = None) -> Writer:
    """The schema ``choice`` names for ``topic``'s keys (``is_key``) or values, compiled;
    ``schema_type``: the type the request's format writes (refused otherwise)."""
    if choice.schema_id is not None:
        resolve = _by_id
    elif choice.version is not None:
        resolve = _by_version
    elif choice.schema is not None:
        resolve = _by_text
    else:
        resolve = _latest
    subject, schema_id, version, parsed = await resolve(registry, topic, choice, is_key)
    if schema_type is not None and parsed.schema_type != schema_type:
        raise SchemaLookupError(f"{_SERIALIZING}Schema {schema_id} is a {parsed.schema_type} "
                                f"schema, not {schema_type}.")
    return Writer(subject, schema_id, version, parsed.schema_type, wire.header(schema_id),
                  payload_of(parsed))


def _subject_of(choice: SchemaChoice, topic: str, is_key: bool,
                parsed: ParsedSchema | None) -> str:
    if choice.subject is not None:
        return choice.subject
    return subject_name(choice.strategy, topic, is_key=is_key, parsed=parsed)


async def _parsed(registry: Registry, schema_id: int) -> ParsedSchema:
    try:
        if not 1 <= schema_id <= MAX_ID:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return await registry.resolver.by_id(schema_id)
    except SchemaRegistryError as exc:
        raise _lookup_error(f"Error when fetching schema by id. schemaId = {schema_id}",
                            exc.message) from None


async def _version_of(registry: Registry, subject: str, schema_id: int) -> int:
    """The (latest) version of ``subject`` that has schema ``schema_id``."""
    try:
        latest = await registry.resolver.version(subject, LATEST)
        if latest.schema_id == schema_id:
            return latest.version
        found = await registry.call("id_versions", schema_id=schema_id)
        versions = [v.version for v in found if v.subject == subject]
        if not versions:
            raise SchemaNotFoundError("the schema is not registered under the subject")
    except SchemaRegistryError as exc:
        raise _lookup_error(f"Error when fetching schema version. subject = {_clip(subject)}, "
                            f"schemaId = {schema_id}", exc.message) from None
    return max(versions)


Resolved = tuple[str, int, int, ParsedSchema]  # subject, id, version, schema


async def _by_id(registry: Registry, topic: str, choice: SchemaChoice,
                 is_key: bool) -> Resolved:
    assert choice.schema_id is not None
    parsed = await _parsed(registry, choice.schema_id)
    subject = _subject_of(choice, topic, is_key, parsed)
    return subject, choice.schema_id, await _version_of(registry, subject, choice.schema_id), \
        parsed


async def _by_version(registry: Registry, topic: str, choice: SchemaChoice,
                      is_key: bool) -> Resolved:
    assert choice.version is not None
    subject = _subject_of(choice, topic, is_key, None)
    try:
        found: SchemaVersion = await registry.resolver.version(
            subject, parse_version(choice.version))
    except SchemaRegistryError:
        raise SchemaChoiceError(f"Schema does not exist for subject: {_clip(subject)}, "
                                f"version: {choice.version}") from None
    return subject, found.schema_id, found.version, await _parsed(registry, found.schema_id)


@lru_cache(maxsize=32)
def _parse_text(schema_type: str, text: str) -> ParsedSchema:
    return formats.parse(schema_type, text, {})


async def _by_text(registry: Registry, topic: str, choice: SchemaChoice,
                   is_key: bool) -> Resolved:
    assert choice.schema is not None and choice.schema_type is not None
    schema = SchemaInput(choice.schema, choice.schema_type)
    subject = choice.subject
    try:
        if subject is None:
            named = None  # the record-name strategies name the subject after the schema
            if choice.strategy is not SubjectNameStrategy.TOPIC_NAME:
                named = await asyncio.to_thread(_parse_text, schema.schema_type, schema.schema)
            subject = subject_name(choice.strategy, topic, is_key=is_key, parsed=named)
        schema_id = await _registered(registry, subject, schema)
    except (InvalidSchemaError, SchemaTooLargeError) as exc:
        side = "key" if is_key else "value"
        raise RawSchemaInvalidError(
            f"Invalid schema: the {side} schema: {_clip(exc.message, 500)}") from None
    except SchemaRegistryError as exc:
        raise _lookup_error(f"Error when registering schema. format = {choice.schema_type}, "
                            f"subject = {_clip(str(subject))}", exc.message) from None
    return subject, schema_id, await _version_of(registry, subject, schema_id), \
        await _parsed(registry, schema_id)


async def _registered(registry: Registry, subject: str, schema: SchemaInput) -> int:
    """The id of ``schema`` under ``subject``, registered when it is new there. A
    read-only subject still answers for a schema it has (Confluent looks up first)."""
    try:
        return await registry.resolver.register(subject, schema)
    except OperationNotPermittedError:
        try:
            found: SchemaVersion = await registry.call("lookup", subject=subject,
                                                       schema=schema)
        except SchemaRegistryError:
            raise OperationNotPermittedError(
                f"Subject {_clip(subject)} is read-only and does not have this schema") from None
        return found.schema_id


async def _latest(registry: Registry, topic: str, choice: SchemaChoice,
                  is_key: bool) -> Resolved:
    subject = _subject_of(choice, topic, is_key, None)
    try:
        found: SchemaVersion = await registry.resolver.version(subject, LATEST)
    except SchemaRegistryError as exc:
        raise _lookup_error(f"Error when fetching latest schema version. subject = "
                            f"{_clip(subject)}", exc.message) from None
    return subject, found.schema_id, found.version, await _parsed(registry, found.schema_id)
