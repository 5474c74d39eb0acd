"""Kafka's classic group protocol (core.broker.group.classic.ClassicGroups), driven as a
Kafka client library drives it: JoinGroup (with KIP-394's MEMBER_ID_REQUIRED round),
SyncGroup with the leader's assignment, Heartbeat, LeaveGroup, OffsetCommit; static
members; groups mixing Kafka clients with REST consumer instances; the coordinator
resigning and a new one loading the group from __consumer_offsets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from _group_backend_fake import FakeGroupBackend

from core.broker.consumer.manager import ConsumerManager
from core.broker.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from core.broker.group import consumer_protocol
from core.broker.group import offsets_codec as codec
from core.broker.group.assignors import Subscription, assign
from core.broker.group.classic import ClassicGroups
from core.broker.group.classic_types import (
    JoinGroupRequest,
    JoinGroupResult,
    LeavingMember,
    OffsetCommitEntry,
    SyncGroupRequest,
    SyncGroupResult,
)
from core.broker.group.group import GroupState
from core.broker.types import TopicPartition as TP
from core.clock import ManualClock
from core.errors import InvalidRequestError

SESSION_MS = 10_000
REBALANCE_MS = 400  # the join barrier's wait in these tests (real time)
CONFIG = {"group.min.session.timeout.ms": 1_000, "group.max.session.timeout.ms": 60_000}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def backend(tmp_path: Path, clock: ManualClock) -> Iterator[FakeGroupBackend]:
    b = FakeGroupBackend(tmp_path / "logs", clock=clock, local=True)
    b.create_topic("t", 4)
    b.create_topic("u", 2)
    yield b
    b.close()


async def make_manager(backend: FakeGroupBackend, clock: ManualClock,
                       **config: object) -> ConsumerManager:
    m = ConsumerManager(backend, clock=clock, config={**CONFIG, **config})
    await m.coordinator.load_owned()  # start() without the background loop
    return m


@pytest.fixture
async def manager(backend: FakeGroupBackend, clock: ManualClock) -> ConsumerManager:
    return await make_manager(backend, clock)


class Client:
    """A Kafka consumer's group membership, as a client library runs it."""

    def __init__(self, groups: ClassicGroups, group_id: str = "g",
                 topics: tuple[str, ...] = ("t",), *, protocols: tuple[str, ...] = ("range",),
                 instance: str | None = None, name: str = "client",
                 rebalance_ms: int = REBALANCE_MS) -> None:
        self.groups = groups
        self.group_id = group_id
        self.topics = topics
        self.protocols = protocols
        self.instance = instance
        self.name = name
        self.rebalance_ms = rebalance_ms
        self.member_id = ""
        self.generation = -1
        self.joined: JoinGroupResult | None = None
        self.assignment: list[tuple[str, int]] = []

    def request(self) -> JoinGroupRequest:
        meta = consumer_protocol.encode_subscription(self.topics)
        return JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=self.rebalance_ms, member_id=self.member_id,
            protocol_type="consumer", protocols=tuple((p, meta) for p in self.protocols),
            group_instance_id=self.instance, client_id=self.name, client_host="/127.0.0.1")

    async def join(self) -> JoinGroupResult:
        """JoinGroup, again with the member id when MEMBER_ID_REQUIRED hands one out."""
        try:
            result = await self.groups.join_group(self.request())
        except MemberIdRequiredError as exc:
            assert exc.error_code == 79 and exc.member_id.startswith(f"{self.name}-")
            self.member_id = exc.member_id
            result = await self.groups.join_group(self.request())
        self.member_id = result.member_id
        self.generation = result.generation_id
        self.joined = result
        return result

    @property
    def is_leader(self) -> bool:
        return self.joined is not None and self.joined.leader == self.member_id

    def assignments(self) -> tuple[tuple[str, bytes], ...]:
        """The leader's work: the chosen assignor over every member's subscription."""
        assert self.joined is not None and self.is_leader
        subs = {m.member_id: Subscription(consumer_protocol.decode_subscription(m.metadata).topics)
                for m in self.joined.members}
        counts = {"t": 4, "u": 2}
        protocol = self.joined.protocol_name or "range"
        out = assign("sticky" if protocol == "cooperative-sticky" else protocol, subs, counts)
        return tuple((mid, consumer_protocol.encode_assignment(tps)) for mid, tps in out.items())

    async def sync(self) -> SyncGroupResult:
        result = await self.groups.sync_group(SyncGroupRequest(
            self.group_id, self.generation, self.member_id, self.instance, "consumer",
            self.joined.protocol_name if self.joined else None,
            self.assignments() if self.is_leader else ()))
        self.assignment = list(consumer_protocol.decode_assignment(result.assignment).partitions)
        return result

    async def heartbeat(self) -> None:
        await self.groups.heartbeat(self.group_id, self.generation, self.member_id, self.instance)

    async def join_and_sync(self) -> list[tuple[str, int]]:
        await self.join()
        await self.sync()
        return self.assignment


