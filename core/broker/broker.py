"""The broker facade: the one object ``api/`` talks to, one per broker process.

It is assembled from parts that never see it (``core.broker.assembly`` builds them
through their constructors) and delegates every call to the part that owns it:

- data: ``produce`` and ``fetch`` -> ``cluster.router.Router`` (serve locally or
  forward to the leader) -> ``replica.manager.ReplicaManager`` -> ``Partition`` ->
  the log (``core.storage``);
- topics and configs -> ``admin.topic_admin.TopicAdmin`` -> ``controller.Controller``;
- consumer instances and groups -> ``consumer.router.GroupRouter`` (``groups``): the
  group's coordinator, this broker's ``consumer.manager.ConsumerManager``
  (``consumers``) or another broker's over the internal API;
- the Schema Registry -> ``schemas.router.SchemaRegistryRouter`` (``schemas``): the
  registry at the leader of ``_schemas-0``, here or over the internal API;
- calls of the internal API (``local_*``, ``replica_fetch``, ``serve_group_call``) ->
  the replica manager, the consumer manager and the controller, never forwarded again.

It also owns the lifecycle (``start`` / ``stop``, in Kafka's order), the reaction to
metadata events, and the periodic maintenance (flush, retention, compaction,
checkpoints) off the event loop. Standalone is the one-broker case of the same code:
only the metadata store backend differs. See ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.broker.admin.broker_config import BrokerConfig, broker_config_entries
from core.broker.admin.topic_admin import TopicAdmin
from core.broker.cluster.router import Router
from core.broker.cluster.topic_stats import BrokerTopicStats
from core.broker.consumer.manager import ConsumerManager
from core.broker.consumer.router import GroupRouter
from core.broker.consumer.wire import serve_call
from core.broker.controller.controlled_shutdown import ControlledShutdown
from core.broker.controller.controller import Controller
from core.broker.errors import NotControllerError, TopicAlreadyExistsError, UnknownTopicError
from core.broker.group.classic import ClassicGroups
from core.broker.idempotency.producer import IdempotentProducer, IdempotentRequest
from core.broker.idempotency.router import serve as serve_idempotency
from core.broker.metadata.cache import MetadataCache, TopicMetadata
from core.broker.metadata.store import (
    BrokerIdInUseError,
    BrokerRegistration,
    Endpoint,
    EventKind,
    MetadataEvent,
    MetadataStore,
)
from core.broker.produce.idempotence import ProducerIdSource
from core.broker.produce.producer import Producer
from core.broker.replica.batch_cache import BatchCache, FetchResult
from core.broker.replica.fetch_wire import ReplicaFetchRequest, ReplicaFetchResult
from core.broker.replica.manager import ReplicaManager
from core.broker.replica.metadata_sync import MetadataSync
from core.broker.replica.partition import Partition
from core.broker.schemas.router import SchemaRegistryRouter
from core.broker.schemas.router import serve as serve_schemas
from core.broker.security.service import Security
from core.broker.types import (
    BrokerInfo,
    PartitionOffsets,
    ProduceRecord,
    RecordResult,
    TopicInfo,
    TopicPartition,
    is_internal_topic,
)
from core.clock import Clock
from core.errors import FranzError
from core.storage.blocking import run_blocking
from core.storage.config import ConfigEntry
from core.storage.errors import InvalidTopicError
from core.storage.log import AppendInfo, FetchData
from core.storage.log_manager import LogManager
from core.storage.log_validator import validate_untrusted_records

log = logging.getLogger(__name__)

Address = tuple[str, int]


class Closeable(Protocol):
    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class BrokerParts:
    """What a broker is made of (built by ``core.broker.assembly``)."""

    config: BrokerConfig
    clock: Clock
    store: MetadataStore
    cache: MetadataCache
    log_manager: LogManager
    replicas: ReplicaManager
    sync: MetadataSync
    controller: Controller
    shutdown: ControlledShutdown
    router: Router
    producer: Producer
    producer_ids: ProducerIdSource  # Kafka producer ids (the gateway's and InitProducerId's)
    idempotent: IdempotentProducer  # produces carrying an Idempotency-Key
    admin: TopicAdmin
    consumers: ConsumerManager
    groups: GroupRouter
    schemas: SchemaRegistryRouter  # the Schema Registry, served by _schemas-0's leader
    batches: BatchCache
    topic_stats: BrokerTopicStats
    security: Security
    cluster_client: Closeable | None  # closed last, after the fetchers stopped


class Broker:
    """Lifecycle: ``await start()`` once, serve, ``await stop()`` once."""

    def __init__(self, parts: BrokerParts) -> None:
        self.config = parts.config
        self.broker_id = parts.config.broker_id
        self.clock = parts.clock
        self.store = parts.store
        self.cache = parts.cache
        self.log_manager = parts.log_manager
        self.replica_manager = parts.replicas
        self.controller = parts.controller
        self.consumers = parts.consumers  # the groups coordinated here
        self.groups = parts.groups  # every group, served by its coordinator
        self.schemas = parts.schemas  # the Schema Registry, served by _schemas-0's leader
        self.batches = parts.batches
        self.topic_stats = parts.topic_stats
        self.security = parts.security  # who a request is and what it may do
        self.producer_ids = parts.producer_ids
        self._sync = parts.sync
        self._shutdown = parts.shutdown
        self._router = parts.router
        self._producer = parts.producer
        self._idempotent = parts.idempotent
        self._admin = parts.admin
        self._cluster_client = parts.cluster_client
        self.cluster_id = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False  # between the end of start() and the beginning of stop()
        self._registration_check: asyncio.Task[list[BrokerRegistration]] | None = None
        self._reactions: set[asyncio.Future[object]] = set()  # metadata changes being applied
        self._closing = False  # stop() is closing what the reactions use
        # the Kafka listeners it registers (kafka.advertised.listeners), set before start()
        # by the process that knows them (app.assembly); none: its Kafka door is off
        self.kafka_endpoints: tuple[Endpoint, ...] = ()

    @property
    def classic_groups(self) -> ClassicGroups:
        """Kafka clients' group calls (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
        OffsetCommit...) for the groups coordinated here; never forwarded."""
        return self.consumers.classic

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        lm, store = self.log_manager, self.store
        await self.security.start()  # users and ACLs before the first request
        await store.start()
        prior_cluster = lm.cluster_id  # from meta.properties, if any
        self.cluster_id = await store.cluster_id()
        lm.write_meta_properties(broker_id=self.broker_id, cluster_id=self.cluster_id)
        store.subscribe(self._on_metadata_event)
        try:
            await store.register_broker(BrokerRegistration(
                self.broker_id, self.config["advertised.host"] or self.config["host"],
                self.config["port"], timestamp_ms=self.clock.now_ms(),
                kafka_endpoints=self.kafka_endpoints))
        except BrokerIdInUseError as exc:  # fail fast: never two brokers with one id
            log.error("cannot start: %s", exc)
            await store.close()
            await self.security.stop()
            await run_blocking(lm.close)
            raise
        await self.controller.maybe_elect()
        # the holder as of now; CONTROLLER_CHANGED events keep it (Metadata's controller_id)
        self.cache.controller_id = await store.controller_id()
        await self._sync.sync_all()
        if prior_cluster == self.cluster_id:  # never on a data dir of another cluster
            self._sync.delete_stray_logs()
        self.replica_manager.start()
        # as controller, elect leaders for partitions left without one (a restart of a
        # one-broker cluster, or brokers gone meanwhile)
        if self.controller.is_active and await self.controller.reconcile():
            await self._sync.sync_cached()
        await self._admin.ensure_internal_topics()
        await self.consumers.start()
        self._start_maintenance()
        self._started = True
        log.info("broker %d started (cluster %s, data dir %s)", self.broker_id, self.cluster_id,
                 self.config.data_dir)

    async def readiness(self, *, timeout_s: float) -> list[str]:
        """Why this broker should not get traffic now; empty when it should: it is started
        (logs loaded, group coordinator running), its metadata store (ZooKeeper in a
        cluster) answers within ``timeout_s`` and lists it among the live brokers. At most
        one store call is in flight: concurrent probes share it, so a store that hangs
        does not pile calls up on the blocking pool."""
        if not self._started:
            return ["the broker is not started (or is stopping)"]
        check = self._registration_check
        if check is None or check.done():
            check = self._registration_check = asyncio.create_task(self.store.live_brokers())
            check.add_done_callback(lambda t: t.cancelled() or t.exception())  # seen here
        try:
            live = await asyncio.wait_for(asyncio.shield(check), timeout_s)
        except TimeoutError:
            return [f"the metadata store did not answer within {timeout_s:g} s"]
        except FranzError as exc:
            return [f"the metadata store cannot be reached: {exc}"]
        if all(reg.broker_id != self.broker_id for reg in live):
            return [f"broker {self.broker_id} is not registered in the metadata store"]
        return []

    async def hand_off_leadership(self) -> None:
        """The first step of stopping, while the listeners still serve: not ready any
        more (``/readyz``), and the controller moves the leadership of shared partitions
        away (controlled shutdown), so followers can still fetch the last records from
        here and clients are forwarded to the new leaders meanwhile. ``stop`` follows."""
        self._started = False
        with contextlib.suppress(Exception):
            await self._shutdown.run()

    async def stop(self) -> None:
        self._started = False
        with contextlib.suppress(Exception):  # Idempotency-Key records still in memory
            await self._idempotent.coordinator.flush()
        if self._registration_check is not None:
            self._registration_check.cancel()
        with contextlib.suppress(Exception):
            await self._shutdown.run()  # leadership moves away before fetchers stop
        await self.controller.stop()
        await self.replica_manager.stop()
        if self._cluster_client is not None:
            await self._cluster_client.close()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        self._closing = True
        for reaction in list(self._reactions):
            reaction.cancel()
        await asyncio.gather(*self._reactions, return_exceptions=True)
        await self.consumers.stop()
        with contextlib.suppress(Exception):
            await self.store.unregister_broker(self.broker_id)
        lm = self.log_manager
        lm.checkpoint_high_watermarks(self.replica_manager.high_watermarks())
        await run_blocking(lm.close)
        await self.store.close()
        await self.security.stop()

    # --- metadata changes -> local replicas ---------------------------------------------

    def _on_metadata_event(self, event: MetadataEvent) -> None:
        if self._closing:  # the store is closing: nothing more to apply
            return
        self.controller.on_event(event)
        if event.kind is EventKind.CONTROLLER_CHANGED:
            holder = event.extra.get("controller_id")
            self.cache.controller_id = holder if isinstance(holder, int) else None
        elif event.kind is EventKind.BROKERS_CHANGED:
            self._follow(self._refresh_brokers_and_internal_topics())
        elif event.kind is EventKind.SESSION_EXPIRED:
            self.replica_manager.fence_leaders()  # no split brain until re-synced
        elif event.kind is EventKind.SESSION_RESTORED:
            self._follow(self._sync.sync_all())
        elif event.topic is not None:
            self._follow(self._sync.sync_topic(event.topic))

    def _follow(self, coro: Coroutine[Any, Any, object]) -> None:
        """Run a metadata reaction; ``stop`` cancels those still running before it
        closes the store they read (they logged "Task exception was never retrieved"
        with a traceback at every stop in a cluster)."""
        task = asyncio.ensure_future(coro)
        self._reactions.add(task)
        task.add_done_callback(self._reaction_done)

    def _reaction_done(self, task: asyncio.Future[object]) -> None:
        self._reactions.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._closing:
            log.error("applying a metadata change failed", exc_info=task.exception())

    async def _refresh_brokers_and_internal_topics(self) -> None:
        await self._sync.refresh_brokers()
        await self._admin.ensure_internal_topics()

    # --- topics and configs -------------------------------------------------------------

    async def list_topics(self) -> list[str]:
        return self._admin.list_topics()

    def topic_metadata(self, name: str) -> TopicMetadata:
        return self._admin.topic_metadata(name)

    async def describe_topic(self, name: str) -> TopicInfo:
        return self._admin.describe_topic(name)

    async def create_topic(
        self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None, validate_only: bool = False,
    ) -> TopicInfo:
        return await self._admin.create_topic(
            name, partitions=partitions, replication_factor=replication_factor, configs=configs,
            validate_only=validate_only)

    async def delete_topic(self, name: str) -> None:
        await self._admin.delete_topic(name)

    async def create_partitions(self, name: str, total: int) -> TopicInfo:
        return await self._admin.create_partitions(name, total)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        await self._admin.set_topic_configs(name, configs)

    async def describe_topic_configs(self, name: str) -> list[ConfigEntry]:
        return self._admin.describe_topic_configs(name)

    async def alter_topic_configs(
        self, name: str, *, set_values: Mapping[str, str] | None = None,
        reset: Iterable[str] = (), validate_only: bool = False,
    ) -> dict[str, str]:
        return await self._admin.alter_topic_configs(
            name, set_values=set_values, reset=reset, validate_only=validate_only)

    async def describe_broker_configs(self) -> list[ConfigEntry]:
        """This broker's properties, sorted by name (v3 broker configs)."""
        return broker_config_entries(self.config)

    async def list_brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(r.broker_id, r.host, r.port, r.rack)
                for r in sorted(self.cache.brokers.values(), key=lambda r: r.broker_id)]

    def kafka_endpoints_of(self, listener: str) -> list[tuple[int, str, int, str | None]]:
        """(broker id, host, port, rack) of every live broker with a Kafka listener named
        ``listener``: the brokers a Metadata request that came in on it is answered."""
        return self.cache.kafka_endpoints_of(listener)

    async def controller_id(self) -> int | None:
        """The broker id of the active controller, None while there is none (v3 cluster)."""
        return await self.store.controller_id()

    # --- data ---------------------------------------------------------------------------

    async def produce(
        self, topic: str, records: Sequence[ProduceRecord], *, partition: int | None = None,
        acks: int = 1, timeout_ms: int | None = None,
        may_create: Callable[[str], bool] | None = None,
        idempotency: IdempotentRequest | None = None,
    ) -> Sequence[RecordResult]:
        """``may_create``: whether the producer may have an unknown topic auto-created
        (None: yes; Kafka asks for CREATE on the cluster or the topic). ``idempotency``:
        the request's Idempotency-Key (``core.broker.idempotency``)."""
        meta = await self._topic_for_produce(topic, may_create)
        timeout = self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms
        if idempotency is not None:
            return await self._idempotent.produce(
                topic, meta, records, default_partition=partition, acks=acks,
                timeout_ms=timeout, request=idempotency)
        return await self._producer.produce(
            topic, meta, records, default_partition=partition, acks=acks, timeout_ms=timeout,
            now_ms=self.clock.now_ms())

    async def _topic_for_produce(self, topic: str,
                                 may_create: Callable[[str], bool] | None) -> TopicMetadata:
        if is_internal_topic(topic):  # the coordinator writes there through the replica manager
            raise InvalidTopicError(f"Cannot append to internal topic {topic}")
        meta = self.cache.topic(topic)
        if meta is not None:
            return meta
        if not self.config["auto.create.topics.enable"] or (
                may_create is not None and not may_create(topic)):
            raise UnknownTopicError(f"Topic '{topic}' not found.")
        with contextlib.suppress(TopicAlreadyExistsError):
            await self._admin.create_topic(topic)
        return self._admin.topic_metadata(topic)

    async def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int,
                    max_wait_ms: int = 0, max_records: int | None = None) -> FetchResult:
        """Records from ``offset`` below the HW (waiting up to ``max_wait_ms`` for some),
        as ranges of the fetched batches, with the leader's offsets; ``max_records``: no
        more records are wanted (the read may stop at the offset's batch)."""
        tp = self.cache.existing_partition(topic, partition)
        got = await self._router.fetch(tp, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                                       max_records=max_records)
        return self.batches.fetch_result(
            topic, partition, offset, got.data, high_watermark=got.offsets.high_watermark,
            log_start_offset=got.offsets.log_start_offset)

    async def partition_offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return await self._router.partition_offsets(self.cache.existing_partition(topic, partition))

    async def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        tp = self.cache.existing_partition(topic, partition)
        return await self.replica_manager.offset_for_timestamp(tp, timestamp_ms)

    # --- the internal API: this broker's own replicas, never forwarded ----------------

    async def replica_fetch(self, req: ReplicaFetchRequest) -> list[ReplicaFetchResult]:
        return await self.replica_manager.replica_fetch(req)

    async def local_append(self, topic: str, partition: int, data: bytearray, *, acks: int,
                           timeout_ms: int) -> AppendInfo:
        """A client produce forwarded by another broker's router. The bytes were built
        outside this process, so every record is decoded before anything is written, and
        internal topics are refused: the group coordinator leads the offsets partitions
        it writes and appends to them through the replica manager, never over this call."""
        if is_internal_topic(topic):
            raise InvalidTopicError(f"Cannot append to internal topic {topic}")
        checked = validate_untrusted_records(data, where=f"{topic}-{partition}")
        return await self.replica_manager.append(TopicPartition(topic, partition), checked,
                                                 acks=acks, timeout_ms=timeout_ms)

    async def local_fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int,
                          max_wait_ms: int) -> tuple[FetchData, PartitionOffsets]:
        data, p = await self.replica_manager.fetch(TopicPartition(topic, partition), offset,
                                                   max_bytes=max_bytes, max_wait_ms=max_wait_ms)
        return data, p.offsets()

    async def local_offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return await self.replica_manager.client_offsets(TopicPartition(topic, partition))

    def local_replicas(self) -> list[tuple[TopicPartition, Partition]]:
        """This broker's replicas, sorted (for tests and operators)."""
        return sorted(self.replica_manager.partitions.items())

    async def serve_group_call(self, op: str, body: bytes) -> bytes:
        """A consumer-group call forwarded by another broker, for a group coordinated
        here: run on this broker's ConsumerManager (``core.broker.consumer.wire``)."""
        return await serve_call(self.consumers, op, body)

    async def serve_idempotency_call(self, op: str, body: bytes) -> bytes:
        """An Idempotency-Key call forwarded by another broker, for a key coordinated
        here (``core.broker.idempotency.router``)."""
        return await serve_idempotency(self._idempotent.coordinator, op, body)

    async def serve_schemas_call(self, op: str, body: bytes) -> bytes:
        """A Schema Registry call forwarded by another broker, for the registry led here
        (``core.broker.schemas.router``)."""
        return await serve_schemas(self.schemas.registry, op, body)

    async def controlled_shutdown_of(self, broker_id: int) -> int:
        """As the active controller: move leadership away from ``broker_id``; how many
        partitions it still leads. NotControllerError on any other broker."""
        if not self.controller.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        return await self.controller.controlled_shutdown(broker_id)

    # --- maintenance --------------------------------------------------------------------

    def _start_maintenance(self) -> None:
        c, lm, rm, now = self.config, self.log_manager, self.replica_manager, self.clock.now_ms
        jobs: list[tuple[int, Callable[[], Awaitable[object]]]] = [
            (c["log.flush.scheduler.interval.ms"], lambda: run_blocking(lm.flush_dirty_logs, now())),
            # Retention and compaction change a log's segment list, which appends also use:
            # they run on the loop thread (retention is renames and unlinks; compaction
            # touches compacted topics only) rather than racing appends from a worker.
            (c["log.retention.check.interval.ms"],
             lambda: _inline(lm.run_retention, now(), rm.high_watermarks())),
            (c["replica.high.watermark.checkpoint.interval.ms"],
             lambda: run_blocking(lm.checkpoint_high_watermarks, rm.high_watermarks())),
            (c["log.flush.offset.checkpoint.interval.ms"],
             lambda: run_blocking(lm.checkpoint_recovery_points)),
            (c["log.flush.start.offset.checkpoint.interval.ms"],
             lambda: run_blocking(lm.checkpoint_log_start_offsets)),
        ]
        if c["zookeeper.connect"]:  # a new controller, or brokers that came while it waited
            jobs.append((1000, self._admin.ensure_internal_topics))
        jobs.append((c["log.retention.check.interval.ms"],
                     lambda: _inline(self._idempotent.coordinator.expire_all)))
        if c["log.cleaner.enable"]:
            jobs.append((c["log.cleaner.backoff.ms"],
                         lambda: _inline(lm.run_cleaner, now(), rm.high_watermarks())))
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
