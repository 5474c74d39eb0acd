"""The life test's walk for as long as asked: an operator's week, for an hour or more.

    python3 benchmarks/life_soak.py --seconds 3600 [--seed N] [--steps N] [--keep DIR]

Starts its own ZooKeeper (Debian's zookeeper package) and three ``franz broker``
processes on 127.0.0.1, runs the seeded walk of tests/cluster/life/ (docs/life-test.md)
until ``--seconds`` (or ``--steps``) are used up or a violation is found, stops
everything and prints the report: steps by kind, faults by kind, checks, answers by
class, violations (0 expected). Exit code 1 on a violation (the seed, the replay command
and the whole step history are printed), 0 otherwise. ``--keep DIR`` keeps the data
dirs, broker logs and ``life-history.jsonl`` there.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from cluster.life.cluster import zookeeper  # noqa: E402
from cluster.life.settings import knobs  # noqa: E402
from cluster.life.walk import run_life  # noqa: E402


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3600.0, help="how long the walk runs")
    ap.add_argument("--seed", type=int, default=None, help="the walk's seed (default: random)")
    ap.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run's files here")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 2**31
    k = knobs(seed=seed, steps=args.steps, seconds=args.seconds)
    tmp = Path(tempfile.mkdtemp(prefix="franz-life-"))
    try:
        with zookeeper(tmp) as zk:
            report = run_life(f"{zk}/franz-life", tmp, k, log=log)
    finally:
        if args.keep is not None:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
            log(f"kept in {args.keep}")
        shutil.rmtree(tmp, ignore_errors=True)
    print(report.text(), flush=True)
    if report.violations:
        print(report.failure(), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
