"""``franz bench kafka --quick`` end to end (app.bench.kafka_protocol): one franz serve
with its Kafka listener, the two ceiling servers, the raw generator, librdkafka, kcat and
REST, every case run once. Checks only that every row and every ratio of the report is
there and that no case failed: timings live in the benchmark and docs/benchmarks.md,
never in a test. ``benchmarks/kafka_protocol_bench.py``, the script that runs the same
code from a source tree, is checked to start (its --help), not run twice."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from app.bench import kafka_protocol as bench

pytest.importorskip("confluent_kafka")
pytest.importorskip("crc32c")

SCRIPT = ROOT / "benchmarks" / "kafka_protocol_bench.py"
TIMEOUT_S = 240  # --quick takes ~30 s on a quiet 2-core machine


def test_quick_run_reports_every_row(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, "-m", "app.cli", "bench", "kafka", "--quick", "--json",
                        str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=TIMEOUT_S, check=False)
    assert r.returncode == 0, (r.stdout[-4000:], r.stderr[-4000:])
    report = r.stdout
    expected = list(bench.ALL_CASES)
    if shutil.which("kcat") is None and shutil.which("kafkacat") is None:
        expected.remove("kcat")  # the case says "not run" and has no row
    table = report.split("\ncase ", 1)[1]
    for case in expected:
        assert f"\n{case} " in table, (case, report)
    for label, *_ in bench.RATIOS:
        assert label in table, (label, report)
    result = json.loads(out.read_text())
    assert result["failures"] == []
    assert set(expected) <= set(result["summary"]["cases"])
    assert len(result["summary"]["ratios"]) == len(bench.RATIOS)
    for case in expected:  # each ran and was measured (how fast is not this test's business)
        assert result["rounds"][0][case]["seconds"] > 0, case


def test_the_script_starts_from_any_directory() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), "--help"], cwd=ROOT.parent,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert bench.__doc__.split("\n\n")[0] in r.stdout  # the benchmark's own parser
