"""The follower side of replication: a follower ``ReplicaManager`` (broker 1) whose
fetchers fetch, through a hand-written client, from a real leader ``ReplicaManager``
(broker 2) in the same process, with scripted answers or failures where a test needs
one; and ``truncation_offset``'s rules as a table."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.broker.errors import (
    BrokerNotAvailableError,
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from core.broker.metadata.store import PartitionState
from core.broker.replica.fetch_wire import ReplicaFetchRequest, ReplicaFetchResult
from core.broker.replica.fetcher import Address, truncation_offset
from core.broker.replica.manager import ReplicaManager, ReplicationSettings
from core.broker.replica.partition import Partition
from core.broker.types import TopicPartition
from core.clock import ManualClock
from core.storage.config import LogConfig
from core.storage.errors import OffsetOutOfRangeError
from core.storage.log import PartitionLog
from core.storage.log_manager import LogManager
from core.storage.records import build_batch_from_columns, decode_records

NOW = 1_700_000_000_000
CONFIG = LogConfig.from_overrides({})
TP = TopicPartition("t", 0)
LEADER, FOLLOWER = 2, 1
REPLICAS = (LEADER, FOLLOWER)
BACKOFF_MS = 50

Spec = Sequence[tuple[int, int]]  # (leader epoch, number of one-record batches written in it)


def addr(broker_id: int) -> Address:
    return (f"h{broker_id}", 9000 + broker_id)


def batch(*values: bytes) -> bytearray:
    return build_batch_from_columns(list(values), None, None, NOW)


def write(plog: PartitionLog, spec: Spec) -> None:
    """One-record batches ``e<epoch>-<offset>``, as a leader of each epoch wrote them."""
    for epoch, n in spec:
        for _ in range(n):
            plog.append_as_leader(batch(b"e%d-%d" % (epoch, plog.log_end_offset)),
                                  leader_epoch=epoch)


def raw(p: Partition) -> bytes:
    return bytes(p.log.read(p.log.log_start_offset, 1 << 20).data)


def values(p: Partition) -> list[tuple[int, bytes | None]]:
    start = p.log.log_start_offset
    return [(r.offset, r.value) for r in decode_records(p.log.read(start, 1 << 20).data,
                                                         min_offset=start)]


Script = BaseException | list[ReplicaFetchResult] | asyncio.Event


class LeaderClient:
    """``ReplicaFetchClient``: answers from the leader ``ReplicaManager`` at the address
    asked, after working off ``script``: an exception is raised, a result list returned,
    an ``asyncio.Event`` waited for (then the next item, or the leader, answers)."""

    def __init__(self) -> None:
        self.leaders: dict[Address, ReplicaManager] = {}
        self.requests: list[tuple[float, Address, ReplicaFetchRequest]] = []
        self.script: list[Script] = []

    async def replica_fetch(self, address: Address,
                            req: ReplicaFetchRequest) -> list[ReplicaFetchResult]:
        self.requests.append((asyncio.get_running_loop().time(), address, req))
        while self.script:
            item = self.script.pop(0)
            if isinstance(item, asyncio.Event):
                await item.wait()
            elif isinstance(item, BaseException):
                raise item
            else:
                return item
        return await self.leaders[address].replica_fetch(req)

    def fetch_offsets(self) -> list[int]:
        return [req.partitions[0].fetch_offset for _, _, req in self.requests]


@dataclass
class Pair:
    leader: ReplicaManager
    follower: ReplicaManager
    client: LeaderClient
    registered: dict[int, Address]  # what the follower's ``address_of`` knows

    def lead(self, epoch: int, spec: Spec = ()) -> Partition:
        """The leader's replica, with ``spec`` written before it takes ``epoch``."""
        write(self.leader.log_manager.get_or_create_log(TP.topic, TP.partition, CONFIG),
              spec)
        p = self.leader.apply_partition_state(TP, PartitionState(LEADER, epoch, REPLICAS, 1),
                                              REPLICAS, CONFIG)
        assert p is not None and p.is_leader
        return p

    def follow(self, epoch: int, spec: Spec = (), leader: int = LEADER) -> Partition:
        """The follower's replica, with ``spec`` already in its log."""
        write(self.follower.log_manager.get_or_create_log(TP.topic, TP.partition, CONFIG),
              spec)
        p = self.follower.apply_partition_state(TP, PartitionState(leader, epoch, REPLICAS, 1),
                                                REPLICAS, CONFIG)
        assert p is not None and not p.is_leader
        return p


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    clock = ManualClock(NOW)
    client = LeaderClient()
    registered = {LEADER: addr(LEADER), 3: addr(3)}
    settings = ReplicationSettings(fetch_wait_max_ms=30, fetch_backoff_ms=BACKOFF_MS)
    lm2 = LogManager(tmp_path / "b2", server_defaults={}, clock=clock, broker_id=LEADER)
    lm1 = LogManager(tmp_path / "b1", server_defaults={}, clock=clock, broker_id=FOLLOWER)
    leader = ReplicaManager(LEADER, lm2, clock, settings=settings)
    follower = ReplicaManager(FOLLOWER, lm1, clock, fetch_client=client,
                              address_of=registered.get, settings=settings)
    client.leaders[addr(LEADER)] = leader
    yield Pair(leader, follower, client, registered)
    await follower.stop()
    await leader.stop()
    lm1.close()
    lm2.close()


