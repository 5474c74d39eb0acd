"""The embedded metadata store: ``MetadataStore`` on SQLite, for standalone franz.

Kafka's ZooKeeper layout mapped to tables (schema: ``migrations/versions/0001_*``):

    ZooKeeper                                  table             columns
    /cluster/id                                cluster           id (one row)
    /controller, /controller_epoch             controller        broker_id (NULL: none), epoch (one row)
    /brokers/ids/<id>                          brokers           one row per registration (its
                                                                 HTTP host and port; its Kafka
                                                                 endpoints as a JSON array)
    /brokers/topics/<t>                        topics            name, topic_id, created_ms
      (its partition -> replicas map)          topic_partitions  replicas (JSON array)
    /brokers/topics/<t>/partitions/<p>/state   topic_partitions  leader, leader_epoch, isr (JSON
                                                                 array), controller_epoch: NULL
                                                                 until a state is written;
                                                                 version (the zkVersion)
    /config/topics/<t>                         topic_configs     one row per override

Ephemeral nodes have no session to expire here, so the broker registers at start and
unregisters at stop; a registration left behind by an unclean stop is replaced when the
same id registers again (new epoch), and the controller role it held is released with
it, as ZooKeeper would have done when the old session expired. A controller whose broker
is not registered counts as no controller.

Concurrency: every call runs one short transaction off the event loop through
``core.storage.blocking.run_blocking``. On SQLite, write transactions start with
``BEGIN IMMEDIATE`` (the write lock is taken before the first read, so check-then-write
sequences are atomic even across processes) and reads with a deferred ``BEGIN`` (one
snapshot per call). Listeners run on the event loop after the write has committed.
Lifecycle: ``start()`` (migrates the schema, opens the engine), calls, ``close()``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

import migrations
from core.broker.errors import TopicAlreadyExistsError, UnknownPartitionError, UnknownTopicError
from core.broker.metadata.events import (
    Listeners,
    brokers_event,
    config_changed_event,
    controller_event,
    state_event,
    topic_changed_event,
    topic_created_event,
    topic_deleted_event,
)
from core.broker.metadata.rules import check_states_within, new_cluster_id, partitions_to_add
from core.broker.metadata.store import (
    BadVersionError,
    BrokerRegistration,
    Endpoint,
    EventKind,
    Listener,
    MetadataEvent,
    MetadataStoreError,
    PartitionState,
    TopicAssignment,
)
from core.clock import Clock
from core.storage.blocking import run_blocking

log = logging.getLogger(__name__)

T = TypeVar("T")

# --- tables (kept identical to the migrations' head; tests/unit/test_migrations.py checks) --

METADATA = sa.MetaData()

CLUSTER = sa.Table(
    "cluster", METADATA,
    sa.Column("id", sa.String(22), primary_key=True),
)
CONTROLLER = sa.Table(
    "controller", METADATA,
    sa.Column("broker_id", sa.Integer(), nullable=True),
    sa.Column("epoch", sa.Integer(), nullable=False),
)
BROKERS = sa.Table(
    "brokers", METADATA,
    sa.Column("broker_id", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("port", sa.Integer(), nullable=False),
    sa.Column("rack", sa.String(255), nullable=True),
    sa.Column("timestamp_ms", sa.BigInteger(), nullable=False),
    sa.Column("epoch", sa.BigInteger(), nullable=False),
    sa.Column("kafka_endpoints", sa.Text(), nullable=True),  # JSON (0005); NULL: none
)
TOPICS = sa.Table(
    "topics", METADATA,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("topic_id", sa.String(64), nullable=False),
    sa.Column("created_ms", sa.BigInteger(), nullable=False),
)
TOPIC_PARTITIONS = sa.Table(
    "topic_partitions", METADATA,
    sa.Column("topic", sa.String(255),
              sa.ForeignKey("topics.name", name="fk_topic_partitions_topic", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("partition", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("replicas", sa.Text(), nullable=False),
    sa.Column("leader", sa.Integer(), nullable=True),
    sa.Column("leader_epoch", sa.Integer(), nullable=True),
    sa.Column("isr", sa.Text(), nullable=True),
    sa.Column("controller_epoch", sa.Integer(), nullable=True),
    sa.Column("version", sa.Integer(), nullable=False),
)
TOPIC_CONFIGS = sa.Table(
    "topic_configs", METADATA,
    sa.Column("topic", sa.String(255), primary_key=True),
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
)
PRODUCER_ID_BLOCK = sa.Table(
    "producer_id_block", METADATA,
    sa.Column("broker_id", sa.Integer(), nullable=False),
    sa.Column("block_start", sa.BigInteger(), nullable=False),
    sa.Column("block_end", sa.BigInteger(), nullable=False),
)

#: how long a write waits for another process's write transaction (SQLite's busy
#: timeout; pysqlite's default is 5 s): transactions are short, so a wait this long
#: means something is wrong, and only then does a call fail with "database is locked"
_SQLITE_CONNECT_ARGS = {"timeout": 30.0}
_BEGIN_OPTION = "franz_sqlite_begin"  # execution option: "IMMEDIATE" on the write engine


class EmbeddedMetadataStore:
    """``MetadataStore`` over SQLAlchemy Core on a SQLite file (``<data dir>/metadata.db``).

    All public methods are coroutines for the event loop; the database work runs on the
    blocking-work pool. Listeners are called on the event loop after the change committed,
    one event per store call (``create_topic`` is one ``TOPIC_CREATED``, covering its
    configs and partition states). Reads of an unknown topic return empty results; writes
    to one raise ``UnknownTopicError``. Database failures become ``MetadataStoreError``.
    """

    def __init__(self, url: str, *, clock: Clock) -> None:
        self._url = url
        self._clock = clock
        self._engine: Engine | None = None
        self._writer: Engine | None = None
        self._write_lock = threading.RLock()  # writes of this process, one at a time
        self._listeners = Listeners(log)
        self._cluster_id: str | None = None
        # Admin requests (reassignment, preferred election): in memory; a standalone
        # broker is its own controller and completes them at once.
        self._admin: dict[str, bytes] = {}

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        if self._engine is not None:
            raise RuntimeError("EmbeddedMetadataStore already started")
        try:
            engine = await run_blocking(self._migrate_and_open)
        except sa.exc.SQLAlchemyError as exc:
            raise MetadataStoreError(f"metadata store: cannot open: {exc}") from exc
        self._engine = engine
        self._writer = writer_engine(engine)

    async def close(self) -> None:
        engine, self._engine, self._writer = self._engine, None, None
        if engine is not None:
            await run_blocking(engine.dispose)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.add(listener)

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    # --- cluster and brokers -----------------------------------------------------------

    async def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = await self._run(self._get_or_create_cluster_id)
        return self._cluster_id

    async def register_broker(self, reg: BrokerRegistration) -> BrokerRegistration:
        stored, released = await self._run(self._register_broker, reg)
        self._emit(brokers_event(reg.broker_id, registered=True))
        if released is not None:
            self._emit(controller_event(None, released))
        return stored

    async def unregister_broker(self, broker_id: int) -> None:
        removed, released = await self._run(self._unregister_broker, broker_id)
        if removed:
            self._emit(brokers_event(broker_id, registered=False))
        if released is not None:
            self._emit(controller_event(None, released))

    async def live_brokers(self) -> list[BrokerRegistration]:
        return await self._run(self._live_brokers)

    # --- controller --------------------------------------------------------------------

    async def try_elect_controller(self, broker_id: int) -> int | None:
        """Take the controller role if nobody (registered) holds it. Only a registered
        broker can win. Returns the new controller epoch, or None."""
        epoch = await self._run(self._try_elect, broker_id)
        if epoch is not None:
            log.info("broker %d elected controller (epoch %d)", broker_id, epoch)
            self._emit(controller_event(broker_id, epoch))
        return epoch

    async def controller_id(self) -> int | None:
        return await self._run(self._controller_id)

    # --- topics ------------------------------------------------------------------------

    async def create_topic(
        self, assignment: TopicAssignment, configs: Mapping[str, str],
        states: Mapping[int, PartitionState],
    ) -> None:
        check_states_within(states, assignment.partitions, what="create_topic")
        await self._run(self._create_topic, assignment, dict(configs), dict(states))
        self._emit(topic_created_event(assignment.name, len(assignment.partitions)))

    async def topic_names(self) -> list[str]:
        return await self._run(self._topic_names)

    async def get_topic(self, name: str) -> TopicAssignment | None:
        return await self._run(self._get_topic, name)

    async def add_partitions(
        self, assignment: TopicAssignment, states: Mapping[int, PartitionState]
    ) -> None:
        """Add the partitions of ``assignment`` the topic does not have yet, with their
        states. Existing partitions must appear unchanged; adding nothing is a no-op."""
        added = await self._run(self._add_partitions, assignment, dict(states))
        if added:
            self._emit(topic_changed_event(assignment.name, added))

    async def delete_topic(self, name: str) -> None:
        await self._run(self._delete_topic, name)
        self._emit(topic_deleted_event(name))

    async def get_topic_configs(self, name: str) -> dict[str, str]:
        return await self._run(self._get_topic_configs, name)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        await self._run(self._set_topic_configs, name, dict(configs))
        self._emit(config_changed_event(name))

    async def set_assignment(self, assignment: TopicAssignment) -> None:
        """Replace the replicas of the topic's existing partitions (``adding`` and
        ``removing`` are not kept)."""
        await self._run(self._set_assignment, assignment)
        self._emit(topic_changed_event(assignment.name, []))

    async def get_admin_request(self, name: str) -> bytes | None:
        return self._admin.get(name)

    async def create_admin_request(self, name: str, data: bytes) -> bool:
        if name in self._admin:
            return False
        self._admin[name] = data
        self._emit(MetadataEvent(EventKind.ADMIN_REQUEST, extra={"name": name}))
        return True

    async def delete_admin_request(self, name: str) -> None:
        self._admin.pop(name, None)

    async def replicas_per_broker(self) -> dict[int, int]:
        return await self._run(self._replicas_per_broker)

    async def allocate_producer_ids(self, broker_id: int, count: int) -> tuple[int, int]:
        return await self._run(self._allocate_producer_ids, broker_id, count)

    # --- partition state ---------------------------------------------------------------

    async def get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        return await self._run(self._get_partition_states, topic)

    async def update_partition_state(
        self, topic: str, partition: int, state: PartitionState, *, expected_version: int
    ) -> PartitionState:
        stored = await self._run(self._update_partition_state, topic, partition, state,
                                 expected_version)
        self._emit(state_event(topic, partition, stored))
        return stored

    async def update_partition_states(
        self, topic: str, updates: Mapping[int, tuple[PartitionState, int]]
    ) -> dict[int, PartitionState]:
        stored = await self._run(self._update_partition_states, topic, dict(updates))
        for p, st in stored.items():
            self._emit(state_event(topic, p, st))
        return stored

    # --- plumbing ----------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._engine is None:
            raise RuntimeError("EmbeddedMetadataStore is not started")
        try:
            return await run_blocking(fn, *args)
        except sa.exc.SQLAlchemyError as exc:
            raise MetadataStoreError(f"metadata store: {exc}") from exc

    def _emit(self, ev: MetadataEvent) -> None:
        self._listeners.emit(ev)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        assert self._engine is not None
        with self._engine.connect() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        assert self._writer is not None
        with self._write_lock, self._writer.begin() as conn:  # one writer per process
            yield conn

    def _migrate_and_open(self) -> Engine:
        url = sa.engine.make_url(self._url)
        if url.get_backend_name() == "sqlite":
            if url.database in (None, "", ":memory:"):
                raise ValueError("the embedded metadata store needs a SQLite file, not memory")
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        migrations.upgrade_to_head(self._url)
        engine = create_catalog_engine(self._url)
        try:
            with engine.connect():  # fail now, not at the first call; sets WAL on the file
                pass
        except BaseException:
            engine.dispose()
            raise
        return engine

    # --- blocking bodies (run on the pool, one transaction each) --------------------------

    def _get_or_create_cluster_id(self) -> str:
        with self._write() as conn:
            cid = conn.execute(sa.select(CLUSTER.c.id).limit(1)).scalar_one_or_none()
            if cid is None:
                cid = new_cluster_id()
                conn.execute(sa.insert(CLUSTER).values(id=cid))
                log.info("created cluster id %s", cid)
            return cid

    def _register_broker(self, reg: BrokerRegistration) -> tuple[BrokerRegistration, int | None]:
        """Returns the stored registration and, if the stale registration it replaced held
        the controller role, the controller epoch that was released."""
        released: int | None = None
        with self._write() as conn:
            old = conn.execute(sa.select(BROKERS.c.epoch)
                               .where(BROKERS.c.broker_id == reg.broker_id)).scalar_one_or_none()
            top = conn.execute(sa.select(sa.func.max(BROKERS.c.epoch))).scalar() or 0
            stored = dataclasses.replace(
                reg, epoch=top + 1, timestamp_ms=reg.timestamp_ms or self._clock.now_ms())
            if old is not None:
                log.info("replacing stale registration of broker %d (epoch %d -> %d)",
                         reg.broker_id, old, stored.epoch)
                conn.execute(sa.delete(BROKERS).where(BROKERS.c.broker_id == reg.broker_id))
                released = _release_controller(conn, reg.broker_id)
            conn.execute(sa.insert(BROKERS).values(
                broker_id=stored.broker_id, host=stored.host, port=stored.port, rack=stored.rack,
                timestamp_ms=stored.timestamp_ms, epoch=stored.epoch,
                kafka_endpoints=_endpoints_json(stored.kafka_endpoints)))
        return stored, released

    def _unregister_broker(self, broker_id: int) -> tuple[bool, int | None]:
        with self._write() as conn:
            removed = conn.execute(
                sa.delete(BROKERS).where(BROKERS.c.broker_id == broker_id)).rowcount > 0
            released = _release_controller(conn, broker_id)
        return removed, released

    def _live_brokers(self) -> list[BrokerRegistration]:
        with self._read() as conn:
            rows = conn.execute(sa.select(BROKERS).order_by(BROKERS.c.broker_id)).all()
        return [BrokerRegistration(r.broker_id, r.host, r.port, r.rack, r.timestamp_ms, r.epoch,
                                   kafka_endpoints=_endpoints_of(r.kafka_endpoints))
                for r in rows]

    def _try_elect(self, broker_id: int) -> int | None:
        holder_registered = sa.exists().where(BROKERS.c.broker_id == CONTROLLER.c.broker_id)
        self_registered = sa.exists().where(BROKERS.c.broker_id == broker_id)
        with self._write() as conn:
            won = conn.execute(
                sa.update(CONTROLLER)
                .where(sa.or_(CONTROLLER.c.broker_id.is_(None), ~holder_registered))
                .where(self_registered)
                .values(broker_id=broker_id, epoch=CONTROLLER.c.epoch + 1)
            ).rowcount > 0
            if not won:
                return None
            return int(conn.execute(sa.select(CONTROLLER.c.epoch)).scalar_one())

    def _controller_id(self) -> int | None:
        registered = sa.exists().where(BROKERS.c.broker_id == CONTROLLER.c.broker_id)
        with self._read() as conn:
            return conn.execute(
                sa.select(CONTROLLER.c.broker_id).where(registered)).scalar_one_or_none()

    def _create_topic(
        self, assignment: TopicAssignment, configs: dict[str, str],
        states: dict[int, PartitionState],
    ) -> None:
        with self._write() as conn:
            try:
                conn.execute(sa.insert(TOPICS).values(
                    name=assignment.name, topic_id=assignment.topic_id,
                    created_ms=self._clock.now_ms()))
            except sa.exc.IntegrityError as exc:
                raise TopicAlreadyExistsError(
                    f"Topic '{assignment.name}' already exists.") from exc
            _insert_partitions(conn, assignment.name, assignment.partitions, states)
            _insert_configs(conn, assignment.name, configs)

    def _topic_names(self) -> list[str]:
        with self._read() as conn:
            return list(conn.execute(sa.select(TOPICS.c.name).order_by(TOPICS.c.name)).scalars())

    def _get_topic(self, name: str) -> TopicAssignment | None:
        with self._read() as conn:
            topic_id = conn.execute(
                sa.select(TOPICS.c.topic_id).where(TOPICS.c.name == name)).scalar_one_or_none()
            if topic_id is None:
                return None
            partitions = _replicas_of(conn, name)
        return TopicAssignment(name, topic_id, partitions)

    def _add_partitions(
        self, assignment: TopicAssignment, states: dict[int, PartitionState]
    ) -> list[int]:
        name = assignment.name
        with self._write() as conn:
            _require_topic(conn, name)
            added = partitions_to_add(name, _replicas_of(conn, name), assignment.partitions)
            check_states_within(states, added, what="add_partitions")
            _insert_partitions(conn, name, added, states)
        return sorted(added)

    def _set_assignment(self, assignment: TopicAssignment) -> None:
        name, tp = assignment.name, TOPIC_PARTITIONS
        with self._write() as conn:
            _require_topic(conn, name)
            if set(_replicas_of(conn, name)) != set(assignment.partitions):
                raise MetadataStoreError(f"metadata store: set_assignment of '{name}' must "
                                         "keep its partitions")
            for p, replicas in assignment.partitions.items():
                conn.execute(sa.update(tp).where(tp.c.topic == name, tp.c.partition == p)
                             .values(replicas=_json_ints(replicas)))

    def _delete_topic(self, name: str) -> None:
        with self._write() as conn:
            _require_topic(conn, name)
            # Explicit rather than relying on the FK cascade (SQLite enforces it only when
            # PRAGMA foreign_keys is on; configs have no FK at all).
            conn.execute(sa.delete(TOPIC_CONFIGS).where(TOPIC_CONFIGS.c.topic == name))
            conn.execute(sa.delete(TOPIC_PARTITIONS).where(TOPIC_PARTITIONS.c.topic == name))
            conn.execute(sa.delete(TOPICS).where(TOPICS.c.name == name))

    def _get_topic_configs(self, name: str) -> dict[str, str]:
        with self._read() as conn:
            rows = conn.execute(sa.select(TOPIC_CONFIGS.c.key, TOPIC_CONFIGS.c.value)
                                .where(TOPIC_CONFIGS.c.topic == name)).all()
        return {r.key: r.value for r in rows}

    def _set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        with self._write() as conn:
            _require_topic(conn, name)
            conn.execute(sa.delete(TOPIC_CONFIGS).where(TOPIC_CONFIGS.c.topic == name))
            _insert_configs(conn, name, configs)

    def _replicas_per_broker(self) -> dict[int, int]:
        hosted: dict[int, int] = {}
        with self._read() as conn:
            for (replicas,) in conn.execute(sa.select(TOPIC_PARTITIONS.c.replicas)):
                for broker in json.loads(replicas):
                    hosted[broker] = hosted.get(broker, 0) + 1
        return hosted

    def _allocate_producer_ids(self, broker_id: int, count: int) -> tuple[int, int]:
        block = PRODUCER_ID_BLOCK
        with self._write() as conn:  # one transaction: the next block is never handed twice
            end = conn.execute(sa.select(block.c.block_end)).scalar_one()
            start, last = end + 1, end + count
            conn.execute(sa.update(block).values(broker_id=broker_id, block_start=start,
                                                 block_end=last))
        return start, last

    def _get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        tp = TOPIC_PARTITIONS
        with self._read() as conn:
            rows = conn.execute(sa.select(tp).where(tp.c.topic == topic)
                                .where(tp.c.leader.is_not(None))).all()
        return {r.partition: PartitionState(r.leader, r.leader_epoch, tuple(json.loads(r.isr)),
                                            r.controller_epoch, r.version) for r in rows}

    def _update_partition_state(
        self, topic: str, partition: int, state: PartitionState, expected_version: int
    ) -> PartitionState:
        tp = TOPIC_PARTITIONS
        key = (tp.c.topic == topic) & (tp.c.partition == partition)
        with self._write() as conn:
            updated = conn.execute(
                sa.update(tp).where(key).where(tp.c.version == expected_version)
                .values(**_state_columns(state), version=tp.c.version + 1)
            ).rowcount
            if updated:
                return dataclasses.replace(state, version=expected_version + 1)
            actual = conn.execute(sa.select(tp.c.version).where(key)).scalar_one_or_none()
            if actual is None:
                _require_topic(conn, topic)
                raise UnknownPartitionError(f"Topic '{topic}' has no partition {partition}.")
        raise BadVersionError(
            f"partition state {topic}-{partition}: expected version {expected_version}, "
            f"stored version is {actual}")

    def _update_partition_states(
        self, topic: str, updates: dict[int, tuple[PartitionState, int]]
    ) -> dict[int, PartitionState]:
        tp = TOPIC_PARTITIONS
        with self._write() as conn:  # one transaction: all or nothing
            for p, (state, expected) in sorted(updates.items()):
                updated = conn.execute(
                    sa.update(tp).where((tp.c.topic == topic) & (tp.c.partition == p))
                    .where(tp.c.version == expected)
                    .values(**_state_columns(state), version=tp.c.version + 1)
                ).rowcount
                if not updated:
                    raise BadVersionError(
                        f"partition state {topic}-{p}: not at version {expected} (or missing); "
                        "nothing written")
        return {p: dataclasses.replace(state, version=expected + 1)
                for p, (state, expected) in updates.items()}


# --- helpers ------------------------------------------------------------------------------


def writer_engine(engine: Engine) -> Engine:
    """``engine`` with write transactions: BEGIN IMMEDIATE on SQLite (the write lock is
    taken before the first read, so check-then-write is atomic across processes)."""
    return engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})


def create_catalog_engine(url: str) -> Engine:
    """An engine on the SQL catalog at ``url``, SQLite set up as this store uses it (its
    own BEGIN; ``writer_engine`` makes the engine whose transactions write). Shared with
    the SQL security store, which keeps its tables in the same file."""
    engine = sa.create_engine(url, connect_args=_SQLITE_CONNECT_ARGS if url.startswith("sqlite") else {})
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    return engine


def _configure_sqlite(engine: Engine) -> None:
    """WAL, synchronous=NORMAL, FKs on, and transactions whose BEGIN we issue ourselves:
    pysqlite's own BEGIN comes only before the first write, which would let reads in a
    "transaction" see a different database than its writes (SQLAlchemy's documented recipe)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # no implicit BEGIN from the driver
        cur = dbapi_conn.cursor()
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def _release_controller(conn: Connection, broker_id: int) -> int | None:
    """Clear the controller row if ``broker_id`` holds it (its "session" ended); returns
    the controller epoch that was released, or None if the broker was not controller."""
    epoch = conn.execute(sa.select(CONTROLLER.c.epoch)
                         .where(CONTROLLER.c.broker_id == broker_id)).scalar_one_or_none()
    if epoch is None:
        return None
    conn.execute(sa.update(CONTROLLER).where(CONTROLLER.c.broker_id == broker_id)
                 .values(broker_id=None))
    log.info("broker %d released the controller role (epoch %d)", broker_id, epoch)
    return int(epoch)


def _require_topic(conn: Connection, name: str) -> None:
    found = conn.execute(sa.select(TOPICS.c.name).where(TOPICS.c.name == name)).first()
    if found is None:
        raise UnknownTopicError(f"Topic '{name}' not found.")


def _replicas_of(conn: Connection, topic: str) -> dict[int, tuple[int, ...]]:
    tp = TOPIC_PARTITIONS
    rows = conn.execute(sa.select(tp.c.partition, tp.c.replicas)
                        .where(tp.c.topic == topic).order_by(tp.c.partition)).all()
    return {r.partition: tuple(json.loads(r.replicas)) for r in rows}


def _endpoints_json(endpoints: tuple[Endpoint, ...]) -> str | None:
    """A registration's Kafka endpoints as the ``kafka_endpoints`` column; NULL for none."""
    if not endpoints:
        return None
    return json.dumps([{"listener": e.listener, "host": e.host, "port": e.port,
                        "security_protocol": e.security_protocol} for e in endpoints],
                      separators=(",", ":"))


def _endpoints_of(text: str | None) -> tuple[Endpoint, ...]:
    if not text:
        return ()
    try:
        return tuple(Endpoint(str(e["listener"]), str(e["host"]), int(e["port"]),
                              str(e["security_protocol"])) for e in json.loads(text))
    except (ValueError, TypeError, KeyError) as exc:
        raise MetadataStoreError(f"brokers.kafka_endpoints is not what franz writes: "
                                 f"{text[:200]!r}") from exc


def _state_columns(state: PartitionState) -> dict[str, object]:
    return {"leader": state.leader, "leader_epoch": state.leader_epoch,
            "isr": _json_ints(state.isr), "controller_epoch": state.controller_epoch}


def _json_ints(values: tuple[int, ...] | list[int]) -> str:
    return json.dumps([int(v) for v in values], separators=(",", ":"))


def _insert_partitions(
    conn: Connection, topic: str, partitions: Mapping[int, tuple[int, ...]],
    states: Mapping[int, PartitionState],
) -> None:
    if not partitions:
        return
    empty = {"leader": None, "leader_epoch": None, "isr": None, "controller_epoch": None}
    rows = []
    for p, replicas in sorted(partitions.items()):
        state = states.get(p)
        rows.append({"topic": topic, "partition": p, "replicas": _json_ints(tuple(replicas)),
                     "version": 0, **(_state_columns(state) if state else empty)})
    conn.execute(sa.insert(TOPIC_PARTITIONS), rows)


def _insert_configs(conn: Connection, topic: str, configs: Mapping[str, str]) -> None:
    if configs:
        conn.execute(sa.insert(TOPIC_CONFIGS),
                     [{"topic": topic, "key": k, "value": v} for k, v in configs.items()])
