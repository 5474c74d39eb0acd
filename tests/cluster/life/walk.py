"""The seeded walk: its schedule, its history, its counts and its report.

The schedule is rounds of every fault kind in a seeded order, each fault after one to
three workload steps drawn by weight; after every step the cluster must heal (bounded)
and the checker must pass. The first violation stops the walk: the report then holds
the seed, the violation and the whole history, from which the run replays
(``FRANZ_LIFE_SEED=<seed> FRANZ_LIFE_STEPS=<failing step + 1>``).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.broker.group.hashing import coordinator_partition

from . import workload as w
from .checker import Checker
from .cluster import Cluster
from .context import Ctx
from .errors import Violation
from .faults import FAULTS
from .http import Http
from .model import Group, Model
from .settings import COMPACT, DATA, GROUPS_WANTED, OFFSETS_PARTITIONS, RETAIN, WalkKnobs

WORKLOAD_WEIGHTS: dict[str, float] = {
    "produce": 4, "produce-compact": 2, "produce-retain": 2, "burst-compact": 1,
    "burst-retain": 1.5, "exact-retry": 1.5, "join": 1, "leave": 0.7, "read": 2,
    "commit": 2.5, "commit-burst": 0.7,
}
GROUP_STEPS = {"join", "leave", "read", "commit", "commit-burst"}
MAX_STEPS = 1_000_000  # a bound for runs limited by time


def group_names(n: int) -> list[str]:
    """``n`` group names coordinated by different ``__consumer_offsets`` partitions."""
    out: list[str] = []
    taken: set[int] = set()
    for i in range(1000):
        name = f"life-g{i}"
        p = coordinator_partition(name, OFFSETS_PARTITIONS)
        if p not in taken:
            taken.add(p)
            out.append(name)
            if len(out) == n:
                return out
    raise AssertionError("not enough group names")


def run_workload(ctx: Ctx, kind: str, group: str | None = None) -> dict[str, Any]:
    g: Group = ctx.model.groups[group or sorted(ctx.model.groups)[
        ctx.rng.randrange(len(ctx.model.groups))]]
    if kind == "produce":
        return w.produce(ctx, DATA)
    if kind == "produce-compact":
        return w.produce(ctx, COMPACT)
    if kind == "produce-retain":
        return w.produce(ctx, RETAIN, idempotent=ctx.rng.random() < 0.2)
    if kind == "burst-compact":
        return w.burst_compact(ctx)
    if kind == "burst-retain":
        return w.burst_retain(ctx)
    if kind == "exact-retry":
        return w.exact_retry(ctx)
    return {"join": w.join, "leave": w.leave, "read": w.read, "commit": w.commit,
            "commit-burst": w.commit_burst}[kind](ctx, g)


@dataclass
class Report:
    seed: int
    steps: int = 0
    seconds: float = 0.0
    steps_by_kind: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    checks: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)
    model: dict[str, Any] = field(default_factory=dict)
    violations: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"life walk: seed {self.seed}, {self.steps} steps in {self.seconds:.0f} s, "
                 f"{self.checks} checks, {len(self.violations)} violation(s)",
                 "steps by kind: " + _fmt(self.steps_by_kind),
                 "faults by kind: " + _fmt(self.faults),
                 "answers: " + _fmt(self.answers),
                 "counts: " + _fmt(self.counts),
                 "model: " + json.dumps(self.model, sort_keys=True)]
        for v in self.violations:
            lines.append(f"VIOLATION at step {v['step']} ({v['kind']}): {v['detail']}")
        return "\n".join(lines)

    def failure(self) -> str:
        """The message of a failed run: seed, how to replay, the violation, the history."""
        v = self.violations[0]
        return "\n".join([
            f"life walk seed {self.seed}: violation at step {v['step']}: {v['kind']}: "
            f"{v['detail']}",
            f"replay: FRANZ_LIFE_SEED={self.seed} FRANZ_LIFE_STEPS={v['step'] + 1} "
            "python3 -m pytest -s tests/cluster/test_life.py",
            self.text(), "history:", *(json.dumps(h, default=str) for h in self.history)])


def _fmt(c: Counter[str]) -> str:
    return ", ".join(f"{k}={n}" for k, n in sorted(c.items())) or "-"


class Walk:
    def __init__(self, cluster: Cluster, http: Http, knobs: WalkKnobs, *,
                 log: Any = print, history_path: Path | None = None) -> None:
        self.knobs = knobs
        self.rng = random.Random(knobs.seed)
        self.ctx = Ctx(cluster, http, Model(), self.rng, log)
        self.checker = Checker()
        self.report = Report(knobs.seed)
        self.log = log
        self.history_path = history_path
        self._entry: dict[str, Any] = {}
        unknown = set(knobs.faults or ()) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {sorted(FAULTS)}")
        for name in group_names(GROUPS_WANTED):
            self.ctx.model.groups[name] = Group(name)

    def schedule(self) -> Iterator[tuple[str, str, str | None]]:
        """(kind, "workload" | "fault", group): first every group gets a member, then
        rounds of every fault kind in a seeded order, one to three workload steps before
        each."""
        for name in sorted(self.ctx.model.groups):
            yield "join", "workload", name
        kinds = list(WORKLOAD_WEIGHTS)
        weights = [WORKLOAD_WEIGHTS[k] for k in kinds]
        while True:
            faults = sorted(self.knobs.faults or FAULTS)
            self.rng.shuffle(faults)
            for fault in faults:
                for _ in range(self.rng.randint(1, 3)):
                    yield self.rng.choices(kinds, weights)[0], "workload", None
                yield fault, "fault", None

    def during(self, ctx: Ctx, focus: str | None) -> list[dict[str, Any]]:
        """The clients' steps while a fault is in force: one to three; with a focus group
        (its coordinator is the one paused or moved) a produce, a commit of that group
        (forward) and a join of it."""
        kinds = list(WORKLOAD_WEIGHTS)
        weights = [WORKLOAD_WEIGHTS[k] for k in kinds]
        n = 3 if focus else self.rng.randint(1, 3)
        planned = ["produce", "commit", "join"] if focus else []
        planned += [self.rng.choices(kinds, weights)[0] for _ in range(n - len(planned))]
        out = self._entry.setdefault("during", [])  # in the history even if a step raises
        for kind in planned:
            self.report.steps_by_kind[f"{kind} (during a fault)"] += 1
            entry = {"kind": kind}
            out.append(entry)  # in the history even if it raises
            entry.update(run_workload(ctx, kind, focus if kind in GROUP_STEPS else None))
        return out

    def run(self) -> Report:
        started = time.monotonic()
        knobs, rep = self.knobs, self.report
        self.log(f"life walk: seed {knobs.seed} (FRANZ_LIFE_SEED={knobs.seed}), steps "
                 f"{knobs.steps}, seconds {knobs.seconds}")
        for i, (kind, what, group) in enumerate(self.schedule()):
            elapsed = time.monotonic() - started
            if i >= (knobs.steps if knobs.steps is not None else MAX_STEPS):
                break
            if knobs.seconds is not None and elapsed >= knobs.seconds:
                break
            entry: dict[str, Any] = {"step": i, "t": round(elapsed, 1), "kind": kind}
            rep.history.append(entry)
            try:
                self._step(entry, kind, what, group)
            except Violation as v:
                self._violation(entry, v.kind, v.detail)
                break
            except AssertionError as exc:  # a broker that does not start again
                self._violation(entry, "broker-failed", str(exc)[-2000:])
                break
            finally:
                self._write_history(entry)
            rep.steps = i + 1
        rep.seconds = time.monotonic() - started
        rep.checks = self.checker.checks
        rep.answers = self.ctx.http.counts
        rep.counts = self.ctx.counts + self.checker.counts
        rep.counts["requests"] = self.ctx.http.requests
        rep.counts["tool-runs"] = self.ctx.cluster.tool_runs
        rep.model = self.ctx.model.summary()
        return rep

    def _step(self, entry: dict[str, Any], kind: str, what: str, group: str | None) -> None:
        t0 = time.monotonic()
        self._entry = entry
        rep = self.report
        rep.steps_by_kind[kind] += 1
        if what == "fault":
            rep.faults[kind] += 1
            entry.update(FAULTS[kind](self.ctx, self.during))
        else:
            entry.update(run_workload(self.ctx, kind, group))
        entry["heal_s"] = round(self.ctx.cluster.heal(f"step {entry['step']} ({kind})"), 1)
        if self.ctx.pending_keyed:
            entry["resumed_keys"] = w.retry_pending_keyed(self.ctx)
        entry.update(self.checker.check(self.ctx))
        entry["took_s"] = round(time.monotonic() - t0, 1)
        shown = {k: v for k, v in entry.items() if k not in ("step", "kind", "during")}
        if "during" in entry:
            shown["during"] = [d["kind"] for d in entry["during"]]
        self.log(f"step {entry['step']} {kind}: {json.dumps(shown, default=str)[:400]}")

    def _violation(self, entry: dict[str, Any], kind: str, detail: str) -> None:
        entry["violation"] = f"{kind}: {detail}"
        self.report.violations.append({"step": entry["step"], "kind": kind, "detail": detail})
        self.log(f"VIOLATION at step {entry['step']} ({entry['kind']}): {kind}: {detail}")

    def _write_history(self, entry: dict[str, Any]) -> None:
        if self.history_path is not None:
            with self.history_path.open("a") as f:
                f.write(json.dumps(entry, default=str) + "\n")


def run_life(zk: str, root: Path, knobs: WalkKnobs, *, log: Any = print) -> Report:
    """A cluster of three brokers on ``zk`` (a chroot of its own) under ``root``, the
    walk over it, the cluster stopped; the report."""
    http = Http()
    cluster = Cluster(root, zk, http, log)
    try:
        cluster.start()
        walk = Walk(cluster, http, knobs, log=log, history_path=root / "life-history.jsonl")
        return walk.run()
    finally:
        cluster.close()
        http.close()
