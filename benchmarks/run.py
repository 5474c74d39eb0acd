"""The standard benchmark matrix of franz (issue 7), measured beside same-run ceilings.

    python benchmarks/run.py                 # 3 rounds x 5 s, a 10 M-record topic (~15-25 min)
    python benchmarks/run.py --quick         # 1 round x 2 s, a 200 k-record topic (< 3 min)

Starts on loopback, pinned with ``taskset`` to ``--server-cpu`` (0): a standalone franz
broker from this tree (fresh data directory) and the ceiling servers
(``python -m app.bench.ceiling``: FastAPI and plain ASGI). Every measurement is one run of
the ``franz bench`` executable pinned to ``--client-cpu`` (1), with ``--json``, so what is
measured is exactly what a user can run. Each round runs every case right after its
ceiling counterpart (interleaved: both see the same machine noise); the report keeps the
medians of ``--rounds`` rounds and the median of the per-round ratios.

Cases (1000 x 100-byte records per request unless said otherwise, 8 connections):

produce_1000      franz bench produce, acks=1            vs ceiling echo (raw orjson POST)
produce_1         the same, 1 record per POST            vs ceiling echo of 1 record
produce_acks_all  produce_1000 with acks=all             vs produce_1000 of the round
produce_fsync     produce_1000 to a topic with flush.messages=1 (fsync per append)
                                                         vs produce_1000 of the round
consume_tail      franz bench consume: the last half of the big topic (range reads)
                                                         vs ceiling GET of 1000 records
consume_start     the same from the start of the big topic
e2e_idle          franz bench e2e: 1-record produce -> long-polling consumer
                                                         vs ceiling long-poll wake-up
e2e_load          e2e_idle with a background produce at --load-fraction (0.5) of the
                  produce_1000 rate of the round
ceiling_tiny      GET {} in FastAPI and in plain ASGI (the generator's headroom)
cluster           benchmarks/cluster_bench.py --json (RF=3 acks=all vs RF=1 acks=1 on 3
                  brokers), when that script exists; else "not run"

Writes ``--out`` (default docs/benchmarks-results.md: each performance.md target, the
measured value, the ratio to the ceiling, met/missed, then every case) and PNG plots in
``--img-dir`` (default docs/img: throughput per case, latency percentiles, ratio to
ceiling), and with ``--json FILE`` every raw result. Every step is bounded: each
``franz bench`` run by --records and --duration and a subprocess timeout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: import this tree's app
    sys.path.insert(0, str(ROOT))

from app.bench.http1 import free_port  # noqa: E402
from app.bench.stats import med  # noqa: E402
from app.bench.workloads import (  # noqa: E402
    Target,
    machine_notes,
    pin_self,
    run_loop,
    spawn,
    stop,
    wait_ready,
)

CLUSTER_BENCH = ROOT / "benchmarks" / "cluster_bench.py"
HUGE = 10**12  # "no record bound": the duration ends the run
THROUGHPUT_CASES = ("produce_1000", "produce_1", "produce_acks_all", "produce_fsync",
                    "consume_tail", "consume_start")
#: franz case -> (its comparison case, metric): the ceiling, or the acks=1 run of the round
RATIOS = {
    "produce_1000": ("ceiling_echo_1000", "rec_per_s"),
    "produce_1": ("ceiling_echo_1", "req_per_s"),
    "consume_tail": ("ceiling_get_1000", "rec_per_s"),
    "consume_start": ("ceiling_get_1000", "rec_per_s"),
    "produce_acks_all": ("produce_1000", "rec_per_s"),
    "produce_fsync": ("produce_1000", "rec_per_s"),
}


class Runner:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args = args
        self.tmp = tmp
        self.count = 0
        self.franz: Target | None = None
        self.franz_url = ""
        self.ceiling_url = ""
        self.plain_url = ""
        self.procs: list[subprocess.Popen[bytes]] = []
        self.failures: list[str] = []

    # --- servers --------------------------------------------------------------------------

    def start_servers(self) -> None:
        a = self.args
        port = free_port()
        cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port",
               str(port), "--data-dir", str(self.tmp / "data"), "--log-level", "WARNING",
               "--override", "num.partitions=1"]
        for o in a.override:
            cmd += ["--override", o]
        fproc = spawn(cmd, a.server_cpu, self.tmp / "franz.log", cwd=ROOT)
        self.procs.append(fproc)
        self.franz = Target("franz", "127.0.0.1", port, fproc.pid)
        self.franz_url = f"http://127.0.0.1:{port}"
        ceilings = []
        for name, extra in (("ceiling", []), ("ceiling-plain", ["--plain"])):
            cport = free_port()
            proc = spawn([sys.executable, "-m", "app.bench.ceiling", "--port", str(cport),
                          "--records", "1000", "--size", "100", *extra], a.server_cpu,
                         self.tmp / f"{name}.log", cwd=ROOT)
            self.procs.append(proc)
            ceilings.append((Target(name, "127.0.0.1", cport, proc.pid), proc,
                             self.tmp / f"{name}.log"))
        self.ceiling_pid = ceilings[0][0].pid
        self.plain_pid = ceilings[1][0].pid
        self.ceiling_url = f"http://127.0.0.1:{ceilings[0][0].port}"
        self.plain_url = f"http://127.0.0.1:{ceilings[1][0].port}"

        async def ready() -> None:
            assert self.franz is not None
            await wait_ready(self.franz, "/topics", fproc, self.tmp / "franz.log")
            await wait_ready(ceilings[0][0], "/ceiling/tiny", ceilings[0][1], ceilings[0][2])
            await wait_ready(ceilings[1][0], "/", ceilings[1][1], ceilings[1][2])

        run_loop(ready())

    def stop_servers(self) -> None:
        for proc in reversed(self.procs):
            stop(proc)

    # --- one franz bench run ---------------------------------------------------------------

    def bench(self, name: str, argv: list[str], *, timeout: float,
              server_pid: int | None = None) -> dict[str, Any] | None:
        a = self.args
        self.count += 1
        out = self.tmp / f"{self.count:03d}-{name}.json"
        cmd = [sys.executable, "-m", "app.cli", "bench", *argv, "--json", str(out),
               "--label", name]
        if a.client_cpu is not None and a.client_cpu >= 0:
            cmd += ["--cpu", str(a.client_cpu)]
        if server_pid is not None:
            cmd += ["--server-pid", str(server_pid)]
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                               check=False)
        except subprocess.TimeoutExpired:
            self.failures.append(f"{name}: timed out after {timeout:.0f} s")
            print(f"  {name}: TIMED OUT", flush=True)
            return None
        if r.returncode != 0 or not out.exists():
            msg = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            self.failures.append(f"{name}: exit {r.returncode}: {msg}")
            print(f"  {name}: FAILED ({msg})", flush=True)
            return None
        result: dict[str, Any] = json.loads(out.read_text())
        # the machine's CPU steal during the run, on the result and on each ceiling case
        steal = result["steal_pct"] = (result.get("machine") or {}).get("steal_pct")
        for case in (result.get("cases") or {}).values():
            case["steal_pct"] = steal
        print(f"  {name:18s} {describe(result)}  ({time.monotonic() - t0:.1f} s"
              + (f", steal {steal:.1f} %" if steal else "") + ")", flush=True)
        return result

    def load(self) -> list[str]:
        a = self.args
        return ["--duration", str(a.duration), "--warmup", str(a.warmup), "--connections",
                str(a.connections)]

    def produce(self, name: str, topic: str, batch: int, *extra: str) -> dict[str, Any] | None:
        return self.bench(name, ["produce", "--bootstrap-server", self.franz_url, "--topic",
                                 topic, "--partitions", "1", "--records", str(HUGE), "--batch",
                                 str(batch), *self.load(), *extra],
                          timeout=self.args.warmup + self.args.duration + 90,
                          server_pid=self.franz.pid if self.franz else None)

    def ceiling(self, name: str, cases: str, batch: int = 1000,
                url: str | None = None, pid: int | None = None) -> dict[str, Any] | None:
        a = self.args
        res = self.bench(name, ["ceiling", "--server", url or self.ceiling_url,
                                "--plain-server", self.plain_url, "--cases", cases,
                                "--batch", str(batch), "--records", str(HUGE),
                                "--samples", str(a.samples), *self.load()],
                         timeout=a.warmup + 2 * a.duration + 90,
                         server_pid=pid or self.ceiling_pid)
        return res

    # --- the matrix ------------------------------------------------------------------------

    def preload(self) -> dict[str, Any] | None:
        a = self.args
        print(f"preloading {a.big:,} records into bench-big", flush=True)
        return self.bench("preload", ["produce", "--bootstrap-server", self.franz_url,
                                      "--topic", "bench-big", "--partitions", "1",
                                      "--records", str(a.big), "--batch", "1000",
                                      "--connections", str(a.connections),
                                      "--duration", "3600"],
                          timeout=max(120.0, a.big / 20_000))

    def round(self, r: int) -> dict[str, Any]:
        a = self.args
        out: dict[str, Any] = {}

        def put(key: str, value: dict[str, Any] | None) -> None:
            if value is not None:
                out[key] = value

        print(f"round {r + 1}/{a.rounds}", flush=True)
        c = self.ceiling("ceiling_echo_1000", "echo", 1000)
        put("ceiling_echo_1000", c and c["cases"]["echo"])
        put("produce_1000", self.produce("produce_1000", "bench-produce", 1000))
        c = self.ceiling("ceiling_echo_1", "echo", 1)
        put("ceiling_echo_1", c and c["cases"]["echo"])
        put("produce_1", self.produce("produce_1", "bench-produce1", 1))
        put("produce_acks_all", self.produce("produce_acks_all", "bench-produce", 1000,
                                             "--acks", "all"))
        put("produce_fsync", self.produce("produce_fsync", "bench-fsync", 1000,
                                          "--config", "flush.messages=1"))
        c = self.ceiling("ceiling_get_1000", "get", 1000)
        put("ceiling_get_1000", c and c["cases"]["get"])
        half = max(1000, a.big // 2)
        for name, extra in (("consume_tail", []), ("consume_start", ["--from-beginning"])):
            put(name, self.bench(name, ["consume", "--bootstrap-server", self.franz_url,
                                        "--topic", "bench-big", "--records", str(half),
                                        "--batch", "1000", "--duration", str(a.duration),
                                        "--connections", str(a.connections), *extra],
                                 timeout=a.duration + 90, server_pid=self.franz.pid
                                 if self.franz else None))
        c = self.ceiling("ceiling_latency", "latency")
        put("ceiling_latency", c and c["cases"]["latency"])
        e2e = ["e2e", "--bootstrap-server", self.franz_url, "--topic", "bench-e2e",
               "--records", str(a.samples), "--duration", str(max(a.duration, 10.0))]
        put("e2e_idle", self.bench("e2e_idle", e2e, timeout=max(a.duration, 10.0) + 90))
        rate = (out.get("produce_1000") or {}).get("rec_per_s") or a.load_rate
        put("e2e_load", self.bench("e2e_load", [*e2e, "--load-fraction", str(a.load_fraction),
                                                "--load-rate", str(rate)],
                                   timeout=max(a.duration, 10.0) + 120))
        c = self.ceiling("ceiling_tiny", "tiny")
        put("ceiling_tiny", c and c["cases"]["tiny"])
        c = self.ceiling("ceiling_tiny_plain", "tiny_plain", pid=self.plain_pid)
        put("ceiling_tiny_plain", c and c["cases"]["tiny_plain"])
        return out

    def cluster(self) -> dict[str, Any]:
        a = self.args
        if a.no_cluster:
            return {"status": "not run", "why": "--no-cluster"}
        if not CLUSTER_BENCH.exists():
            return {"status": "not run", "why": "benchmarks/cluster_bench.py does not exist"}
        out = self.tmp / "cluster.json"
        cmd = [sys.executable, str(CLUSTER_BENCH), "--json", str(out), "--trials", "0"]
        cmd += ["--quick"] if a.quick else ["--rounds", str(a.rounds), "--duration",
                                             str(a.duration)]
        print("cluster: " + " ".join(["python", "benchmarks/cluster_bench.py", *cmd[2:]]),
              flush=True)
        try:
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                               timeout=a.cluster_timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"status": "failed", "why": f"timed out after {a.cluster_timeout:.0f} s"}
        if r.returncode != 0 or not out.exists():
            tail = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or ["?"])[-1]
            return {"status": "failed", "why": f"exit {r.returncode}: {tail}"}
        return {"status": "ok", "result": json.loads(out.read_text())}


def describe(result: dict[str, Any]) -> str:
    if result.get("workload") == "ceiling":
        return "; ".join(f"{k} {describe(v)}" for k, v in result["cases"].items())
    lat = result.get("latency_ms") or {}
    if "rec_per_s" in result:
        return (f"{result['rec_per_s']:>12,.0f} rec/s {result['req_per_s']:>9,.0f} req/s "
                f"p99 {lat.get('p99') or 0:.1f} ms")
    return f"p50 {lat.get('p50') or 0:.2f} ms p99 {lat.get('p99') or 0:.2f} ms"


# --- summary ---------------------------------------------------------------------------------


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys: list[str] = []
    for r in rounds:
        keys += [k for k in r if k not in keys]
    summary: dict[str, Any] = {}
    for k in keys:
        per = [r[k] for r in rounds if k in r]
        s: dict[str, Any] = {"rounds": len(per)}
        for m in ("rec_per_s", "req_per_s", "mb_per_s", "server_cpu_us_per_req",
                  "client_cpu_us_per_req"):
            if m in per[0]:
                s[m] = med([x.get(m) for x in per])
        s["steal_pct"] = med([x.get("steal_pct") for x in per])
        lat = [x.get("latency_ms") or {} for x in per]
        s["latency_ms"] = {p: med([x.get(p) for x in lat])
                           for p in ("p50", "p90", "p99", "p999", "max")}
        if any(x.get("lost") for x in per):
            s["lost"] = sum(x.get("lost") or 0 for x in per)
        bg = [x["background"]["rec_per_s"] for x in per if x.get("background")]
        if bg:
            s["background_rec_per_s"] = med(bg)
        if k in RATIOS:
            ck, metric = RATIOS[k]
            ratios = [r[k][metric] / r[ck][metric] for r in rounds
                      if k in r and ck in r and r[ck].get(metric)]
            s["ratio"] = med(ratios)
            s["ratios_per_round"] = ratios
            s["ratio_to"] = ck
        summary[k] = s
    return summary


def _v(s: dict[str, Any], case: str, *path: str) -> float | None:
    cur: Any = s.get(case)
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur if isinstance(cur, (int, float)) else None


def _n(v: float | None, spec: str = ",.0f", unit: str = "") -> str:
    return "n/a" if v is None else f"{format(v, spec)}{unit}"


def targets(s: dict[str, Any], cluster: dict[str, Any]) -> list[dict[str, str]]:
    """The rows of performance.md's "Targets for one broker process"."""
    rows = []

    def row(what: str, target: str, measured: str, ratio: str,
            checks: list[tuple[str, bool | None]]) -> None:
        if any(ok is None for _n_, ok in checks):
            status = "not measured"
        elif all(ok for _n_, ok in checks):
            status = "met"
        else:
            status = "missed: " + ", ".join(n for n, ok in checks if not ok)
        rows.append({"what": what, "target": target, "measured": measured, "ratio": ratio,
                     "status": status})

    def ge(v: float | None, t: float) -> bool | None:
        return None if v is None else v >= t

    def le(v: float | None, t: float) -> bool | None:
        return None if v is None else v <= t

    p, pr = _v(s, "produce_1000", "rec_per_s"), _v(s, "produce_1000", "ratio")
    row("REST produce, 1000-record POSTs, acks=1, 8 connections",
        ">= 0.5 M rec/s and >= 0.35 x raw-orjson echo", _n(p and p / 1e6, ".3f", " M rec/s"),
        f"{_n(pr, '.2f')} x echo ({_n(_v(s, 'ceiling_echo_1000', 'rec_per_s') and _v(s, 'ceiling_echo_1000', 'rec_per_s') / 1e6, '.2f', ' M rec/s')})",  # noqa: E501
        [("absolute", ge(p, 0.5e6)), ("ratio", ge(pr, 0.35))])
    c, cr = _v(s, "consume_tail", "rec_per_s"), _v(s, "consume_tail", "ratio")
    row("REST consume, 1000 records per GET near the tail",
        ">= 0.75 M rec/s and >= 0.5 x GET ceiling", _n(c and c / 1e6, ".3f", " M rec/s"),
        f"{_n(cr, '.2f')} x GET ceiling ({_n(_v(s, 'ceiling_get_1000', 'rec_per_s') and _v(s, 'ceiling_get_1000', 'rec_per_s') / 1e6, '.2f', ' M rec/s')})",  # noqa: E501
        [("absolute", ge(c, 0.75e6)), ("ratio", ge(cr, 0.5))])
    q, qr = _v(s, "produce_1", "req_per_s"), _v(s, "produce_1", "ratio")
    row("1-record produce POSTs", ">= 2.5 k req/s", _n(q and q / 1e3, ".2f", " k req/s"),
        f"{_n(qr, '.2f')} x 1-record echo ({_n(_v(s, 'ceiling_echo_1', 'req_per_s') and _v(s, 'ceiling_echo_1', 'req_per_s') / 1e3, '.2f', ' k req/s')})",  # noqa: E501
        [("absolute", ge(q, 2500))])
    for case, what, p50t, p99t in (
            ("e2e_idle", "end to end, idle: 1-record produce -> long-polling consumer", 1, 5),
            ("e2e_load", "end to end at half the max produce rate", 5, 25)):
        p50, p99 = _v(s, case, "latency_ms", "p50"), _v(s, case, "latency_ms", "p99")
        c50, c99 = (_v(s, "ceiling_latency", "latency_ms", "p50"),
                    _v(s, "ceiling_latency", "latency_ms", "p99"))
        measured = f"p50 {_n(p50, '.2f')} ms, p99 {_n(p99, '.2f')} ms"
        bg = _v(s, case, "background_rec_per_s")
        if bg:
            measured += f" (background {bg / 1e3:,.0f} k rec/s)"
        ratio = (f"ceiling wake-up p50 {_n(c50, '.2f')} ms, p99 {_n(c99, '.2f')} ms: "
                 f"{_n(p50 / c50 if p50 and c50 else None, '.1f')} x / "
                 f"{_n(p99 / c99 if p99 and c99 else None, '.1f')} x")
        row(what, f"p50 <= {p50t} ms, p99 <= {p99t} ms", measured, ratio,
            [("p50", le(p50, p50t)), ("p99", le(p99, p99t))])
    cl_ratio = None
    measured = f"not run ({cluster.get('why')})"
    if cluster.get("status") == "ok":
        cs = cluster["result"].get("produce", {}).get("summary", {})
        cl_ratio = cs.get("ratio_median")
        measured = (f"RF=3 acks=all {_n((cs.get('rf3_acksall') or {}).get('rec_per_s'))} rec/s, "
                    f"RF=1 acks=1 {_n((cs.get('rf1_acks1') or {}).get('rec_per_s'))} rec/s")
    elif cluster.get("status") == "failed":
        measured = f"failed ({cluster.get('why')})"
    row("RF=3, acks=all, 3 brokers on the same machine", ">= 0.5 x the acks=1 rate",
        measured, f"{_n(cl_ratio, '.2f')} x acks=1", [("ratio", ge(cl_ratio, 0.5))])
    f, fr = _v(s, "produce_fsync", "rec_per_s"), _v(s, "produce_fsync", "ratio")
    row("fsync before ack (flush.messages=1 topic)", ">= 0.8 x the acks=1 rate",
        _n(f and f / 1e6, ".3f", " M rec/s"), f"{_n(fr, '.2f')} x acks=1 of the round",
        [("ratio", ge(fr, 0.8))])
    return rows


