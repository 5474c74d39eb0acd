"""Building a broker from its parts: the one place where they are wired together.

Every part gets its collaborators through its constructor, in dependency order, and none
of them sees the ``Broker`` facade:

    LogManager (storage, loaded here: recovery runs off the event loop)
    MetadataCache
    ReplicaManager(log manager, ISR store = metadata store, liveness and addresses from
                   the cache, fetch client)            owns the fetchers and ISR changes
    MetadataSync(store, cache, replica manager)        metadata -> cache and replicas
    Controller(store)                                  topic layout and leadership
    ControlledShutdown(controller, store, client)
    Router(replica manager, cache, client)             local or forwarded partition calls
    Producer(router, GatewayProducers)                 records -> batches -> appends,
                                                       idempotent (the broker's producer ids)
    ReplicaGroupBackend(replica manager, router, cache, batch cache)
    ConsumerManager(group backend)                     the group coordinator inside
    GroupRouter(consumer manager, cache, client)       group calls to their coordinator
    TopicAdmin(controller, cache, sync, consumers.on_topics_changed)
    SchemaRegistry(_schemas-0's InternalTopicLog)  the Schema Registry at that partition's leader
    SchemaRegistryRouter(registry, router, cache, client)   its calls, from any broker
    replica manager role listeners -> the three coordinators' runtimes
                                   (core.broker.coordination.runtime)

The choice of metadata store backend and of the cluster client is the caller's
(``app.assembly``).
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

from core.broker.admin.broker_config import BrokerConfig
from core.broker.admin.topic_admin import IdempotencyTopicSettings, OffsetsTopicSettings, TopicAdmin
from core.broker.broker import Broker, BrokerParts
from core.broker.cluster.router import ForwardingClient, Router
from core.broker.cluster.topic_stats import BrokerTopicStats
from core.broker.consumer.manager import ConsumerManager
from core.broker.consumer.router import GroupCallClient, GroupRouter
from core.broker.controller.controlled_shutdown import ControlledShutdown, ShutdownClient
from core.broker.controller.controller import Controller
from core.broker.controller.partition_limits import PartitionLimits
from core.broker.coordination.partition_log import InternalTopicLog
from core.broker.group.backend import ReplicaGroupBackend
from core.broker.idempotency.coordinator import IdempotencyCoordinator
from core.broker.idempotency.producer import IdempotentProducer
from core.broker.idempotency.router import IdempotencyCallClient, IdempotencyRouter
from core.broker.metadata.cache import MetadataCache
from core.broker.metadata.store import MetadataStore
from core.broker.produce.idempotence import GatewayProducers, ProducerIdSource
from core.broker.produce.producer import Producer
from core.broker.replica.batch_cache import BatchCache
from core.broker.replica.fetcher import ReplicaFetchClient
from core.broker.replica.manager import ReplicaManager, ReplicationSettings
from core.broker.replica.metadata_sync import MetadataSync
from core.broker.schemas.registry import SchemaRegistry
from core.broker.schemas.router import SchemaCallClient, SchemaRegistryRouter
from core.broker.security.memory_store import MemorySecurityStore
from core.broker.security.service import Security, SecuritySettings
from core.broker.security.store import SecurityStore
from core.broker.types import IDEMPOTENCY_TOPIC, OFFSETS_TOPIC, SCHEMAS_TOPIC
from core.clock import SYSTEM_CLOCK, Clock
from core.storage.blocking import run_blocking
from core.storage.config import LogConfig
from core.storage.log_manager import LogManager


class ClusterClient(ForwardingClient, ReplicaFetchClient, ShutdownClient, GroupCallClient,
                    IdempotencyCallClient, SchemaCallClient, Protocol):
    """Every call a broker makes to the others (``core.broker.cluster.client``)."""

    async def close(self) -> None: ...


def replication_settings(config: BrokerConfig) -> ReplicationSettings:
    return ReplicationSettings(
        lag_time_max_ms=int(config["replica.lag.time.max.ms"]),
        fetch_wait_max_ms=config["replica.fetch.wait.max.ms"],
        fetch_max_bytes=config["replica.fetch.max.bytes"],
        fetch_response_max_bytes=config["replica.fetch.response.max.bytes"],
        fetch_backoff_ms=config["replica.fetch.backoff.ms"])


async def open_broker(config: BrokerConfig, store: MetadataStore, *,
                      clock: Clock = SYSTEM_CLOCK,
                      cluster_client: ClusterClient | None = None,
                      security_store: SecurityStore | None = None) -> Broker:
    """Load the logs of ``config.data_dir`` and assemble a broker over them (not started:
    ``await broker.start()`` next). ``cluster_client`` None: a broker that never talks
    to others (no forwarding, no follower fetch). ``security_store`` None: users and
    ACLs in memory only."""
    data_dir = config.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    log_manager = await run_blocking(
        LogManager, data_dir, server_defaults=dict(config.log_defaults), clock=clock,
        broker_id=config.broker_id)
    try:
        return assemble(config, store, log_manager, clock=clock, cluster_client=cluster_client,
                        security_store=security_store or MemorySecurityStore())
    except BaseException:
        await run_blocking(log_manager.close)
        raise


def assemble(config: BrokerConfig, store: MetadataStore, log_manager: LogManager, *,
             clock: Clock, cluster_client: ClusterClient | None,
             security_store: SecurityStore) -> Broker:
    broker_id = config.broker_id
    security = Security(SecuritySettings.from_config(config), security_store, clock=clock)
    cache = MetadataCache()
    replicas = ReplicaManager(
        broker_id, log_manager, clock, log_manager.read_high_watermarks(),
        isr_store=store, is_alive=cache.is_live, fetch_client=cluster_client,
        address_of=cache.address_of, settings=replication_settings(config))
    sync = MetadataSync(store, cache, replicas, config.log_defaults)
    controller = Controller(
        broker_id, store, delete_topic_enable=config["delete.topic.enable"],
        unclean_default=LogConfig.from_overrides(
            {}, config.log_defaults).unclean_leader_election_enable,
        auto_rebalance=config["auto.leader.rebalance.enable"],
        imbalance_check_interval_s=config["leader.imbalance.check.interval.seconds"],
        imbalance_pct=config["leader.imbalance.per.broker.percentage"],
        partition_limits=PartitionLimits.of_this_process(
            config["max.partitions.per.topic"], config["max.partitions.per.broker"]),
        hosted_replicas=cache.replicas_per_broker)
    shutdown = ControlledShutdown(
        broker_id, controller, store, cluster_client, address_of=cache.address_of,
        leads_shared_partitions=lambda: any(
            p.is_leader and len(p.replicas) > 1 for p in replicas.partitions.values()),
        live_brokers=lambda: len(cache.brokers),
        enabled=config["controlled.shutdown.enable"],
        timeout_ms=config["controlled.shutdown.timeout.ms"])
    stats = BrokerTopicStats()
    router = Router(broker_id, replicas, cache, cluster_client, stats=stats,
                    resync_topic=sync.sync_topic)
    batches = BatchCache()
    backend = ReplicaGroupBackend(
        replicas, router, cache, batches,
        offsets_topic_partitions=int(config["offsets.topic.num.partitions"]),
        commit_timeout_ms=int(config["offsets.commit.timeout.ms"]))
    consumers = ConsumerManager(backend, config=config, clock=clock,
                                authorize=security.authorize)
    groups = GroupRouter(broker_id, consumers, cache, batches, cluster_client)
    keys = IdempotencyCoordinator(
        InternalTopicLog(replicas, batches, IDEMPOTENCY_TOPIC), clock,
        num_partitions=int(config["idempotency.topic.num.partitions"]),
        retention_ms=int(config["idempotency.key.retention.ms"]),
        claim_timeout_ms=int(config["idempotency.key.claim.timeout.ms"]),
        producer_expiration_ms=int(config["idempotency.producer.id.expiration.ms"]),
        append_timeout_ms=int(config["request.timeout.ms"]),
        max_keys=int(config["idempotency.keys.max"]))
    admin = TopicAdmin(
        controller, cache, sync, log_defaults=config.log_defaults,
        default_partitions=config["num.partitions"],
        default_replication_factor=config["default.replication.factor"],
        offsets_topic=OffsetsTopicSettings(
            num_partitions=config["offsets.topic.num.partitions"],
            replication_factor=config["offsets.topic.replication.factor"],
            segment_bytes=config["offsets.topic.segment.bytes"],
            wait_for_brokers=bool(config["zookeeper.connect"])),
        idempotency_topic=IdempotencyTopicSettings(
            num_partitions=config["idempotency.topic.num.partitions"],
            replication_factor=config["idempotency.topic.replication.factor"],
            retention_ms=config["idempotency.key.retention.ms"]),
        on_topics_changed=consumers.on_topics_changed)
    schemas = SchemaRegistry(InternalTopicLog(replicas, batches, SCHEMAS_TOPIC), clock,
                             append_timeout_ms=int(config["request.timeout.ms"]))
    # the replicas' role changes drive the three coordinators' runtimes
    replicas.add_role_listener(OFFSETS_TOPIC, consumers.coordinator.on_role_change)
    replicas.add_role_listener(IDEMPOTENCY_TOPIC, keys.on_role_change)
    replicas.add_role_listener(SCHEMAS_TOPIC, schemas.on_role_change)
    producer_ids = ProducerIdSource(partial(store.allocate_producer_ids, broker_id))
    return Broker(BrokerParts(
        config=config, clock=clock, store=store, cache=cache, log_manager=log_manager,
        replicas=replicas, sync=sync, controller=controller, shutdown=shutdown, router=router,
        producer=Producer(router, producers=GatewayProducers(producer_ids)),
        producer_ids=producer_ids,
        idempotent=IdempotentProducer(router, IdempotencyRouter(keys, router, cache, cluster_client)),
        admin=admin, consumers=consumers, groups=groups,
        schemas=SchemaRegistryRouter(schemas, router, cache, cluster_client),
        batches=batches,
        topic_stats=stats, security=security, cluster_client=cluster_client))
