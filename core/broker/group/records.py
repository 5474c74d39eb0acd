"""Groups <-> ``__consumer_offsets`` records: what the coordinator writes, and how a
partition's records become groups again when it is loaded.

Records (formats in ``core.broker.group.offsets_codec``)::

    offset commit    key (group, topic, partition) -> OffsetCommitValue v3, or null
    group metadata   key (group)                   -> GroupMetadataValue v3, or null

A group metadata record is a full snapshot: protocol type, generation, protocol
(assignor), leader and every member with its subscription and assignment in the
embedded consumer protocol. What a Kafka consumer keeps on the client side lives in the
subscription's ``user_data`` as JSON, so a restarted coordinator can give REST clients
their instances back::

    {"franz": 1, "pattern": "t.*" | null, "manual": false, "properties": {...}}

``topics`` of a pattern member are the topics the pattern matched when written; the
assignment of a manual member is the partitions it chose. A Kafka client's member (the
classic protocol, ``Member.classic``) is written as Kafka writes it: the metadata it
sent for the group's protocol and the assignment its leader gave it, both as they came.
Loading applies records in log order (a null value removes the key), then materialises
each group: Stable with its stored generation, members and assignments when it has
members, else Empty; members get fresh heartbeat deadlines (kafka-internals.md 4.8). A
member whose subscription carries franz's user data is a REST instance again; any other
is a Kafka client's (its bytes kept as they are, its topics and partitions decoded for
describing when the protocol type is ``consumer`` and they decode).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from core.broker.group import consumer_protocol
from core.broker.group import offsets_codec as codec
from core.broker.group.group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicMember,
    CommittedOffset,
    Group,
    GroupState,
    Member,
)
from core.broker.types import TopicPartition
from core.storage.records import NewRecord, Record

log = logging.getLogger(__name__)

_USER_DATA_VERSION = 1


# --- writing ---------------------------------------------------------------------------


def offset_commit_record(
    group_id: str, tp: TopicPartition, committed: CommittedOffset
) -> NewRecord:
    key = codec.encode_offset_commit_key(codec.OffsetCommitKey(group_id, tp.topic, tp.partition))
    value = codec.encode_offset_commit_value(
        codec.OffsetCommitValue(
            offset=committed.offset,
            leader_epoch=committed.leader_epoch,
            metadata=committed.metadata,
            commit_timestamp=committed.commit_timestamp,
            expire_timestamp=committed.expire_timestamp,
        )
    )
    return NewRecord(value=value, key=key, timestamp=committed.commit_timestamp)


def offset_tombstone(group_id: str, tp: TopicPartition, now_ms: int) -> NewRecord:
    key = codec.encode_offset_commit_key(codec.OffsetCommitKey(group_id, tp.topic, tp.partition))
    return NewRecord(value=None, key=key, timestamp=now_ms)


def group_metadata_record(group: Group, now_ms: int) -> NewRecord:
    key = codec.encode_group_metadata_key(codec.GroupMetadataKey(group.group_id))
    value = codec.encode_group_metadata_value(
        codec.GroupMetadataValue(
            protocol_type=group.protocol_type or CONSUMER_PROTOCOL_TYPE,
            generation=group.generation,
            protocol=group.protocol,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp_ms,
            members=tuple(_member_metadata(m, group.protocol) for m in group.members.values()),
        )
    )
    return NewRecord(value=value, key=key, timestamp=now_ms)


def group_tombstone(group_id: str, now_ms: int) -> NewRecord:
    key = codec.encode_group_metadata_key(codec.GroupMetadataKey(group_id))
    return NewRecord(value=None, key=key, timestamp=now_ms)


def _member_metadata(m: Member, protocol: str | None) -> codec.MemberMetadata:
    if m.classic is not None:  # a Kafka client's: its own bytes, as Kafka stores them
        return codec.MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.classic.metadata(protocol),
            assignment=m.classic.assignment,
        )
    user_data = json.dumps(
        {
            "franz": _USER_DATA_VERSION,
            "pattern": m.pattern,
            "manual": m.manual,
            "properties": m.properties,
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    return codec.MemberMetadata(
        member_id=m.member_id,
        group_instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        rebalance_timeout=m.rebalance_timeout_ms,
        session_timeout=m.session_timeout_ms,
        subscription=consumer_protocol.encode_subscription(m.topics, user_data, owned=m.assignment),
        assignment=consumer_protocol.encode_assignment(m.assignment),
    )


# --- loading ---------------------------------------------------------------------------


@dataclass
class PartitionLoader:
    """Accumulates one offsets partition's records in log order, then builds groups."""

    partition: int
    offsets: dict[tuple[str, TopicPartition], CommittedOffset] = field(default_factory=dict)
    metadata: dict[str, codec.GroupMetadataValue] = field(default_factory=dict)
    skipped: int = 0

    def apply(self, record: Record) -> None:
        if record.key is None:
            self.skipped += 1
            return
        try:
            key = codec.decode_key(record.key)
            if isinstance(key, codec.OffsetCommitKey):
                self._apply_offset(key, record.value)
            elif isinstance(key, codec.GroupMetadataKey):
                self._apply_group(key.group, record.value)
            else:
                self.skipped += 1  # KIP-848 records: not for a classic coordinator
        except codec.CorruptOffsetsRecordError as exc:
            self.skipped += 1
            log.warning(
                "__consumer_offsets-%d: skipping record at offset %d: %s",
                self.partition,
                record.offset,
                exc,
            )

    def _apply_offset(self, key: codec.OffsetCommitKey, value: bytes | None) -> None:
        slot = (key.group, TopicPartition(key.topic, key.partition))
        if value is None:
            self.offsets.pop(slot, None)
            return
        v = codec.decode_offset_commit_value(value)
        self.offsets[slot] = CommittedOffset(
            v.offset, v.metadata, v.commit_timestamp, v.leader_epoch, v.expire_timestamp
        )

    def _apply_group(self, group_id: str, value: bytes | None) -> None:
        if value is None:
            self.metadata.pop(group_id, None)
        else:
            self.metadata[group_id] = codec.decode_group_metadata_value(value)

    def groups(self, now_ms: int) -> dict[str, Group]:
        """Materialise every group that has metadata or offsets."""
        out: dict[str, Group] = {}
        for group_id, value in self.metadata.items():
            out[group_id] = _group_from_metadata(group_id, self.partition, value, now_ms)
        for (group_id, tp), committed in self.offsets.items():
            group = out.get(group_id)
            if group is None:
                group = out[group_id] = Group(group_id, partition=self.partition)
            group.offsets[tp] = committed
        return out