async def eventually(cond: Callable[[], bool], timeout: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.002)


# --- records ------------------------------------------------------------------------------


async def test_fetched_records_keep_their_offsets_and_the_hw_follows_the_leader(
    pair: Pair
) -> None:
    lp = pair.lead(3)
    lp.append_as_leader(batch(b"a", b"b"), required_acks=1)
    lp.append_as_leader(batch(b"c", b"d", b"e"), required_acks=1)
    fp = pair.follow(3)
    assert pair.follower.fetchers is not None and pair.follower.fetchers.source_of(TP) == LEADER

    await eventually(lambda: fp.high_watermark == 5)
    assert lp.high_watermark == 5  # the follower's fetch at 5 moved the leader's HW
    assert raw(fp) == raw(lp)  # the very batches, offsets and epochs unchanged
    assert values(fp) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    assert fp.log.leader_epoch_cache.entries == lp.log.leader_epoch_cache.entries == [(3, 0)]

    lp.append_as_leader(batch(b"f"), required_acks=1)  # wakes the follower's long poll
    await eventually(lambda: fp.high_watermark == 6)
    assert values(fp)[-1] == (5, b"f") and raw(fp) == raw(lp)
    req = pair.client.requests[-1][2]
    assert req.replica_id == FOLLOWER
    assert (req.partitions[0].leader_epoch, req.partitions[0].last_fetched_epoch) == (3, 3)
    assert {a for _, a, _ in pair.client.requests} == {addr(LEADER)}


async def test_follower_hw_is_the_leaders_hw_capped_at_its_own_log_end(pair: Pair) -> None:
    lp = pair.lead(0)
    lp.append_as_leader(batch(b"a", b"b"), required_acks=1)
    first = raw(lp)
    lp.append_as_leader(batch(b"c", b"d", b"e"), required_acks=1)
    gate1, gate2 = asyncio.Event(), asyncio.Event()
    pair.client.script = [
        [ReplicaFetchResult("t", 0, 0, 1, 0, 5, None, first)],  # leader HW 1 < own LEO 2
        gate1,
        [ReplicaFetchResult("t", 0, 0, 5, 0, 5, None, b"")],  # leader HW 5 > own LEO 2
        gate2,
    ]
    fp = pair.follow(0)
    await eventually(lambda: len(pair.client.requests) == 2)
    assert (fp.log.log_end_offset, fp.high_watermark) == (2, 1)
    gate1.set()
    await eventually(lambda: len(pair.client.requests) == 3)
    assert (fp.log.log_end_offset, fp.high_watermark) == (2, 2)
    gate2.set()  # the real leader from here on
    await eventually(lambda: fp.high_watermark == 5)
    assert raw(fp) == raw(lp)


async def test_the_log_start_follows_the_leaders(pair: Pair) -> None:
    lp = pair.lead(0, [(0, 6)])
    fp = pair.follow(0)
    await eventually(lambda: fp.high_watermark == 6)
    lp.log.maybe_increment_log_start_offset(4)  # e.g. retention on the leader
    lp.append_as_leader(batch(b"x"), required_acks=1)
    await eventually(lambda: fp.log.log_start_offset == 4 and fp.high_watermark == 7)


# --- divergence ---------------------------------------------------------------------------


