"""How far keyed produce can get on 8 partitions when the leader append costs less.

    python benchmarks/append_floor.py                   # 3 rounds x 5 s, every mode
    python benchmarks/append_floor.py --rounds 1 --duration 2 --modes real,none

A keyed request of 1000 records on an 8-partition topic makes 8 partition appends where
an unkeyed one makes 1 (franz, as Kafka's sticky partitioner, sends an unkeyed request
to one partition). This measures keyed / unkeyed on 8 partitions with the broker's leader
append (``ReplicaManager.append`` / ``append_many``) replaced, in the benchmarked server
process only, by a stand-in:

real   the broker as it is
write  each partition's batches written with one ``write(2)`` to a scratch file of
       their own (the kernel's cost of a partition append), offsets counted in memory:
       no validation, producer state, segment, index or high-watermark upkeep
step   as ``write``, but the appends of one event-loop step are written together: one
       ``writev(2)`` per partition per step, each caller answered once its step's
       writes are done (what joining concurrent requests' batches before the write,
       as a producer's linger does, could save at best)
none   nothing written: offsets counted in memory

Everything before the append (HTTP, body parse, partitioning, batch encoding, the
producer's per-partition work) and after it (the answer) is the real code. Each run is a
fresh ``franz serve`` (fresh data directory) pinned to ``--server-cpu`` and one
``franz bench produce`` pinned to ``--client-cpu``; rounds interleave every mode and
case, so all see the same machine noise. Reports medians and the median of the
per-round keyed / unkeyed ratios, per mode. Results: docs/benchmarks.md ("Keyed produce
on 8 partitions: the floor").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: import this tree's app
    sys.path.insert(0, str(ROOT))

from app.bench.http1 import free_port  # noqa: E402
from app.bench.workloads import Target, run_loop, spawn, stop, wait_ready  # noqa: E402

MODES = ("real", "write", "step", "none")
CASES = {"unkeyed_8p": ["--partitions", "8"],
         "keyed_8p": ["--partitions", "8", "--keys", "1000"]}
HUGE = 10**12  # no record bound: the duration ends each run


def install_stand_in(mode: str, scratch: Path) -> None:
    """Replace the leader append of ``ReplicaManager`` in this process (``write``,
    ``step`` or ``none``). The partition must still be led here (unknown ones fail as usual)."""
    from core.broker.replica.manager import ReplicaManager  # noqa: PLC0415
    from core.storage.log import AppendInfo  # noqa: PLC0415

    ends: dict[Any, list[int]] = {}  # tp -> [fd or -1, next offset]

    def append_one(self: ReplicaManager, tp: Any, data: bytearray, *,
                   write: bool = True) -> AppendInfo:
        state = ends.get(tp)
        if state is None:
            self.leader_partition(tp)
            fd = -1 if mode == "none" else os.open(
                scratch / f"{tp[0]}-{tp[1]}.batches", os.O_CREAT | os.O_WRONLY | os.O_APPEND)
            state = ends[tp] = [fd, 0]
        if write and state[0] >= 0:
            os.write(state[0], data)
        # the first batch's record count: 1000 x 100 B make one batch per partition here
        records = int.from_bytes(data[57:61], "big")
        first = state[1]
        state[1] += records
        return AppendInfo(first, first + records - 1, -1, -1, records, len(data), 0)

    pending: dict[Any, list[bytearray]] = {}  # step mode: tp -> batches of this step
    waiting: list[asyncio.Future[None]] = []

    def write_step() -> None:
        for tp, datas in pending.items():
            os.writev(ends[tp][0], datas)
        pending.clear()
        for fut in waiting:
            fut.set_result(None)
        waiting.clear()

    async def append_stepped(self: ReplicaManager, items: Any) -> list[Any]:
        out = []
        for tp, data in items:
            out.append(append_one(self, tp, data, write=False))
            pending.setdefault(tp, []).append(data)
        loop = asyncio.get_running_loop()
        if not waiting:
            loop.call_soon(write_step)
        fut = loop.create_future()
        waiting.append(fut)
        await fut
        return out

    async def append(self: ReplicaManager, tp: Any, data: bytearray, *, acks: int,
                     timeout_ms: int) -> AppendInfo:
        if mode == "step":
            return (await append_stepped(self, ((tp, data),)))[0]
        return append_one(self, tp, data)

    async def append_many(self: ReplicaManager, items: Any, *, acks: int,
                          timeout_ms: int) -> list[Any]:
        if mode == "step":
            return await append_stepped(self, items)
        return [append_one(self, tp, data) for tp, data in items]

    ReplicaManager.append = append  # type: ignore[method-assign]
    ReplicaManager.append_many = append_many  # type: ignore[method-assign]


def serve(argv: list[str]) -> int:
    """``serve MODE SCRATCH <franz serve arguments>``: franz with the stand-in."""
    mode, scratch, rest = argv[0], Path(argv[1]), argv[2:]
    if mode != "real":
        install_stand_in(mode, scratch)
    from app.cli import main as franz  # noqa: PLC0415
    return franz(["serve", *rest])


def one_run(args: argparse.Namespace, mode: str, case: str, tmp: Path) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix=f"{mode}-{case}-", dir=tmp))
    port = free_port()
    proc = spawn([sys.executable, __file__, "serve", mode, str(run_dir), "--host", "127.0.0.1",
                  "--port", str(port), "--data-dir", str(run_dir / "data"), "--log-level",
                  "WARNING"], args.server_cpu, run_dir / "server.log", cwd=ROOT)
    try:
        target = Target("franz", "127.0.0.1", port, proc.pid)
        run_loop(wait_ready(target, "/topics", proc, run_dir / "server.log"))
        out = run_dir / "bench.json"
        cmd = [sys.executable, "-m", "app.cli", "bench", "produce", "--bootstrap-server",
               f"http://127.0.0.1:{port}", "--topic", "floor", *CASES[case], "--records",
               str(HUGE), "--batch", "1000", "--connections", str(args.connections),
               "--duration", str(args.duration), "--warmup", str(args.warmup),
               "--server-pid", str(proc.pid), "--json", str(out)]
        if args.client_cpu >= 0:
            cmd += ["--cpu", str(args.client_cpu)]
        subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True,
                       timeout=args.warmup + args.duration + 90)
        result: dict[str, Any] = json.loads(out.read_text())
    finally:
        stop(proc)
        subprocess.run(["rm", "-rf", str(run_dir)], check=False)
    return result


def summarize(runs: list[dict[str, Any]], modes: list[str]) -> list[dict[str, Any]]:
    rows = []
    for mode in modes:
        row: dict[str, Any] = {"mode": mode}
        for case in CASES:
            mine = [r for r in runs if r["mode"] == mode and r["case"] == case]
            row[case] = statistics.median(r["rec_per_s"] for r in mine)
            row[f"{case}_us"] = statistics.median(r["server_cpu_us_per_req"] or 0 for r in mine)
        ratios = []
        for rnd in sorted({r["round"] for r in runs}):
            pair = {r["case"]: r["rec_per_s"] for r in runs
                    if r["mode"] == mode and r["round"] == rnd}
            if len(pair) == len(CASES) and pair["unkeyed_8p"]:
                ratios.append(pair["keyed_8p"] / pair["unkeyed_8p"])
        row["ratios"] = ratios
        row["ratio"] = statistics.median(ratios) if ratios else None
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ",".join(MODES))
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1, help="-1: not pinned")
    ap.add_argument("--json", type=Path, help="write every run and the summary here")
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if bad := [m for m in modes if m not in MODES]:
        ap.error(f"unknown mode(s) {bad}: choose from {', '.join(MODES)}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="append-floor-") as tmp:
        for rnd in range(1, args.rounds + 1):
            for mode in modes:
                for case in CASES:
                    r = one_run(args, mode, case, Path(tmp))
                    steal = (r.get("machine") or {}).get("steal_pct")
                    runs.append({"round": rnd, "mode": mode, "case": case,
                                 "rec_per_s": r["rec_per_s"],
                                 "server_cpu_us_per_req": r.get("server_cpu_us_per_req"),
                                 "steal_pct": steal})
                    print(f"round {rnd} {mode:5s} {case:10s} {r['rec_per_s']:>12,.0f} rec/s "
                          f"{r.get('server_cpu_us_per_req') or 0:6.0f} us/req server CPU"
                          + (f" (steal {steal:.1f} %)" if steal else ""), flush=True)
    rows = summarize(runs, modes)
    print(f"\n{'mode':6s} {'unkeyed 8p':>22s} {'keyed 8p':>22s}  keyed/unkeyed (rounds)")
    for row in rows:
        print(f"{row['mode']:6s} {row['unkeyed_8p']:>11,.0f} ({row['unkeyed_8p_us']:4.0f} us)"
              f" {row['keyed_8p']:>11,.0f} ({row['keyed_8p_us']:4.0f} us)  "
              f"{row['ratio'] or 0:.2f} ({', '.join(f'{x:.2f}' for x in row['ratios'])})")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