# --- report ----------------------------------------------------------------------------------


def write_report(path: Path, img_rel: str, result: dict[str, Any], images: list[str]) -> None:
    s, a = result["summary"], result["args"]
    lines = [
        "# Benchmark results (generated)",
        "",
        f"Generated by `benchmarks/run.py` on {result['finished']}: do not edit by hand, "
        "run it again. How to read it: [benchmarks.md](benchmarks.md); targets: "
        "performance.md (\"Targets for one broker process\").",
        "",
        "```sh",
        f"python benchmarks/run.py {result['command']}".rstrip(),
        "```",
        "",
        f"{a['rounds']} round(s) x {a['duration']} s (+ {a['warmup']} s warm-up) per case, "
        f"{a['connections']} connections, big topic {a['big']:,} records; server and ceiling "
        f"servers pinned to CPU {a['server_cpu']}, generator (`franz bench`) to CPU "
        f"{a['client_cpu']}; medians of the rounds, ratios = median of the per-round ratios.",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in result["machine"].items()) + ". "
        "A load average well above 0 at the start means other work shared the cores, "
        "and CPU steal (per case below: the share of the machine's CPU time the "
        "hypervisor gave to other guests) that the host was busy: absolute figures are "
        "then low, the same-run ratios and the server CPU per request stay comparable.",
        "",
        "## Targets",
        "",
        "| performance.md target | target | measured (median) | ratio | |",
        "|---|---|---|---|---|",
    ]
    for r in result["targets"]:
        lines.append(f"| {r['what']} | {r['target']} | {r['measured']} | {r['ratio']} | "
                     f"{r['status']} |")
    lines += ["", "## Every case", "",
              "| case | records/s | requests/s | MB/s | latency p50 / p90 / p99 / p99.9 / max "
              "(ms) | ratio | server CPU µs/req | CPU steal % |",
              "|---|---:|---:|---:|---|---|---:|---:|"]
    for k, v in s.items():
        lat = v.get("latency_ms") or {}
        lat_s = " / ".join(_n(lat.get(p), ".2f") for p in ("p50", "p90", "p99", "p999", "max"))
        ratio = "" if v.get("ratio") is None else f"{v['ratio']:.2f} x {v['ratio_to']}"
        rec = v.get("rec_per_s") or None  # 0 for the tiny GETs: no records
        lines.append(f"| {k} | {_n(rec)} | {_n(v.get('req_per_s'))} | "
                     f"{_n(v.get('mb_per_s'), '.1f')} | {lat_s} | {ratio} | "
                     f"{_n(v.get('server_cpu_us_per_req'))} | {_n(v.get('steal_pct'), '.1f')} |")
    if result["failures"]:
        lines += ["", "## Failures", ""] + [f"- {f}" for f in result["failures"]]
    if images:
        lines += ["", "## Plots", ""] + [f"![{Path(i).stem}]({img_rel}/{Path(i).name})"
                                         for i in images]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def plot(result: dict[str, Any], img_dir: Path) -> list[str]:
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plots", flush=True)
        return []
    s = result["summary"]
    img_dir.mkdir(parents=True, exist_ok=True)
    files = []

    # throughput per case, with its comparison bar
    cases = [c for c in THROUGHPUT_CASES if c in s and s[c].get("rec_per_s")]
    if cases:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        xs = range(len(cases))
        franz = [s[c]["rec_per_s"] / 1e6 for c in cases]
        ceil = [((s.get(RATIOS[c][0]) or {}).get("rec_per_s") or 0) / 1e6 for c in cases]
        ax.bar([x - 0.2 for x in xs], franz, 0.4, label="franz")
        ax.bar([x + 0.2 for x in xs], ceil, 0.4, label="comparison (ceiling or acks=1)",
               color="#bbbbbb")
        ax.set_xticks(list(xs), cases, rotation=20, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("M records/s (median, log scale)")
        ax.set_title("Throughput per case")
        ax.legend()
        fig.tight_layout()
        f = img_dir / "bench-throughput.png"
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(str(f))

    # latency percentiles
    lat_cases = [c for c in ("ceiling_latency", "e2e_idle", "e2e_load") if c in s]
    if lat_cases:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        ps = ("p50", "p90", "p99", "p999", "max")
        width = 0.8 / len(lat_cases)
        for i, c in enumerate(lat_cases):
            vals = [s[c]["latency_ms"].get(p) or 0 for p in ps]
            ax.bar([x + (i - (len(lat_cases) - 1) / 2) * width for x in range(len(ps))], vals,
                   width, label=c)
        for x, t, label in ((0, 1, "idle"), (0, 5, "load"), (2, 5, "idle"), (2, 25, "load")):
            ax.hlines(t, x - 0.4, x + 0.4, colors="red", linestyles="dashed")
            ax.annotate(f"target {label}", (x + 0.4, t), fontsize=7, color="red",
                        va="bottom", ha="right")
        ax.set_xticks(range(len(ps)), ["p50", "p90", "p99", "p99.9", "max"])
        ax.set_yscale("log")
        ax.set_ylabel("ms (median of rounds, log scale)")
        ax.set_title("End-to-end latency: 1-record produce -> long-polling consumer")
        ax.legend()
        fig.tight_layout()
        f = img_dir / "bench-latency.png"
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(str(f))

    # ratio to ceiling, with the targets
    target_of = {"produce_1000": 0.35, "consume_tail": 0.5, "produce_fsync": 0.8,
                 "produce_acks_all": None, "produce_1": None, "consume_start": None}
    rcases = [c for c in THROUGHPUT_CASES if c in s and s[c].get("ratio") is not None]
    if rcases:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        ax.bar(range(len(rcases)), [s[c]["ratio"] for c in rcases], 0.6)
        for i, c in enumerate(rcases):
            t = target_of.get(c)
            if t is not None:
                ax.hlines(t, i - 0.35, i + 0.35, colors="red", linestyles="dashed")
        ax.set_xticks(range(len(rcases)), [f"{c}\n/ {s[c]['ratio_to']}" for c in rcases],
                      fontsize=7)
        ax.set_ylabel("ratio (median of per-round ratios)")
        ax.set_title("Ratio to the same-run comparison (red: performance.md target)")
        fig.tight_layout()
        f = img_dir / "bench-ratio.png"
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(str(f))
    return files


# --- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="1 round x 2 s, a 200 k-record topic, 200 latency samples (< 3 min)")
    ap.add_argument("--rounds", type=int, help="rounds (default 3; --quick 1)")
    ap.add_argument("--duration", type=float, help="measured seconds per case (5; --quick 2)")
    ap.add_argument("--warmup", type=float, help="unmeasured seconds first (1; --quick 0.5)")
    ap.add_argument("--big", type=int,
                    help="records of the big topic for the consume cases (10 M; --quick 200 k)")
    ap.add_argument("--samples", type=int, help="latency samples (1000; --quick 200)")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--load-fraction", type=float, default=0.5)
    ap.add_argument("--load-rate", type=float, default=250_000.0,
                    help="records/s of e2e_load when produce_1000 failed")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--override", action="append", default=[], help="franz KEY=VALUE")
    ap.add_argument("--no-cluster", action="store_true", help="skip cluster_bench.py")
    ap.add_argument("--cluster-timeout", type=float, help="seconds (600; --quick 150)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks-results.md")
    ap.add_argument("--img-dir", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--json", type=Path, help="write every raw result here")
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args(argv)
    q = args.quick
    for name, full, quick in (("rounds", 3, 1), ("duration", 5.0, 2.0), ("warmup", 1.0, 0.5),
                              ("big", 10_000_000, 200_000), ("samples", 1000, 200),
                              ("cluster_timeout", 600.0, 150.0)):
        if getattr(args, name) is None:
            setattr(args, name, quick if q else full)
    return args


def shown_command(argv: list[str]) -> str:
    """The command line for the report, without output paths (no machine paths in docs)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in ("--out", "--img-dir", "--json"):
            skip = "=" not in a
            continue
        if name != "--keep-logs":
            out.append(a)
    return " ".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    raw_argv = sys.argv[1:] if argv is None else argv
    pin_self(args.client_cpu)
    notes = machine_notes()
    if "loadavg_at_start" in notes:
        notes["loadavg_at_start"] = " / ".join(f"{x:.2f}" for x in notes["loadavg_at_start"])
    t_begin = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="franz-run-"))
    runner = Runner(args, tmp)
    rounds: list[dict[str, Any]] = []
    try:
        runner.start_servers()
        preload = runner.preload()
        if preload is None:
            print("preload failed: the consume cases will fail too", flush=True)
        # The preload leaves over a GB of dirty pages; the kernel writing them back while
        # the first cases run would take CPU from them. Write them now, unmeasured.
        t_sync = time.monotonic()
        os.sync()
        print(f"synced the preload to disk in {time.monotonic() - t_sync:.1f} s", flush=True)
        for r in range(args.rounds):
            rounds.append(runner.round(r))
        cluster = runner.cluster()
    finally:
        runner.stop_servers()
        if args.keep_logs:
            print(f"logs and raw results kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = summarize(rounds)
    result: dict[str, Any] = {
        "command": shown_command(raw_argv),
        "finished": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.monotonic() - t_begin, 1),
        "machine": notes,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "preload": preload,
        "rounds": rounds,
        "summary": summary,
        "cluster": cluster,
        "failures": runner.failures,
    }
    result["targets"] = targets(summary, cluster)
    images = [] if args.no_plots else plot(result, args.img_dir)
    img_rel = os.path.relpath(args.img_dir.resolve(), args.out.resolve().parent)
    write_report(args.out, img_rel, result, images)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    print()
    for t in result["targets"]:
        print(f"{t['what'][:60]:60s} {t['measured'][:40]:40s} {t['status']}")
    print(f"\nwrote {args.out}" + (f" and {len(images)} plots in {args.img_dir}" if images else "")
          + f" in {result['seconds']:.0f} s")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
