"""A leader whose ISR names a broker that is no longer a replica (a reassignment's last
step raced the leader's own ISR expansion) shrinks it away: kept, that member would hold
every acks=all produce and the high watermark for good."""

from __future__ import annotations

from pathlib import Path

from core.broker.replica.partition import Partition
from core.broker.types import TopicPartition
from core.clock import ManualClock
from core.storage.config import LogConfig
from core.storage.log import PartitionLog


def test_an_isr_member_outside_the_replicas_is_out_of_sync(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig.from_overrides({}), clock=clock)
    p = Partition(TopicPartition("t", 0), plog, broker_id=0, clock=clock, high_watermark=0)
    assert p.make_leader(leader_epoch=1, isr=(0, 1), replicas=(0, 1))
    assert p.out_of_sync_replicas(30_000) == ()  # a replica just caught up: in sync
    # the same epoch: broker 1 left the replicas, its ISR entry came back late
    assert p.make_leader(leader_epoch=1, isr=(1, 0), replicas=(0,))
    assert p.out_of_sync_replicas(30_000) == (1,)
