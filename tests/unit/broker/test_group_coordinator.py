"""GroupCoordinator: ownership and loading, membership writes, commits, admin calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _group_backend_fake import FakeGroupBackend

from core.broker.errors import (
    ConsumerAlreadyExistsError,
    ConsumerInstanceNotFoundError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
)
from core.broker.group import offsets_codec as codec
from core.broker.group.coordinator import GroupCoordinator
from core.broker.group.group import CommittedOffset, GroupState, Member
from core.broker.group.records import offset_commit_record
from core.broker.types import TopicPartition as TP
from core.clock import ManualClock


def member(mid: str, topics: tuple[str, ...] = (), pattern: str | None = None) -> Member:
    return Member(mid, mid, "", 10_000, 10_000, topics=topics, pattern=pattern)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def backend(tmp_path: Path, clock: ManualClock) -> Iterator[FakeGroupBackend]:
    b = FakeGroupBackend(tmp_path / "logs", clock=clock)
    b.create_topic("t", 4)
    yield b
    b.close()


async def coordinator(
    backend: FakeGroupBackend, clock: ManualClock, **kw: object
) -> GroupCoordinator:
    c = GroupCoordinator(backend, clock=clock, **kw)  # type: ignore[arg-type]
    await c.load_owned()
    return c


async def test_join_writes_group_metadata_and_survives_reload(backend, clock) -> None:
    c = await coordinator(backend, clock)
    await c.join("g", member("a", ("t",)))
    await c.join("g", member("b", ("t",)))
    p = c.partition_for("g")
    records = backend.offsets_records(p)
    assert len(records) == 2
    assert isinstance(codec.decode_key(records[-1].key), codec.GroupMetadataKey)
    value = codec.decode_group_metadata_value(records[-1].value)
    assert value.generation == 2 and [m.member_id for m in value.members] == ["a", "b"]

    reopened = backend.reopen()
    fresh = await coordinator(reopened, clock)
    desc = await fresh.describe_group("g")
    assert desc.state is GroupState.STABLE and desc.generation == 2 and desc.leader == "a"
    assert [m.assignment for m in desc.members] == [
        (TP("t", 0), TP("t", 1)),
        (TP("t", 2), TP("t", 3)),
    ]
    reopened.close()


async def test_duplicate_member_is_refused(backend, clock) -> None:
    c = await coordinator(backend, clock)
    await c.join("g", member("a"))
    with pytest.raises(ConsumerAlreadyExistsError):
        await c.join("g", member("a"))


async def test_leave_of_last_member_leaves_empty_group(backend, clock) -> None:
    c = await coordinator(backend, clock)
    await c.join("g", member("a", ("t",)))
    assert await c.leave("g", ["a", "nobody"]) == ["a"]
    group = await c.group("g")
    assert group is not None and group.state is GroupState.EMPTY and group.generation == 2
    fresh = await coordinator(backend, clock)
    assert (await fresh.describe_group("g")).state is GroupState.EMPTY


async def test_expire_removes_only_members_past_their_deadline(backend, clock) -> None:
    c = await coordinator(backend, clock)
    await c.join("g", member("a", ("t",)))
    await c.join("g", member("b", ("t",)))
    clock.advance(6_000)
    c.touch("g", "b")
    clock.advance(6_000)
    assert await c.expire(clock.now_ms()) == [("g", "a")]
    assert (await c.group("g")).members["b"].assignment == tuple(TP("t", p) for p in range(4))


async def test_commit_round_trip_and_reload(backend, clock) -> None:
    c = await coordinator(backend, clock)
    await c.commit_offsets("g", {TP("t", 0): (42, "meta"), TP("t", 1): (7, "")})
    got = await c.committed("g", [TP("t", 0), TP("t", 1), TP("t", 2)])
    assert {tp: (v.offset, v.metadata) for tp, v in got.items()} == {
        TP("t", 0): (42, "meta"),
        TP("t", 1): (7, ""),
    }
    assert got[TP("t", 0)].commit_timestamp == clock.now_ms()
    fresh = await coordinator(backend, clock)
    assert (await fresh.committed("g"))[TP("t", 0)].offset == 42
    assert (await fresh.describe_group("g")).is_simple


async def test_commit_validation(backend, clock) -> None:
    c = await coordinator(backend, clock, offset_metadata_max_bytes=4)
    with pytest.raises(OffsetMetadataTooLargeError):
        await c.commit_offsets("g", {TP("t", 0): (1, "12345")})
    with pytest.raises(UnknownTopicOrPartitionError):
        await c.commit_offsets("g", {TP("t", 9): (1, "")})
    with pytest.raises(UnknownTopicOrPartitionError):
        await c.commit_offsets("g", {TP("nope", 0): (1, "")})
    with pytest.raises(ConsumerInstanceNotFoundError):
        await c.commit_offsets("g", {TP("t", 0): (1, "")}, member_id="ghost")
    assert await c.committed("g") == {}


async def test_failed_append_leaves_cache_untouched_and_unloads(backend, clock) -> None:
    c = await coordinator(backend, clock)
    await c.commit_offsets("g", {TP("t", 0): (1, "")})
    backend.fail_appends = True
    with pytest.raises(NotCoordinatorError):
        await c.commit_offsets("g", {TP("t", 0): (2, "")})
    backend.fail_appends = False
    # the partition was unloaded; the next call reloads it from the log
    assert (await c.committed("g"))[TP("t", 0)].offset == 1


async def test_not_leader_partition_is_not_coordinated(backend, clock) -> None:
    c = GroupCoordinator(backend, clock=clock)
    p = c.partition_for("g")
    backend.not_leader.add(p)
    assert p not in await c.load_owned()
    with pytest.raises(NotCoordinatorError):
        await c.join("g", member("a"))
    with pytest.raises(NotCoordinatorError):
        c.member("g", "a")
    backend.not_leader.clear()
    c.on_role_change(p, 0)
    await c.join("g", member("a"))
    group = await c.group("g")
    c.on_role_change(p, None)
    assert group.state is GroupState.DEAD
    assert c.list_groups() == []


async def test_delete_group_and_reset_offsets(backend, clock) -> None:
    c = await coordinator(backend, clock)
    await c.join("g", member("a"))
    await c.commit_offsets("g", {TP("t", 0): (3, "")}, member_id="a")
    with pytest.raises(NonEmptyGroupError):
        await c.delete_group("g")
    with pytest.raises(NonEmptyGroupError):
        await c.reset_offsets("g", {TP("t", 0): 0})
    await c.leave("g", ["a"])
    await c.reset_offsets("g", {TP("t", 0): 1})
    assert (await c.committed("g"))[TP("t", 0)].offset == 1
    await c.delete_group("g")
    with pytest.raises(GroupIdNotFoundError):
        await c.describe_group("g")
    with pytest.raises(GroupIdNotFoundError):
        await c.delete_group("g")
    fresh = await coordinator(backend, clock)
    assert fresh.list_groups() == []


async def test_refresh_metadata_follows_patterns_and_partition_counts(backend, clock) -> None:
    c = await coordinator(backend, clock)
    await c.join("g", member("a", pattern="t.*"))
    await c.join("g", member("b", pattern="t.*"))
    group = await c.group("g")
    assert group.members["a"].topics == ("t",)
    assert await c.refresh_metadata() == []  # nothing changed, nothing written
    generation = group.generation
    backend.create_topic("t2", 2)
    backend.create_topic("other", 2)
    assert await c.refresh_metadata() == ["g"]
    assert group.generation == generation + 1
    assert group.members["a"].topics == ("t", "t2")
    assert set(group.members["a"].assignment) == {TP("t", 0), TP("t", 1), TP("t2", 0)}
    backend.create_topic("t", 6)
    assert await c.refresh_metadata() == ["g"]
    assert len(group.members["b"].assignment) == 4


async def test_group_max_size(backend, clock) -> None:
    c = await coordinator(backend, clock, group_max_size=2)
    await c.join("g", member("a"))
    await c.join("g", member("b"))
    with pytest.raises(GroupMaxSizeReachedError, match="group.max.size=2"):
        await c.join("g", member("c"))
    assert sorted((await c.group("g")).members) == ["a", "b"]
    await c.join("other", member("c"))


async def test_empty_groups_expire_after_offsets_retention(backend, clock) -> None:
    """Kafka's offsets retention (KIP-211): a group empty for the retention loses its
    offsets and is gone, also after a reload; a group with members keeps its offsets,
    and a commit to an empty group restarts the wait."""
    day = 86_400_000
    c = await coordinator(backend, clock)
    await c.join("left", member("a", ("t",)))
    await c.commit_offsets("left", {TP("t", 0): (5, "")})
    await c.leave("left", ["a"])
    await c.join("alive", member("b", ("t",)))
    await c.commit_offsets("alive", {TP("t", 1): (7, "")})
    await c.commit_offsets("simple", {TP("t", 2): (9, "")})  # offsets alone, no members
    clock.advance(day - 1)
    assert await c.expire_empty_groups(clock.now_ms(), day) == []
    await c.commit_offsets("simple", {TP("t", 2): (10, "")})
    clock.advance(1)
    assert await c.expire_empty_groups(clock.now_ms(), day) == ["left"]
    with pytest.raises(GroupIdNotFoundError):
        await c.describe_group("left")
    assert (await c.committed("alive"))[TP("t", 1)].offset == 7
    assert await c.committed("left") == {}
    clock.advance(day)
    c.touch("alive", "b")
    assert await c.expire_empty_groups(clock.now_ms(), day) == ["simple"]
    reopened = backend.reopen()
    fresh = await coordinator(reopened, clock)  # the tombstones hold after a reload
    ids = {g.group_id for g in fresh.list_groups()}
    assert "left" not in ids and "simple" not in ids and "alive" in ids
    assert (await fresh.committed("alive"))[TP("t", 1)].offset == 7
    reopened.close()


async def test_a_coordinator_whose_partition_moved_away_and_back_reloads(backend, clock) -> None:
    """A leads the offsets partition at epoch 0, B at 1, A again at 2 (A never told):
    A serves what B wrote, not its old view, and a write decided on the old view is
    refused by the log."""
    a = await coordinator(backend, clock)
    p = a.partition_for("g")
    await a.join("g", member("x"))
    await a.commit_offsets("g", {TP("t", 0): (10, "")})
    old = await a.group("g")
    backend.epochs[p] = 1  # B takes over (the same log: it was replicated)
    b = await coordinator(backend, clock)
    await b.join("g", member("y"))
    await b.commit_offsets("g", {TP("t", 0): (20, "")})
    backend.epochs[p] = 2  # and A leads again
    assert (await a.committed("g"))[TP("t", 0)].offset == 20
    assert sorted((await a.group("g")).members) == ["x", "y"]
    assert old is not None and old.state is GroupState.DEAD
    # a write decided at epoch 0 reaches the log at epoch 2: refused, nothing written
    before = len(backend.offsets_records(p))
    with pytest.raises(NotCoordinatorError):
        await a._append(old, [offset_commit_record("g", TP("t", 0),
                                                   CommittedOffset(1, "", 0))])
    assert len(backend.offsets_records(p)) == before
    assert (await a.committed("g"))[TP("t", 0)].offset == 20


async def test_resigning_drops_the_view_and_answers_not_coordinator(backend, clock) -> None:
    c = await coordinator(backend, clock)
    p = c.partition_for("g")
    await c.join("g", member("x"))
    backend.not_leader.add(p)
    c.on_role_change(p, None)
    assert c.list_groups() == []
    with pytest.raises(NotCoordinatorError):
        c.member("g", "x")
    with pytest.raises(NotCoordinatorError):
        await c.committed("g")
    backend.not_leader.discard(p)
    backend.epochs[p] = 3
    c.on_role_change(p, 3)  # eager: the load starts at once
    await c.runtime.shard(p)
    assert [g.group_id for g in c.list_groups()] == ["g"]
    assert c.member("g", "x").member_id == "x"
