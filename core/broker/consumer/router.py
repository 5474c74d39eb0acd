"""Consumer-group calls served by the group's coordinator, whichever broker got them.

A group lives on one broker: the leader of its ``__consumer_offsets`` partition
(``abs(javaHashCode(group)) % offsets.topic.num.partitions``). ``GroupRouter`` has the
operations of ``ConsumerManager`` that clients call; each runs on this broker's manager
when the coordinator is here (or unknown: the manager then answers, e.g.
NOT_COORDINATOR), else it goes to the coordinator over the internal API (``wire``
encodes it; ``GroupCallClient`` carries it, as the data calls of
``core.broker.cluster.router``) and the coordinator's answer, or its domain error, comes
back. The coordinator serves it on its own manager and never forwards it again.

While the coordinator cannot be reached or says it is not the coordinator (it died, or
the controller is moving its partitions), the call is tried again against whatever
broker the metadata names next, for up to ``PATIENCE_S``; after that an unreachable
coordinator's calls are answered here, a NOT_COORDINATOR goes back to the client.

``list_groups`` asks every live broker (each knows only the groups it coordinates) and
answers the union; a broker that does not answer is left out. Event-loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from core.broker.consumer.instance import ConsumerInstanceInfo, PolledRecords
from core.broker.consumer.manager import ConsumerManager
from core.broker.consumer.wire import decode_result, encode_call
from core.broker.errors import (
    BrokerNotAvailableError,
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
)
from core.broker.group.group import GroupDescription, GroupSummary
from core.broker.group.hashing import coordinator_partition
from core.broker.metadata.cache import MetadataCache
from core.broker.replica.batch_cache import BatchCache
from core.broker.types import OFFSETS_TOPIC, TopicPartition
from core.errors import FranzError

Address = tuple[str, int]
PATIENCE_S = 15.0  # a little over a default failover (session timeout + election)
RETRY_S = 0.2
#: How long a forwarded call may take beyond its own wait (a poll's ``timeout_ms``).
CALL_TIMEOUT_S = 30.0
LIST_TIMEOUT_S = 5.0
LONGEST_POLL_MS = 300_000


class GroupCallClient(Protocol):
    """The coordinator's internal API, as the router calls it."""

    async def group_call(self, address: Address, op: str, body: bytes, *,
                         timeout_s: float) -> bytes: ...


