"""OpenAPI links of the published document: which value of one answer names the resource
another operation works on (``POST /consumers/{group}`` answers ``instance_id``, the
``{instance}`` of subscribe, assign, seek, read, commit and delete; ``GET /v3/clusters``
answers the ``cluster_id`` of every v3 route; creating a topic answers its
``topic_name``). Clients and dashboards follow them; the stateful OpenAPI fuzzer
(tests/fuzz, docs/openapi-fuzzing.md) walks them to reach routes with real resources.

``LINKS`` names operations by method and path; ``api.openapi.install_openapi`` turns
them into ``links`` of the source's response with the target's ``operationId`` and
fails when either end is not in the document, so a renamed route cannot leave a
dangling link. Parameter values are OpenAPI runtime expressions or constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

V3 = "/v3/clusters/{cluster_id}"
_TOPIC = V3 + "/topics/{topic_name}"
_PARTITION = _TOPIC + "/partitions/{partition_id}"
_GROUP = V3 + "/consumer-groups/{consumer_group_id}"
_CONSUMER = _GROUP + "/consumers/{consumer_id}"
_INSTANCE = "/consumers/{group}/instances/{instance}"


@dataclass(frozen=True, slots=True)
class Link:
    """``name``: from the ``status`` answer of ``source`` (``"METHOD path"``) to
    ``target``, with ``parameters`` (target parameter name -> expression or constant)."""

    source: str
    status: int
    name: str
    target: str
    parameters: dict[str, Any]
    description: str = ""


def fan(source: str, status: int, parameters: dict[str, Any],
         targets: dict[str, str], description: str = "") -> list[Link]:
    """One link per ``targets`` entry (name -> ``"METHOD path"``), same parameters;
    a target takes only the parameters its path names."""
    out = []
    for name, target in targets.items():
        path = target.split(" ", 1)[1]
        params = {k: v for k, v in parameters.items() if "{" + k + "}" in path}
        out.append(Link(source, status, name, target, params, description))
    return out


# --- v2: a consumer instance ------------------------------------------------------------

_INSTANCE_PARAMS = {"group": "$request.path.group", "instance": "$response.body#/instance_id"}
_V2_INSTANCE = fan(
    "POST /consumers/{group}",
    200,
    _INSTANCE_PARAMS,
    {
        "Subscribe": f"POST {_INSTANCE}/subscription",
        "GetSubscription": f"GET {_INSTANCE}/subscription",
        "Unsubscribe": f"DELETE {_INSTANCE}/subscription",
        "Assign": f"POST {_INSTANCE}/assignments",
        "GetAssignments": f"GET {_INSTANCE}/assignments",
        "Seek": f"POST {_INSTANCE}/positions",
        "SeekToBeginning": f"POST {_INSTANCE}/positions/beginning",
        "SeekToEnd": f"POST {_INSTANCE}/positions/end",
        "CommitOffsets": f"POST {_INSTANCE}/offsets",
        "GetCommittedOffsets": f"GET {_INSTANCE}/offsets",
        "ReadRecords": f"GET {_INSTANCE}/records",
        "DeleteInstance": f"DELETE {_INSTANCE}",
    },
    "The consumer instance just created (`instance_id`) in the same group.",
)
# after a subscription or an assignment, the same instance reads, seeks and commits
_V2_INSTANCE_AFTER = [
    link
    for source in (f"POST {_INSTANCE}/subscription", f"POST {_INSTANCE}/assignments")
    for link in fan(
        source,
        204,
        {"group": "$request.path.group", "instance": "$request.path.instance"},
        {
            "ReadRecords": f"GET {_INSTANCE}/records",
            "SeekToBeginning": f"POST {_INSTANCE}/positions/beginning",
            "CommitOffsets": f"POST {_INSTANCE}/offsets",
            "GetCommittedOffsets": f"GET {_INSTANCE}/offsets",
            "DeleteInstance": f"DELETE {_INSTANCE}",
        },
        "The same consumer instance.",
    )
]

# --- v2: topics and partitions ----------------------------------------------------------

_V2_TOPIC = "/topics/{topic}/partitions/{partition}"
_V2_TOPICS = fan(
    "GET /topics",
    200,
    {"topic": "$response.body#/0"},
    {"GetTopic": "GET /topics/{topic}", "GetPartitions": "GET /topics/{topic}/partitions"},
    "The first topic of the list.",
) + fan(
    "POST /topics/{topic}",
    200,
    {
        "topic": "$request.path.topic",
        "partition": "$response.body#/offsets/0/partition",
        "offset": "$response.body#/offsets/0/offset",
    },
    {
        "GetTopic": "GET /topics/{topic}",
        "GetPartition": f"GET {_V2_TOPIC}",
        "GetPartitionOffsets": f"GET {_V2_TOPIC}/offsets",
        "ReadRange": f"GET {_V2_TOPIC}/records",
    },
    "The partition the first record went to (and its offset, for the range read).",
)
# the range read's required ``offset`` is a query parameter: _fan only keeps path ones
_V2_TOPICS = [
    Link(x.source, x.status, x.name, x.target,
         {**x.parameters, "offset": "$response.body#/offsets/0/offset"}, x.description)
    if x.name == "ReadRange" else x
    for x in _V2_TOPICS
]

# --- v3: the cluster --------------------------------------------------------------------

_CLUSTER_ID = {"cluster_id": "$response.body#/data/0/cluster_id"}
_V3_CLUSTER = fan(
    "GET /v3/clusters",
    200,
    _CLUSTER_ID,
    {
        "GetCluster": f"GET {V3}",
        "ListBrokers": f"GET {V3}/brokers",
        "ListTopics": f"GET {V3}/topics",
        "CreateTopic": f"POST {V3}/topics",
        "ListAllTopicConfigs": f"GET {V3}/topics/-/configs",
        "ListBrokerConfigs": f"GET {V3}/broker-configs",
        "ListConsumerGroups": f"GET {V3}/consumer-groups",
        "ListAcls": f"GET {V3}/acls",
        "CreateAcl": f"POST {V3}/acls",
        "ListUsers": f"GET {V3}/users",
        "ListReassignments": f"GET {V3}/topics/-/partitions/-/reassignment",
    },
    "The cluster (franz serves one).",
)

_SAME_CLUSTER = {"cluster_id": "$request.path.cluster_id"}

_BROKER_PARAMS = {**_SAME_CLUSTER, "broker_id": "$response.body#/data/0/broker_id"}
_V3_BROKERS = fan(
    f"GET {V3}/brokers",
    200,
    _BROKER_PARAMS,
    {
        "GetBroker": f"GET {V3}/brokers/{{broker_id}}",
        "ListBrokerConfigs": f"GET {V3}/brokers/{{broker_id}}/configs",
        "ListPartitionReplicas": f"GET {V3}/brokers/{{broker_id}}/partition-replicas",
    },
    "The first broker of the list.",
) + fan(
    f"GET {V3}/brokers/{{broker_id}}/configs",
    200,
    {**_SAME_CLUSTER, "broker_id": "$request.path.broker_id",
     "name": "$response.body#/data/0/name"},
    {"GetBrokerConfig": f"GET {V3}/brokers/{{broker_id}}/configs/{{name}}"},
    "The first config of the list.",
) + fan(
    f"GET {V3}/broker-configs",
    200,
    {**_SAME_CLUSTER, "name": "$response.body#/data/0/name"},
    {"GetClusterBrokerConfig": f"GET {V3}/broker-configs/{{name}}"},
    "The first config of the list.",
)

# --- v3: topics -------------------------------------------------------------------------

_TOPIC_TARGETS = {
    "GetTopic": f"GET {_TOPIC}",
    "UpdatePartitionCount": f"PATCH {_TOPIC}",
    "ListTopicConfigs": f"GET {_TOPIC}/configs",
    "AlterTopicConfigs": f"POST {_TOPIC}/configs:alter",
    "GetTopicConfig": f"GET {_TOPIC}/configs/{{name}}",
    "UpdateTopicConfig": f"PUT {_TOPIC}/configs/{{name}}",
    "ResetTopicConfig": f"DELETE {_TOPIC}/configs/{{name}}",
    "ListPartitions": f"GET {_TOPIC}/partitions",
    "GetPartition": f"GET {_PARTITION}",
    "GetPartitionOffset": f"GET {_PARTITION}/offset",
    "ListReplicas": f"GET {_PARTITION}/replicas",
    "ReadRecords": f"GET {_PARTITION}/records",
    "ListTopicReassignments": f"GET {_TOPIC}/partitions/-/reassignment",
    "GetReassignment": f"GET {_PARTITION}/reassignment",
    "ProduceRecords": f"POST {_TOPIC}/records",
    "ProduceV2": "POST /topics/{topic}",
    "DeleteTopic": f"DELETE {_TOPIC}",
}
_V3_TOPICS = fan(
    f"POST {V3}/topics",
    201,
    {
        **_SAME_CLUSTER,
        "topic_name": "$response.body#/topic_name",
        "topic": "$response.body#/topic_name",
        "partition_id": 0,
        "name": "cleanup.policy",
    },
    _TOPIC_TARGETS,
    "The topic just created (its partition 0, its `cleanup.policy`).",
) + fan(
    f"GET {V3}/topics",
    200,
    {
        **_SAME_CLUSTER,
        "topic_name": "$response.body#/data/0/topic_name",
        "partition_id": 0,
        "name": "cleanup.policy",
    },
    {k: v for k, v in _TOPIC_TARGETS.items() if k.startswith(("Get", "List", "Read"))},
    "The first topic of the list (its partition 0, its `cleanup.policy`).",
) + fan(
    f"GET {_TOPIC}/configs",
    200,
    {**_SAME_CLUSTER, "topic_name": "$request.path.topic_name",
     "name": "$response.body#/data/0/name"},
    {
        "GetTopicConfig": f"GET {_TOPIC}/configs/{{name}}",
        "UpdateTopicConfig": f"PUT {_TOPIC}/configs/{{name}}",
        "ResetTopicConfig": f"DELETE {_TOPIC}/configs/{{name}}",
    },
    "The first config of the list.",
) + fan(
    f"POST {_TOPIC}/records",
    200,
    {
        **_SAME_CLUSTER,
        "topic_name": "$request.path.topic_name",
        "partition_id": "$response.body#/partition_id",
    },
    {
        "GetPartition": f"GET {_PARTITION}",
        "GetPartitionOffset": f"GET {_PARTITION}/offset",
        "ReadRecords": f"GET {_PARTITION}/records",
    },
    "The partition the record went to.",
) + fan(
    f"GET {_PARTITION}/replicas",
    200,
    {
        **_SAME_CLUSTER,
        "topic_name": "$request.path.topic_name",
        "partition_id": "$request.path.partition_id",
        "broker_id": "$response.body#/data/0/broker_id",
    },
    {"GetReplica": f"GET {_PARTITION}/replicas/{{broker_id}}"},
    "The first replica of the list.",
)

# --- v3: users --------------------------------------------------------------------------

_V3_USERS = fan(
    f"PUT {V3}/users/{{user_name}}",
    204,
    {**_SAME_CLUSTER, "user_name": "$request.path.user_name"},
    {"DeleteUser": f"DELETE {V3}/users/{{user_name}}"},
    "The user just written.",
)

# --- v3: consumer groups ----------------------------------------------------------------

_GROUP_PARAMS = {**_SAME_CLUSTER, "consumer_group_id": "$response.body#/data/0/consumer_group_id"}
_V3_GROUPS = fan(
    f"GET {V3}/consumer-groups",
    200,
    _GROUP_PARAMS,
    {
        "GetConsumerGroup": f"GET {_GROUP}",
        "ListConsumers": f"GET {_GROUP}/consumers",
        "ListLags": f"GET {_GROUP}/lags",
        "GetLagSummary": f"GET {_GROUP}/lag-summary",
        "GetGroupOffsets": f"GET {_GROUP}/offsets",
        "AlterGroupOffsets": f"POST {_GROUP}/offsets:alter",
        "DeleteConsumerGroup": f"DELETE {_GROUP}",
    },
    "The first group of the list.",
) + fan(
    f"GET {_GROUP}/consumers",
    200,
    {**_SAME_CLUSTER, "consumer_group_id": "$request.path.consumer_group_id",
     "consumer_id": "$response.body#/data/0/consumer_id"},
    {
        "GetConsumer": f"GET {_CONSUMER}",
        "ListConsumerAssignments": f"GET {_CONSUMER}/assignments",
    },
    "The first consumer of the list.",
) + fan(
    f"GET {_CONSUMER}/assignments",
    200,
    {
        **_SAME_CLUSTER,
        "consumer_group_id": "$request.path.consumer_group_id",
        "consumer_id": "$request.path.consumer_id",
        "topic_name": "$response.body#/data/0/topic_name",
        "partition_id": "$response.body#/data/0/partition_id",
    },
    {"GetConsumerAssignment": f"GET {_CONSUMER}/assignments/{{topic_name}}/partitions/{{partition_id}}"},
    "The first assigned partition.",
) + fan(
    f"GET {_GROUP}/lags",
    200,
    {
        **_SAME_CLUSTER,
        "consumer_group_id": "$request.path.consumer_group_id",
        "topic_name": "$response.body#/data/0/topic_name",
        "partition_id": "$response.body#/data/0/partition_id",
    },
    {"GetPartitionLag": f"GET {_GROUP}/lags/{{topic_name}}/partitions/{{partition_id}}"},
    "The first lag of the list.",
)

LINKS: list[Link] = [
    *_V2_INSTANCE,
    *_V2_INSTANCE_AFTER,
    *_V2_TOPICS,
    *_V3_CLUSTER,
    *_V3_BROKERS,
    *_V3_TOPICS,
    *_V3_USERS,
    *_V3_GROUPS,
]
