"""NETWORK FAULTS, CHECKED: a three-broker franz cluster and ZooKeeper, each in a network
namespace of its own (tests/jepsen/, docs/fault-testing.md), the queue workload from
the clients' namespace, faults made with nftables, the history checked at the end.

Each scenario runs on a topic of its own (1 partition, RF=3, min.insync.replicas=2,
acks=all, half the producers with an Idempotency-Key): work before the fault, the
fault held past the ZooKeeper session timeout and the ISR lag, heal, a bounded wait
until every broker serves a produce again (measured), work after, then the partition is
read whole through every broker. Expected: 0 lost, 0 duplicated, 0 inconsistent.

A fixed seed; ``FRANZ_JEPSEN_SEED`` overrides it. Needs root, ip, nft and Debian's
zookeeper; skips saying which is missing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster.conftest import JARS

from .checker import History, check
from .cluster import LAG_MS, SESSION_MS, NetCluster, hosts
from .conftest import network
from .workload import Queue

pytestmark = [pytest.mark.jepsen, pytest.mark.timeout(600)]

SEED = int(os.environ.get("FRANZ_JEPSEN_SEED") or 20261202)
BEFORE_S = 4.0
FAULT_S = SESSION_MS / 1000 + LAG_MS / 1000 + 6.0  # past the session and the ISR lag
AFTER_S = 3.0
SERVE_BUDGET_S = SESSION_MS / 1000 + 30.0  # the session timeout plus a generous election
MAX_OPS = 2000 * int(os.environ.get("FRANZ_JEPSEN_ROUNDS") or 1)  # sends per producer per
# scenario, a bound beside the time
RESULTS: list[dict[str, Any]] = []


@pytest.fixture(scope="module")
def cluster(need_netns: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetCluster]:
    if shutil.which("java") is None or not any(JARS.glob("zookeeper*.jar")):
        pytest.skip("needs java and Debian's zookeeper package (apt-get install -y zookeeper)")
    root = tmp_path_factory.mktemp("jepsen")
    with network(hosts(3)) as net:
        c = NetCluster(net, root)
        try:
            c.start()
            yield c
        finally:
            c.close()
    if RESULTS:
        print("\n" + "\n".join(json.dumps(r) for r in RESULTS))


def test_cluster_in_namespaces_produces_and_reads_back(cluster: NetCluster) -> None:
    """Every broker on its own address; a produce from the clients' host through each
    broker, read back through each."""
    cluster.create_topic("jepsen-smoke", 1, 3, {"min.insync.replicas": "2"})
    cluster.wait_whole("jepsen-smoke", 1, 60)
    h = History()
    q = Queue(cluster, "jepsen-smoke", 1, h, time.monotonic(), SEED)
    took = q.wait_serving(30)
    reads = q.final_reads()
    a = check(h)
    assert a.valid, a.summary()
    assert a.counts["ok"] >= 3 and all(len(r.records) == a.counts["ok"] for r in reads)
    addrs = {b["broker_id"]: b["host"] for b in cluster.get(
        cluster.brokers[0], cluster.v3("brokers")).json()["data"]}
    assert addrs == {b.broker_id: cluster.net.ip(b.hostname) for b in cluster.brokers}
    assert took < 30


def _leader(cluster: NetCluster, topic: str) -> tuple[int, list[int]]:
    """The partition's leader and the other replicas in its ISR (while a fault has left
    it without a leader: broker 0 and the others)."""
    st = cluster.state(topic, 0)
    leader = int(st["leader"])
    if leader < 0:
        return 0, [1, 2]
    followers = [int(x) for x in st["isr"] if int(x) != leader]
    return leader, followers or [b for b in range(3) if b != leader]


def _scenario(cluster: NetCluster, tmp_path: Path, name: str,
              fault: Callable[[NetCluster, str], dict[str, Any]], *,
              hold_s: float = FAULT_S, fault_budget_s: float = FAULT_S) -> dict[str, Any]:
    """The workload, ``fault`` (which may hold faults of its own for up to
    ``fault_budget_s``) held ``hold_s`` more, heal, serving again, the check."""
    topic = f"jepsen-{name}"
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    cluster.wait_whole(topic, 1, 60)
    h = History()
    t0 = time.monotonic()
    q = Queue(cluster, topic, 1, h, t0, SEED)
    q.start(max_ops=MAX_OPS, seconds=BEFORE_S + fault_budget_s + 30)
    time.sleep(BEFORE_S)
    leader_before = cluster.state(topic, 0)
    fault_start = q.now()
    info = fault(cluster, topic)
    time.sleep(hold_s)
    during = {"zk_state_at_heal": cluster.state(topic, 0)}
    cluster.net.heal()
    healed_at = q.now()
    try:
        serving_s = q.wait_serving(SERVE_BUDGET_S)
    finally:
        time.sleep(AFTER_S)
        q.stop()
    whole_s = cluster.wait_whole(topic, 1, 60)
    q.final_reads()
    h.write(tmp_path / f"{name}-history.jsonl")
    a = check(h)
    in_fault = [o for o in h.ops if o.f == "send" and o.type == "ok" and o.complete is not None
                and fault_start <= o.complete <= healed_at]
    acks = sorted(o.complete for o in h.ops if o.f == "send" and o.type == "ok"
                  and o.complete is not None and o.complete >= fault_start)
    gaps = [b - a for a, b in zip([fault_start, *acks], acks, strict=False)]
    result = {"scenario": name, "seed": SEED, "fault": info, "fault_s": round(healed_at - fault_start, 1),
              "leader_before": leader_before, **during,
              "serving_after_heal_s": round(serving_s, 2),
              "whole_after_heal_s": round(serving_s + whole_s, 2),
              "acked_during_fault": len(in_fault),
              # the longest time without an acknowledgement from the fault on: failover
              "longest_ack_gap_s": round(max(gaps, default=0.0), 2),
              "acked_during_fault_via": dict(Counter(o.via for o in in_fault)),
              "counts": a.counts, "ops": dict(q.counts)}
    RESULTS.append(result)
    print(json.dumps(result))
    assert a.valid, f"{name}: {a.summary()}\nhistory: {tmp_path / f'{name}-history.jsonl'}"
    assert a.counts["ok"] > 0
    return result


def leader_cut_from_zk_and_followers(cluster: NetCluster, topic: str) -> dict[str, Any]:
    """Kafka 0.8's Jepsen scenario: the leader loses ZooKeeper and its followers, the
    clients still reach it (and the followers, which reach ZooKeeper)."""
    leader, followers = _leader(cluster, topic)
    cut = ["zk", *[f"n{f}" for f in followers]]
    cluster.net.partition(f"n{leader}", cut)
    return {"kind": "leader-cut-from-zk-and-followers", "leader": leader, "cut_from": cut,
            "controller": cluster.controller()}


def follower_isolated(cluster: NetCluster, topic: str) -> dict[str, Any]:
    """One follower cut from every host (ZooKeeper, brokers, clients, control)."""
    leader, followers = _leader(cluster, topic)
    f = followers[0]
    cluster.net.isolate(f"n{f}", keep=())
    return {"kind": "follower-isolated", "leader": leader, "follower": f,
            "controller": cluster.controller()}


def leader_cut_from_followers(cluster: NetCluster, topic: str) -> dict[str, Any]:
    """The leader loses its followers only: it keeps ZooKeeper (so it stays leader) and
    the clients. The ISR shrinks to the leader alone, below min.insync.replicas=2: it
    must refuse acks=all writes, not acknowledge them alone (Kafka 0.8's loss)."""
    leader, followers = _leader(cluster, topic)
    cluster.net.partition(f"n{leader}", [f"n{f}" for f in followers])
    return {"kind": "leader-cut-from-followers", "leader": leader, "followers": followers,
            "controller": cluster.controller()}


def leader_cut_from_zk(cluster: NetCluster, topic: str) -> dict[str, Any]:
    """The leader loses ZooKeeper only: its session expires and a follower is elected,
    while the old leader still reaches its followers and the clients."""
    leader, followers = _leader(cluster, topic)
    cluster.net.partition(f"n{leader}", ["zk"])
    return {"kind": "leader-cut-from-zk", "leader": leader, "followers": followers,
            "controller": cluster.controller()}


LOSS_PERCENT = 40


def leader_to_followers_loss(cluster: NetCluster, topic: str) -> dict[str, Any]:
    """One-way loss: 40 % of the packets from the leader to its followers dropped (the
    followers' packets to it all arrive)."""
    leader, followers = _leader(cluster, topic)
    cluster.net.drop(f"n{leader}", [f"n{f}" for f in followers], percent=LOSS_PERCENT)
    return {"kind": "one-way-loss-leader-to-followers", "percent": LOSS_PERCENT,
            "leader": leader, "followers": followers, "controller": cluster.controller()}


def test_leader_cut_from_zookeeper_and_followers(cluster: NetCluster, tmp_path: Path) -> None:
    _scenario(cluster, tmp_path, "leader-cut", leader_cut_from_zk_and_followers)


def test_leader_cut_from_its_followers_only(cluster: NetCluster, tmp_path: Path) -> None:
    r = _scenario(cluster, tmp_path, "leader-followers-cut", leader_cut_from_followers)
    assert r["zk_state_at_heal"]["leader"] == r["fault"]["leader"]  # it kept its session


def test_leader_cut_from_zookeeper_only(cluster: NetCluster, tmp_path: Path) -> None:
    r = _scenario(cluster, tmp_path, "leader-zk-cut", leader_cut_from_zk)
    assert r["zk_state_at_heal"]["leader"] != r["fault"]["leader"]  # a follower took over


def test_one_follower_cleanly_partitioned(cluster: NetCluster, tmp_path: Path) -> None:
    _scenario(cluster, tmp_path, "follower-cut", follower_isolated)


def test_one_way_loss_from_leader_to_followers(cluster: NetCluster, tmp_path: Path) -> None:
    _scenario(cluster, tmp_path, "one-way-loss", leader_to_followers_loss)


FAULTS: dict[str, Callable[[NetCluster, str], dict[str, Any]]] = {
    "leader-cut-from-zk-and-followers": leader_cut_from_zk_and_followers,
    "leader-cut-from-followers": leader_cut_from_followers,
    "leader-cut-from-zk": leader_cut_from_zk,
    "follower-isolated": follower_isolated,
    "one-way-loss-leader-to-followers": leader_to_followers_loss,
}
MIXED_ROUNDS = int(os.environ.get("FRANZ_JEPSEN_ROUNDS") or 1)  # rounds of every kind once
MIXED_FAULTS = 5 * MIXED_ROUNDS
MIXED_HOLD_S = (5.0, 9.0)  # each fault held this long (seeded)
MIXED_GAP_S = (1.0, 4.0)  # healed this long before the next (the cluster may not be whole)


@pytest.mark.timeout(300 + 120 * MIXED_ROUNDS)
def test_faults_mixed_over_time(cluster: NetCluster, tmp_path: Path) -> None:
    """The five fault kinds in a seeded order (``FRANZ_JEPSEN_ROUNDS`` rounds of them,
    default 1), each held 5-9 s, with 1-4 s of heal between them
    (not waiting for the cluster to be whole): each picks its victims from ZooKeeper's
    state at that moment."""
    rng = random.Random(SEED)
    budget = MIXED_FAULTS * (MIXED_HOLD_S[1] + MIXED_GAP_S[1])

    def schedule(c: NetCluster, topic: str) -> dict[str, Any]:
        done = []
        kinds: list[str] = []
        for _ in range(MIXED_ROUNDS):  # each round: every kind once, in a seeded order
            one = sorted(FAULTS)
            rng.shuffle(one)
            kinds += one
        for i, kind in enumerate(kinds[:MIXED_FAULTS]):
            info = FAULTS[kind](c, topic)
            hold = rng.uniform(*MIXED_HOLD_S)
            time.sleep(hold)
            info["hold_s"] = round(hold, 1)
            if i < MIXED_FAULTS - 1:  # the last one is healed by the scenario
                c.net.heal()
                gap = rng.uniform(*MIXED_GAP_S)
                time.sleep(gap)
                info["healed_s"] = round(gap, 1)
            done.append(info)
        return {"kind": "mixed", "faults": done}

    r = _scenario(cluster, tmp_path, "mixed", schedule, hold_s=0.0, fault_budget_s=budget)
    assert len(r["fault"]["faults"]) == MIXED_FAULTS
