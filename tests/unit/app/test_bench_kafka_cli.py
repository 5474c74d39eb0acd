"""``franz bench kafka`` hands its options to ``app.bench.kafka_protocol.main`` (the
benchmark's own defaults for the others) and refuses unknown cases before starting
anything. The run itself: tests/integration/test_kafka_bench_smoke.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.bench import kafka_protocol
from app.cli import build_parser, main


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    seen: list[list[str]] = []

    def fake_main(argv: list[str] | None = None) -> int:
        assert argv is not None
        seen.append(argv)
        return 0

    monkeypatch.setattr(kafka_protocol, "main", fake_main)
    return seen


def test_options_reach_the_benchmark(calls: list[list[str]], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["bench", "kafka", "--rounds", "3", "--duration", "2.5", "--cases",
                 "kafka_raw_64k,rest_best", "--override", "num.io.threads=2", "--json",
                 str(out), "--server-cpu", "1", "--client-cpu", "0"]) == 0
    args = kafka_protocol.parse_args(calls[0])
    assert (args.rounds, args.duration, args.cases) == (3, 2.5, "kafka_raw_64k,rest_best")
    assert (args.override, args.json, args.server_cpu, args.client_cpu) == \
        (["num.io.threads=2"], out, 1, 0)
    assert not args.quick and args.warmup == 1.0  # left out: the benchmark's default


def test_quick_and_no_options(calls: list[list[str]]) -> None:
    assert main(["bench", "kafka", "--quick"]) == 0
    assert main(["bench", "kafka"]) == 0
    assert calls == [["--quick"], []]
    quick = kafka_protocol.parse_args(calls[0])
    assert (quick.rounds, quick.warmup, quick.duration) == (1, 0.3, 1.0)


def test_unknown_cases_are_refused_naming_the_known(
        calls: list[list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["bench", "kafka", "--cases", "kafka_raw_64k,nope"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown ['nope']" in err and ", ".join(kafka_protocol.ALL_CASES) in err
    assert calls == []


def test_the_defaults_the_help_names_are_the_benchmarks() -> None:
    sub = build_parser()._subparsers._group_actions[0].choices["bench"]  # type: ignore[union-attr]
    kafka = sub._subparsers._group_actions[0].choices["kafka"]
    defaults = kafka_protocol.parse_args([])
    named = 0
    for action in kafka._actions:
        m = re.search(r"\(default ([0-9.]+)\)", action.help or "")
        if m:
            assert float(m.group(1)) == getattr(defaults, action.dest), action.dest
            named += 1
    assert named == 6