async def everyone(*clients: Client) -> None:
    """All join together, then all sync (followers first: they wait for the leader)."""
    await asyncio.gather(*(c.join() for c in clients))
    generations = {c.generation for c in clients}
    assert len(generations) == 1
    await asyncio.gather(*(c.sync() for c in sorted(clients, key=lambda c: c.is_leader)))


def group_record(backend: FakeGroupBackend, partition: int) -> codec.GroupMetadataValue:
    records = [r for r in backend.offsets_records(partition)
               if isinstance(codec.decode_key(r.key), codec.GroupMetadataKey)]
    return codec.decode_group_metadata_value(records[-1].value)


# --- joining ---------------------------------------------------------------------------


async def test_first_join_needs_the_member_id_then_leads_alone(manager, backend) -> None:
    groups = manager.classic
    a = Client(groups, name="a")
    with pytest.raises(MemberIdRequiredError) as info:
        await groups.join_group(a.request())
    a.member_id = info.value.member_id
    result = await groups.join_group(a.request())
    assert (result.generation_id, result.leader, result.member_id) == (1, a.member_id, a.member_id)
    assert result.protocol_type == "consumer" and result.protocol_name == "range"
    assert [m.member_id for m in result.members] == [a.member_id]
    a.generation, a.joined = result.generation_id, result
    await a.sync()
    assert a.assignment == [("t", p) for p in range(4)]
    desc = await groups.describe_group("g")
    assert desc.state == "Stable" and desc.protocol == "range"
    record = group_record(backend, manager.coordinator.partition_for("g"))
    assert record.generation == 1 and record.protocol == "range"
    assert record.members[0].member_id == a.member_id
    assert consumer_protocol.decode_assignment(record.members[0].assignment).partitions == tuple(
        ("t", p) for p in range(4))


async def test_two_members_join_concurrently(backend, clock) -> None:
    manager = await make_manager(backend, clock, **{"group.initial.rebalance.delay.ms": 150})
    a, b = Client(manager.classic, name="a"), Client(manager.classic, name="b")
    await everyone(a, b)
    leader, follower = (a, b) if a.is_leader else (b, a)
    assert leader.joined and {m.member_id for m in leader.joined.members} == {a.member_id, b.member_id}
    assert follower.joined and follower.joined.members == ()
    assert sorted(a.assignment + b.assignment) == [("t", p) for p in range(4)]
    assert len(a.assignment) == len(b.assignment) == 2


async def test_three_members_and_followers_wait_for_the_leader(backend, clock) -> None:
    manager = await make_manager(backend, clock, **{"group.initial.rebalance.delay.ms": 150})
    clients = [Client(manager.classic, name=n, topics=("t", "u")) for n in "abc"]
    await asyncio.gather(*(c.join() for c in clients))
    leader = next(c for c in clients if c.is_leader)
    followers = [c for c in clients if not c.is_leader]
    waiting = [asyncio.ensure_future(f.sync()) for f in followers]
    await asyncio.sleep(0.05)
    assert not any(w.done() for w in waiting)  # held until the leader's SyncGroup
    group = await manager.coordinator.group("g")
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    await leader.sync()
    await asyncio.gather(*waiting)
    got = sorted(tp for c in clients for tp in c.assignment)
    assert got == sorted([("t", p) for p in range(4)] + [("u", p) for p in range(2)])
    assert group.state is GroupState.STABLE


