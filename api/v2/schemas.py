"""v2 request and response shapes as TypedDicts (field names exactly Confluent's).

Request types are validated with pydantic ``TypeAdapter``s over the raw body
(``api.v2.body``): unknown fields are rejected (``extra="forbid"``). Response types
only document the answers (``api.openapi``); routes build plain dicts and serialize
them with orjson. franz extensions are marked in the field descriptions.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import ConfigDict, Field, TypeAdapter, WithJsonSchema, with_config
from typing_extensions import TypedDict

from api.input_limits import MAX_RECORDS_PER_REQUEST, Offset, PartitionId, Timestamp
from api.openapi import enum_schema

_FORBID = ConfigDict(extra="forbid")
NonNegative = Annotated[int, Field(ge=0)]

_B64 = "standard base64"
_TOPIC = Field(description="The topic name", examples=["orders"])
_PARTITION = Field(description="The partition id", examples=[0])


# --- produce ----------------------------------------------------------------------------


@with_config(_FORBID)
class RecordHeaderIn(TypedDict):
    """franz extension: a record header; ``value`` is standard base64 or null."""

    key: Annotated[str, Field(description="The header name", examples=["trace-id"])]
    value: Annotated[str | None, Field(description=f"The header value, {_B64}; null: none",
                                       examples=["MTIz"])]


_HEADERS = Field(description="franz extension: record headers, in order")
_TIMESTAMP = Field(description="franz extension: the record timestamp, epoch ms "
                   "(0..2^63-1); default: now", examples=[1727784000000])
_RECORD_PARTITION = Field(description="The partition to write to; default: by the key's "
                          "hash, else round-robin per request")


@with_config(_FORBID)
class BinaryProduceRecord(TypedDict, total=False):
    key: Annotated[str | None, Field(description=f"The key, {_B64}; null or missing: no key",
                                     examples=["a2V5"])]
    value: Annotated[str | None, Field(description=f"The value, {_B64}; null: a tombstone",
                                       examples=["Y29uZmx1ZW50"])]
    partition: Annotated[PartitionId | None, _RECORD_PARTITION]
    headers: Annotated[list[RecordHeaderIn] | None, _HEADERS]
    timestamp: Annotated[Timestamp | None, _TIMESTAMP]


@with_config(_FORBID)
class JsonProduceRecord(TypedDict, total=False):
    key: Annotated[Any, Field(description="The key, any JSON value (stored as its JSON "
                              "text); null or missing: no key", examples=["user-1"])]
    value: Annotated[Any, Field(description="The value, any JSON value (stored as its JSON "
                                "text)", examples=[{"clicks": 3}])]
    partition: Annotated[PartitionId | None, _RECORD_PARTITION]
    headers: Annotated[list[RecordHeaderIn] | None, _HEADERS]
    timestamp: Annotated[Timestamp | None, _TIMESTAMP]


_RECORDS = f"The records, 1 to {MAX_RECORDS_PER_REQUEST:,} per request"
_KEY_SCHEMA = Field(description="avro, jsonschema and protobuf formats only: ignored here")
_SCHEMA_ID = Field(description="avro, jsonschema and protobuf formats only: ignored here")


@with_config(_FORBID)
class BinaryProduceRequest(TypedDict, total=False):
    records: Required[Annotated[list[BinaryProduceRecord], Field(
        min_length=1, max_length=MAX_RECORDS_PER_REQUEST, description=_RECORDS)]]
    key_schema: Annotated[str | None, _KEY_SCHEMA]
    key_schema_id: Annotated[int | None, _SCHEMA_ID]
    value_schema: Annotated[str | None, _KEY_SCHEMA]
    value_schema_id: Annotated[int | None, _SCHEMA_ID]


@with_config(_FORBID)
class JsonProduceRequest(TypedDict, total=False):
    records: Required[Annotated[list[JsonProduceRecord], Field(
        min_length=1, max_length=MAX_RECORDS_PER_REQUEST, description=_RECORDS)]]
    key_schema: Annotated[str | None, _KEY_SCHEMA]
    key_schema_id: Annotated[int | None, _SCHEMA_ID]
    value_schema: Annotated[str | None, _KEY_SCHEMA]
    value_schema_id: Annotated[int | None, _SCHEMA_ID]


@with_config(_FORBID)
class SchemaProduceRecord(TypedDict, total=False):
    key: Annotated[Any, Field(description="The key in the JSON form of the key schema "
                              "(Avro's JSON encoding, a JSON document, Protobuf's JSON "
                              "mapping); null or missing: no key", examples=["user-1"])]
    value: Annotated[Any, Field(description="The value in the JSON form of the value schema; "
                                "null: a tombstone", examples=[{"name": "ada", "age": 36}])]
    partition: Annotated[PartitionId | None, _RECORD_PARTITION]
    headers: Annotated[list[RecordHeaderIn] | None, _HEADERS]
    timestamp: Annotated[Timestamp | None, _TIMESTAMP]


_SCHEMA_TEXT = ("The {side} schema's text, of the format's type; registered under "
                "`<topic>-{side}` when that subject does not have it yet")
_SCHEMA_BY_ID = ("The id of a registered schema to write {side}s with (registered under "
                 "`<topic>-{side}`); instead of `{side}_schema`")


@with_config(_FORBID)
class SchemaProduceRequest(TypedDict, total=False):
    """avro, jsonschema, protobuf: records written with Schema Registry schemas. Keys
    need a key schema and values a value schema (by text or id) unless they are null."""

    records: Required[Annotated[list[SchemaProduceRecord], Field(
        min_length=1, max_length=MAX_RECORDS_PER_REQUEST, description=_RECORDS)]]
    key_schema: Annotated[str | None, Field(description=_SCHEMA_TEXT.format(side="key"))]
    key_schema_id: Annotated[int | None, Field(description=_SCHEMA_BY_ID.format(side="key"),
                                               examples=[1])]
    value_schema: Annotated[str | None, Field(
        description=_SCHEMA_TEXT.format(side="value"),
        examples=['{"type": "record", "name": "User", "fields": [{"name": "name", "type": '
                  '"string"}, {"name": "age", "type": "int"}]}'])]
    value_schema_id: Annotated[int | None, Field(
        description=_SCHEMA_BY_ID.format(side="value"), examples=[2])]


class ProduceOffset(TypedDict):
    partition: Annotated[int | None, Field(description="The partition written; null when "
                                           "the record failed")]
    offset: Annotated[int | None, Field(description="The record's offset; null when it "
                                        "failed")]
    error_code: Annotated[int | None, Field(description="null on success, else the error "
                                            "code (413, 40402, 50002, 50003)")]
    error: Annotated[str | None, Field(description="null on success, else why the record "
                                       "failed")]


_WRITTEN_WITH = ("The id of the schema {side}s were written with (avro, jsonschema, "
                 "protobuf); null when none was given, and always for binary and json")


class ProduceResponse(TypedDict):
    offsets: Annotated[list[ProduceOffset], Field(description="One entry per record, in "
                                                  "request order")]
    key_schema_id: Annotated[int | None, Field(description=_WRITTEN_WITH.format(side="key"))]
    value_schema_id: Annotated[int | None, Field(
        description=_WRITTEN_WITH.format(side="value"))]


# --- metadata ---------------------------------------------------------------------------


class ReplicaOut(TypedDict):
    broker: Annotated[int, Field(description="The broker holding the replica")]
    leader: Annotated[bool, Field(description="Whether this replica is the leader")]
    in_sync: Annotated[bool, Field(description="Whether this replica is in sync (ISR)")]


class PartitionOut(TypedDict):
    partition: Annotated[int, _PARTITION]
    leader: Annotated[int, Field(description="The leader's broker id; -1 while none")]
    replicas: Annotated[list[ReplicaOut], Field(description="The partition's replicas")]


class TopicOut(TypedDict):
    name: Annotated[str, _TOPIC]
    configs: Annotated[dict[str, str], Field(description="The topic's config overrides, "
                                             "name to value")]
    partitions: Annotated[list[PartitionOut], Field(description="The topic's partitions")]


class PartitionOffsetsOut(TypedDict):
    beginning_offset: Annotated[int, Field(description="The first offset (the log start)")]
    end_offset: Annotated[int, Field(description="The offset the next record will get "
                                     "(the high watermark)")]


class BrokersOut(TypedDict):
    brokers: Annotated[list[int], Field(description="The ids of the live brokers")]


class ErrorBody(TypedDict):
    error_code: Annotated[int, Field(description="The HTTP status, or a 5-digit Confluent "
                                     "code that starts with it", examples=[40401])]
    message: Annotated[str, Field(description="What went wrong",
                                  examples=["Topic 'orders' not found."])]


# --- consumers --------------------------------------------------------------------------

_NAME = "1..249 characters of `[A-Za-z0-9._-]`; default: a generated id"
CreateConsumerRequest = TypedDict(
    "CreateConsumerRequest",
    {
        "name": Annotated[str | None, Field(description=f"The instance id: {_NAME}",
                                            examples=["my_consumer"])],
        "id": Annotated[str | None, Field(description="Deprecated alias of `name`")],
        "format": Annotated[str | None, enum_schema(
            "binary", "json", "avro", "jsonschema", "protobuf", nullable=True), Field(
            description="The embedded format of records read (any case); default binary. "
            "avro, jsonschema and protobuf decode records written with the broker's Schema "
            "Registry schemas")],
        "auto.offset.reset": Annotated[str | None, enum_schema(
            "earliest", "latest", "none", nullable=True), Field(
            description="Where to start without a committed offset (any case); default "
            "the broker's")],
        "auto.commit.enable": Annotated[str | bool | None, WithJsonSchema(
            {"anyOf": [{"type": "string", "enum": ["true", "false"]}, {"type": "boolean"},
                       {"type": "null"}]}), Field(
            description='Commit positions after each read: "true" or "false" (any case), or '
            "a JSON boolean")],
        "fetch.min.bytes": Annotated[int | None, Field(
            description="Bytes a read waits for, -1..10000000 (-1: the default)")],
        "consumer.request.timeout.ms": Annotated[int | None, Field(
            description="Longest wait of a read, ms, 0..2^31-1 (capped by the broker's "
            "consumer.request.timeout.max.ms)")],
        "responseMinBytes": Annotated[int | None, Field(
            description="Legacy alias of `fetch.min.bytes`")],
        "requestWaitMs": Annotated[int | None, Field(
            description="Legacy alias of `consumer.request.timeout.ms`")],
    },
    total=False,
)
CreateConsumerRequest.__pydantic_config__ = _FORBID  # type: ignore[attr-defined]


class CreateConsumerResponse(TypedDict):
    instance_id: Annotated[str, Field(description="The instance id: `{instance}` of the "
                                      "instance's routes", examples=["my_consumer"])]
    base_uri: Annotated[str, Field(description="The instance's absolute URL")]


@with_config(_FORBID)
class SubscriptionRequest(TypedDict, total=False):
    topics: Annotated[list[str] | None, Field(description="Topics to subscribe to; wins "
                                              "over `topic_pattern`",
                                              examples=[["orders", "payments"]])]
    topic_pattern: Annotated[str | None, Field(description="A regular expression: every "
                                               "topic it matches, now and later",
                                               examples=["orders-.*"])]


class SubscriptionOut(TypedDict):
    topics: Annotated[list[str], Field(description="The topics subscribed to")]


@with_config(_FORBID)
class TopicPartitionIn(TypedDict):
    topic: Annotated[str, _TOPIC]
    partition: Annotated[PartitionId, _PARTITION]


class TopicPartitionOut(TypedDict):
    topic: Annotated[str, _TOPIC]
    partition: Annotated[int, _PARTITION]


@with_config(_FORBID)
class PartitionsRequest(TypedDict):
    partitions: Annotated[list[TopicPartitionIn], Field(description="The partitions")]


class AssignmentsOut(TypedDict):
    partitions: Annotated[list[TopicPartitionOut], Field(description="The partitions the "
                                                         "instance reads")]


_METADATA = Field(description="Commit metadata: ignored by a seek")


@with_config(_FORBID)
class SeekOffset(TypedDict):
    topic: Annotated[str, _TOPIC]
    partition: Annotated[PartitionId, _PARTITION]
    offset: Annotated[Offset, Field(description="The next offset to read, 0..2^63-2")]
    metadata: NotRequired[Annotated[str | None, _METADATA]]


@with_config(_FORBID)
class SeekTimestamp(TypedDict):
    topic: Annotated[str, _TOPIC]
    partition: Annotated[PartitionId, _PARTITION]
    timestamp: Annotated[str | int, Field(
        description="Seek to the first record at or after this time: ISO-8601 (naive "
        "means UTC), or epoch ms 0..2^63-1 (franz extension)",
        examples=["2024-10-01T12:00:00Z"])]
    metadata: NotRequired[Annotated[str | None, _METADATA]]


@with_config(_FORBID)
class PositionsRequest(TypedDict, total=False):
    offsets: Annotated[list[SeekOffset] | None, Field(description="Partitions to move to "
                                                      "an offset")]
    timestamps: Annotated[list[SeekTimestamp] | None, Field(description="Partitions to "
                                                            "move to a time")]


@with_config(_FORBID)
class CommitOffset(TypedDict):
    topic: Annotated[str, _TOPIC]
    partition: Annotated[PartitionId, _PARTITION]
    offset: Annotated[Offset, Field(description="The last offset processed, 0..2^63-2; "
                                    "franz commits offset + 1")]
    metadata: NotRequired[Annotated[str | None, Field(description="Stored with the "
                                                      "commit; default empty")]]


@with_config(_FORBID)
class CommitRequest(TypedDict):
    offsets: Annotated[list[CommitOffset], Field(description="The offsets to commit")]


class CommittedOffsetOut(TypedDict):
    topic: Annotated[str, _TOPIC]
    partition: Annotated[int, _PARTITION]
    offset: Annotated[int, Field(description="The committed offset: the next to read")]
    metadata: Annotated[str, Field(description="The commit's metadata; empty when none")]


class CommittedOffsetsOut(TypedDict):
    offsets: Annotated[list[CommittedOffsetOut], Field(description="Partitions with a "
                                                       "commit; the others are left out")]


# --- consumed records -------------------------------------------------------------------


class RecordHeaderOut(TypedDict):
    key: Annotated[str, Field(description="The header name")]
    value: Annotated[str | None, Field(description=f"The header value, {_B64}; null: none")]


_OFFSET = Field(description="The record's offset")
_TIMESTAMP_OUT = Field(description="franz extension: the record timestamp, epoch ms")
_TIMESTAMP_TYPE = Field(description="franz extension: whether the producer "
                        "(`CreateTime`) or the broker (`LogAppendTime`) set it")
_HEADERS_OUT = Field(description="franz extension: the record headers, in record order")


class BinaryRecordOut(TypedDict):
    topic: Annotated[str, _TOPIC]
    partition: Annotated[int, _PARTITION]
    offset: Annotated[int, _OFFSET]
    key: Annotated[str | None, Field(description=f"The key, {_B64}; null: none")]
    value: Annotated[str | None, Field(description=f"The value, {_B64}; null: none")]
    timestamp: Annotated[int, _TIMESTAMP_OUT]
    timestamp_type: Annotated[Literal["CreateTime", "LogAppendTime"], _TIMESTAMP_TYPE]
    headers: Annotated[list[RecordHeaderOut], _HEADERS_OUT]


class JsonRecordOut(TypedDict):
    topic: Annotated[str, _TOPIC]
    partition: Annotated[int, _PARTITION]
    offset: Annotated[int, _OFFSET]
    key: Annotated[Any, Field(description="The key, its stored bytes parsed as JSON")]
    value: Annotated[Any, Field(description="The value, its stored bytes parsed as JSON")]
    timestamp: Annotated[int, _TIMESTAMP_OUT]
    timestamp_type: Annotated[Literal["CreateTime", "LogAppendTime"], _TIMESTAMP_TYPE]
    headers: Annotated[list[RecordHeaderOut], _HEADERS_OUT]


# --- adapters (built once; validation is the hot path of produce) -----------------------

BINARY_PRODUCE = TypeAdapter(BinaryProduceRequest)
JSON_PRODUCE = TypeAdapter(JsonProduceRequest)
SCHEMA_PRODUCE = TypeAdapter(SchemaProduceRequest)
CREATE_CONSUMER = TypeAdapter(CreateConsumerRequest)
SUBSCRIPTION = TypeAdapter(SubscriptionRequest)
PARTITIONS = TypeAdapter(PartitionsRequest)
POSITIONS = TypeAdapter(PositionsRequest)
COMMIT = TypeAdapter(CommitRequest)

#: Every shape named in the OpenAPI document (components/schemas).
OPENAPI_SCHEMAS: dict[str, Any] = {
    t.__name__: t
    for t in (
        BinaryProduceRequest,
        JsonProduceRequest,
        SchemaProduceRequest,
        ProduceResponse,
        TopicOut,
        PartitionOut,
        PartitionOffsetsOut,
        BrokersOut,
        ErrorBody,
        CreateConsumerRequest,
        CreateConsumerResponse,
        SubscriptionRequest,
        SubscriptionOut,
        PartitionsRequest,
        AssignmentsOut,
        PositionsRequest,
        CommitRequest,
        CommittedOffsetsOut,
        BinaryRecordOut,
        JsonRecordOut,
    )
}
