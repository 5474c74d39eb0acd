"""The embedded (SQLite) store keeps a registration's Kafka endpoints (Alembic 0005:
``brokers.kafka_endpoints``): a round trip, a reopened file, and registrations written
before the column existed."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

import migrations
from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.metadata.store import BrokerRegistration, Endpoint, MetadataStoreError
from core.clock import ManualClock

ENDPOINTS = (Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
             Endpoint("EXTERNAL", "::1", 9094, "SASL_SSL"))


async def _open(url: str) -> EmbeddedMetadataStore:
    store = EmbeddedMetadataStore(url, clock=ManualClock())
    await store.start()
    return store


async def test_kafka_endpoints_round_trip_and_survive_a_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    store = await _open(url)
    try:
        with_them = await store.register_broker(BrokerRegistration(
            0, "127.0.0.1", 8082, rack="r", kafka_endpoints=ENDPOINTS))
        without = await store.register_broker(BrokerRegistration(1, "127.0.0.1", 8083))
        assert with_them.kafka_endpoints == ENDPOINTS
        assert await store.live_brokers() == [with_them, without]
        assert without.kafka_endpoints == ()
    finally:
        await store.close()
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = {r[0]: r[1] for r in conn.exec_driver_sql(
                "SELECT broker_id, kafka_endpoints FROM brokers")}
    finally:
        engine.dispose()
    assert rows[1] is None  # none: NULL
    assert rows[0] == ('[{"listener":"PLAINTEXT","host":"127.0.0.1","port":9092,'
                       '"security_protocol":"PLAINTEXT"},{"listener":"EXTERNAL","host":"::1",'
                       '"port":9094,"security_protocol":"SASL_SSL"}]')
    store = await _open(url)
    try:
        assert (await store.live_brokers())[0].kafka_endpoints == ENDPOINTS
        # registering again (a restart) replaces them
        again = await store.register_broker(BrokerRegistration(0, "127.0.0.1", 8082))
        assert (await store.live_brokers())[0] == again and again.kafka_endpoints == ()
    finally:
        await store.close()


async def test_a_registration_written_before_0005_reads_without_endpoints(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    command.upgrade(migrations.alembic_config(url), "0004")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO brokers (broker_id, host, port, rack, timestamp_ms, "
                                 "epoch) VALUES (3, 'h', 8082, NULL, 5, 9)")
    finally:
        engine.dispose()
    store = await _open(url)  # migrates to the head
    try:
        assert await store.live_brokers() == [BrokerRegistration(3, "h", 8082, None, 5, 9)]
    finally:
        await store.close()


async def test_a_column_franz_did_not_write_is_a_store_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    store = await _open(url)
    try:
        await store.register_broker(BrokerRegistration(0, "h", 8082))
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql("UPDATE brokers SET kafka_endpoints = '[{\"port\": 1}]'")
        finally:
            engine.dispose()
        with pytest.raises(MetadataStoreError, match="brokers.kafka_endpoints"):
            await store.live_brokers()
    finally:
        await store.close()
