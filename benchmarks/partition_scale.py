"""Many partitions on one broker: create, produce to all, clean stop, restart.

    python benchmarks/partition_scale.py                                  # 1000, 5000, 10000
    python benchmarks/partition_scale.py --partitions 200,500 --records-per-partition 10

For each N of ``--partitions`` (a fresh data directory each time) it starts a standalone
broker from this tree (``python -m app.cli serve``, loopback only, its soft open-files
limit raised to the hard limit through ``preexec_fn``; the broker raises it too) and
measures:

create        N partitions as ceil(N / --partitions-per-topic) topics (default 100
              partitions each) through ``POST /v3/clusters/{cluster_id}/topics`` with
              ``partitions_count``, one request at a time; the time for all of them.
              A refusal (400 / 40002: the broker's partition budget, docs/partition-limits.md)
              stops the creation: it is reported (message, partitions created) and the run
              goes on with the partitions that exist.
produce       --records-per-partition records (--record-size bytes each) to every
              partition with ``POST /topics/{t}/partitions/{p}`` (binary v2 embedded
              format, at most 1000 records per request) over --connections keep-alive
              connections; records/s spread over all partitions. Every answer is checked
              (HTTP 200, no per-record error).
stop          SIGTERM; the time until the process has exited, and its exit code.
restart       the same command on the same data directory: the time from the process
              start until (a) the HTTP port answers, (b) ``/metrics`` reports as many
              partitions hosted as before the stop (``franz_replicamanager_partitioncount``,
              ``__consumer_offsets`` included) and (c) every
              partition's ``GET /topics/{t}/partitions/{p}/offsets`` answers the end
              offset written before the stop (all partitions, or a --verify-sample of
              them); the verification pass itself is timed separately so it can be
              told apart from the broker's own start.
RSS / fds     VmRSS and RssAnon from /proc/PID/status and the count of /proc/PID/fd,
              after the produce (before the stop) and after the restart.

Every loop is bounded by a count and by a time limit (--create-timeout,
--produce-timeout, --ready-timeout, --stop-timeout); data directories are removed at the
end (--keep to keep them). ``--json FILE`` writes every figure (``-``: stdout).
Timing figures are only meaningful on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: import this tree's app
    sys.path.insert(0, str(ROOT))

from app.bench.http1 import BINARY, V2, RawConn, Req, free_port  # noqa: E402
from app.bench.workloads import machine_notes, run_loop  # noqa: E402

JSON = "application/json"


# --- process helpers (shared with backlog.py and soak.py) -------------------------------------


def raise_nofile() -> int:
    """Raise this process's soft open-files limit to the hard limit; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    return soft


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, VmHWM (kB) and Threads of a process; {} when it is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM", "Threads"):
                    out[key] = int(val.split()[0])
    except (OSError, ValueError):
        return {}
    return out


def proc_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def mem_fds(pid: int) -> dict[str, Any]:
    st = proc_status(pid)
    return {"rss_mb": round(st.get("VmRSS", 0) / 1024, 1),
            "rss_anon_mb": round(st.get("RssAnon", 0) / 1024, 1),
            "rss_file_mb": round(st.get("RssFile", 0) / 1024, 1),
            "hwm_mb": round(st.get("VmHWM", 0) / 1024, 1),
            "threads": st.get("Threads"),
            "open_fds": proc_fds(pid)}