class GroupRouter:
    """``client`` None: a broker without peers (every call is served here)."""

    def __init__(self, broker_id: int, manager: ConsumerManager, cache: MetadataCache,
                 batches: BatchCache, client: GroupCallClient | None) -> None:
        self._broker_id = broker_id
        self._manager = manager
        self._cache = cache
        self._batches = batches
        self._client = client

    def coordinator_address(self, group: str) -> Address | None:
        """Host and port of the broker coordinating ``group`` when that is another live
        broker; None when it is this broker, or unknown."""
        meta = self._cache.topic(OFFSETS_TOPIC)
        if meta is None:
            return None
        leader = self._cache.leader_of(OFFSETS_TOPIC,
                                       coordinator_partition(group, meta.num_partitions))
        if leader < 0 or leader == self._broker_id:
            return None
        return self._cache.address_of(leader)

    async def _call(self, op: str, group: str, *, wait_s: float = 0.0, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PATIENCE_S
        args = {"group": group, **kwargs}
        while True:
            address = None if self._client is None else self.coordinator_address(group)
            try:
                if address is None:
                    return await _local(self._manager, op, args)
                assert self._client is not None
                body = await self._client.group_call(address, op, encode_call(op, args),
                                                     timeout_s=CALL_TIMEOUT_S + wait_s)
                return decode_result(op, body, self._batches)
            except (BrokerNotAvailableError, NotCoordinatorError,
                    CoordinatorLoadInProgressError) as exc:
                # the coordinator is moving (this broker's metadata may name it before its
                # replica leads, or after it resigned) or still loading: nothing was
                # written, so the call is tried again where the metadata points next
                local = address is None
                if self._client is None or loop.time() >= deadline or (
                        local and isinstance(exc, BrokerNotAvailableError)):
                    if isinstance(exc, BrokerNotAvailableError) and not local:
                        return await _local(self._manager, op, args)  # answer here
                    raise
                await asyncio.sleep(RETRY_S)

    # --- instances ----------------------------------------------------------------------

    async def create(self, group: str, **settings: Any) -> ConsumerInstanceInfo:
        info: ConsumerInstanceInfo = await self._call("create", group, **settings)
        return info

    async def delete(self, group: str, instance: str, *, principal: str) -> None:
        await self._call("delete", group, instance=instance, principal=principal)

    async def get(self, group: str, instance: str, *, principal: str) -> ConsumerInstanceInfo:
        info: ConsumerInstanceInfo = await self._call("get", group, instance=instance,
                                                      principal=principal)
        return info

    async def subscribe(self, group: str, instance: str, *, topics: list[str] | None = None,
                        pattern: str | None = None, principal: str) -> None:
        await self._call("subscribe", group, instance=instance, principal=principal,
                         topics=topics, pattern=pattern)

    async def subscription(self, group: str, instance: str, *, principal: str) -> list[str]:
        topics: list[str] = await self._call("subscription", group, instance=instance,
                                             principal=principal)
        return topics

    async def unsubscribe(self, group: str, instance: str, *, principal: str) -> None:
        await self._call("unsubscribe", group, instance=instance, principal=principal)

    async def assign(self, group: str, instance: str, partitions: list[TopicPartition], *,
                     principal: str) -> None:
        await self._call("assign", group, instance=instance, principal=principal,
                         partitions=partitions)

    async def assignment(self, group: str, instance: str, *,
                         principal: str) -> list[TopicPartition]:
        tps: list[TopicPartition] = await self._call("assignment", group, instance=instance,
                                                     principal=principal)
        return tps

    async def seek(self, group: str, instance: str, offsets: Mapping[TopicPartition, int], *,
                   principal: str) -> None:
        await self._call("seek", group, instance=instance, principal=principal, offsets=offsets)

    async def seek_to_timestamp(self, group: str, instance: str,
                                timestamps: Mapping[TopicPartition, int], *,
                                principal: str) -> None:
        await self._call("seek_to_timestamp", group, instance=instance, principal=principal,
                         timestamps=timestamps)

    async def seek_to_beginning(self, group: str, instance: str,
                                partitions: Iterable[TopicPartition], *, principal: str) -> None:
        await self._call("seek_to_beginning", group, instance=instance, principal=principal,
                         partitions=list(partitions))

    async def seek_to_end(self, group: str, instance: str,
                          partitions: Iterable[TopicPartition], *, principal: str) -> None:
        await self._call("seek_to_end", group, instance=instance, principal=principal,
                         partitions=list(partitions))

    async def poll(self, group: str, instance: str, *, timeout_ms: int | None = None,
                   max_bytes: int | None = None, principal: str) -> PolledRecords:
        # the instance's own timeout is known at the coordinator only: allow the longest
        # (every wait is capped at consumer.request.timeout.max.ms there, as here)
        longest = getattr(self._manager, "request_timeout_max_ms", LONGEST_POLL_MS)
        wait_s = min(timeout_ms if timeout_ms else longest, longest) / 1000
        polled: PolledRecords = await self._call(
            "poll", group, wait_s=wait_s, instance=instance, principal=principal,
            timeout_ms=timeout_ms, max_bytes=max_bytes)
        return polled

    async def commit(self, group: str, instance: str,
                     offsets: Mapping[TopicPartition, tuple[int, str]] | None = None, *,
                     principal: str, client_host: str | None = None) -> None:
        """The coordinator checks READ on the group and the topics committed, for
        ``principal`` from ``client_host`` (the request's)."""
        host: dict[str, Any] = {} if client_host is None else {"client_host": client_host}
        await self._call("commit", group, instance=instance, principal=principal, offsets=offsets,
                         **host)

    async def committed(self, group: str, instance: str, partitions: Iterable[TopicPartition],
                        *, principal: str) -> dict[TopicPartition, tuple[int, str]]:
        found: dict[TopicPartition, tuple[int, str]] = await self._call(
            "committed", group, instance=instance, principal=principal, partitions=list(partitions))
        return found

    # --- groups (v3, CLI) -----------------------------------------------------------

    async def describe_group(self, group: str) -> GroupDescription:
        desc: GroupDescription = await self._call("describe_group", group)
        return desc

    async def group_offsets(self, group: str) -> dict[TopicPartition, int]:
        found: dict[TopicPartition, int] = await self._call("group_offsets", group)
        return found

    async def reset_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        await self._call("reset_offsets", group, offsets=offsets)

    async def delete_group(self, group: str) -> None:
        await self._call("delete_group", group)

    async def list_groups(self) -> list[GroupSummary]:
        """The groups of every live broker (each knows those it coordinates)."""
        found = {g.group_id: g for g in await self._manager.list_groups()}
        if self._client is not None:
            others = [a for b in self._cache.brokers if b != self._broker_id
                      if (a := self._cache.address_of(b)) is not None]
            for part in await asyncio.gather(*(self._list_at(a) for a in others)):
                for g in part:
                    found.setdefault(g.group_id, g)
        return [found[g] for g in sorted(found)]

    async def _list_at(self, address: Address) -> list[GroupSummary]:
        assert self._client is not None
        try:
            body = await self._client.group_call(address, "list_groups", b"{}",
                                                 timeout_s=LIST_TIMEOUT_S)
        except FranzError:
            return []
        groups: list[GroupSummary] = decode_result("list_groups", body, self._batches) or []
        return groups


async def _local(manager: ConsumerManager, op: str, args: dict[str, Any]) -> Any:
    if op == "get":  # the only synchronous operation
        return manager.get(**args)
    return await getattr(manager, op)(**args)