async def test_a_new_member_rebalances_a_stable_group(manager) -> None:
    a = Client(manager.classic, name="a")
    await a.join_and_sync()
    await a.heartbeat()
    b = Client(manager.classic, name="b")
    joining = asyncio.ensure_future(b.join())
    await asyncio.sleep(0.05)
    assert not joining.done()  # held: a must join again
    with pytest.raises(RebalanceInProgressError):
        await a.heartbeat()
    await a.join()
    await joining
    assert a.generation == b.generation == 2 and a.is_leader
    await everyone_sync(a, b)
    assert len(a.assignment) == len(b.assignment) == 2
    await a.heartbeat()
    await b.heartbeat()
    # a follower joining again with the same metadata: the current generation back
    again = await manager.classic.join_group(b.request())
    assert again.generation_id == 2 and again.members == () and again.leader == a.member_id
    await b.heartbeat()


async def everyone_sync(*clients: Client) -> None:
    await asyncio.gather(*(c.sync() for c in sorted(clients, key=lambda c: c.is_leader)))


async def test_heartbeats_during_and_after_a_rebalance(manager) -> None:
    a = Client(manager.classic, name="a")
    await a.join()
    await a.heartbeat()  # CompletingRebalance: fine
    with pytest.raises(IllegalGenerationError):
        await manager.classic.heartbeat("g", a.generation + 1, a.member_id)
    with pytest.raises(UnknownMemberIdError):
        await manager.classic.heartbeat("g", a.generation, "nobody")
    with pytest.raises(UnknownMemberIdError):
        await manager.classic.heartbeat("other", 1, a.member_id)
    await a.sync()
    await a.heartbeat()  # Stable
    # the leader joining again in Stable rebalances (Kafka: it may have seen new topics)
    assert (await a.join()).generation_id == 2
    await a.heartbeat()
    await a.sync()


async def test_a_member_that_never_rejoins_is_removed_after_the_rebalance_timeout(manager) -> None:
    a, b = Client(manager.classic, name="a"), Client(manager.classic, name="b")
    await a.join_and_sync()
    b_join = asyncio.ensure_future(b.join())
    await asyncio.sleep(0.02)
    await a.join()  # a rejoins; b joined; everyone has: generation 2
    await b_join
    await everyone_sync(a, b)
    c = Client(manager.classic, name="c")
    c_join = asyncio.ensure_future(c.join())
    await asyncio.sleep(0.02)
    a_join = asyncio.ensure_future(a.join())  # b never comes back
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(a_join, c_join)
    assert loop.time() - started >= (REBALANCE_MS - 50) / 1000
    assert a.generation == c.generation == 3
    group = await manager.coordinator.group("g")
    assert group is not None and b.member_id not in group.members
    with pytest.raises(UnknownMemberIdError):
        await b.heartbeat()
    await everyone_sync(a, c)
    assert sorted(a.assignment + c.assignment) == [("t", p) for p in range(4)]


async def test_session_expiry(manager, clock, backend) -> None:
    a, b = Client(manager.classic, name="a"), Client(manager.classic, name="b")
    await a.join_and_sync()
    b_join = asyncio.ensure_future(b.join())
    await asyncio.sleep(0.02)
    await a.join()
    await b_join
    await everyone_sync(a, b)
    clock.advance(SESSION_MS - 1_000)
    await a.heartbeat()
    clock.advance(2_000)  # b is past its session timeout, a is not
    assert await manager.expire_idle() == [("g", b.member_id)]
    with pytest.raises(RebalanceInProgressError):
        await a.heartbeat()
    await a.join_and_sync()
    assert a.generation == 3 and a.assignment == [("t", p) for p in range(4)]
    clock.advance(SESSION_MS + 1)
    assert await manager.expire_idle() == [("g", a.member_id)]
    group = await manager.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY and group.generation == 4
    assert group_record(backend, group.partition).members == ()


