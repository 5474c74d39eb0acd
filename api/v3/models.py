"""v3 request and response shapes as TypedDicts, field names exactly Confluent's
(rest-api-reference §3.3-§3.5).

Routes build plain dicts and answer with orjson; these types document the answers
(``response_model``, so ``/openapi.json`` carries every shape) and validate request
bodies (``TypeAdapter``, unknown fields rejected). Every type forbids extra keys, so a
test can check an answer against its declared shape. franz additions are marked.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

from api.input_limits import Int32
from api.openapi import enum_schema
from core.broker.security.acl import Operation, PatternType, Permission, ResourceType

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

# --- field descriptions shared by many shapes ---------------------------------------------------

_KIND = Field(description="The resource type")
_META = Field(description="The resource's URL (`self`) and CRN (`resource_name`)")
_LIST_META = Field(description="The collection's URL; `next` is always null (no paging)")
_DATA = Field(description="The resources")
_CLUSTER_ID = Field(description="The cluster id")
_TOPIC_NAME = Field(description="The topic name", examples=["orders"])
_PARTITION_ID = Field(description="The partition id", examples=[0])
_BROKER_ID = Field(description="The broker id", examples=[0])
_GROUP_ID = Field(description="The consumer group id", examples=["my_group"])
_CONSUMER_ID = Field(description="The group member id the coordinator gave the consumer")
_INSTANCE_ID = Field(description="The consumer's `group.instance.id` (static membership); "
                     "null when none")
_CLIENT_ID = Field(description="The consumer's `client.id`")
_B64 = "standard base64"


def _link(what: str) -> Any:
    return Field(description=f"URL of {what}")


# --- envelopes ------------------------------------------------------------------------------


@with_config(_FORBID)
class Relationship(TypedDict):
    related: Annotated[str, Field(description="The URL of the related resource or "
                                  "collection")]


@with_config(_FORBID)
class ResourceMetadata(TypedDict):
    self: Annotated[str, Field(description="The resource's absolute URL")]
    resource_name: Annotated[str | None, Field(
        description="The resource's CRN, `crn:///kafka=<cluster>/...`")]


@with_config(_FORBID)
class CollectionMetadata(TypedDict):
    self: Annotated[str, Field(description="The collection's absolute URL")]
    next: Annotated[str | None, Field(
        description="The next page's URL: always null (no pagination), as in Confluent "
        "Platform; for a record range, the URL of the following range")]


@with_config(_FORBID)
class SelfMetadata(TypedDict):
    """franz: the metadata of a resource without a CRN (ACLs, users)."""

    self: Annotated[str, Field(description="The resource's absolute URL (for an ACL: the "
                               "search that finds it)")]


# --- clusters and brokers ---------------------------------------------------------------------


@with_config(_FORBID)
class KafkaCluster(TypedDict):
    kind: Annotated[Literal["KafkaCluster"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    controller: Annotated[Relationship | None, Field(
        description="URL of the controller broker; null while there is none")]
    acls: Annotated[Relationship, _link("the cluster's ACLs")]
    brokers: Annotated[Relationship, _link("the live brokers")]
    broker_configs: Annotated[Relationship, _link("the dynamic cluster-wide broker configs")]
    consumer_groups: Annotated[Relationship, _link("the consumer groups")]
    topics: Annotated[Relationship, _link("the topics")]
    partition_reassignments: Annotated[Relationship, _link("the ongoing reassignments")]


@with_config(_FORBID)
class KafkaClusterList(TypedDict):
    kind: Annotated[Literal["KafkaClusterList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaCluster], Field(description="The cluster (franz serves one)")]


@with_config(_FORBID)
class KafkaBroker(TypedDict):
    kind: Annotated[Literal["KafkaBroker"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    broker_id: Annotated[int, _BROKER_ID]
    host: Annotated[str | None, Field(description="The host the broker advertises")]
    port: Annotated[int | None, Field(description="The port the broker advertises")]
    rack: Annotated[str | None, Field(description="The broker's rack (`broker.rack`); null "
                                      "when unset")]
    configs: Annotated[Relationship, _link("the broker's configs")]
    partition_replicas: Annotated[Relationship, _link("the replicas the broker holds")]


@with_config(_FORBID)
class KafkaBrokerList(TypedDict):
    kind: Annotated[Literal["KafkaBrokerList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaBroker], Field(description="The live brokers")]


# --- topics, partitions, replicas -------------------------------------------------------------


@with_config(_FORBID)
class KafkaTopic(TypedDict):
    kind: Annotated[Literal["KafkaTopic"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    is_internal: Annotated[bool, Field(description="Whether Kafka keeps the topic for "
                                       "itself (`__consumer_offsets`)")]
    replication_factor: Annotated[int, Field(description="Replicas per partition")]
    partitions_count: Annotated[int, Field(description="The number of partitions")]
    partitions: Annotated[Relationship, _link("the topic's partitions")]
    configs: Annotated[Relationship, _link("the topic's configs")]
    partition_reassignments: Annotated[Relationship, _link("the topic's ongoing "
                                                           "reassignments")]
    authorized_operations: Annotated[list[str], Field(
        description="The operations the principal may do on the topic, filled when "
        "asked for (`include_authorized_operations`); else empty")]


@with_config(_FORBID)
class KafkaTopicList(TypedDict):
    kind: Annotated[Literal["KafkaTopicList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaTopic], Field(description="The topics, sorted by name")]


@with_config(_FORBID)
class KafkaPartition(TypedDict):
    kind: Annotated[Literal["KafkaPartition"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    partition_id: Annotated[int, _PARTITION_ID]
    leader: Annotated[Relationship | None, Field(
        description="URL of the leader's replica; null while there is no leader")]
    replicas: Annotated[Relationship, _link("the partition's replicas")]
    reassignment: Annotated[Relationship, _link("the partition's ongoing reassignment")]


@with_config(_FORBID)
class KafkaPartitionList(TypedDict):
    kind: Annotated[Literal["KafkaPartitionList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaPartition], Field(description="The partitions")]


@with_config(_FORBID)
class KafkaPartitionWithOffsets(TypedDict):
    kind: Annotated[Literal["KafkaPartitionWithOffsets"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    partition_id: Annotated[int, _PARTITION_ID]
    earliest_offset: Annotated[int, Field(description="The first offset (the log start)")]
    latest_offset: Annotated[int, Field(description="The offset the next record will get "
                                        "(the high watermark)")]


@with_config(_FORBID)
class KafkaReplica(TypedDict):
    kind: Annotated[Literal["KafkaReplica"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    partition_id: Annotated[int, _PARTITION_ID]
    broker_id: Annotated[int, Field(description="The broker holding the replica")]
    is_leader: Annotated[bool, Field(description="Whether this replica is the leader")]
    is_in_sync: Annotated[bool, Field(description="Whether this replica is in sync (ISR)")]
    broker: Annotated[Relationship, _link("the broker holding the replica")]


@with_config(_FORBID)
class KafkaReplicaList(TypedDict):
    kind: Annotated[Literal["KafkaReplicaList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaReplica], Field(description="The replicas")]


@with_config(_FORBID)
class KafkaReassignment(TypedDict):
    kind: Annotated[Literal["KafkaReassignment"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    partition_id: Annotated[int, _PARTITION_ID]
    adding_replicas: Annotated[list[int], Field(description="Brokers gaining a replica")]
    removing_replicas: Annotated[list[int], Field(description="Brokers losing their "
                                                  "replica")]
    replicas: Annotated[Relationship, _link("the partition's replicas")]


@with_config(_FORBID)
class KafkaReassignmentList(TypedDict):
    kind: Annotated[Literal["KafkaReassignmentList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaReassignment], Field(description="The partitions moving now")]


@with_config(_FORBID)
class ReassignmentTarget(TypedDict):
    """franz: one partition of Kafka's reassignment JSON."""

    topic: Annotated[str, _TOPIC_NAME]
    partition: Annotated[int, _PARTITION_ID]
    replicas: Annotated[list[int], Field(description="The brokers that are to hold the "
                                         "partition, the preferred leader first",
                                         examples=[[0, 1, 2]])]


