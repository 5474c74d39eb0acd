"""The replica manager (core.broker.replica.manager) on real logs: produce with acks
0/1/all, long-polling fetches, the leader side of replication (follower fetches, ISR
expand/shrink written through the ISR store), leadership changes, stray logs and the
follower fetchers. Broker 1 is this broker; the ISR store and the leaders a follower
fetches from are small fakes (or a second real replica manager)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from core.broker.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from core.broker.metadata.store import BadVersionError, PartitionState
from core.broker.replica.fetch_wire import (
    ReplicaFetchPartition,
    ReplicaFetchRequest,
    ReplicaFetchResult,
)
from core.broker.replica.fetcher import Address
from core.broker.replica.manager import ReplicaManager, ReplicationSettings
from core.broker.replica.partition import Partition
from core.broker.types import TopicPartition
from core.clock import ManualClock
from core.storage.config import LogConfig
from core.storage.errors import OffsetOutOfRangeError
from core.storage.log_manager import LogManager
from core.storage.records import build_batch_from_columns, decode_records

NOW = 1_700_000_000_000
ME, PEER, OTHER = 1, 2, 3
TP = TopicPartition("t", 0)
LAG_MS = 10_000


# --- fakes and helpers -------------------------------------------------------------------


class FakeIsrStore:
    """The ISR store: records every conditional write; ``conflicts`` writes fail with
    BadVersionError first, and a re-read then answers ``current``."""

    def __init__(self, *, conflicts: int = 0, current: PartitionState | None = None) -> None:
        self.writes: list[tuple[str, int, PartitionState, int]] = []
        self.reads: list[str] = []
        self.conflicts = conflicts
        self.current = current

    async def get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        self.reads.append(topic)
        return {} if self.current is None else {TP.partition: self.current}

    async def update_partition_state(
        self, topic: str, partition: int, state: PartitionState, *, expected_version: int
    ) -> PartitionState:
        self.writes.append((topic, partition, state, expected_version))
        if self.conflicts:
            self.conflicts -= 1
            raise BadVersionError(f"{topic}-{partition} is not at version {expected_version}")
        return replace(state, version=expected_version + 1)


class IdleLeaderClient:
    """A leader with nothing new: each fetch long-polls its max wait and answers nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[Address, ReplicaFetchRequest]] = []

    async def replica_fetch(self, address: Address, req: ReplicaFetchRequest) -> list[ReplicaFetchResult]:
        self.calls.append((address, req))
        await asyncio.sleep(req.max_wait_ms / 1000)
        return []


class LoopbackClient:
    """Follower fetches answered in-process by the leaders' real replica managers."""

    def __init__(self, leaders: dict[int, ReplicaManager]) -> None:
        self.leaders = leaders

    async def replica_fetch(self, address: Address, req: ReplicaFetchRequest) -> list[ReplicaFetchResult]:
        return await self.leaders[address[1]].replica_fetch(req)


def address_of(broker: int) -> Address:
    return ("broker", broker)


FAST = ReplicationSettings(lag_time_max_ms=LAG_MS, fetch_wait_max_ms=20, fetch_backoff_ms=10)


def topic_config(**overrides: object) -> LogConfig:
    return LogConfig.from_overrides({k.replace("_", "."): str(v) for k, v in overrides.items()})


def lead(rm: ReplicaManager, tp: TopicPartition = TP, *, isr: tuple[int, ...] = (ME,),
         replicas: tuple[int, ...] = (ME, PEER), epoch: int = 0, version: int = 0,
         config: LogConfig | None = None) -> Partition:
    p = rm.apply_partition_state(tp, PartitionState(ME, epoch, isr, 0, version), replicas,
                                 config or topic_config())
    assert p is not None and p.is_leader
    return p


def follow(rm: ReplicaManager, tp: TopicPartition = TP, *, leader: int = PEER, epoch: int = 0,
           replicas: tuple[int, ...] = (ME, PEER)) -> Partition:
    p = rm.apply_partition_state(tp, PartitionState(leader, epoch, replicas, 0), replicas,
                                 topic_config())
    assert p is not None and not p.is_leader
    return p


def batch(*values: bytes, ts: int = NOW) -> bytearray:
    return build_batch_from_columns(list(values), None, None, ts)


def values_of(data: bytes, min_offset: int = 0) -> list[bytes | None]:
    return [r.value for r in decode_records(data, min_offset=min_offset)]


async def produce(rm: ReplicaManager, *values: bytes, tp: TopicPartition = TP) -> None:
    """One one-record batch per value, acks=1."""
    for v in values:
        await rm.append(tp, batch(v), acks=1, timeout_ms=1000)