async def test_a_pending_member_id_expires(manager, clock) -> None:
    a = Client(manager.classic, name="a")
    with pytest.raises(MemberIdRequiredError) as info:
        await manager.classic.join_group(a.request())
    group = await manager.coordinator.group("g", create=True)
    assert info.value.member_id in group.pending_members
    clock.advance(SESSION_MS + 1)
    await manager.expire_idle()
    assert not group.pending_members
    a.member_id = info.value.member_id
    with pytest.raises(UnknownMemberIdError):
        await manager.classic.join_group(a.request())


async def test_leave_group_per_member_and_rebalance(manager, backend) -> None:
    a, b = Client(manager.classic, name="a"), Client(manager.classic, name="b")
    await a.join_and_sync()
    b_join = asyncio.ensure_future(b.join())
    await asyncio.sleep(0.02)
    await a.join()
    await b_join
    await everyone_sync(a, b)
    results = await manager.classic.leave_group("g", [
        LeavingMember(b.member_id, None, "closing"), LeavingMember("nobody")])
    assert [(r.member_id, r.error_code) for r in results] == [(b.member_id, 0), ("nobody", 25)]
    with pytest.raises(RebalanceInProgressError):
        await a.heartbeat()
    await a.join_and_sync()
    assert a.assignment == [("t", p) for p in range(4)]
    await manager.classic.leave_group("g", [LeavingMember(a.member_id)])
    group = await manager.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY and not group.members
    assert group_record(backend, group.partition).members == ()
    assert (await manager.classic.leave_group("nope", [LeavingMember("x")]))[0].error_code == 25


async def test_bounds_and_protocol_checks(manager) -> None:
    groups = manager.classic
    a = Client(groups, name="a")
    bad = JoinGroupRequest("g", 500, 1000, "", "consumer", (("range", b""),))
    with pytest.raises(InvalidSessionTimeoutError):
        await groups.join_group(bad)
    with pytest.raises(InconsistentGroupProtocolError):
        await groups.join_group(JoinGroupRequest("g", SESSION_MS, 1000, "", "consumer", ()))
    franz_like = consumer_protocol.encode_subscription(["t"], b'{"franz":1,"manual":false}')
    with pytest.raises(InvalidRequestError):
        await groups.join_group(JoinGroupRequest("g", SESSION_MS, 1000, "", "consumer",
                                                 (("range", franz_like),)))
    await a.join_and_sync()
    other = Client(groups, name="x", protocols=("cooperative-sticky",))
    with pytest.raises(InconsistentGroupProtocolError):
        await other.join()
    connect = JoinGroupRequest("g", SESSION_MS, 1000, "", "connect", (("default", b"x"),))
    with pytest.raises(InconsistentGroupProtocolError):
        await groups.join_group(connect)


async def test_protocol_chosen_by_vote(backend, clock) -> None:
    manager = await make_manager(backend, clock, **{"group.initial.rebalance.delay.ms": 150})
    a = Client(manager.classic, name="a", protocols=("roundrobin", "range"))
    b = Client(manager.classic, name="b", protocols=("roundrobin", "range"))
    c = Client(manager.classic, name="c", protocols=("range", "roundrobin"))
    await everyone(a, b, c)
    assert a.joined and a.joined.protocol_name == "roundrobin"


# --- static members ----------------------------------------------------------------------


