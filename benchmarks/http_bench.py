"""HTTP load generator for franz, measured beside same-shape ceiling servers in one run.

    python benchmarks/http_bench.py [--rounds 3] [--duration 5] [--json out.json]

By default it starts, on loopback only, a franz broker (``python -m app.cli serve``) and
the ceiling servers of ``benchmarks/ceiling.py``, all pinned with ``taskset`` to
``--server-cpu`` (default 0), pins itself to ``--client-cpu`` (default 1), preloads a
topic for the reads, then runs every case ``--rounds`` times, each franz case right
after its ceiling counterpart (interleaved, so both see the same machine noise), and
reports medians, the per-round franz/ceiling ratios' median, and CPU time per request
of server and generator (from /proc and ``time.process_time``; CPU per request is far
less noisy than throughput on a shared machine). ``--franz HOST:PORT`` / ``--ceiling
HOST:PORT`` use servers that are already running instead.

Cases (``--cases``, comma separated; 8 connections unless ``--connections``):

produce           POST /topics/{t}, 1000 x 100-byte records (binary format: base64
                  values), acks=1 (the default)  vs  ceiling raw-orjson POST echo
produce1          the same with 1 record per POST (requests/s)  vs  the same echo
consume_range     GET /topics/{t}/partitions/0/records?offset=&count=1000&max_bytes=100000,
                  1000 records per GET from a preloaded topic, batch-aligned, each
                  connection walking its own stretch  vs  ceiling GET of 1000 records
                  (orjson.dumps of pre-built dicts per request)
consume_instance  GET /consumers/{g}/instances/{i}/records?max_bytes=100000: one binary
                  consumer instance per connection (create, assign, seek; auto commit off
                  unless --auto-commit), 1000 records per GET  vs  the same ceiling
tiny              GET tiny ``{}``: FastAPI and plain ASGI ceilings (generator headroom)
latency_idle      one consumer instance long-polling GET .../records?timeout=1000 and one
                  producer POSTing 1 record at a time (the next one --lat-gap ms after
                  the previous one was received); latency = receive - send, --samples
                  samples  vs  ceiling: GET waiting on a future that a POST resolves
latency_load      latency_idle while 4 connections produce 1000-record POSTs paced at
                  --load-fraction (0.5) of the produce rate measured in the same round

``--client httpx`` uses httpx instead of raw HTTP/1.1 over asyncio streams;
``--compare-clients`` measures both on the tiny and produce1 ceilings and reports the
generator's CPU per request (the headroom question).

Every loop is bounded by time (``--duration`` after ``--warmup``) and by a request count
(``--max-requests``); the latency cases by ``--samples`` and a per-sample timeout.

The cases themselves are ``Bench`` in ``http_cases.py`` beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

# The generator pieces live in app/bench (shared with `franz bench`).
from app.bench.http1 import BINARY, V2, HttpxConn, RawConn, Req, Resp, free_port, parse_addr  # noqa: E402
from app.bench.stats import med, pct  # noqa: E402, F401  (pct: kept importable from here)
from app.bench.workloads import (  # noqa: E402
    LoadResult,
    Target,
    closed_loop,
    machine_notes,
    proc_cpu,
    produce_body,
    produce_req,
    stop,
    wait_ready,
)
from app.bench.workloads import spawn as _spawn  # noqa: E402

if str(ROOT / "benchmarks") not in sys.path:  # http_cases.py, beside this file (not a package)
    sys.path.insert(0, str(ROOT / "benchmarks"))
from http_cases import BATCH, Bench  # noqa: E402

__all__ = ["BINARY", "V2", "HttpxConn", "LoadResult", "RawConn", "Req", "Resp", "Target",
           "closed_loop", "parse_addr", "proc_cpu", "produce_body", "produce_req"]


def spawn(cmd: list[str], cpu: int | None, log: Path, cwd: Path = ROOT) -> subprocess.Popen[bytes]:
    return _spawn(cmd, cpu, log, cwd=cwd)


# --- orchestration ----------------------------------------------------------------------------


CASES = ("produce", "produce1", "consume_range", "consume_instance", "tiny", "latency_idle",
         "latency_load")


async def run_rounds(args: argparse.Namespace, bench: Bench) -> dict[str, Any]:
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(cases) - set(CASES)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    c, p = bench.ceiling, bench.plain
    franzes = {"": bench.franz}
    if bench.baseline is not None:
        franzes["_baseline"] = bench.baseline
    if {"consume_range", "consume_instance"} & set(cases):
        t = time.perf_counter()
        for ft in franzes.values():
            await bench.preload(ft, args.preload)
        print(f"preloaded {bench.preloaded} records per broker in {time.perf_counter() - t:.1f} s",
              flush=True)
    ceil = not args.no_ceiling
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        out: dict[str, Any] = {}
        for case in cases:
            if case == "produce":
                if ceil:
                    out["ceiling_post_echo_1000"] = await bench.produce(c, bench.batch_body, BATCH)
                for sfx, f in franzes.items():
                    out["produce_1000" + sfx] = await bench.produce(f, bench.batch_body, BATCH)
            elif case == "produce1":
                if ceil:
                    out["ceiling_post_echo_1"] = await bench.produce(c, bench.one_body, 1)
                for sfx, f in franzes.items():
                    out["produce_1" + sfx] = await bench.produce(f, bench.one_body, 1)
            elif case == "consume_range":
                if ceil:
                    out["ceiling_get_1000"] = await bench.get_fixed(
                        c, f"/topics/{bench.read_topic}/partitions/0/records", BATCH)
                for sfx, f in franzes.items():
                    out["consume_range_1000" + sfx] = await bench.consume_range(f)
            elif case == "consume_instance":
                if ceil:
                    out["ceiling_get_1000_b"] = await bench.consume_instance(c, ceiling=True)
                for sfx, f in franzes.items():
                    out["consume_instance_1000" + sfx] = await bench.consume_instance(f)
            elif case == "tiny" and ceil:
                out["ceiling_get_bytes_1000"] = await bench.get_fixed(
                    c, "/ceiling/records-bytes", BATCH)
                out["ceiling_tiny_fastapi"] = await bench.get_fixed(c, "/ceiling/tiny", 0)
                if p is not None:
                    out["ceiling_tiny_plain_asgi"] = await bench.get_fixed(p, "/", 0)
            elif case == "latency_idle":
                if ceil:
                    out["ceiling_latency_idle"] = await bench.latency(c, ceiling=True)
                for sfx, f in franzes.items():
                    out["latency_idle" + sfx] = await bench.latency(f, ceiling=False)
            elif case == "latency_load":
                for sfx, f in franzes.items():
                    rate = (out.get("produce_1000" + sfx) or {}).get("rec_per_s") or args.load_rate
                    out["latency_load" + sfx] = await bench.latency_load(f, rate)
            print(f"round {r + 1}/{args.rounds} {case} done", flush=True)
        rounds.append(out)
    return {"rounds": rounds, "summary": summarize(rounds)}


RATIOS = {
    "produce_1000": ("ceiling_post_echo_1000", "rec_per_s"),
    "produce_1": ("ceiling_post_echo_1", "req_per_s"),
    "consume_range_1000": ("ceiling_get_1000", "rec_per_s"),
    "consume_instance_1000": ("ceiling_get_1000_b", "rec_per_s"),
}


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in rounds[0]] if rounds else []
    summary: dict[str, Any] = {}
    for k in keys:
        per = [r[k] for r in rounds if k in r]
        numeric = {m for m, v in per[0].items() if isinstance(v, (int, float))}
        summary[k] = {m: med([x.get(m) for x in per]) for m in sorted(numeric)}
        if "background" in per[0]:
            summary[k]["background_rec_per_s"] = med([x["background"]["rec_per_s"] for x in per])
        base_key = k.removesuffix("_baseline")
        if base_key in RATIOS:
            ck, metric = RATIOS[base_key]
            ratios = [r[k][metric] / r[ck][metric] for r in rounds if ck in r and r[ck][metric]]
            summary[k]["ratio_to_ceiling"] = med(ratios)
            summary[k]["ratios_per_round"] = ratios
            summary[k]["ceiling"] = ck
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    print()
    print(f"{'case':28} {'rec/s':>11} {'req/s':>9} {'MB/s':>7} {'ratio':>6} "
          f"{'srv cpu':>7} {'srv us/req':>10} {'gen us/req':>10}")
    for k, s in summary.items():
        if "p50_ms" in s:
            extra = ""
            if "background_rec_per_s" in s:
                extra = f"  (background {s['background_rec_per_s'] / 1e3:.0f} k rec/s)"
            print(f"{k:28} latency p50 {s['p50_ms']:.2f} ms  p90 {s['p90_ms']:.2f}  "
                  f"p99 {s['p99_ms']:.2f}  max {s['max_ms']:.2f}  n={s['samples']:.0f}{extra}")
            continue
        ratio = s.get("ratio_to_ceiling")
        print(f"{k:28} {s['rec_per_s']:11.0f} {s['req_per_s']:9.0f} {s['mb_per_s']:7.1f} "
              f"{'' if ratio is None else f'{ratio:.2f}':>6} {s['server_cpu_util']:7.2f} "
              f"{(s['server_cpu_us_per_req'] or 0):10.0f} {(s['client_cpu_us_per_req'] or 0):10.0f}")


async def compare_clients(args: argparse.Namespace, bench: Bench) -> dict[str, Any]:
    """Raw streams vs httpx on the cheapest ceilings: who leaves more headroom."""
    out: dict[str, Any] = {}
    for r in range(args.rounds):
        for name, cls in (("raw", RawConn), ("httpx", HttpxConn)):
            bench.conn_cls = cls
            out.setdefault(f"{name}_tiny_fastapi", []).append(
                await bench.get_fixed(bench.ceiling, "/ceiling/tiny", 0))
            if bench.plain is not None:
                out.setdefault(f"{name}_tiny_plain", []).append(
                    await bench.get_fixed(bench.plain, "/", 0))
            out.setdefault(f"{name}_post_echo_1", []).append(
                await bench.produce(bench.ceiling, bench.one_body, 1))
            out.setdefault(f"{name}_get_bytes_1000", []).append(
                await bench.get_fixed(bench.ceiling, "/ceiling/records-bytes", BATCH))
        print(f"compare round {r + 1} done", flush=True)
    bench.conn_cls = RawConn
    summary = {k: {m: med([x[m] for x in v]) for m in ("req_per_s", "client_cpu_util",
                                                        "client_cpu_us_per_req", "server_cpu_util",
                                                        "server_cpu_us_per_req")}
               for k, v in out.items()}
    print()
    print(f"{'client/case':28} {'req/s':>9} {'gen cpu':>8} {'gen us/req':>10} {'srv cpu':>8}")
    for k, s in summary.items():
        print(f"{k:28} {s['req_per_s']:9.0f} {s['client_cpu_util']:8.2f} "
              f"{s['client_cpu_us_per_req']:10.1f} {s['server_cpu_util']:8.2f}")
    return {"compare_clients": summary, "compare_rounds": out}


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    procs: list[subprocess.Popen[bytes]] = []
    tmp = Path(tempfile.mkdtemp(prefix="franz-bench-"))
    try:
        if args.franz:
            h, p = parse_addr(args.franz)
            franz = Target("franz", h, p, args.franz_pid)
            fproc = None
        else:
            port = free_port()
            cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port",
                   str(port), "--data-dir", str(tmp / "data"), "--log-level", "WARNING"]
            for o in args.override:
                cmd += ["--override", o]
            fproc = spawn(cmd, args.server_cpu, tmp / "franz.log")
            procs.append(fproc)
            franz = Target("franz", "127.0.0.1", port, fproc.pid)
        baseline = None
        if args.baseline_src:
            port = free_port()
            cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port",
                   str(port), "--data-dir", str(tmp / "data-baseline"), "--log-level", "WARNING"]
            for o in args.override:
                cmd += ["--override", o]
            bproc = spawn(cmd, args.server_cpu, tmp / "baseline.log", cwd=args.baseline_src)
            procs.append(bproc)
            baseline = Target("franz-baseline", "127.0.0.1", port, bproc.pid)
            await wait_ready(baseline, "/topics", bproc, tmp / "baseline.log")
        if args.ceiling:
            h, p = parse_addr(args.ceiling)
            ceiling = Target("ceiling", h, p, args.ceiling_pid)
            cproc = None
            plain = None
        else:
            port = free_port()
            cproc = spawn([sys.executable, str(ROOT / "benchmarks" / "ceiling.py"), "--port",
                           str(port)], args.server_cpu, tmp / "ceiling.log")
            procs.append(cproc)
            ceiling = Target("ceiling", "127.0.0.1", port, cproc.pid)
            port = free_port()
            pproc = spawn([sys.executable, str(ROOT / "benchmarks" / "ceiling.py"), "--port",
                           str(port), "--plain"], args.server_cpu, tmp / "plain.log")
            procs.append(pproc)
            plain = Target("plain-asgi", "127.0.0.1", port, pproc.pid)
            await wait_ready(plain, "/", pproc, tmp / "plain.log")
        if not args.no_ceiling:
            await wait_ready(ceiling, "/ceiling/tiny", cproc, tmp / "ceiling.log")
        if not args.compare_clients:
            await wait_ready(franz, "/topics", fproc, tmp / "franz.log")
        bench = Bench(args, franz, ceiling, plain)
        bench.baseline = baseline
        if args.compare_clients:
            result = await compare_clients(args, bench)
        else:
            result = await run_rounds(args, bench)
            print_summary(result["summary"])
        return result
    finally:
        for proc in reversed(procs):
            stop(proc)
        if args.keep_logs:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="produce,produce1,consume_range,consume_instance,tiny,"
                                       "latency_idle,latency_load")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds per case")
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    ap.add_argument("--max-requests", type=int, default=200_000, help="per connection and case")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--client", choices=("raw", "httpx"), default="raw")
    ap.add_argument("--compare-clients", action="store_true")
    ap.add_argument("--preload", type=int, default=200_000, help="records for the read cases")
    ap.add_argument("--auto-commit", action="store_true", help="consumer instances auto-commit")
    ap.add_argument("--samples", type=int, default=500, help="latency samples")
    ap.add_argument("--lat-gap", type=float, default=2.0, help="ms between latency samples")
    ap.add_argument("--load-fraction", type=float, default=0.5)
    ap.add_argument("--load-rate", type=float, default=250_000.0,
                    help="records/s of latency_load when produce did not run")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--franz", help="HOST:PORT of a running franz (loopback)")
    ap.add_argument("--franz-pid", type=int)
    ap.add_argument("--ceiling", help="HOST:PORT of a running ceiling.py (loopback)")
    ap.add_argument("--ceiling-pid", type=int)
    ap.add_argument("--baseline-src", type=Path,
                    help="also run every franz case against a franz started from this source "
                         "tree (e.g. the code before a change), interleaved, as *_baseline")
    ap.add_argument("--no-ceiling", action="store_true", help="franz cases only (profiling)")
    ap.add_argument("--override", action="append", default=[], help="franz KEY=VALUE")
    ap.add_argument("--json", type=Path, help="write rounds and summary here")
    ap.add_argument("--label", default="", help="stored in the JSON")
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    if args.client_cpu is not None and args.client_cpu >= 0 and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {args.client_cpu})
    notes = machine_notes()
    try:
        import uvloop  # noqa: PLC0415

        result = uvloop.run(amain(args))
        notes["generator_loop"] = "uvloop"
    except ImportError:
        result = asyncio.run(amain(args))
        notes["generator_loop"] = "asyncio"
    result["machine"] = notes
    result["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    result["label"] = args.label
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
