"""The standard benchmark matrix of franz (issue 7), measured beside same-run ceilings.

    python benchmarks/run.py                 # 3 rounds x 5 s, a 10 M-record topic (~15-25 min)
    python benchmarks/run.py --quick         # 1 round x 2 s, a 200 k-record topic (< 3 min)

Starts on loopback, pinned with ``taskset`` to ``--server-cpu`` (0): a standalone franz
broker from this tree (fresh data directory) and the ceiling servers
(``python -m app.bench.ceiling``: FastAPI and plain ASGI). Every measurement is one run of
the ``franz bench`` executable pinned to ``--client-cpu`` (1), with ``--json``, so what is
measured is exactly what a user can run. Each round runs every case right after its
ceiling counterpart (interleaved: both see the same machine noise); the report keeps the
medians of ``--rounds`` rounds and the median of the per-round ratios. After every
produce case its topic is deleted and the page cache written back, unmeasured, so each
case starts on a settled disk whatever ran before it.

Cases (1000 x 100-byte records per request unless said otherwise, 8 connections):

produce_1000      franz bench produce, acks=1            vs ceiling echo (raw orjson POST)
produce_idem_1p   produce_1000 with --idempotency-keys (every request carries an
                  Idempotency-Key of its own), 1 partition  vs produce_1000 of the round
produce_keyed_1p  produce_1000 with --keys 1000 (1000 distinct keys: every request
                  holds each key once), 1 partition      vs produce_1000 of the round
produce_1000_8p   produce_1000 to an 8-partition topic (unkeyed: one partition a request)
produce_keyed_8p  produce_keyed_1p to an 8-partition topic (every request spread over
                  the 8 partitions by Kafka's partitioner) vs produce_1000_8p of the round
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

The summary, the targets table, the Markdown report and the plots are in ``run_report.py``
beside this file; the Idempotency-Key case's comparison and target (>= 0.9 x
produce_1000 of the round) are added to them here (``IDEMPOTENCY_CASE``).
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
from app.bench.workloads import (  # noqa: E402
    Target,
    machine_notes,
    pin_self,
    run_loop,
    spawn,
    stop,
    wait_ready,
)

if str(ROOT / "benchmarks") not in sys.path:  # run_report.py, beside this file (not a package)
    sys.path.insert(0, str(ROOT / "benchmarks"))
import run_report  # noqa: E402
from run_report import plot, summarize, write_report  # noqa: E402

CLUSTER_BENCH = ROOT / "benchmarks" / "cluster_bench.py"
HUGE = 10**12  # "no record bound": the duration ends the run

#: produce with an Idempotency-Key on every request, compared with the plain produce of
#: the same round (unkeyed, 1 partition, 1000 records per request), and its target
IDEMPOTENCY_CASE = "produce_idem_1p"
IDEMPOTENCY_BASE = "produce_1000"
IDEMPOTENCY_TARGET = 0.9
run_report.RATIOS.setdefault(IDEMPOTENCY_CASE, (IDEMPOTENCY_BASE, "rec_per_s"))
if IDEMPOTENCY_CASE not in run_report.THROUGHPUT_CASES:  # the plots, beside produce_1000
    _at = run_report.THROUGHPUT_CASES.index(IDEMPOTENCY_BASE) + 1
    run_report.THROUGHPUT_CASES = (*run_report.THROUGHPUT_CASES[:_at], IDEMPOTENCY_CASE,
                                   *run_report.THROUGHPUT_CASES[_at:])


def targets(summary: dict[str, Any], cluster: dict[str, Any]) -> list[dict[str, str]]:
    """run_report's targets, and the Idempotency-Key one after the keyed produce ones."""
    rows = run_report.targets(summary, cluster)
    what = "produce with an Idempotency-Key per request, 1 partition"
    if any(r["what"] == what for r in rows):
        return rows
    v = run_report._v(summary, IDEMPOTENCY_CASE, "rec_per_s")
    ratio = run_report._v(summary, IDEMPOTENCY_CASE, "ratio")
    if ratio is None:
        status = "not measured"
    else:
        status = "met" if ratio >= IDEMPOTENCY_TARGET else "missed: ratio"
    rows.append({"what": what,
                 "target": f">= {IDEMPOTENCY_TARGET} x unkeyed 1 partition (issue 15)",
                 "measured": run_report._n(v and v / 1e6, ".3f", " M rec/s"),
                 "ratio": f"{run_report._n(ratio, '.2f')} x unkeyed 1 partition of the round",
                 "status": status})
    return rows


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

    def produce(self, name: str, topic: str, batch: int, *extra: str,
                partitions: int = 1) -> dict[str, Any] | None:
        res = self.bench(name, ["produce", "--bootstrap-server", self.franz_url, "--topic",
                                topic, "--partitions", str(partitions), "--records", str(HUGE),
                                "--batch", str(batch), *self.load(), *extra],
                         timeout=self.args.warmup + self.args.duration + 90,
                         server_pid=self.franz.pid if self.franz else None)
        self.settle(topic)
        return res

    def settle(self, topic: str) -> None:
        """Unmeasured, after a produce case: delete its topic and write back what is left
        dirty. At ~2 M records/s a case writes ~1.5 GB; without this the next cases ran
        with that writeback (and a disk filling by ~10 GB a round) behind them, and the
        later a case came in the round the slower it measured."""
        subprocess.run([sys.executable, "-m", "app.cli", "topics", "--bootstrap-server",
                        self.franz_url, "--delete", "--if-exists", "--topic", topic],
                       cwd=ROOT, capture_output=True, timeout=60, check=False)
        os.sync()

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
        put(IDEMPOTENCY_CASE, self.produce(IDEMPOTENCY_CASE, "bench-idem1", 1000,
                                           "--idempotency-keys"))
        keyed = ("--keys", str(a.keys))
        put("produce_keyed_1p", self.produce("produce_keyed_1p", "bench-keyed1", 1000, *keyed))
        put("produce_1000_8p", self.produce("produce_1000_8p", "bench-produce8", 1000,
                                            partitions=8))
        put("produce_keyed_8p", self.produce("produce_keyed_8p", "bench-keyed8", 1000, *keyed,
                                             partitions=8))
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
    ap.add_argument("--keys", type=int, default=1000,
                    help="distinct keys of the keyed produce cases (default 1000)")
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
