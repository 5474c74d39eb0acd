"""A hand-written fake of ``core.broker.group.backend.GroupBackend`` for unit tests.

Every partition, ``__consumer_offsets`` included, is a real
``core.storage.log.PartitionLog`` under a temporary directory: batches are built with
``build_batch``, appended as leader, read back as whole batches and decoded with
``decode_records``. One replica, so the high watermark is the log end. Fetches
long-poll on an event set by appends. ``reopen()`` closes the logs and opens them
again from disk, like a broker restart.

Knobs: ``not_leader`` (offsets partitions this "broker" does not lead; their
``offsets_leader`` is -1, the others' ``broker_id``), ``epochs``
(the leader epoch of each offsets partition led here, 0 unless a test moves it),
``fail_appends`` (every offsets append raises NotLeaderOrFollowerError), ``local``
(``data_watch`` answers for every partition, as for partitions a broker leads, so
waiting reads park on wait sets; otherwise None, as for partitions led elsewhere, so
they long-poll ``fetch``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from core.broker.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from core.broker.replica.batch_cache import BatchCache, FetchResult
from core.broker.replica.delayed import DataWatch, WaitSet
from core.broker.types import OFFSETS_TOPIC, PartitionOffsets
from core.clock import Clock, ManualClock
from core.storage.config import LogConfig
from core.storage.log import PartitionLog
from core.storage.records import NewRecord, Record, build_batch, decode_records

CONFIG = LogConfig.from_overrides({"segment.index.bytes": "65536"})


class FakeGroupBackend:
    def __init__(
        self, root: Path, *, offsets_partitions: int = 3, clock: Clock | None = None,
        local: bool = False,
    ) -> None:
        self.root = root
        self.clock = clock or ManualClock()
        self.offsets_topic_partitions = offsets_partitions
        self.topics: dict[str, list[PartitionLog]] = {}
        self.appended: dict[tuple[str, int], asyncio.Event] = {}
        self.not_leader: set[int] = set()
        self.broker_id = 0  # what offsets_leader answers for the partitions led "here"
        self.epochs: dict[int, int] = {}
        self.fail_appends = False
        self.local = local
        self.watchers: dict[tuple[str, int], WaitSet] = {}
        self.batches = BatchCache()
        self._open_existing()
        self.create_topic(OFFSETS_TOPIC, offsets_partitions)

    def _open_existing(self) -> None:
        for d in sorted(self.root.iterdir()) if self.root.exists() else []:
            topic, _, p = d.name.rpartition("-")
            self.topics.setdefault(topic, [])
            assert int(p) == len(self.topics[topic])
            self.topics[topic].append(PartitionLog.open(d, CONFIG, clock=self.clock))

    def reopen(self) -> FakeGroupBackend:
        """Close every log and open the same directories in a new backend."""
        self.close()
        return FakeGroupBackend(
            self.root, offsets_partitions=self.offsets_topic_partitions, clock=self.clock,
            local=self.local,
        )

    def close(self) -> None:
        for logs in self.topics.values():
            for plog in logs:
                plog.close()

    # --- test helpers -------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> None:
        logs = self.topics.setdefault(name, [])
        for p in range(len(logs), partitions):
            logs.append(PartitionLog.open(self.root / f"{name}-{p}", CONFIG, clock=self.clock))

    def _log(self, topic: str, partition: int) -> PartitionLog:
        logs = self.topics.get(topic)
        if logs is None or not 0 <= partition < len(logs):
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}")
        return logs[partition]

    def _append(self, topic: str, partition: int, batch: bytes) -> int:
        info = self._log(topic, partition).append_as_leader(bytearray(batch), leader_epoch=0)
        event = self.appended.pop((topic, partition), None)
        if event is not None:
            event.set()
        watchers = self.watchers.get((topic, partition))
        if watchers is not None:
            watchers.notify()
        return info.first_offset

    def produce(
        self,
        topic: str,
        partition: int,
        values: Sequence[bytes | None],
        *,
        key: bytes | None = None,
        timestamp: int | None = None,
    ) -> int:
        records = [NewRecord(value=v, key=key, timestamp=timestamp) for v in values]
        return self._append(
            topic, partition, bytes(build_batch(records, now_ms=self.clock.now_ms()))
        )

    def offsets_records(self, partition: int) -> list[Record]:
        plog = self._log(OFFSETS_TOPIC, partition)
        return decode_records(plog.read(plog.log_start_offset, 1 << 30).data)

    # --- GroupBackend ---------------------------------------------------------------------

    def offsets_leader_epoch(self, partition: int) -> int:
        if partition in self.not_leader:
            raise NotLeaderOrFollowerError(f"not leader of {OFFSETS_TOPIC}-{partition}")
        return self.epochs.get(partition, 0)

    def offsets_leader(self, partition: int) -> int:
        return -1 if partition in self.not_leader else self.broker_id

    async def append_offsets(self, partition: int, batch: bytes, *,
                             leader_epoch: int | None = None) -> int:
        if partition in self.not_leader or self.fail_appends or (
                leader_epoch is not None and leader_epoch != self.epochs.get(partition, 0)):
            raise NotLeaderOrFollowerError(f"not leader of {OFFSETS_TOPIC}-{partition}")
        return self._append(OFFSETS_TOPIC, partition, batch)

    async def read_offsets(self, partition: int) -> AsyncIterator[Record]:
        if partition in self.not_leader:
            raise NotLeaderOrFollowerError(f"not leader of {OFFSETS_TOPIC}-{partition}")
        for record in self.offsets_records(partition):
            yield record

    async def list_topics(self) -> list[str]:
        return sorted(self.topics)

    async def partition_count(self, topic: str) -> int | None:
        logs = self.topics.get(topic)
        return None if logs is None else len(logs)

    async def fetch(
        self, topic: str, partition: int, offset: int, *, max_bytes: int, max_wait_ms: int,
    ) -> FetchResult:
        plog = self._log(topic, partition)
        data = plog.read(offset, max_bytes)  # OffsetOutOfRangeError outside [start, end]
        if not data.data and max_wait_ms > 0:
            event = self.appended.setdefault((topic, partition), asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), max_wait_ms / 1000)
            except TimeoutError:
                pass
            data = plog.read(offset, max_bytes)
        return self.batches.fetch_result(
            topic, partition, offset, data, high_watermark=plog.log_end_offset,
            log_start_offset=plog.log_start_offset)

    def data_watch(self, topic: str, partition: int) -> DataWatch | None:
        logs = self.topics.get(topic)
        if not self.local or logs is None or not 0 <= partition < len(logs):
            return None
        plog = logs[partition]
        return DataWatch(self.watchers.setdefault((topic, partition), WaitSet()),
                         plog.log_end_offset)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> int | None:
        found = self._log(topic, partition).offset_for_timestamp(timestamp_ms)
        return None if found is None else found[0]

    async def partition_offsets(self, topic: str, partition: int) -> PartitionOffsets:
        plog = self._log(topic, partition)
        return PartitionOffsets(plog.log_start_offset, plog.log_end_offset, plog.log_end_offset)