async def test_static_member_rejoins_without_a_rebalance(manager, backend) -> None:
    a = Client(manager.classic, name="a", instance="host-1")
    b = Client(manager.classic, name="b", instance="host-2")
    await a.join_and_sync()  # a static member gets its id at once (no MEMBER_ID_REQUIRED)
    assert a.member_id.startswith("host-1-")
    b_join = asyncio.ensure_future(b.join())
    await asyncio.sleep(0.02)
    await a.join()
    await b_join
    await everyone_sync(a, b)
    generation, assigned = b.generation, list(b.assignment)
    # b restarts: same instance id, no member id
    old_id = b.member_id
    b2 = Client(manager.classic, name="b", instance="host-2")
    result = await b2.join()
    assert result.generation_id == generation and result.member_id != old_id
    assert result.leader == a.member_id and result.members == ()
    await b2.sync()
    assert b2.assignment == assigned  # kept, no rebalance
    await a.heartbeat()  # nothing to rejoin for
    with pytest.raises(FencedInstanceIdError):
        await b.heartbeat()
    with pytest.raises(FencedInstanceIdError):
        await manager.classic.commit_offsets("g", generation, old_id, "host-2",
                                             {TP("t", 0): OffsetCommitEntry(1)})
    record = group_record(backend, manager.coordinator.partition_for("g"))
    assert [m.member_id for m in record.members] == [a.member_id, b2.member_id]
    assert record.generation == generation
    # admin removal by instance id (kafka-consumer-groups --delete-members style)
    results = await manager.classic.leave_group("g", [LeavingMember("", "host-2")])
    assert results[0].error_code == 0
    with pytest.raises(RebalanceInProgressError):
        await a.heartbeat()


async def test_static_leader_rejoin_skips_assignment(manager) -> None:
    a = Client(manager.classic, name="a", instance="host-1")
    await a.join_and_sync()
    request = Client(manager.classic, name="a", instance="host-1").request()
    from dataclasses import replace
    result = await manager.classic.join_group(replace(request, supports_skip_assignment=True))
    assert result.skip_assignment and result.leader == result.member_id
    assert [m.member_id for m in result.members] == [result.member_id]
    old = await manager.classic.join_group(request)  # pre-v9: the old leader id, no members
    assert old.leader == result.member_id and not old.skip_assignment and old.members == ()


# --- offsets ------------------------------------------------------------------------------


async def test_commits_check_generation_and_member(manager) -> None:
    groups = manager.classic
    a = Client(groups, name="a")
    await a.join()
    with pytest.raises(RebalanceInProgressError):  # CompletingRebalance
        await groups.commit_offsets("g", a.generation, a.member_id, None,
                                    {TP("t", 0): OffsetCommitEntry(5)})
    await a.sync()
    got = await groups.commit_offsets("g", a.generation, a.member_id, None, {
        TP("t", 0): OffsetCommitEntry(5, "m", 3), TP("t", 9): OffsetCommitEntry(1),
        TP("t", 1): OffsetCommitEntry(1, "x" * 5000)})
    assert got == {TP("t", 0): 0, TP("t", 9): 3, TP("t", 1): 12}
    fetched = await groups.fetch_offsets("g", [TP("t", 0), TP("t", 1)])
    assert list(fetched) == [TP("t", 0)]
    assert (fetched[TP("t", 0)].offset, fetched[TP("t", 0)].metadata,
            fetched[TP("t", 0)].leader_epoch) == (5, "m", 3)
    with pytest.raises(IllegalGenerationError):
        await groups.commit_offsets("g", a.generation - 1, a.member_id, None,
                                    {TP("t", 0): OffsetCommitEntry(6)})
    with pytest.raises(UnknownMemberIdError):
        await groups.commit_offsets("g", a.generation, "nobody", None,
                                    {TP("t", 0): OffsetCommitEntry(6)})
    with pytest.raises(UnknownMemberIdError):  # a simple commit while the group has members
        await groups.commit_offsets("g", -1, "", None, {TP("t", 0): OffsetCommitEntry(6)})
    # a simple commit: fine for a group without members, even a new one
    assert await groups.commit_offsets("simple", -1, "", None,
                                       {TP("t", 2): OffsetCommitEntry(7)}) == {TP("t", 2): 0}
    assert (await groups.fetch_offsets("simple"))[TP("t", 2)].offset == 7
    with pytest.raises(IllegalGenerationError):  # a generation for a group never seen
        await groups.commit_offsets("unknown", 1, "m", None, {TP("t", 0): OffsetCommitEntry(1)})
    await groups.leave_group("g", [LeavingMember(a.member_id)])
    assert await groups.commit_offsets("g", -1, "", None,
                                       {TP("t", 0): OffsetCommitEntry(8)}) == {TP("t", 0): 0}


