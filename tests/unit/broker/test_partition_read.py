"""Partition.read at the edges of a replica whose high watermark is behind its log end
(a new leader before its followers' next fetch moves the HW): Kafka's rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.broker.replica.partition import Partition
from core.broker.types import TopicPartition
from core.clock import ManualClock
from core.storage.config import LogConfig
from core.storage.errors import OffsetOutOfRangeError
from core.storage.log import PartitionLog
from core.storage.records import NewRecord, build_batch, decode_records


@pytest.fixture
def partition(tmp_path: Path) -> Partition:
    clock = ManualClock()
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig.from_overrides({}), clock=clock)
    for i in range(5):  # five one-record batches: offsets 0..4
        plog.append_as_leader(build_batch([NewRecord(value=b"%d" % i)], now_ms=0),
                              leader_epoch=0)
    return Partition(TopicPartition("t", 0), plog, broker_id=0, clock=clock, high_watermark=2)


def test_consumers_read_below_the_high_watermark_only(partition: Partition) -> None:
    got = decode_records(partition.read(0, 1 << 20).data)
    assert [r.value for r in got] == [b"0", b"1"]


@pytest.mark.parametrize("offset", [2, 3, 5])
def test_an_offset_between_the_high_watermark_and_the_log_end_reads_nothing(
    partition: Partition, offset: int
) -> None:
    assert partition.read(offset, 1 << 20).data == b""  # not out of range


def test_past_the_log_end_is_out_of_range(partition: Partition) -> None:
    with pytest.raises(OffsetOutOfRangeError, match=r"valid offsets are 0\.\.5"):
        partition.read(6, 1 << 20)


def test_followers_read_up_to_the_log_end(partition: Partition) -> None:
    got = decode_records(partition.read(3, 1 << 20, up_to_hw=False).data, min_offset=3)
    assert [r.value for r in got] == [b"3", b"4"]
