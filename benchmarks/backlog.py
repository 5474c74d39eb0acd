"""Random-offset read latency on a partition of 1 M records vs one of 100 M records.

    python benchmarks/backlog.py                                   # 1 M vs 100 M (~11 GB)
    python benchmarks/backlog.py --small 100000 --large 5000000    # a quick proof

Target: reading at a random offset of the big log costs no more than 1.2 x the same
read on the small one (p50 and p99).

It starts one standalone broker from this tree (loopback, fresh data directory under
--tmp-dir), creates two one-partition topics, ``backlog-small`` and ``backlog-large``,
and fills them through the HTTP API as any producer would: ``POST
/topics/{t}/partitions/0`` with --batch (1000) records of --record-size (100) random
bytes per request (binary v2 format), on --build-connections keep-alive connections.
Before it writes anything it checks the free disk space: it refuses to run when the
file system holds less than 2 x the estimated size of both logs (re-checked with the
measured bytes per record after the small one is written).

Then it reads: --reads range reads per topic, ``GET
/topics/{t}/partitions/0/records?offset=X&count=--count`` at uniformly random offsets X,
one request at a time on one keep-alive connection, the two topics interleaved in a
random order (both see the same machine noise and the same server state), after
--warmup-reads unmeasured reads per topic (``&max_bytes=--max-bytes`` when given: without
it the broker reads up to its default 1 MiB from the offset's batch on, then trims
to --count records). Every answer is checked (HTTP 200, the first
record's offset is X, --count records). It prints p50/p90/p99/max per topic and the
large/small ratios; exit code 1 when a read failed. ``--restart`` stops (SIGTERM) and
restarts the broker between the writes and the reads, so both logs are read as loaded
from disk. The target is about franz's lookup (segment, offset index, batch scan) as a log
grows, not the disk, so the logs' pages are held in the page cache during the reads:
``--page-cache pin`` (the default) maps both logs in this script and ``mlock``s them
(root, or a memlock limit above ~11 GB; else it falls back to ``warm``), ``warm``
reads them through once before the reads, ``as-is`` leaves them as the kernel did.
The share of their pages in the page cache (``mincore``) is printed as written, before
and after the reads. Why: on the 24 GiB test VM the kernel drops ~0.15 % of an
idle 11 GB log's pages per second with 8 GB free (1.2 % gone by the time the reads
began), and a read landing there goes to the disk (~0.2 ms): that, not franz, made
the large log's p99 (in-process over the same files: the frame lookup's and the
batch pread's p99 205 / 230 us with the pages as left, 29 / 40 us once read back,
vs 16 / 36 us on the small log).

Bounded: the writes by the record counts and --build-timeout, the reads by --reads and
--read-timeout; the data directory (the big one!) is removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ctypes
import mmap
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "benchmarks") not in sys.path:  # partition_scale.py, beside this file
    sys.path.insert(0, str(ROOT / "benchmarks"))

from partition_scale import (  # noqa: E402
    JSON,
    Server,
    cluster_id,
    disk_usage,
    mem_fds,
    raise_nofile,
    write_json,
)

from app.bench.http1 import BINARY, V2, RawConn, Req  # noqa: E402
from app.bench.stats import pct  # noqa: E402
from app.bench.workloads import machine_notes, run_loop  # noqa: E402

EST_BYTES_PER_RECORD_OVERHEAD = 12  # record framing + batch header share, before measuring


class Refused(RuntimeError):
    pass


def check_space(path: Path, need: int, what: str) -> dict[str, Any]:
    free = shutil.disk_usage(path).free
    info = {"free_gb": round(free / 1e9, 2), "needed_gb": round(need / 1e9, 2), "what": what}
    if free < 2 * need:
        raise Refused(f"not enough free disk for {what}: {free / 1e9:.1f} GB free under "
                      f"{path}, {need / 1e9:.1f} GB needed, at least 2 x that required "
                      "(use --tmp-dir on a bigger file system, or smaller --large)")
    return info


async def create_topic(port: int, name: str) -> None:
    conn = await RawConn("127.0.0.1", port).connect()
    try:
        cid = await cluster_id(conn)
        status, _h, body = await conn.send(Req(
            "POST", f"/v3/clusters/{cid}/topics",
            orjson.dumps({"topic_name": name, "partitions_count": 1, "replication_factor": 1}),
            {"Content-Type": JSON, "Accept": JSON}))
        if status != 201:
            raise RuntimeError(f"create {name}: HTTP {status} {body[:300]!r}")
    finally:
        await conn.close()


async def fill(port: int, topic: str, records: int, *, batch: int, size: int,
               connections: int, timeout: float) -> dict[str, Any]:
    """Produce exactly ``records`` records to partition 0 of ``topic``."""
    path = f"/topics/{topic}/partitions/0"
    hdrs = {"Content-Type": BINARY, "Accept": V2}

    def body(n: int) -> bytes:
        return orjson.dumps({"records": [{"value": base64.b64encode(os.urandom(size)).decode()}
                                         for _ in range(n)]})

    full = body(batch)
    state = {"left": records, "acked": 0}
    t0 = time.perf_counter()
    deadline = t0 + timeout
    last_print = [t0]

    async def worker() -> None:
        conn = await RawConn("127.0.0.1", port).connect()
        try:
            while state["left"] > 0:
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"filling {topic} passed --build-timeout {timeout:.0f} s "
                                       f"({state['acked']:,} of {records:,} records)")
                n = min(batch, state["left"])
                state["left"] -= n
                status, _h, rbody = await conn.send(Req("POST", path, full if n == batch
                                                        else body(n), hdrs))
                if status != 200 or rbody.count(b'"error_code":null') != n:
                    raise RuntimeError(f"produce to {topic}: HTTP {status} {rbody[:300]!r}")
                state["acked"] += n
                now = time.perf_counter()
                if now - last_print[0] >= 10:
                    last_print[0] = now
                    print(f"  {topic}: {state['acked']:,} / {records:,} records "
                          f"({state['acked'] / (now - t0):,.0f} rec/s)", flush=True)
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    secs = time.perf_counter() - t0
    return {"records": state["acked"], "seconds": round(secs, 1),
            "rec_per_s": round(state["acked"] / secs)}


async def read_random(port: int, sizes: dict[str, int], *, reads: int, warmup: int, count: int,
                      max_bytes: int | None, timeout: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    plan = [t for t in sizes for _ in range(warmup)]
    rng.shuffle(plan)
    measured = [t for t in sizes for _ in range(reads)]
    rng.shuffle(measured)
    lat: dict[str, list[float]] = {t: [] for t in sizes}
    errors: dict[str, int] = {}
    first_errors: list[str] = []
    conn = await RawConn("127.0.0.1", port).connect()
    accept = {"Accept": BINARY}
    deadline = time.perf_counter() + timeout
    try:
        for i, topic in enumerate(plan + measured):
            if time.perf_counter() > deadline:
                errors["timeout"] = errors.get("timeout", 0) + 1
                break
            off = rng.randrange(0, sizes[topic] - count + 1)
            mb = "" if max_bytes is None else f"&max_bytes={max_bytes}"
            req = Req("GET", f"/topics/{topic}/partitions/0/records?offset={off}&count={count}{mb}",
                      b"", accept)
            t0 = time.perf_counter()
            try:
                status, _h, body = await conn.send(req)
            except (OSError, asyncio.IncompleteReadError) as exc:
                errors["connection"] = errors.get("connection", 0) + 1
                first_errors.append(repr(exc))
                await conn.close()
                conn = await RawConn("127.0.0.1", port).connect()
                continue
            t1 = time.perf_counter()
            problem = None
            if status != 200:
                problem = f"http_{status}"
            else:
                rows = orjson.loads(body)
                if len(rows) != count or rows[0]["offset"] != off:
                    problem = "wrong_records"
            if problem:
                errors[problem] = errors.get(problem, 0) + 1
                if len(first_errors) < 5:
                    first_errors.append(f"{problem} at {topic}@{off}: {body[:200]!r}")
                continue
            if i >= len(plan):
                lat[topic].append(t1 - t0)
    finally:
        await conn.close()
    out: dict[str, Any] = {"errors": errors, "first_errors": first_errors}
    for t, xs in lat.items():
        xs.sort()
        out[t] = {"reads": len(xs), **{f"p{q}_ms": round(1e3 * pct(xs, q), 3)
                                       for q in (50, 90, 99)},
                  "max_ms": round(1e3 * xs[-1], 3) if xs else None,
                  "mean_ms": round(1e3 * sum(xs) / len(xs), 3) if xs else None}
    return out


class _Libc:
    """``mmap``, ``munmap``, ``mlock`` and ``mincore`` through ctypes (Linux), or
    ``ok`` False."""

    def __init__(self) -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            self.mmap, self.munmap = libc.mmap, libc.munmap
            self.mlock, self.mincore = libc.mlock, libc.mincore
        except (OSError, AttributeError):
            self.ok = False
            return
        self.ok = True
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]

    def map(self, path: Path) -> tuple[int, int] | None:
        """(address, size) of a read-only shared mapping of ``path``, None if empty
        or refused."""
        size = path.stat().st_size
        if not size:
            return None
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = self.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        finally:
            os.close(fd)
        return None if addr in (None, ctypes.c_void_p(-1).value) else (addr, size)


_LIBC = _Libc()


def resident_fraction(files: list[Path]) -> float | None:
    """The fraction of the files' pages in the page cache (``mincore(2)``), None where
    that cannot be asked."""
    if not _LIBC.ok:
        return None
    resident = total = 0
    for path in files:
        mapped = _LIBC.map(path)
        if mapped is None:
            continue
        addr, size = mapped
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        failed = _LIBC.mincore(addr, size, vec) != 0
        _LIBC.munmap(addr, size)
        if failed:
            return None
        resident += sum(b & 1 for b in vec.raw)  # bit 0: resident
        total += pages
    return resident / total if total else None


def read_through(files: list[Path]) -> None:
    """Read every file once, so its pages are in the page cache (what the kernel
    evicted of a just-written log comes back)."""
    for path in files:
        with path.open("rb", buffering=0) as f:
            while f.read(1 << 20):
                pass


class PinnedFiles:
    """The files mapped and ``mlock``ed by this process: every page in the page cache
    until ``release()`` (the broker reads them as usual, through its own descriptors).
    ``pinned`` False when the system refused (no privilege, a memlock limit)."""

    def __init__(self, files: list[Path]) -> None:
        self._maps: list[tuple[int, int]] = []
        self.pinned = _LIBC.ok
        for path in files if self.pinned else ():
            mapped = _LIBC.map(path)
            if mapped is None:
                continue
            self._maps.append(mapped)
            if _LIBC.mlock(*mapped) != 0:
                self.pinned = False
                break
        if not self.pinned:
            self.release()

    def release(self) -> None:
        for addr, size in self._maps:
            _LIBC.munmap(addr, size)  # unlocks too
        self._maps = []


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="franz-backlog-", dir=args.tmp_dir))
    result: dict[str, Any] = {}
    pinned: PinnedFiles | None = None
    sizes = {"backlog-small": args.small, "backlog-large": args.large}
    per_rec = args.record_size + EST_BYTES_PER_RECORD_OVERHEAD
    server = Server(tmp / "data", tmp / "franz.log", overrides=list(args.override),
                    cpu=args.server_cpu)
    try:
        result["disk_check"] = [check_space(tmp, (args.small + args.large) * per_rec,
                                            "both logs (estimate)")]
        server.start()
        await server.wait_http(args.ready_timeout)
        for name in sizes:
            await create_topic(server.port, name)
        builds = {}
        for name, n in sizes.items():
            if name == "backlog-large":  # measured bytes per record, re-check
                used = disk_usage(tmp / "data" / "backlog-small-0")
                per_rec = max(used / args.small, 1.0)
                result["bytes_per_record_on_disk"] = round(per_rec, 1)
                result["disk_check"].append(check_space(tmp, int(n * per_rec), "the large log"))
            print(f"writing {n:,} records to {name}", flush=True)
            builds[name] = await fill(server.port, name, n, batch=args.batch,
                                      size=args.record_size,
                                      connections=args.build_connections,
                                      timeout=args.build_timeout)
            print(f"  {name}: {builds[name]['records']:,} records in {builds[name]['seconds']} s "
                  f"({builds[name]['rec_per_s']:,} rec/s)", flush=True)
        result["build"] = builds
        result["log_bytes"] = {name: disk_usage(tmp / "data" / f"{name}-0") for name in sizes}
        result["segments"] = {name: len(list((tmp / "data" / f"{name}-0").glob("*.log")))
                              for name in sizes}
        if args.restart:
            result["stop"] = server.stop(args.stop_timeout)
            server.start()
            result["restart_http_s"] = round(await server.wait_http(args.ready_timeout), 3)
            print(f"restarted: HTTP answers after {result['restart_http_s']} s", flush=True)
        logs = {name: sorted((tmp / "data" / f"{name}-0").glob("*.log")) for name in sizes}
        result["resident_as_written"] = {n: resident_fraction(f) for n, f in logs.items()}
        started = time.monotonic()
        if args.page_cache == "pin":
            pinned = PinnedFiles([f for files in logs.values() for f in files])
            if not pinned.pinned:
                print("could not mlock the logs: reading them through once instead", flush=True)
                args.page_cache = "warm"
        if args.page_cache == "warm":
            for files in logs.values():
                read_through(files)
        result["page_cache"] = {"mode": args.page_cache,
                                "seconds": round(time.monotonic() - started, 1)}
        result["resident_before_reads"] = {n: resident_fraction(f) for n, f in logs.items()}
        print(f"page cache ({args.page_cache}): resident before the reads "
              + ", ".join(f"{n} {100 * (r or 0):.2f} %"
                          for n, r in result["resident_before_reads"].items())
              + " (as written: " + ", ".join(
                  f"{100 * (r or 0):.2f} %" for r in result["resident_as_written"].values())
              + ")", flush=True)
        result["server_before_reads"] = mem_fds(server.pid)
        print(f"reading: {args.reads} x count={args.count} max_bytes={args.max_bytes or 'default'}"
              f" at random offsets per topic "
              f"(+{args.warmup_reads} warm-up), interleaved", flush=True)
        rd = await read_random(server.port, sizes, reads=args.reads, warmup=args.warmup_reads,
                               count=args.count, max_bytes=args.max_bytes,
                               timeout=args.read_timeout, seed=args.seed)
        result["reads"] = rd
        result["resident_after_reads"] = {n: resident_fraction(f) for n, f in logs.items()}
        if pinned is not None:
            pinned.release()
        result["server_after_reads"] = mem_fds(server.pid)
        s, lg = rd["backlog-small"], rd["backlog-large"]
        ratios = {f"{q}_ratio": round(lg[f"{q}_ms"] / s[f"{q}_ms"], 3)
                  for q in ("p50", "p90", "p99") if s.get(f"{q}_ms")}
        result["ratios"] = ratios
        result["target"] = "p50 and p99 of the large log within 1.2 x the small one"
        result["met"] = bool(ratios) and ratios["p50_ratio"] <= 1.2 and ratios["p99_ratio"] <= 1.2
        result["final_stop"] = server.stop(args.stop_timeout)
        return result
    finally:
        if pinned is not None:
            pinned.release()
        server.kill()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=1_000_000, help="records in the small log")
    ap.add_argument("--large", type=int, default=100_000_000, help="records in the large log")
    ap.add_argument("--reads", type=int, default=2000, help="measured reads per log")
    ap.add_argument("--warmup-reads", type=int, default=200, help="unmeasured reads per log")
    ap.add_argument("--count", type=int, default=1, help="records per read")
    ap.add_argument("--max-bytes", type=int, default=None,
                    help="max_bytes of each read (default: not sent, the broker's 1 MiB; 1 "
                         "reads just the batch holding the offset)")
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1000, help="records per produce request")
    ap.add_argument("--build-connections", type=int, default=4)
    ap.add_argument("--build-timeout", type=float, default=7200.0, help="seconds per log")
    ap.add_argument("--read-timeout", type=float, default=600.0)
    ap.add_argument("--ready-timeout", type=float, default=600.0)
    ap.add_argument("--stop-timeout", type=float, default=300.0)
    ap.add_argument("--restart", action="store_true",
                    help="restart the broker between writing and reading")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--server-cpu", type=int, default=None, help="pin the broker (taskset)")
    ap.add_argument("--override", action="append", default=[], help="broker KEY=VALUE")
    ap.add_argument("--tmp-dir", default=None, help="where the data directory goes")
    ap.add_argument("--page-cache", choices=("pin", "warm", "as-is"), default="pin",
                    help="the logs' pages during the reads: pin = mlocked in the page cache "
                         "by this script, warm = read through once before, as-is = as the "
                         "kernel left them (see the docstring)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", help="write the results here ('-': stdout)")
    args = ap.parse_args()
    if args.small < args.count or args.large < args.count:
        ap.error("--small and --large must hold at least --count records")
    raise_nofile()
    notes = machine_notes()
    notes["open_files_limit"] = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        result, loop = run_loop(amain(args))
    except Refused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        sys.exit(2)
    notes["generator_loop"] = loop
    result["machine"] = notes
    result["args"] = vars(args)
    print()
    print(f"{'log':15} {'records':>12} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, n in (("backlog-small", args.small), ("backlog-large", args.large)):
        r = result["reads"][name]
        print(f"{name:15} {n:12,} {r['p50_ms']:8.3f} {r['p90_ms']:8.3f} {r['p99_ms']:8.3f} "
              f"{r['max_ms']:8.3f}")
    rt = result["ratios"]
    print(f"large/small: p50 {rt.get('p50_ratio')}  p90 {rt.get('p90_ratio')}  "
          f"p99 {rt.get('p99_ratio')}  (target <= 1.2: {'met' if result['met'] else 'MISSED'})")
    if result["reads"]["errors"]:
        print(f"read errors: {result['reads']['errors']} {result['reads']['first_errors']}")
    write_json(args.json, result)
    sys.exit(1 if result["reads"]["errors"] else 0)


if __name__ == "__main__":
    main()