class PartitionReassignmentRequest(TypedDict):
    """franz: Kafka's reassignment JSON (``kafka-reassign-partitions.sh``)."""

    version: NotRequired[Annotated[int, Field(description="The format version: 1")]]
    partitions: Annotated[list[ReassignmentTarget], Field(
        description="The partitions to move, each once")]


@with_config(_FORBID)
class PartitionReassignmentPlan(TypedDict):
    """franz: the reassignment the controller was asked to carry out."""

    version: Annotated[int, Field(description="The format version: 1")]
    partitions: Annotated[list[ReassignmentTarget], Field(
        description="The partitions to move, sorted")]


@with_config(_FORBID)
class ElectionTarget(TypedDict):
    """franz: one partition of Kafka's preferred-replica-election JSON."""

    topic: Annotated[str, _TOPIC_NAME]
    partition: Annotated[int, _PARTITION_ID]


class PreferredReplicaElectionRequest(TypedDict):
    """franz: Kafka's preferred-replica-election JSON."""

    version: NotRequired[Annotated[int, Field(description="The format version: 1")]]
    partitions: Annotated[list[ElectionTarget], Field(
        description="The partitions whose preferred replica is to lead")]


@with_config(_FORBID)
class PreferredReplicaElection(TypedDict):
    """franz: the election the controller was asked to carry out."""

    version: Annotated[int, Field(description="The format version: 1")]
    partitions: Annotated[list[ElectionTarget], Field(description="The partitions named")]


