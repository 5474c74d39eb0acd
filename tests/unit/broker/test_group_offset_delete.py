"""OffsetDelete on the group coordinator (``GroupCoordinator.delete_offsets``): tombstones
written as commits are (and so gone after a reload or a coordinator move), Kafka's
refusals (GROUP_SUBSCRIBED_TO_TOPIC per partition, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP),
and ``Group.topics_in_use``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _group_backend_fake import FakeGroupBackend

from core.broker.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
    NotCoordinatorError,
)
from core.broker.group import offsets_codec as codec
from core.broker.group.coordinator import GroupCoordinator
from core.broker.group.group import ClassicMember, Group, Member
from core.broker.types import TopicPartition as TP
from core.clock import ManualClock

SUBSCRIBED = GroupSubscribedToTopicError.error_code


def member(mid: str, topics: tuple[str, ...] = ()) -> Member:
    return Member(mid, mid, "", 10_000, 10_000, topics=topics)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def backend(tmp_path: Path, clock: ManualClock) -> Iterator[FakeGroupBackend]:
    b = FakeGroupBackend(tmp_path / "logs", clock=clock)
    b.create_topic("t", 2)
    b.create_topic("u", 2)
    yield b
    b.close()


async def coordinator(backend: FakeGroupBackend, clock: ManualClock) -> GroupCoordinator:
    c = GroupCoordinator(backend, clock=clock)
    await c.load_owned()
    return c


async def offsets_of(c: GroupCoordinator, group_id: str) -> dict[TP, int]:
    return {tp: o.offset for tp, o in (await c.committed(group_id)).items()}


async def test_an_empty_groups_offsets_are_deleted_with_tombstones_that_outlive_a_reload(
    backend: FakeGroupBackend, clock: ManualClock,
) -> None:
    c = await coordinator(backend, clock)
    await c.commit_offsets("g", {TP("t", 0): (5, ""), TP("t", 1): (6, ""), TP("u", 0): (7, "")})
    p = c.partition_for("g")
    before = len(backend.offsets_records(p))
    codes = await c.delete_offsets("g", [TP("t", 0), TP("t", 1), TP("u", 1)])
    assert codes == {TP("t", 0): 0, TP("t", 1): 0, TP("u", 1): 0}  # u-1 had none: 0 too
    assert await offsets_of(c, "g") == {TP("u", 0): 7}
    tombstones = backend.offsets_records(p)[before:]
    assert [(codec.decode_key(r.key), r.value) for r in tombstones] == [
        (codec.OffsetCommitKey("g", "t", 0), None), (codec.OffsetCommitKey("g", "t", 1), None)]
    reopened = backend.reopen()  # a restart, or a new coordinator on the replicated log
    try:
        assert await offsets_of(await coordinator(reopened, clock), "g") == {TP("u", 0): 7}
    finally:
        reopened.close()


async def test_nothing_is_written_when_no_partition_had_an_offset(
    backend: FakeGroupBackend, clock: ManualClock,
) -> None:
    c = await coordinator(backend, clock)
    await c.commit_offsets("g", {TP("t", 0): (5, "")})
    before = len(backend.offsets_records(c.partition_for("g")))
    assert await c.delete_offsets("g", [TP("u", 0)]) == {TP("u", 0): 0}
    assert len(backend.offsets_records(c.partition_for("g"))) == before


async def test_the_topics_an_active_group_reads_are_refused_the_others_deleted(
    backend: FakeGroupBackend, clock: ManualClock,
) -> None:
    c = await coordinator(backend, clock)
    await c.join("g", member("a", ("t",)))
    await c.commit_offsets("g", {TP("t", 0): (1, ""), TP("u", 0): (2, "")}, member_id="a")
    codes = await c.delete_offsets("g", [TP("t", 0), TP("t", 1), TP("u", 0)])
    assert codes == {TP("t", 0): SUBSCRIBED, TP("t", 1): SUBSCRIBED, TP("u", 0): 0}
    assert await offsets_of(c, "g") == {TP("t", 0): 1}
    await c.leave("g", ["a"])  # Empty now: nothing is refused
    assert await c.delete_offsets("g", [TP("t", 0)]) == {TP("t", 0): 0}
    assert await offsets_of(c, "g") == {}


async def test_an_unknown_group_is_not_found(backend: FakeGroupBackend, clock: ManualClock) -> None:
    c = await coordinator(backend, clock)
    with pytest.raises(GroupIdNotFoundError):
        await c.delete_offsets("nobody", [TP("t", 0)])
    await c.commit_offsets("g", {TP("t", 0): (5, "")})
    await c.delete_offsets("g", [TP("t", 0)])
    with pytest.raises(GroupIdNotFoundError):  # a simple group without offsets is no group
        await c.delete_offsets("g", [TP("t", 0)])


async def test_members_of_another_protocol_type_make_the_group_non_empty(
    backend: FakeGroupBackend, clock: ManualClock,
) -> None:
    c = await coordinator(backend, clock)
    await c.join("g", member("a", ("t",)))
    group = await c.group("g")
    assert group is not None
    group.protocol_type = "connect"  # what Kafka Connect's workers would have
    with pytest.raises(NonEmptyGroupError):
        await c.delete_offsets("g", [TP("u", 0)])


async def test_a_deletion_decided_under_an_old_leader_epoch_is_refused(
    backend: FakeGroupBackend, clock: ManualClock,
) -> None:
    c = await coordinator(backend, clock)
    await c.commit_offsets("g", {TP("t", 0): (5, "")})
    p = c.partition_for("g")
    backend.fail_appends = True  # the log refuses the write (another leader epoch)
    with pytest.raises(NotCoordinatorError):
        await c.delete_offsets("g", [TP("t", 0)])
    backend.fail_appends = False
    assert await offsets_of(c, "g") == {TP("t", 0): 5}  # reloaded: nothing was deleted
    assert all(r.value is not None for r in backend.offsets_records(p))


def test_topics_in_use_are_subscriptions_kafka_clients_own_and_manual_assignments() -> None:
    g = Group("g", partition=0)
    g.members["rest"] = member("rest", ("a",))
    g.members["kafka"] = Member("kafka", "k", "", 10_000, 10_000, topics=("b",),
                                classic=ClassicMember("consumer", (("range", b""),)))
    g.members["manual"] = Member("manual", "m", "", 10_000, 10_000, manual=True,
                                 assignment=(TP("c", 0),))
    g.members["idle"] = member("idle")
    assert g.topics_in_use() == {"a", "b", "c"}
    assert g.subscribed_topics() == {"a"}  # the assignor's view is unchanged