class Server:
    """One ``franz serve`` from this tree on 127.0.0.1, its own session, output to a log.

    ``start`` may be called again after ``stop`` (same port, same data directory)."""

    def __init__(self, data_dir: Path, log: Path, *, overrides: list[str] | None = None,
                 config: Path | None = None, cpu: int | None = None,
                 log_level: str = "WARNING") -> None:
        self.data_dir = data_dir
        self.log = log
        self.port = free_port()
        self.overrides = overrides or []
        self.config = config
        self.cpu = cpu
        self.log_level = log_level
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cmd(self) -> list[str]:
        cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port",
               str(self.port), "--data-dir", str(self.data_dir), "--log-level", self.log_level]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        for o in self.overrides:
            cmd += ["--override", o]
        if self.cpu is not None and self.cpu >= 0 and shutil.which("taskset"):
            cmd = ["taskset", "-c", str(self.cpu), *cmd]
        return cmd

    def start(self) -> None:
        f = open(self.log, "ab")  # noqa: SIM115  (the child holds it; closed at stop)
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(self.cmd(), cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=raise_nofile)
        f.close()

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    async def wait_http(self, timeout: float, path: str = "/") -> float:
        """Seconds from ``start`` until ``path`` answers below 500."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"franz exited during start:\n{self.log_tail()}")
            try:
                c = await RawConn("127.0.0.1", self.port).connect()
                try:
                    status, _h, _b = await asyncio.wait_for(
                        c.send(Req("GET", path, b"", {"Accept": V2})), 5.0)
                    if status < 500:
                        return time.perf_counter() - self.started_at
                finally:
                    await c.close()
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                pass
            await asyncio.sleep(0.05)
        raise RuntimeError(f"franz did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 120.0) -> dict[str, Any]:
        """SIGTERM; seconds until exit and the exit code (SIGKILL after ``timeout``)."""
        if self.proc is None or self.proc.poll() is not None:
            return {"stop_s": 0.0, "exit_code": None if self.proc is None else self.proc.returncode}
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        killed = False
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            killed = True
        return {"stop_s": round(time.perf_counter() - t0, 3), "exit_code": self.proc.returncode,
                "killed_after_timeout": killed}

    def kill(self) -> None:
        """Last-resort cleanup (finally blocks): SIGTERM, then SIGKILL after 30 s."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.stop(30.0)


async def get_json(conn: RawConn, path: str, accept: str = V2) -> tuple[int, Any]:
    status, _h, body = await conn.send(Req("GET", path, b"", {"Accept": accept}))
    try:
        return status, orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return status, body[:300]


async def cluster_id(conn: RawConn) -> str:
    status, body = await get_json(conn, "/v3/clusters", JSON)
    if status != 200:
        raise RuntimeError(f"GET /v3/clusters: HTTP {status} {body!r}")
    return str(body["data"][0]["cluster_id"])


