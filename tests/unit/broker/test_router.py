"""The router: local service, forwarding to the leader, and the leader-wait and retry
policy (``ROUTE_PATIENCE_S``, ``ROUTE_RETRY_S``, ``LEADER_WATCH_S``), over a real replica
manager, metadata cache and topic stats, with a hand-written ``ForwardingClient``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.broker.cluster import router as router_mod
from core.broker.cluster.router import Address, Router
from core.broker.cluster.topic_stats import BrokerTopicStats
from core.broker.errors import (
    BrokerNotAvailableError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from core.broker.metadata.cache import MetadataCache, TopicMetadata
from core.broker.metadata.store import BrokerRegistration, PartitionState, TopicAssignment
from core.broker.replica.manager import ReplicaManager
from core.broker.types import PartitionOffsets, TopicPartition
from core.clock import ManualClock
from core.storage.config import LogConfig
from core.storage.log import AppendInfo, FetchData
from core.storage.log_manager import LogManager
from core.storage.records import build_batch_from_columns, decode_records

NOW = 1_700_000_000_000
ME = 1
CONFIG = LogConfig.from_overrides({})
LOCAL = TopicPartition("local", 0)  # led here (replicas 1, 2)
REMOTE = TopicPartition("remote", 0)  # led by broker 2 (replicas 2, 3), not hosted here


def addr(broker_id: int) -> Address:
    return (f"h{broker_id}", 9000 + broker_id)


def batch(*values: bytes) -> bytearray:
    return build_batch_from_columns(list(values), None, None, NOW)


REMOTE_RECORDS = bytes(batch(b"x", b"y", b"z"))  # what the fake leader's fetch returns


class FakeForwarder:
    """``ForwardingClient`` of a pretend leader: records every call (also into the shared
    ``events`` list), raises the queued ``failures`` one per call, never answers calls to
    the addresses in ``hang`` (until cancelled, which it records)."""

    def __init__(self, events: list[tuple[str, object]]) -> None:
        self.events = events
        self.calls: list[tuple[str, Address, tuple[object, ...]]] = []
        self.failures: list[BaseException] = []
        self.hang: set[Address] = set()
        self.cancelled: list[Address] = []

    async def _enter(self, method: str, address: Address, args: tuple[object, ...]) -> None:
        self.calls.append((method, address, args))
        self.events.append(("call", address))
        if self.failures:
            raise self.failures.pop(0)
        if address in self.hang:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.append(address)
                raise

    async def append(self, address: Address, topic: str, partition: int, data: bytes, *,
                     acks: int, timeout_ms: int) -> AppendInfo:
        await self._enter("append", address, (topic, partition, data, acks, timeout_ms))
        return AppendInfo(first_offset=40, last_offset=42, max_timestamp=NOW, log_append_time=-1,
                          num_records=3, size=len(data), log_start_offset=0)

    async def fetch(self, address: Address, topic: str, partition: int, offset: int, *,
                    max_bytes: int, max_wait_ms: int) -> tuple[FetchData, PartitionOffsets]:
        await self._enter("fetch", address, (topic, partition, offset, max_bytes, max_wait_ms))
        return FetchData(REMOTE_RECORDS, 0, 3), PartitionOffsets(0, 2, 3)

    async def offsets(self, address: Address, topic: str, partition: int) -> PartitionOffsets:
        await self._enter("offsets", address, (topic, partition))
        return PartitionOffsets(5, 7, 9)

    def addresses(self) -> list[Address]:
        return [a for _, a, _ in self.calls]


@dataclass
class Env:
    router: Router
    replicas: ReplicaManager
    cache: MetadataCache
    stats: BrokerTopicStats
    client: FakeForwarder | None
    events: list[tuple[str, object]]
    resyncs: list[str] = field(default_factory=list)
    on_resync: Callable[[str], None] | None = None  # the metadata catching up


def set_leader(cache: MetadataCache, tp: TopicPartition, leader: int) -> None:
    meta = cache.topics[tp.topic]
    old = meta.states[tp.partition]
    meta.states[tp.partition] = PartitionState(leader, old.leader_epoch + 1, old.isr, 1)


def put_topic(cache: MetadataCache, tp: TopicPartition, replicas: tuple[int, ...],
              leader: int) -> None:
    cache.put_topic(tp.topic, TopicMetadata(
        TopicAssignment(tp.topic, f"id-{tp.topic}", {tp.partition: replicas}),
        {tp.partition: PartitionState(leader, 0, replicas, 1)}, {}, CONFIG))


async def make_env(data_dir: Path, *, brokers: tuple[int, ...], with_client: bool,
                   local_replicas: tuple[int, ...] = (1, 2)) -> tuple[Env, LogManager]:
    clock = ManualClock(NOW)
    lm = LogManager(data_dir, server_defaults={}, clock=clock, broker_id=ME)
    rm = ReplicaManager(ME, lm, clock)
    # ISR = this broker alone: the HW follows the leader's log end at once
    rm.apply_partition_state(LOCAL, PartitionState(ME, 0, (ME,), 1), local_replicas, CONFIG)
    cache = MetadataCache()
    cache.set_brokers({b: BrokerRegistration(b, *addr(b)) for b in brokers})
    put_topic(cache, LOCAL, local_replicas, ME)
    put_topic(cache, REMOTE, (2, 3), 2)
    events: list[tuple[str, object]] = []
    client = FakeForwarder(events) if with_client else None
    stats = BrokerTopicStats()
    env: Env

    async def resync(topic: str) -> None:
        env.resyncs.append(topic)
        env.events.append(("resync", topic))
        if env.on_resync is not None:
            env.on_resync(topic)

    router = Router(ME, rm, cache, client, stats=stats, resync_topic=resync)
    env = Env(router, rm, cache, stats, client, events)
    return env, lm


@pytest.fixture
async def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Env]:
    monkeypatch.setattr(router_mod, "ROUTE_RETRY_S", 0.005)
    monkeypatch.setattr(router_mod, "LEADER_WATCH_S", 0.01)
    e, lm = await make_env(tmp_path / "data", brokers=(1, 2, 3), with_client=True)
    yield e
    await e.replicas.stop()
    lm.close()


def fake(env: Env) -> FakeForwarder:
    assert env.client is not None
    return env.client


# --- served here ------------------------------------------------------------------------


async def test_a_partition_led_here_is_served_locally_and_counted(env: Env) -> None:
    data = batch(b"a", b"b", b"c")
    size = len(data)
    info = await env.router.append(LOCAL, data, acks=1, timeout_ms=1000)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 2, 3)
    assert env.replicas.partitions[LOCAL].log.log_end_offset == 3  # written here

    fetched = await env.router.fetch(LOCAL, 1, max_bytes=1 << 20, max_wait_ms=0)
    assert [r.value for r in decode_records(fetched.data.data, min_offset=1)] == [b"b", b"c"]
    assert fetched.offsets == PartitionOffsets(0, 3, 3)
    assert await env.router.partition_offsets(LOCAL) == PartitionOffsets(0, 3, 3)

    assert fake(env).calls == []
    counters = env.stats.topics["local"]
    assert (counters.messages_in, counters.bytes_in) == (3, size)
    # the whole batch comes back (bytes), records counted from the offset asked for
    assert (counters.messages_out, counters.bytes_out) == (2, len(fetched.data.data))


async def test_a_local_leader_is_served_here_even_when_the_cache_names_another(
    env: Env
) -> None:
    set_leader(env.cache, LOCAL, 2)  # stale metadata: the replica knows better
    assert await env.router.route(LOCAL) is None
    await env.router.append(LOCAL, batch(b"a"), acks=1, timeout_ms=1000)
    assert fake(env).calls == []


# --- forwarded --------------------------------------------------------------------------


async def test_a_partition_led_by_broker_2_is_forwarded_to_its_address(env: Env) -> None:
    data = batch(b"p", b"q", b"r")
    info = await env.router.append(REMOTE, data, acks=-1, timeout_ms=1234)
    assert info.first_offset == 40  # the leader's answer
    fetched = await env.router.fetch(REMOTE, 1, max_bytes=4096, max_wait_ms=77)
    assert fetched.data.data == REMOTE_RECORDS and fetched.offsets == PartitionOffsets(0, 2, 3)
    assert await env.router.partition_offsets(REMOTE) == PartitionOffsets(5, 7, 9)

    assert fake(env).calls == [
        ("append", addr(2), ("remote", 0, bytes(data), -1, 1234)),
        ("fetch", addr(2), ("remote", 0, 1, 4096, 77)),
        ("offsets", addr(2), ("remote", 0)),
    ]
    assert env.resyncs == []
    counters = env.stats.topics["remote"]
    assert (counters.messages_in, counters.bytes_in) == (3, len(data))
    # records from offset 1 up to the leader's HW (2), not to the end of the batch (3)
    assert (counters.messages_out, counters.bytes_out) == (1, len(REMOTE_RECORDS))
    assert "local" not in env.stats.topics


@pytest.mark.parametrize("error", [NotLeaderOrFollowerError, BrokerNotAvailableError])
async def test_a_lost_leadership_is_retried_on_the_next_leader_after_a_resync(
    env: Env, error: type[Exception]
) -> None:
    fake(env).failures.append(error("broker 2 lost the partition"))
    env.on_resync = lambda topic: set_leader(env.cache, REMOTE, 3)

    info = await env.router.append(REMOTE, batch(b"a"), acks=1, timeout_ms=1000)
    assert info.first_offset == 40
    # the retry waited for the resync and went where the refreshed metadata points
    assert env.events == [("call", addr(2)), ("resync", "remote"), ("call", addr(3))]
    assert env.resyncs == ["remote"]


async def test_retries_until_the_leader_answers(env: Env) -> None:
    fake(env).failures += [NotLeaderOrFollowerError("not yet"), LeaderNotAvailableError("no")]
    fetched = await env.router.fetch(REMOTE, 0, max_bytes=4096, max_wait_ms=0)
    assert fetched.data.data == REMOTE_RECORDS
    assert fake(env).addresses() == [addr(2)] * 3
    assert env.resyncs == ["remote", "remote"]


async def test_a_leader_that_keeps_refusing_fails_after_the_patience(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router_mod, "ROUTE_PATIENCE_S", 0.15)
    fake(env).failures += [NotLeaderOrFollowerError("no")] * 1000
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(NotLeaderOrFollowerError):
        await env.router.append(REMOTE, batch(b"a"), acks=1, timeout_ms=1000)
    assert 0.15 <= loop.time() - start < 2
    assert len(fake(env).calls) > 2 and len(env.resyncs) == len(fake(env).calls) - 1
    assert "remote" not in env.stats.topics  # nothing counted for a failed append


# --- no leader --------------------------------------------------------------------------


@pytest.mark.parametrize("leader", [-1, 4])  # none, or one that is not registered
async def test_no_leader_raises_leader_not_available_after_the_patience(
    env: Env, monkeypatch: pytest.MonkeyPatch, leader: int
) -> None:
    monkeypatch.setattr(router_mod, "ROUTE_PATIENCE_S", 0.15)
    set_leader(env.cache, REMOTE, leader)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(LeaderNotAvailableError, match="remote-0"):
        await env.router.append(REMOTE, batch(b"a"), acks=1, timeout_ms=1000)
    assert 0.15 <= loop.time() - start < 2
    assert fake(env).calls == []


async def test_a_leader_elected_within_the_patience_is_used(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router_mod, "ROUTE_PATIENCE_S", 5.0)
    set_leader(env.cache, REMOTE, -1)
    asyncio.get_running_loop().call_later(0.05, set_leader, env.cache, REMOTE, 3)
    assert await env.router.partition_offsets(REMOTE) == PartitionOffsets(5, 7, 9)
    assert fake(env).addresses() == [addr(3)]


# --- in flight while the leader moves ----------------------------------------------------


async def _wait_for(cond: Callable[[], bool], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.002)


async def test_a_call_in_flight_is_abandoned_and_resent_when_another_leader_is_named(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router_mod, "ROUTE_PATIENCE_S", 5.0)
    fake(env).hang.add(addr(2))  # broker 2 is paused: its connection stays open
    task = asyncio.ensure_future(env.router.append(REMOTE, batch(b"a"), acks=1, timeout_ms=30_000))
    await _wait_for(lambda: len(fake(env).calls) == 1)
    await asyncio.sleep(0.03)
    assert not task.done()  # the leader is unchanged: the call keeps waiting

    set_leader(env.cache, REMOTE, 3)
    info = await asyncio.wait_for(task, 2)
    assert info.first_offset == 40
    assert fake(env).addresses() == [addr(2), addr(3)]
    assert fake(env).cancelled == [addr(2)]  # the abandoned call does not linger


async def test_a_call_in_flight_is_abandoned_when_the_leaders_registration_goes(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router_mod, "ROUTE_PATIENCE_S", 5.0)
    fake(env).hang.add(addr(2))
    env.on_resync = lambda topic: set_leader(env.cache, REMOTE, 3)  # the controller moved it
    task = asyncio.ensure_future(env.router.fetch(REMOTE, 0, max_bytes=4096, max_wait_ms=0))
    await _wait_for(lambda: len(fake(env).calls) == 1)

    del env.cache.brokers[2]  # broker 2's session ended
    fetched = await asyncio.wait_for(task, 2)
    assert fetched.data.data == REMOTE_RECORDS
    assert fake(env).addresses() == [addr(2), addr(3)]
    assert fake(env).cancelled == [addr(2)]
    assert env.resyncs == ["remote"]


# --- standalone ---------------------------------------------------------------------------


@pytest.fixture
async def standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Env]:
    monkeypatch.setattr(router_mod, "ROUTE_RETRY_S", 0.005)
    monkeypatch.setattr(router_mod, "ROUTE_PATIENCE_S", 5.0)
    e, lm = await make_env(tmp_path / "data", brokers=(1,), with_client=False,
                           local_replicas=(1,))
    yield e
    await e.replicas.stop()
    lm.close()


async def test_standalone_serves_here(standalone: Env) -> None:
    info = await standalone.router.append(LOCAL, batch(b"a", b"b"), acks=-1, timeout_ms=1000)
    assert info.num_records == 2
    assert standalone.stats.topics["local"].messages_in == 2


async def test_standalone_never_forwards_and_raises_the_local_error(standalone: Env) -> None:
    # the cache names broker 2 for "remote", but there is nobody to forward to
    assert await standalone.router.route(REMOTE) is None
    with pytest.raises(UnknownTopicOrPartitionError):
        await standalone.router.append(REMOTE, batch(b"a"), acks=1, timeout_ms=1000)

    # a replica here that lost its leadership: the local error at once, no leader wait
    standalone.replicas.fence_leaders()
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(NotLeaderOrFollowerError):
        await standalone.router.append(LOCAL, batch(b"a"), acks=1, timeout_ms=1000)
    with pytest.raises(NotLeaderOrFollowerError):
        await standalone.router.partition_offsets(LOCAL)
    assert loop.time() - start < 1  # not ROUTE_PATIENCE_S (5 s)
    assert standalone.resyncs == []
    assert "local" not in standalone.stats.topics
