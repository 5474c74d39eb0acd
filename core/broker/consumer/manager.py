"""REST consumer instances as members of coordinator-run groups (docs/broker-api.md).

An instance is a group member whose member id is the instance name. Creating one joins
the group, deleting it (or letting it idle past ``consumer.instance.timeout.ms``) leaves
it; every call on it is a heartbeat. ``subscribe`` makes it take part in the group's
assignment (run here, with the manager's assignor); ``assign`` picks partitions by hand
(the two exclude each other, as in the Java consumer). Membership, subscriptions,
assignments and settings are in the group metadata record and committed offsets in the
offset records of ``__consumer_offsets``, so after a restart the instance is still there
and reads on from its committed positions.

Positions live in memory (:class:`InstanceState`): a partition's first read starts at
the committed offset, else at auto.offset.reset. With auto-commit, each read first
commits the positions reached by the previous reads (the Java consumer's rule), as do a
rebalance that takes partitions away and leaving the group.

Moving a group's offsets needs READ on the group and on each topic, at the time of the
commit (Kafka's OffsetCommit rule): ``commit`` checks the caller for the partitions it
writes, whether they came in the request or from the instance's positions (after a
seek); an auto-commit writes only the partitions its instance's owner may still READ.

Kafka clients may be members of the same groups (``self.classic``, the classic group
protocol: ``core.broker.group.classic``). In a group with one, a change made here (an
instance created, deleted, subscribed) starts Kafka's rebalance and returns: the
instance's new partitions come when the Kafka leader's assignment is written (until then
it reads the ones it had); its auto-commit runs first, as on any rebalance.

Event-loop only. Wiring: ``ConsumerManager(backend, config=..., clock=...)``, then
``await start()`` (loads the offsets partitions this broker leads, starts the expiry and
metadata loop) and ``await stop()``. The broker calls ``on_topics_changed()`` after
topic creation, deletion and partition changes; the replica manager tells
``coordinator.on_role_change(p, epoch)`` of every role change of ``__consumer_offsets``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from core.broker.consumer.fetch import (
    OfflineSkips,
    check_assigned,
    edge_positions,
    read_instance,
    timestamp_positions,
)
from core.broker.consumer.instance import (
    ANONYMOUS_OWNER,
    OWNER_PROPERTY,
    ConsumerInstanceInfo,
    InstanceState,
    PolledRecords,
    validate_group_id,
)
from core.broker.errors import (
    GroupAuthorizationFailedError,
    IllegalConsumerStateError,
    TopicAuthorizationFailedError,
)
from core.broker.group.assignors import ASSIGNORS
from core.broker.group.backend import GroupBackend
from core.broker.group.classic import ClassicGroups
from core.broker.group.coordinator import GroupCoordinator
from core.broker.group.group import Group, GroupDescription, GroupSummary, Member
from core.broker.group.topics import check_partitions, compile_topic_pattern
from core.broker.security.acl import Operation, ResourceType
from core.broker.security.principal import Principal
from core.broker.types import TopicPartition
from core.clock import SYSTEM_CLOCK, Clock
from core.errors import FranzError, InvalidRequestError
from core.storage.config import MAX_TOPIC_NAME_LENGTH, validate_topic_name
from core.storage.errors import InvalidTopicError

__all__ = ["ConsumerInstanceInfo", "ConsumerManager", "GroupDescription", "GroupSummary"]

log = logging.getLogger(__name__)

DEFAULTS: Mapping[str, Any] = {
    "consumer.instance.timeout.ms": 300_000,
    "consumer.request.timeout.ms": 1_000,
    "consumer.request.timeout.max.ms": 300_000,  # ceiling on every wait of a read
    "consumer.request.max.bytes": 64 * 1024 * 1024,
    "offset.metadata.max.bytes": 4096,
    "group.max.size": 1000,
    "offsets.retention.minutes": 10080,  # Kafka's: 7 days
    "offsets.retention.check.interval.ms": 600_000,
    "consumer.partition.assignment.strategy": "range",  # not a Kafka broker property
    # Kafka clients' groups (the classic protocol: core.broker.group.classic)
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 6_000,
    "group.max.session.timeout.ms": 1_800_000,
}
EXPIRY_CHECK_INTERVAL_MS = 1_000
METADATA_REFRESH_INTERVAL_MS = 30_000
SHUTDOWN_COMMIT_S = 5.0
MUTUALLY_EXCLUSIVE = (
    "Illegal state: Subscription to topics, partitions and pattern are mutually exclusive"
)


def _setting(config: Any, name: str) -> Any:
    if config is not None:
        with contextlib.suppress(KeyError):
            return config[name]
    return DEFAULTS[name]


class ConsumerManager:
    """Every REST consumer instance of the groups this broker coordinates."""

    def __init__(
        self,
        backend: GroupBackend,
        *,
        config: Any = None,
        clock: Clock = SYSTEM_CLOCK,
        assignor: str | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        self.backend = backend
        self._authorize = authorize  # None: every instance may read every topic
        self.clock = clock
        self.instance_timeout_ms = int(_setting(config, "consumer.instance.timeout.ms"))
        self.request_timeout_max_ms = int(_setting(config, "consumer.request.timeout.max.ms"))
        self.request_timeout_ms = min(int(_setting(config, "consumer.request.timeout.ms")),
                                      self.request_timeout_max_ms)
        self.request_max_bytes = int(_setting(config, "consumer.request.max.bytes"))
        self.offsets_retention_ms = int(_setting(config, "offsets.retention.minutes")) * 60_000
        self.retention_check_ms = int(_setting(config, "offsets.retention.check.interval.ms"))
        if self.offsets_retention_ms < 60_000 or self.retention_check_ms < 1:
            raise ValueError("offsets.retention.minutes must be at least 1 and "
                             "offsets.retention.check.interval.ms positive")
        assignor = assignor or str(_setting(config, "consumer.partition.assignment.strategy"))
        if assignor not in ASSIGNORS:
            raise ValueError(
                f"unknown partition assignor {assignor!r} (known: {sorted(ASSIGNORS)})"
            )
        self.coordinator = GroupCoordinator(
            backend,
            clock=clock,
            assignor=assignor,
            offset_metadata_max_bytes=int(_setting(config, "offset.metadata.max.bytes")),
            group_max_size=int(_setting(config, "group.max.size")),
            listener=self,
            initial_rebalance_delay_ms=int(_setting(config, "group.initial.rebalance.delay.ms")),
        )
        #: Kafka clients' side of the same groups (JoinGroup, SyncGroup, ...): the wire
        #: door's entry, for the groups coordinated here
        self.classic = ClassicGroups(
            self.coordinator,
            min_session_timeout_ms=int(_setting(config, "group.min.session.timeout.ms")),
            max_session_timeout_ms=int(_setting(config, "group.max.session.timeout.ms")))
        #: reads that skipped a partition whose replica is offline (fetch.OfflineSkips)
        self.offline_skips = OfflineSkips()
        self._tasks: list[asyncio.Task[None]] = []
        self._refresh: asyncio.Task[None] | None = None
        self._refresh_again = False

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        owned = await self.coordinator.load_owned()
        log.info("consumer manager started; coordinating %d offsets partitions", len(owned))
        self._tasks.append(asyncio.create_task(self._maintain()))

    async def stop(self) -> None:
        """Stop the background work and auto-commit what instances have read (they stay
        members: the next start finds them in the log)."""
        tasks = [*self._tasks, *([self._refresh] if self._refresh else [])]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._refresh = None
        self.coordinator.stop_classic()
        for group in self.coordinator.loaded_groups():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._auto_commit_group(group), SHUTDOWN_COMMIT_S)

    async def _maintain(self) -> None:
        since_refresh = since_retention = 0
        while True:
            await asyncio.sleep(EXPIRY_CHECK_INTERVAL_MS / 1000)
            since_refresh += EXPIRY_CHECK_INTERVAL_MS
            since_retention += EXPIRY_CHECK_INTERVAL_MS
            try:
                await self.expire_idle(self.clock.now_ms())
                if since_refresh >= METADATA_REFRESH_INTERVAL_MS:
                    since_refresh = 0
                    await self.coordinator.refresh_metadata()
                if since_retention >= self.retention_check_ms:
                    since_retention = 0
                    await self.coordinator.expire_empty_groups(self.clock.now_ms(),
                                                               self.offsets_retention_ms)
            except Exception:  # a failed round must not end the loop
                log.exception("consumer maintenance failed")

    async def expire_idle(self, now_ms: int | None = None) -> list[tuple[str, str]]:
        """Remove instances idle past their timeout (their groups rebalance)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        expired = await self.coordinator.expire(now)
        for group, instance in expired:
            log.info("consumer instance %s of group %s expired", instance, group)
        return expired

    def on_topics_changed(self) -> None:
        """Topics were created or deleted, or partitions added: re-evaluate pattern
        subscriptions and assignments (in the background; calls coalesce)."""
        if self._refresh is not None and not self._refresh.done():
            self._refresh_again = True
            return
        self._refresh = asyncio.ensure_future(self._run_refresh())

    async def _run_refresh(self) -> None:
        while True:
            self._refresh_again = False
            try:
                await self.coordinator.refresh_metadata()
            except Exception:
                log.exception("consumer metadata refresh failed")
            if not self._refresh_again:
                return

    # --- instances ----------------------------------------------------------------------

    async def create(
        self,
        group: str,
        *,
        name: str | None = None,
        format: str = "binary",
        auto_offset_reset: str = "latest",
        auto_commit: bool = True,
        fetch_min_bytes: int = -1,
        request_timeout_ms: int | None = None,
        client_host: str = "",
        owner: str = ANONYMOUS_OWNER,
    ) -> ConsumerInstanceInfo:
        """Join ``group`` as a new instance (ConsumerAlreadyExistsError,
        InvalidConsumerConfigError; InvalidGroupIdError for a group id no new group may
        have, unless the group exists already)."""
        if not group or await self.coordinator.group(group) is None:
            validate_group_id(group)
        instance = name or f"rest-consumer-{uuid.uuid4()}"
        info = ConsumerInstanceInfo.validated(
            group,
            instance,
            format=format,
            auto_offset_reset=auto_offset_reset,
            auto_commit=auto_commit,
            fetch_min_bytes=fetch_min_bytes,
            request_timeout_ms=request_timeout_ms,
            owner=owner,
        )
        member = Member(
            member_id=instance,
            client_id=instance,
            client_host=client_host,
            session_timeout_ms=self.instance_timeout_ms,
            rebalance_timeout_ms=self.instance_timeout_ms,
            properties=info.to_properties(),
            runtime=InstanceState(info),
        )
        await self.coordinator.join(group, member)
        log.info("consumer instance %s created in group %s", instance, group)
        return info

    async def delete(self, group: str, instance: str, *, principal: str | None = None) -> None:
        """Leave the group (auto-commit first, like closing a Java consumer)."""
        await self._member(group, instance, principal)
        if not await self.coordinator.leave(group, [instance], reason="deleted"):
            self.coordinator.member(group, instance)  # raises ConsumerInstanceNotFoundError

    def get(self, group: str, instance: str, *,
            principal: str | None = None) -> ConsumerInstanceInfo:
        """The instance's settings; counts as a heartbeat."""
        info = self._state(self.coordinator.touch(group, instance), group).info
        _check_owner(info, principal)
        return info

    async def subscribe(
        self,
        group: str,
        instance: str,
        *,
        topics: list[str] | None = None,
        pattern: str | None = None,
        principal: str | None = None,
    ) -> None:
        """Replace the subscription (``topics`` wins over ``pattern``) and rebalance.
        InvalidTopicError for a name no topic may have: the names travel in the group's
        metadata record (int16-length strings), which must stay writable."""
        if topics is None and pattern is None:
            raise InvalidRequestError("subscribe needs topics or a topic pattern")
        for topic in topics or ():
            _check_topic_name(topic)
        if topics is None and pattern is not None:
            compile_topic_pattern(pattern)  # InvalidRequestError naming what is wrong
        await self._member(group, instance, principal)

        def change(m: Member) -> None:
            if m.manual:
                raise IllegalConsumerStateError(MUTUALLY_EXCLUSIVE)
            m.topics = tuple(dict.fromkeys(topics)) if topics is not None else ()
            m.pattern = pattern if topics is None else None

        await self.coordinator.update_member(group, instance, change, reason="subscribed")

    async def subscription(self, group: str, instance: str, *,
                           principal: str | None = None) -> list[str]:
        member = await self._member(group, instance, principal)
        return sorted(member.topics) if member.is_subscribed else []

    async def unsubscribe(self, group: str, instance: str, *, principal: str | None = None) -> None:
        """Drop the subscription and any manual assignment."""
        await self._member(group, instance, principal)

        def change(m: Member) -> None:
            m.topics, m.pattern, m.manual = (), None, False

        await self.coordinator.update_member(group, instance, change, reason="unsubscribed")

    async def assign(self, group: str, instance: str, partitions: list[TopicPartition], *,
                     principal: str | None = None) -> None:
        """Manual assignment (IllegalConsumerStateError while subscribed)."""
        member = await self._member(group, instance, principal)
        if member.is_subscribed:
            raise IllegalConsumerStateError(MUTUALLY_EXCLUSIVE)
        wanted = tuple(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        await check_partitions(self.backend, wanted)

        def change(m: Member) -> frozenset[TopicPartition]:
            if m.is_subscribed:
                raise IllegalConsumerStateError(MUTUALLY_EXCLUSIVE)
            revoked = frozenset(m.assignment) - frozenset(wanted)
            m.manual, m.assignment = bool(wanted), wanted
            return revoked

        await self.coordinator.persist_member(group, instance, change)

    async def assignment(self, group: str, instance: str, *,
                         principal: str | None = None) -> list[TopicPartition]:
        member = await self._member(group, instance, principal)
        return list(member.assignment)

    # --- positions ----------------------------------------------------------------------

    async def seek(self, group: str, instance: str, offsets: Mapping[TopicPartition, int], *,
                   principal: str | None = None) -> None:
        member = await self._member(group, instance, principal)
        state = self._state(member, group)
        check_assigned(member, offsets)
        for tp, offset in offsets.items():
            state.seek(TopicPartition(*tp), int(offset))

    async def seek_to_timestamp(
        self, group: str, instance: str, timestamps: Mapping[TopicPartition, int], *,
        principal: str | None = None,
    ) -> None:
        """To the first offset with a timestamp >= the given one (the end if none)."""
        member = await self._member(group, instance, principal)
        check_assigned(member, timestamps)
        self._seek_all(member, group, await timestamp_positions(self.backend, timestamps))

    async def seek_to_beginning(
        self, group: str, instance: str, partitions: Iterable[TopicPartition], *,
        principal: str | None = None,
    ) -> None:
        await self._seek_edge(group, instance, partitions, end=False, principal=principal)

    async def seek_to_end(
        self, group: str, instance: str, partitions: Iterable[TopicPartition], *,
        principal: str | None = None,
    ) -> None:
        await self._seek_edge(group, instance, partitions, end=True, principal=principal)

    async def _seek_edge(
        self, group: str, instance: str, partitions: Iterable[TopicPartition], *, end: bool,
        principal: str | None = None,
    ) -> None:
        member = await self._member(group, instance, principal)
        tps = [TopicPartition(*tp) for tp in partitions]
        check_assigned(member, tps)
        self._seek_all(member, group, await edge_positions(self.backend, tps, end=end))

    def _seek_all(self, member: Member, group: str, targets: Mapping[TopicPartition, int]) -> None:
        check_assigned(member, targets)  # the assignment may have moved while we looked
        state = self._state(member, group)
        for tp, offset in targets.items():
            state.seek(tp, offset)

    # --- reading ------------------------------------------------------------------------

    async def poll(
        self,
        group: str,
        instance: str,
        *,
        timeout_ms: int | None = None,
        max_bytes: int | None = None,
        principal: str | None = None,
    ) -> PolledRecords:
        """Records from the assigned partitions: as soon as there are any, else after
        waiting up to the timeout (which may only shorten the instance's own); never
        longer than ``consumer.request.timeout.max.ms``."""
        member = await self._member(group, instance, principal)
        state = self._state(member, group)
        wait_ms = state.info.request_timeout_ms or self.request_timeout_ms
        if timeout_ms is not None and timeout_ms > 0:
            wait_ms = min(wait_ms, timeout_ms)
        wait_ms = min(wait_ms, self.request_timeout_max_ms)
        cap = self.request_max_bytes
        if max_bytes is not None and max_bytes > 0:
            cap = min(cap, max_bytes)
        self._check_readable(member, state.info)
        async with state.poll_lock:
            if state.info.auto_commit:
                await self._auto_commit(group, member, state)
            return await read_instance(
                self.backend,
                lambda tps: self.coordinator.committed(group, tps),
                member,
                state,
                wait_ms=wait_ms,
                max_bytes=cap,
                heartbeat=lambda: member.touch(self.clock.now_ms()),
                offline=self.offline_skips,
            )

    # --- offsets ------------------------------------------------------------------------

    async def commit(
        self,
        group: str,
        instance: str,
        offsets: Mapping[TopicPartition, tuple[int, str]] | None = None,
        *,
        principal: str | None = None,
        client_host: str | None = None,
    ) -> None:
        """Commit ``offsets`` (next offsets to read, metadata); None: the positions.

        The caller (``principal``, from ``client_host``; None: the instance's owner, from
        the host it was created from) must be allowed READ on the group and on every
        topic committed, whatever the offsets came from (a body, the positions a seek
        set): checked here, where the offsets are known, at the time of the commit.
        GroupAuthorizationFailedError / TopicAuthorizationFailedError (403) otherwise,
        and nothing is committed."""
        member = await self._member(group, instance, principal)
        state = self._state(member, group)
        if offsets is None:
            offsets = {
                tp: (pos, "") for tp, pos in state.positions.items() if tp in member.assignment
            }
        entries = {TopicPartition(*tp): (int(o), m or "") for tp, (o, m) in offsets.items()}
        self._check_commit(group, state.info.owner if principal is None else principal,
                           member.client_host if client_host is None else client_host,
                           {tp.topic for tp in entries})
        await self.coordinator.commit_offsets(group, entries, member_id=instance)
        state.auto_committed.update({tp: o for tp, (o, _) in entries.items()})

    async def committed(
        self, group: str, instance: str, partitions: Iterable[TopicPartition], *,
        principal: str | None = None,
    ) -> dict[TopicPartition, tuple[int, str]]:
        """Committed offsets of ``partitions``; those without a commit are left out."""
        await self._member(group, instance, principal)
        found = await self.coordinator.committed(group, [TopicPartition(*tp) for tp in partitions])
        return {tp: (c.offset, c.metadata) for tp, c in found.items()}

    async def _auto_commit(self, group: str, member: Member, state: InstanceState) -> None:
        """Commit the positions reached since the last commit, of the partitions the
        instance's owner may still READ (and only with READ on the group): a partition
        whose READ was revoked keeps its committed offset, whatever the instance sought
        since (logged at DEBUG; never an error for the read, rebalance or leave that
        triggered it)."""
        pending = self._committable(group, member, state.info.owner,
                                    state.uncommitted(member.assignment))
        if not pending:
            return
        try:
            await self.coordinator.commit_offsets(
                group, {tp: (pos, "") for tp, pos in pending.items()}, member_id=member.member_id
            )
        except FranzError as exc:  # the Java consumer logs failed auto-commits and goes on
            log.warning("auto-commit of %s in group %s failed: %s", member.member_id, group, exc)
            return
        state.auto_committed.update(pending)

    # --- RebalanceListener ----------------------------------------------------------------

    async def before_rebalance(self, group: Group, leaving: Iterable[Member]) -> None:
        """Members that auto-commit commit their positions before partitions move or
        they leave (the Java consumer's commit on revocation and on close)."""
        await self._auto_commit_group(group)

    async def _auto_commit_group(self, group: Group) -> None:
        for member in list(group.members.values()):
            state = member.runtime
            if isinstance(state, InstanceState) and state.info.auto_commit:
                await self._auto_commit(group.group_id, member, state)

    def on_assignment_changed(
        self, group: Group, member: Member, revoked: frozenset[TopicPartition]
    ) -> None:
        if isinstance(member.runtime, InstanceState):
            member.runtime.forget(revoked)  # also wakes a waiting read: its plan is stale

    # --- admin (v3, CLI) --------------------------------------------------------------------

    async def list_groups(self) -> list[GroupSummary]:
        return self.coordinator.list_groups()

    async def describe_group(self, group: str) -> GroupDescription:
        return await self.coordinator.describe_group(group)

    async def group_offsets(self, group: str) -> dict[TopicPartition, int]:
        return {tp: c.offset for tp, c in (await self.coordinator.committed(group)).items()}

    async def reset_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        await self.coordinator.reset_offsets(group, offsets)

    async def delete_group(self, group: str) -> None:
        await self.coordinator.delete_group(group)

    # --- authorization ------------------------------------------------------------------

    def _may_read(self, owner: str, host: str, topic: str) -> bool:
        if self._authorize is None:
            return True
        return self._authorize(Principal.parse(owner), host, Operation.READ,
                               ResourceType.TOPIC, topic)

    def _may_read_group(self, principal: str, host: str, group: str) -> bool:
        if self._authorize is None:
            return True
        return self._authorize(Principal.parse(principal), host, Operation.READ,
                               ResourceType.GROUP, group)

    def _check_commit(self, group: str, principal: str, host: str, topics: set[str]) -> None:
        """Kafka's OffsetCommit rule: READ on the group, then READ on every topic."""
        if not self._may_read_group(principal, host, group):
            raise GroupAuthorizationFailedError(f"Not authorized to READ group {group!r}.")
        denied = sorted(t for t in topics if not self._may_read(principal, host, t))
        if denied:
            raise TopicAuthorizationFailedError(
                f"Not authorized to READ topic {denied[0]!r}." if len(denied) == 1
                else f"Not authorized to READ topics {denied}.")

    def _committable(self, group: str, member: Member, owner: str,
                     pending: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """What of ``pending`` an auto-commit may write for ``owner``: nothing without
        READ on the group, else the partitions of topics it may READ."""
        if not pending or self._authorize is None:
            return pending
        if not self._may_read_group(owner, member.client_host, group):
            log.debug("auto-commit of %s in group %s skipped: %s may not READ the group",
                      member.member_id, group, owner)
            return {}
        readable = {t: self._may_read(owner, member.client_host, t)
                    for t in {tp.topic for tp in pending}}
        if not all(readable.values()):
            log.debug("auto-commit of %s in group %s skips topics %s: %s may not READ them",
                      member.member_id, group, sorted(t for t, ok in readable.items() if not ok),
                      owner)
        return {tp: pos for tp, pos in pending.items() if readable[tp.topic]}

    def _check_readable(self, member: Member, info: ConsumerInstanceInfo) -> None:
        """TopicAuthorizationFailedError unless the owner may READ every assigned topic
        (checked on every read: a revoked ACL stops the next read)."""
        denied = sorted({tp.topic for tp in member.assignment
                         if not self._may_read(info.owner, member.client_host, tp.topic)})
        if denied:
            raise TopicAuthorizationFailedError(f"Not authorized to READ topics {denied}.")

    def readable_topics(self, member: Member, topics: Iterable[str]) -> list[str]:
        if self._authorize is None:
            return list(topics)
        owner = (member.runtime.info.owner if isinstance(member.runtime, InstanceState)
                 else str(member.properties.get(OWNER_PROPERTY, ANONYMOUS_OWNER)))
        return [t for t in topics if self._may_read(owner, member.client_host, t)]

    # --- helpers ----------------------------------------------------------------------------

    async def _member(self, group: str, instance: str, principal: str | None) -> Member:
        """The instance's member (loading its partition if needed); a heartbeat.
        ``principal``: the caller, who must be the instance's owner (None: this broker
        itself, e.g. expiry)."""
        _, member = await self.coordinator.find_member(group, instance)
        _check_owner(self._state(member, group).info, principal)
        member.touch(self.clock.now_ms())
        return member

    def _state(self, member: Member, group: str) -> InstanceState:
        """The runtime state, made on first use after a restart (positions start over
        from the committed offsets)."""
        if not isinstance(member.runtime, InstanceState):
            member.runtime = InstanceState(
                ConsumerInstanceInfo.from_properties(group, member.member_id, member.properties)
            )
        return member.runtime


Authorize = Callable[[Principal, str, Operation, ResourceType, str], bool]


def _check_topic_name(topic: str) -> None:
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is invalid: a name of {len(topic)} characters is longer than the "
            f"max allowed length {MAX_TOPIC_NAME_LENGTH}")
    validate_topic_name(topic)


def _check_owner(info: ConsumerInstanceInfo, principal: str | None) -> None:
    if principal is not None and principal != info.owner:
        raise GroupAuthorizationFailedError(
            f"Consumer instance {info.instance_id!r} of group {info.group!r} belongs to "
            f"another principal.")
