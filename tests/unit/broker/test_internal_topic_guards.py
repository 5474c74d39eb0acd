"""Internal topics (``__consumer_offsets``) belong to the broker: no admin call deletes,
reconfigures or repartitions them, and appends over the internal API are refused for
them and decoded record by record for every other topic. Any topic stays writable
whatever its ``segment.bytes``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from app.assembly import build_broker
from app.settings import load_config
from core.broker.broker import Broker
from core.broker.types import OFFSETS_TOPIC, ProduceRecord, TopicPartition
from core.storage.batch import compute_crc
from core.storage.errors import CorruptRecordError, InvalidRecordError, InvalidTopicError
from core.storage.records import NewRecord, build_batch

NOW = 1_700_000_000_000
OFFSETS_PARTITIONS = 4


async def _broker(data_dir: Path) -> Broker:
    overrides = {"log.dirs": str(data_dir), "offsets.topic.num.partitions": OFFSETS_PARTITIONS}
    return await build_broker(load_config(overrides=overrides, environ={}))


@pytest.fixture
async def broker(tmp_path: Path):
    b = await _broker(tmp_path / "data")
    await b.start()
    yield b
    await b.stop()


def batch(*values: bytes) -> bytearray:
    return build_batch([NewRecord(v, key=b"k") for v in values], now_ms=NOW)


def malformed_batch() -> bytearray:
    """CRC-valid, but the first record's key length varint runs past the record."""
    buf = batch(b"a", b"b")
    key_length_at = 61 + 4  # record length, attributes, timestamp and offset deltas
    assert buf[key_length_at] == 0x02  # varint 1: the key b"k"
    buf[key_length_at] = 0x7E
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return buf


async def log_end(broker: Broker, topic: str, partition: int) -> int:
    return (await broker.local_offsets(topic, partition)).log_end_offset


async def test_internal_topics_cannot_be_deleted(broker: Broker) -> None:
    tp = TopicPartition("orders", 0)
    await broker.create_topic("orders", partitions=1)
    await broker.groups.reset_offsets("g", {tp: 7})
    with pytest.raises(InvalidTopicError, match=f"'{OFFSETS_TOPIC}' is internal and cannot be deleted"):
        await broker.delete_topic(OFFSETS_TOPIC)
    assert OFFSETS_TOPIC in await broker.list_topics()
    assert await broker.groups.group_offsets("g") == {tp: 7}
    await broker.delete_topic("orders")  # other topics still can be
    assert "orders" not in await broker.list_topics()


async def test_internal_topics_cannot_be_reconfigured_or_repartitioned(broker: Broker) -> None:
    before = (await broker.describe_topic(OFFSETS_TOPIC)).configs
    assert before["cleanup.policy"] == "compact"
    attempts = [
        broker.alter_topic_configs(OFFSETS_TOPIC, set_values={"cleanup.policy": "delete"}),
        broker.alter_topic_configs(OFFSETS_TOPIC, set_values={"retention.ms": "1"},
                                   validate_only=True),
        broker.alter_topic_configs(OFFSETS_TOPIC, reset=["cleanup.policy"]),
        broker.set_topic_configs(OFFSETS_TOPIC, {"segment.bytes": "14"}),
        broker.create_partitions(OFFSETS_TOPIC, OFFSETS_PARTITIONS + 1),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidTopicError, match=f"'{OFFSETS_TOPIC}' is internal"):
            await attempt
    info = await broker.describe_topic(OFFSETS_TOPIC)
    assert info.configs == before and len(info.partitions) == OFFSETS_PARTITIONS
    await broker.create_topic("orders", partitions=1)  # other topics still can be changed
    await broker.alter_topic_configs("orders", set_values={"retention.ms": "1000"})
    assert (await broker.create_partitions("orders", 2)).partitions[1].partition == 1


async def test_internal_api_appends_to_internal_topics_are_refused(broker: Broker) -> None:
    before = await log_end(broker, OFFSETS_TOPIC, 0)
    with pytest.raises(InvalidTopicError, match="Cannot append to internal topic"):
        await broker.local_append(OFFSETS_TOPIC, 0, batch(b"forged"), acks=1, timeout_ms=1000)
    assert await log_end(broker, OFFSETS_TOPIC, 0) == before


async def test_internal_api_appends_are_decoded_before_they_are_written(broker: Broker) -> None:
    await broker.create_topic("orders", partitions=1)
    info = await broker.local_append("orders", 0, batch(b"a"), acks=1, timeout_ms=1000)
    assert (info.first_offset, info.num_records) == (0, 1)
    with pytest.raises(CorruptRecordError, match="orders-0|record"):
        await broker.local_append("orders", 0, batch(b"b") + malformed_batch(), acks=1,
                                  timeout_ms=1000)
    assert await log_end(broker, "orders", 0) == 1
    fetched = await broker.fetch("orders", 0, 0, max_bytes=1 << 20)
    assert [r.value for r in fetched.records] == [b"a"]


async def test_internal_api_refuses_offset_deltas_that_do_not_count_up(broker: Broker) -> None:
    await broker.create_topic("orders", partitions=1)
    buf = batch(b"a", b"b")
    second_delta_at = 61 + 9 + 3  # record 0 takes 9 bytes; then length, attributes, ts delta
    assert buf[second_delta_at] == 0x02  # varint 1
    buf[second_delta_at] = 0x06  # varint 3
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    with pytest.raises(InvalidRecordError, match="offset delta 3"):
        await broker.local_append("orders", 0, buf, acks=1, timeout_ms=1000)
    assert await log_end(broker, "orders", 0) == 0


async def test_a_tiny_segment_bytes_keeps_a_topic_writable(broker: Broker) -> None:
    await broker.create_topic("tiny", partitions=1, configs={"segment.bytes": "14"})
    for i in range(3):
        results = await broker.produce("tiny", [ProduceRecord(f"v{i}{j}".encode())
                                                for j in range(2)])
        assert [r.error for r in results] == [None, None]
    fetched = await broker.fetch("tiny", 0, 0, max_bytes=1 << 20)
    assert [r.value for r in fetched.records][:2] == [b"v00", b"v01"]
    values = []
    offset = 0
    while offset < 6:
        got = await broker.fetch("tiny", 0, offset, max_bytes=1)
        values += [r.value for r in got.records]
        offset = got.next_offset
    assert values == [f"v{i}{j}".encode() for i in range(3) for j in range(2)]