def disk_usage(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def write_json(dest: str | None, result: dict[str, Any]) -> None:
    if not dest:
        return
    text = json.dumps(result, indent=1, default=str)
    if dest == "-":
        print(text)
    else:
        Path(dest).write_text(text)
        print(f"wrote {dest}")


# --- the benchmark -------------------------------------------------------------------------


def plan_topics(n: int, per_topic: int) -> list[tuple[str, int]]:
    topics = []
    left = n
    for i in range(math.ceil(n / per_topic)):
        k = min(per_topic, left)
        topics.append((f"scale-{i:05d}", k))
        left -= k
    return topics


async def create_all(port: int, cid: str, topics: list[tuple[str, int]],
                     timeout: float) -> dict[str, Any]:
    conn = await RawConn("127.0.0.1", port).connect()
    created: list[tuple[str, int]] = []
    refusal = None
    t0 = time.perf_counter()
    per_request: list[float] = []
    try:
        for name, count in topics:
            if time.perf_counter() - t0 > timeout:
                refusal = {"kind": "timeout", "message": f"creation passed {timeout:.0f} s"}
                break
            body = orjson.dumps({"topic_name": name, "partitions_count": count,
                                 "replication_factor": 1})
            t1 = time.perf_counter()
            status, _h, rbody = await conn.send(Req(
                "POST", f"/v3/clusters/{cid}/topics", body,
                {"Content-Type": JSON, "Accept": JSON}))
            per_request.append(time.perf_counter() - t1)
            if status == 201:
                created.append((name, count))
                continue
            try:
                err = orjson.loads(rbody)
            except orjson.JSONDecodeError:
                err = {"message": rbody[:300].decode(errors="replace")}
            refusal = {"kind": "refused", "status": status, "error_code": err.get("error_code"),
                       "message": err.get("message"), "topic": name,
                       "partitions_created_before": sum(c for _n, c in created)}
            break
    finally:
        await conn.close()
    secs = time.perf_counter() - t0
    n = sum(c for _n, c in created)
    tenth = max(1, len(per_request) // 10)
    trend = ({"first_tenth_mean_s": round(sum(per_request[:tenth]) / tenth, 4),
              "last_tenth_mean_s": round(sum(per_request[-tenth:]) / tenth, 4)}
             if per_request else {})  # does a creation get slower as partitions add up?
    per_request.sort()
    return {"created_topics": created, "partitions_created": n, "create_s": round(secs, 3),
            "partitions_per_s": round(n / secs, 1) if secs else None,
            "request_s_p50": round(per_request[len(per_request) // 2], 4) if per_request else None,
            "request_s_max": round(per_request[-1], 4) if per_request else None,
            "request_s_trend": trend,
            "refusal": refusal}


async def produce_all(port: int, topics: list[tuple[str, int]], records: int, size: int,
                      connections: int, timeout: float) -> dict[str, Any]:
    per_req = min(records, 1000)
    jobs: list[tuple[str, int, int]] = []  # topic, partition, records in this request
    for name, count in topics:
        for p in range(count):
            left = records
            while left > 0:
                k = min(per_req, left)
                jobs.append((name, p, k))
                left -= k
    bodies = {k: orjson.dumps({"records": [
        {"value": base64.b64encode(os.urandom(size)).decode()} for _ in range(k)]})
        for k in {j[2] for j in jobs}}
    it = iter(jobs)
    done = {"requests": 0, "records": 0}
    errors: dict[str, int] = {}
    first_errors: list[str] = []
    deadline = time.perf_counter() + timeout

    def err(kind: str, detail: str) -> None:
        errors[kind] = errors.get(kind, 0) + 1
        if len(first_errors) < 5:
            first_errors.append(f"{kind}: {detail}")

    async def worker() -> None:
        conn = await RawConn("127.0.0.1", port).connect()
        try:
            for name, p, k in it:
                if time.perf_counter() > deadline:
                    err("timeout", f"produce passed {timeout:.0f} s")
                    return
                try:
                    status, _h, body = await conn.send(Req(
                        "POST", f"/topics/{name}/partitions/{p}", bodies[k],
                        {"Content-Type": BINARY, "Accept": V2}))
                except (OSError, asyncio.IncompleteReadError) as exc:
                    err("connection", repr(exc))
                    await conn.close()
                    conn = await RawConn("127.0.0.1", port).connect()
                    continue
                if status != 200:
                    err(f"http_{status}", body[:200].decode(errors="replace"))
                    continue
                ok = body.count(b'"error_code":null')
                if ok != k:
                    err("record_error", body[:200].decode(errors="replace"))
                done["requests"] += 1
                done["records"] += ok
        finally:
            await conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    secs = time.perf_counter() - t0
    return {"produce_s": round(secs, 3), "records": done["records"],
            "requests": done["requests"], "rec_per_s": round(done["records"] / secs, 1),
            "req_per_s": round(done["requests"] / secs, 1),
            "errors": errors, "first_errors": first_errors}


async def partition_count_metric(conn: RawConn) -> int | None:
    status, _h, body = await conn.send(Req("GET", "/metrics", b"", {}))
    if status != 200:
        return None
    for line in body.splitlines():
        if line.startswith(b"franz_replicamanager_partitioncount"):
            return int(float(line.split()[-1]))
    return None


async def hosted_now(port: int) -> int | None:
    conn = await RawConn("127.0.0.1", port).connect()
    try:
        return await partition_count_metric(conn)
    finally:
        await conn.close()


async def wait_all_readable(server: Server, topics: list[tuple[str, int]], expected_end: int,
                            sample: int, connections: int, timeout: float,
                            hosted_before: int | None) -> dict[str, Any]:
    """After the HTTP port answers: wait for the partition-count metric to show what was
    hosted before the stop, then check the end offset of every partition (or a sample),
    retrying the ones not there yet."""
    t_deadline = time.perf_counter() + timeout
    # every user partition, plus __consumer_offsets' (hosted too) when known
    expected_hosted = hosted_before or sum(c for _n, c in topics)
    conn = await RawConn("127.0.0.1", server.port).connect()
    metric_s = None
    hosted = None
    try:
        while time.perf_counter() < t_deadline:
            hosted = await partition_count_metric(conn)
            # __consumer_offsets' partitions are hosted too: at least the user partitions
            if hosted is not None and hosted >= expected_hosted:
                metric_s = time.perf_counter() - server.started_at
                break
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    todo = [(t, p) for t, c in topics for p in range(c)]
    if sample and sample < len(todo):
        step = len(todo) / sample
        todo = [todo[int(i * step)] for i in range(sample)]
    checked = len(todo)
    t_verify = time.perf_counter()
    wrong: dict[str, int] = {}
    rounds = 0
    while todo and time.perf_counter() < t_deadline:
        rounds += 1
        it = iter(todo)
        again: list[tuple[str, int]] = []

        async def worker(it: Any = it, again: list[tuple[str, int]] = again) -> None:
            c = await RawConn("127.0.0.1", server.port).connect()
            try:
                for t, p in it:
                    status, body = await get_json(c, f"/topics/{t}/partitions/{p}/offsets")
                    if status == 200 and body.get("end_offset") == expected_end:
                        continue
                    kind = f"http_{status}" if status != 200 else f"end_{body.get('end_offset')}"
                    wrong[kind] = wrong.get(kind, 0) + 1
                    again.append((t, p))
            finally:
                await c.close()

        await asyncio.gather(*(worker() for _ in range(connections)))
        todo = again
        if todo:
            await asyncio.sleep(0.2)
    now = time.perf_counter()
    return {"metric_all_hosted_s": None if metric_s is None else round(metric_s, 3),
            "partitioncount_metric": hosted,
            "all_readable_s": round(now - server.started_at, 3) if not todo else None,
            "verify_pass_s": round(now - t_verify, 3), "verify_rounds": rounds,
            "partitions_checked": checked, "not_readable": len(todo),
            "wrong_answers_seen": wrong}


async def one_size(args: argparse.Namespace, n: int, tmp: Path) -> dict[str, Any]:
    data = tmp / f"data-{n}"
    log = tmp / f"franz-{n}.log"
    server = Server(data, log, overrides=list(args.override), cpu=args.server_cpu)
    out: dict[str, Any] = {"partitions_asked": n, "partitions_per_topic": args.partitions_per_topic,
                           "records_per_partition": args.records_per_partition,
                           "record_size": args.record_size}
    try:
        server.start()
        out["first_start_http_s"] = round(await server.wait_http(args.ready_timeout), 3)
        conn = await RawConn("127.0.0.1", server.port).connect()
        try:
            cid = await cluster_id(conn)
        finally:
            await conn.close()
        out["idle_before_create"] = mem_fds(server.pid)
        print(f"[{n}] broker up ({out['idle_before_create']['open_fds']} fds); creating "
              f"{math.ceil(n / args.partitions_per_topic)} topics x <= {args.partitions_per_topic}"
              f" partitions", flush=True)
        cr = await create_all(server.port, cid, plan_topics(n, args.partitions_per_topic),
                              args.create_timeout)
        topics = cr.pop("created_topics")
        out["create"] = cr
        if cr["refusal"]:
            print(f"[{n}] creation stopped after {cr['partitions_created']} partitions: "
                  f"{cr['refusal']}", flush=True)
        print(f"[{n}] created {cr['partitions_created']} partitions in {cr['create_s']:.1f} s",
              flush=True)
        out["after_create"] = mem_fds(server.pid)
        if not topics:
            return out
        pr = await produce_all(server.port, topics, args.records_per_partition, args.record_size,
                               args.connections, args.produce_timeout)
        out["produce"] = pr
        print(f"[{n}] produced {pr['records']} records in {pr['produce_s']:.1f} s "
              f"({pr['rec_per_s']:.0f} rec/s){' ERRORS ' + str(pr['errors']) if pr['errors'] else ''}",
              flush=True)
        out["after_produce"] = mem_fds(server.pid)
        out["hosted_before_stop"] = await hosted_now(server.port)
        out["stop"] = server.stop(args.stop_timeout)
        print(f"[{n}] stopped (SIGTERM) in {out['stop']['stop_s']:.1f} s, exit code "
              f"{out['stop']['exit_code']}", flush=True)
        server.start()
        out["restart_http_s"] = round(await server.wait_http(args.ready_timeout), 3)
        rd = await wait_all_readable(server, topics, args.records_per_partition,
                                     args.verify_sample, args.connections, args.ready_timeout,
                                     out["hosted_before_stop"])
        out["restart"] = rd
        out["after_restart"] = mem_fds(server.pid)
        print(f"[{n}] restart: HTTP {out['restart_http_s']:.2f} s, all hosted (metric) "
              f"{rd['metric_all_hosted_s']} s, all readable {rd['all_readable_s']} s (verify pass "
              f"{rd['verify_pass_s']:.2f} s over {rd['partitions_checked']} partitions); RSS "
              f"{out['after_restart']['rss_mb']} MB, fds {out['after_restart']['open_fds']}",
              flush=True)
        out["disk_mb"] = round(disk_usage(data) / 1e6, 1)
        out["final_stop"] = server.stop(args.stop_timeout)
        return out
    finally:
        server.kill()
        if args.keep:
            print(f"[{n}] kept {tmp}")
        else:
            shutil.rmtree(data, ignore_errors=True)


def print_table(results: list[dict[str, Any]]) -> None:
    print()
    print(f"{'asked':>6} {'created':>7} {'create s':>8} {'prod rec/s':>10} {'stop s':>6} "
          f"{'restart http s':>14} {'readable s':>10} {'RSS MB':>7} {'fds':>6}  notes")
    for r in results:
        cr = r.get("create", {})
        pr = r.get("produce", {})
        rd = r.get("restart", {})
        ar = r.get("after_restart", {})
        notes = []
        if cr.get("refusal"):
            ref = cr["refusal"]
            notes.append(f"refused {ref.get('status', '')}/{ref.get('error_code', '')}: "
                         f"{(ref.get('message') or '')[:90]}")
        if pr.get("errors"):
            notes.append(f"produce errors {pr['errors']}")
        if rd.get("not_readable"):
            notes.append(f"{rd['not_readable']} partitions not readable")
        if r.get("error"):
            notes.append(f"ERROR {r['error'][:200]}")
        print(f"{r['partitions_asked']:6d} {cr.get('partitions_created', 0):7d} "
              f"{cr.get('create_s', float('nan')):8.1f} {pr.get('rec_per_s', float('nan')):10.0f} "
              f"{r.get('stop', {}).get('stop_s', float('nan')):6.1f} "
              f"{r.get('restart_http_s', float('nan')):14.2f} "
              f"{(rd.get('all_readable_s') or float('nan')):10.2f} "
              f"{ar.get('rss_mb', float('nan')):7.0f} {ar.get('open_fds') or 0:6d}  "
              f"{'; '.join(notes)}")


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(x) for x in args.partitions.split(",") if x.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="franz-partscale-", dir=args.tmp_dir))
    results = []
    try:
        for n in sizes:
            try:
                results.append(await one_size(args, n, tmp))
            except Exception as exc:  # noqa: BLE001  (report it, go on with the next size)
                print(f"[{n}] FAILED: {exc!r}", flush=True)
                results.append({"partitions_asked": n, "error": repr(exc)})
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print_table(results)
    return {"results": results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1000,5000,10000", help="comma-separated sizes")
    ap.add_argument("--partitions-per-topic", type=int, default=100)
    ap.add_argument("--records-per-partition", type=int, default=100)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--verify-sample", type=int, default=0,
                    help="partitions checked after the restart (0: all)")
    ap.add_argument("--create-timeout", type=float, default=900.0)
    ap.add_argument("--produce-timeout", type=float, default=900.0)
    ap.add_argument("--ready-timeout", type=float, default=300.0)
    ap.add_argument("--stop-timeout", type=float, default=300.0)
    ap.add_argument("--server-cpu", type=int, default=None, help="pin the broker (taskset)")
    ap.add_argument("--override", action="append", default=[], help="broker KEY=VALUE")
    ap.add_argument("--tmp-dir", default=None, help="where the data directories go")
    ap.add_argument("--keep", action="store_true", help="keep data directories and logs")
    ap.add_argument("--json", help="write the results here ('-': stdout)")
    args = ap.parse_args()
    raise_nofile()
    notes = machine_notes()
    notes["open_files_limit"] = resource.getrlimit(resource.RLIMIT_NOFILE)
    result, loop = run_loop(amain(args))
    notes["generator_loop"] = loop
    result["machine"] = notes
    result["args"] = vars(args)
    write_json(args.json, result)
    bad = any(r.get("error") or r.get("produce", {}).get("errors")
              or r.get("restart", {}).get("not_readable") for r in result["results"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
