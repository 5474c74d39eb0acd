"""Group state machine, assignment decisions, and groups <-> __consumer_offsets records."""

from __future__ import annotations

import pytest

from core.broker.group import consumer_protocol
from core.broker.group import offsets_codec as codec
from core.broker.group.group import (
    CommittedOffset,
    Group,
    GroupState,
    IllegalGroupTransitionError,
    Member,
    check_transition,
    compute_assignment,
)
from core.broker.group.records import (
    PartitionLoader,
    group_metadata_record,
    group_tombstone,
    offset_commit_record,
    offset_tombstone,
)
from core.broker.types import TopicPartition as TP
from core.storage.records import NewRecord, Record

S = GroupState


def member(mid: str, topics: tuple[str, ...] = (), **kw: object) -> Member:
    return Member(mid, f"client-{mid}", "/10.0.0.1", 30_000, 60_000, topics=topics, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.EMPTY, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
        (S.PREPARING_REBALANCE, S.EMPTY),
        (S.COMPLETING_REBALANCE, S.STABLE),
        (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
        (S.STABLE, S.PREPARING_REBALANCE),
        (S.STABLE, S.DEAD),
        (S.EMPTY, S.DEAD),
        (S.DEAD, S.DEAD),
    ],
)
def test_legal_transitions(old: GroupState, new: GroupState) -> None:
    check_transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.EMPTY, S.STABLE),
        (S.EMPTY, S.COMPLETING_REBALANCE),
        (S.STABLE, S.EMPTY),
        (S.STABLE, S.COMPLETING_REBALANCE),
        (S.DEAD, S.EMPTY),
        (S.PREPARING_REBALANCE, S.STABLE),
        (S.COMPLETING_REBALANCE, S.EMPTY),
    ],
)
def test_illegal_transitions_raise(old: GroupState, new: GroupState) -> None:
    with pytest.raises(IllegalGroupTransitionError):
        check_transition(old, new)


def test_rebalance_steps_bump_generation_and_pick_leader() -> None:
    g = Group("g", partition=7)
    g.members["a"] = member("a", ("t",))
    g.members["b"] = member("b", ("t",))
    g.prepare_rebalance(1)
    g.complete_join("range", 2)
    assert (g.state, g.generation, g.leader_id, g.protocol) == (
        S.COMPLETING_REBALANCE,
        1,
        "a",
        "range",
    )
    revoked = g.complete_sync(compute_assignment(g, "range", {"t": 4}), 3)
    assert g.state is S.STABLE and g.state_timestamp_ms == 3
    assert g.members["a"].assignment == (TP("t", 0), TP("t", 1))
    assert revoked == {"a": frozenset(), "b": frozenset()}  # both changed, neither lost any
    # the leader leaves: the next rebalance picks the remaining member
    del g.members["a"]
    g.prepare_rebalance(4)
    g.complete_join("range", 4)
    revoked = g.complete_sync(compute_assignment(g, "range", {"t": 4}), 5)
    assert g.leader_id == "b" and g.generation == 2 and revoked == {"b": frozenset()}
    assert g.members["b"].assignment == tuple(TP("t", p) for p in range(4))
    # everyone leaves: Empty, generation still moves
    del g.members["b"]
    g.prepare_rebalance(6)
    g.complete_join("range", 6)
    assert (g.state, g.generation, g.leader_id, g.protocol) == (S.EMPTY, 3, None, None)


def test_compute_assignment_skips_manual_and_unsubscribed_members() -> None:
    g = Group("g", partition=0)
    g.members["m"] = member("m", manual=True, assignment=(TP("t", 0),))
    g.members["x"] = member("x", ("t",))
    g.members["y"] = member("y", ("t", "u"))
    g.members["idle"] = member("idle")
    out = compute_assignment(g, "roundrobin", {"t": 3, "u": 1})
    assert "m" not in out
    assert out["idle"] == []
    assert out["x"] == [TP("t", 0), TP("t", 2)]
    assert out["y"] == [TP("t", 1), TP("u", 0)]


def _as_record(new: NewRecord, offset: int) -> Record:
    return Record(offset, new.timestamp or 0, new.key, new.value)


def _load(*news: NewRecord, partition: int = 3) -> dict[str, Group]:
    loader = PartitionLoader(partition)
    for i, n in enumerate(news):
        loader.apply(_as_record(n, i))
    return loader.groups(now_ms=10_000)