@pytest.mark.parametrize(("leader_spec", "follower_spec", "truncated_to"), [
    # the follower wrote 3..5 in epoch 1, which the leader of epoch 2 never had: the leader
    # answers (0, 3), an epoch the follower knows, so it cuts at 3
    ([(0, 3), (2, 2)], [(0, 3), (1, 3)], 3),
    # the follower's last epoch 3 never reached the leader, whose answer (2, 7) names an
    # epoch the follower does not know: it cuts at its own end of epoch 1 (4)
    ([(0, 2), (1, 2), (2, 3), (4, 1)], [(0, 2), (1, 2), (3, 2)], 4),
])
async def test_a_diverging_epoch_truncates_the_follower_then_it_catches_up(
    pair: Pair, leader_spec: Spec, follower_spec: Spec, truncated_to: int
) -> None:
    epoch = leader_spec[-1][0]
    lp = pair.lead(epoch, leader_spec)
    fp = pair.follow(epoch, follower_spec)
    follower_leo = fp.log.log_end_offset

    await eventually(lambda: raw(fp) == raw(lp))
    offsets = pair.client.fetch_offsets()
    assert offsets[:2] == [follower_leo, truncated_to]
    assert fp.log.leader_epoch_cache.entries == lp.log.leader_epoch_cache.entries
    assert values(fp) == values(lp)


def _follower_partition(tmp_path: Path, spec: Spec, hw: int) -> Partition:
    clock = ManualClock(NOW)
    plog = PartitionLog.open(tmp_path / "t-0", CONFIG, clock=clock)
    write(plog, spec)
    return Partition(TP, plog, broker_id=FOLLOWER, clock=clock, high_watermark=hw)


# The follower: epoch 0 wrote 0..2, epoch 1 wrote 3..5, epoch 3 wrote 6..7 (LEO 8); HW 2.
FOLLOWER_SPEC: Spec = [(0, 3), (1, 3), (3, 2)]


@pytest.mark.parametrize(("leader_epoch", "leader_end", "expected"), [
    (-1, -1, 2),  # the leader knows no epoch at all: back to the HW
    (2, -1, 2),
    (-1, 5, 5),  # no epoch, an end offset: min(end, LEO)
    (-1, 20, 8),
    (0, 1, 1),  # an epoch known here: min(leader end, own end of it, LEO)
    (1, 4, 4),
    (1, 7, 6),  # the follower's epoch 1 ends at 6, before the leader's
    (3, 7, 7),  # the latest epoch: its own end is the LEO
    (3, 10, 8),  # nothing to cut
    (2, 9, 6),  # epoch 2 unknown here: own end of the largest epoch below it (1 -> 6)
    (2, 5, 6),  # ... whatever the leader's end (the next fetch iterates)
    # an epoch newer than every epoch known here: min(leader end, LEO), as Kafka
    # (AbstractFetcherThread.getOffsetTruncationState, follower end undefined), not the HW
    (5, 9, 8),
    (5, 7, 7),
])
def test_truncation_offset(tmp_path: Path, leader_epoch: int, leader_end: int,
                           expected: int) -> None:
    p = _follower_partition(tmp_path, FOLLOWER_SPEC, hw=2)
    assert (p.log.log_end_offset, p.high_watermark) == (8, 2)
    assert p.log.leader_epoch_cache.entries == [(0, 0), (1, 3), (3, 6)]
    assert truncation_offset(p, leader_epoch, leader_end) == expected


# --- out of range -------------------------------------------------------------------------


async def test_below_the_leaders_log_start_the_follower_restarts_there(pair: Pair) -> None:
    lp = pair.lead(0, [(0, 10)])
    lp.log.maybe_increment_log_start_offset(6)  # the leader no longer has 0..5
    fp = pair.follow(0)
    assert fp.log.log_end_offset == 0

    await eventually(lambda: fp.log.log_end_offset == 10 and fp.high_watermark == 10)
    assert pair.client.fetch_offsets()[:2] == [0, 6]
    assert fp.log.log_start_offset == 6
    assert values(fp) == [(o, b"e0-%d" % o) for o in range(6, 10)]


async def test_past_the_leaders_log_end_the_follower_truncates_to_it(pair: Pair) -> None:
    lp = pair.lead(0, [(0, 5)])
    # the follower has 5..7 the leader lost (an unclean election): OFFSET_OUT_OF_RANGE
    pair.client.script = [[ReplicaFetchResult(
        "t", 0, OffsetOutOfRangeError.error_code, high_watermark=5, log_start_offset=0,
        log_end_offset=5)]]
    fp = pair.follow(0, [(0, 8)])

    await eventually(lambda: len(pair.client.requests) >= 2)
    assert pair.client.fetch_offsets()[:2] == [8, 5]
    assert fp.log.log_end_offset == 5
    assert raw(fp) == raw(lp)
    lp.append_as_leader(batch(b"new"), required_acks=1)
    await eventually(lambda: fp.high_watermark == 6)
    assert values(fp)[-1] == (5, b"new")


# --- errors and back-off --------------------------------------------------------------------


