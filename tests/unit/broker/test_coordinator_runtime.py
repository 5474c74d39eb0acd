"""CoordinatorRuntime: shards per (partition, leader epoch), dropped on resignation or a
new epoch, writes fenced by the epoch a shard was loaded at."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.broker.coordination.runtime import CoordinatorRuntime, Shard
from core.broker.errors import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
)
from core.storage.records import Record


class Writer:
    """An internal topic in memory: ``epochs[p]`` the epoch led at (absent: not led)."""

    topic = "__t"

    def __init__(self) -> None:
        self.epochs: dict[int, int] = {0: 0}
        self.records: dict[int, list[bytes]] = {}
        self.gate: asyncio.Event | None = None  # holds every read until set

    def leader_epoch(self, partition: int) -> int:
        if partition not in self.epochs:
            raise NotLeaderOrFollowerError(f"not the leader of {partition}")
        return self.epochs[partition]

    async def append(self, partition: int, batch: bytes, *, acks: int, timeout_ms: int,
                     leader_epoch: int | None = None) -> int:
        if leader_epoch is not None and self.leader_epoch(partition) != leader_epoch:
            raise NotLeaderOrFollowerError("another epoch")
        log = self.records.setdefault(partition, [])
        log.append(batch)
        return len(log) - 1

    async def read(self, partition: int) -> AsyncIterator[Record]:
        self.leader_epoch(partition)
        if self.gate is not None:
            await self.gate.wait()
        for i, value in enumerate(list(self.records.get(partition, []))):
            yield Record(i, 0, None, value)


class Runtime:
    def __init__(self, writer: Writer, *, eager: bool = False) -> None:
        self.events: list[tuple[str, int, int]] = []
        self.runtime: CoordinatorRuntime[list[bytes]] = CoordinatorRuntime(
            writer, self.load, loaded=lambda s: self.seen("loaded", s),
            unloaded=lambda s: self.seen("unloaded", s), eager=eager)
        self.writer = writer

    async def load(self, partition: int, epoch: int) -> list[bytes]:
        return [r.value async for r in self.writer.read(partition) if r.value is not None]

    def seen(self, what: str, shard: Shard[list[bytes]]) -> None:
        self.events.append((what, shard.partition, shard.epoch))


async def test_loaded_on_first_use_and_kept_while_the_epoch_holds() -> None:
    w = Writer()
    w.records[0] = [b"a"]
    r = Runtime(w)
    first = await r.runtime.shard(0)
    assert (first.epoch, first.state) == (0, [b"a"])
    assert await r.runtime.shard(0) is first
    assert r.events == [("loaded", 0, 0)]


async def test_a_new_epoch_drops_the_shard_and_loads_again() -> None:
    w = Writer()
    r = Runtime(w)
    old = await r.runtime.shard(0)
    w.records[0] = [b"written by another leader"]
    w.epochs[0] = 2  # no notice: the epoch alone tells
    new = await r.runtime.shard(0)
    assert new is not old and new.state == [b"written by another leader"]
    assert r.events == [("loaded", 0, 0), ("unloaded", 0, 0), ("loaded", 0, 2)]


async def test_not_the_leader_is_not_coordinator_and_drops_the_shard() -> None:
    w = Writer()
    r = Runtime(w)
    await r.runtime.shard(0)
    del w.epochs[0]
    with pytest.raises(NotCoordinatorError):
        await r.runtime.shard(0)
    assert r.runtime.shards() == []
    assert r.events[-1] == ("unloaded", 0, 0)


async def test_resigning_drops_at_once_and_eager_leading_loads() -> None:
    w = Writer()
    r = Runtime(w, eager=True)
    r.runtime.on_role_change(0, 0)
    await asyncio.sleep(0.01)
    assert r.events == [("loaded", 0, 0)]
    r.runtime.on_role_change(0, None)
    assert r.events[-1] == ("unloaded", 0, 0) and r.runtime.current(0) is None


async def test_a_write_under_an_old_epoch_is_refused_and_drops_the_shard() -> None:
    w = Writer()
    r = Runtime(w)
    shard = await r.runtime.shard(0)
    assert await r.runtime.append(0, shard.epoch, b"x", acks=-1, timeout_ms=100) == 0
    w.epochs[0] = 1
    with pytest.raises(NotCoordinatorError):
        await r.runtime.append(0, shard.epoch, b"y", acks=-1, timeout_ms=100)
    assert w.records[0] == [b"x"]
    assert r.events[-1] == ("unloaded", 0, 0)


async def test_a_shard_dropped_while_loading_is_never_installed() -> None:
    w = Writer()
    w.gate = asyncio.Event()
    r = Runtime(w)
    loading = asyncio.ensure_future(r.runtime.shard(0))
    await asyncio.sleep(0.01)
    with pytest.raises(CoordinatorLoadInProgressError):
        r.runtime.loaded(0)
    assert r.runtime.is_loading(0)
    del w.epochs[0]
    r.runtime.on_role_change(0, None)
    w.gate.set()
    with pytest.raises(NotCoordinatorError):
        await loading
    assert r.events == []


async def test_load_all_loads_the_partitions_led_here() -> None:
    w = Writer()
    w.epochs = {0: 0, 2: 5}
    r = Runtime(w)
    assert await r.runtime.load_all(range(4)) == [0, 2]
    assert r.runtime.loaded(2).epoch == 5