# --- mixed groups ---------------------------------------------------------------------------


async def test_mixed_group_shares_partitions_and_commits(manager) -> None:
    await manager.create("g", name="rest-1", auto_commit=False)
    await manager.subscribe("g", "rest-1", topics=["t"])
    assert len(await manager.assignment("g", "rest-1")) == 4  # REST alone: the server assigns
    k = Client(manager.classic, name="kafka")
    result = await k.join()  # REST instances join at once: the join phase ends now
    assert result.leader == k.member_id and result.generation_id == 3
    members = {m.member_id: m for m in result.members}
    assert set(members) == {"rest-1", k.member_id}
    rest_sub = consumer_protocol.decode_subscription(members["rest-1"].metadata)
    assert rest_sub.topics == ("t",) and len(rest_sub.owned) == 4
    assert result.protocol_name == "range"
    await k.sync()
    rest = sorted(await manager.assignment("g", "rest-1"))
    assert len(rest) == len(k.assignment) == 2
    assert sorted([(tp.topic, tp.partition) for tp in rest] + k.assignment) == [
        ("t", p) for p in range(4)]
    desc = await manager.classic.describe_group("g")
    assert desc.state == "Stable" and {m.member_id for m in desc.members} == {"rest-1", k.member_id}
    # one group, one set of committed offsets
    mine = TP(*k.assignment[0])
    await manager.commit("g", "rest-1", {rest[0]: (11, "rest")})
    assert await manager.classic.commit_offsets("g", k.generation, k.member_id, None,
                                                {mine: OffsetCommitEntry(22)}) == {mine: 0}
    seen = await manager.classic.fetch_offsets("g", [rest[0], mine])
    assert (seen[rest[0]].offset, seen[mine].offset) == (11, 22)
    assert await manager.committed("g", "rest-1", [mine]) == {mine: (22, "")}
    # the REST instance goes: the Kafka client is asked to join again, then has it all
    await manager.delete("g", "rest-1")
    with pytest.raises(RebalanceInProgressError):
        await k.heartbeat()
    await k.join_and_sync()
    assert k.assignment == [("t", p) for p in range(4)]
    # a REST instance joins the Kafka client's group: the client rejoins and assigns it
    await manager.create("g", name="rest-2", auto_commit=False)
    await manager.subscribe("g", "rest-2", topics=["t"])
    with pytest.raises(RebalanceInProgressError):
        await k.heartbeat()
    assert await manager.assignment("g", "rest-2") == []  # until the leader's SyncGroup
    await k.join_and_sync()
    assert len(await manager.assignment("g", "rest-2")) == 2
    # the Kafka client leaves: the server assigns the REST instance everything again
    await manager.classic.leave_group("g", [LeavingMember(k.member_id)])
    assert len(await manager.assignment("g", "rest-2")) == 4
    group = await manager.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE


async def test_mixed_group_protocols_must_match(manager) -> None:
    await manager.create("g", name="rest-1")
    coop = Client(manager.classic, name="coop", protocols=("cooperative-sticky",))
    with pytest.raises(InconsistentGroupProtocolError):
        await coop.join()
    await manager.delete("g", "rest-1")
    await coop.join_and_sync()  # an Empty group: any protocol
    with pytest.raises(InconsistentGroupProtocolError):
        await manager.create("g", name="rest-2")


# --- coordinators moving --------------------------------------------------------------------


async def test_resigning_during_a_join_answers_not_coordinator(backend, clock) -> None:
    manager = await make_manager(backend, clock, **{"group.initial.rebalance.delay.ms": 5_000})
    a, b = Client(manager.classic, name="a"), Client(manager.classic, name="b")
    for c in (a, b):  # the MEMBER_ID_REQUIRED round first
        with pytest.raises(MemberIdRequiredError) as info:
            await manager.classic.join_group(c.request())
        c.member_id = info.value.member_id
    joins = [asyncio.ensure_future(manager.classic.join_group(c.request())) for c in (a, b)]
    await asyncio.sleep(0.05)
    assert not any(j.done() for j in joins)
    p = manager.coordinator.partition_for("g")
    assert manager.classic.coordinates("g")
    backend.not_leader.add(p)
    manager.coordinator.on_role_change(p, None)
    for j in joins:
        with pytest.raises(NotCoordinatorError):
            await j
    assert not manager.classic.coordinates("g")
    location = manager.classic.find_coordinator("g")
    assert (location.partition, location.leader_id, location.is_local) == (p, -1, False)
    with pytest.raises(NotCoordinatorError):
        await a.heartbeat()


