"""franz's errors as Kafka error codes: the one place the Kafka door maps them.

Domain errors (``core.broker.errors``, ``core.storage.errors``) carry Kafka's number in
``error_code`` already; anything else is UNKNOWN_SERVER_ERROR (-1), logged once with its
traceback, so a bug is seen and the client gets a defined answer.
"""

from __future__ import annotations

import logging
from typing import Any

from core.broker.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from core.errors import FranzError

log = logging.getLogger(__name__)

NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REQUEST = 42
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SASL_AUTHENTICATION_FAILED = 58
UNKNOWN_LEADER_EPOCH = 75
FENCED_LEADER_EPOCH = 74
LISTENER_NOT_FOUND = 72
OFFSET_NOT_AVAILABLE = 78
UNKNOWN_TOPIC_ID = 100
INCONSISTENT_TOPIC_ID = 103
FETCH_SESSION_TOPIC_ID_ERROR = 106


def code_of(exc: BaseException, *, where: str = "") -> int:
    """Kafka's error code for ``exc``."""
    if isinstance(exc, FranzError):
        code = getattr(exc, "error_code", None)
        if isinstance(code, int):
            return code
    log.error("kafka protocol: unexpected error%s", f" in {where}" if where else "",
              exc_info=exc)
    return UNKNOWN_SERVER_ERROR


def led_here(replicas: Any, tp: Any) -> Any:
    """The replica of ``tp`` this broker leads (``ReplicaManager.leader_partition``), for
    a partition the metadata has: one not hosted here is NOT_LEADER_OR_FOLLOWER, as Kafka
    answers it (the client's view of the leader is stale: it refreshes and goes to the
    leader), not UNKNOWN_TOPIC_OR_PARTITION, which is for partitions that do not exist."""
    try:
        return replicas.leader_partition(tp)
    except UnknownTopicOrPartitionError as exc:
        raise NotLeaderOrFollowerError(str(exc)) from None


def message_of(exc: BaseException) -> str:
    """A message for the answer's error_message fields (bounded)."""
    return str(exc)[:1000] if isinstance(exc, FranzError) else "unexpected server error"
