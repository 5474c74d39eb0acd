"""The broker facade over real files and the real embedded metadata store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from app.assembly import build_broker
from app.settings import load_config
from core.broker.broker import Broker
from core.broker.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from core.broker.produce.partitioner import partition_for_key
from core.broker.types import ProduceRecord, TopicPartition
from core.storage.errors import InvalidConfigError, InvalidTopicError, MessageTooLargeError


async def _broker(data_dir: Path, **props: object) -> Broker:
    overrides = {"log.dirs": str(data_dir), "offsets.topic.num.partitions": 4, **props}
    return await build_broker(load_config(overrides=overrides, environ={}))


@pytest.fixture
async def broker(tmp_path: Path):
    b = await _broker(tmp_path / "data")
    await b.start()
    yield b
    await b.stop()


async def test_keyed_records_land_where_kafka_puts_them(broker: Broker) -> None:
    await broker.create_topic("orders", partitions=6)
    keys = [f"customer-{i}".encode() for i in range(40)]
    results = await broker.produce("orders", [ProduceRecord(b"v", key=k) for k in keys])
    for key, res in zip(keys, results, strict=True):
        assert res.error is None
        assert res.partition == partition_for_key(key, 6)


async def test_offsets_are_contiguous_and_readable(broker: Broker) -> None:
    await broker.create_topic("t", partitions=1)
    first = await broker.produce("t", [ProduceRecord(f"a{i}".encode()) for i in range(5)])
    second = await broker.produce("t", [ProduceRecord(b"b", headers=[("h", b"1")], timestamp=1234)])
    assert [r.offset for r in first] == [0, 1, 2, 3, 4]
    assert second[0].offset == 5
    fetched = await broker.fetch("t", 0, 3, max_bytes=1 << 20)
    assert [r.offset for r in fetched.records] == [3, 4, 5]
    assert fetched.records[-1].headers == [("h", b"1")]
    assert fetched.records[-1].timestamp == 1234
    assert fetched.high_watermark == 6


async def test_tiny_max_bytes_still_returns_a_record(broker: Broker) -> None:
    await broker.create_topic("t", partitions=1)
    await broker.produce("t", [ProduceRecord(b"x" * 1000)])
    fetched = await broker.fetch("t", 0, 0, max_bytes=1)
    assert len(fetched.records) == 1


async def test_explicit_partition_honoured_and_bad_partition_rejected(broker: Broker) -> None:
    await broker.create_topic("t", partitions=3)
    res = await broker.produce("t", [ProduceRecord(b"v", key=b"k")], partition=2)
    assert res[0].partition == 2
    with pytest.raises(UnknownPartitionError):
        await broker.produce("t", [ProduceRecord(b"v")], partition=3)
    with pytest.raises(UnknownPartitionError):
        await broker.produce("t", [ProduceRecord(b"v", partition=-1)])


async def test_oversized_record_fails_alone_and_batches_split(tmp_path: Path) -> None:
    b = await _broker(tmp_path / "d")
    await b.start()
    try:
        await b.create_topic("t", partitions=1, configs={"max.message.bytes": "2000"})
        records = [ProduceRecord(b"s" * 300) for _ in range(20)]
        records.insert(5, ProduceRecord(b"L" * 5000))
        res = await b.produce("t", records)
        assert isinstance(res[5].error, MessageTooLargeError)
        ok = [r for i, r in enumerate(res) if i != 5]
        assert all(r.error is None for r in ok)
        assert sorted(r.offset for r in ok) == list(range(20))
        fetched = await b.fetch("t", 0, 0, max_bytes=1 << 20)
        assert len(fetched.records) == 20
    finally:
        await b.stop()


async def test_long_poll_fetch_wakes_on_produce(broker: Broker) -> None:
    await broker.create_topic("t", partitions=1)

    async def produce_later() -> None:
        await asyncio.sleep(0.2)
        await broker.produce("t", [ProduceRecord(b"late")])

    task = asyncio.create_task(produce_later())
    start = time.monotonic()
    fetched = await broker.fetch("t", 0, 0, max_bytes=1024, max_wait_ms=5000)
    elapsed = time.monotonic() - start
    await task
    assert [r.value for r in fetched.records] == [b"late"]
    assert elapsed < 4.0  # woken by the append, not by the 5 s timeout


async def test_long_poll_times_out_empty(broker: Broker) -> None:
    await broker.create_topic("t", partitions=1)
    fetched = await broker.fetch("t", 0, 0, max_bytes=1024, max_wait_ms=100)
    assert fetched.records == []


async def test_unknown_topic_without_auto_create(tmp_path: Path) -> None:
    b = await _broker(tmp_path / "d", **{"auto.create.topics.enable": "false"})
    await b.start()
    try:
        with pytest.raises(UnknownTopicError):
            await b.produce("nope", [ProduceRecord(b"v")])
        with pytest.raises(UnknownTopicError):
            await b.describe_topic("nope")
    finally:
        await b.stop()


async def test_auto_create_uses_num_partitions(tmp_path: Path) -> None:
    b = await _broker(tmp_path / "d", **{"num.partitions": "3"})
    await b.start()
    try:
        await b.produce("auto", [ProduceRecord(b"v")])
        info = await b.describe_topic("auto")
        assert len(info.partitions) == 3
    finally:
        await b.stop()


async def test_topic_admin_errors(broker: Broker) -> None:
    await broker.create_topic("t", partitions=2)
    with pytest.raises(TopicAlreadyExistsError):
        await broker.create_topic("t")
    with pytest.raises(InvalidTopicError):
        await broker.create_topic("bad name!")
    with pytest.raises(InvalidReplicationFactorError):
        await broker.create_topic("t2", replication_factor=2)
    with pytest.raises(InvalidConfigError):
        await broker.create_topic("t3", configs={"retention.ms": "soon"})
    with pytest.raises(InvalidPartitionsError):
        await broker.create_partitions("t", 1)
    info = await broker.create_partitions("t", 4)
    assert len(info.partitions) == 4
    await broker.delete_topic("t")
    assert "t" not in await broker.list_topics()
    with pytest.raises(UnknownTopicError):
        await broker.delete_topic("t")


async def test_data_and_topics_survive_restart(tmp_path: Path) -> None:
    b = await _broker(tmp_path / "d")
    await b.start()
    await b.create_topic("t", partitions=2, configs={"retention.ms": "1000000"})
    await b.produce("t", [ProduceRecord(f"{i}".encode(), partition=i % 2) for i in range(10)])
    await b.stop()

    b2 = await _broker(tmp_path / "d")
    await b2.start()
    try:
        info = await b2.describe_topic("t")
        assert info.configs == {"retention.ms": "1000000"}
        offsets = await b2.partition_offsets("t", 0)
        assert offsets.high_watermark == 5
        fetched = await b2.fetch("t", 1, 0, max_bytes=1 << 20)
        assert [r.value for r in fetched.records] == [b"1", b"3", b"5", b"7", b"9"]
        res = await b2.produce("t", [ProduceRecord(b"after", partition=0)])
        assert res[0].offset == 5
    finally:
        await b2.stop()


async def test_acks_all_on_single_replica(broker: Broker) -> None:
    await broker.create_topic("t", partitions=1, configs={"min.insync.replicas": "1"})
    res = await broker.produce("t", [ProduceRecord(b"v")], acks=-1)
    assert res[0].error is None and res[0].offset == 0


async def test_acks_all_refused_when_isr_below_min(broker: Broker) -> None:
    await broker.create_topic("t", partitions=1, configs={"min.insync.replicas": "2"})
    res = await broker.produce("t", [ProduceRecord(b"v")], acks=-1)
    assert res[0].error is not None and res[0].error.error_code == 19
    assert (await broker.partition_offsets("t", 0)).log_end_offset == 0  # nothing written


async def test_offset_for_timestamp(broker: Broker) -> None:
    await broker.create_topic("t", partitions=1)
    await broker.produce("t", [ProduceRecord(b"a", timestamp=1000), ProduceRecord(b"b", timestamp=2000)])
    assert await broker.offset_for_timestamp("t", 0, 1500) == 1
    assert await broker.offset_for_timestamp("t", 0, -2) == 0
    assert await broker.offset_for_timestamp("t", 0, -1) == 2
    assert await broker.offset_for_timestamp("t", 0, 9999) is None


async def test_flush_messages_1_fsyncs_before_the_answer_and_groups_fsyncs(broker: Broker) -> None:
    """flush.messages=1: every acknowledged append is on disk (fdatasynced: the durable
    offset has passed it) when produce returns, and concurrent appends share syncs
    (group commit) instead of one each; the recovery point follows with a flush."""
    await broker.create_topic("durable", partitions=1, configs={"flush.messages": "1"})
    await broker.produce("durable", [ProduceRecord(b"first")])  # the partition exists now
    rm = broker.replica_manager
    log = rm.partitions[TopicPartition("durable", 0)].log  # type: ignore[union-attr]
    syncs = 0
    real_sync = rm._fdatasync

    async def counting_sync(fd: int) -> None:
        nonlocal syncs
        syncs += 1
        await asyncio.sleep(0.005)  # a slow disk: appends pile up while one sync runs
        await real_sync(fd)

    rm._fdatasync = counting_sync  # type: ignore[method-assign]

    async def produce_one(i: int) -> None:
        (res,) = await broker.produce("durable", [ProduceRecord(f"r{i}".encode())])
        assert res.error is None
        assert log.durable_offset > res.offset  # durable before the answer

    await asyncio.gather(*(produce_one(i) for i in range(40)))
    assert log.durable_offset == log.log_end_offset == 41
    assert 1 <= syncs < 40, syncs  # grouped
    log.flush()
    assert log.recovery_point == 41


async def test_an_append_lets_the_long_polls_it_wakes_answer_before_its_producer(
    broker: Broker,
) -> None:
    await broker.create_topic("t", partitions=1)
    order: list[object] = []

    async def long_poll() -> None:
        res = await broker.fetch("t", 0, 0, max_bytes=1 << 20, max_wait_ms=5_000)
        order.append(("consumer", [r.value for r in res.records]))

    task = asyncio.create_task(long_poll())
    await asyncio.sleep(0.05)  # parked on the partition
    await broker.produce("t", [ProduceRecord(value=b"x")], partition=0)
    order.append("producer")
    await asyncio.wait_for(task, 5)
    assert order == [("consumer", [b"x"]), "producer"]
