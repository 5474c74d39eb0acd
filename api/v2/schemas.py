"""v2 request and response shapes as TypedDicts (field names exactly Confluent's).

Request types are validated with pydantic ``TypeAdapter``s over the raw body
(``api.v2.body``): unknown fields are rejected (``extra="forbid"``). Response types
only document the answers (``api.openapi``); routes build plain dicts and serialize
them with orjson. franz extensions are marked in the field descriptions.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

from api.input_limits import MAX_RECORDS_PER_REQUEST, Offset, PartitionId, Timestamp

_FORBID = ConfigDict(extra="forbid")
NonNegative = Annotated[int, Field(ge=0)]


# --- produce ----------------------------------------------------------------------------


@with_config(_FORBID)
class RecordHeaderIn(TypedDict):
    """franz extension: a record header; ``value`` is standard base64 or null."""

    key: str
    value: str | None


@with_config(_FORBID)
class BinaryProduceRecord(TypedDict, total=False):
    key: str | None  # standard base64
    value: str | None  # standard base64
    partition: PartitionId | None
    headers: list[RecordHeaderIn] | None  # franz extension
    timestamp: Timestamp | None  # franz extension: epoch ms, 0..2^63-1 (default: now)


@with_config(_FORBID)
class JsonProduceRecord(TypedDict, total=False):
    key: Any  # any JSON value
    value: Any
    partition: PartitionId | None
    headers: list[RecordHeaderIn] | None  # franz extension
    timestamp: Timestamp | None  # franz extension


@with_config(_FORBID)
class BinaryProduceRequest(TypedDict, total=False):
    records: Required[Annotated[list[BinaryProduceRecord], Field(min_length=1, max_length=MAX_RECORDS_PER_REQUEST)]]
    key_schema: str | None
    key_schema_id: int | None
    value_schema: str | None
    value_schema_id: int | None


@with_config(_FORBID)
class JsonProduceRequest(TypedDict, total=False):
    records: Required[Annotated[list[JsonProduceRecord], Field(min_length=1, max_length=MAX_RECORDS_PER_REQUEST)]]
    key_schema: str | None
    key_schema_id: int | None
    value_schema: str | None
    value_schema_id: int | None


class ProduceOffset(TypedDict):
    partition: int | None
    offset: int | None
    error_code: int | None
    error: str | None


class ProduceResponse(TypedDict):
    offsets: list[ProduceOffset]
    key_schema_id: int | None
    value_schema_id: int | None


# --- metadata ---------------------------------------------------------------------------


class ReplicaOut(TypedDict):
    broker: int
    leader: bool
    in_sync: bool


class PartitionOut(TypedDict):
    partition: int
    leader: int
    replicas: list[ReplicaOut]


class TopicOut(TypedDict):
    name: str
    configs: dict[str, str]
    partitions: list[PartitionOut]


class PartitionOffsetsOut(TypedDict):
    beginning_offset: int
    end_offset: int


class BrokersOut(TypedDict):
    brokers: list[int]


class ErrorBody(TypedDict):
    error_code: int
    message: str


# --- consumers --------------------------------------------------------------------------

CreateConsumerRequest = TypedDict(
    "CreateConsumerRequest",
    {
        "name": str | None,
        "id": str | None,  # deprecated alias of name
        "format": str | None,
        "auto.offset.reset": str | None,
        "auto.commit.enable": str | bool | None,
        "fetch.min.bytes": int | None,
        "consumer.request.timeout.ms": int | None,
        "responseMinBytes": int | None,  # alias of fetch.min.bytes
        "requestWaitMs": int | None,  # alias of consumer.request.timeout.ms
    },
    total=False,
)
CreateConsumerRequest.__pydantic_config__ = _FORBID  # type: ignore[attr-defined]


class CreateConsumerResponse(TypedDict):
    instance_id: str
    base_uri: str


@with_config(_FORBID)
class SubscriptionRequest(TypedDict, total=False):
    topics: list[str] | None
    topic_pattern: str | None


class SubscriptionOut(TypedDict):
    topics: list[str]


@with_config(_FORBID)
class TopicPartitionIn(TypedDict):
    topic: str
    partition: PartitionId


class TopicPartitionOut(TypedDict):
    topic: str
    partition: int


@with_config(_FORBID)
class PartitionsRequest(TypedDict):
    partitions: list[TopicPartitionIn]


class AssignmentsOut(TypedDict):
    partitions: list[TopicPartitionOut]


@with_config(_FORBID)
class SeekOffset(TypedDict):
    topic: str
    partition: PartitionId
    offset: Offset
    metadata: NotRequired[str | None]


@with_config(_FORBID)
class SeekTimestamp(TypedDict):
    topic: str
    partition: PartitionId
    timestamp: str | int  # ISO-8601; franz also takes epoch ms (0..2^63-1: api.v2.offsets)
    metadata: NotRequired[str | None]


@with_config(_FORBID)
class PositionsRequest(TypedDict, total=False):
    offsets: list[SeekOffset] | None
    timestamps: list[SeekTimestamp] | None


@with_config(_FORBID)
class CommitOffset(TypedDict):
    topic: str
    partition: PartitionId
    offset: Offset  # the last offset processed (0..2^63-2); franz commits offset + 1
    metadata: NotRequired[str | None]


@with_config(_FORBID)
class CommitRequest(TypedDict):
    offsets: list[CommitOffset]


class CommittedOffsetOut(TypedDict):
    topic: str
    partition: int
    offset: int
    metadata: str


class CommittedOffsetsOut(TypedDict):
    offsets: list[CommittedOffsetOut]


# --- consumed records -------------------------------------------------------------------


class RecordHeaderOut(TypedDict):
    key: str
    value: str | None  # standard base64


class BinaryRecordOut(TypedDict):
    topic: str
    partition: int
    offset: int
    key: str | None  # standard base64
    value: str | None
    timestamp: int  # franz extension: epoch ms
    timestamp_type: Literal["CreateTime", "LogAppendTime"]  # franz extension
    headers: list[RecordHeaderOut]  # franz extension, in record order


class JsonRecordOut(TypedDict):
    topic: str
    partition: int
    offset: int
    key: Any  # the stored bytes parsed as JSON
    value: Any
    timestamp: int
    timestamp_type: Literal["CreateTime", "LogAppendTime"]
    headers: list[RecordHeaderOut]


# --- adapters (built once; validation is the hot path of produce) -----------------------

BINARY_PRODUCE = TypeAdapter(BinaryProduceRequest)
JSON_PRODUCE = TypeAdapter(JsonProduceRequest)
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
