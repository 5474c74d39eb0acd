"""The Schema Registry's request and response shapes, for the OpenAPI document only
(``OPENAPI_SCHEMAS``): the routes read bodies by hand (``routes``) and build answers as
plain dicts. Names and fields are Confluent's (its registry's OpenAPI: ``Schema``,
``RegisterSchemaRequest``, ``ConfigUpdateRequest``, ...); errors are the app's
``ErrorBody`` (``{"error_code", "message"}``), which is Confluent's ``ErrorMessage``."""

from __future__ import annotations

from typing import Annotated, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from api.openapi import enum_schema
from core.broker.schemas.model import LEVELS, MODES, SCHEMA_TYPES

_TYPE = Field(description="AVRO (left out of answers, the default), JSON or PROTOBUF",
              examples=["JSON"])
_SCHEMA_TEXT = ("The schema's text: Avro's JSON, a JSON Schema, or `.proto` source (a "
                "base64 `FileDescriptorProto` is taken too)")
_REFERENCES = Field(description="The schemas this one uses (left out of answers when none)")
SchemaTypeName = Annotated[str, enum_schema(*SCHEMA_TYPES), _TYPE]


class SchemaReference(TypedDict):
    """Another registered schema this one uses."""

    name: Annotated[str, Field(description="The name the schema uses for it: an Avro full "
                               "name, a `.proto` import path, a JSON Schema `$ref` URI",
                               examples=["com.acme.Money"])]
    subject: Annotated[str, Field(description="The subject it is registered under",
                                  examples=["money-value"])]
    version: Annotated[int, Field(description="Its version; -1 (or `latest`) when "
                                  "registering: the latest, stored as its number",
                                  examples=[1])]


class RegisterSchemaRequest(TypedDict):
    """A schema to register, look up or check."""

    schema: Annotated[str, Field(description=_SCHEMA_TEXT,
                                 examples=['{"type": "string"}'])]
    schemaType: NotRequired[SchemaTypeName]
    references: NotRequired[Annotated[list[SchemaReference], _REFERENCES]]
    id: NotRequired[Annotated[int, Field(description="IMPORT mode only: the id to register "
                                         "it under (1 .. 2^31-1)", examples=[100])]]
    version: NotRequired[Annotated[int, Field(description="IMPORT mode only: the version to "
                                              "register it as (1 .. 2^31-1)",
                                              examples=[1])]]


class RegisterSchemaResponse(TypedDict):
    id: Annotated[int, Field(description="The schema's id: the same for every subject and "
                             "version that has this schema", examples=[1])]


class Schema(TypedDict):
    """One version of a subject."""

    subject: Annotated[str, Field(description="The subject", examples=["orders-value"])]
    version: Annotated[int, Field(description="The version number (1, 2, ...)",
                                  examples=[1])]
    id: Annotated[int, Field(description="The schema's id", examples=[1])]
    schemaType: NotRequired[SchemaTypeName]
    references: NotRequired[Annotated[list[SchemaReference], _REFERENCES]]
    schema: Annotated[str, Field(description=_SCHEMA_TEXT, examples=['"string"'])]


class SchemaString(TypedDict):
    """A schema by its id."""

    schemaType: NotRequired[SchemaTypeName]
    references: NotRequired[Annotated[list[SchemaReference], _REFERENCES]]
    schema: Annotated[str, Field(description=_SCHEMA_TEXT + "; `format=serialized`: a "
                                 "PROTOBUF schema's base64 `FileDescriptorProto`",
                                 examples=['"string"'])]


class SubjectVersion(TypedDict):
    subject: Annotated[str, Field(description="The subject", examples=["orders-value"])]
    version: Annotated[int, Field(description="The version number", examples=[1])]


_LEVEL = enum_schema(*LEVELS)
_MODE = enum_schema(*MODES)


class Config(TypedDict):
    compatibilityLevel: Annotated[str, _LEVEL, Field(
        description="The compatibility level new versions are checked at",
        examples=["BACKWARD"])]


class ConfigUpdateRequest(TypedDict):
    compatibility: Annotated[str, _LEVEL, Field(
        description="The compatibility level, in any case (`compatibilityLevel` is read "
        "too)", examples=["FULL"])]


class Mode(TypedDict):
    mode: Annotated[str, _MODE, Field(
        description="READWRITE; READONLY (and READONLY_OVERRIDE): no registrations or "
        "deletes; IMPORT: registrations keep the given ids and versions",
        examples=["READWRITE"])]


class ModeUpdateRequest(TypedDict):
    mode: Annotated[str, _MODE, Field(description="The mode, in any case",
                                      examples=["READONLY"])]


class CompatibilityCheckResponse(TypedDict):
    is_compatible: Annotated[bool, Field(description="Whether the schema is compatible",
                                         examples=[True])]
    messages: NotRequired[Annotated[list[str], Field(
        description="`verbose=true`: each incompatibility found, with the version and "
        "the level")]]


#: The shapes, for ``components/schemas``.
OPENAPI_SCHEMAS = {cls.__name__: cls for cls in (
    SchemaReference, RegisterSchemaRequest, RegisterSchemaResponse, Schema, SchemaString,
    SubjectVersion, Config, ConfigUpdateRequest, Mode, ModeUpdateRequest,
    CompatibilityCheckResponse)}
