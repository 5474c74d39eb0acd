"""One partition's replica on this broker: its log, its role, the ISR and the HW.

Lifecycle: created by the ReplicaManager when the metadata says this broker hosts a
replica; ``make_leader`` / ``make_follower`` apply a (leader, leader_epoch, isr)
decision whose epoch is newer than the one held. The leader tracks every follower's
log end offset (its fetch offset) and last caught-up time; the high watermark is the
minimum LEO over the ISR (never below the current HW) and is not advanced while the ISR
is smaller than ``min.insync.replicas`` (Kafka 3.7+, KIP-966). Consumers see offsets
below the HW only.

Not thread-safe: all calls come from the event loop. Log writes happen inline (page
cache); fsync is done elsewhere (LogManager flush, off the loop).

A replica whose log could not be loaded (``PartitionLog.offline``) keeps its place and
its role from the metadata, but never serves: reads and appends raise
KafkaStorageError (Kafka's KAFKA_STORAGE_ERROR) and its high watermark stays the
checkpointed one. Disk failures of an append (a full disk) surface as
KafkaStorageError naming the partition, never a file path.

Reads verify CRC-32C before any batch leaves the replica (consumers, range reads,
followers): batches appended while this process runs were checked when they were
written, so only what was on disk at load (offsets below the log end at that time) is
checked, each batch on the first read that reaches it; the verified offset ranges are
remembered. A batch that fails is never handed out: a read returns the batches before
it, and a read that starts at it raises CorruptRecordError naming the partition and the
offsets (logged once).
"""

from __future__ import annotations

