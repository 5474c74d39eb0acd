"""``_schemas-0`` in memory, with InternalTopicLog's surface (append with acks, read to
the end, leader epoch), for driving the registry without a broker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from core.broker.errors import NotLeaderOrFollowerError
from core.storage.records import Record, decode_records


class MemoryLog:
    topic = "_schemas"

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.epoch = 0
        self.fail_next: BaseException | None = None
        self.appends = 0

    def leader_epoch(self, partition: int) -> int:
        if self.epoch < 0:
            raise NotLeaderOrFollowerError("not the leader")
        return self.epoch

    async def append(self, partition: int, batch: bytes, *, acks: int, timeout_ms: int,
                     leader_epoch: int | None = None) -> int:
        await asyncio.sleep(0)
        if leader_epoch is not None and self.leader_epoch(partition) != leader_epoch:
            raise NotLeaderOrFollowerError(f"led at epoch {self.epoch}, not {leader_epoch}")
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        first = len(self.records)
        for i, r in enumerate(decode_records(bytearray(batch))):
            self.records.append(Record(first + i, r.timestamp, r.key, r.value))
        self.appends += 1
        return first

    async def read(self, partition: int) -> AsyncIterator[Record]:
        self.leader_epoch(partition)
        for record in list(self.records):
            yield record

    def compact(self) -> None:
        """Keep the last record of each key; drop tombstones (as the cleaner would once
        ``delete.retention.ms`` passed)."""
        last = {r.key: r.offset for r in self.records}
        self.records = [r for r in self.records
                        if last[r.key] == r.offset and r.value is not None]
