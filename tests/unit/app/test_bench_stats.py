"""Percentiles and medians of ``franz bench`` (app/bench/stats.py): nearest rank on the
sorted samples, always one of the samples, p0 = min and p100 = max."""

from __future__ import annotations

import math
import random

import pytest

from app.bench.stats import latency_summary, med, pct
from app.bench.workloads import machine_cpu_ticks, steal_pct


def test_pct_of_1_to_100() -> None:
    values = [float(v) for v in range(1, 101)]
    assert pct(values, 0) == 1.0
    assert pct(values, 50) == 51.0  # index round(0.5 * 99) = 50 (banker's rounding of 49.5)
    assert pct(values, 90) == 90.0  # index round(89.1) = 89
    assert pct(values, 99) == 99.0  # index round(98.01) = 98
    assert pct(values, 99.9) == 100.0  # index round(98.901) = 99
    assert pct(values, 100) == 100.0


def test_pct_is_always_a_sample_and_monotonic() -> None:
    rng = random.Random(7)
    values = sorted(rng.expovariate(1.0) for _ in range(1001))
    ps = [0, 1, 10, 25, 50, 75, 90, 99, 99.9, 100]
    got = [pct(values, p) for p in ps]
    assert all(g in values for g in got)
    assert got == sorted(got)
    assert got[0] == values[0] and got[-1] == values[-1]
    assert pct(values, 50) == values[500]  # odd count: the middle element


def test_pct_edge_cases() -> None:
    assert math.isnan(pct([], 50))
    assert pct([3.5], 0) == pct([3.5], 99.9) == 3.5
    assert pct([1.0, 2.0], 50) == 1.0  # round(0.5) = 0: the lower one, never 1.5
    with pytest.raises(ValueError):
        pct([1.0], 101)
    with pytest.raises(ValueError):
        pct([1.0], -1)


def test_med_skips_missing_values() -> None:
    assert med([3.0, None, 1.0, 2.0]) == 2.0
    assert med([4.0, 1.0]) == 2.5
    assert med([None, float("nan")]) is None
    assert med([]) is None


def test_latency_summary_in_ms() -> None:
    seconds = [i / 1000 for i in range(1, 1001)]  # 1 ms .. 1000 ms, shuffled
    random.Random(1).shuffle(seconds)
    s = latency_summary(seconds)
    assert s["samples"] == 1000
    assert s["p50"] == pytest.approx(501.0)  # index round(499.5) = 500 (even rounding)
    assert s["p90"] == pytest.approx(900.0)
    assert s["p99"] == pytest.approx(990.0)
    assert s["p999"] == pytest.approx(999.0)
    assert s["max"] == pytest.approx(1000.0)
    assert s["mean"] == pytest.approx(500.5)


def test_latency_summary_of_nothing() -> None:
    s = latency_summary([])
    assert s == {"samples": 0, "p50": None, "p90": None, "p99": None, "p999": None,
                 "max": None, "mean": None}


# --- which offsets `franz bench consume` reads (app/bench/runs.py) -----------------------------


def _covered(plan: list[list[tuple[int, int, int]]]) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for stretches in plan:
        for p, lo, hi in stretches:
            out.setdefault(p, []).append((lo, hi))
    return {p: sorted(v) for p, v in out.items()}


def test_consume_plan_near_the_tail_and_from_the_beginning() -> None:
    from app.bench.runs import plan_stretches

    offsets = {0: (0, 10_000), 1: (5_000, 15_000)}
    tail = plan_stretches(offsets, 4_000, 4, 1000, from_beginning=False)
    assert len(tail) == 4 and all(tail)
    cov = _covered(tail)
    assert sum(hi - lo for v in cov.values() for lo, hi in v) == 4_000
    assert cov[0][-1][1] == 10_000 and cov[0][0][0] == 8_000  # the last 2000 of each
    assert cov[1][-1][1] == 15_000 and cov[1][0][0] == 13_000
    head = _covered(plan_stretches(offsets, 4_000, 4, 1000, from_beginning=True))
    assert head[0][0][0] == 0 and head[1][0][0] == 5_000


def test_consume_plan_is_bounded_by_what_exists() -> None:
    from app.bench.runs import plan_stretches

    plan = plan_stretches({0: (0, 1500), 1: (0, 0)}, 1_000_000, 8, 1000, from_beginning=True)
    cov = _covered(plan)
    assert cov == {0: [(0, 1500)]}  # too small to split into batch-sized halves
    assert plan_stretches({0: (7, 7)}, 100, 2, 10, from_beginning=False) == [[], []]


def test_steal_is_the_share_of_machine_cpu_time_between_two_readings() -> None:
    assert steal_pct((10, 1000), (60, 2000)) == 5.0
    assert steal_pct((10, 1000), (10, 1000)) is None  # no time passed
    assert steal_pct(None, (1, 2)) is None
    ticks = machine_cpu_ticks()  # this machine's /proc/stat
    assert ticks is not None and 0 <= ticks[0] <= ticks[1]