# --- configs ----------------------------------------------------------------------------------

_CONFIG_NAME = Field(description="The config name", examples=["retention.ms"])
_CONFIG_VALUE = Field(description="The effective value; null for a sensitive config")
_IS_DEFAULT = Field(description="Whether the value is the default (no override)")
_IS_READ_ONLY = Field(description="Whether the config cannot be changed here")
_IS_SENSITIVE = Field(description="Whether the value is secret (then null)")
_SOURCE = Field(description="Where the effective value comes from")
_SYNONYMS = Field(description="Every source that sets the config, the effective one first")


@with_config(_FORBID)
class ConfigSynonymData(TypedDict):
    name: Annotated[str, Field(description="The config name at that source")]
    value: Annotated[str | None, Field(description="The value at that source")]
    source: Annotated[ConfigSourceName, Field(description="The source")]


@with_config(_FORBID)
class KafkaTopicConfig(TypedDict):
    kind: Annotated[Literal["KafkaTopicConfig"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    name: Annotated[str, _CONFIG_NAME]
    value: Annotated[str | None, _CONFIG_VALUE]
    is_default: Annotated[bool, _IS_DEFAULT]
    is_read_only: Annotated[bool, _IS_READ_ONLY]
    is_sensitive: Annotated[bool, _IS_SENSITIVE]
    source: Annotated[ConfigSourceName, _SOURCE]
    synonyms: Annotated[list[ConfigSynonymData], _SYNONYMS]


@with_config(_FORBID)
class KafkaTopicConfigList(TypedDict):
    kind: Annotated[Literal["KafkaTopicConfigList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaTopicConfig], Field(description="The configs, sorted by name")]


@with_config(_FORBID)
class KafkaBrokerConfig(TypedDict):
    kind: Annotated[Literal["KafkaBrokerConfig"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    broker_id: Annotated[int, _BROKER_ID]
    name: Annotated[str, _CONFIG_NAME]
    value: Annotated[str | None, _CONFIG_VALUE]
    is_default: Annotated[bool, _IS_DEFAULT]
    is_read_only: Annotated[bool, Field(description="Always true: franz has no dynamic "
                                        "broker configs")]
    is_sensitive: Annotated[bool, _IS_SENSITIVE]
    source: Annotated[ConfigSourceName, _SOURCE]
    synonyms: Annotated[list[ConfigSynonymData], _SYNONYMS]


@with_config(_FORBID)
class KafkaBrokerConfigList(TypedDict):
    kind: Annotated[Literal["KafkaBrokerConfigList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaBrokerConfig], Field(description="The configs")]


@with_config(_FORBID)
class KafkaClusterConfig(TypedDict):
    kind: Annotated[Literal["KafkaClusterConfig"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    config_type: Annotated[Literal["BROKER"], Field(description="The kind of config: BROKER")]
    name: Annotated[str, _CONFIG_NAME]
    value: Annotated[str | None, _CONFIG_VALUE]
    is_default: Annotated[bool, _IS_DEFAULT]
    is_read_only: Annotated[bool, _IS_READ_ONLY]
    is_sensitive: Annotated[bool, _IS_SENSITIVE]
    source: Annotated[ConfigSourceName, _SOURCE]
    synonyms: Annotated[list[ConfigSynonymData], _SYNONYMS]


@with_config(_FORBID)
class KafkaClusterConfigList(TypedDict):
    kind: Annotated[Literal["KafkaClusterConfigList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaClusterConfig], Field(
        description="The configs: franz has no dynamic cluster configs, always empty")]


# --- consumer groups --------------------------------------------------------------------------


@with_config(_FORBID)
class KafkaConsumerGroup(TypedDict):
    kind: Annotated[Literal["KafkaConsumerGroup"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    consumer_group_id: Annotated[str, _GROUP_ID]
    is_simple: Annotated[bool, Field(description="Whether the group only stores offsets "
                                     "(no members, no protocol)")]
    partition_assignor: Annotated[str, Field(description="The assignment strategy in use; "
                                             "empty when none", examples=["range"])]
    state: Annotated[GroupStateName, Field(description="The group's state")]
    type: Annotated[Literal["CLASSIC"], Field(description="The group protocol: CLASSIC")]
    is_mixed_consumer_group: Annotated[bool, Field(description="Always false: every member "
                                                   "speaks the classic protocol")]
    coordinator: Annotated[Relationship, _link("the group's coordinator broker")]
    consumers: Annotated[Relationship, _link("the group's members")]
    lag_summary: Annotated[Relationship, _link("the group's lag summary")]


@with_config(_FORBID)
class KafkaConsumerGroupList(TypedDict):
    kind: Annotated[Literal["KafkaConsumerGroupList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaConsumerGroup], Field(description="The groups, sorted by id")]


@with_config(_FORBID)
class KafkaConsumer(TypedDict):
    kind: Annotated[Literal["KafkaConsumer"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    consumer_group_id: Annotated[str, _GROUP_ID]
    consumer_id: Annotated[str, _CONSUMER_ID]
    instance_id: Annotated[str | None, _INSTANCE_ID]
    client_id: Annotated[str, _CLIENT_ID]
    assignments: Annotated[Relationship, _link("the consumer's assigned partitions")]


@with_config(_FORBID)
class KafkaConsumerList(TypedDict):
    kind: Annotated[Literal["KafkaConsumerList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaConsumer], Field(description="The group's members")]


@with_config(_FORBID)
class KafkaConsumerAssignment(TypedDict):
    kind: Annotated[Literal["KafkaConsumerAssignment"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    consumer_group_id: Annotated[str, _GROUP_ID]
    consumer_id: Annotated[str, _CONSUMER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    partition_id: Annotated[int, _PARTITION_ID]
    partition: Annotated[Relationship, _link("the partition")]
    lag: Annotated[Relationship, _link("the group's lag on the partition")]


@with_config(_FORBID)
class KafkaConsumerAssignmentList(TypedDict):
    kind: Annotated[Literal["KafkaConsumerAssignmentList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaConsumerAssignment], Field(description="The partitions "
                                                         "assigned, sorted")]


_CURRENT_OFFSET = Field(description="The committed offset (the next to read)")
_LOG_END_OFFSET = Field(description="The offset the next record will get (the high "
                        "watermark)")


@with_config(_FORBID)
class KafkaConsumerLag(TypedDict):
    kind: Annotated[Literal["KafkaConsumerLag"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    consumer_group_id: Annotated[str, _GROUP_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    partition_id: Annotated[int, _PARTITION_ID]
    current_offset: Annotated[int, _CURRENT_OFFSET]
    log_end_offset: Annotated[int, _LOG_END_OFFSET]
    lag: Annotated[int, Field(description="`log_end_offset - current_offset`")]
    consumer_id: Annotated[str, Field(description="The member assigned the partition; "
                                      "empty when none is")]
    instance_id: Annotated[str | None, _INSTANCE_ID]
    client_id: Annotated[str, Field(description="That member's `client.id`; empty when "
                                    "none is assigned")]


@with_config(_FORBID)
class KafkaConsumerLagList(TypedDict):
    kind: Annotated[Literal["KafkaConsumerLagList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaConsumerLag], Field(description="The lags, largest first")]


@with_config(_FORBID)
class KafkaConsumerGroupLagSummary(TypedDict):
    kind: Annotated[Literal["KafkaConsumerGroupLagSummary"], _KIND]
    metadata: Annotated[ResourceMetadata, _META]
    cluster_id: Annotated[str, _CLUSTER_ID]
    consumer_group_id: Annotated[str, _GROUP_ID]
    max_lag_consumer_id: Annotated[str, Field(description="The member with the largest lag; "
                                              "empty when none is assigned")]
    max_lag_instance_id: Annotated[str | None, Field(description="Its `group.instance.id`; "
                                                     "null when none")]
    max_lag_client_id: Annotated[str, Field(description="Its `client.id`")]
    max_lag_topic_name: Annotated[str, Field(description="The topic of the largest lag")]
    max_lag_partition_id: Annotated[int, Field(description="The partition of the largest "
                                               "lag")]
    max_lag: Annotated[int, Field(description="The largest lag of one partition")]
    total_lag: Annotated[int, Field(description="The lags of every partition, summed")]
    max_lag_consumer: Annotated[Relationship, _link("the member with the largest lag")]
    max_lag_partition: Annotated[Relationship, _link("the partition with the largest lag")]


# --- ACLs -------------------------------------------------------------------------------------

#: The values of each ACL field in a request (``ANY`` and ``MATCH`` are for filters).
ACL_RESOURCE_TYPES = tuple(m.name for m in ResourceType if m is not ResourceType.ANY)
ACL_PATTERN_TYPES = tuple(m.name for m in PatternType
                          if m not in (PatternType.ANY, PatternType.MATCH))
ACL_OPERATIONS = tuple(m.name for m in Operation if m is not Operation.ANY)
ACL_PERMISSIONS = tuple(m.name for m in Permission if m is not Permission.ANY)

_ACL_RESOURCE_TYPE = Field(description="The kind of resource", examples=["TOPIC"])
_ACL_RESOURCE_NAME = Field(description="The resource name, or its prefix (PREFIXED); "
                           "`*` for every resource", examples=["orders"])
_ACL_PATTERN_TYPE = Field(description="How `resource_name` matches: LITERAL or PREFIXED",
                          examples=["LITERAL"])
_ACL_PRINCIPAL = Field(description="Who the rule is for, e.g. `User:alice`; `User:*` for "
                       "everyone", examples=["User:alice"])
_ACL_HOST = Field(description="The client host the rule applies to; `*` for every host",
                  examples=["*"])
_ACL_OPERATION = Field(description="The operation allowed or denied", examples=["READ"])
_ACL_PERMISSION = Field(description="ALLOW or DENY", examples=["ALLOW"])


@with_config(_FORBID)
class KafkaAcl(TypedDict):
    kind: Annotated[Literal["KafkaAcl"], _KIND]
    metadata: Annotated[SelfMetadata, Field(description="The search URL that finds this "
                                            "ACL")]
    cluster_id: Annotated[str, _CLUSTER_ID]
    resource_type: Annotated[str, enum_schema(*ACL_RESOURCE_TYPES), _ACL_RESOURCE_TYPE]
    resource_name: Annotated[str, _ACL_RESOURCE_NAME]
    pattern_type: Annotated[str, enum_schema(*ACL_PATTERN_TYPES), _ACL_PATTERN_TYPE]
    principal: Annotated[str, _ACL_PRINCIPAL]
    host: Annotated[str, _ACL_HOST]
    operation: Annotated[str, enum_schema(*ACL_OPERATIONS), _ACL_OPERATION]
    permission: Annotated[str, enum_schema(*ACL_PERMISSIONS), _ACL_PERMISSION]


@with_config(_FORBID)
class KafkaAclList(TypedDict):
    kind: Annotated[Literal["KafkaAclList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaAcl], Field(description="The ACLs that match the filter")]


@with_config(_FORBID)
class DeletedKafkaAcls(TypedDict):
    """The answer of ``DELETE .../acls``."""

    data: Annotated[list[KafkaAcl], Field(description="The ACLs deleted")]


# --- users (franz) ----------------------------------------------------------------------------


@with_config(_FORBID)
class KafkaUser(TypedDict):
    kind: Annotated[Literal["KafkaUser"], _KIND]
    metadata: Annotated[SelfMetadata, Field(description="The user's URL")]
    cluster_id: Annotated[str, _CLUSTER_ID]
    user_name: Annotated[str, Field(description="The user (or API key) name",
                                    examples=["alice"])]


@with_config(_FORBID)
class KafkaUserList(TypedDict):
    kind: Annotated[Literal["KafkaUserList"], _KIND]
    metadata: Annotated[CollectionMetadata, _LIST_META]
    data: Annotated[list[KafkaUser], Field(description="The users and API keys (names "
                                           "only, never a credential)")]


@with_config(_FORBID)
class KafkaApiKey(TypedDict):
    kind: Annotated[Literal["KafkaApiKey"], _KIND]
    key: Annotated[str, Field(description="The key: the user name of HTTP Basic",
                              examples=["ak-3f9c2e"])]
    secret: Annotated[str, Field(description="The secret: the password of HTTP Basic, "
                                 "shown this once")]
    user: Annotated[KafkaUser, Field(description="The user the key is")]


# --- admin request bodies ---------------------------------------------------------------------

#: A config value as sent: a string, or (as Jackson coerces them) a number or boolean.
ConfigValueIn = str | int | float | bool | None

_VALIDATE_ONLY = Field(description="Only check the request; change nothing")


@with_config(_FORBID)
class CreateTopicConfig(TypedDict, total=False):
    name: Required[Annotated[str, _CONFIG_NAME]]
    value: Annotated[ConfigValueIn, Field(
        description="The value (numbers and booleans are taken as their text); null: the "
        "broker default (the entry is ignored)", examples=["compact"])]


@with_config(_FORBID)
class CreateTopicRequest(TypedDict, total=False):
    topic_name: Required[Annotated[str, Field(
        description="The topic name: 1..249 of `[A-Za-z0-9._-]`, not `.` or `..`",
        examples=["orders"])]]
    partitions_count: Annotated[Int32 | None, Field(
        description="The number of partitions; missing, null or -1: `num.partitions`",
        examples=[3])]
    replication_factor: Annotated[Int32 | None, Field(
        description="Replicas per partition; missing, null or -1: "
        "`default.replication.factor`", examples=[1])]
    replicas_assignments: Annotated[dict[str, list[int]] | None, Field(
        description="Not supported (franz places replicas itself): must be missing or "
        "empty")]
    configs: Annotated[list[CreateTopicConfig] | None, Field(
        description="Config overrides of the new topic")]
    validate_only: Annotated[bool | None, Field(
        description="Only check the request: answer 200 with the topic as it would be, "
        "create nothing")]


@with_config(_FORBID)
class UpdatePartitionsCountRequest(TypedDict):
    partitions_count: Annotated[Int32, Field(description="The new number of partitions: "
                                             "more than now", examples=[6])]


@with_config(_FORBID)
class UpdateConfigRequest(TypedDict, total=False):
    value: Required[Annotated[ConfigValueIn, Field(
        description="The new value (numbers and booleans are taken as their text); null "
        "is refused (400): DELETE the config to reset it", examples=["86400000"])]]


@with_config(_FORBID)
class AlterConfigEntry(TypedDict, total=False):
    name: Required[Annotated[str, _CONFIG_NAME]]
    value: Annotated[ConfigValueIn, Field(description="The value to SET (numbers and "
                                          "booleans are taken as their text)")]
    operation: Annotated[str | None, enum_schema("SET", "DELETE", nullable=True), Field(
        description="SET (default) or DELETE (back to the default); any case")]


@with_config(_FORBID)
class AlterConfigBatchRequest(TypedDict, total=False):
    data: Required[Annotated[list[AlterConfigEntry], Field(
        min_length=1, description="The changes, applied together or not at all")]]
    validate_only: Annotated[bool | None, _VALIDATE_ONLY]


# --- records ----------------------------------------------------------------------------------


@with_config(_FORBID)
class ProduceRecordHeader(TypedDict):
    name: Annotated[str, Field(description="The header name", examples=["trace-id"])]
    value: Annotated[str | None, Field(description=f"The header value, {_B64}; null: none",
                                       examples=["MTIz"])]


_SCHEMA_ONLY = " Schema types (or no `type`) only; one of `schema_id`, `schema_version`, `schema`."


@with_config(_FORBID)
class ProduceRecordData(TypedDict, total=False):
    type: Annotated[Literal["BINARY", "JSON", "STRING", "AVRO", "JSONSCHEMA", "PROTOBUF"],
                    Field(description="How `data` is written: BINARY (base64 decoded), "
                          "JSON (its JSON text), STRING (UTF-8), or with the Schema Registry "
                          "schema given in `schema` (AVRO, JSONSCHEMA, PROTOBUF). No type: "
                          "with the schema `schema_id` or `schema_version` names, else the "
                          "subject's latest version")]
    data: Annotated[Any, Field(description="BINARY: a base64 string; JSON: any value; "
                               "STRING: a string; a schema: the value in its JSON form "
                               "(Avro's JSON encoding, Protobuf's JSON mapping); null: no "
                               "bytes", examples=["user-1"])]
    subject: Annotated[str, Field(description="The subject of the schema; default the "
                                  "strategy's." + _SCHEMA_ONLY)]
    subject_name_strategy: Annotated[
        Literal["TOPIC_NAME", "RECORD_NAME", "TOPIC_RECORD_NAME"],
        Field(description="How the subject is named: `<topic>-key`/`<topic>-value` "
              "(TOPIC_NAME, the default), the schema's record name (RECORD_NAME) or "
              "`<topic>-<record name>` (TOPIC_RECORD_NAME); not with `subject`." + _SCHEMA_ONLY)]
    schema_id: Annotated[int, Field(description="The id of the schema (registered under the "
                                    "subject)." + _SCHEMA_ONLY)]
    schema_version: Annotated[int, Field(description="The version of the subject to write "
                                         "with (-1: the latest)." + _SCHEMA_ONLY)]
    schema: Annotated[str, Field(description="The schema text, with a schema `type`; "
                                 "registered under the subject when new." + _SCHEMA_ONLY)]


@with_config(_FORBID)
class ProduceRecordRequest(TypedDict, total=False):
    partition_id: Annotated[int | None, Field(
        description="The partition to write to; default: by the key's hash, else "
        "round-robin")]
    headers: Annotated[list[ProduceRecordHeader], Field(description="Record headers, in "
                                                        "order")]
    key: Annotated[ProduceRecordData | None, Field(description="The key; missing or null: "
                                                   "no key")]
    value: Annotated[ProduceRecordData | None, Field(description="The value; missing or "
                                                     "null: a null value")]
    timestamp: Annotated[str | None, Field(
        description="The record timestamp, ISO-8601 (naive means UTC); default: now",
        examples=["2024-05-01T12:00:00.123Z"])]


@with_config(_FORBID)
class ProduceReportData(TypedDict):
    type: Annotated[Literal["BINARY", "JSON", "STRING", "AVRO", "JSONSCHEMA", "PROTOBUF"],
                    Field(description="How the key or value was written")]
    subject: NotRequired[Annotated[str, Field(
        description="Written with a schema: the schema's subject")]]
    schema_id: NotRequired[Annotated[int, Field(
        description="Written with a schema: the schema's id")]]
    schema_version: NotRequired[Annotated[int, Field(
        description="Written with a schema: its version under the subject")]]
    size: Annotated[int, Field(description="Bytes stored, the 5-byte schema header included "
                               "(0 for a null key or value)")]


_REPORT_TIMESTAMP = Field(description="The record timestamp, ISO-8601 UTC with "
                          "milliseconds")


@with_config(_FORBID)
class ProduceReport(TypedDict, total=False):
    """One line of the produce answer: a delivery report, or a failure with only
    ``error_code`` and ``message``."""

    error_code: Required[Annotated[int, Field(description="200 on success, else the "
                                              "record's error code", examples=[200])]]
    message: Annotated[str, Field(description="Failures only: what went wrong")]
    cluster_id: Annotated[str, _CLUSTER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    partition_id: Annotated[int, Field(description="The partition written")]
    offset: Annotated[int, Field(description="The record's offset")]
    timestamp: Annotated[str, _REPORT_TIMESTAMP]
    key: Annotated[ProduceReportData, Field(description="The key written; omitted when "
                                            "the request had none")]
    value: Annotated[ProduceReportData, Field(description="The value written; omitted when "
                                              "the request had none")]


#: ``POST .../records:batch`` (Confluent's ProduceBatchRequest): an entry id is 1 to 80
#: of ``[0-9a-zA-Z-_]``, unique in its batch; at most ``BATCH_ENTRIES_CEILING`` entries
#: (the broker's ``api.v3.produce.batch.maximum.entries``, default 10, may be 1 to 50).
BATCH_ID_PATTERN = r"^[0-9a-zA-Z_-]{1,80}$"
BATCH_ENTRIES_CEILING = 50
BatchEntryId = Annotated[str, Field(pattern=BATCH_ID_PATTERN, min_length=1, max_length=80)]
_ENTRY_ID = Field(description="The entry's id, as in the request")


@with_config(_FORBID)
class ProduceBatchRequestEntry(ProduceRecordRequest, total=False):
    """A record of ``records:batch``: a ``ProduceRecordRequest`` with its entry id."""

    id: Required[Annotated[BatchEntryId, Field(
        description="The entry's id: 1 to 80 of `[0-9a-zA-Z-_]`, unique in the batch",
        examples=["1"])]]


@with_config(_FORBID)
class ProduceBatchRequest(TypedDict):
    entries: Annotated[list[ProduceBatchRequestEntry],
                       Field(min_length=1, max_length=BATCH_ENTRIES_CEILING,
                             description="The records, at most "
                             "`api.v3.produce.batch.maximum.entries` (default 10)")]


@with_config(_FORBID)
class ProduceBatchResponseSuccessEntry(TypedDict, total=False):
    id: Required[Annotated[str, _ENTRY_ID]]
    cluster_id: Required[Annotated[str, _CLUSTER_ID]]
    topic_name: Required[Annotated[str, _TOPIC_NAME]]
    partition_id: Required[Annotated[int, Field(description="The partition written")]]
    offset: Required[Annotated[int, Field(description="The record's offset")]]
    timestamp: Annotated[str | None, _REPORT_TIMESTAMP]
    key: Annotated[ProduceReportData, Field(description="The key written; omitted when "
                                            "the entry had none")]
    value: Annotated[ProduceReportData, Field(description="The value written; omitted when "
                                              "the entry had none")]


@with_config(_FORBID)
class ProduceBatchResponseFailureEntry(TypedDict):
    id: Annotated[str, _ENTRY_ID]
    error_code: Annotated[int, Field(description="The entry's error code",
                                     examples=[40402])]
    message: Annotated[str, Field(description="What went wrong")]


@with_config(_FORBID)
class ProduceBatchResponse(TypedDict):
    """The 207 answer: one entry per request entry, in request order, in one list or
    the other."""

    successes: Annotated[list[ProduceBatchResponseSuccessEntry], Field(
        description="The entries written")]
    failures: Annotated[list[ProduceBatchResponseFailureEntry], Field(
        description="The entries that failed, each on its own")]


@with_config(_FORBID)
class KafkaRecordHeader(TypedDict):
    name: Annotated[str, Field(description="The header name")]
    value: Annotated[str | None, Field(description=f"The header value, {_B64}; null: none")]


@with_config(_FORBID)
class KafkaRecordData(TypedDict):
    type: Annotated[DataType, Field(description="As asked for (`key_format`, "
                                    "`value_format`); BINARY when the bytes are not valid "
                                    "JSON or UTF-8")]
    data: Annotated[Any, Field(description="BINARY: base64; JSON: the parsed value; "
                               "STRING: the text")]


@with_config(_FORBID)
class KafkaRecord(TypedDict):
    partition_id: Annotated[int, _PARTITION_ID]
    offset: Annotated[int, Field(description="The record's offset")]
    timestamp: Annotated[str, _REPORT_TIMESTAMP]
    timestamp_type: Annotated[Literal["CreateTime", "LogAppendTime"], Field(
        description="Whether the producer (`CreateTime`) or the broker (`LogAppendTime`) "
        "set the timestamp")]
    headers: Annotated[list[KafkaRecordHeader], Field(description="The record headers, in "
                                                      "order")]
    key: Annotated[KafkaRecordData | None, Field(description="The key; null: none")]
    value: Annotated[KafkaRecordData | None, Field(description="The value; null: none")]


@with_config(_FORBID)
class KafkaRecordList(TypedDict):
    """franz: a range of one partition (``GET .../partitions/{p}/records``)."""

    kind: Annotated[Literal["KafkaRecordList"], _KIND]
    metadata: Annotated[CollectionMetadata, Field(
        description="This range's URL; `next`: the URL of the following range")]
    cluster_id: Annotated[str, _CLUSTER_ID]
    topic_name: Annotated[str, _TOPIC_NAME]
    partition_id: Annotated[int, _PARTITION_ID]
    next_offset: Annotated[int, Field(description="The offset to ask for next")]
    high_watermark: Annotated[int, Field(description="The partition's high watermark")]
    log_start_offset: Annotated[int, Field(description="The partition's first offset")]
    data: Annotated[list[KafkaRecord], Field(description="The records, in offset order")]


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
        PartitionReassignmentRequest,
        PreferredReplicaElectionRequest,
    )
}
