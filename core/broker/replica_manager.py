"""The replica manager: every partition replica hosted by this broker.

It applies leadership decisions from the metadata (``apply_partition_state``), appends
with ``acks`` 0/1/all and serves fetches with long-polling. acks=all parks the request
until the high watermark passes the appended records (woken by HW moves) or the
timeout; a fetch parks until the HW moves or its wait ends.
"""

from __future__ import annotations

import asyncio
import logging

from core.broker.delayed import wait_any
from core.broker.errors import (
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from core.broker.metadata import PartitionState
from core.broker.partition import Partition
from core.broker.types import TopicPartition
from core.clock import Clock
from core.storage.config import LogConfig
from core.storage.log import AppendInfo, FetchData
from core.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class ReplicaManager:
    """Owns the ``Partition`` objects of this broker. Event-loop only."""

    def __init__(self, broker_id: int, log_manager: LogManager, clock: Clock,
                 high_watermarks: dict[tuple[str, int], int] | None = None) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self._clock = clock
        self.partitions: dict[TopicPartition, Partition] = {}
        self._checkpointed_hw = dict(high_watermarks or {})

    # --- hosting ------------------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            raise UnknownTopicOrPartitionError(f"this broker hosts no replica of {tp[0]}-{tp[1]}")
        return p

    def leader_partition(self, tp: TopicPartition) -> Partition:
        p = self.get_partition(tp)
        if not p.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {tp[0]}-{tp[1]}")
        return p

    def apply_partition_state(
        self, tp: TopicPartition, state: PartitionState, replicas: tuple[int, ...], config: LogConfig
    ) -> Partition | None:
        """Create the local replica if needed and take the leader/follower role."""
        if self.broker_id not in replicas:
            self.stop_replica(tp, delete=True)
            return None
        p = self.partitions.get(tp)
        if p is None:
            plog = self.log_manager.get_or_create_log(tp.topic, tp.partition, config)
            hw = self._checkpointed_hw.get((tp.topic, tp.partition), 0)
            p = Partition(tp, plog, broker_id=self.broker_id, clock=self._clock, high_watermark=hw)
            self.partitions[tp] = p
        if state.leader == self.broker_id:
            p.make_leader(leader_epoch=state.leader_epoch, isr=state.isr, replicas=replicas)
        else:
            p.make_follower(leader=state.leader, leader_epoch=state.leader_epoch,
                            isr=state.isr, replicas=replicas)
        return p

    def update_config(self, topic: str, config: LogConfig) -> None:
        for tp, p in self.partitions.items():
            if tp.topic == topic:
                p.log.update_config(config)

    def stop_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        p = self.partitions.pop(tp, None)
        if p is not None:
            p.data_waiters.notify()
        if delete and self.log_manager.get_log(tp.topic, tp.partition) is not None:
            self.log_manager.delete_log(tp.topic, tp.partition)

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): p.high_watermark for tp, p in self.partitions.items()}

    # --- produce ------------------------------------------------------------------------

    async def append(
        self, tp: TopicPartition, data: bytearray, *, acks: int, timeout_ms: int
    ) -> AppendInfo:
        p = self.leader_partition(tp)
        info = p.append_as_leader(data, required_acks=acks)
        if acks != -1 or p.high_watermark > info.last_offset:
            return info
        await self._await_high_watermark(p, info.last_offset + 1, timeout_ms)
        if len(p.isr) < p.config.min_insync_replicas:
            raise NotEnoughReplicasAfterAppendError(
                f"records were written to {tp[0]}-{tp[1]} but the ISR shrank below min.insync.replicas"
            )
        return info

    async def _await_high_watermark(self, p: Partition, target: int, timeout_ms: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while p.high_watermark < target:
            remaining = deadline - loop.time()
            fut = p.data_waiters.new_waiter()
            try:
                woken = await wait_any([fut], remaining)
            finally:
                p.data_waiters.discard(fut)
            if not woken and p.high_watermark < target:
                raise RequestTimedOutError(
                    f"the records reached {p.tp[0]}-{p.tp[1]} but were not replicated to the ISR "
                    f"within {timeout_ms} ms"
                )
            if not p.is_leader:
                raise NotLeaderOrFollowerError(f"leadership of {p.tp[0]}-{p.tp[1]} moved during acks=all")

    # --- fetch --------------------------------------------------------------------------

    async def fetch(
        self, tp: TopicPartition, offset: int, *, max_bytes: int, max_wait_ms: int,
        up_to_hw: bool = True,
    ) -> tuple[FetchData, Partition]:
        """Read from the leader replica; if nothing is there, wait up to ``max_wait_ms``
        for the HW (or LEO, for followers) to move, then read again."""
        p = self.leader_partition(tp)
        data = p.read(offset, max_bytes, up_to_hw=up_to_hw)
        if data.data or max_wait_ms <= 0:
            return data, p
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        waiters = p.data_waiters if up_to_hw else p.leo_waiters
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return data, p
            fut = waiters.new_waiter()
            try:
                await wait_any([fut], remaining)
            finally:
                waiters.discard(fut)
            p = self.leader_partition(tp)
            data = p.read(offset, max_bytes, up_to_hw=up_to_hw)
            if data.data:
                return data, p
