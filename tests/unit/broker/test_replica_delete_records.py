"""DeleteRecords on the replica manager (``ReplicaManager.delete_records``): the leader's
checks (policy, high watermark, leadership), the log start checkpoint written before the
answer, and the wait for every live follower to report its log start there (Kafka's
``DelayedDeleteRecords``), with followers learning the leader's log start from fetches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from test_replica_manager import (
    FAST,
    ME,
    PEER,
    TP,
    FakeIsrStore,
    LoopbackClient,
    address_of,
    batch,
    follow,
    lead,
    open_logs,
    produce,
    steps,
    topic_config,
)

from core.broker.errors import (
    DeleteRecordsTimedOutError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
)
from core.broker.replica.fetch_wire import (
    ReplicaFetchPartition,
    ReplicaFetchRequest,
    ReplicaFetchResult,
    decode_request,
    encode_request,
)
from core.broker.replica.manager import ReplicaManager
from core.broker.types import TopicPartition
from core.clock import ManualClock
from core.storage.errors import OffsetOutOfRangeError
from core.storage.log_manager import LogManager

NOW = 1_700_000_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def logs(tmp_path: Path, clock: ManualClock) -> Iterator[LogManager]:
    lm = open_logs(tmp_path / "broker1", clock)
    yield lm
    lm.close()


@pytest.fixture
async def rm(logs: LogManager, clock: ManualClock) -> AsyncIterator[ReplicaManager]:
    manager = ReplicaManager(ME, logs, clock, isr_store=FakeIsrStore(), settings=FAST)
    yield manager
    await manager.stop()


def checkpointed_log_starts(lm: LogManager) -> dict[tuple[str, int], int]:
    (d,) = lm.dirs
    return d.read_checkpoint(d.log_starts) or {}


async def fetch_as_follower(rm: ReplicaManager, offset: int, log_start: int, *,
                            max_wait_ms: int = 0) -> ReplicaFetchResult:
    (got,) = await rm.replica_fetch(ReplicaFetchRequest(PEER, max_wait_ms, 1 << 20, (
        ReplicaFetchPartition(TP.topic, TP.partition, offset, 0, 0, 1 << 20, log_start),)))
    return got


# --- the leader alone --------------------------------------------------------------------


async def test_a_lone_leader_deletes_writes_the_checkpoint_then_answers(
    rm: ReplicaManager, logs: LogManager,
) -> None:
    p = lead(rm, replicas=(ME,))
    await produce(rm, *(b"%d" % i for i in range(6)))
    assert await rm.delete_records(TP, 4, timeout_ms=1000) == 4
    assert p.log.log_start_offset == 4
    assert checkpointed_log_starts(logs) == {("t", 0): 4}
    with pytest.raises(OffsetOutOfRangeError):
        p.read(3, 1 << 20)


async def test_minus_one_means_the_high_watermark(rm: ReplicaManager) -> None:
    p = lead(rm, replicas=(ME,))
    await produce(rm, b"a", b"b", b"c")
    assert await rm.delete_records(TP, -1, timeout_ms=1000) == 3
    assert (p.log.log_start_offset, p.log.log_end_offset) == (3, 3)


async def test_an_offset_below_the_log_start_answers_the_log_start(rm: ReplicaManager) -> None:
    lead(rm, replicas=(ME,))
    await produce(rm, b"a", b"b", b"c")
    await rm.delete_records(TP, 2, timeout_ms=1000)
    assert await rm.delete_records(TP, 1, timeout_ms=0) == 2


@pytest.mark.parametrize("offset", [4, -2])
async def test_an_offset_above_the_high_watermark_or_negative_is_out_of_range(
    rm: ReplicaManager, offset: int,
) -> None:
    p = lead(rm, isr=(ME, PEER))  # the follower fetched nothing: HW 0, log end 3
    await produce(rm, b"a", b"b", b"c")
    await fetch_as_follower(rm, 2, 0)  # HW 2
    assert p.high_watermark == 2
    with pytest.raises(OffsetOutOfRangeError):
        await rm.delete_records(TP, offset, timeout_ms=1000)
    with pytest.raises(OffsetOutOfRangeError):
        await rm.delete_records(TP, 3, timeout_ms=1000)  # the log end, above the HW
    assert p.log.log_start_offset == 0


async def test_a_compact_only_topic_is_a_policy_violation(rm: ReplicaManager) -> None:
    lead(rm, replicas=(ME,), config=topic_config(cleanup_policy="compact"))
    with pytest.raises(PolicyViolationError):
        await rm.delete_records(TP, 0, timeout_ms=1000)
    lead(rm, TopicPartition("both", 0), replicas=(ME,),
         config=topic_config(cleanup_policy="compact,delete"))
    assert await rm.delete_records(TopicPartition("both", 0), 0, timeout_ms=1000) == 0


async def test_a_follower_replica_is_not_the_leader(rm: ReplicaManager) -> None:
    follow(rm)
    with pytest.raises(NotLeaderOrFollowerError):
        await rm.delete_records(TP, 0, timeout_ms=1000)


# --- waiting for the followers -----------------------------------------------------------


async def test_the_answer_waits_for_the_followers_log_start(rm: ReplicaManager) -> None:
    p = lead(rm, isr=(ME, PEER))
    await produce(rm, *(b"%d" % i for i in range(5)))
    await fetch_as_follower(rm, 5, 0)
    deleting = asyncio.create_task(rm.delete_records(TP, 3, timeout_ms=5000))
    await steps(20)
    assert not deleting.done() and p.log.log_start_offset == 3  # deleted here already
    assert p.low_watermark(rm.is_alive) == 0
    await fetch_as_follower(rm, 5, 2)  # behind still
    await steps(20)
    assert not deleting.done()
    await fetch_as_follower(rm, 5, 3)
    assert await asyncio.wait_for(deleting, 1) == 3


async def test_a_follower_on_a_dead_broker_is_not_waited_for(
    logs: LogManager, clock: ManualClock,
) -> None:
    rm = ReplicaManager(ME, logs, clock, is_alive=lambda b: b != PEER)
    lead(rm, replicas=(ME, PEER))
    await produce(rm, b"a", b"b")
    assert await asyncio.wait_for(rm.delete_records(TP, 2, timeout_ms=5000), 1) == 2


async def test_followers_that_do_not_follow_in_time_time_out_with_the_first_low_watermark(
    rm: ReplicaManager,
) -> None:
    p = lead(rm, isr=(ME, PEER))
    await produce(rm, b"a", b"b", b"c")
    await fetch_as_follower(rm, 3, 0)
    with pytest.raises(DeleteRecordsTimedOutError) as err:
        await rm.delete_records(TP, 2, timeout_ms=30)
    assert err.value.error_code == 7 and err.value.low_watermark == 0
    assert p.log.log_start_offset == 2  # the leader's records are deleted all the same


async def test_losing_the_leadership_while_waiting_is_not_leader(rm: ReplicaManager) -> None:
    lead(rm, isr=(ME, PEER))
    await produce(rm, b"a", b"b")
    await fetch_as_follower(rm, 2, 0)
    deleting = asyncio.create_task(rm.delete_records(TP, 1, timeout_ms=5000))
    await steps(20)
    follow(rm, epoch=1)
    with pytest.raises(NotLeaderOrFollowerError):
        await asyncio.wait_for(deleting, 1)


async def test_a_parked_follower_fetch_answers_at_once_with_the_new_log_start(
    rm: ReplicaManager,
) -> None:
    lead(rm, isr=(ME, PEER))
    await produce(rm, b"a", b"b", b"c")
    await fetch_as_follower(rm, 3, 0)
    parked = asyncio.create_task(fetch_as_follower(rm, 3, 0, max_wait_ms=5000))
    await steps(20)
    assert not parked.done()
    deleting = asyncio.create_task(rm.delete_records(TP, 2, timeout_ms=5000))
    got = await asyncio.wait_for(parked, 1)
    assert got.records == b"" and got.log_start_offset == 2
    # one that already reports the leader's log start waits as before
    again = asyncio.create_task(fetch_as_follower(rm, 3, 2, max_wait_ms=5000))
    assert await asyncio.wait_for(deleting, 1) == 2
    await steps(20)
    assert not again.done()
    again.cancel()


async def test_a_real_follower_follows_checkpoints_and_completes_the_deletion(
    tmp_path: Path, rm: ReplicaManager, logs: LogManager, clock: ManualClock,
) -> None:
    follower_logs = open_logs(tmp_path / "broker2", clock, PEER)
    follower = ReplicaManager(PEER, follower_logs, clock, fetch_client=LoopbackClient({ME: rm}),
                              address_of=address_of, settings=FAST)
    try:
        lead(rm, isr=(ME, PEER))
        follow(follower, leader=ME, replicas=(ME, PEER))
        await asyncio.wait_for(rm.append(TP, batch(b"a", b"b", b"c", b"d"), acks=-1,
                                         timeout_ms=5000), 2)
        assert await asyncio.wait_for(rm.delete_records(TP, 3, timeout_ms=5000), 2) == 3
        replica = follower.partitions[TP]
        assert replica.log.log_start_offset == 3
        # reported only once durable: the follower's checkpoint has it already
        assert checkpointed_log_starts(follower_logs) == {("t", 0): 3}
        assert checkpointed_log_starts(logs) == {("t", 0): 3}
    finally:
        await follower.stop()
        follower_logs.close()


# --- the checkpoint writes and the wire ---------------------------------------------------


async def test_log_start_writes_asked_for_during_a_write_share_the_next_one(
    rm: ReplicaManager, logs: LogManager, monkeypatch: pytest.MonkeyPatch,
) -> None:
    writes = []
    real = logs.checkpoint_log_start_offsets

    def slow_write() -> None:
        time.sleep(0.05)
        writes.append(1)
        real()

    monkeypatch.setattr(logs, "checkpoint_log_start_offsets", slow_write)
    first = asyncio.create_task(rm.write_log_starts())
    await asyncio.sleep(0.01)  # the first write is under way
    await asyncio.gather(first, *(rm.write_log_starts() for _ in range(5)))
    assert len(writes) == 2


def test_the_follower_log_start_travels_in_the_fetch_request() -> None:
    req = ReplicaFetchRequest(2, 500, 1 << 20, (ReplicaFetchPartition("t", 0, 9, 1, 1, 100, 7),))
    assert decode_request(encode_request(req)) == req
    older = b'{"replica_id": 2, "partitions": [{"topic": "t", "partition": 0, ' \
            b'"fetch_offset": 9, "leader_epoch": 1}]}'
    (part,) = decode_request(older).partitions
    assert part.log_start_offset == -1  # a broker that does not send it: unknown
