"""Range, round-robin and sticky assignors: tables of cases and properties."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.broker.group.assignors import (
    ASSIGNORS,
    Assignment,
    Subscription,
    TopicPartition,
    assign,
    range_assign,
    roundrobin_assign,
    sticky_assign,
)


def sub(*topics: str, owned: tuple[TopicPartition, ...] = ()) -> Subscription:
    return Subscription(topics=topics, owned=owned)


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [(topic, p) for p in partitions]


# -- range ----------------------------------------------------------------------------

RANGE_CASES = [
    pytest.param(
        {"c0": sub("t"), "c1": sub("t")},
        {"t": 3},
        {"c0": tps("t", 0, 1), "c1": tps("t", 2)},
        id="uneven-split-extra-to-first",
    ),
    pytest.param(
        {"c0": sub("t1", "t2"), "c1": sub("t1", "t2")},
        {"t1": 3, "t2": 3},
        {"c0": tps("t1", 0, 1) + tps("t2", 0, 1), "c1": tps("t1", 2) + tps("t2", 2)},
        id="co-partitioned-topics-line-up",
    ),
    pytest.param(
        {"c0": sub("t"), "c1": sub("t"), "c2": sub("t")},
        {"t": 2},
        {"c0": tps("t", 0), "c1": tps("t", 1), "c2": []},
        id="more-members-than-partitions",
    ),
    pytest.param(
        {"c0": sub("t1"), "c1": sub("t1", "t2"), "c2": sub("t2")},
        {"t1": 4, "t2": 3},
        {"c0": tps("t1", 0, 1), "c1": tps("t1", 2, 3) + tps("t2", 0, 1), "c2": tps("t2", 2)},
        id="different-subscriptions",
    ),
    pytest.param(
        {"c0": sub("t"), "c1": sub("t")},
        {"t": 0},
        {"c0": [], "c1": []},
        id="zero-partitions",
    ),
    pytest.param(
        {"c0": sub("missing"), "c1": sub("t")},
        {"t": 2},
        {"c0": [], "c1": tps("t", 0, 1)},
        id="unknown-topic-ignored",
    ),
    pytest.param({}, {"t": 3}, {}, id="no-members"),
    pytest.param({"c0": sub()}, {"t": 3}, {"c0": []}, id="empty-subscription"),
    pytest.param(
        {"b": sub("t"), "a": sub("t"), "c": sub("t")},
        {"t": 7},
        {"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4), "c": tps("t", 5, 6)},
        id="members-sorted-by-id",
    ),
]


@pytest.mark.parametrize(("members", "counts", "expected"), RANGE_CASES)
def test_range(
    members: Mapping[str, Subscription], counts: Mapping[str, int], expected: Assignment
) -> None:
    assert range_assign(members, counts) == expected


# -- roundrobin -----------------------------------------------------------------------

ROUNDROBIN_CASES = [
    pytest.param(
        {"c0": sub("t1", "t2"), "c1": sub("t1", "t2")},
        {"t1": 3, "t2": 3},
        {"c0": tps("t1", 0, 2) + tps("t2", 1), "c1": tps("t1", 1) + tps("t2", 0, 2)},
        id="deal-across-topics",
    ),
    pytest.param(
        # Kafka's RoundRobinAssignorTest.testTwoConsumersOneTopicOnePartition-ish
        {"c0": sub("t"), "c1": sub("t")},
        {"t": 1},
        {"c0": tps("t", 0), "c1": []},
        id="more-members-than-partitions",
    ),
    pytest.param(
        # c0: t0; c1: t0,t1; c2: t0,t1,t2 (the docs' unequal-subscription example)
        {"c0": sub("t0"), "c1": sub("t0", "t1"), "c2": sub("t0", "t1", "t2")},
        {"t0": 1, "t1": 2, "t2": 3},
        {
            "c0": tps("t0", 0),
            "c1": tps("t1", 0),
            "c2": tps("t1", 1) + tps("t2", 0, 1, 2),
        },
        id="different-subscriptions-skip-unsubscribed",
    ),
    pytest.param(
        {"c0": sub("t"), "c1": sub("t")},
        {"t": 0},
        {"c0": [], "c1": []},
        id="zero-partitions",
    ),
    pytest.param({}, {"t": 2}, {}, id="no-members"),
    pytest.param(
        {"c0": sub("a"), "c1": sub("b")},
        {"a": 2, "b": 2},
        {"c0": tps("a", 0, 1), "c1": tps("b", 0, 1)},
        id="disjoint-subscriptions",
    ),
]


@pytest.mark.parametrize(("members", "counts", "expected"), ROUNDROBIN_CASES)
def test_roundrobin(
    members: Mapping[str, Subscription], counts: Mapping[str, int], expected: Assignment
) -> None:
    assert roundrobin_assign(members, counts) == expected


# -- sticky ---------------------------------------------------------------------------


def test_sticky_fresh_group_is_balanced() -> None:
    result = sticky_assign({m: sub("t") for m in ("a", "b", "c")}, {"t": 7})
    assert sorted(len(v) for v in result.values()) == [2, 2, 3]


def test_sticky_keeps_ownership_when_a_member_joins() -> None:
    counts = {"t1": 6, "t2": 6}
    before = sticky_assign({m: sub("t1", "t2") for m in ("a", "b", "c")}, counts)
    members = {m: sub("t1", "t2", owned=tuple(before[m])) for m in before}
    members["d"] = sub("t1", "t2")
    after = sticky_assign(members, counts)
    assert [len(after[m]) for m in "abcd"] == [3, 3, 3, 3]
    for m in "abc":
        assert set(after[m]) <= set(before[m])  # only losses, exactly one each
        assert len(before[m]) - len(after[m]) == 1


def test_sticky_keeps_ownership_when_a_member_leaves() -> None:
    counts = {"t": 10}
    before = sticky_assign({m: sub("t") for m in "abcd"}, counts)
    survivors = {m: sub("t", owned=tuple(before[m])) for m in "abc"}
    after = sticky_assign(survivors, counts)
    for m in "abc":
        assert set(before[m]) <= set(after[m])
    assert sorted(len(v) for v in after.values()) == [3, 3, 4]


def test_sticky_rebalances_a_hoarder() -> None:
    members = {"a": sub("t", owned=tuple(tps("t", *range(6)))), "b": sub("t")}
    result = sticky_assign(members, {"t": 6})
    assert len(result["a"]) == len(result["b"]) == 3
    assert set(result["a"]) <= set(tps("t", *range(6)))


def test_sticky_drops_stale_and_contested_ownership() -> None:
    members = {
        "a": sub("t", owned=(("t", 0), ("t", 9), ("gone", 0))),  # t-9 no longer exists
        "b": sub("t", owned=(("t", 0), ("t", 1))),  # t-0 also claimed by a
        "c": sub("u", owned=(("t", 2),)),  # no longer subscribed to t
    }
    result = sticky_assign(members, {"t": 3, "u": 1})
    assert result["c"] == [("u", 0)]
    assert ("t", 1) in result["b"]
    assert sorted(result["a"] + result["b"]) == tps("t", 0, 1, 2)


def test_sticky_unequal_subscriptions_chain_moves() -> None:
    # c can only take t2, a only t1; balancing a needs b to pass on t1 and take t2.
    members = {
        "a": sub("t1"),
        "b": sub("t1", "t2", owned=(("t1", 0),)),
        "c": sub("t2", owned=(("t2", 0), ("t2", 1), ("t2", 2))),
    }
    result = sticky_assign(members, {"t1": 1, "t2": 3})
    assert result == {"a": [("t1", 0)], "b": [("t2", 0)], "c": [("t2", 1), ("t2", 2)]}


def test_sticky_zero_partitions_and_no_members() -> None:
    assert sticky_assign({"a": sub("t")}, {"t": 0}) == {"a": []}
    assert sticky_assign({}, {"t": 4}) == {}


# -- all assignors: registry, determinism, validation --------------------------------


def test_registry_names() -> None:
    assert set(ASSIGNORS) == {"range", "roundrobin", "sticky"}
    assert ASSIGNORS["range"] is range_assign


def test_assign_dispatches_and_rejects_unknown() -> None:
    members = {"a": sub("t")}
    assert assign("roundrobin", members, {"t": 2}) == {"a": tps("t", 0, 1)}
    with pytest.raises(ValueError, match="cooperative-sticky"):
        assign("cooperative-sticky", members, {"t": 2})


@pytest.mark.parametrize("strategy", sorted(ASSIGNORS))
def test_negative_partition_count_is_rejected(strategy: str) -> None:
    with pytest.raises(ValueError):
        assign(strategy, {"a": sub("t")}, {"t": -1})


@pytest.mark.parametrize("strategy", sorted(ASSIGNORS))
def test_deterministic_regardless_of_mapping_order(strategy: str) -> None:
    members = {
        f"m{i}": sub("t1", "t2", owned=(("t1", i),)) if i % 2 else sub("t2", "t3") for i in range(7)
    }
    counts = {"t1": 5, "t2": 9, "t3": 4}
    expected = assign(strategy, members, counts)
    rng = random.Random(3)
    for _ in range(5):
        items = list(members.items())
        rng.shuffle(items)
        count_items = list(counts.items())
        rng.shuffle(count_items)
        assert assign(strategy, dict(items), dict(count_items)) == expected


# -- properties -----------------------------------------------------------------------

TOPICS = ("a", "b", "c")


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, Subscription], dict[str, int]]:
    counts = {t: draw(st.integers(0, 8)) for t in TOPICS}
    subscription_pool = draw(
        st.lists(st.sets(st.sampled_from(TOPICS), max_size=3), min_size=1, max_size=3)
    )
    all_tps = [(t, p) for t, n in counts.items() for p in range(n + 1)]  # incl. stale ones
    members: dict[str, Subscription] = {}
    for i in range(draw(st.integers(0, 7))):
        topics = tuple(sorted(draw(st.sampled_from(subscription_pool))))
        owned = tuple(draw(st.lists(st.sampled_from(all_tps), max_size=6))) if all_tps else ()
        members[f"m{i}"] = Subscription(topics=topics, owned=owned)
    return members, counts


def check_valid(
    result: Assignment, members: Mapping[str, Subscription], counts: Mapping[str, int]
) -> None:
    assert list(result) == sorted(members)
    subscribed = {t for s in members.values() for t in s.topics if t in counts}
    expected = sorted((t, p) for t in subscribed for p in range(counts[t]))
    assigned = [tp for tps_ in result.values() for tp in tps_]
    assert sorted(assigned) == expected  # each subscribed partition exactly once
    for member, tps_ in result.items():
        assert tps_ == sorted(tps_)
        assert all(t in members[member].topics for t, _ in tps_)


def check_balanced_by_subscription(result: Assignment, members: Mapping[str, Subscription]) -> None:
    by_subscription: dict[frozenset[str], list[int]] = {}
    for member, tps_ in result.items():
        by_subscription.setdefault(frozenset(members[member].topics), []).append(len(tps_))
    for sizes in by_subscription.values():
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(groups(), st.sampled_from(sorted(ASSIGNORS)))
def test_every_assignor_assigns_each_partition_once_to_a_subscriber(
    group: tuple[dict[str, Subscription], dict[str, int]], strategy: str
) -> None:
    members, counts = group
    check_valid(assign(strategy, members, counts), members, counts)


@settings(max_examples=300, deadline=None)
@given(groups())
def test_sticky_balances_members_with_equal_subscriptions(
    group: tuple[dict[str, Subscription], dict[str, int]],
) -> None:
    members, counts = group
    check_balanced_by_subscription(sticky_assign(members, counts), members)


def _max_keepable(kept: list[int], total: int) -> int:
    """With equal subscriptions: the most owned partitions any balanced result keeps."""
    if not kept:
        return 0
    q, r = divmod(total, len(kept))
    ordered = sorted(kept, reverse=True)
    return sum(min(k, q + 1 if i < r else q) for i, k in enumerate(ordered))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(0, 20),
    st.lists(st.integers(0, 5), max_size=20),
    st.randoms(use_true_random=False),
)
def test_sticky_moves_the_fewest_owned_partitions_with_equal_subscriptions(
    num_members: int, num_partitions: int, owner_choice: list[int], rng: random.Random
) -> None:
    owners: dict[str, list[TopicPartition]] = {f"m{i}": [] for i in range(num_members)}
    for p, choice in zip(range(num_partitions), owner_choice, strict=False):
        if choice < num_members:  # some partitions stay unowned
            owners[f"m{choice}"].append(("t", p))
    members = {m: sub("t", owned=tuple(o)) for m, o in owners.items()}
    result = sticky_assign(members, {"t": num_partitions})
    check_valid(result, members, {"t": num_partitions})
    kept = sum(len(set(result[m]) & set(owners[m])) for m in members)
    assert kept == _max_keepable([len(o) for o in owners.values()], num_partitions)


@settings(max_examples=200, deadline=None)
@given(groups(), st.integers(0, 6), st.booleans())
def test_sticky_keeps_ownership_across_join_and_leave(
    group: tuple[dict[str, Subscription], dict[str, int]], which: int, join: bool
) -> None:
    members, counts = group
    first = sticky_assign(members, counts)
    nxt = {m: Subscription(s.topics, tuple(first[m])) for m, s in members.items()}
    if join:
        nxt["new"] = Subscription(topics=TOPICS)
    elif nxt:
        nxt.pop(sorted(nxt)[which % len(nxt)])
    second = sticky_assign(nxt, counts)
    check_valid(second, nxt, counts)
    check_balanced_by_subscription(second, nxt)
    # Survivors of a leave never lose partitions when subscriptions are equal.
    if not join and len({frozenset(s.topics) for s in nxt.values()}) == 1:
        for m in nxt:
            assert set(first[m]) <= set(second[m])


def test_range_counts_follow_the_formula() -> None:
    result = range_assign({f"m{i}": sub("t") for i in range(4)}, {"t": 10})
    assert Counter(len(v) for v in result.values()) == Counter({3: 2, 2: 2})
