"""The broker's own idempotent producer (issue 15): producer id blocks from the metadata
store, one producer id per in-flight append of a partition, sequences moving on after a
success, a new epoch after an unknown outcome, and the batches it writes stamped so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.assembly import build_broker
from app.settings import load_config
from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.produce import idempotence
from core.broker.produce.idempotence import GatewayProducers, ProducerIdSource
from core.broker.types import ProduceColumns, TopicPartition
from core.clock import ManualClock
from core.storage.batch import iter_batches

TP, OTHER = TopicPartition("t", 0), TopicPartition("t", 1)


def pool(max_producers: int = 64, block: int = 1000) -> tuple[GatewayProducers, list[int]]:
    claimed: list[int] = []

    async def allocate(count: int) -> tuple[int, int]:
        start = len(claimed) * count + 7000
        claimed.append(start)
        return start, start + count - 1

    return GatewayProducers(ProducerIdSource(allocate, block_size=block),
                            max_producers=max_producers), claimed


async def test_in_flight_appends_of_a_partition_get_their_own_producer_id() -> None:
    p, _ = pool()
    first, second = await p.lease(TP), await p.lease(TP)
    assert first.producer_id != second.producer_id
    other = await p.lease(OTHER)  # another partition may share a busy producer id
    assert other.producer_id == first.producer_id
    first.done(10)
    again = await p.lease(TP)
    assert (again.producer_id, again.producer_epoch, again.base_sequence) == (
        first.producer_id, 0, 10)


async def test_an_unknown_outcome_starts_a_new_epoch_at_sequence_zero() -> None:
    p, _ = pool()
    lease = await p.lease(TP)
    lease.done(5)
    lease = await p.lease(TP)
    assert lease.base_sequence == 5
    lease.failed()
    lease = await p.lease(TP)
    assert (lease.producer_epoch, lease.base_sequence) == (1, 0)
    lease.done(2**31 - 1)  # sequences wrap at 2^31 as Kafka's
    lease = await p.lease(TP)
    assert lease.base_sequence == 2**31 - 1
    lease.done(3)
    assert (await p.lease(TP)).base_sequence == 2


async def test_a_producer_id_out_of_epochs_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idempotence, "MAX_EPOCH", 2)
    p, _ = pool()
    for _ in range(2):
        lease = await p.lease(TP)
        lease.failed()
    old = (await p.lease(TP))
    old_id = old.producer_id
    old.failed()  # epoch 2 is the last: retired
    fresh = await p.lease(TP)
    assert fresh.producer_id != old_id and fresh.producer_epoch == 0
    assert old_id not in p.producer_ids


async def test_leases_wait_when_every_producer_id_is_busy_and_blocks_are_claimed() -> None:
    p, claimed = pool(max_producers=2, block=1)
    a, b = await p.lease(TP), await p.lease(TP)
    assert len(claimed) == 2  # a block of one id each
    waiting = asyncio.ensure_future(p.lease(TP))
    other = asyncio.ensure_future(p.lease(OTHER))
    await asyncio.sleep(0.01)
    assert not waiting.done() and other.done()  # OTHER is not busy on either id
    b.done(1)
    c = await asyncio.wait_for(waiting, 1)
    assert c.producer_id == b.producer_id and c.base_sequence == 1
    a.done(1)
    c.done(1)


async def test_the_sql_catalog_hands_out_disjoint_blocks(tmp_path: Path) -> None:
    store = EmbeddedMetadataStore(f"sqlite:///{tmp_path / 'm.db'}", clock=ManualClock())
    await store.start()
    try:
        blocks = await asyncio.gather(*(store.allocate_producer_ids(b, 1000) for b in range(8)))
    finally:
        await store.close()
    assert sorted(blocks) == [(i * 1000, i * 1000 + 999) for i in range(8)]
    store = EmbeddedMetadataStore(f"sqlite:///{tmp_path / 'm.db'}", clock=ManualClock())
    await store.start()
    try:  # a restart never hands an id out again
        assert await store.allocate_producer_ids(0, 1000) == (8000, 8999)
    finally:
        await store.close()


async def test_the_broker_stamps_its_batches_with_producer_ids_and_sequences(
        tmp_path: Path) -> None:
    b = await build_broker(load_config(overrides={
        "log.dirs": str(tmp_path / "d"), "offsets.topic.num.partitions": 1}, environ={}))
    await b.start()
    try:
        await b.create_topic("s", partitions=1)
        for n in (3, 4, 5):
            await b.produce("s", ProduceColumns([b"v"] * n), partition=0)
        data = (await b.fetch("s", 0, 0, max_bytes=1 << 20)).records
        assert len(data) == 12
        raw = b"".join(p.read_bytes() for p in sorted((tmp_path / "d" / "s-0").glob("*.log")))
        headers = [h for _, h in iter_batches(raw)]
        assert {h.producer_id for h in headers} == {headers[0].producer_id}
        assert headers[0].producer_id >= 0 and headers[0].producer_epoch == 0
        assert [h.base_sequence for h in headers] == [0, 3, 7]
    finally:
        await b.stop()


async def test_a_retried_append_is_answered_with_its_original_offsets_once(
        tmp_path: Path) -> None:
    """What the router does after a leader failover or an abandoned forward: the same
    stamped batch sent again. The leader's producer state answers the original offsets
    and the log holds one copy."""
    b = await build_broker(load_config(overrides={
        "log.dirs": str(tmp_path / "d"), "offsets.topic.num.partitions": 1}, environ={}))
    await b.start()
    try:
        await b.create_topic("r", partitions=1)
        await b.produce("r", ProduceColumns([b"a", b"b"]), partition=0)
        seg = next((tmp_path / "d" / "r-0").glob("*.log"))
        first_batch = bytearray(seg.read_bytes())
        await b.produce("r", ProduceColumns([b"c"]), partition=0)
        info = await b.local_append("r", 0, bytearray(first_batch), acks=-1, timeout_ms=1000)
        assert info.duplicate and (info.first_offset, info.last_offset) == (0, 1)
        records = (await b.fetch("r", 0, 0, max_bytes=1 << 20)).records
        assert [r.value for r in records] == [b"a", b"b", b"c"]
    finally:
        await b.stop()
