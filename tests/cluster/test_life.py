"""THE LIFE TEST: an operator's week in a few minutes, on three real brokers and a real
ZooKeeper, checked against a model after every step (tests/cluster/life/,
docs/life-test.md).

A short run with a fixed seed. ``FRANZ_LIFE_SEED``, ``FRANZ_LIFE_STEPS`` and
``FRANZ_LIFE_SECONDS`` override it (replay a failure with the seed and step count its
message prints); ``benchmarks/life_soak.py`` runs the same walk for an hour.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from .life.faults import FAULTS
from .life.settings import knobs
from .life.walk import run_life

SEED = 20261201
STEPS = 42
SECONDS = 170.0  # a bound: a slow machine stops early rather than run long

pytestmark = [pytest.mark.life, pytest.mark.timeout(480)]


def test_life_walk_with_a_fixed_seed(zookeeper: str, tmp_path: Path) -> None:
    k = knobs(seed=SEED, steps=STEPS, seconds=SECONDS)
    report = run_life(f"{zookeeper}/franz-life-{uuid.uuid4().hex}", tmp_path, k)
    print(report.text())
    assert not report.violations, report.failure()
    overridden = any(os.environ.get(v) for v in ("FRANZ_LIFE_SEED", "FRANZ_LIFE_STEPS",
                                                 "FRANZ_LIFE_SECONDS", "FRANZ_LIFE_FAULTS"))
    if not overridden and report.steps == STEPS:  # the fixed walk meets every fault kind
        assert set(report.faults) == set(FAULTS), report.text()
    assert report.checks >= report.steps
