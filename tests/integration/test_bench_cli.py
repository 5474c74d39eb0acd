"""``franz bench`` run as the real executable against a real server (conftest's
``franz_server``, 3 partitions per auto-created topic): the JSON result has the
documented fields, what produce reports as acknowledged really is in the topic, and a
down server is a clear error with exit code 2. Tiny counts: every run is bounded by
--records and --duration."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import ROOT, free_port
from test_cli_idempotency import Proxy

CLI_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
}
LATENCY_KEYS = {"samples", "p50", "p90", "p99", "p999", "max", "mean"}


def franz_command() -> list[str]:
    script = Path(sys.executable).with_name("franz")
    if script.exists():
        return [str(script)]
    found = shutil.which("franz")
    return [found] if found else [sys.executable, "-m", "app.cli"]


def bench(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*franz_command(), "bench", *args], capture_output=True, text=True,
                          cwd=ROOT, env=CLI_ENV, timeout=timeout, check=False)


def run_json(tmp_path: Path, *args: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    out = tmp_path / "result.json"
    r = bench(*args, "--json", str(out))
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return json.loads(out.read_text()), r


def topic_records(client: httpx.Client, topic: str) -> int:
    """Records in the topic: the sum over its partitions of high watermark - log start."""
    cid = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    base = f"/v3/clusters/{cid}/topics/{topic}/partitions"
    total = 0
    for p in client.get(base).json()["data"]:
        o = client.get(f"{base}/{p['partition_id']}/offset").json()
        total += o["latest_offset"] - o["earliest_offset"]
    return total


def check_latency(lat: dict[str, Any]) -> None:
    assert set(lat) == LATENCY_KEYS, lat
    assert lat["samples"] > 0
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]


def test_produce_writes_exactly_the_records_it_reports(
        tmp_path: Path, franz_url: str, client: httpx.Client, topic: str) -> None:
    # 2050 = 20 full requests of 100 and one of 50: the bound is in records, not requests
    result, r = run_json(tmp_path, "produce", "--bootstrap-server", franz_url, "--topic", topic,
                         "--records", "2050", "--batch", "100", "--record-size", "64",
                         "--connections", "4", "--duration", "20", "--acks", "all")
    assert result["workload"] == "produce" and result["topic"] == topic
    assert result["topic_created"] is True
    assert result["params"]["acks"] == "all" and result["params"]["batch"] == 100
    assert result["records_acked"] == result["records"] == 2050
    assert result["requests"] == 21 and result["errors"] == 0 and result["record_errors"] == 0
    assert result["rec_per_s"] > 0 and result["req_per_s"] > 0 and result["mb_per_s"] > 0
    assert result["seconds"] <= 20
    check_latency(result["latency_ms"])
    assert result["latency_ms"]["samples"] == 21
    assert topic_records(client, topic) == 2050
    # the table on stdout names the columns and the case
    header, row = r.stdout.splitlines()[:2]
    assert header.split()[:5] == ["CASE", "RECORDS", "RECORDS/S", "MB/S", "REQUESTS/S"]
    assert row.split()[:2] == ["produce", "2,050"]


def test_produce_is_bounded_by_duration(
        tmp_path: Path, franz_url: str, client: httpx.Client, topic: str) -> None:
    result, _r = run_json(tmp_path, "produce", "--bootstrap-server", franz_url, "--topic", topic,
                          "--records", "100000000", "--batch", "100", "--connections", "2",
                          "--duration", "1.5")
    assert 0 < result["records_acked"] < 100_000_000
    assert result["seconds"] <= 2.0
    # everything acknowledged (including answers that came after the window) landed
    assert topic_records(client, topic) == result["records_acked"]


def test_produce_creates_the_topic_with_its_config(
        tmp_path: Path, franz_url: str, client: httpx.Client, topic: str) -> None:
    result, _r = run_json(tmp_path, "produce", "--bootstrap-server", franz_url, "--topic", topic,
                          "--records", "500", "--batch", "100", "--partitions", "2",
                          "--config", "flush.messages=1")
    assert result["records_acked"] == 500
    cid = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    parts = client.get(f"/v3/clusters/{cid}/topics/{topic}/partitions").json()["data"]
    assert len(parts) == 2
    cfg = client.get(f"/v3/clusters/{cid}/topics/{topic}/configs/flush.messages").json()
    assert cfg["value"] == "1"


def test_consume_preloads_then_reads_the_tail_or_the_start(
        tmp_path: Path, franz_url: str, client: httpx.Client, topic: str) -> None:
    result, _r = run_json(tmp_path, "consume", "--bootstrap-server", franz_url, "--topic", topic,
                          "--preload", "3000", "--records", "2000", "--batch", "250",
                          "--connections", "4", "--duration", "20")
    assert result["workload"] == "consume"
    assert result["preload"]["records_acked"] == 3000
    assert topic_records(client, topic) == 3000
    parts = result["partitions"]
    assert sum(p["high_watermark"] - p["log_start_offset"] for p in parts.values()) == 3000
    assert result["records"] == 2000 and result["errors"] == 0
    assert result["bytes"] > 2000 * 100  # the JSON answers carry base64 of 100-byte values
    check_latency(result["latency_ms"])
    # from the beginning, without preloading again: more than the topic has -> all of it
    result, _r = run_json(tmp_path, "consume", "--bootstrap-server", franz_url, "--topic", topic,
                          "--from-beginning", "--records", "5000", "--duration", "20")
    assert result["records"] == 3000 and result["preload"] is None
    assert topic_records(client, topic) == 3000


def test_consume_of_a_missing_topic_says_so(franz_url: str, topic: str) -> None:
    r = bench("consume", "--bootstrap-server", franz_url, "--topic", topic, "--records", "10")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "--preload" in r.stderr and "Traceback" not in r.stderr


def test_e2e_idle_latency_with_progress(tmp_path: Path, franz_url: str, topic: str) -> None:
    result, r = run_json(tmp_path, "e2e", "--bootstrap-server", franz_url, "--topic", topic,
                         "--records", "150", "--gap-ms", "5", "--duration", "20", "--progress")
    assert result["workload"] == "e2e"
    assert result["samples"] == 150 and result["lost"] == 0
    check_latency(result["latency_ms"])
    assert result["latency_ms"]["samples"] == 150
    assert result["background"] is None
    # not a terminal: --progress writes plain lines ("e2e  0.5 s  39 samples  78/s")
    lines = r.stderr.splitlines()
    assert lines and all(ln.startswith("e2e ") and ln.endswith("/s") for ln in lines), lines
    assert "\x1b" not in r.stderr


def test_e2e_under_load(tmp_path: Path, franz_url: str, topic: str) -> None:
    result, _r = run_json(tmp_path, "e2e", "--bootstrap-server", franz_url, "--topic", topic,
                          "--records", "40", "--duration", "10", "--load-fraction", "0.25",
                          "--load-rate", "40000", "--batch", "200")
    assert result["samples"] == 40
    bg = result["background"]
    assert bg["target_rec_per_s"] == pytest.approx(10_000)
    assert bg["rec_per_s"] > 0


def test_ceiling_servers_measured_and_stopped(tmp_path: Path) -> None:
    result, _r = run_json(tmp_path, "ceiling", "--cases", "echo,get,tiny,latency",
                          "--records", "3000", "--batch", "100", "--connections", "2",
                          "--duration", "1", "--samples", "20")
    cases = result["cases"]
    assert set(cases) == {"echo", "get", "tiny", "latency"}
    assert cases["echo"]["records"] == 3000 and cases["echo"]["requests"] == 30
    assert cases["get"]["records"] == 3000  # 100 pre-built records per GET
    assert cases["tiny"]["requests"] > 0
    assert cases["latency"]["samples"] == 20 and cases["latency"]["lost"] == 0
    check_latency(cases["latency"]["latency_ms"])


def test_down_server_is_exit_code_2() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for workload in ("produce", "consume", "e2e"):
        r = bench(workload, "--bootstrap-server", url, "--records", "10", timeout=60)
        assert r.returncode == 2, (workload, r.stdout, r.stderr)
        assert f"cannot reach franz at {url}" in r.stderr and "refused" in r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""


def test_bad_usage_is_exit_code_2(franz_url: str) -> None:
    r = bench("produce", "--bootstrap-server", franz_url, "--acks", "2")
    assert r.returncode == 2 and "--acks" in r.stderr
    r = bench("ceiling", "--cases", "echo,nope")
    assert r.returncode == 2 and "nope" in r.stderr


def test_produce_with_idempotency_keys_writes_every_request(
        tmp_path: Path, franz_url: str, client: httpx.Client, topic: str) -> None:
    """Each request carries an Idempotency-Key of its own (seen through the proxy of
    test_cli_idempotency): none is answered from franz's memory of another (that would be
    acknowledged and not written), none refused."""
    with Proxy(franz_url) as proxy:
        result, _r = run_json(tmp_path, "produce", "--bootstrap-server", proxy.url, "--topic",
                              topic, "--records", "3050", "--batch", "100", "--record-size",
                              "64", "--connections", "4", "--duration", "20",
                              "--idempotency-keys")
    keys = [s.headers.get("idempotency-key") for s in proxy.produces]
    assert len(keys) == 31 and None not in keys and len(set(keys)) == 31, keys
    assert result["params"]["idempotency_keys"] is True
    assert result["records_acked"] == result["records"] == 3050
    assert result["requests"] == 31 and result["errors"] == 0 and result["record_errors"] == 0
    assert topic_records(client, topic) == 3050
    # a second run of the same shape gets keys of its own (a new random prefix)
    result, _r = run_json(tmp_path, "produce", "--bootstrap-server", franz_url, "--topic", topic,
                          "--records", "1000", "--batch", "100", "--connections", "2",
                          "--duration", "20", "--idempotency-keys")
    assert result["records_acked"] == 1000 and result["errors"] == 0
    assert topic_records(client, topic) == 4050


def test_idempotency_keys_need_acks(franz_url: str) -> None:
    r = bench("produce", "--bootstrap-server", franz_url, "--acks", "0", "--idempotency-keys",
              "--records", "10")
    assert r.returncode == 2 and "--idempotency-keys needs --acks 1 or all" in r.stderr, r.stderr
