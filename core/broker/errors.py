"""Broker-level domain errors: topics, partitions, replication, groups, consumers.

Each class carries Kafka's wire error number in ``error_code``; ``api/errors.py``
maps classes to HTTP status and Confluent ``error_code``. Storage errors live in
``core.storage.errors``.
"""

from __future__ import annotations

from core.errors import FranzError


class UnknownTopicOrPartitionError(FranzError):
    """The topic or partition does not exist."""

    error_code = 3


class UnknownTopicError(UnknownTopicOrPartitionError):
    """The topic does not exist (the partition question does not arise)."""


class UnknownPartitionError(UnknownTopicOrPartitionError):
    """The topic exists but not this partition."""


class LeaderNotAvailableError(FranzError):
    """The partition has no leader right now (election in progress, or offline)."""

    error_code = 5
    retriable = True


class NotLeaderOrFollowerError(FranzError):
    """This broker does not lead the partition."""

    error_code = 6
    retriable = True


class RequestTimedOutError(FranzError):
    """acks=all: the high watermark did not reach the records in time."""

    error_code = 7
    retriable = True


class DeleteRecordsTimedOutError(RequestTimedOutError):
    """DeleteRecords: the followers' log starts did not reach the offset in time (the
    records are deleted on the leader); ``low_watermark`` is the lowest log start then."""

    def __init__(self, message: str, *, low_watermark: int) -> None:
        super().__init__(message)
        self.low_watermark = low_watermark


class OffsetNotAvailableError(FranzError):
    """A new leader's high watermark has not caught up with its log yet (Kafka's
    OFFSET_NOT_AVAILABLE): its offsets would be older than what was acknowledged."""

    error_code = 78
    retriable = True


class OffsetMetadataTooLargeError(FranzError):
    """Commit metadata longer than offset.metadata.max.bytes."""

    error_code = 12


class GroupRecordTooLargeError(FranzError):
    """A group's metadata snapshot or an offset commit does not fit in a record of
    ``__consumer_offsets`` (its max.message.bytes, or a field's length); the group is left
    as it was. Kafka's INVALID_COMMIT_OFFSET_SIZE (Kafka answers a too-large group
    metadata record with UNKNOWN_SERVER_ERROR; franz with this)."""

    error_code = 28


class CoordinatorLoadInProgressError(FranzError):
    """The group coordinator is still loading the group from the offsets topic."""

    error_code = 14
    retriable = True


class CoordinatorNotAvailableError(FranzError):
    """The group coordinator is not available."""

    error_code = 15
    retriable = True


class NotCoordinatorError(FranzError):
    """This broker is not the coordinator of the group."""

    error_code = 16
    retriable = True


class NotEnoughReplicasError(FranzError):
    """acks=all and the ISR is smaller than min.insync.replicas: nothing was written."""

    error_code = 19
    retriable = True


class NotEnoughReplicasAfterAppendError(FranzError):
    """acks=all: written, but the ISR shrank below min.insync.replicas meanwhile."""

    error_code = 20
    retriable = True


class InvalidRequiredAcksError(FranzError):
    """acks other than 0, 1, -1/all."""

    error_code = 21


class IllegalGenerationError(FranzError):
    error_code = 22


class InvalidGroupIdError(FranzError):
    """An empty or otherwise unusable group id."""

    error_code = 24


class UnknownMemberIdError(FranzError):
    """The group has no such member (REST: no such consumer instance)."""

    error_code = 25


class RebalanceInProgressError(FranzError):
    error_code = 27
    retriable = True


class TopicAlreadyExistsError(FranzError):
    error_code = 36


class InvalidPartitionsError(FranzError):
    """A partition count below 1, or a decrease of the count."""

    error_code = 37


class InvalidReplicationFactorError(FranzError):
    """Replication factor below 1 or above the number of live brokers."""

    error_code = 38


class InvalidReplicaAssignmentError(FranzError):
    error_code = 39


class PolicyViolationError(FranzError):
    """A request the broker's limits refuse (max.partitions.per.topic, ...)."""

    error_code = 44


class NotControllerError(FranzError):
    error_code = 41
    retriable = True


class StaleControllerEpochError(FranzError):
    error_code = 11


class TopicDeletionDisabledError(FranzError):
    error_code = 73


class FencedLeaderEpochError(FranzError):
    error_code = 74
    retriable = True


