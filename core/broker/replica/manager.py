"""The replica manager: every partition replica hosted by this broker.

It applies leadership decisions from the metadata (``apply_partition_state``), appends
with ``acks`` 0/1/all and serves fetches with long-polling. acks=all parks the request
until the high watermark passes the appended records (woken by HW moves) or the
timeout; a fetch parks until the HW moves or its wait ends.

It owns both sides of replication: as leader it serves follower fetches and expands and
shrinks the ISR (written through ``IsrStore``, checked every ``lag_time_max_ms / 2``);
as follower its ``ReplicaFetcherManager`` (when it has a fetch client: any broker that
may have peers) fetches from the leaders.

A replica whose log could not be loaded is hosted offline (``Partition.offline``): it
answers every read, append and offsets request with KafkaStorageError (Kafka's
KAFKA_STORAGE_ERROR, also to follower fetches), is never fetched for, and is counted
by ``offline_partitions`` (the metrics' offline gauges).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.broker.errors import (
    BrokerNotAvailableError,
    DeleteRecordsTimedOutError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    PolicyViolationError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from core.broker.metadata.store import BadVersionError, PartitionState
from core.broker.replica.delayed import DataWatch, wait_on
from core.broker.replica.epoch_writer import EpochCheckpointWriter
from core.broker.replica.fetch_wire import (
    ReplicaFetchPartition,
    ReplicaFetchRequest,
    ReplicaFetchResult,
)
from core.broker.replica.fetcher import Address, ReplicaFetchClient, ReplicaFetcherManager
from core.broker.replica.partition import Partition
from core.broker.types import PartitionOffsets, TopicPartition
from core.clock import Clock
from core.errors import FranzError
from core.storage.blocking import run_blocking
from core.storage.config import LogConfig
from core.storage.data_sync import DataSyncer
from core.storage.durability import fsync_dir
from core.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from core.storage.log import AppendInfo, FetchData
from core.storage.log_manager import LogManager

log = logging.getLogger(__name__)

# How long a new leader's client offsets wait for its HW to reach its epoch's start: one
# round of follower fetches (replica.fetch.wait.max.ms is 500 ms).
OFFSETS_WAIT_S = 2.0

#: ``(partition, leader epoch or None)``: a replica's role changed (ReplicaManager.add_role_listener).
RoleListener = Callable[[int, "int | None"], None]


class IsrStore(Protocol):
    """Where a leader persists ISR changes: a conditional write of the partition state."""

    async def get_partition_states(self, topic: str) -> dict[int, PartitionState]: ...
    async def update_partition_state(
        self, topic: str, partition: int, state: PartitionState, *, expected_version: int
    ) -> PartitionState: ...


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    """Kafka's replica.* broker properties, as the replica manager uses them."""

    lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    fetch_max_bytes: int = 1_048_576  # replica.fetch.max.bytes
    fetch_response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    fetch_backoff_ms: int = 1_000  # replica.fetch.backoff.ms


def _always_alive(_broker_id: int) -> bool:
    return True


