"""ConsumerManager: REST consumer instances as group members, over a fake backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _group_backend_fake import FakeGroupBackend

from core.broker.consumer.manager import ConsumerManager
from core.broker.errors import (
    ConsumerAlreadyExistsError,
    ConsumerInstanceNotFoundError,
    IllegalConsumerStateError,
    InvalidConsumerConfigError,
    NoOffsetForPartitionError,
    UnknownTopicOrPartitionError,
)
from core.broker.types import TopicPartition as TP
from core.clock import ManualClock
from core.errors import InvalidRequestError

TIMEOUT_MS = 300_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["long-poll", "local"])
def backend(tmp_path: Path, clock: ManualClock, request: pytest.FixtureRequest
            ) -> Iterator[FakeGroupBackend]:
    """Every test twice: reads that wait long-poll the partitions (led elsewhere), and
    reads that park on their wait sets (led by this broker)."""
    b = FakeGroupBackend(tmp_path / "logs", clock=clock, local=request.param == "local")
    b.create_topic("t", 6)
    yield b
    b.close()


@pytest.fixture
async def manager(backend: FakeGroupBackend, clock: ManualClock) -> ConsumerManager:
    return await make_manager(backend, clock)


async def make_manager(
    backend: FakeGroupBackend, clock: ManualClock, **kw: object
) -> ConsumerManager:
    m = ConsumerManager(backend, clock=clock, **kw)  # type: ignore[arg-type]
    await m.coordinator.load_owned()  # start() without the background loop
    return m


def values(records: list) -> list[bytes]:
    return [r.value for _, r in records]


# --- lifecycle -------------------------------------------------------------------------


async def test_create_get_duplicate_delete(manager: ConsumerManager) -> None:
    info = await manager.create(
        "g", name="c1", format="JSON", auto_offset_reset="earliest", auto_commit=False
    )
    assert (info.instance_id, info.format, info.auto_offset_reset, info.auto_commit) == (
        "c1",
        "json",
        "earliest",
        False,
    )
    assert manager.get("g", "c1") == info
    with pytest.raises(ConsumerAlreadyExistsError):
        await manager.create("g", name="c1")
    generated = await manager.create("g")
    assert generated.instance_id.startswith("rest-consumer-")
    await manager.delete("g", "c1")
    with pytest.raises(ConsumerInstanceNotFoundError):
        manager.get("g", "c1")
    with pytest.raises(ConsumerInstanceNotFoundError):
        await manager.delete("g", "c1")
    with pytest.raises(ConsumerInstanceNotFoundError):
        await manager.poll("other-group", "c1", timeout_ms=10)
    assert [m.member_id for m in (await manager.describe_group("g")).members] == [
        generated.instance_id
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"format": "xml"},
        {"auto_offset_reset": "smallest"},
        {"fetch_min_bytes": -2},
        {"fetch_min_bytes": 10_000_001},
        {"request_timeout_ms": -1},
    ],
)
async def test_invalid_config_is_refused(manager: ConsumerManager, kwargs: dict) -> None:
    with pytest.raises(InvalidConsumerConfigError):
        await manager.create("g", name="c", **kwargs)
    assert (
        manager.coordinator.list_groups() == [] or not (await manager.describe_group("g")).members
    )


# --- subscriptions and rebalances --------------------------------------------------------


async def assignments(manager: ConsumerManager, names: list[str]) -> dict[str, list[TP]]:
    return {n: await manager.assignment("g", n) for n in names}


@pytest.mark.parametrize(
    ("assignor", "expected"),
    [
        (
            "range",
            {
                "a": [TP("t", 0), TP("t", 1), TP("u", 0)],
                "b": [TP("t", 2), TP("t", 3), TP("u", 1)],
                "c": [TP("t", 4), TP("t", 5)],
            },
        ),
        (
            "roundrobin",
            {
                "a": [TP("t", 0), TP("t", 3), TP("u", 0)],
                "b": [TP("t", 1), TP("t", 4), TP("u", 1)],
                "c": [TP("t", 2), TP("t", 5)],
            },
        ),
    ],
)
async def test_subscribe_balances_across_instances(backend, clock, assignor, expected) -> None:
    backend.create_topic("u", 2)
    manager = await make_manager(backend, clock, assignor=assignor)
    for n in "abc":
        await manager.create("g", name=n)
        await manager.subscribe("g", n, topics=["t", "u"])
    assert await assignments(manager, list("abc")) == expected
    assert await manager.subscription("g", "a") == ["t", "u"]
    desc = await manager.describe_group("g")
    assert desc.protocol == assignor and desc.generation == 6


async def test_unsubscribe_and_delete_rebalance(manager: ConsumerManager) -> None:
    for n in "ab":
        await manager.create("g", name=n)
        await manager.subscribe("g", n, topics=["t"])
    assert len(await manager.assignment("g", "a")) == 3
    await manager.unsubscribe("g", "a")
    assert await manager.assignment("g", "a") == []
    assert await manager.subscription("g", "a") == []
    assert len(await manager.assignment("g", "b")) == 6
    await manager.subscribe("g", "a", topics=["t"])
    await manager.delete("g", "b")
    assert len(await manager.assignment("g", "a")) == 6


async def test_idle_instances_expire_and_their_partitions_move(manager, clock) -> None:
    for n in "ab":
        await manager.create("g", name=n)
        await manager.subscribe("g", n, topics=["t"])
    clock.advance(TIMEOUT_MS - 1)
    manager.get("g", "b")  # a heartbeat
    await manager.poll("g", "b", timeout_ms=1)
    clock.advance(2)
    assert await manager.expire_idle() == [("g", "a")]
    with pytest.raises(ConsumerInstanceNotFoundError):
        manager.get("g", "a")
    assert len(await manager.assignment("g", "b")) == 6
    clock.advance(TIMEOUT_MS + 1)
    assert await manager.expire_idle() == [("g", "b")]
    assert (await manager.describe_group("g")).state.value == "Empty"


async def test_pattern_subscription_follows_new_topics(backend, manager) -> None:
    await manager.create("g", name="a")
    await manager.subscribe("g", "a", pattern="t.*")
    assert await manager.subscription("g", "a") == ["t"]
    backend.create_topic("t-new", 1)
    backend.create_topic("x", 1)
    manager.on_topics_changed()
    await manager._refresh  # the scheduled refresh
    assert await manager.subscription("g", "a") == ["t", "t-new"]
    assert TP("t-new", 0) in await manager.assignment("g", "a")
    with pytest.raises(InvalidRequestError):
        await manager.subscribe("g", "a", pattern="(")
    with pytest.raises(InvalidRequestError):
        await manager.subscribe("g", "a")


async def test_subscribe_and_assign_exclude_each_other(manager: ConsumerManager) -> None:
    await manager.create("g", name="a")
    await manager.assign("g", "a", [TP("t", 1), TP("t", 4)])
    assert await manager.assignment("g", "a") == [TP("t", 1), TP("t", 4)]
    with pytest.raises(IllegalConsumerStateError):
        await manager.subscribe("g", "a", topics=["t"])
    await manager.create("g", name="b")
    await manager.subscribe("g", "b", topics=["t"])
    assert len(await manager.assignment("g", "b")) == 6  # manual members are not counted
    with pytest.raises(IllegalConsumerStateError):
        await manager.assign("g", "b", [TP("t", 0)])
    with pytest.raises(UnknownTopicOrPartitionError):
        await manager.assign("g", "a", [TP("t", 6)])
    await manager.unsubscribe("g", "a")
    assert await manager.assignment("g", "a") == []
    await manager.subscribe("g", "a", topics=["t"])
    assert len(await manager.assignment("g", "a")) == 3


# --- positions and reads -----------------------------------------------------------------


async def test_poll_reads_from_committed_or_reset_position(backend, manager) -> None:
    backend.produce("t", 0, [b"a", b"b", b"c"])
    await manager.create("g", name="early", auto_offset_reset="earliest", auto_commit=False)
    await manager.create("g2", name="late", auto_offset_reset="latest", auto_commit=False)
    await manager.create("g3", name="none", auto_offset_reset="none", auto_commit=False)
    for group, name in (("g", "early"), ("g2", "late"), ("g3", "none")):
        await manager.assign(group, name, [TP("t", 0)])
    assert values(await manager.poll("g", "early", timeout_ms=10)) == [b"a", b"b", b"c"]
    assert await manager.poll("g2", "late", timeout_ms=10) == []
    with pytest.raises(NoOffsetForPartitionError):
        await manager.poll("g3", "none", timeout_ms=10)
    await manager.coordinator.commit_offsets("g3", {TP("t", 0): (1, "")})
    assert values(await manager.poll("g3", "none", timeout_ms=10)) == [b"b", b"c"]


async def test_poll_answers_at_once_when_data_is_there(backend, manager) -> None:
    backend.produce("t", 3, [b"x"])
    await manager.create("g", name="a", auto_offset_reset="earliest")
    await manager.subscribe("g", "a", topics=["t"])
    started = time.monotonic()
    records = await manager.poll("g", "a", timeout_ms=5_000)
    assert time.monotonic() - started < 1.0
    assert [(tp, r.offset, r.value) for tp, r in records] == [(TP("t", 3), 0, b"x")]


async def test_poll_waits_for_the_timeout_when_nothing_comes(manager) -> None:
    await manager.create("g", name="a", auto_offset_reset="earliest")
    await manager.subscribe("g", "a", topics=["t"])
    started = time.monotonic()
    assert await manager.poll("g", "a", timeout_ms=300) == []
    assert 0.25 <= time.monotonic() - started < 2.0


async def test_poll_wakes_on_the_first_data_of_any_partition(backend, manager) -> None:
    await manager.create("g", name="a", auto_offset_reset="earliest", request_timeout_ms=10_000)
    await manager.subscribe("g", "a", topics=["t"])

    async def produce_later() -> None:
        await asyncio.sleep(0.1)
        backend.produce("t", 5, [b"late"])

    started = time.monotonic()
    task = asyncio.create_task(produce_later())
    records = await manager.poll("g", "a", timeout_ms=10_000)
    await task
    assert values(records) == [b"late"]
    assert time.monotonic() - started < 2.0


async def test_waiting_read_wakes_when_its_topic_appears(backend, manager) -> None:
    await manager.create("g", name="a", auto_offset_reset="earliest", request_timeout_ms=10_000)
    await manager.subscribe("g", "a", topics=["later"])
    assert await manager.assignment("g", "a") == []

    async def create_later() -> None:
        await asyncio.sleep(0.1)
        backend.create_topic("later", 1)
        backend.produce("later", 0, [b"hello"])
        manager.on_topics_changed()

    started = time.monotonic()
    task = asyncio.create_task(create_later())
    records = await manager.poll("g", "a", timeout_ms=10_000)
    await task
    assert values(records) == [b"hello"]
    assert time.monotonic() - started < 2.0


async def test_instance_timeout_caps_the_query_timeout(manager) -> None:
    await manager.create("g", name="a", request_timeout_ms=100)
    await manager.subscribe("g", "a", topics=["t"])
    started = time.monotonic()
    assert await manager.poll("g", "a", timeout_ms=10_000) == []
    assert time.monotonic() - started < 1.0


async def test_poll_without_assignment_waits_then_returns_empty(manager) -> None:
    await manager.create("g", name="a")
    started = time.monotonic()
    assert await manager.poll("g", "a", timeout_ms=200) == []
    assert time.monotonic() - started >= 0.15


async def test_max_bytes_below_one_record_still_returns_that_record(backend, manager) -> None:
    backend.produce("t", 0, [b"x" * 100, b"y" * 100, b"z" * 100])
    await manager.create("g", name="a", auto_offset_reset="earliest", auto_commit=False)
    await manager.assign("g", "a", [TP("t", 0)])
    assert values(await manager.poll("g", "a", timeout_ms=10, max_bytes=10)) == [b"x" * 100]
    assert values(await manager.poll("g", "a", timeout_ms=10, max_bytes=250)) == [
        b"y" * 100,
        b"z" * 100,
    ]
    assert await manager.poll("g", "a", timeout_ms=10, max_bytes=10) == []


async def test_key_and_value_count_against_max_bytes(backend, manager) -> None:
    backend.produce("t", 0, [b"v" * 10] * 4, key=b"k" * 10)
    await manager.create("g", name="a", auto_offset_reset="earliest")
    await manager.assign("g", "a", [TP("t", 0)])
    assert len(await manager.poll("g", "a", timeout_ms=10, max_bytes=45)) == 2


async def test_reads_rotate_over_partitions(backend, manager) -> None:
    for p in range(3):
        backend.produce("t", p, [f"{p}-{i}".encode() for i in range(5)])
    await manager.create("g", name="a", auto_offset_reset="earliest")
    await manager.assign("g", "a", [TP("t", 0), TP("t", 1), TP("t", 2)])
    firsts = []
    for _ in range(3):
        records = await manager.poll("g", "a", timeout_ms=10, max_bytes=1)
        firsts.append(records[0][0].partition)
    assert sorted(firsts) == [0, 1, 2]


async def test_seek_variants(backend, manager) -> None:
    backend.produce("t", 0, [b"a", b"b"], timestamp=1_000)
    backend.produce("t", 0, [b"c", b"d"], timestamp=2_000)
    await manager.create("g", name="a", auto_offset_reset="latest", auto_commit=False)
    await manager.assign("g", "a", [TP("t", 0)])
    await manager.seek("g", "a", {TP("t", 0): 1})
    assert values(await manager.poll("g", "a", timeout_ms=10)) == [b"b", b"c", b"d"]
    await manager.seek_to_beginning("g", "a", [TP("t", 0)])
    assert values(await manager.poll("g", "a", timeout_ms=10)) == [b"a", b"b", b"c", b"d"]
    await manager.seek_to_timestamp("g", "a", {TP("t", 0): 1_500})
    assert values(await manager.poll("g", "a", timeout_ms=10)) == [b"c", b"d"]
    await manager.seek_to_timestamp("g", "a", {TP("t", 0): 9_999})  # nothing that late: end
    assert await manager.poll("g", "a", timeout_ms=10) == []
    await manager.seek_to_beginning("g", "a", [TP("t", 0)])
    await manager.seek_to_end("g", "a", [TP("t", 0)])
    backend.produce("t", 0, [b"e"])
    assert values(await manager.poll("g", "a", timeout_ms=10)) == [b"e"]
    for call in (
        manager.seek("g", "a", {TP("t", 1): 0}),
        manager.seek_to_beginning("g", "a", [TP("t", 1)]),
        manager.seek_to_end("g", "a", [TP("t", 1)]),
        manager.seek_to_timestamp("g", "a", {TP("t", 1): 0}),
    ):
        with pytest.raises(IllegalConsumerStateError):
            await call


async def test_seek_during_a_long_poll_restarts_it(backend, manager) -> None:
    backend.produce("t", 0, [b"a", b"b"])
    await manager.create("g", name="a", auto_offset_reset="latest", request_timeout_ms=5_000)
    await manager.assign("g", "a", [TP("t", 0)])
    poll = asyncio.create_task(manager.poll("g", "a", timeout_ms=5_000))
    await asyncio.sleep(0.05)
    await manager.seek("g", "a", {TP("t", 0): 0})
    records = await asyncio.wait_for(poll, 2)
    assert values(records) == [b"a", b"b"]


async def test_out_of_range_position_resets(backend, manager) -> None:
    backend.produce("t", 0, [b"a", b"b", b"c"])
    backend.topics["t"][0].maybe_increment_log_start_offset(2)
    await manager.create("g", name="a", auto_offset_reset="earliest", auto_commit=False)
    await manager.assign("g", "a", [TP("t", 0)])
    await manager.seek("g", "a", {TP("t", 0): 0})
    assert values(await manager.poll("g", "a", timeout_ms=10)) == [b"c"]


# --- commits -------------------------------------------------------------------------------


async def test_commit_and_committed_round_trip(backend, manager) -> None:
    backend.produce("t", 0, [b"a", b"b", b"c"])
    backend.produce("t", 1, [b"%d" % i for i in range(7)])
    await manager.create("g", name="a", auto_offset_reset="earliest", auto_commit=False)
    await manager.assign("g", "a", [TP("t", 0), TP("t", 1)])
    await manager.commit("g", "a", {TP("t", 1): (5, "meta")})
    assert await manager.committed("g", "a", [TP("t", 0), TP("t", 1)]) == {TP("t", 1): (5, "meta")}
    records = await manager.poll("g", "a", timeout_ms=10)
    assert sorted((tp.partition, r.offset) for tp, r in records) == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 5),
        (1, 6),
    ]  # t-1 resumes at its commit
    await manager.commit("g", "a", None)  # the positions
    assert await manager.committed("g", "a", [TP("t", 0), TP("t", 1)]) == {
        TP("t", 0): (3, ""),
        TP("t", 1): (7, ""),
    }
    assert await manager.group_offsets("g") == {TP("t", 0): 3, TP("t", 1): 7}


async def test_auto_commit_commits_the_previous_reads(backend, manager) -> None:
    backend.produce("t", 0, [b"a", b"b"])
    await manager.create("g", name="a", auto_offset_reset="earliest")
    await manager.assign("g", "a", [TP("t", 0)])
    assert len(await manager.poll("g", "a", timeout_ms=10)) == 2
    assert await manager.committed("g", "a", [TP("t", 0)]) == {}
    await manager.poll("g", "a", timeout_ms=10)
    assert await manager.committed("g", "a", [TP("t", 0)]) == {TP("t", 0): (2, "")}
    writes = len(backend.offsets_records(manager.coordinator.partition_for("g")))
    await manager.poll("g", "a", timeout_ms=10)  # nothing new: nothing written
    assert len(backend.offsets_records(manager.coordinator.partition_for("g"))) == writes


async def test_rebalance_auto_commits_before_partitions_move(backend, manager) -> None:
    for p in range(6):
        backend.produce("t", p, [b"x"])
    await manager.create("g", name="a", auto_offset_reset="earliest")
    await manager.subscribe("g", "a", topics=["t"])
    assert len(await manager.poll("g", "a", timeout_ms=10)) == 6
    await manager.create("g", name="b", auto_offset_reset="earliest")
    await manager.subscribe("g", "b", topics=["t"])
    assert await manager.group_offsets("g") == {TP("t", p): 1 for p in range(6)}
    assert await manager.poll("g", "b", timeout_ms=10) == []  # b resumes after a's commits


# --- restart ---------------------------------------------------------------------------------


async def test_restart_restores_instances_assignments_and_offsets(backend, clock) -> None:
    for p in range(6):
        backend.produce("t", p, [b"0", b"1", b"2"])
    first = await make_manager(backend, clock)
    await first.create(
        "g", name="a", format="json", auto_offset_reset="earliest", auto_commit=False
    )
    await first.create("g", name="b", auto_offset_reset="earliest", auto_commit=False)
    await first.subscribe("g", "a", topics=["t"])
    await first.subscribe("g", "b", pattern="t")
    await first.create("h", name="m", auto_offset_reset="earliest")
    await first.assign("h", "m", [TP("t", 5)])
    await first.poll("g", "a", timeout_ms=10)
    await first.commit("g", "a", {TP("t", 0): (2, ""), TP("t", 1): (1, "x")})
    before = {n: await first.assignment("g", n) for n in "ab"}

    # a restart: the logs are closed and opened again, a new coordinator and manager
    backend = backend.reopen()
    second = await make_manager(backend, clock)
    info = second.get("g", "a")
    assert (info.format, info.auto_offset_reset, info.auto_commit) == ("json", "earliest", False)
    assert {n: await second.assignment("g", n) for n in "ab"} == before
    assert await second.subscription("g", "a") == ["t"]
    assert await second.subscription("g", "b") == ["t"]
    assert await second.assignment("h", "m") == [TP("t", 5)]
    assert await second.committed("g", "a", [TP("t", 0), TP("t", 1)]) == {
        TP("t", 0): (2, ""),
        TP("t", 1): (1, "x"),
    }
    got = await second.poll("g", "a", timeout_ms=10)
    assert sorted((tp.partition, r.offset) for tp, r in got) == [
        (0, 2),
        (1, 1),
        (1, 2),
        (2, 0),
        (2, 1),
        (2, 2),
    ]
    desc = await second.describe_group("g")
    assert desc.state.value == "Stable" and [m.member_id for m in desc.members] == ["a", "b"]
    # the restored instances still expire when idle
    clock.advance(TIMEOUT_MS + 1)
    expired = await second.expire_idle()
    assert sorted(expired) == [("g", "a"), ("g", "b"), ("h", "m")]
    backend.close()


async def test_stop_auto_commits_what_was_read(backend, manager) -> None:
    backend.produce("t", 0, [b"a", b"b"])
    await manager.create("g", name="a", auto_offset_reset="earliest")
    await manager.assign("g", "a", [TP("t", 0)])
    await manager.poll("g", "a", timeout_ms=10)
    await manager.stop()
    assert await manager.group_offsets("g") == {TP("t", 0): 2}


def test_unknown_assignor_is_refused(backend) -> None:
    with pytest.raises(ValueError, match="assignor"):
        ConsumerManager(backend, assignor="nope")
    with pytest.raises(ValueError, match="assignor"):
        ConsumerManager(backend, config={"consumer.partition.assignment.strategy": "x"})


async def test_start_and_stop_run_the_maintenance_loop(backend, clock) -> None:
    manager = ConsumerManager(backend, clock=clock, config={"consumer.instance.timeout.ms": 50})
    await manager.start()
    await manager.create("g", name="a")
    clock.advance(100)
    for _ in range(40):
        await asyncio.sleep(0.05)
        if not (await manager.describe_group("g")).members:
            break
    await manager.stop()
    assert not (await manager.describe_group("g")).members


async def test_a_wait_whose_reads_cannot_move_neither_spins_nor_stalls(backend, manager) -> None:
    """A partition reported readable (high watermark above the position) whose reads
    bring nothing is read again once, then waited on: the poll ends at its timeout and
    the event loop keeps running meanwhile."""
    backend.local = True
    real_watch = backend.data_watch

    def stale_watch(topic: str, partition: int):  # noqa: ANN202
        watch = real_watch(topic, partition)
        return watch and watch._replace(high_watermark=watch.high_watermark + 1)

    backend.data_watch = stale_watch
    await manager.create("g", name="a", auto_offset_reset="earliest")
    await manager.subscribe("g", "a", topics=["t"])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    started = time.monotonic()
    try:
        assert await manager.poll("g", "a", timeout_ms=300) == []
    finally:
        task.cancel()
    assert 0.25 <= time.monotonic() - started < 2.0
    assert ticks >= 10  # the loop was not blocked by a read-again spin


async def test_data_that_comes_while_a_read_is_between_partitions_is_not_missed(
    backend, manager
) -> None:
    """The first pass awaits each partition in turn; a record appended to a partition
    already passed must still end the wait at once."""
    await manager.create("g", name="a", auto_offset_reset="earliest", request_timeout_ms=10_000)
    await manager.assign("g", "a", [TP("t", 0), TP("t", 1)])
    real_fetch = backend.fetch
    produced = False

    async def fetch(topic: str, partition: int, offset: int, **kw):  # noqa: ANN003, ANN202
        nonlocal produced
        if partition == 1 and not produced:  # t-0 was read empty a moment ago
            produced = True
            backend.produce("t", 0, [b"in between"])
            await asyncio.sleep(0)
        return await real_fetch(topic, partition, offset, **kw)

    backend.fetch = fetch
    started = time.monotonic()
    records = await manager.poll("g", "a", timeout_ms=5_000)
    assert values(records) == [b"in between"]
    assert time.monotonic() - started < 1.0