async def test_resigning_while_followers_wait_for_the_leader(backend, clock) -> None:
    manager = await make_manager(backend, clock, **{"group.initial.rebalance.delay.ms": 150})
    a, b = Client(manager.classic, name="a"), Client(manager.classic, name="b")
    await asyncio.gather(a.join(), b.join())
    follower = b if a.is_leader else a
    waiting = asyncio.ensure_future(follower.sync())
    await asyncio.sleep(0.02)
    p = manager.coordinator.partition_for("g")
    backend.epochs[p] = 1
    manager.coordinator.on_role_change(p, 1)  # led at another epoch: the view is dropped
    with pytest.raises(NotCoordinatorError):
        await waiting


async def test_a_new_coordinator_loads_the_group(backend, clock, tmp_path) -> None:
    manager = await make_manager(backend, clock, **{"group.initial.rebalance.delay.ms": 150})
    a = Client(manager.classic, name="a", topics=("t", "u"), instance="host-a")
    b = Client(manager.classic, name="b", topics=("t", "u"))
    await everyone(a, b)
    await manager.create("g", name="rest-1", auto_commit=False)  # REST joins: a rebalance
    await manager.subscribe("g", "rest-1", topics=["u"])
    await asyncio.gather(a.join(), b.join())
    await everyone_sync(a, b)
    before = await manager.classic.describe_group("g")
    assert before.state == "Stable"
    await manager.classic.commit_offsets("g", a.generation, a.member_id, "host-a",
                                         {TP("t", 0): OffsetCommitEntry(3)})
    await manager.stop()

    reopened = backend.reopen()
    fresh = await make_manager(reopened, clock)
    a.groups = b.groups = fresh.classic
    after = await fresh.classic.describe_group("g")
    assert (after.state, after.protocol_type, after.protocol) == (
        "Stable", "consumer", before.protocol)
    assert after.members == before.members  # ids, instance ids, metadata, assignments
    group = await fresh.coordinator.group("g")
    assert group is not None and group.generation == a.generation
    assert group.leader_id == (a.member_id if a.is_leader else b.member_id)
    # the clients go on as if nothing happened: heartbeats, SyncGroup in Stable, commits
    await a.heartbeat()
    await b.heartbeat()
    again = await fresh.classic.sync_group(SyncGroupRequest("g", b.generation, b.member_id))
    assert consumer_protocol.decode_assignment(again.assignment).partitions == tuple(b.assignment)
    assert (await fresh.classic.fetch_offsets("g"))[TP("t", 0)].offset == 3
    assert await fresh.assignment("g", "rest-1") == [
        TP(*tp) for tp in consumer_protocol.decode_assignment(
            next(m.assignment for m in before.members if m.member_id == "rest-1")).partitions]
    # and the next rebalance works on the loaded group
    await fresh.delete("g", "rest-1")
    with pytest.raises(RebalanceInProgressError):
        await a.heartbeat()
    await asyncio.gather(a.join(), b.join())
    await everyone_sync(a, b)
    assert sorted(a.assignment + b.assignment) == sorted(
        [("t", p) for p in range(4)] + [("u", p) for p in range(2)])
    reopened.close()


# --- the sync phase's failures ------------------------------------------------------------