class ReplicaManager:
    """Owns the ``Partition`` objects of this broker. Lifecycle: construct, ``start()``
    (the ISR shrink check), ``await stop()`` (the check and the fetchers). Event-loop only.

    ``isr_store`` is where ISR changes are written (None: never changed, as in unit
    tests), ``is_alive`` says whether a broker is registered, ``fetch_client`` and
    ``address_of`` reach the leaders a follower fetches from (None: no fetcher runs)."""

    def __init__(self, broker_id: int, log_manager: LogManager, clock: Clock,
                 high_watermarks: Mapping[tuple[str, int], int] | None = None, *,
                 isr_store: IsrStore | None = None,
                 is_alive: Callable[[int], bool] = _always_alive,
                 fetch_client: ReplicaFetchClient | None = None,
                 address_of: Callable[[int], Address | None] | None = None,
                 settings: ReplicationSettings = ReplicationSettings()) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self._clock = clock
        self.partitions: dict[TopicPartition, Partition] = {}
        self._checkpointed_hw = dict(high_watermarks or {})
        self.isr_store = isr_store
        self.is_alive = is_alive
        self.settings = settings
        self.fetchers: ReplicaFetcherManager | None = None
        if fetch_client is not None and address_of is not None:
            self.fetchers = ReplicaFetcherManager(
                broker_id, self.partitions, fetch_client, address_of,
                max_wait_ms=settings.fetch_wait_max_ms, max_bytes=settings.fetch_max_bytes,
                response_max_bytes=settings.fetch_response_max_bytes,
                backoff_ms=settings.fetch_backoff_ms, write_log_starts=self.write_log_starts)
        self._shrink_task: asyncio.Task[None] | None = None
        self._isr_tasks: set[asyncio.Task[None]] = set()
        self._flushing: dict[TopicPartition, asyncio.Future[None]] = {}  # group commit
        # ISR changes written by this broker as leader (Kafka's IsrShrinksPerSec /
        # IsrExpandsPerSec; api.metrics exports them as counters).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._epoch_writer = EpochCheckpointWriter()  # new leaders' epochs, off the loop
        self._syncer = DataSyncer()  # flush.messages' fdatasyncs, on a GIL-free thread
        self._role_listeners: dict[str, list[RoleListener]] = {}
        # log-start-offset-checkpoint writes asked for / written (``write_log_starts``)
        self._log_starts_lock = asyncio.Lock()
        self._log_starts_asked = self._log_starts_written = 0

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the ISR shrink check (every ``lag_time_max_ms / 2``)."""
        if self._shrink_task is None:
            self._shrink_task = asyncio.get_running_loop().create_task(self._shrink_loop())

    async def stop(self) -> None:
        task, self._shrink_task = self._shrink_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.fetchers is not None:
            await self.fetchers.stop()
        await self._epoch_writer.drain()
        self._syncer.close()

    async def _shrink_loop(self) -> None:
        lag_ms = self.settings.lag_time_max_ms
        while True:
            await asyncio.sleep(max(lag_ms, 2) / 2000)
            try:
                self.maybe_shrink_isrs(lag_ms)
            except Exception:
                log.exception("ISR shrink check failed")

    def add_role_listener(self, topic: str, listener: RoleListener) -> None:
        """Call ``listener(partition, leader_epoch or None)`` whenever the role of a
        replica of ``topic`` here changes (None: it does not lead). The coordinator
        runtime of an internal topic hears of its partitions this way."""
        self._role_listeners.setdefault(topic, []).append(listener)

    def _role_changed(self, p: Partition, *, stopped: bool = False) -> None:
        if self.fetchers is not None:
            self.fetchers.on_role_change(p)
        listeners = self._role_listeners.get(p.tp.topic)
        if listeners:
            epoch = p.leader_epoch if p.is_leader and not stopped else None
            for listener in listeners:
                try:
                    listener(p.tp.partition, epoch)
                except Exception:  # one coordinator's failure must not stop the others
                    log.exception("role-change listener of %s-%d failed", *p.tp)

    # --- hosting ------------------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            raise UnknownTopicOrPartitionError(f"this broker hosts no replica of {tp[0]}-{tp[1]}")
        return p

    def offline_partitions(self) -> list[TopicPartition]:
        """The hosted replicas whose log could not be loaded, sorted."""
        return sorted(tp for tp, p in self.partitions.items() if p.offline)

    def leader_partition(self, tp: TopicPartition) -> Partition:
        p = self.get_partition(tp)
        if p.offline and p.is_leader:
            raise p.storage_error()
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
        if state.leader_epoch == p.leader_epoch and state.version < p.partition_version:
            return p  # an older read of the state than the one applied (our own ISR write)
        if state.leader == self.broker_id:
            applied = p.make_leader(leader_epoch=state.leader_epoch, isr=state.isr, replicas=replicas)
        else:
            applied = p.make_follower(leader=state.leader, leader_epoch=state.leader_epoch,
                                      isr=state.isr, replicas=replicas)
        if applied and state.version >= p.partition_version:
            p.partition_version, p.controller_epoch = state.version, state.controller_epoch
        self._epoch_writer.add(p.log.leader_epoch_cache)
        self._role_changed(p)
        return p

    def update_config(self, topic: str, config: LogConfig) -> None:
        for tp, p in self.partitions.items():
            if tp.topic == topic:
                p.log.update_config(config)

    def stop_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        p = self.partitions.pop(tp, None)
        if p is not None:
            p.leader_id = -1
            p.data_waiters.notify()
            p.leo_waiters.notify()
            self._role_changed(p, stopped=True)
        if delete and self.log_manager.get_log(tp.topic, tp.partition) is not None:
            self.log_manager.delete_log(tp.topic, tp.partition)

    def fence_leaders(self) -> int:
        """Stop acting as leader everywhere (this broker's ZooKeeper session expired: the
        controller may have moved leadership already). The next metadata sync gives each
        partition its role back; returns how many partitions were led."""
        fenced = 0
        for p in list(self.partitions.values()):
            if p.is_leader:
                p.make_follower(leader=-1, leader_epoch=p.leader_epoch, isr=p.isr,
                                replicas=p.replicas)
                fenced += 1
                self._role_changed(p)
        if fenced:
            log.warning("broker %d stopped leading %d partition(s) until it re-syncs with "
                        "ZooKeeper", self.broker_id, fenced)
        return fenced

    def delete_stray_logs(self, assignments: Mapping[str, Mapping[int, tuple[int, ...]]]) -> list[
            TopicPartition]:
        """Delete the local logs no assignment gives this broker: topics deleted, or
        replicas moved away, while it was down (Kafka deletes them when the broker is
        back). ``assignments``: every existing topic's partition -> replicas."""
        deleted = []
        for topic, partition in list(self.log_manager.all_logs()):
            tp = TopicPartition(topic, partition)
            if tp in self.partitions:
                continue
            replicas = assignments.get(topic, {}).get(partition)
            if replicas is None or self.broker_id not in replicas:
                self.log_manager.delete_log(topic, partition)
                deleted.append(tp)
        if deleted:
            log.info("broker %d deleted %d stray log(s) of topics deleted or moved while it "
                     "was away: %s", self.broker_id, len(deleted),
                     ", ".join(f"{t}-{p}" for t, p in deleted))
        return deleted

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): p.high_watermark for tp, p in self.partitions.items()}

    # --- produce ------------------------------------------------------------------------

    async def append(
        self, tp: TopicPartition, data: bytearray, *, acks: int, timeout_ms: int,
        leader_epoch: int | None = None,
    ) -> AppendInfo:
        """Append as leader. ``leader_epoch`` (a coordinator's write): refused unless this
        broker leads ``tp`` at that epoch, so a view loaded under an older leadership is
        never written back (the coordinator runtime)."""
        p = self.leader_partition(tp)
        if leader_epoch is not None and p.leader_epoch != leader_epoch:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} leads {tp[0]}-{tp[1]} at leader epoch "
                f"{p.leader_epoch}, not {leader_epoch}: the writer's view is stale")
        readers = len(p.data_waiters) + len(p.leo_waiters)  # long-polls this append wakes
        info = p.append_as_leader(data, required_acks=acks, flush_inline=False)
        if self._append_settled(p, info, acks):
            if readers:
                # one event-loop step: the woken consumers and followers answer before
                # this producer does, so the records reach them one answer sooner
                await asyncio.sleep(0)
            return info
        return await self._complete_append(p, info, acks=acks, timeout_ms=timeout_ms)

    async def append_many(
        self, items: Sequence[tuple[TopicPartition, bytearray]], *, acks: int, timeout_ms: int
    ) -> list[AppendInfo | FranzError]:
        """``append`` of several partitions led here (one produce request's batches),
        written one after the other without an event-loop step between them; only the
        appends that must wait (a ``flush.messages`` fsync, acks=all) wait, together.
        One result per item, an AppendInfo or the error of that partition alone."""
        out: list[AppendInfo | FranzError] = []
        waits: list[tuple[int, Awaitable[AppendInfo]]] = []
        readers = 0
        for tp, data in items:
            try:
                p = self.leader_partition(tp)
                readers += len(p.data_waiters) + len(p.leo_waiters)
                info = p.append_as_leader(data, required_acks=acks, flush_inline=False)
            except FranzError as exc:
                out.append(exc)
                continue
            out.append(info)
            if not self._append_settled(p, info, acks):
                waits.append((len(out) - 1, self._complete_append(
                    p, info, acks=acks, timeout_ms=timeout_ms)))
        if waits:
            done = await asyncio.gather(*(w for _, w in waits), return_exceptions=True)
            for (i, _), result in zip(waits, done, strict=True):
                if isinstance(result, BaseException) and not isinstance(result, FranzError):
                    raise result
                out[i] = result
        elif readers:
            await asyncio.sleep(0)  # as in ``append``: woken readers answer first
        return out

    @staticmethod
    def _append_settled(p: Partition, info: AppendInfo, acks: int) -> bool:
        """Nothing left to wait for: no fsync owed, and acks=all already met."""
        return not p.log.sync_due and (acks != -1 or p.high_watermark > info.last_offset)

    async def _complete_append(self, p: Partition, info: AppendInfo, *, acks: int,
                               timeout_ms: int) -> AppendInfo:
        """The waits of an append: the ``flush.messages`` fsync (a group commit off the
        loop, not inline), then acks=all's high watermark."""
        if p.log.sync_due:
            await self._flush_through(p, info.last_offset + 1)
        if acks != -1 or p.high_watermark > info.last_offset:
            return info
        await self.await_high_watermark(p, info.last_offset + 1, timeout_ms)
        if len(p.isr) < p.config.min_insync_replicas:
            raise NotEnoughReplicasAfterAppendError(
                f"records were written to {p.tp[0]}-{p.tp[1]} but the ISR shrank below "
                "min.insync.replicas"
            )
        return info

    async def _flush_through(self, p: Partition, offset: int) -> None:
        """Group commit for ``flush.messages``: make the log durable through ``offset``.
        A sync covers every append made before it started, so appends that arrive while
        one runs wait for it and then share the next one. The sync is an fdatasync of the
        ``.log`` data alone (off the loop), or a full flush
        (off the loop) when a new segment's directory entry must be made durable too;
        the indexes and the recovery point follow with the periodic flush."""
        log = p.log
        while log.durable_offset < offset:
            running = self._flushing.get(p.tp)
            if running is not None:
                await asyncio.shield(running)
                continue
            done = asyncio.get_running_loop().create_future()
            self._flushing[p.tp] = done
            try:
                await self._sync(p)
            finally:
                del self._flushing[p.tp]
                done.set_result(None)

    async def _sync(self, p: Partition) -> None:
        log = p.log
        plan = log.data_sync_plan()
        if plan is None:
            await run_blocking(log.flush)
            return
        target, segments = plan
        try:
            with contextlib.ExitStack() as pins:
                fds = [pins.enter_context(seg.pin_file()) for seg in segments]
                for fd in fds:
                    await self._fdatasync(fd)
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot sync {p.tp[0]}-{p.tp[1]} to disk: {exc.strerror or exc}") from exc
        log.mark_synced(target)

    async def _fdatasync(self, fd: int) -> None:
        await self._syncer.fdatasync(fd)

    async def await_high_watermark(self, p: Partition, target: int, timeout_ms: int) -> None:
        """Until ``p``'s HW reaches ``target``, woken by HW moves; RequestTimedOutError after
        ``timeout_ms``, NotLeaderOrFollowerError if ``p`` stops leading."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while p.high_watermark < target:
            woken = await wait_on((p.data_waiters,), deadline - loop.time())
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
        up_to_hw: bool = True, max_records: int | None = None,
    ) -> tuple[FetchData, Partition]:
        """Read from the leader replica; if nothing is there, wait up to ``max_wait_ms``
        for the HW (or LEO, for followers) to move, then read again. ``max_records``:
        the reader takes no more records than that (``PartitionLog.read``)."""
        p = self.leader_partition(tp)
        data = p.read(offset, max_bytes, up_to_hw=up_to_hw, max_records=max_records)
        if data.data or max_wait_ms <= 0:
            return data, p
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        waiters = p.data_waiters if up_to_hw else p.leo_waiters
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return data, p
            await wait_on((waiters,), remaining)
            p = self.leader_partition(tp)
            data = p.read(offset, max_bytes, up_to_hw=up_to_hw, max_records=max_records)
            if data.data:
                return data, p

    def data_watch(self, tp: TopicPartition) -> DataWatch | None:
        """What a reader about to wait on ``tp`` parks on, when this broker leads it;
        None otherwise (reads of it long-poll the leader)."""
        p = self.partitions.get(tp)
        if p is None or not p.is_leader:
            return None
        return DataWatch(p.data_waiters, p.high_watermark)

    async def client_offsets(self, tp: TopicPartition) -> PartitionOffsets:
        """The offsets of ``tp`` as a client may see them (this broker must lead it): a
        new leader first waits, bounded, for its HW to reach its epoch's start."""
        return (await self._offsets_leader(tp)).offsets()

    async def _offsets_leader(self, tp: TopicPartition, wait_s: float | None = None) -> Partition:
        p = self.leader_partition(tp)
        if p.offsets_available:
            return p
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (OFFSETS_WAIT_S if wait_s is None else wait_s)
        while loop.time() < deadline:
            await wait_on((p.data_waiters,), deadline - loop.time())
            p = self.leader_partition(tp)
            if p.offsets_available:
                return p
        raise OffsetNotAvailableError(
            f"{tp[0]}-{tp[1]}: its new leader's high watermark {p.high_watermark} has not "
            f"reached the start of its epoch ({p.epoch_start_offset}) yet; retry")

    async def offset_for_timestamp(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        """The first offset below the HW whose timestamp >= ``timestamp_ms`` (-1: the HW,
        -2: the log start), None when there is none; this broker must lead ``tp``."""
        found = await self.offset_and_timestamp(tp, timestamp_ms)
        return None if found is None else found[0]

    async def offset_and_timestamp(self, tp: TopicPartition, timestamp_ms: int, *,
                                   wait_s: float | None = None) -> tuple[int, int] | None:
        """As ``offset_for_timestamp``, with the record's timestamp (-1 for the HW and the
        log start): Kafka's ListOffsets answer. ``wait_s``: how long a new leader may
        wait for its HW (default ``OFFSETS_WAIT_S``; 0 answers OffsetNotAvailableError at
        once, as Kafka's ListOffsets does, the client retrying)."""
        p = await self._offsets_leader(tp, wait_s)
        if timestamp_ms == -1:
            return p.high_watermark, -1
        if timestamp_ms == -2:
            return p.log.log_start_offset, -1
        found = await run_blocking(p.log.offset_for_timestamp, timestamp_ms)
        if found is None or found[0] >= p.high_watermark:
            return None
        return found

    # --- deleting records (DeleteRecords) ---------------------------------------------

    async def delete_records(self, tp: TopicPartition, offset: int, *, timeout_ms: int) -> int:
        """DeleteRecords on the leader of ``tp`` (Kafka's ``deleteRecordsOnLeader`` and
        ``DelayedDeleteRecords``): the records below ``offset`` (-1: the high watermark)
        are deleted and the new log start written to log-start-offset-checkpoint; then
        it waits, up to ``timeout_ms``, until every follower on a live broker reports its
        log start there too (in its fetches). Returns the low watermark: the lowest of
        those log starts, ``offset`` or more.

        PolicyViolationError when the topic's cleanup.policy has no ``delete``;
        OffsetOutOfRangeError for an offset above the high watermark (or below -1);
        NotLeaderOrFollowerError / UnknownTopicOrPartitionError / KafkaStorageError as
        for appends; DeleteRecordsTimedOutError (REQUEST_TIMED_OUT) when the followers
        did not follow in time: the records are deleted here all the same."""
        deadline = asyncio.get_running_loop().time() + max(timeout_ms, 0) / 1000
        p = self.leader_partition(tp)
        target, moved = self._delete_on_leader(p, offset)
        first_low = p.low_watermark(self.is_alive)
        if moved:  # durable before anyone hears it is done: the segments' removal too,
            # since a log start on a segment boundary is not written to the checkpoint
            try:
                await run_blocking(fsync_dir, p.log.dir)
            except OSError as exc:
                raise KafkaStorageError(
                    f"cannot sync {tp[0]}-{tp[1]} to disk: {exc.strerror or exc}") from exc
            await self.write_log_starts()
        return await self._await_low_watermark(p, target, deadline, first_low)

    def _delete_on_leader(self, p: Partition, offset: int) -> tuple[int, bool]:
        """Move ``p``'s log start to ``offset`` (checked): the offset meant, and whether
        the log start moved."""
        p.check_online()
        t, i = p.tp
        if not p.config.delete:
            raise PolicyViolationError(
                f"records of {t}-{i} cannot be deleted: its cleanup.policy is "
                f"{','.join(p.config.cleanup_policy)}, without delete")
        target = p.high_watermark if offset == -1 else offset
        if not 0 <= target <= p.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete the records of {t}-{i} below offset {offset}: valid offsets "
                f"are 0..{p.high_watermark} (the high watermark), or -1 for it")
        moved = p.log.delete_records_before(target)
        if moved:
            log.info("%s-%d: records below %d deleted (DeleteRecords)", t, i, target)
            p.leo_waiters.notify()  # parked follower fetches answer with the new log start
        return target, moved

    async def _await_low_watermark(self, p: Partition, target: int, deadline: float,
                                   first_low: int) -> int:
        """Until ``p``'s low watermark reaches ``target`` (``deadline``: loop time)."""
        loop = asyncio.get_running_loop()
        while True:
            if not p.is_leader or self.partitions.get(p.tp) is not p:
                raise NotLeaderOrFollowerError(
                    f"leadership of {p.tp[0]}-{p.tp[1]} moved during DeleteRecords")
            low = p.low_watermark(self.is_alive)
            if low >= target:
                return low
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise DeleteRecordsTimedOutError(
                    f"the records of {p.tp[0]}-{p.tp[1]} below {target} are deleted on the "
                    f"leader, but not every live follower's log start reached it in time "
                    f"(lowest: {low})", low_watermark=first_low)
            # woken by follower reports and role changes; a follower's broker dying wakes
            # nothing, so liveness is looked at again every second
            await wait_on((p.log_start_waiters, p.data_waiters), min(remaining, 1.0))

    async def write_log_starts(self) -> None:
        """Write log-start-offset-checkpoint now, off the event loop; calls made while a
        write is under way share the next one (it reads every log start as it is then)."""
        self._log_starts_asked += 1
        asked = self._log_starts_asked
        async with self._log_starts_lock:
            if self._log_starts_written >= asked:
                return  # a write that started after this call covered it
            upto = self._log_starts_asked
            await run_blocking(self.log_manager.checkpoint_log_start_offsets)
            self._log_starts_written = upto

    # --- replication: the leader side ---------------------------------------------------

    async def replica_fetch(self, req: ReplicaFetchRequest) -> list[ReplicaFetchResult]:
        """One follower fetch over many partitions: answer at once when any partition has
        data or an error, else wait (woken by appends) up to ``max_wait_ms``."""
        results = self._replica_read(req)
        if req.max_wait_ms <= 0 or _worth_answering(req, results):
            return results
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.max_wait_ms / 1000
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return results
            parts = [self.partitions.get(TopicPartition(q.topic, q.partition)) for q in req.partitions]
            await wait_on([p.leo_waiters for p in parts if p is not None], remaining)
            results = self._replica_read(req)
            if _worth_answering(req, results):
                return results

    def _replica_read(self, req: ReplicaFetchRequest) -> list[ReplicaFetchResult]:
        budget = req.max_bytes
        out = []
        for q in req.partitions:
            r = self._replica_read_one(req.replica_id, q, min(q.max_bytes, budget))
            budget = max(1, budget - len(r.records))
            out.append(r)
        return out

    def _replica_read_one(self, replica_id: int, q: ReplicaFetchPartition,
                          max_bytes: int) -> ReplicaFetchResult:
        topic, partition, fetch_offset = q.topic, q.partition, q.fetch_offset
        p = self.partitions.get(TopicPartition(topic, partition))
        if p is None:
            return ReplicaFetchResult(topic, partition, UnknownTopicOrPartitionError.error_code)
        if p.offline:
            return ReplicaFetchResult(topic, partition, KafkaStorageError.error_code)
        lso, leo = p.log.log_start_offset, p.log.log_end_offset
        code = p.check_fetch_epoch(q.leader_epoch)
        if code:
            return ReplicaFetchResult(topic, partition, code, p.high_watermark, lso, leo)
        diverging = p.diverging_epoch(fetch_offset, q.last_fetched_epoch)
        if diverging is not None:
            return ReplicaFetchResult(topic, partition, 0, p.high_watermark, lso, leo, diverging)
        if fetch_offset > leo or fetch_offset < lso:
            return ReplicaFetchResult(topic, partition, OffsetOutOfRangeError.error_code,
                                      p.high_watermark, lso, leo)
        p.update_follower(replica_id, fetch_offset, q.log_start_offset)
        self._maybe_expand_isr(p, replica_id)
        data = p.read(fetch_offset, max_bytes, up_to_hw=False)
        return ReplicaFetchResult(topic, partition, 0, p.high_watermark, lso, leo,
                                  None, bytes(data.data))

    def _maybe_expand_isr(self, p: Partition, replica_id: int) -> None:
        if p.isr_change_in_flight or not p.isr_candidate(replica_id, alive=self.is_alive(replica_id)):
            return
        new_isr = tuple(r for r in p.replicas if r in p.isr or r == replica_id)
        self._spawn_isr_change(p, new_isr, "expand")

    def maybe_shrink_isrs(self, max_lag_ms: int) -> None:
        """Drop followers that have not caught up within ``max_lag_ms`` (leader side)."""
        for p in list(self.partitions.values()):
            if p.isr_change_in_flight:
                continue
            out = p.out_of_sync_replicas(max_lag_ms)
            if out:
                new_isr = tuple(r for r in p.isr if r not in out)
                self._spawn_isr_change(p, new_isr, "shrink")

    def _spawn_isr_change(self, p: Partition, new_isr: tuple[int, ...], why: str) -> None:
        if self.isr_store is None:
            return
        p.isr_change_in_flight = True
        task = asyncio.get_running_loop().create_task(self._alter_isr(p, new_isr, why))
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)

    async def _alter_isr(self, p: Partition, new_isr: tuple[int, ...], why: str) -> None:
        """Write (leader, epoch unchanged, new ISR) at the zkVersion we know; on a lost
        race re-read: still leader in the same epoch -> retry once with the new version,
        else leave it to the metadata event that follows."""
        store = self.isr_store
        assert store is not None
        try:
            for _ in range(2):
                if not p.is_leader or self.partitions.get(p.tp) is not p:
                    return
                state = PartitionState(leader=self.broker_id, leader_epoch=p.leader_epoch,
                                       isr=new_isr, controller_epoch=p.controller_epoch)
                try:
                    stored = await store.update_partition_state(
                        p.tp.topic, p.tp.partition, state, expected_version=p.partition_version)
                except BadVersionError:
                    current = (await store.get_partition_states(p.tp.topic)).get(p.tp.partition)
                    if current is None or current.leader != self.broker_id or \
                            current.leader_epoch != p.leader_epoch:
                        return
                    p.partition_version, p.controller_epoch = current.version, current.controller_epoch
                    continue
                log.info("%s-%d: ISR %s: %s -> %s", *p.tp, why, p.isr, new_isr)
                if why == "shrink":
                    self.isr_shrinks += 1
                else:
                    self.isr_expands += 1
                p.partition_version = max(p.partition_version, stored.version)
                # fenced (session expired) or stopped while the write was in flight: the
                # next metadata sync decides the role, never this write's answer
                if p.is_leader and self.partitions.get(p.tp) is p:
                    p.make_leader(leader_epoch=p.leader_epoch, isr=new_isr, replicas=p.replicas)
                return
        except (FranzError, BrokerNotAvailableError) as exc:
            log.warning("%s-%d: ISR %s to %s failed: %s", *p.tp, why, new_isr, exc)
        finally:
            p.isr_change_in_flight = False


def _worth_answering(req: ReplicaFetchRequest, results: list[ReplicaFetchResult]) -> bool:
    """A follower fetch answers before its wait ends: records, an error, a diverging
    epoch, or a log start ahead of the follower's (DeleteRecords waits for it to follow)."""
    for q, r in zip(req.partitions, results, strict=True):
        if r.records or r.error_code or r.diverging_epoch or \
                r.log_start_offset > q.log_start_offset >= 0:
            return True
    return False