def _group_from_metadata(
    group_id: str, partition: int, value: codec.GroupMetadataValue, now_ms: int
) -> Group:
    group = Group(
        group_id,
        partition=partition,
        state=GroupState.STABLE if value.members else GroupState.EMPTY,
        protocol_type=value.protocol_type,
        generation=value.generation,
        protocol=value.protocol,
        leader_id=value.leader,
        state_timestamp_ms=value.current_state_timestamp,
    )
    for meta in value.members:
        member = _member_from_metadata(meta, value)
        member.touch(now_ms)
        group.members[member.member_id] = member
    return group


def _member_from_metadata(meta: codec.MemberMetadata,
                          group: codec.GroupMetadataValue) -> Member:
    subscription: consumer_protocol.ConsumerSubscription | None = None
    assignment: consumer_protocol.ConsumerAssignment | None = None
    if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
        try:
            subscription = consumer_protocol.decode_subscription(meta.subscription)
            assignment = (consumer_protocol.decode_assignment(meta.assignment)
                          if meta.assignment else None)
        except codec.CorruptOffsetsRecordError:
            subscription = assignment = None  # a client's own format: kept as bytes
    if subscription is None or not is_franz_user_data(subscription.user_data):
        return _classic_member(meta, group, subscription, assignment)
    extra = _decode_user_data(subscription.user_data)
    pattern, properties = extra.get("pattern"), extra.get("properties")  # as franz wrote them
    return Member(
        member_id=meta.member_id,
        client_id=meta.client_id,
        client_host=meta.client_host,
        session_timeout_ms=meta.session_timeout,
        rebalance_timeout_ms=meta.rebalance_timeout,
        group_instance_id=meta.group_instance_id,
        topics=subscription.topics,
        pattern=pattern if isinstance(pattern, str) else None,
        manual=bool(extra.get("manual", False)),
        assignment=tuple(TopicPartition(t, p) for t, p in assignment.partitions)
        if assignment
        else (),
        properties=dict(properties) if isinstance(properties, dict) else {},
    )


def _classic_member(meta: codec.MemberMetadata, group: codec.GroupMetadataValue,
                    subscription: consumer_protocol.ConsumerSubscription | None,
                    assignment: consumer_protocol.ConsumerAssignment | None) -> Member:
    """A Kafka client's member as written: its metadata for the group's protocol and its
    assignment, bytes as they were; topics and partitions decoded where they could be."""
    return Member(
        member_id=meta.member_id,
        client_id=meta.client_id,
        client_host=meta.client_host,
        session_timeout_ms=meta.session_timeout,
        rebalance_timeout_ms=meta.rebalance_timeout,
        group_instance_id=meta.group_instance_id,
        topics=subscription.topics if subscription is not None else (),
        assignment=tuple(TopicPartition(t, p) for t, p in assignment.partitions)
        if assignment is not None else (),
        classic=ClassicMember(
            protocol_type=group.protocol_type,
            protocols=((group.protocol or "", meta.subscription),),
            assignment=meta.assignment,
        ),
    )


def is_franz_user_data(user_data: bytes | None) -> bool:
    """Whether a subscription's user data is the JSON franz writes for a REST instance
    (a Kafka client's JoinGroup may not carry it: on a reload it would read as one)."""
    return bool(_decode_user_data(user_data))


def _decode_user_data(user_data: bytes | None) -> dict[str, object]:
    """franz's JSON, or {} for anything else (e.g. a Kafka assignor's own user data)."""
    if not user_data:
        return {}
    try:
        data = json.loads(user_data)
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("franz") != _USER_DATA_VERSION:
        return {}
    return data
