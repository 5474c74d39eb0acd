"""The registry's values: schema types, compatibility levels, modes, references, versions,
and the bounds every input is held to."""

from __future__ import annotations

from dataclasses import dataclass

from core.broker.schemas.errors import (
    InvalidCompatibilityLevelError,
    InvalidModeError,
    InvalidSchemaError,
    InvalidSubjectError,
    InvalidVersionError,
    SchemaTooLargeError,
)

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
#: in the order Confluent lists them (``GET /schemas/types``)
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)

BACKWARD, BACKWARD_TRANSITIVE = "BACKWARD", "BACKWARD_TRANSITIVE"
FORWARD, FORWARD_TRANSITIVE = "FORWARD", "FORWARD_TRANSITIVE"
FULL, FULL_TRANSITIVE = "FULL", "FULL_TRANSITIVE"
NONE = "NONE"
LEVELS = (BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE,
          NONE)
DEFAULT_LEVEL = BACKWARD

READWRITE, READONLY, READONLY_OVERRIDE, IMPORT = (
    "READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MODES = (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT)
DEFAULT_MODE = READWRITE

#: bounds of every input (docs/schema-registry.md)
MAX_SCHEMA_CHARS = 512 * 1024  # a schema's text; its record must fit max.message.bytes
MAX_SUBJECT_CHARS = 1024
MAX_REFERENCES = 100  # direct references of one schema
MAX_REFERENCE_DEPTH = 16  # references of references ...
MAX_REFERENCE_NAME_CHARS = 1024
MAX_VERSION = 2**31 - 1
MAX_ID = 2**31 - 1
#: ``version`` meaning the latest one (``latest`` or -1 in a path, Confluent's spelling)
LATEST = -1


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema this one uses: ``name`` as the schema names it (an Avro full name, an
    import path, a ``$ref`` URI), registered as ``subject`` ``version``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class SchemaInput:
    """A schema as a client submits it."""

    schema: str
    schema_type: str = AVRO
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """A schema under its id (the same for every subject and version that has it)."""

    schema_id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One version of a subject."""

    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class SubjectVersion:
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class CompatibilityResult:
    is_compatible: bool
    messages: tuple[str, ...] = ()


# --- validation -------------------------------------------------------------------------


def check_subject(subject: str) -> str:
    """``subject`` when it is a valid subject name, else InvalidSubjectError: not empty,
    at most MAX_SUBJECT_CHARS, no control characters."""
    if not subject or len(subject) > MAX_SUBJECT_CHARS or any(
            ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in subject):
        raise InvalidSubjectError("The specified subject is not valid.")
    return subject


def invalid_version(text: object) -> InvalidVersionError:
    return InvalidVersionError(
        f"The specified version '{text}' is not a valid version id. Allowed values are between "
        "[1, 2^31-1] and the string \"latest\"")


def parse_version(text: str | int, *, latest: bool = True) -> int:
    """A version as a path gives it: ``latest`` or -1 (LATEST, when ``latest``), else
    1 .. 2^31-1; InvalidVersionError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        number = text
    elif isinstance(text, str) and text.lower() == "latest" and latest:
        return LATEST
    else:
        try:
            number = int(str(text), 10)
        except ValueError:
            raise invalid_version(text) from None
    if number == LATEST and latest:
        return LATEST
    if not 1 <= number <= MAX_VERSION:
        raise invalid_version(text)
    return number


def check_level(level: object) -> str:
    if isinstance(level, str) and level.upper() in LEVELS:
        return level.upper()
    raise InvalidCompatibilityLevelError(
        "Invalid compatibility level. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive")


def check_mode(mode: object) -> str:
    if isinstance(mode, str) and mode.upper() in MODES:
        return mode.upper()
    raise InvalidModeError(
        "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT")


def check_schema_type(schema_type: object) -> str:
    if isinstance(schema_type, str) and schema_type.upper() in SCHEMA_TYPES:
        return schema_type.upper()
    raise InvalidSchemaError(f"Invalid schema type {schema_type!s:.64}: valid types are "
                             f"{', '.join(SCHEMA_TYPES)}")


def check_input(schema: SchemaInput) -> SchemaInput:
    """``schema`` within bounds: its text (SchemaTooLargeError past MAX_SCHEMA_CHARS),
    type and references."""
    if not isinstance(schema.schema, str) or not schema.schema.strip():
        raise InvalidSchemaError("Empty schema")
    if len(schema.schema) > MAX_SCHEMA_CHARS:
        raise SchemaTooLargeError(
            f"Schema is too large: {len(schema.schema)} characters, at most {MAX_SCHEMA_CHARS}")
    check_schema_type(schema.schema_type)
    if len(schema.references) > MAX_REFERENCES:
        raise InvalidSchemaError(f"A schema has at most {MAX_REFERENCES} references")
    names = set()
    for ref in schema.references:
        if not isinstance(ref.name, str) or not ref.name or \
                len(ref.name) > MAX_REFERENCE_NAME_CHARS:
            raise InvalidSchemaError("Invalid reference: its name must be a non-empty string "
                                     f"of at most {MAX_REFERENCE_NAME_CHARS} characters")
        if ref.name in names:
            raise InvalidSchemaError(f"Invalid reference: the name {ref.name!r} is given twice")
        names.add(ref.name)
        try:
            check_subject(ref.subject)
            parse_version(ref.version)
        except (InvalidSubjectError, InvalidVersionError) as exc:
            raise InvalidSchemaError(f"Invalid reference {ref.name!r}: {exc.message}") from None
    return schema