class UnknownLeaderEpochError(FranzError):
    error_code = 75
    retriable = True


class NonEmptyGroupError(FranzError):
    error_code = 68


class GroupIdNotFoundError(FranzError):
    error_code = 69


class GroupSubscribedToTopicError(FranzError):
    """OffsetDelete of a topic an active member of the group subscribes to."""

    error_code = 86


class BrokerNotAvailableError(FranzError):
    error_code = 8
    retriable = True


# --- REST consumer instances (no Kafka wire code; Confluent has its own numbers) ----


class ConsumerInstanceNotFoundError(UnknownMemberIdError):
    """No consumer instance of that name in the group (expired, deleted or never made)."""


class ConsumerAlreadyExistsError(FranzError):
    """A consumer instance with this name already exists in the group."""


class GroupMaxSizeReachedError(FranzError):
    """The consumer group already has ``group.max.size`` members (Kafka's
    GROUP_MAX_SIZE_REACHED)."""

    error_code = 81


class IllegalConsumerStateError(FranzError):
    """Subscribe vs assign mixed, or a seek on a partition not assigned to the instance."""


class InvalidConsumerConfigError(FranzError):
    """A consumer-instance setting with a bad value (auto.offset.reset, format, ...)."""


class NoOffsetForPartitionError(FranzError):
    """auto.offset.reset=none and the group has no committed offset for a partition."""

    error_code = 1


# --- security (core.broker.security) -------------------------------------------------


class AuthorizationError(FranzError):
    """The principal may not do this (403 / 40301 over HTTP)."""

    error_code = 29  # TOPIC_AUTHORIZATION_FAILED; the subclasses name the resource kind


class TopicAuthorizationFailedError(AuthorizationError):
    error_code = 29


class GroupAuthorizationFailedError(AuthorizationError):
    error_code = 30


class ClusterAuthorizationFailedError(AuthorizationError):
    error_code = 31


class TransactionalIdAuthorizationFailedError(AuthorizationError):
    error_code = 53


class SecurityDisabledError(FranzError):
    """An ACL call on a broker without an authorizer (Kafka's SECURITY_DISABLED)."""

    error_code = 54


class UnknownUserError(FranzError):
    """No such user (Kafka's RESOURCE_NOT_FOUND for a SCRAM credential)."""

    error_code = 91


class IdempotencyKeyInUseError(FranzError):
    """A produce with this Idempotency-Key is still in progress (another request holds
    it): answer the client 409 and let it retry later."""

    error_code = -1
    retriable = True


class IdempotencyKeyReusedError(FranzError):
    """The Idempotency-Key was first used for a different request (another body, topic,
    partition or content type): 422, nothing written."""

    error_code = -1


class IdempotencyKeysExhaustedError(FranzError):
    """The broker already holds ``idempotency.keys.max`` live Idempotency-Keys: a new key
    is refused (429) until older ones expire; nothing is written."""

    error_code = -1
    retriable = True


class IdempotencyOutcomeUnknownError(FranzError):
    """The first request with this Idempotency-Key never finished (its broker stopped
    mid-way) and its producer state has expired since: whether its records were written
    can no longer be told, so nothing is written again."""

    error_code = -1


# --- Kafka's classic group protocol (core.broker.group.classic) -----------------------


class InconsistentGroupProtocolError(FranzError):
    """The member's protocol type, or every one of its protocols, is not one the group's
    members share (Kafka's INCONSISTENT_GROUP_PROTOCOL)."""

    error_code = 23


class InvalidSessionTimeoutError(FranzError):
    """A JoinGroup's session timeout outside group.min.session.timeout.ms ..
    group.max.session.timeout.ms (Kafka's INVALID_SESSION_TIMEOUT)."""

    error_code = 26


class MemberIdRequiredError(FranzError):
    """A first JoinGroup (v4+, no group instance id) gets a member id and must join again
    with it (KIP-394, Kafka's MEMBER_ID_REQUIRED); ``member_id`` is the id to use."""

    error_code = 79

    def __init__(self, message: str = "", *, member_id: str = "") -> None:
        super().__init__(message)
        self.member_id = member_id


class FencedInstanceIdError(FranzError):
    """Another member id holds this group instance id now (a static member that was
    replaced: KIP-345, Kafka's FENCED_INSTANCE_ID)."""

    error_code = 82