import logging
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from core.broker.controller.leader_election import (
    can_join_isr,
    is_out_of_sync,
    next_last_caught_up_ms,
)
from core.broker.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from core.broker.replica.delayed import WaitSet
from core.broker.types import PartitionOffsets, TopicPartition
from core.clock import Clock
from core.storage.codec import crc32c
from core.storage.config import LogConfig
from core.storage.errors import (
    CorruptRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from core.storage.file_region import FileRegion
from core.storage.log import AppendInfo, FetchData, PartitionLog

log = logging.getLogger(__name__)

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc (kafka-internals 1.3)
_FRAME = struct.Struct(">qiibI")
_INT32 = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_CRC_FROM = 21  # the CRC covers attributes .. the end of the batch
_LOG_OVERHEAD = 12
#: At most this many disjoint verified offset ranges are remembered (random readers):
#: beyond it the oldest are forgotten, which only costs a second check.
MAX_VERIFIED_RANGES = 1024


@dataclass(slots=True)
class FollowerState:
    """What the leader knows about one follower replica (Kafka's ReplicaState)."""

    log_end_offset: int = 0
    log_start_offset: int = -1  # as its last fetch reported it (-1: not yet known)
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = 0
    last_fetch_ms: int = 0

    def is_caught_up(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> bool:
        return self.log_end_offset >= leader_leo or now_ms - self.last_caught_up_ms <= max_lag_ms


class Partition:
    """A replica of ``tp`` hosted here; leader or follower."""

    def __init__(
        self, tp: TopicPartition, plog: PartitionLog, *, broker_id: int, clock: Clock,
        high_watermark: int = 0,
    ) -> None:
        self.tp = tp
        self.log = plog
        self.broker_id = broker_id
        self._clock = clock
        self.leader_id = -1
        self.leader_epoch = -1
        self.epoch_start_offset = -1  # the LEO when this replica became leader at its epoch
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.followers: dict[int, FollowerState] = {}
        self.controller_epoch = 0
        self.partition_version = 0  # zkVersion of the state this replica last applied
        self.isr_change_in_flight = False
        self.high_watermark = (
            max(0, high_watermark) if plog.offline
            else min(max(high_watermark, plog.log_start_offset), plog.log_end_offset)
        )  # fmt: skip
        # CRC checks of reads: offsets below this were on disk at load (unverified);
        # [starts[i], ends[i]) are the ranges verified since
        self._verify_below = 0 if plog.offline else plog.log_end_offset
        self._verified_starts: list[int] = []
        self._verified_ends: list[int] = []
        self._reported_corrupt: set[int] = set()
        self.data_waiters = WaitSet()  # woken when the HW moves (new data for consumers)
        self.leo_waiters = WaitSet()  # woken on every append (followers read up to LEO)
        self.log_start_waiters = WaitSet()  # woken when a follower reports a new log start

    # --- role -------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def config(self) -> LogConfig:
        return self.log.config

    @property
    def offline(self) -> bool:
        """The log could not be loaded: this replica serves nothing."""
        return self.log.offline

    def check_online(self) -> None:
        """KafkaStorageError if this replica is offline."""
        if self.log.offline:
            raise self.storage_error()

    def storage_error(self) -> KafkaStorageError:
        return KafkaStorageError(
            f"{self.tp[0]}-{self.tp[1]} is offline on broker {self.broker_id}: "
            f"{self.log.offline_reason or 'its log could not be loaded'}"
        )

    def _assign_epoch(self, leader_epoch: int, offset: int) -> None:
        """Record a new leader epoch in memory; its checkpoint file is written off the
        event loop (``core.broker.replica.epoch_writer``, by the replica manager)."""
        self.log.leader_epoch_cache.assign(leader_epoch, offset, flush=False)

    def make_leader(self, *, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...]) -> bool:
        """Become leader for ``leader_epoch``; False if the epoch is not newer. The same
        epoch again (an ISR change, or a re-read of the metadata) only updates the ISR and
        replica set and keeps what is known about the followers."""
        if leader_epoch < self.leader_epoch:
            return False
        now = self._clock.now_ms()
        if self.is_leader and leader_epoch == self.leader_epoch:
            if isr != self.isr:
                log.info("%s-%d: ISR %s -> %s (epoch %d)", *self.tp, self.isr, isr, leader_epoch)
            self.replicas, self.isr = replicas, isr
            self.followers = {r: self.followers.get(r) or FollowerState()
                              for r in replicas if r != self.broker_id}
            self.maybe_increment_high_watermark()
            return True
        was = (self.leader_id, self.leader_epoch, self.isr)
        self.leader_id, self.leader_epoch = self.broker_id, leader_epoch
        self.replicas, self.isr = replicas, isr
        leo = self.log.log_end_offset
        self._assign_epoch(leader_epoch, leo)
        self.epoch_start_offset = leo
        self.followers = {
            r: FollowerState(last_caught_up_ms=now if r in isr else 0)
            for r in replicas if r != self.broker_id
        }
        # a replica's first role (thousands at start) at debug, changes at info
        log.log(logging.DEBUG if was[1] < 0 else logging.INFO,
                "%s-%d: leader now (leader, epoch, isr) %s -> %s", *self.tp, was,
                (self.leader_id, leader_epoch, isr))
        self.maybe_increment_high_watermark()
        return True

    def make_follower(self, *, leader: int, leader_epoch: int, isr: tuple[int, ...],
                      replicas: tuple[int, ...]) -> bool:
        if leader_epoch < self.leader_epoch:
            return False
        if (leader, leader_epoch) != (self.leader_id, self.leader_epoch):
            log.info("%s-%d: follower of %d now (epoch %d -> %d)", *self.tp, leader,
                     self.leader_epoch, leader_epoch)
        self.leader_id, self.leader_epoch = leader, leader_epoch
        self.replicas, self.isr = replicas, isr
        self.followers = {}
        self.data_waiters.notify()
        self.leo_waiters.notify()
        return True

    # --- the leader's view of its followers (kafka-internals 2.1, 2.3) -------------------

    def check_fetch_epoch(self, leader_epoch: int) -> int:
        """0, or the Kafka error code for a follower fetch carrying ``leader_epoch``."""
        if not self.is_leader:
            return NotLeaderOrFollowerError.error_code
        if leader_epoch < self.leader_epoch:
            return FencedLeaderEpochError.error_code
        if leader_epoch > self.leader_epoch:
            return UnknownLeaderEpochError.error_code
        return 0

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) when the follower's log diverged from ours (KIP-320 fetch)."""
        if last_fetched_epoch < 0 or fetch_offset == 0:
            return None
        epoch, end = self.log.leader_epoch_cache.end_offset_for(last_fetched_epoch,
                                                                self.log.log_end_offset)
        if end < fetch_offset or epoch < last_fetched_epoch:
            return epoch, end
        return None

    def update_follower(self, replica_id: int, fetch_offset: int,
                        log_start_offset: int = -1) -> None:
        """A fetch from ``replica_id`` at ``fetch_offset`` proves it holds everything below;
        ``log_start_offset`` is where its log starts (DeleteRecords waits for it)."""
        st = self.followers.get(replica_id)
        if st is None:
            return
        if log_start_offset != st.log_start_offset:
            st.log_start_offset = log_start_offset
            self.log_start_waiters.notify()
        now, leo = self._clock.now_ms(), self.log.log_end_offset
        st.last_caught_up_ms = next_last_caught_up_ms(
            fetch_offset=fetch_offset, leader_leo=leo, prev_fetch_leader_leo=st.last_fetch_leader_leo,
            now_ms=now, prev_fetch_ms=st.last_fetch_ms, last_caught_up_ms=st.last_caught_up_ms)
        st.log_end_offset = fetch_offset
        st.last_fetch_leader_leo, st.last_fetch_ms = leo, now
        if replica_id in self.isr:
            self.maybe_increment_high_watermark()

    def low_watermark(self, is_alive: Callable[[int], bool]) -> int:
        """Kafka's ``lowWatermarkIfLeader``: the lowest log start of this replica and of
        every follower on a live broker (-1 for one that has not reported it yet)."""
        low = self.log.log_start_offset
        for r, st in self.followers.items():
            if st.log_start_offset < low and is_alive(r):
                low = st.log_start_offset
        return low

    def isr_candidate(self, replica_id: int, *, alive: bool) -> bool:
        """Whether ``replica_id`` (not in the ISR) may join it now."""
        st = self.followers.get(replica_id)
        if st is None or replica_id in self.isr or not self.is_leader:
            return False
        entries = self.log.leader_epoch_cache.entries
        epoch_start = next((o for e, o in reversed(entries) if e == self.leader_epoch), 0)
        return can_join_isr(follower_leo=st.log_end_offset, high_watermark=self.high_watermark,
                            leader_epoch_start=epoch_start, alive=alive)

    def out_of_sync_replicas(self, max_lag_ms: int) -> tuple[int, ...]:
        if not self.is_leader:
            return ()
        now, leo = self._clock.now_ms(), self.log.log_end_offset
        # An ISR member that is no longer a replica is out too: a reassignment's last step
        # (new ISR, then new replicas) can race this leader's expansion of the ISR with a
        # replica being removed; kept, it would hold acks=all and the HW forever.
        return tuple(r for r in self.isr if r != self.broker_id and (
            r not in self.followers or
            is_out_of_sync(follower_leo=self.followers[r].log_end_offset, leader_leo=leo,
                           last_caught_up_ms=self.followers[r].last_caught_up_ms,
                           now_ms=now, max_lag_ms=max_lag_ms)))

    # --- follower path ----------------------------------------------------------------

    def append_as_follower(self, data: bytes, *, leader_hw: int, leader_log_start: int) -> None:
        """Append fetched batches as they are; HW = min(leader HW, own LEO)."""
        self.check_online()
        if data:
            try:
                self.log.append_as_follower(data)
            except (OSError, KafkaStorageError) as exc:
                raise self._append_failed(exc) from exc
            self.leo_waiters.notify()
        self.follow_leader_offsets(leader_hw=leader_hw, leader_log_start=leader_log_start)

    def follow_leader_offsets(self, *, leader_hw: int, leader_log_start: int) -> None:
        leo = self.log.log_end_offset
        if 0 <= leader_log_start <= leo:
            self.log.maybe_increment_log_start_offset(leader_log_start)
        new_hw = min(leader_hw, leo)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.data_waiters.notify()

    # --- leader path ------------------------------------------------------------------

    def append_as_leader(self, data: bytearray, *, required_acks: int,
                         flush_inline: bool = True) -> AppendInfo:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {self.tp[0]}-{self.tp[1]}")
        min_isr = self.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"the in-sync replica set of {self.tp[0]}-{self.tp[1]} has {len(self.isr)} member(s), "
                f"below min.insync.replicas={min_isr}"
            )
        self.check_online()
        try:
            info = self.log.append_as_leader(data, leader_epoch=self.leader_epoch,
                                             flush_inline=flush_inline)
        except (OSError, KafkaStorageError) as exc:
            raise self._append_failed(exc) from exc
        self.leo_waiters.notify()
        self.maybe_increment_high_watermark()
        return info

    def _append_failed(self, exc: BaseException) -> KafkaStorageError:
        """A disk failure of an append (ENOSPC, EIO), as KafkaStorageError naming the
        partition only (the storage layer's own text holds file paths)."""
        log.warning("%s-%d: append failed: %s", *self.tp, exc)
        return KafkaStorageError(
            f"cannot append to {self.tp[0]}-{self.tp[1]}: {_os_reason(exc)}"
        )

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR (leader included); moves forward only."""
        if not self.is_leader or self.log.offline:
            return False
        if len(self.isr) < self.config.min_insync_replicas and len(self.replicas) > 1:
            return False
        new_hw = self.log.log_end_offset
        for r in self.isr:
            if r != self.broker_id:
                st = self.followers.get(r)
                new_hw = min(new_hw, st.log_end_offset if st else 0)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.data_waiters.notify()
            return True
        return False

    def read(self, offset: int, max_bytes: int, *, up_to_hw: bool = True,
             max_records: int | None = None) -> FetchData:
        """Whole batches from ``offset``, below the HW (consumers) or the LEO (followers).
        As in Kafka, the valid range ends at the LEO for both: an offset between the HW
        and the LEO (a new leader whose HW has not caught up with its log yet) reads
        nothing, it is not out of range. Batches are handed out as stored; their CRCs
        are verified where they become records (``batch_cache``) or a follower's log."""
        leo = self._readable(offset)
        limit = self.high_watermark if up_to_hw else leo
        if offset >= limit:
            return FetchData(b"", offset, offset)
        with self._read_errors(offset):
            data = self.log.read(offset, max_bytes, max_offset=limit, max_records=max_records)
        if data.data and data.first_offset < self._verify_below:
            return self._verified(data)
        return data

    def read_region(self, offset: int, max_bytes: int) -> FileRegion | None:
        """Whole batches from ``offset`` below the HW as a range of a segment file, to
        be sent with sendfile(2) (a consumer's Kafka Fetch). None when ``read`` must be
        used instead: nothing to read, or the batches were on disk at load and their
        CRCs not checked yet (``read`` checks them, and never serves a corrupt one)."""
        self._readable(offset)
        if offset >= self.high_watermark:
            return None
        with self._read_errors(offset):
            region = self.log.read_region(offset, max_bytes, max_offset=self.high_watermark)
        if region is not None and region.first_offset < self._verify_below and \
                not self._all_verified(region.first_offset, region.high_offset):
            return None  # not all checked yet: ``read`` checks and serves it
        return region

    def _readable(self, offset: int) -> int:
        """The LEO, once ``offset`` is in the valid range [log start, LEO]."""
        self.check_online()
        leo = self.log.log_end_offset
        if offset > leo or offset < self.log.log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.tp[0]}-{self.tp[1]}: "
                f"valid offsets are {self.log.log_start_offset}..{leo}"
            )
        return leo

    @contextmanager
    def _read_errors(self, offset: int) -> Iterator[None]:
        """A read's failures as the errors clients get, naming the partition."""
        try:
            yield
        except CorruptRecordError as exc:
            log.error("%s-%d: corrupt log at offset %d: %s", *self.tp, offset, exc)
            raise CorruptRecordError(
                f"{self.tp[0]}-{self.tp[1]}: the log is corrupt at offset {offset} ({exc.message})"
            ) from exc
        except OSError as exc:
            log.error("%s-%d: read at offset %d failed: %s", *self.tp, offset, exc)
            raise KafkaStorageError(
                f"cannot read {self.tp[0]}-{self.tp[1]} at offset {offset}: {_os_reason(exc)}"
            ) from exc

    def _all_verified(self, first: int, end: int) -> bool:
        """Whether the batches from ``first`` up to ``end`` (or ``_verify_below``) passed
        their CRC check on an earlier read."""
        starts, ends = self._verified_starts, self._verified_ends
        i = bisect_right(starts, first) - 1
        return i >= 0 and ends[i] >= min(end, self._verify_below)

    # --- CRC checks of what was on disk at load ---------------------------------------

    def _verified(self, data: FetchData) -> FetchData:
        """``data`` once every batch in it below ``_verify_below`` passed its CRC check
        (now or on an earlier read); cut before the first that fails, or
        CorruptRecordError when that is the first batch."""
        if self._all_verified(data.first_offset, data.high_offset):
            return data  # all checked before
        starts, ends, limit = self._verified_starts, self._verified_ends, self._verify_below
        buf = data.data
        view = memoryview(buf)
        frame, delta = _FRAME.unpack_from, _INT32.unpack_from
        pos, end, checked_to = 0, len(buf), data.first_offset
        while end - pos >= _LOG_OVERHEAD:
            base, length, _epoch, _magic, crc = frame(buf, pos)
            if base >= limit:
                break
            size = length + _LOG_OVERHEAD
            if pos + size > end:
                break  # reads hand out whole batches: never happens
            last = base + delta(buf, pos + _LAST_OFFSET_DELTA_AT)[0]
            if starts and (j := bisect_right(starts, base) - 1) >= 0 and ends[j] > last:
                pass  # checked by an earlier read
            elif crc32c(view[pos + _CRC_FROM : pos + size] if size > 4096
                        else buf[pos + _CRC_FROM : pos + size]) != crc:
                self._mark_verified(data.first_offset, checked_to)
                self._report_corrupt(base, last)
                if pos == 0:
                    raise CorruptRecordError(
                        f"{self.tp[0]}-{self.tp[1]}: the record batch at offsets {base}..{last} "
                        "is corrupt (CRC-32C mismatch); it is not served"
                    )
                return FetchData(bytes(view[:pos]), data.first_offset, checked_to)
            checked_to = last + 1
            pos += size
        self._mark_verified(data.first_offset, min(checked_to, limit))
        return data

    def _mark_verified(self, start: int, end: int) -> None:
        if end <= start:
            return
        starts, ends = self._verified_starts, self._verified_ends
        i = bisect_left(ends, start)  # the first range ending at or after start
        j = bisect_right(starts, end)  # the ranges starting at or before end
        if i < j:
            start, end = min(start, starts[i]), max(end, ends[j - 1])
        starts[i:j], ends[i:j] = [start], [end]
        if len(starts) > MAX_VERIFIED_RANGES:
            del starts[0], ends[0]

    def _report_corrupt(self, base: int, last: int) -> None:
        if base in self._reported_corrupt:
            return
        self._reported_corrupt.add(base)
        log.error("%s-%d: the record batch at offsets %d..%d fails its CRC-32C check (corrupt "
                  "on disk); it is not served", *self.tp, base, last)

    @property
    def offsets_available(self) -> bool:
        """False while a new leader's HW is below the offset its epoch started at: its HW
        was a follower's, possibly behind what the old leader acknowledged, so answering
        it would show a client the end of the log going back. Kafka answers ListOffsets
        with OFFSET_NOT_AVAILABLE then; the HW catches up at the followers' next fetch."""
        return not self.is_leader or self.high_watermark >= self.epoch_start_offset

    def offsets(self) -> PartitionOffsets:
        self.check_online()
        return PartitionOffsets(
            self.log.log_start_offset, self.high_watermark, self.log.log_end_offset
        )

    def truncate_to(self, offset: int) -> None:
        self.check_online()
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)


def _os_reason(exc: BaseException) -> str:
    """The OS error behind ``exc`` in words (``No space left on device``), else its
    text with any file path left out."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("cannot ") and ": " in text else text