def test_group_metadata_round_trips_members_subscriptions_and_settings() -> None:
    g = Group("g", partition=3)
    g.members["a"] = member(
        "a", ("t", "u"), properties={"format": "json", "auto.commit.enable": False}
    )
    g.members["p"] = member("p", ("t1", "t2"), pattern="t[0-9]")
    g.members["m"] = member("m", manual=True)
    g.prepare_rebalance(1)
    g.complete_join("range", 2)
    g.complete_sync({"a": [TP("t", 0), TP("u", 0)], "p": [TP("t1", 0)]}, 3)
    g.members["m"].assignment = (TP("z", 4),)

    loaded = _load(group_metadata_record(g, 5))["g"]
    assert (loaded.state, loaded.generation, loaded.protocol, loaded.leader_id) == (
        S.STABLE,
        1,
        "range",
        "a",
    )
    assert loaded.protocol_type == "consumer" and loaded.state_timestamp_ms == 3
    assert list(loaded.members) == ["a", "p", "m"]
    a, p, m = (loaded.members[i] for i in ("a", "p", "m"))
    assert a.topics == ("t", "u") and a.assignment == (TP("t", 0), TP("u", 0))
    assert a.properties == {"format": "json", "auto.commit.enable": False}
    assert (a.client_id, a.client_host, a.session_timeout_ms, a.rebalance_timeout_ms) == (
        "client-a",
        "/10.0.0.1",
        30_000,
        60_000,
    )
    assert a.deadline_ms == 10_000 + 30_000  # a fresh heartbeat deadline
    assert p.pattern == "t[0-9]" and p.topics == ("t1", "t2") and not p.manual
    assert m.manual and m.assignment == (TP("z", 4),) and m.topics == ()


def test_loading_applies_records_in_order_with_tombstones() -> None:
    c1 = CommittedOffset(5, "m1", 100)
    c2 = CommittedOffset(9, "", 200, leader_epoch=3)
    empty = Group("gone", partition=3)
    groups = _load(
        offset_commit_record("g", TP("t", 0), c1),
        offset_commit_record("g", TP("t", 1), c1),
        offset_commit_record("g", TP("t", 0), c2),
        offset_tombstone("g", TP("t", 1), 300),
        group_metadata_record(empty, 1),
        offset_commit_record("gone", TP("t", 0), c1),
        offset_tombstone("gone", TP("t", 0), 400),
        group_tombstone("gone", 400),
        offset_commit_record("simple", TP("x", 2), c1),
    )
    assert set(groups) == {"g", "simple"}
    assert groups["g"].offsets == {TP("t", 0): c2}
    assert groups["g"].state is S.EMPTY and not groups["g"].members
    assert groups["simple"].is_simple


def test_loading_skips_corrupt_and_foreign_records() -> None:
    loader = PartitionLoader(0)
    loader.apply(Record(0, 0, None, b"x"))  # no key
    loader.apply(Record(1, 0, b"\x00\x01garbage", b"x"))  # bad offset key
    loader.apply(Record(2, 0, b"\x00\x05whatever", b"x"))  # KIP-848 record: skipped
    good = offset_commit_record("g", TP("t", 0), CommittedOffset(1, "", 0))
    loader.apply(_as_record(good, 3))
    assert loader.skipped == 3
    assert loader.groups(0)["g"].offsets[TP("t", 0)].offset == 1


def test_member_without_franz_user_data_loads_with_defaults() -> None:
    value = codec.GroupMetadataValue(
        "consumer",
        4,
        "range",
        "k",
        0,
        (
            codec.MemberMetadata(
                "k",
                None,
                "java",
                "/h",
                1000,
                1000,
                consumer_protocol.encode_subscription(["t"], b"\x00\x01binary-assignor-data"),
                consumer_protocol.encode_assignment([("t", 0)]),
            ),
        ),
    )
    rec = NewRecord(
        codec.encode_group_metadata_value(value),
        codec.encode_group_metadata_key(codec.GroupMetadataKey("kafka")),
        timestamp=0,
    )
    k = _load(rec)["kafka"].members["k"]
    assert k.topics == ("t",) and k.assignment == (TP("t", 0),)
    assert k.pattern is None and not k.manual and k.properties == {}
