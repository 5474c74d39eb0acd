"""Every partition log of one broker, across its log directories (Kafka's ``LogManager``).

Startup locks every log dir (``core.storage.log_dir``), reads ``meta.properties`` and
the checkpoints, removes ``-delete`` dirs and opens every ``<topic>-<partition>`` dir.
Without the clean-shutdown marker each log recovers from its checkpointed recovery
point. A corrupt recovery-point checkpoint means "recover everything from offset 0";
a corrupt log-start or cleaner checkpoint falls back to the first segment / a full
cleaning. Nothing is deleted because a checkpoint could not be read. The marker is
removed once every log is open, and written again by ``close``.

Idempotent-producer state: each log gets the broker's ``producer.id.expiration.ms``
(``server_defaults``; Kafka's 1 day without it). ``remove_expired_producers`` expires
producer ids in every log; ``run_retention`` also runs it once every
``producer.id.expiration.check.interval.ms`` (10 min), so the broker's retention task
drives it without a schedule of its own. Each log's producer snapshot at its LEO is
written with the final flush at ``close``, in parallel.

Threading: construction, ``close`` and the maintenance methods (``flush_dirty_logs``,
``run_retention``, ``run_cleaner``, the checkpoint writers) block; the broker
schedules them. The manager guards its own map of logs with a lock, but the logs are
not thread-safe: a caller of ``run_retention`` / ``run_cleaner`` keeps appends to the
affected logs out of the way meanwhile (the broker runs both on the loop thread).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from core.clock import Clock
from core.storage import durability
from core.storage.cleaner import DEDUPE_BUFFER_BYTES, CleanResult, clean, cleanable_ratio
from core.storage.config import (
    PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    PRODUCER_ID_EXPIRATION_MS,
    TRANSIENT_PRODUCER_ID_EXPIRATION_MS,
    LogConfig,
    broker_storage_value,
    validate_topic_name,
)
from core.storage.errors import KafkaStorageError, StorageError
from core.storage.fd_cache import capacity_from_property, descriptor_cache
from core.storage.flusher import flush_due
from core.storage.log import PartitionLog
from core.storage.log_dir import LogDir, TopicPartition, check_meta, partition_dir_name
from core.storage.retention import segments_to_delete

log = logging.getLogger(__name__)

#: the broker property bounding the open .log descriptors (docs/storage.md)
OPEN_FILES_PROPERTY = "log.segment.open.files.max"
_FINAL_FLUSH_THREADS = 8
_SLOT_BYTES = 24  # Kafka's offset map slot: 16-byte MD5 + 8-byte offset
_LOAD_FACTOR = 0.9


class LogManager:
    """The logs of one broker. Build it once per broker; ``close`` it on shutdown.

    ``log_dirs`` is one data dir or the list of ``log.dirs``. ``server_defaults`` are
    the broker's ``log.*`` properties (topic config defaults, plus
    ``log.cleaner.enable``, ``log.cleaner.dedupe.buffer.size``,
    ``producer.id.expiration.ms`` and ``producer.id.expiration.check.interval.ms``;
    InvalidConfigError if one of the last two is not an INT >= 1). ``topic_configs``
    gives topics with overrides their config at load time; others get the defaults
    until ``update_config``. ``broker_id`` / ``cluster_id``, when given, must match any
    existing ``meta.properties`` (KafkaStorageError otherwise).
    """

    def __init__(
        self,
        log_dirs: Path | str | Iterable[Path | str],
        *,
        server_defaults: Mapping[str, str],
        clock: Clock,
        topic_configs: Mapping[str, LogConfig] | None = None,
        broker_id: int | None = None,
        cluster_id: str | None = None,
    ) -> None:
        paths = [log_dirs] if isinstance(log_dirs, str | Path) else list(log_dirs)
        if not paths:
            raise ValueError("at least one log dir is required")
        self._clock = clock
        self._server_defaults = dict(server_defaults)
        self._default_config = LogConfig.from_overrides({}, self._server_defaults)
        self._producer_id_expiration_ms = broker_storage_value(
            PRODUCER_ID_EXPIRATION_MS, self._server_defaults)
        self._transient_expiration_ms = broker_storage_value(
            TRANSIENT_PRODUCER_ID_EXPIRATION_MS, self._server_defaults)
        self._producer_expiry_interval_ms = broker_storage_value(
            PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, self._server_defaults)
        self._last_producer_expiry_ms = clock.now_ms()
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._pending_roll_flush: dict[TopicPartition, int] = {}
        self._dir_of: dict[TopicPartition, LogDir] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._closed = False
        # the process-wide cache of .log descriptors (core.storage.fd_cache)
        descriptor_cache().set_capacity(
            capacity_from_property(self._server_defaults.get(OPEN_FILES_PROPERTY)))
        self.dirs = [LogDir(Path(p)) for p in paths]
        locked: list[LogDir] = []
        try:
            for d in self.dirs:
                d.lock()
                locked.append(d)
            self.broker_id, self.cluster_id = broker_id, cluster_id
            self._load_meta()
            for d in self.dirs:
                self._load_dir(d)
        except BaseException:
            for lg in list(self._logs.values()):
                lg.close()
            for d in locked:
                d.unlock()
            raise

    # --- startup ----------------------------------------------------------------------

    def _load_meta(self) -> None:
        for d in self.dirs:
            props = d.read_meta()
            if props is not None:
                self.broker_id, self.cluster_id = check_meta(
                    props, broker_id=self.broker_id, cluster_id=self.cluster_id, where=d.path
                )
        if self.broker_id is not None:
            self.write_meta_properties(broker_id=self.broker_id, cluster_id=self.cluster_id)

    def _load_dir(self, d: LogDir) -> None:
        clean_shutdown = d.had_clean_shutdown
        recovery_points = d.read_checkpoint(d.recovery_points)
        if recovery_points is None:
            log.warning("recovery points of %s unknown: recovering every log from 0", d.path)
            recovery_points, clean_shutdown = {}, False
        log_starts = d.read_checkpoint(d.log_starts) or {}
        self._cleaner_offsets.update(d.read_checkpoint(d.cleaner_offsets) or {})
        for tp, directory in d.partition_dirs():
            if tp in self._logs:
                raise KafkaStorageError(
                    f"duplicate log directories for {tp[0]}-{tp[1]}: {directory} and "
                    f"{self._logs[tp].dir}"
                )
            self._logs[tp] = PartitionLog.open(
                directory,
                self.config_for(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                clean_shutdown=clean_shutdown,
                clock=self._clock,
                on_roll=self._on_roll,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
                transient_expiration_ms=self._transient_expiration_ms,
            )
            self._dir_of[tp] = d
        log.info(
            "loaded %d logs from %s (%s shutdown)",
            sum(1 for x in self._dir_of.values() if x is d),
            d.path,
            "clean" if clean_shutdown else "unclean",
        )
        d.remove_clean_shutdown_marker()

    def write_meta_properties(self, *, broker_id: int, cluster_id: str | None) -> None:
        """Record the broker and cluster ids in every dir's ``meta.properties``."""
        props = {"version": "0", "broker.id": str(broker_id)}
        if cluster_id:
            props["cluster.id"] = cluster_id
        with self._lock:
            self.broker_id, self.cluster_id = broker_id, cluster_id or self.cluster_id
            for d in self.dirs:
                if d.read_meta() != props:
                    d.write_meta(props)

    # --- the logs ---------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        """The config a log of ``topic`` runs with (its overrides, else the defaults)."""
        return self._topic_configs.get(topic, self._default_config)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, PartitionLog]:
        """A snapshot of every hosted log."""
        with self._lock:
            return dict(self._logs)

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None
    ) -> PartitionLog:
        """The log of ``topic``-``partition``, created empty in the least-loaded dir if
        absent. A given ``config`` becomes the topic's config."""
        validate_topic_name(topic)
        if partition < 0:
            raise ValueError(f"partition {partition} is negative")
        tp = (topic, partition)
        with self._lock:
            if config is not None:
                self._topic_configs[topic] = config
            existing = self._logs.get(tp)
            if existing is not None:
                # a log loaded at start has the defaults until its topic's config is known
                if config is not None and existing.config != config:
                    existing.update_config(config)
                return existing
            d = self.dirs[0] if len(self.dirs) == 1 else min(  # counting is O(logs)
                self.dirs, key=lambda x: sum(1 for y in self._dir_of.values() if y is x))
            directory = d.path / partition_dir_name(topic, partition)
            directory.mkdir(exist_ok=True)
            plog = PartitionLog.open(
                directory, self.config_for(topic), clock=self._clock, on_roll=self._on_roll,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
                transient_expiration_ms=self._transient_expiration_ms,
            )  # fmt: skip
            self._logs[tp], self._dir_of[tp] = plog, d
            log.info("created log for %s-%d in %s", topic, partition, d.path)
            return plog

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Make ``config`` the config of ``topic`` and of its hosted logs."""
        with self._lock:
            self._topic_configs[topic] = config
            for (t, _p), plog in self._logs.items():
                if t == topic:
                    plog.update_config(config)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close and remove the log (``<dir>.<uuid>-delete``, then gone); False if absent."""
        tp = (topic, partition)
        with self._lock:
            plog = self._logs.pop(tp, None)
            if plog is None:
                return False
            d = self._dir_of.pop(tp)
            self._cleaner_offsets.pop(tp, None)
            plog.close(snapshot=False)
            d.remove_partition_dir(plog.dir)
            self._write_dir_checkpoints(d)
        log.info("deleted log %s-%d", topic, partition)
        return True

    # --- checkpoints ------------------------------------------------------------------

    def checkpoint_recovery_points(self) -> None:
        with self._lock:
            for d in self.dirs:
                d.recovery_points.write(self._recovery_points_in(d))

    def checkpoint_log_start_offsets(self) -> None:
        with self._lock:
            for d in self.dirs:
                d.log_starts.write(self._log_starts_in(d))

    def checkpoint_high_watermarks(self, hws: Mapping[TopicPartition, int]) -> None:
        """Write ``replication-offset-checkpoint`` for the hosted partitions in ``hws``."""
        with self._lock:
            for d in self.dirs:
                hosted = {tp for tp, _ in self._logs_in(d)}
                d.high_watermarks.write({tp: hw for tp, hw in hws.items() if tuple(tp) in hosted})

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """The checkpointed high watermarks of every dir (a corrupt file reads as empty)."""
        out: dict[TopicPartition, int] = {}
        for d in self.dirs:
            out.update(d.read_checkpoint(d.high_watermarks) or {})
        return out

    @property
    def cleaner_checkpoint(self) -> dict[TopicPartition, int]:
        """First dirty offset per compacted partition, as in ``cleaner-offset-checkpoint``."""
        with self._lock:
            return dict(self._cleaner_offsets)

    def _write_cleaner_checkpoint(self, d: LogDir) -> None:
        offsets = {tp: o for tp, o in self._cleaner_offsets.items() if self._dir_of.get(tp) is d}
        d.cleaner_offsets.write(offsets)

    def _write_dir_checkpoints(self, d: LogDir) -> None:
        d.recovery_points.write(self._recovery_points_in(d))
        d.log_starts.write(self._log_starts_in(d))
        self._write_cleaner_checkpoint(d)

    def _recovery_points_in(self, d: LogDir) -> dict[TopicPartition, int]:
        return {tp: lg.recovery_point for tp, lg in self._logs_in(d)}

    def _log_starts_in(self, d: LogDir) -> dict[TopicPartition, int]:
        """Log start offsets above their first segment (Kafka writes only those)."""
        return {
            tp: lg.log_start_offset
            for tp, lg in self._logs_in(d)
            if lg.log_start_offset > lg.segments[0].base_offset
        }

    def _logs_in(self, d: LogDir) -> list[tuple[TopicPartition, PartitionLog]]:
        return [(tp, lg) for tp, lg in self._logs.items() if self._dir_of[tp] is d]

    # --- maintenance ------------------------------------------------------------------

    def _on_roll(self, plog: PartitionLog, new_base_offset: int) -> None:
        # Called inside an append on the event loop: record the work, and let the next
        # flush round (off the loop) fsync the rolled segment, as Kafka schedules it.
        key = (plog.topic, plog.partition)
        self._pending_roll_flush[key] = max(new_base_offset, self._pending_roll_flush.get(key, 0))

    def flush_dirty_logs(self, now_ms: int) -> list[TopicPartition]:
        """fsync every log whose ``flush.messages`` / ``flush.ms`` says so, and the
        segments rolled since the last round (which advances the recovery point)."""
        flushed = []
        pending, self._pending_roll_flush = self._pending_roll_flush, {}
        for tp, plog in self.all_logs().items():
            if flush_due(plog, now_ms):
                if _isolated(tp, "flush", plog.flush):
                    flushed.append(tp)
            elif tp in pending and _isolated(tp, "flush", plog.flush, pending[tp]):
                flushed.append(tp)
        return flushed

    def run_retention(
        self, now_ms: int, high_watermarks: Mapping[TopicPartition, int] | None = None
    ) -> dict[TopicPartition, int]:
        """Delete expired segments (``core.storage.retention``); segments deleted per log.

        With ``high_watermarks`` None every log's HW is taken to be its LEO; with a
        mapping, logs missing from it are left alone (their HW is unknown).
        """
        self.maybe_remove_expired_producers(now_ms)
        deleted: dict[TopicPartition, int] = {}
        for tp, plog in self.all_logs().items():
            hw = _high_watermark(tp, plog, high_watermarks)
            if hw is None:
                continue
            doomed = segments_to_delete(
                plog.segments,
                config=plog.config,
                high_watermark=hw,
                log_start_offset=plog.log_start_offset,
                log_end_offset=plog.log_end_offset,
                now_ms=now_ms,
            )
            reason = f"retention (high watermark {hw})"
            if doomed and _isolated(
                tp, "retention", partial(plog.delete_segments, doomed, reason=reason)
            ):
                deleted[tp] = len(doomed)
        return deleted

    def remove_expired_producers(self, now_ms: int) -> dict[TopicPartition, int]:
        """Expire the producer ids idle for ``producer.id.expiration.ms`` in every log
        (``PartitionLog.remove_expired_producers``); how many each log dropped (logs that
        dropped none are left out). Runs on the thread that appends (the loop)."""
        self._last_producer_expiry_ms = now_ms
        removed: dict[TopicPartition, int] = {}
        for tp, plog in self.all_logs().items():
            try:
                gone = plog.remove_expired_producers(now_ms)
            except (OSError, StorageError, ValueError):
                log.exception("producer expiry of %s-%d failed", tp[0], tp[1])
                continue
            if gone:
                removed[tp] = len(gone)
        return removed

    def maybe_remove_expired_producers(self, now_ms: int) -> dict[TopicPartition, int] | None:
        """``remove_expired_producers`` if ``producer.id.expiration.check.interval.ms``
        has passed since the last round (or since the manager started), else None."""
        if now_ms - self._last_producer_expiry_ms < self._producer_expiry_interval_ms:
            return None
        return self.remove_expired_producers(now_ms)

    def run_cleaner(
        self, now_ms: int, high_watermarks: Mapping[TopicPartition, int] | None = None
    ) -> tuple[TopicPartition, CleanResult] | None:
        """Compact the dirtiest eligible log once and checkpoint its new first dirty
        offset; None if no log needed it. HW as in ``run_retention``."""
        if self._server_defaults.get("log.cleaner.enable", "true").strip().lower() == "false":
            return None
        best: tuple[float, TopicPartition, int, int] | None = None
        for tp, plog in self.all_logs().items():
            hw = _high_watermark(tp, plog, high_watermarks)
            if hw is None or not plog.config.compact or tp in self._uncleanable:
                continue
            first_dirty = self._first_dirty(tp, plog)
            ratio = cleanable_ratio(plog, first_dirty, now_ms=now_ms, high_watermark=hw)
            if ratio is not None and (best is None or ratio > best[0]):
                best = (ratio, tp, first_dirty, hw)
        if best is None:
            return None
        ratio, tp, first_dirty, hw = best
        log.info(
            "cleaning %s-%d (dirty ratio %.2f) from offset %d", tp[0], tp[1], ratio, first_dirty
        )
        try:
            result = clean(
                self._logs[tp],
                first_dirty=first_dirty,
                now_ms=now_ms,
                high_watermark=hw,
                max_keys=self._cleaner_max_keys(),
            )
        except (OSError, StorageError):
            # As Kafka does: stop cleaning this partition until the broker restarts.
            log.exception("cleaning %s-%d failed; it is marked uncleanable", tp[0], tp[1])
            self._uncleanable.add(tp)
            return None
        with self._lock:
            if tp in self._logs:
                self._cleaner_offsets[tp] = result.first_dirty_after
                self._write_cleaner_checkpoint(self._dir_of[tp])
        return tp, result

    def _first_dirty(self, tp: TopicPartition, plog: PartitionLog) -> int:
        """The checkpointed first dirty offset, reset to the log start when it is outside
        the log (Kafka's ``cleanableOffsets``)."""
        checkpointed = self._cleaner_offsets.get(tp, plog.log_start_offset)
        if not plog.log_start_offset <= checkpointed <= plog.log_end_offset:
            return plog.log_start_offset
        return checkpointed

    def _cleaner_max_keys(self) -> int:
        raw = self._server_defaults.get("log.cleaner.dedupe.buffer.size")
        size = int(raw) if raw and raw.strip().isdigit() else DEDUPE_BUFFER_BYTES
        return max(1, int(size * _LOAD_FACTOR) // _SLOT_BYTES)

    # --- shutdown ---------------------------------------------------------------------

    def close(self) -> None:
        """Flush and close every log, write the checkpoints, mark each dir cleanly shut
        down and release the locks. A dir whose logs failed to close gets no marker, so
        the next start recovers it. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                for d in self.dirs:
                    self._close_dir(d)
            finally:
                for d in self.dirs:
                    d.unlock()

    def _close_dir(self, d: LogDir) -> None:
        entries = self._logs_in(d)
        # Every log flushed and its producer snapshot at the LEO written (close then finds
        # it and writes nothing), on several threads (shutdown only: nothing appends any
        # more, the descriptor cache is thread-safe), their fsyncs deferred to one
        # syncfs of the file system: one fsync per file took 38 s to stop 10,000 logs.
        defer = durability.can_defer()

        def final_flush(entry: tuple[TopicPartition, PartitionLog]) -> bool:
            tp, plog = entry
            with durability.deferred(defer):
                return (_isolated(tp, "final flush", plog.flush)
                        and _isolated(tp, "producer snapshot", plog.take_producer_snapshot))

        with ThreadPoolExecutor(_FINAL_FLUSH_THREADS, thread_name_prefix="franz-close") as pool:
            ok = all(list(pool.map(final_flush, entries)))
        if defer and entries and not durability.sync_filesystem(d.path):
            ok = False
        try:
            self._write_dir_checkpoints(d)
        except (OSError, StorageError):
            log.exception("writing the checkpoints of %s failed", d.path)
            ok = False
        closed = [_isolated(tp, "close", lg.close) for tp, lg in entries]
        if ok and all(closed):
            d.write_clean_shutdown_marker()
        else:
            log.warning("%s was not shut down cleanly; it will be recovered at next start", d.path)


def _high_watermark(
    tp: TopicPartition, plog: PartitionLog, hws: Mapping[TopicPartition, int] | None
) -> int | None:
    """The HW to respect: the given one, the LEO when none were given, None if unknown."""
    return plog.log_end_offset if hws is None else hws.get(tp)


def _isolated(tp: TopicPartition, what: str, fn: Callable[..., object], *args: object) -> bool:
    """Run one log's share of a maintenance pass; a failure is logged and does not stop
    the other logs (the broker's next pass retries)."""
    try:
        fn(*args)
    except (OSError, StorageError, ValueError):
        log.exception("%s of %s-%d failed", what, tp[0], tp[1])
        return False
    return True
