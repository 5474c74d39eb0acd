"""Configuring and starting ``franz serve`` / ``franz broker`` as a Kafka user would:
``franz --version``, a ``server.properties`` in Java's format whose ``listeners`` are
served (the command line winning only when given), unknown keys and bad values refused
in one line, a data directory or a port already in use refused in one line before the
data directory is touched, and a quiet start: one summary line, no per-partition lines,
no "unclean shutdown" for a new data directory."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from tests.cluster.conftest import wait_until
from tests.integration.conftest import ROOT, free_port

START_TIMEOUT_S = 60


def franz(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``franz ARGS`` to its end (for the commands that fail or exit at once)."""
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


@dataclass
class Running:
    """A ``franz serve`` started with ``args``, its output in ``log``."""

    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _ready(url: str, run: Running) -> bool:
    if run.proc.poll() is not None:
        raise AssertionError(f"franz exited with {run.proc.returncode}:\n{run.output()}")
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


Serve = Callable[..., Running]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """``serve(url, *args)``: start ``franz serve ARGS``, wait until ``url`` is ready."""
    started: list[Running] = []

    def start(url: str, *args: str) -> Running:
        log = tmp_path / f"serve-{len(started)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", *args], cwd=ROOT,
                                    stdout=out, stderr=subprocess.STDOUT)
        run = Running(proc, log)
        started.append(run)
        wait_until(lambda: _ready(url, run), START_TIMEOUT_S, f"franz serve {args} ready")
        return run

    yield start
    for run in started:
        run.stop()


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == "", result.stdout
    return lines[0]


def test_version() -> None:
    result = franz("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{version('franz')}\n", "")


def test_a_properties_file_in_javas_format_is_served_as_written(tmp_path: Path,
                                                                serve: Serve) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        "# franz, as Kafka's server.properties\n"
        "! a comment too\n"
        f"listeners = http\\://127.0.0.1\\:{port}\n"
        f"log.dirs: {tmp_path / 'data'}\n"
        "num.partitions 4\n"
        "log.retention.hours = 1\\\n"
        "                      2\n"
        "num.io.threads=8\n",  # Kafka's, accepted and ignored (one warning)
        encoding="utf-8")
    url = f"http://127.0.0.1:{port}"
    run = serve(url, "--config", str(config))  # no --port: the file's listener
    cluster = httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
    configs = f"{url}/v3/clusters/{cluster}/brokers/0/configs"
    assert httpx.get(f"{configs}/num.partitions").json()["value"] == "4"
    assert httpx.get(f"{configs}/log.retention.hours").json()["value"] == "12"
    warnings = [line for line in run.output().splitlines() if " WARNING " in line]
    assert len(warnings) == 1 and "num.io.threads" in warnings[0], warnings


def test_the_command_line_wins_only_when_given(tmp_path: Path, serve: Serve) -> None:
    in_file, on_command_line = free_port(), free_port()
    config = tmp_path / "server.properties"
    config.write_text(f"listeners=http://127.0.0.1:{in_file}\nlog.dirs={tmp_path / 'data'}\n",
                      encoding="utf-8")
    serve(f"http://127.0.0.1:{on_command_line}", "--config", str(config),
          "--port", str(on_command_line))
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{in_file}/healthz", timeout=2)


def test_an_unknown_key_is_refused_naming_the_closest(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={tmp_path / 'data'}\nnum.partition=7\n", encoding="utf-8")
    result = franz("serve", "--config", str(config), "--port", str(free_port()))
    assert result.returncode == 2
    assert _one_line(result) == (f"franz serve: bad configuration: {config}:2: unknown "
                                 "property 'num.partition'; did you mean num.partitions?")
    assert not (tmp_path / "data").exists()
    result = franz("broker", "--zookeeper", "127.0.0.1:1", "--data-dir", str(tmp_path / "data"),
                   "--override", "replica.lag.time.ms=1000")
    assert result.returncode == 2
    assert _one_line(result) == ("franz broker: bad configuration: --override "
                                 "replica.lag.time.ms: unknown property 'replica.lag.time.ms'; "
                                 "did you mean replica.lag.time.max.ms?")


def test_a_bad_value_names_key_value_and_what_is_allowed(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    result = franz("serve", "--data-dir", data, "--override", "num.partitions=many")
    assert result.returncode == 2
    line = _one_line(result)
    assert line.startswith("franz serve: bad configuration: --override num.partitions: ")
    assert "'many'" in line and "int" in line, line
    config = tmp_path / "server.properties"
    config.write_text("log.segment.bytes=10\n", encoding="utf-8")
    result = franz("serve", "--data-dir", data, "--config", str(config))
    assert result.returncode == 2
    assert _one_line(result) == (
        f"franz serve: bad configuration: {config}:1: Invalid value 10 for configuration "
        "log.segment.bytes: Value must be at least 14 (allowed: [14, 2147483647])")
    assert not (tmp_path / "data").exists()


def test_a_quiet_start_and_a_data_directory_or_port_in_use(tmp_path: Path,
                                                            serve: Serve) -> None:
    data, port = tmp_path / "data", free_port()
    first = serve(f"http://127.0.0.1:{port}", "--port", str(port), "--data-dir", str(data))
    lines = first.output().splitlines()
    info = [line for line in lines if " INFO " in line]
    assert not [line for line in lines if "unclean" in line or "created log for" in line
                or "__consumer_offsets-" in line], lines
    summary = [line for line in info if "ready in" in line]
    assert len(summary) == 1, info
    # __consumer_offsets (50), __franz_idempotency (16), _schemas (1)
    assert f"67 partitions (67 internal) in {data} (new)" in summary[0], summary
    assert f"listening on http://127.0.0.1:{port}" in summary[0], summary
    # was about 110: two lines per offsets partition; Alembic's one line per schema
    # revision (a fresh data dir runs them all) grows with the schema, not with partitions
    per_start = [line for line in info if "alembic.runtime.migration: Running upgrade" not in line]
    assert len(per_start) <= 9, info

    in_use = franz("serve", "--port", str(free_port()), "--data-dir", str(data))
    assert in_use.returncode == 1
    line = _one_line(in_use)
    assert line.startswith("franz serve: cannot start: ") and str(data) in line, line
    assert "another process is using this log dir" in line, line

    fresh = tmp_path / "fresh"
    taken = franz("serve", "--port", str(port), "--data-dir", str(fresh))
    assert taken.returncode == 1
    assert _one_line(taken) == (
        f"franz serve: cannot start: listener http://127.0.0.1:{port} could not be opened: "
        f"port {port} is already in use (another franz, or another program: stop it, or "
        "change listeners / --port)")
    assert not fresh.exists()  # refused before anything was created
    assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200  # untouched

    first.stop()
    assert first.proc.returncode == 0
    again = serve(f"http://127.0.0.1:{port}", "--port", str(port), "--data-dir", str(data))
    restart = again.output()
    assert "loaded 67 logs from" in restart and "(clean shutdown)" in restart, restart
    assert "(new)" not in restart
