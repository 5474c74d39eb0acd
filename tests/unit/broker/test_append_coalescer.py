"""Concurrent produce requests' batches for one partition written as one append
(core.broker.replica.append_coalescer via ReplicaManager.append_many): each request
gets the offsets of its own records, in submission order; a request whose batch the
log refuses fails alone; an idempotent retry in a group still gets its original offsets."""

from __future__ import annotations

import asyncio
import os

import pytest
from test_replica_manager import (  # noqa: F401 - fixtures
    FAST,
    ME,
    NOW,
    TP,
    batch,
    clock,
    lead,
    logs,
    store,
    topic_config,
    values_of,
)

from core.broker.replica.manager import ReplicaManager
from core.broker.types import TopicPartition
from core.clock import ManualClock
from core.storage.batch import set_producer
from core.storage.errors import InvalidTimestampError
from core.storage.log_manager import LogManager

TP1 = TopicPartition("t", 1)


@pytest.fixture
async def rm(logs: LogManager, clock: ManualClock, store) -> ReplicaManager:  # noqa: F811
    manager = ReplicaManager(ME, logs, clock, isr_store=store, settings=FAST)
    yield manager
    await manager.stop()


def _writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: sizes.append(len(data)) or real(fd, data))
    return sizes


async def test_concurrent_requests_share_one_write_per_partition_with_their_own_offsets(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    for tp in (TP, TP1):
        lead(rm, tp, isr=(1,), replicas=(1,))
    writes = _writes(monkeypatch)
    requests = [[(TP, batch(b"a%d" % i, b"b%d" % i)), (TP1, batch(b"c%d" % i))] for i in range(5)]
    answers = await asyncio.gather(*(rm.append_many(r, acks=1, timeout_ms=1000)
                                     for r in requests))
    assert len(writes) == 2  # one per partition, not one per request and partition
    for i, (on_tp, on_tp1) in enumerate(answers):
        assert (on_tp.first_offset, on_tp.last_offset, on_tp.num_records) == (2 * i, 2 * i + 1, 2)
        assert (on_tp1.first_offset, on_tp1.last_offset, on_tp1.num_records) == (i, i, 1)
        assert on_tp.max_timestamp == NOW
    data = rm.partitions[TP].log.read(0, 1 << 20).data
    assert values_of(data) == [v for i in range(5) for v in (b"a%d" % i, b"b%d" % i)]
    assert values_of(rm.partitions[TP1].log.read(0, 1 << 20).data) == [b"c%d" % i for i in range(5)]


async def test_a_refused_batch_fails_its_request_alone(rm: ReplicaManager) -> None:
    lead(rm, isr=(1,), replicas=(1,),
         config=topic_config(message_timestamp_before_max_ms=60_000))
    good, bad = batch(b"ok1"), batch(b"too-old", ts=1)  # before message.timestamp.before.max.ms
    answers = await asyncio.gather(
        rm.append_many([(TP, good)], acks=1, timeout_ms=1000),
        rm.append_many([(TP, bad)], acks=1, timeout_ms=1000),
        rm.append_many([(TP, batch(b"ok2"))], acks=1, timeout_ms=1000))
    assert answers[0][0].first_offset == 0
    assert isinstance(answers[1][0], InvalidTimestampError)
    assert answers[2][0].first_offset == 1
    assert values_of(rm.partitions[TP].log.read(0, 1 << 20).data) == [b"ok1", b"ok2"]


async def test_an_idempotent_retry_in_a_group_gets_its_original_offsets(rm: ReplicaManager) -> None:
    lead(rm, isr=(1,), replicas=(1,))
    first = batch(b"x", b"y")
    set_producer(first, 42, 0, 0)
    retry = bytearray(first)
    (original,) = await rm.append_many([(TP, first)], acks=1, timeout_ms=1000)
    nxt = batch(b"z")
    set_producer(nxt, 42, 0, 2)
    fresh = batch(b"w")
    answers = await asyncio.gather(
        rm.append_many([(TP, retry)], acks=1, timeout_ms=1000),
        rm.append_many([(TP, nxt)], acks=1, timeout_ms=1000),
        rm.append_many([(TP, fresh)], acks=1, timeout_ms=1000))
    assert (answers[0][0].first_offset, answers[0][0].duplicate) == (original.first_offset, True)
    assert [a[0].first_offset for a in answers[1:]] == [2, 3]
    assert values_of(rm.partitions[TP].log.read(0, 1 << 20).data) == [b"x", b"y", b"z", b"w"]


async def test_batches_handed_over_before_stop_are_written(rm: ReplicaManager) -> None:
    lead(rm, isr=(1,), replicas=(1,))
    task = asyncio.ensure_future(rm.append_many([(TP, batch(b"last"))], acks=1, timeout_ms=1000))
    await asyncio.sleep(0)  # submitted, not yet flushed
    await rm.stop()
    assert (await task)[0].first_offset == 0
    assert rm.partitions[TP].log.log_end_offset == 1