def fetch_request(offset: int, *, leader_epoch: int = 0, last_fetched_epoch: int = 0,
                  replica: int = PEER, max_wait_ms: int = 0,
                  tp: TopicPartition = TP) -> ReplicaFetchRequest:
    return ReplicaFetchRequest(replica, max_wait_ms, 1 << 20, (ReplicaFetchPartition(
        tp.topic, tp.partition, offset, leader_epoch, last_fetched_epoch),))


async def follower_fetch(rm: ReplicaManager, offset: int, **kw: int) -> ReplicaFetchResult:
    (result,) = await rm.replica_fetch(fetch_request(offset, **kw))
    return result


async def steps(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def until(cond: Callable[[], bool], timeout_s: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not cond():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.001)


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def open_logs(path: Path, clock: ManualClock, broker_id: int = ME) -> LogManager:
    return LogManager(path, server_defaults={}, clock=clock, broker_id=broker_id)


@pytest.fixture
def logs(tmp_path: Path, clock: ManualClock) -> Iterator[LogManager]:
    lm = open_logs(tmp_path / "broker1", clock)
    yield lm
    lm.close()


@pytest.fixture
def store() -> FakeIsrStore:
    return FakeIsrStore()


@pytest.fixture
async def rm(logs: LogManager, clock: ManualClock, store: FakeIsrStore) -> AsyncIterator[ReplicaManager]:
    manager = ReplicaManager(ME, logs, clock, isr_store=store, settings=FAST)
    yield manager
    await manager.stop()


# --- produce -----------------------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1])
async def test_acks_0_and_1_return_the_offsets_at_once(rm: ReplicaManager, acks: int) -> None:
    lead(rm, isr=(ME, PEER))  # the follower has fetched nothing: the HW stays behind
    first = await rm.append(TP, batch(b"a", b"b"), acks=acks, timeout_ms=1)
    second = await rm.append(TP, batch(b"c"), acks=acks, timeout_ms=1)
    assert (first.first_offset, first.last_offset, first.num_records) == (0, 1, 2)
    assert (second.first_offset, second.last_offset) == (2, 2)
    assert rm.partitions[TP].log.log_end_offset == 3


async def test_append_to_a_partition_led_elsewhere_is_not_leader(rm: ReplicaManager) -> None:
    follow(rm)
    with pytest.raises(NotLeaderOrFollowerError):
        await rm.append(TP, batch(b"a"), acks=1, timeout_ms=1000)
    assert rm.partitions[TP].log.log_end_offset == 0


async def test_append_to_a_partition_not_hosted_here_is_unknown(rm: ReplicaManager) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        await rm.append(TopicPartition("nope", 0), batch(b"a"), acks=1, timeout_ms=1000)


async def test_acks_all_on_a_lone_leader_is_acknowledged_at_once(rm: ReplicaManager) -> None:
    p = lead(rm, replicas=(ME,))
    info = await asyncio.wait_for(rm.append(TP, batch(b"a"), acks=-1, timeout_ms=5000), 1)
    assert info.last_offset == 0 and p.high_watermark == 1


async def test_acks_all_waits_until_the_isr_follower_has_fetched_past_the_records(
    rm: ReplicaManager,
) -> None:
    p = lead(rm, isr=(ME, PEER))
    producer = asyncio.create_task(rm.append(TP, batch(b"a"), acks=-1, timeout_ms=5000))
    await steps()
    assert not producer.done()
    got = await follower_fetch(rm, 0)  # reads the record, but does not have it yet
    assert values_of(got.records) == [b"a"]
    await steps()
    assert not producer.done() and p.high_watermark == 0
    await follower_fetch(rm, 1)  # the follower's log now ends after the record
    info = await asyncio.wait_for(producer, 1)
    assert (info.first_offset, info.last_offset) == (0, 0)
    assert p.high_watermark == 1


async def test_acks_all_times_out_when_no_follower_fetches(rm: ReplicaManager) -> None:
    p = lead(rm, isr=(ME, PEER))
    with pytest.raises(RequestTimedOutError):
        await rm.append(TP, batch(b"a"), acks=-1, timeout_ms=20)
    assert p.log.log_end_offset == 1 and p.high_watermark == 0  # written, not committed


async def test_acks_all_is_refused_before_writing_when_the_isr_is_below_min_insync(
    rm: ReplicaManager,
) -> None:
    p = lead(rm, isr=(ME,), config=topic_config(min_insync_replicas=2))
    with pytest.raises(NotEnoughReplicasError):
        await rm.append(TP, batch(b"a"), acks=-1, timeout_ms=1000)
    assert p.log.log_end_offset == 0
    await rm.append(TP, batch(b"a"), acks=1, timeout_ms=1000)  # acks=1 is still served
    assert p.log.log_end_offset == 1


async def test_acks_all_fails_after_append_when_the_isr_shrinks_below_min_insync(
    rm: ReplicaManager,
) -> None:
    lead(rm, isr=(ME, PEER), config=topic_config(min_insync_replicas=2))
    producer = asyncio.create_task(rm.append(TP, batch(b"a"), acks=-1, timeout_ms=5000))
    await steps()
    await follower_fetch(rm, 1)  # replicated: the HW passes the record and wakes the producer
    # ... and before the producer runs again the controller drops the follower from the ISR
    lead(rm, isr=(ME,), version=1, config=topic_config(min_insync_replicas=2))
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        await asyncio.wait_for(producer, 1)


async def test_losing_leadership_fails_a_waiting_acks_all_producer(rm: ReplicaManager) -> None:
    lead(rm, isr=(ME, PEER))
    producer = asyncio.create_task(rm.append(TP, batch(b"a"), acks=-1, timeout_ms=5000))
    await steps()
    follow(rm, leader=PEER, epoch=1)
    with pytest.raises(NotLeaderOrFollowerError):
        await asyncio.wait_for(producer, 1)


async def test_flush_messages_1_puts_an_acknowledged_append_on_disk(rm: ReplicaManager) -> None:
    p = lead(rm, replicas=(ME,), config=topic_config(flush_messages=1))
    await asyncio.gather(*(rm.append(TP, batch(b"%d" % i), acks=1, timeout_ms=1000)
                           for i in range(3)))
    assert p.log.durable_offset == 3  # fdatasynced; the recovery point follows a flush


# --- consumer fetch (long-polling) --------------------------------------------------------


async def test_fetch_returns_at_once_when_data_is_there(rm: ReplicaManager) -> None:
    lead(rm, replicas=(ME,))
    await produce(rm, b"a", b"b")
    data, p = await asyncio.wait_for(rm.fetch(TP, 1, max_bytes=1 << 20, max_wait_ms=5000), 1)
    assert values_of(data.data, 1) == [b"b"] and p is rm.partitions[TP]


async def test_fetch_waits_for_an_append_and_answers_as_soon_as_it_arrives(
    rm: ReplicaManager,
) -> None:
    lead(rm, replicas=(ME,))
    consumer = asyncio.create_task(rm.fetch(TP, 0, max_bytes=1 << 20, max_wait_ms=5000))
    await steps()
    assert not consumer.done()
    await produce(rm, b"a")
    data, _ = await asyncio.wait_for(consumer, 1)
    assert values_of(data.data) == [b"a"]


async def test_fetch_waits_for_the_high_watermark_not_the_append(rm: ReplicaManager) -> None:
    lead(rm, isr=(ME, PEER))
    consumer = asyncio.create_task(rm.fetch(TP, 0, max_bytes=1 << 20, max_wait_ms=5000))
    await produce(rm, b"a")
    await steps()
    assert not consumer.done()  # not committed yet
    await follower_fetch(rm, 1)
    data, _ = await asyncio.wait_for(consumer, 1)
    assert values_of(data.data) == [b"a"]


async def test_fetch_returns_empty_after_max_wait(rm: ReplicaManager) -> None:
    lead(rm, replicas=(ME,))
    loop = asyncio.get_running_loop()
    start = loop.time()
    data, _ = await rm.fetch(TP, 0, max_bytes=1 << 20, max_wait_ms=20)
    assert data.data == b""
    assert 0.015 <= loop.time() - start < 1


async def test_fetch_from_a_follower_replica_is_not_leader(rm: ReplicaManager) -> None:
    follow(rm)
    with pytest.raises(NotLeaderOrFollowerError):
        await rm.fetch(TP, 0, max_bytes=1 << 20, max_wait_ms=0)


async def test_a_waiting_fetch_fails_when_the_replica_is_stopped(rm: ReplicaManager) -> None:
    lead(rm, replicas=(ME,))
    consumer = asyncio.create_task(rm.fetch(TP, 0, max_bytes=1 << 20, max_wait_ms=5000))
    await steps()
    rm.stop_replica(TP, delete=False)
    with pytest.raises(UnknownTopicOrPartitionError):
        await asyncio.wait_for(consumer, 1)


# --- data_watch and offset_for_timestamp ------------------------------------------------


async def test_data_watch_is_none_for_partitions_not_led_here(rm: ReplicaManager) -> None:
    follow(rm)
    assert rm.data_watch(TP) is None
    assert rm.data_watch(TopicPartition("nope", 0)) is None


async def test_data_watch_of_a_led_partition_wakes_when_the_high_watermark_moves(
    rm: ReplicaManager,
) -> None:
    p = lead(rm, replicas=(ME,))
    await produce(rm, b"a")
    watch = rm.data_watch(TP)
    assert watch is not None and watch.high_watermark == 1 and watch.waiters is p.data_waiters
    woken = asyncio.get_running_loop().create_future()
    watch.waiters.park(woken)
    await produce(rm, b"b")
    assert woken.done()


@pytest.fixture
async def timestamped(rm: ReplicaManager) -> Partition:
    """Offsets 0, 1, 2 at NOW, NOW+10, NOW+20; the follower has fetched 0 and 1 (HW 2);
    the log start was moved to 1."""
    p = lead(rm, isr=(ME, PEER))
    for i, v in enumerate((b"a", b"b", b"c")):
        await rm.append(TP, batch(v, ts=NOW + 10 * i), acks=1, timeout_ms=1000)
    await follower_fetch(rm, 2)
    p.log.maybe_increment_log_start_offset(1)
    assert p.high_watermark == 2
    return p


@pytest.mark.parametrize(("timestamp", "offset"), [
    (-1, 2),  # latest: the HW, not the log end
    (-2, 1),  # earliest: the log start
    (NOW + 5, 1),  # the first record at or after it
    (NOW + 10, 1),
    (NOW + 15, None),  # offset 2 qualifies but is not committed yet
    (NOW + 999, None),
])
async def test_offset_for_timestamp(rm: ReplicaManager, timestamped: Partition, timestamp: int,
                                    offset: int | None) -> None:
    assert await rm.offset_for_timestamp(TP, timestamp) == offset


async def test_offset_for_timestamp_needs_the_leader(rm: ReplicaManager) -> None:
    follow(rm)
    with pytest.raises(NotLeaderOrFollowerError):
        await rm.offset_for_timestamp(TP, -1)


async def a_new_leader_behind_its_log(rm: ReplicaManager) -> Partition:
    """Led at epoch 0, three records, the follower has fetched one (HW 1); then led again
    at epoch 1, as a follower that took over would be: its HW is behind its log end."""
    lead(rm, isr=(ME, PEER))
    await produce(rm, b"a", b"b", b"c")
    await follower_fetch(rm, 1)
    p = lead(rm, isr=(ME, PEER), epoch=1, version=1)
    assert (p.high_watermark, p.epoch_start_offset) == (1, 3)
    return p


async def test_a_new_leaders_offsets_wait_for_its_hw_to_reach_its_epoch_start(
    rm: ReplicaManager,
) -> None:
    """Answering the stale HW would show a client the end of the log going back (the
    old leader acknowledged offset 2): the offsets wait for the followers' next fetch."""
    await a_new_leader_behind_its_log(rm)
    asked = asyncio.ensure_future(rm.client_offsets(TP))
    latest = asyncio.ensure_future(rm.offset_for_timestamp(TP, -1))
    await steps()
    assert not asked.done() and not latest.done()
    await follower_fetch(rm, 3, leader_epoch=1)
    assert (await asked).high_watermark == 3
    assert await latest == 3


async def test_a_new_leaders_offsets_are_not_available_if_its_hw_stays_behind(
    rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import core.broker.replica.manager as manager_module

    monkeypatch.setattr(manager_module, "OFFSETS_WAIT_S", 0.05)
    await a_new_leader_behind_its_log(rm)
    with pytest.raises(OffsetNotAvailableError, match="has not reached the start of its epoch"):
        await rm.client_offsets(TP)
    with pytest.raises(OffsetNotAvailableError):
        await rm.offset_for_timestamp(TP, -2)


async def test_kafkas_list_offsets_answers_a_new_leader_at_once(rm: ReplicaManager) -> None:
    """The Kafka door's ListOffsets does not hold the connection: OFFSET_NOT_AVAILABLE now."""
    await a_new_leader_behind_its_log(rm)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(OffsetNotAvailableError):
        await rm.offset_and_timestamp(TP, -1, wait_s=0)
    assert loop.time() - started < 0.5


# --- the leader side of replication: follower fetches -----------------------------------


async def test_replica_fetch_returns_the_records_past_the_followers_offset(
    rm: ReplicaManager,
) -> None:
    lead(rm)
    await produce(rm, b"a", b"b", b"c")
    got = await follower_fetch(rm, 1)
    assert got.error_code == 0 and got.diverging_epoch is None
    assert values_of(got.records, 1) == [b"b", b"c"]
    assert (got.high_watermark, got.log_start_offset, got.log_end_offset) == (3, 0, 3)


async def test_replica_fetch_past_the_log_end_is_offset_out_of_range(rm: ReplicaManager) -> None:
    lead(rm)
    await produce(rm, b"a", b"b")
    # (a follower that sends its last fetched epoch hears of the divergence instead)
    got = await follower_fetch(rm, 5, last_fetched_epoch=-1)
    assert got.error_code == OffsetOutOfRangeError.error_code
    assert got.records == b"" and got.log_end_offset == 2


async def test_replica_fetch_below_the_log_start_is_offset_out_of_range(rm: ReplicaManager) -> None:
    p = lead(rm)
    await produce(rm, b"a", b"b")
    p.log.maybe_increment_log_start_offset(1)
    got = await follower_fetch(rm, 0)
    assert got.error_code == OffsetOutOfRangeError.error_code and got.log_start_offset == 1


@pytest.fixture
async def two_epochs(rm: ReplicaManager) -> Partition:
    """Offsets 0, 1 written in epoch 0, offset 2 in epoch 1 (the current one)."""
    lead(rm, epoch=0)
    await produce(rm, b"a", b"b")
    p = lead(rm, epoch=1)
    await produce(rm, b"c")
    return p


@pytest.mark.parametrize(("fetch_offset", "last_epoch", "diverging"), [
    (3, 0, (0, 2)),  # the follower has epoch-0 records past where epoch 0 ended here
    (4, 1, (1, 3)),  # the follower's log runs past the end of this leader's epoch 1
    (1, 5, (-1, -1)),  # an epoch this leader never knew
])
async def test_replica_fetch_tells_a_diverged_follower_where_to_truncate(
    rm: ReplicaManager, two_epochs: Partition, fetch_offset: int, last_epoch: int,
    diverging: tuple[int, int],
) -> None:
    got = await follower_fetch(rm, fetch_offset, leader_epoch=1, last_fetched_epoch=last_epoch)
    assert got.error_code == 0 and got.diverging_epoch == diverging and got.records == b""


async def test_a_follower_whose_log_matches_gets_records_not_a_divergence(
    rm: ReplicaManager, two_epochs: Partition,
) -> None:
    got = await follower_fetch(rm, 2, leader_epoch=1, last_fetched_epoch=0)
    assert got.diverging_epoch is None and values_of(got.records, 2) == [b"c"]


@pytest.mark.parametrize(("request_epoch", "code"), [
    (0, FencedLeaderEpochError.error_code),  # the follower has not heard of epoch 1 yet
    (2, UnknownLeaderEpochError.error_code),  # the follower is ahead of this leader
])
async def test_replica_fetch_with_another_leader_epoch_is_refused(
    rm: ReplicaManager, two_epochs: Partition, request_epoch: int, code: int,
) -> None:
    got = await follower_fetch(rm, 2, leader_epoch=request_epoch, last_fetched_epoch=1)
    assert got.error_code == code and got.records == b""
    assert two_epochs.followers[PEER].log_end_offset == 0  # the fetch proved nothing


async def test_replica_fetch_of_a_partition_not_led_or_not_hosted_is_an_error(
    rm: ReplicaManager,
) -> None:
    follow(rm)
    got = await rm.replica_fetch(ReplicaFetchRequest(PEER, 5000, 1 << 20, (
        ReplicaFetchPartition("t", 0, 0, 0, -1), ReplicaFetchPartition("nope", 0, 0, 0, -1))))
    assert [r.error_code for r in got] == [NotLeaderOrFollowerError.error_code,
                                           UnknownTopicOrPartitionError.error_code]


async def test_replica_fetch_long_polls_until_an_append(rm: ReplicaManager) -> None:
    lead(rm)
    await produce(rm, b"a")
    follower = asyncio.create_task(follower_fetch(rm, 1, max_wait_ms=5000))
    await steps()
    assert not follower.done()
    await produce(rm, b"b")
    got = await asyncio.wait_for(follower, 1)
    assert values_of(got.records, 1) == [b"b"]


async def test_replica_fetch_returns_empty_after_max_wait(rm: ReplicaManager) -> None:
    lead(rm)
    got = await asyncio.wait_for(follower_fetch(rm, 0, max_wait_ms=20), 1)
    assert got.error_code == 0 and got.records == b""


# --- ISR expand and shrink ----------------------------------------------------------------


async def test_a_follower_that_catches_up_joins_the_isr(rm: ReplicaManager, store: FakeIsrStore) -> None:
    p = lead(rm, isr=(ME,))
    await produce(rm, b"a", b"b")
    await follower_fetch(rm, 0)  # behind the HW (2): not yet
    await steps()
    assert store.writes == [] and p.isr == (ME,)
    await follower_fetch(rm, 2)
    await until(lambda: p.isr == (ME, PEER))
    assert store.writes == [("t", 0, PartitionState(ME, 0, (ME, PEER), 0), 0)]
    assert rm.isr_expands == 1 and rm.isr_shrinks == 0
    assert p.partition_version == 1 and not p.isr_change_in_flight


async def test_a_caught_up_follower_of_a_dead_broker_does_not_join_the_isr(
    logs: LogManager, clock: ManualClock, store: FakeIsrStore,
) -> None:
    rm = ReplicaManager(ME, logs, clock, isr_store=store, is_alive=lambda b: b != PEER)
    p = lead(rm)
    await follower_fetch(rm, 0)
    await steps()
    assert store.writes == [] and p.isr == (ME,) and rm.isr_expands == 0


async def test_without_an_isr_store_the_isr_never_changes(logs: LogManager, clock: ManualClock) -> None:
    rm = ReplicaManager(ME, logs, clock)
    p = lead(rm)
    await follower_fetch(rm, 0)
    await steps()
    assert p.isr == (ME,) and not p.isr_change_in_flight


async def test_an_isr_write_that_loses_a_race_is_retried_at_the_stored_version(
    logs: LogManager, clock: ManualClock,
) -> None:
    store = FakeIsrStore(conflicts=1, current=PartitionState(ME, 0, (ME,), 0, version=7))
    rm = ReplicaManager(ME, logs, clock, isr_store=store)
    p = lead(rm)
    await follower_fetch(rm, 0)
    await until(lambda: p.isr == (ME, PEER))
    assert [w[3] for w in store.writes] == [0, 7] and store.reads == ["t"]
    assert p.partition_version == 8 and rm.isr_expands == 1


async def test_an_isr_write_is_abandoned_when_the_leadership_moved_meanwhile(
    logs: LogManager, clock: ManualClock,
) -> None:
    store = FakeIsrStore(conflicts=1, current=PartitionState(OTHER, 1, (OTHER,), 0, version=7))
    rm = ReplicaManager(ME, logs, clock, isr_store=store)
    p = lead(rm)
    await follower_fetch(rm, 0)
    await until(lambda: store.reads == ["t"])
    await steps()
    assert len(store.writes) == 1 and p.isr == (ME,)
    assert rm.isr_expands == 0 and not p.isr_change_in_flight


async def test_a_stale_reread_of_the_state_does_not_undo_the_leaders_isr_write(
    rm: ReplicaManager,
) -> None:
    p = lead(rm)
    await follower_fetch(rm, 0)
    await until(lambda: p.isr == (ME, PEER))
    lead(rm, isr=(ME,), version=0)  # the metadata read from before the write
    assert p.isr == (ME, PEER)
    lead(rm, isr=(ME,), version=2)  # a newer write (the controller's)
    assert p.isr == (ME,)


async def test_a_follower_that_stops_catching_up_is_dropped_after_the_lag(
    rm: ReplicaManager, clock: ManualClock, store: FakeIsrStore,
) -> None:
    p = lead(rm, isr=(ME, PEER))
    await produce(rm, b"a")
    await follower_fetch(rm, 1)  # caught up now
    await produce(rm, b"b")  # ... and behind from here on
    clock.advance(LAG_MS)
    rm.maybe_shrink_isrs(LAG_MS)
    await steps()
    assert store.writes == [] and p.isr == (ME, PEER)
    clock.advance(1)
    rm.maybe_shrink_isrs(LAG_MS)
    await until(lambda: p.isr == (ME,))
    assert store.writes == [("t", 0, PartitionState(ME, 0, (ME,), 0), 0)]
    assert rm.isr_shrinks == 1 and rm.isr_expands == 0
    assert p.high_watermark == 2  # the lagging follower no longer holds the HW back


async def test_a_follower_at_the_log_end_is_never_dropped(rm: ReplicaManager, clock: ManualClock) -> None:
    p = lead(rm, isr=(ME, PEER))
    await produce(rm, b"a")
    await follower_fetch(rm, 1)
    clock.advance(10 * LAG_MS)
    rm.maybe_shrink_isrs(LAG_MS)
    await steps()
    assert p.isr == (ME, PEER) and rm.isr_shrinks == 0


async def test_start_runs_the_shrink_check_and_stop_ends_it(
    logs: LogManager, clock: ManualClock, store: FakeIsrStore,
) -> None:
    rm = ReplicaManager(ME, logs, clock, isr_store=store,
                        settings=ReplicationSettings(lag_time_max_ms=10))  # checks every 5 ms
    rm.start()
    rm.start()  # idempotent
    first = lead(rm, isr=(ME, PEER))
    await produce(rm, b"a")
    clock.advance(11)
    await until(lambda: first.isr == (ME,))
    assert rm.isr_shrinks == 1
    await rm.stop()
    second = lead(rm, TopicPartition("t", 1), isr=(ME, PEER))
    await produce(rm, b"a", tp=second.tp)
    clock.advance(11)
    await asyncio.sleep(0.03)  # six check periods
    assert second.isr == (ME, PEER) and rm.isr_shrinks == 1
    await rm.stop()  # stopping twice is fine


# --- leadership changes, stopping replicas, stray logs ------------------------------------


async def test_fence_leaders_demotes_every_led_partition_to_a_leaderless_follower(
    rm: ReplicaManager,
) -> None:
    led = [lead(rm, TopicPartition("t", i), epoch=3) for i in range(2)]
    followed = follow(rm, TopicPartition("t", 2))
    assert rm.fence_leaders() == 2
    assert [(p.is_leader, p.leader_id, p.leader_epoch) for p in led] == [(False, -1, 3)] * 2
    assert followed.leader_id == PEER
    with pytest.raises(NotLeaderOrFollowerError):
        await rm.append(TP, batch(b"a"), acks=1, timeout_ms=1000)
    assert rm.fence_leaders() == 0
    lead(rm, epoch=3)  # the next metadata sync gives the role back
    await rm.append(TP, batch(b"a"), acks=1, timeout_ms=1000)


class SlowIsrStore(FakeIsrStore):
    """Writes that complete only when ``release`` is set (a store call in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def update_partition_state(
        self, topic: str, partition: int, state: PartitionState, *, expected_version: int
    ) -> PartitionState:
        await self.release.wait()
        return await super().update_partition_state(topic, partition, state,
                                                    expected_version=expected_version)


async def test_a_fenced_partition_stays_fenced_when_an_isr_write_completes_afterwards(
    logs: LogManager, clock: ManualClock,
) -> None:
    store = SlowIsrStore()
    rm = ReplicaManager(ME, logs, clock, isr_store=store)
    p = lead(rm)
    await follower_fetch(rm, 0)  # caught up: the ISR expand write is now in flight
    await steps()
    assert p.isr_change_in_flight
    assert rm.fence_leaders() == 1  # the ZooKeeper session expired meanwhile
    store.release.set()
    await until(lambda: not p.isr_change_in_flight)
    assert not p.is_leader and p.leader_id == -1
    with pytest.raises(NotLeaderOrFollowerError):
        await rm.append(TP, batch(b"a"), acks=1, timeout_ms=1000)


async def test_stop_replica_with_delete_removes_the_log(rm: ReplicaManager, logs: LogManager) -> None:
    p = lead(rm)
    await produce(rm, b"a")
    rm.stop_replica(TP, delete=True)
    assert TP not in rm.partitions and logs.get_log("t", 0) is None
    assert not p.log.dir.exists()
    with pytest.raises(UnknownTopicOrPartitionError):
        rm.get_partition(TP)


async def test_stop_replica_without_delete_keeps_the_log(rm: ReplicaManager, logs: LogManager) -> None:
    lead(rm)
    await produce(rm, b"a")
    rm.stop_replica(TP, delete=False)
    assert TP not in rm.partitions
    kept = logs.get_log("t", 0)
    assert kept is not None and kept.log_end_offset == 1


async def test_a_state_without_this_broker_in_the_replicas_deletes_the_replica(
    rm: ReplicaManager, logs: LogManager,
) -> None:
    lead(rm)
    state = PartitionState(PEER, 1, (PEER, OTHER), 0)
    assert rm.apply_partition_state(TP, state, (PEER, OTHER), topic_config()) is None
    assert TP not in rm.partitions and logs.get_log("t", 0) is None


async def test_delete_stray_logs_keeps_only_logs_assigned_here(
    rm: ReplicaManager, logs: LogManager,
) -> None:
    lead(rm, TopicPartition("hosted", 0))
    for topic in ("gone", "moved", "kept"):
        logs.get_or_create_log(topic, 0, topic_config())
    logs.get_or_create_log("kept", 1, topic_config())
    deleted = rm.delete_stray_logs({"moved": {0: (PEER, OTHER)}, "kept": {0: (ME, PEER), 1: (PEER, ME)}})
    assert sorted(deleted) == [TopicPartition("gone", 0), TopicPartition("moved", 0)]
    assert sorted(logs.all_logs()) == [("hosted", 0), ("kept", 0), ("kept", 1)]


async def test_a_restarted_broker_starts_from_its_checkpointed_high_watermark(
    rm: ReplicaManager, logs: LogManager, clock: ManualClock,
) -> None:
    lead(rm, isr=(ME, PEER))
    await produce(rm, b"a", b"b", b"c")
    rm.stop_replica(TP, delete=False)
    again = ReplicaManager(ME, logs, clock, {("t", 0): 2})
    p = lead(again, isr=(ME, PEER))
    assert p.high_watermark == 2 and again.high_watermarks() == {("t", 0): 2}


# --- the follower side: fetchers -----------------------------------------------------------


async def test_no_fetcher_runs_without_a_fetch_client_and_addresses(
    logs: LogManager, clock: ManualClock,
) -> None:
    assert ReplicaManager(ME, logs, clock).fetchers is None
    assert ReplicaManager(ME, logs, clock, fetch_client=IdleLeaderClient()).fetchers is None


async def test_a_follower_partition_is_fetched_from_its_leader_until_it_leads(
    logs: LogManager, clock: ManualClock,
) -> None:
    client = IdleLeaderClient()
    rm = ReplicaManager(ME, logs, clock, fetch_client=client, address_of=address_of,
                        settings=FAST)
    try:
        assert rm.fetchers is not None
        follow(rm, leader=PEER, epoch=4)
        assert rm.fetchers.source_of(TP) == PEER
        await until(lambda: bool(client.calls))
        address, req = client.calls[-1]
        assert address == ("broker", PEER) and req.replica_id == ME
        assert [(q.topic, q.partition, q.fetch_offset, q.leader_epoch) for q in req.partitions] == [
            ("t", 0, 0, 4)]
        follow(rm, leader=OTHER, epoch=5)  # the leadership moved: so does the fetch
        assert rm.fetchers.source_of(TP) == OTHER
        lead(rm, epoch=6)
        assert rm.fetchers.source_of(TP) is None
    finally:
        await rm.stop()
    assert rm.fetchers.fetchers == {}
    calls = len(client.calls)
    await asyncio.sleep(0.03)
    assert len(client.calls) == calls  # nothing fetches after stop


async def test_a_follower_replicates_the_leader_and_completes_an_acks_all_produce(
    tmp_path: Path, rm: ReplicaManager, clock: ManualClock,
) -> None:
    follower_logs = open_logs(tmp_path / "broker2", clock, PEER)
    follower = ReplicaManager(PEER, follower_logs, clock, fetch_client=LoopbackClient({ME: rm}),
                              address_of=address_of, settings=FAST)
    try:
        lead(rm, isr=(ME, PEER))
        follow(follower, leader=ME, replicas=(ME, PEER))
        await asyncio.wait_for(
            rm.append(TP, batch(b"a", b"b"), acks=-1, timeout_ms=5000), 2)
        assert rm.partitions[TP].high_watermark == 2
        replica = follower.partitions[TP]
        await until(lambda: replica.high_watermark == 2)
        assert values_of(replica.read(0, 1 << 20).data) == [b"a", b"b"]
    finally:
        await follower.stop()
        follower_logs.close()


# --- leader-epoch checkpoints of new leaders, off the event loop -------------------------


async def test_new_leaders_epoch_checkpoints_are_written_in_the_background(
    logs: LogManager, clock: ManualClock,
) -> None:
    rm = ReplicaManager(ME, logs, clock)
    parts = [lead(rm, TopicPartition("many", i), epoch=3) for i in range(200)]
    # becoming leader changed the caches in memory only: no file was written on the loop
    assert all(p.log.leader_epoch_cache.entries == [(3, 0)] for p in parts)
    assert not any(p.log.leader_epoch_cache.path.exists() for p in parts)
    await rm.stop()  # drains the writer
    for p in parts:
        assert p.log.leader_epoch_cache.path.read_text().split("\n")[2] == "3 0"
        assert not p.log.leader_epoch_cache.dirty


def test_an_older_write_never_replaces_a_newer_checkpoint(logs: LogManager, clock: ManualClock) -> None:
    rm = ReplicaManager(ME, logs, clock)
    p = lead(rm, epoch=1)  # no running loop: written at once
    cache = p.log.leader_epoch_cache
    cache.assign(2, 0, flush=False)
    taken = cache.take_unwritten()
    assert taken is not None and cache.take_unwritten() is None
    cache.assign(5, 0)  # written through, newer
    cache.write_taken(*taken)  # a late writer with the older entries
    assert cache.path.read_text().split("\n")[2] == "5 0"
