"""The operator's and the machine's steps. Each injects its fault, lets the clients go on
against the brokers still serving (``during``: a few workload steps, recorded in the
history), undoes the fault, and leaves healing to the walk (bounded)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

from core.broker.group.hashing import coordinator_partition

from .context import Ctx
from .errors import Violation
from .settings import OFFSETS_PARTITIONS, SESSION_MS, TOPICS

During = Callable[[Ctx, str | None], list[dict[str, Any]]]  # (ctx, focus group) -> substeps


def _wait(what: str, cond: Callable[[], Any], budget_s: float) -> float:
    started = time.monotonic()
    while not cond():
        if time.monotonic() - started > budget_s:
            raise Violation("not-healed", f"{what}: not within {budget_s:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - started


def _degraded(ctx: Ctx, during: During, focus: str | None = None) -> list[dict[str, Any]]:
    ctx.degraded = True
    try:
        return during(ctx, focus)
    finally:
        ctx.degraded = False


def _gone_from_zk(ctx: Ctx, broker_id: int) -> float:
    return _wait(f"broker {broker_id}'s session expired",
                 lambda: broker_id not in ctx.cluster.registered(), SESSION_MS / 1000 + 20)


def restart(ctx: Ctx, during: During) -> dict[str, Any]:
    """A clean restart (SIGTERM: controlled shutdown moves leadership away first)."""
    b = ctx.cluster.brokers[ctx.rng.randrange(3)]
    b.stop()
    sub = _degraded(ctx, during)
    b.start()
    return {"broker": b.broker_id, "during": sub}


def kill9(ctx: Ctx, during: During) -> dict[str, Any]:
    b = ctx.cluster.brokers[ctx.rng.randrange(3)]
    b.kill()
    sub = _degraded(ctx, during)  # at once: the clients live through the failover
    took = _gone_from_zk(ctx, b.broker_id)
    b.start()
    return {"broker": b.broker_id, "failover_s": round(took, 1), "during": sub}


def kill_controller(ctx: Ctx, during: During) -> dict[str, Any]:
    c = ctx.cluster.controller()
    if c is None:
        raise Violation("not-healed", "no controller in a healed cluster")
    ctx.cluster.brokers[c].kill()
    took = _wait("a new controller", lambda: ctx.cluster.controller() not in (None, c),
                 SESSION_MS / 1000 + 20)
    sub = _degraded(ctx, during)
    ctx.cluster.brokers[c].start()
    return {"broker": c, "new_controller": ctx.cluster.controller(),
            "failover_s": round(took, 1), "during": sub}


def _coordinator(ctx: Ctx, group: str) -> tuple[int, int]:
    p = coordinator_partition(group, OFFSETS_PARTITIONS)
    return p, ctx.cluster.leader("__consumer_offsets", p)


def _focus_group(ctx: Ctx) -> str:
    groups = sorted(ctx.model.groups)
    return groups[ctx.rng.randrange(len(groups))]


def sigstop(ctx: Ctx, during: During) -> dict[str, Any]:
    """SIGSTOP past the ZooKeeper session (the others take over its partitions), the
    clients go on, SIGCONT: a zombie that must notice it lost its session. Most often
    the paused broker is a group's coordinator."""
    focus = None
    if ctx.rng.random() < 0.7:
        focus = _focus_group(ctx)
        victim = _coordinator(ctx, focus)[1]
    else:
        victim = ctx.rng.randrange(3)
    b = ctx.cluster.brokers[victim]
    b.signal(signal.SIGSTOP)
    ctx.cluster.paused.add(victim)
    try:
        took = _gone_from_zk(ctx, victim)
        _wait("its partitions led elsewhere", lambda: all(
            ctx.cluster.leader(t, p) not in (victim, -1) for t, p in ctx.cluster.all_partitions()),
            30)
        sub = _degraded(ctx, during, focus)
    finally:
        b.signal(signal.SIGCONT)
        ctx.cluster.paused.discard(victim)
    return {"broker": victim, "group": focus, "expired_after_s": round(took, 1), "during": sub}


def _move_away_and_back(ctx: Ctx, topic: str, p: int, during: During,
                        focus: str | None) -> dict[str, Any]:
    home = ctx.cluster.leader(topic, p)
    others = [x for x in ctx.cluster.assignment(topic)[p] if x != home]
    away = others[ctx.rng.randrange(len(others))]
    there = ctx.cluster.move_leader(topic, p, away)
    sub = during(ctx, focus)  # not degraded: the cluster is whole, only moved
    back = ctx.cluster.move_leader(topic, p, home)
    return {"topic": topic, "partition": p, "from": home, "to": away,
            "plans": [there["replicas"], back["replicas"]], "group": focus, "during": sub}


def move_data_leader(ctx: Ctx, during: During) -> dict[str, Any]:
    spec = TOPICS[ctx.rng.randrange(len(TOPICS))]
    return _move_away_and_back(ctx, spec.name, ctx.rng.randrange(spec.partitions), during, None)


def move_offsets_leader(ctx: Ctx, during: During) -> dict[str, Any]:
    """A group's coordinator moved away with the tools and back: the coordinator that
    gets it back must serve what the other one was told meanwhile."""
    focus = _focus_group(ctx)
    p, _ = _coordinator(ctx, focus)
    return _move_away_and_back(ctx, "__consumer_offsets", p, during, focus)


FAULTS: dict[str, Callable[[Ctx, During], dict[str, Any]]] = {
    "restart": restart,
    "kill9": kill9,
    "kill-controller": kill_controller,
    "sigstop-past-session": sigstop,
    "move-data-leader": move_data_leader,
    "move-offsets-leader": move_offsets_leader,
}