async def test_a_leader_that_never_syncs_is_removed(backend, clock) -> None:
    manager = await make_manager(backend, clock, **{"group.initial.rebalance.delay.ms": 100})
    a, b = Client(manager.classic, name="a"), Client(manager.classic, name="b")
    await asyncio.gather(a.join(), b.join())
    leader, follower = (a, b) if a.is_leader else (b, a)
    with pytest.raises(RebalanceInProgressError):  # held, then the rebalance timeout ends it
        await follower.sync()
    group = await manager.coordinator.group("g")
    assert group is not None and leader.member_id not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    await follower.join_and_sync()
    assert follower.assignment == [("t", p) for p in range(4)]
    with pytest.raises(UnknownMemberIdError):
        await leader.heartbeat()


async def test_a_failed_assignment_write_answers_everyone_and_rebalances(backend, clock) -> None:
    manager = await make_manager(backend, clock, **{"group.initial.rebalance.delay.ms": 100})
    a, b = Client(manager.classic, name="a"), Client(manager.classic, name="b")
    await asyncio.gather(a.join(), b.join())
    leader, follower = (a, b) if a.is_leader else (b, a)
    waiting = asyncio.ensure_future(follower.sync())
    await asyncio.sleep(0.02)
    real = backend.append_offsets

    async def broken(partition: int, batch: bytes, *, leader_epoch: int | None = None) -> int:
        from core.storage.errors import KafkaStorageError
        raise KafkaStorageError("disk gone")

    backend.append_offsets = broken  # type: ignore[method-assign]
    for call in (leader.sync(), waiting):
        with pytest.raises(Exception) as info:
            await call
        assert info.value.error_code == 15  # COORDINATOR_NOT_AVAILABLE: retry
    backend.append_offsets = real  # type: ignore[method-assign]
    group = await manager.coordinator.group("g")
    assert group is not None and group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == () for m in group.members.values())
    await asyncio.gather(a.join(), b.join())
    await everyone_sync(a, b)
    assert sorted(a.assignment + b.assignment) == [("t", p) for p in range(4)]


async def test_rest_calls_do_not_reach_kafka_members(manager) -> None:
    from core.broker.errors import ConsumerInstanceNotFoundError
    k = Client(manager.classic, name="kafka")
    await k.join_and_sync()
    with pytest.raises(ConsumerInstanceNotFoundError):
        manager.get("g", k.member_id)
    with pytest.raises(ConsumerInstanceNotFoundError):
        await manager.commit("g", k.member_id, {TP("t", 0): (1, "")})
    with pytest.raises(ConsumerInstanceNotFoundError):
        await manager.delete("g", k.member_id)
    desc = await manager.describe_group("g")  # the v3 view lists it, decoded
    assert [(m.member_id, m.topics, len(m.assignment)) for m in desc.members] == [
        (k.member_id, ("t",), 4)]


async def test_a_group_of_another_protocol_type_loads_as_written(backend, clock) -> None:
    """Kafka Connect's workers (protocol type "connect") carry no consumer subscription:
    their bytes are kept, and the partition still loads."""
    from core.storage.records import NewRecord, build_batch
    manager = await make_manager(backend, clock)
    p = manager.coordinator.partition_for("connect-cluster")
    value = codec.GroupMetadataValue(
        protocol_type="connect", generation=7, protocol="sessioned", leader="w1",
        current_state_timestamp=clock.now_ms(),
        members=(codec.MemberMetadata("w1", None, "worker", "/10.0.0.1", 60_000, 10_000,
                                      b"\x00\x01not-a-subscription", b"\x00\x02opaque"),))
    record = NewRecord(value=codec.encode_group_metadata_value(value),
                       key=codec.encode_group_metadata_key(codec.GroupMetadataKey("connect-cluster")))
    await backend.append_offsets(p, bytes(build_batch([record], now_ms=clock.now_ms())))
    fresh = await make_manager(backend, clock)
    desc = await fresh.classic.describe_group("connect-cluster")
    assert (desc.state, desc.protocol_type, desc.protocol) == ("Stable", "connect", "sessioned")
    assert [(m.member_id, m.metadata, m.assignment) for m in desc.members] == [
        ("w1", b"\x00\x01not-a-subscription", b"\x00\x02opaque")]
    await fresh.classic.heartbeat("connect-cluster", 7, "w1")
