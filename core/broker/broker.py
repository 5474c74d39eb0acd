"""The broker: one object per broker process, the facade ``api/`` talks to.

It wires the log manager, the metadata store and cache, the controller, the replica
manager and the consumer (group) manager, applies metadata changes to local replicas,
and runs the periodic maintenance (flush, retention, compaction, checkpoints, idle
consumer expiry) off the event loop. Standalone is the one-broker case of the same code:
only the metadata store backend differs. See ``docs/broker-api.md`` for the contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from core.broker.admin.topic_stats import BrokerTopicStats
from core.broker.config import BROKER_PROPERTIES, BrokerConfig
from core.broker.controller.controller import Controller
from core.broker.errors import (
    TopicAlreadyExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from core.broker.group.hashing import coordinator_partition
from core.broker.metadata.cache import MetadataCache, TopicMetadata
from core.broker.metadata.store import (
    BrokerIdInUseError,
    BrokerRegistration,
    EventKind,
    MetadataEvent,
    MetadataStore,
)
from core.broker.produce.producer import produce_to_topic
from core.broker.replica.batch_cache import fetched_records
from core.broker.replica.delayed import DataWatch
from core.broker.replica.manager import ReplicaManager
from core.broker.replication import ClusterClient, ReplicationService
from core.broker.types import (
    BrokerInfo,
    FetchResult,
    PartitionInfo,
    PartitionOffsets,
    ProduceRecord,
    RecordResult,
    TopicInfo,
    TopicPartition,
)
from core.clock import SYSTEM_CLOCK, Clock
from core.storage.blocking import run_blocking
from core.storage.config import (
    TOPIC_CONFIG_DEFS,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    LogConfig,
    describe_configs,
    is_internal_topic,
    server_synonyms,
    validate_topic_configs,
)
from core.storage.log_manager import LogManager
from core.storage.records import Record

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


class Broker:
    """Lifecycle: ``await start()`` once, serve, ``await stop()`` once."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, *, clock: Clock = SYSTEM_CLOCK,
                 cluster_client: ClusterClient | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.store = store
        self.clock = clock
        self.cluster_id = ""
        self.cache = MetadataCache()
        self.controller = Controller(self.broker_id, store,
                                     delete_topic_enable=config["delete.topic.enable"])
        self.controller.auto_rebalance = config["auto.leader.rebalance.enable"]
        self.controller.imbalance_check_interval_s = config["leader.imbalance.check.interval.seconds"]
        self.controller.imbalance_pct = config["leader.imbalance.per.broker.percentage"]
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.consumers = None  # type: ignore[assignment]  # ConsumerManager, set in start()
        self._tasks: list[asyncio.Task[None]] = []
        self._sync_locks: dict[str, asyncio.Lock] = {}
        self._create_lock = asyncio.Lock()
        self._offsets_topic_lock = asyncio.Lock()
        self.replication = ReplicationService(self, cluster_client)
        self.topic_stats = BrokerTopicStats()  # client traffic per topic (api.metrics)

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        data_dir = self.config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log_manager = await run_blocking(
            LogManager, data_dir, server_defaults=dict(self.config.log_defaults),
            clock=self.clock, broker_id=self.broker_id)
        await self.store.start()
        prior_cluster = self.log_manager.cluster_id  # from meta.properties, if any
        self.cluster_id = await self.store.cluster_id()
        self.log_manager.write_meta_properties(broker_id=self.broker_id, cluster_id=self.cluster_id)
        hws = self.log_manager.read_high_watermarks()
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, self.clock, hws)
        self.replication.attach()
        self.store.subscribe(self._on_metadata_event)
        try:
            await self.store.register_broker(BrokerRegistration(
                self.broker_id, self.config["advertised.host"] or self.config["host"],
                self.config["port"], timestamp_ms=self.clock.now_ms()))
        except BrokerIdInUseError as exc:  # fail fast: never two brokers with one id
            log.error("cannot start: %s", exc)
            await self.store.close()
            await run_blocking(self.log_manager.close)
            raise
        await self.controller.maybe_elect()
        await self._refresh_brokers()
        for name in await self.store.topic_names():
            await self._sync_topic(name)
        if prior_cluster == self.cluster_id:  # never on a data dir of another cluster
            self._rm.delete_stray_logs({n: m.assignment.partitions
                                        for n, m in self.cache.topics.items()})
        await self.replication.start()
        await self._ensure_offsets_topic()
        from core.broker.consumer.manager import ConsumerManager  # noqa: PLC0415  (cycle-free wiring)
        from core.broker.group.backend import BrokerGroupBackend  # noqa: PLC0415

        self.consumers = ConsumerManager(BrokerGroupBackend(self), config=self.config, clock=self.clock)
        await self.consumers.start()
        self._start_maintenance()
        log.info("broker %d started (cluster %s, data dir %s)", self.broker_id, self.cluster_id, data_dir)

    async def stop(self) -> None:
        await self.replication.stop()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        if self.consumers is not None:
            await self.consumers.stop()
        with contextlib.suppress(Exception):
            await self.store.unregister_broker(self.broker_id)
        if self.log_manager is not None:
            lm, rm = self.log_manager, self.replica_manager
            if rm is not None:
                lm.checkpoint_high_watermarks(rm.high_watermarks())
            await run_blocking(lm.close)
        await self.store.close()

    # --- metadata changes -> local replicas ---------------------------------------------

    def _on_metadata_event(self, event: MetadataEvent) -> None:
        self.controller.on_event(event)
        if event.kind is EventKind.BROKERS_CHANGED:
            asyncio.ensure_future(self._refresh_brokers_and_offsets_topic())
        elif event.kind is EventKind.SESSION_EXPIRED and self.replica_manager is not None:
            self.replica_manager.fence_leaders()  # no split brain until re-synced
        elif event.kind is EventKind.SESSION_RESTORED:
            asyncio.ensure_future(self._resync_all())
        elif event.topic is not None:
            asyncio.ensure_future(self._sync_topic(event.topic))

    async def _resync_all(self) -> None:
        """After a new ZooKeeper session: every topic again (gives back leadership)."""
        await self._refresh_brokers()
        for name in await self.store.topic_names():
            await self._sync_topic(name)

    async def _refresh_brokers_and_offsets_topic(self) -> None:
        await self._refresh_brokers()
        await self._ensure_offsets_topic()

    async def _refresh_brokers(self) -> None:
        regs = await self.store.live_brokers()
        self.cache.set_brokers({r.broker_id: r for r in regs})

    async def _sync_topic(self, name: str) -> TopicMetadata | None:
        """Bring the cache and the local replicas of ``name`` in line with the store."""
        lock = self._sync_locks.setdefault(name, asyncio.Lock())
        async with lock:
            rm = self._rm
            assignment = await self.store.get_topic(name)
            if assignment is None:
                self.cache.remove_topic(name)
                for tp in [tp for tp in rm.partitions if tp.topic == name]:
                    rm.stop_replica(tp, delete=True)
                return None
            configs = await self.store.get_topic_configs(name)
            states = await self.store.get_partition_states(name)
            log_config = LogConfig.from_overrides(configs, self.config.log_defaults)
            meta = TopicMetadata(assignment, states, configs, log_config)
            rm.update_config(name, log_config)
            for p, replicas in assignment.partitions.items():
                state = states.get(p)
                if state is not None:
                    rm.apply_partition_state(TopicPartition(name, p), state, replicas, log_config)
            self.cache.put_topic(name, meta)
            return meta

    @property
    def _rm(self) -> ReplicaManager:
        assert self.replica_manager is not None, "broker not started"
        return self.replica_manager

    async def _ensure_offsets_topic(self) -> None:
        """The active controller creates ``__consumer_offsets``. In a cluster it waits until
        ``offsets.topic.replication.factor`` brokers are alive (Kafka since 0.11: groups
        answer COORDINATOR_NOT_AVAILABLE meanwhile), so the first broker to start does not
        pin the topic to RF=1 on itself; a cluster of one (``franz serve``) caps RF at 1."""
        if self.cache.topic(OFFSETS_TOPIC) is not None or not self.controller.is_active:
            return
        wanted = self.config["offsets.topic.replication.factor"]
        live = max(1, len(self.cache.brokers))
        if self.config["zookeeper.connect"] and live < wanted:
            log.info("__consumer_offsets waits for %d live brokers (%d now)", wanted, live)
            return
        async with self._offsets_topic_lock:
            if self.cache.topic(OFFSETS_TOPIC) is not None:
                return
            with contextlib.suppress(TopicAlreadyExistsError):  # a race with another broker
                await self.create_topic(
                    OFFSETS_TOPIC, partitions=self.config["offsets.topic.num.partitions"],
                    replication_factor=min(wanted, live),
                    configs={"cleanup.policy": "compact", "compression.type": "producer",
                             "segment.bytes": str(self.config["offsets.topic.segment.bytes"])},
                    _internal=True)

    def coordinator_address(self, group: str) -> tuple[str, int] | None:
        """Host and port of the broker coordinating ``group`` (the leader of its
        ``__consumer_offsets`` partition) when that is another live broker; None when it
        is this broker, or unknown (this broker then answers, e.g. NOT_COORDINATOR)."""
        meta = self.cache.topic(OFFSETS_TOPIC)
        if meta is None:
            return None
        state = meta.states.get(coordinator_partition(group, meta.num_partitions))
        if state is None or state.leader < 0 or state.leader == self.broker_id:
            return None
        return self.replication.address_of(state.leader)

    # --- topics -------------------------------------------------------------------------

    async def list_topics(self) -> list[str]:
        return sorted(self.cache.topics)

    def topic_metadata(self, name: str) -> TopicMetadata:
        meta = self.cache.topic(name)
        if meta is None:
            raise UnknownTopicError(f"Topic '{name}' not found.")
        return meta

    async def describe_topic(self, name: str) -> TopicInfo:
        meta = self.topic_metadata(name)
        parts = []
        for p in sorted(meta.assignment.partitions):
            st = meta.states.get(p)
            parts.append(PartitionInfo(
                p, st.leader if st else -1, st.leader_epoch if st else -1,
                tuple(meta.assignment.partitions[p]), tuple(st.isr) if st else ()))
        return TopicInfo(name, meta.assignment.topic_id, is_internal_topic(name), tuple(parts),
                         dict(meta.configs))

    async def create_topic(
        self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None, validate_only: bool = False, _internal: bool = False,
    ) -> TopicInfo:
        if is_internal_topic(name) and not _internal:
            from core.storage.errors import InvalidTopicError  # noqa: PLC0415

            raise InvalidTopicError(f"Topic name '{name}' is reserved for internal use")
        async with self._create_lock:
            assignment = await self.controller.create_topic(
                name, partitions=partitions or self.config["num.partitions"],
                replication_factor=replication_factor or self.config["default.replication.factor"],
                configs=configs, validate_only=validate_only)
            if validate_only:
                return TopicInfo(name, assignment.topic_id, is_internal_topic(name), tuple(
                    PartitionInfo(p, r[0], 0, tuple(r), tuple(r))
                    for p, r in sorted(assignment.partitions.items())), dict(configs or {}))
            await self._sync_topic(name)
            if self.consumers is not None:
                self.consumers.on_topics_changed()
        return await self.describe_topic(name)

    async def delete_topic(self, name: str) -> None:
        self.topic_metadata(name)
        await self.controller.delete_topic(name)
        await self._sync_topic(name)
        if self.consumers is not None:
            self.consumers.on_topics_changed()

    async def create_partitions(self, name: str, total: int) -> TopicInfo:
        await self.controller.create_partitions(name, total)
        await self._sync_topic(name)
        if self.consumers is not None:
            self.consumers.on_topics_changed()
        return await self.describe_topic(name)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides (validated) and apply them live."""
        await self.controller.set_topic_configs(name, configs)
        await self._sync_topic(name)

    async def list_brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(r.broker_id, r.host, r.port, r.rack)
                for r in sorted(self.cache.brokers.values(), key=lambda r: r.broker_id)]

    # --- admin additions for the v3 API ---------------------------------------------

    async def controller_id(self) -> int | None:
        """The broker id of the active controller, None while there is none (v3 cluster)."""
        return await self.store.controller_id()

    async def describe_topic_configs(self, name: str) -> list[ConfigEntry]:
        """Every topic-level key of ``name`` with its effective value, source and
        synonyms, sorted by name (v3 topic configs); UnknownTopicError."""
        meta = self.topic_metadata(name)
        return describe_configs(meta.configs, self.config.log_defaults)

    async def alter_topic_configs(
        self, name: str, *, set_values: Mapping[str, str] | None = None,
        reset: Iterable[str] = (), validate_only: bool = False,
    ) -> dict[str, str]:
        """Set some overrides and drop others (back to the broker default) in one
        validated step, applied live like ``set_topic_configs``; returns the new
        overrides. InvalidConfigError names a bad key or value; nothing changes then."""
        async with self._create_lock:  # read-modify-write of the overrides, serialized
            drop = set(reset)
            current = self.topic_metadata(name).configs
            overrides = {k: v for k, v in current.items() if k not in drop}
            overrides.update(set_values or {})
            if validate_only:
                return validate_topic_configs(overrides)
            await self.set_topic_configs(name, overrides)
            return dict(self.topic_metadata(name).configs)

    async def describe_broker_configs(self) -> list[ConfigEntry]:
        """This broker's properties, sorted by name (v3 broker configs; read-only: franz
        has no dynamic broker configs)."""
        return _broker_config_entries(self.config)

    def _partition_of(self, topic: str, partition: int) -> TopicPartition:
        meta = self.topic_metadata(topic)
        if partition not in meta.assignment.partitions:
            raise UnknownPartitionError(f"Partition {partition} of topic '{topic}' not found.")
        return TopicPartition(topic, partition)

    async def partition_offsets(self, topic: str, partition: int) -> PartitionOffsets:
        tp = self._partition_of(topic, partition)
        return await self.replication.partition_offsets(tp)

    # --- data ---------------------------------------------------------------------------

    async def _topic_for_produce(self, topic: str) -> TopicMetadata:
        if is_internal_topic(topic):  # the coordinator writes there through the replica manager
            from core.storage.errors import InvalidTopicError  # noqa: PLC0415

            raise InvalidTopicError(f"Cannot append to internal topic {topic}")
        meta = self.cache.topic(topic)
        if meta is not None:
            return meta
        if not self.config["auto.create.topics.enable"] or is_internal_topic(topic):
            raise UnknownTopicError(f"Topic '{topic}' not found.")
        from core.broker.errors import TopicAlreadyExistsError  # noqa: PLC0415

        with contextlib.suppress(TopicAlreadyExistsError):
            await self.create_topic(topic)
        return self.topic_metadata(topic)

    async def produce(
        self, topic: str, records: Sequence[ProduceRecord], *, partition: int | None = None,
        acks: int = 1, timeout_ms: int | None = None,
    ) -> Sequence[RecordResult]:
        meta = await self._topic_for_produce(topic)
        timeout = self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms
        return await produce_to_topic(
            self._append, topic, meta, records, default_partition=partition, acks=acks,
            timeout_ms=timeout, now_ms=self.clock.now_ms())

    async def _append(self, tp: TopicPartition, data: bytearray, acks: int, timeout_ms: int):  # noqa: ANN202
        info = await self.replication.append(tp, data, acks, timeout_ms)  # local or forwarded
        self.topic_stats.record_append(tp.topic, records=info.num_records, size=len(data))
        return info

    async def fetch_raw(self, topic: str, partition: int, offset: int, *, max_bytes: int,
                        max_wait_ms: int = 0):  # noqa: ANN201
        """Whole batches as bytes (for followers, range reads and the JSON fast path)."""
        tp = self._partition_of(topic, partition)
        data, p = await self.replication.fetch_raw(tp, offset, max_bytes=max_bytes,
                                                   max_wait_ms=max_wait_ms)
        self.topic_stats.record_fetch(topic, data, offset=offset, high_watermark=p.high_watermark)
        return data, p

    async def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int,
                    max_wait_ms: int = 0, min_bytes: int = 1, decode: bool = True) -> FetchResult:
        """Records from ``offset`` below the HW. ``decode=False``: the result's records
        list may stay empty, its ``chunks`` holding them (``FetchedRecords``)."""
        data, p = await self.fetch_raw(topic, partition, offset, max_bytes=max_bytes,
                                       max_wait_ms=max_wait_ms)
        hw = p.high_watermark
        records: list[Record] = []
        next_offset = offset
        if data.data:
            fetched = records = fetched_records(topic, partition, data.data, min_offset=offset,
                                                max_offset=hw, decode=decode)
            next_offset = fetched.next_offset or offset
        if data.data and next_offset == offset:  # compacted gap: skip past the batches read
            next_offset = max(offset, min(data.high_offset, hw))
        return FetchResult(topic, partition, hw, p.log.log_start_offset, records, next_offset)

    def data_watch(self, topic: str, partition: int) -> DataWatch | None:
        """What a reader about to wait on ``topic``-``partition`` parks on, when this
        broker leads it; None otherwise (reads of it long-poll the leader)."""
        rm = self.replica_manager
        p = rm.partitions.get(TopicPartition(topic, partition)) if rm is not None else None
        if p is None or not p.is_leader:
            return None
        return DataWatch(p.data_waiters, p.high_watermark)

    async def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        tp = self._partition_of(topic, partition)
        p = self._rm.leader_partition(tp)
        if timestamp_ms == -1:
            return p.high_watermark
        if timestamp_ms == -2:
            return p.log.log_start_offset
        found = await run_blocking(p.log.offset_for_timestamp, timestamp_ms)
        if found is None or found[0] >= p.high_watermark:
            return None
        return found[0]

    # --- maintenance --------------------------------------------------------------------

    def _start_maintenance(self) -> None:
        c = self.config
        lm = self.log_manager
        assert lm is not None
        rm = self._rm
        jobs: list[tuple[int, Callable[[], Awaitable[object]]]] = [
            (c["log.flush.scheduler.interval.ms"], lambda: run_blocking(lm.flush_dirty_logs, self.clock.now_ms())),
            # Retention and compaction change a log's segment list, which appends also use:
            # they run on the loop thread (retention is renames and unlinks; compaction
            # touches compacted topics only) rather than racing appends from a worker.
            (c["log.retention.check.interval.ms"],
             lambda: _inline(lm.run_retention, self.clock.now_ms(), rm.high_watermarks())),
            (c["replica.high.watermark.checkpoint.interval.ms"],
             lambda: run_blocking(lm.checkpoint_high_watermarks, rm.high_watermarks())),
            (c["log.flush.offset.checkpoint.interval.ms"],
             lambda: run_blocking(lm.checkpoint_recovery_points)),
            (c["log.flush.start.offset.checkpoint.interval.ms"],
             lambda: run_blocking(lm.checkpoint_log_start_offsets)),
        ]
        if c["zookeeper.connect"]:  # a new controller, or brokers that came while it waited
            jobs.append((1000, self._ensure_offsets_topic))
        if c["log.cleaner.enable"]:
            jobs.append((c["log.cleaner.backoff.ms"],
                         lambda: _inline(lm.run_cleaner, self.clock.now_ms(), rm.high_watermarks())))
        for interval, job in jobs:
            self._tasks.append(asyncio.create_task(self._every(interval, job)))

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:  # a failed round must not stop maintenance
                log.exception("maintenance job failed")


async def _inline(fn: Callable[..., object], *args: object) -> object:
    return fn(*args)


_PROPERTY_TYPES = {bool: ConfigType.BOOLEAN, int: ConfigType.INT, str: ConfigType.STRING}


def _broker_entry(name: str, value: str | None, default: str | None, *, set_here: bool,
                  type_: ConfigType, doc: str) -> ConfigEntry:
    source = ConfigSource.STATIC_BROKER_CONFIG if set_here else ConfigSource.DEFAULT_CONFIG
    syns = [ConfigSynonym(name, value, source)] if set_here else []
    syns.append(ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG))
    return ConfigEntry(name, value, source, not set_here, True, False, tuple(syns), type_, doc)


def _broker_config_entries(config: BrokerConfig) -> list[ConfigEntry]:
    """The broker property table, then the log properties that default topic keys
    (``log.retention.hours``, ``message.max.bytes``, ...), then any other log property
    set; STATIC_BROKER_CONFIG when set (or, for the table, differing from the default)."""
    def text(v: object) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    entries: dict[str, ConfigEntry] = {}
    for prop in BROKER_PROPERTIES:
        value = config[prop.name]
        entries[prop.name] = _broker_entry(
            prop.name, text(value), text(prop.default), set_here=value != prop.default,
            type_=_PROPERTY_TYPES.get(prop.type, ConfigType.STRING), doc=prop.doc)
    log_defaults = config.log_defaults
    for key in TOPIC_CONFIG_DEFS:
        for syn in server_synonyms(key.name):
            raw = log_defaults.get(syn.name)
            entries.setdefault(syn.name, _broker_entry(
                syn.name, raw if raw is not None else syn.default, syn.default,
                set_here=raw is not None, type_=key.type,
                doc=f"Broker default of the topic config {key.name}."))
    for name, raw in log_defaults.items():
        entries.setdefault(name, _broker_entry(name, raw, None, set_here=True,
                                               type_=ConfigType.STRING, doc="Log property."))
    return [entries[name] for name in sorted(entries)]
