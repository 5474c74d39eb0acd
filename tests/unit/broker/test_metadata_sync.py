"""MetadataSync coalesces the syncs of a topic: a burst of change announcements (a
controller moving the leadership of every partition of a topic) costs a few reads of the
topic, not one each, and every caller still gets a sync that started after its call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.assembly import build_broker
from app.settings import load_config
from core.broker.broker import Broker
from core.broker.metadata.store import MetadataStoreError


@pytest.fixture
async def broker(tmp_path: Path):
    b = await build_broker(load_config(overrides={
        "log.dirs": str(tmp_path / "d"), "offsets.topic.num.partitions": 1}, environ={}))
    await b.start()
    yield b
    await b.stop()


async def test_a_burst_of_syncs_of_one_topic_reads_the_store_a_few_times(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    await broker.create_topic("burst", partitions=4)
    sync, store = broker._sync, broker.store  # type: ignore[attr-defined]
    reads = 0
    real = store.get_partition_states

    async def slow_states(topic: str):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        await asyncio.sleep(0.02)
        return await real(topic)

    monkeypatch.setattr(store, "get_partition_states", slow_states)
    results = await asyncio.gather(*(sync.sync_topic("burst") for _ in range(100)))
    assert reads <= 3, reads
    assert all(r is not None and r.num_partitions == 4 for r in results)
    # a call made while a sync is already reading waits for the next one
    first = asyncio.ensure_future(sync.sync_topic("burst"))
    await asyncio.sleep(0.005)
    before = reads
    await asyncio.gather(first, sync.sync_topic("burst"))
    assert reads == before + 1


async def test_a_failed_shared_sync_fails_its_callers_and_the_next_call_works(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    await broker.create_topic("flaky", partitions=1)
    sync, store = broker._sync, broker.store  # type: ignore[attr-defined]
    real = store.get_topic_configs
    fail = True

    async def flaky(topic: str):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.01)
        if fail:
            raise MetadataStoreError("metadata store: down")
        return await real(topic)

    monkeypatch.setattr(store, "get_topic_configs", flaky)
    outcomes = await asyncio.gather(*(sync.sync_topic("flaky") for _ in range(10)),
                                    return_exceptions=True)
    assert all(isinstance(o, MetadataStoreError) for o in outcomes)
    fail = False
    meta = await sync.sync_topic("flaky")
    assert meta is not None and meta.num_partitions == 1
