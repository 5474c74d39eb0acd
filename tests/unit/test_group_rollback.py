"""A consumer group is never poisoned: a membership change or commit whose write to
``__consumer_offsets`` fails leaves the group as it was, and later joins, subscriptions
and commits of that group work (GroupCoordinator)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "broker"))
from _group_backend_fake import FakeGroupBackend  # noqa: E402

from core.broker.errors import GroupIdNotFoundError, GroupRecordTooLargeError  # noqa: E402
from core.broker.group.coordinator import GroupCoordinator  # noqa: E402
from core.broker.group.group import Group, GroupState, Member  # noqa: E402
from core.broker.types import TopicPartition as TP  # noqa: E402
from core.clock import ManualClock  # noqa: E402
from core.storage.errors import KafkaStorageError, MessageTooLargeError  # noqa: E402

#: the offsets topic's max.message.bytes in these tests
LIMIT = 4096


class LimitedBackend(FakeGroupBackend):
    """Offsets appends larger than ``LIMIT`` fail as the log would refuse them
    (MessageTooLargeError); ``broken`` makes every offsets append fail with it."""

    broken: Exception | None = None

    async def append_offsets(self, partition: int, batch: bytes, *,
                             leader_epoch: int | None = None) -> int:
        if self.broken is not None:
            raise self.broken
        if len(batch) > LIMIT:
            raise MessageTooLargeError(
                f"the record batch size is {len(batch)} bytes, which exceeds the maximum "
                f"configured value of {LIMIT} (max.message.bytes)")
        return await super().append_offsets(partition, batch, leader_epoch=leader_epoch)


class Listener:
    """Records what the coordinator tells the consumer manager."""

    def __init__(self) -> None:
        self.changed: list[tuple[str, frozenset[TP]]] = []

    async def before_rebalance(self, group: Group, leaving: Iterable[Member]) -> None:
        pass

    def on_assignment_changed(self, group: Group, member: Member, revoked: frozenset[TP]) -> None:
        self.changed.append((member.member_id, revoked))

    def readable_topics(self, member: Member, topics: Iterable[str]) -> list[str]:
        return list(topics)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def backend(tmp_path: Path, clock: ManualClock) -> Iterator[LimitedBackend]:
    b = LimitedBackend(tmp_path / "logs", clock=clock)
    b.create_topic("t", 4)
    yield b
    b.close()


async def coordinator(backend: FakeGroupBackend, clock: ManualClock,
                      listener: Listener | None = None) -> GroupCoordinator:
    c = GroupCoordinator(backend, clock=clock, listener=listener)  # type: ignore[arg-type]
    await c.load_owned()
    return c


def member(mid: str, topics: tuple[str, ...] = ("t",), *, host: str = "") -> Member:
    return Member(mid, mid, host, 10_000, 10_000, topics=topics)


def state_of(group: Group) -> tuple[object, ...]:
    return (group.state, group.generation, group.leader_id, group.protocol,
            [(m.member_id, m.topics, m.pattern, m.manual, m.assignment)
             for m in group.members.values()])


async def test_a_join_too_large_to_write_leaves_the_group_as_it_was(backend, clock) -> None:
    listener = Listener()
    c = await coordinator(backend, clock, listener)
    group = await c.join("g", member("a"))
    before = state_of(group)
    listener.changed.clear()
    records_before = len(backend.offsets_records(c.partition_for("g")))

    with pytest.raises(GroupRecordTooLargeError) as err:
        await c.join("g", member("b", host="h" * 5000))  # its metadata cannot fit
    assert "group 'g'" in err.value.message and "nothing was changed" in err.value.message
    assert state_of(group) == before
    assert listener.changed == []  # a's partitions were not taken away, even for a moment
    assert len(backend.offsets_records(c.partition_for("g"))) == records_before

    # the group is not poisoned: the next joins and commits work
    await c.join("g", member("b"))
    assert [m.member_id for m in group.members.values()] == ["a", "b"]
    assert group.generation == 2 and group.state is GroupState.STABLE
    await c.commit_offsets("g", {TP("t", 0): (5, "")}, member_id="a")
    reopened = backend.reopen()
    fresh = await coordinator(reopened, clock)
    desc = await fresh.describe_group("g")
    assert [m.member_id for m in desc.members] == ["a", "b"] and desc.generation == 2
    assert (await fresh.committed("g"))[TP("t", 0)].offset == 5
    reopened.close()


async def test_a_subscription_too_large_to_write_changes_nothing(backend, clock) -> None:
    listener = Listener()
    c = await coordinator(backend, clock, listener)
    group = await c.join("g", member("a"))
    await c.join("g", member("b", ()))
    before = state_of(group)
    listener.changed.clear()
    many = tuple(f"topic-{i:04d}-{'x' * 200}" for i in range(40))

    def subscribe(m: Member) -> None:
        m.topics = many

    with pytest.raises(GroupRecordTooLargeError):
        await c.update_member("g", "b", subscribe, reason="subscribed")
    assert state_of(group) == before
    assert listener.changed == []

    def subscribe_t(m: Member) -> None:
        m.topics = ("t",)

    await c.update_member("g", "b", subscribe_t, reason="subscribed")
    assert {m.member_id: len(m.assignment) for m in group.members.values()} == {"a": 2, "b": 2}


async def test_a_storage_error_leaves_the_group_and_its_offsets_as_they_were(
    backend, clock
) -> None:
    c = await coordinator(backend, clock)
    group = await c.join("g", member("a"))
    await c.commit_offsets("g", {TP("t", 1): (3, "")}, member_id="a")
    before = state_of(group)
    backend.broken = KafkaStorageError("disk gone")
    with pytest.raises(KafkaStorageError):
        await c.join("g", member("b"))
    with pytest.raises(KafkaStorageError):
        await c.leave("g", ["a"])
    with pytest.raises(KafkaStorageError):
        await c.commit_offsets("g", {TP("t", 1): (9, "")}, member_id="a")

    def manual(m: Member) -> frozenset[TP]:
        m.manual, m.topics, m.assignment = True, (), (TP("t", 3),)
        return frozenset()

    with pytest.raises(KafkaStorageError):
        await c.persist_member("g", "a", manual)
    assert state_of(group) == before
    assert (await c.committed("g"))[TP("t", 1)].offset == 3
    backend.broken = None
    await c.join("g", member("b"))
    assert [m.member_id for m in group.members.values()] == ["a", "b"]


async def test_a_new_group_whose_first_write_fails_does_not_appear(backend, clock) -> None:
    c = await coordinator(backend, clock)
    with pytest.raises(GroupRecordTooLargeError):
        await c.join("new", member("a", host="h" * 5000))
    with pytest.raises(GroupIdNotFoundError):
        await c.describe_group("new")
    assert [s.group_id for s in c.list_groups()] == []
    backend.broken = KafkaStorageError("disk gone")
    with pytest.raises(KafkaStorageError):
        await c.commit_offsets("simple", {TP("t", 0): (1, "")})
    backend.broken = None
    assert [s.group_id for s in c.list_groups()] == []
    group = await c.join("new", member("a"))
    assert group.generation == 1 and list(group.members) == ["a"]
    assert [s.group_id for s in c.list_groups()] == ["new"]


async def test_a_commit_too_large_to_write_is_refused_and_the_cache_unchanged(
    backend, clock
) -> None:
    backend.create_topic("wide", 200)
    c = await coordinator(backend, clock)
    await c.commit_offsets("g", {TP("wide", 0): (1, "")})
    with pytest.raises(GroupRecordTooLargeError) as err:
        await c.commit_offsets("g", {TP("wide", p): (7, "m" * 100) for p in range(200)})
    assert "offset commit of group 'g' (200 partitions)" in err.value.message
    assert {tp: o.offset for tp, o in (await c.committed("g")).items()} == {TP("wide", 0): 1}
    await c.commit_offsets("g", {TP("wide", p): (7, "") for p in range(3)})
    assert len(await c.committed("g")) == 3
