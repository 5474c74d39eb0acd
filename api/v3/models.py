"""v3 request and response shapes as TypedDicts, field names exactly Confluent's
(rest-api-reference §3.3-§3.5).

Routes build plain dicts and answer with orjson; these types document the answers
(``response_model``, so ``/openapi.json`` carries every shape) and validate request
bodies (``TypeAdapter``, unknown fields rejected). Every type forbids extra keys, so a
test can check an answer against its declared shape. franz additions are marked.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

from api.input_limits import Int32

_FORBID = ConfigDict(extra="forbid")

ConfigSourceName = Literal[
    "DYNAMIC_CLUSTER_LINK_CONFIG",
    "DYNAMIC_TOPIC_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
    "UNKNOWN",
]
GroupStateName = Literal[
    "UNKNOWN",
    "PREPARING_REBALANCE",
    "COMPLETING_REBALANCE",
    "ASSIGNING",
    "RECONCILING",
    "STABLE",
    "DEAD",
    "EMPTY",
]
DataType = Literal["BINARY", "JSON", "STRING"]


# --- envelopes ------------------------------------------------------------------------------


@with_config(_FORBID)
class Relationship(TypedDict):
    related: str


@with_config(_FORBID)
class ResourceMetadata(TypedDict):
    self: str
    resource_name: str | None


@with_config(_FORBID)
class CollectionMetadata(TypedDict):
    self: str
    next: str | None  # always null (no pagination), as in Confluent Platform


# --- clusters and brokers ---------------------------------------------------------------------


@with_config(_FORBID)
class KafkaCluster(TypedDict):
    kind: Literal["KafkaCluster"]
    metadata: ResourceMetadata
    cluster_id: str
    controller: Relationship | None
    acls: Relationship
    brokers: Relationship
    broker_configs: Relationship
    consumer_groups: Relationship
    topics: Relationship
    partition_reassignments: Relationship


@with_config(_FORBID)
class KafkaClusterList(TypedDict):
    kind: Literal["KafkaClusterList"]
    metadata: CollectionMetadata
    data: list[KafkaCluster]


@with_config(_FORBID)
class KafkaBroker(TypedDict):
    kind: Literal["KafkaBroker"]
    metadata: ResourceMetadata
    cluster_id: str
    broker_id: int
    host: str | None
    port: int | None
    rack: str | None
    configs: Relationship
    partition_replicas: Relationship


@with_config(_FORBID)
class KafkaBrokerList(TypedDict):
    kind: Literal["KafkaBrokerList"]
    metadata: CollectionMetadata
    data: list[KafkaBroker]


# --- topics, partitions, replicas -------------------------------------------------------------


@with_config(_FORBID)
class KafkaTopic(TypedDict):
    kind: Literal["KafkaTopic"]
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    is_internal: bool
    replication_factor: int
    partitions_count: int
    partitions: Relationship
    configs: Relationship
    partition_reassignments: Relationship
    authorized_operations: list[str]  # filled when asked (include_authorized_operations)


@with_config(_FORBID)
class KafkaTopicList(TypedDict):
    kind: Literal["KafkaTopicList"]
    metadata: CollectionMetadata
    data: list[KafkaTopic]


@with_config(_FORBID)
class KafkaPartition(TypedDict):
    kind: Literal["KafkaPartition"]
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    leader: Relationship | None  # the leader's replica; null while there is no leader
    replicas: Relationship
    reassignment: Relationship


@with_config(_FORBID)
class KafkaPartitionList(TypedDict):
    kind: Literal["KafkaPartitionList"]
    metadata: CollectionMetadata
    data: list[KafkaPartition]


@with_config(_FORBID)
class KafkaPartitionWithOffsets(TypedDict):
    kind: Literal["KafkaPartitionWithOffsets"]
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    earliest_offset: int  # the log start offset
    latest_offset: int  # the high watermark


@with_config(_FORBID)
class KafkaReplica(TypedDict):
    kind: Literal["KafkaReplica"]
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    broker_id: int
    is_leader: bool
    is_in_sync: bool
    broker: Relationship


@with_config(_FORBID)
class KafkaReplicaList(TypedDict):
    kind: Literal["KafkaReplicaList"]
    metadata: CollectionMetadata
    data: list[KafkaReplica]


@with_config(_FORBID)
class KafkaReassignment(TypedDict):
    kind: Literal["KafkaReassignment"]
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    adding_replicas: list[int]
    removing_replicas: list[int]
    replicas: Relationship


@with_config(_FORBID)
class KafkaReassignmentList(TypedDict):
    kind: Literal["KafkaReassignmentList"]
    metadata: CollectionMetadata
    data: list[KafkaReassignment]  # franz never reassigns: always empty


# --- configs ----------------------------------------------------------------------------------


@with_config(_FORBID)
class ConfigSynonymData(TypedDict):
    name: str
    value: str | None
    source: ConfigSourceName


@with_config(_FORBID)
class KafkaTopicConfig(TypedDict):
    kind: Literal["KafkaTopicConfig"]
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    name: str
    value: str | None
    is_default: bool
    is_read_only: bool
    is_sensitive: bool
    source: ConfigSourceName
    synonyms: list[ConfigSynonymData]


@with_config(_FORBID)
class KafkaTopicConfigList(TypedDict):
    kind: Literal["KafkaTopicConfigList"]
    metadata: CollectionMetadata
    data: list[KafkaTopicConfig]


@with_config(_FORBID)
class KafkaBrokerConfig(TypedDict):
    kind: Literal["KafkaBrokerConfig"]
    metadata: ResourceMetadata
    cluster_id: str
    broker_id: int
    name: str
    value: str | None
    is_default: bool
    is_read_only: bool  # always true: franz has no dynamic broker configs
    is_sensitive: bool
    source: ConfigSourceName
    synonyms: list[ConfigSynonymData]


@with_config(_FORBID)
class KafkaBrokerConfigList(TypedDict):
    kind: Literal["KafkaBrokerConfigList"]
    metadata: CollectionMetadata
    data: list[KafkaBrokerConfig]


@with_config(_FORBID)
class KafkaClusterConfig(TypedDict):
    kind: Literal["KafkaClusterConfig"]
    metadata: ResourceMetadata
    cluster_id: str
    config_type: Literal["BROKER"]
    name: str
    value: str | None
    is_default: bool
    is_read_only: bool
    is_sensitive: bool
    source: ConfigSourceName
    synonyms: list[ConfigSynonymData]


@with_config(_FORBID)
class KafkaClusterConfigList(TypedDict):
    kind: Literal["KafkaClusterConfigList"]
    metadata: CollectionMetadata
    data: list[KafkaClusterConfig]  # franz has no dynamic cluster configs: always empty


# --- consumer groups --------------------------------------------------------------------------


@with_config(_FORBID)
class KafkaConsumerGroup(TypedDict):
    kind: Literal["KafkaConsumerGroup"]
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    is_simple: bool
    partition_assignor: str
    state: GroupStateName
    type: Literal["CLASSIC"]
    is_mixed_consumer_group: bool
    coordinator: Relationship
    consumers: Relationship
    lag_summary: Relationship


@with_config(_FORBID)
class KafkaConsumerGroupList(TypedDict):
    kind: Literal["KafkaConsumerGroupList"]
    metadata: CollectionMetadata
    data: list[KafkaConsumerGroup]


@with_config(_FORBID)
class KafkaConsumer(TypedDict):
    kind: Literal["KafkaConsumer"]
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    consumer_id: str
    instance_id: str | None
    client_id: str
    assignments: Relationship


@with_config(_FORBID)
class KafkaConsumerList(TypedDict):
    kind: Literal["KafkaConsumerList"]
    metadata: CollectionMetadata
    data: list[KafkaConsumer]


@with_config(_FORBID)
class KafkaConsumerAssignment(TypedDict):
    kind: Literal["KafkaConsumerAssignment"]
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    consumer_id: str
    topic_name: str
    partition_id: int
    partition: Relationship
    lag: Relationship


@with_config(_FORBID)
class KafkaConsumerAssignmentList(TypedDict):
    kind: Literal["KafkaConsumerAssignmentList"]
    metadata: CollectionMetadata
    data: list[KafkaConsumerAssignment]


@with_config(_FORBID)
class KafkaConsumerLag(TypedDict):
    kind: Literal["KafkaConsumerLag"]
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    topic_name: str
    partition_id: int
    current_offset: int  # the committed offset
    log_end_offset: int  # the high watermark
    lag: int
    consumer_id: str  # "" when no member is assigned the partition
    instance_id: str | None
    client_id: str


@with_config(_FORBID)
class KafkaConsumerLagList(TypedDict):
    kind: Literal["KafkaConsumerLagList"]
    metadata: CollectionMetadata
    data: list[KafkaConsumerLag]


@with_config(_FORBID)
class KafkaConsumerGroupLagSummary(TypedDict):
    kind: Literal["KafkaConsumerGroupLagSummary"]
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    max_lag_consumer_id: str
    max_lag_instance_id: str | None
    max_lag_client_id: str
    max_lag_topic_name: str
    max_lag_partition_id: int
    max_lag: int
    total_lag: int
    max_lag_consumer: Relationship
    max_lag_partition: Relationship


@with_config(_FORBID)
class KafkaAclList(TypedDict):
    kind: Literal["KafkaAclList"]
    metadata: CollectionMetadata
    data: list[dict[str, Any]]


# --- admin request bodies ---------------------------------------------------------------------

#: A config value as sent: a string, or (as Jackson coerces them) a number or boolean.
ConfigValueIn = str | int | float | bool | None


@with_config(_FORBID)
class CreateTopicConfig(TypedDict, total=False):
    name: Required[str]
    value: ConfigValueIn  # null: the broker default (the entry is ignored)


@with_config(_FORBID)
class CreateTopicRequest(TypedDict, total=False):
    topic_name: Required[str]
    partitions_count: Int32 | None  # missing, null or -1: num.partitions
    replication_factor: Int32 | None  # missing, null or -1: default.replication.factor
    replicas_assignments: dict[str, list[int]] | None  # not supported: must be empty
    configs: list[CreateTopicConfig] | None
    validate_only: bool | None


@with_config(_FORBID)
class UpdatePartitionsCountRequest(TypedDict):
    partitions_count: Int32


@with_config(_FORBID)
class UpdateConfigRequest(TypedDict, total=False):
    value: Required[ConfigValueIn]  # null resets the config (franz; as DELETE)


@with_config(_FORBID)
class AlterConfigEntry(TypedDict, total=False):
    name: Required[str]
    value: ConfigValueIn
    operation: str | None  # SET (default) or DELETE, any case


@with_config(_FORBID)
class AlterConfigBatchRequest(TypedDict, total=False):
    data: Required[Annotated[list[AlterConfigEntry], Field(min_length=1)]]
    validate_only: bool | None


# --- records ----------------------------------------------------------------------------------


@with_config(_FORBID)
class ProduceRecordHeader(TypedDict):
    name: str
    value: str | None  # standard base64


@with_config(_FORBID)
class ProduceRecordData(TypedDict, total=False):
    type: Literal["BINARY", "JSON", "STRING", "AVRO", "JSONSCHEMA", "PROTOBUF"]
    data: Any  # BINARY: base64 string; JSON: any value; STRING: a string; null: no bytes
    subject: str
    subject_name_strategy: str
    schema_id: int
    schema_version: int
    schema: str


@with_config(_FORBID)
class ProduceRecordRequest(TypedDict, total=False):
    partition_id: int | None
    headers: list[ProduceRecordHeader]
    key: ProduceRecordData | None
    value: ProduceRecordData | None
    timestamp: str | None  # ISO-8601; naive means UTC; default now


@with_config(_FORBID)
class ProduceReportData(TypedDict):
    type: DataType
    size: int  # bytes stored (0 for a null key or value)


@with_config(_FORBID)
class ProduceReport(TypedDict, total=False):
    """One line of the produce answer: a delivery report, or a failure with only
    ``error_code`` and ``message``."""

    error_code: Required[int]  # 200 on success
    message: str  # failures only
    cluster_id: str
    topic_name: str
    partition_id: int
    offset: int
    timestamp: str  # ISO-8601 UTC with milliseconds
    key: ProduceReportData  # omitted when the request had no key
    value: ProduceReportData  # omitted when the request had no value


#: ``POST .../records:batch`` (Confluent's ProduceBatchRequest): an entry id is 1 to 80
#: of ``[0-9a-zA-Z-_]``, unique in its batch; at most ``BATCH_ENTRIES_CEILING`` entries
#: (the broker's ``api.v3.produce.batch.maximum.entries``, default 10, may be 1 to 50).
BATCH_ID_PATTERN = r"^[0-9a-zA-Z_-]{1,80}$"
BATCH_ENTRIES_CEILING = 50
BatchEntryId = Annotated[str, Field(pattern=BATCH_ID_PATTERN, min_length=1, max_length=80)]


@with_config(_FORBID)
class ProduceBatchRequestEntry(ProduceRecordRequest, total=False):
    """A record of ``records:batch``: a ``ProduceRecordRequest`` with its entry id."""

    id: Required[BatchEntryId]


@with_config(_FORBID)
class ProduceBatchRequest(TypedDict):
    entries: Annotated[list[ProduceBatchRequestEntry],
                       Field(min_length=1, max_length=BATCH_ENTRIES_CEILING)]


@with_config(_FORBID)
class ProduceBatchResponseSuccessEntry(TypedDict, total=False):
    id: Required[str]
    cluster_id: Required[str]
    topic_name: Required[str]
    partition_id: Required[int]
    offset: Required[int]
    timestamp: str | None  # ISO-8601 UTC with milliseconds
    key: ProduceReportData  # omitted when the entry had no key
    value: ProduceReportData  # omitted when the entry had no value


@with_config(_FORBID)
class ProduceBatchResponseFailureEntry(TypedDict):
    id: str
    error_code: int
    message: str


@with_config(_FORBID)
class ProduceBatchResponse(TypedDict):
    """The 207 answer: one entry per request entry, in request order, in one list or
    the other."""

    successes: list[ProduceBatchResponseSuccessEntry]
    failures: list[ProduceBatchResponseFailureEntry]


@with_config(_FORBID)
class KafkaRecordHeader(TypedDict):
    name: str
    value: str | None  # standard base64


@with_config(_FORBID)
class KafkaRecordData(TypedDict):
    type: DataType  # as asked for; BINARY when the bytes are not valid JSON / UTF-8
    data: Any


@with_config(_FORBID)
class KafkaRecord(TypedDict):
    partition_id: int
    offset: int
    timestamp: str  # ISO-8601 UTC with milliseconds
    timestamp_type: Literal["CreateTime", "LogAppendTime"]
    headers: list[KafkaRecordHeader]
    key: KafkaRecordData | None
    value: KafkaRecordData | None


@with_config(_FORBID)
class KafkaRecordList(TypedDict):
    """franz: a range of one partition (``GET .../partitions/{p}/records``)."""

    kind: Literal["KafkaRecordList"]
    metadata: CollectionMetadata  # ``next``: the URL of the following range
    cluster_id: str
    topic_name: str
    partition_id: int
    next_offset: int
    high_watermark: int
    log_start_offset: int
    data: list[KafkaRecord]


# --- adapters and the OpenAPI components ---------------------------------------------------

CREATE_TOPIC = TypeAdapter(CreateTopicRequest)
UPDATE_PARTITIONS_COUNT = TypeAdapter(UpdatePartitionsCountRequest)
UPDATE_CONFIG = TypeAdapter(UpdateConfigRequest)
ALTER_CONFIGS = TypeAdapter(AlterConfigBatchRequest)

#: Shapes of hand-read bodies, for ``components/schemas`` (responses come in through
#: the routes' ``response_model``).
OPENAPI_SCHEMAS: dict[str, Any] = {
    t.__name__: t
    for t in (
        CreateTopicRequest,
        UpdatePartitionsCountRequest,
        UpdateConfigRequest,
        AlterConfigBatchRequest,
        ProduceRecordRequest,
        ProduceReport,
        ProduceBatchRequest,
        ProduceBatchResponse,
    )
}