async def test_transport_errors_back_off_and_the_fetcher_keeps_going(pair: Pair) -> None:
    lp = pair.lead(0, [(0, 3)])
    pair.client.script = [BrokerNotAvailableError("connection refused"),
                          RuntimeError("a bug in the client")]
    fp = pair.follow(0)
    await eventually(lambda: fp.high_watermark == 3)
    assert raw(fp) == raw(lp)
    times = [t for t, _, _ in pair.client.requests]
    assert pair.client.fetch_offsets()[:3] == [0, 0, 0]
    assert times[1] - times[0] >= BACKOFF_MS / 1000 * 0.9
    assert times[2] - times[1] >= BACKOFF_MS / 1000 * 0.9


@pytest.mark.parametrize("code", [FencedLeaderEpochError.error_code,
                                  UnknownLeaderEpochError.error_code,
                                  NotLeaderOrFollowerError.error_code])
async def test_an_epoch_error_leaves_the_log_alone_and_backs_off(pair: Pair, code: int) -> None:
    lp = pair.lead(0, [(0, 3)])
    pair.client.script = [[ReplicaFetchResult("t", 0, code, 3, 0, 3)]]
    fp = pair.follow(0, [(0, 2)])
    await eventually(lambda: len(pair.client.requests) >= 2)
    times = [t for t, _, _ in pair.client.requests]
    assert times[1] - times[0] >= BACKOFF_MS / 1000 * 0.9
    assert pair.client.fetch_offsets()[:2] == [2, 2]  # nothing truncated
    await eventually(lambda: fp.high_watermark == 3)
    assert raw(fp) == raw(lp)


async def test_no_fetch_while_the_leader_is_not_registered(pair: Pair) -> None:
    lp = pair.lead(0, [(0, 2)])
    del pair.registered[LEADER]
    fp = pair.follow(0)
    await asyncio.sleep(0.15)
    assert pair.client.requests == []
    pair.registered[LEADER] = addr(LEADER)
    await eventually(lambda: fp.high_watermark == 2)
    assert raw(fp) == raw(lp)


async def test_an_answer_for_an_epoch_that_ended_in_flight_is_dropped(pair: Pair) -> None:
    lp = pair.lead(0)
    gate = asyncio.Event()
    stale = bytes(batch(b"stale"))
    pair.client.script = [gate, [ReplicaFetchResult("t", 0, 0, 1, 0, 1, None, stale)]]
    fp = pair.follow(0)
    await eventually(lambda: len(pair.client.requests) == 1)

    lp = pair.lead(1)  # a new leader epoch while the fetch is in flight
    lp.append_as_leader(batch(b"fresh"), required_acks=1)
    pair.follow(1)
    gate.set()
    await eventually(lambda: fp.high_watermark == 1)
    assert values(fp) == [(0, b"fresh")]
    assert pair.client.requests[1][2].partitions[0].leader_epoch == 1


# --- roles and stop -------------------------------------------------------------------------


async def test_role_changes_move_the_partition_between_fetchers(pair: Pair) -> None:
    pair.lead(0)
    fp = pair.follow(0)
    fetchers = pair.follower.fetchers
    assert fetchers is not None and fetchers.source_of(TP) == LEADER

    pair.follow(1, leader=3)  # broker 3 leads now
    assert fetchers.source_of(TP) == 3
    assert TP not in fetchers.fetchers[LEADER].partitions

    pair.follower.apply_partition_state(TP, PartitionState(FOLLOWER, 2, REPLICAS, 1),
                                        REPLICAS, CONFIG)
    assert fp.is_leader and fetchers.source_of(TP) is None

    pair.follow(3)
    pair.follower.stop_replica(TP, delete=False)
    assert fetchers.source_of(TP) is None


async def test_stop_ends_the_fetch_loops(pair: Pair) -> None:
    lp = pair.lead(0, [(0, 2)])
    fp = pair.follow(0)
    await eventually(lambda: fp.high_watermark == 2)
    gate = asyncio.Event()
    pair.client.script = [gate]  # the next fetch hangs (a leader that does not answer)
    await eventually(lambda: bool(pair.client.script == [] and not gate.is_set()))

    await asyncio.wait_for(pair.follower.stop(), 1)
    assert pair.follower.fetchers is not None and pair.follower.fetchers.fetchers == {}
    asked = len(pair.client.requests)
    lp.append_as_leader(batch(b"after"), required_acks=1)
    gate.set()
    await asyncio.sleep(0.15)
    assert len(pair.client.requests) == asked
    assert fp.log.log_end_offset == 2

    pair.follow(1)  # role changes after stop start nothing
    assert pair.follower.fetchers.fetchers == {}
