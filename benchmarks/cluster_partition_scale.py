"""Many partitions over a three-broker cluster: create, produce to all, restart one broker.

    python benchmarks/cluster_partition_scale.py --raise-max-map-count 262144 \\
        --override max.partitions.per.broker=40000 \\
        --json /tmp/cluster-partition-scale.json                   # 100,000 partitions
    python benchmarks/cluster_partition_scale.py --partitions 3000   # a small proof

Starts, on loopback only and in a fresh temporary directory (removed at the end), a
ZooKeeper and three ``franz broker`` processes exactly as ``cluster_bench.py``
does (its ``Cluster``; ``--override`` values are added to every broker), then:

create    ``--partitions`` partitions as topics of ``--partitions-per-topic`` (100)
          partitions, replication factor ``--replication-factor`` (1), through
          ``POST /v3/clusters/{cluster_id}/topics``, the topics sent to the three
          brokers' HTTP listeners round-robin, ``--create-concurrency`` (4) requests in
          flight. Timed: all of it, p50/max per request, then the time until the three
          brokers' ``franz_replicamanager_partitioncount`` add up to every replica
          (the other brokers create their logs when they see the topic in ZooKeeper).
          A refusal (400 / 40002: the partition budget, docs/partition-limits.md) or
          any other failure stops the creation; it is reported and the run goes on with
          the partitions that exist.
produce   ``--records-per-partition`` (1) records of ``--record-size`` (100) bytes to
          every partition, ``POST /topics/{t}/partitions/{p}`` (partition_scale.py's
          ``produce_all``), each broker sent a third of the topics over ``--connections``
          connections (a broker forwards what it does not lead); every answer checked.
resources per broker, after the produce and after the restart: VmRSS, RssAnon, open
          descriptors, memory mappings (lines of /proc/PID/maps), partitions hosted
          and led (the metrics; led also from the state znodes), disk used.
restart   one broker (``--restart-broker``; default the first that is not the
          controller): SIGTERM and the time until it exits (its exit code), then the
          same command on the same data directory: the time from the new process's
          start until (a) ``GET /v3/clusters`` answers, (b) the metric shows as many
          partitions hosted as before the stop, (c) ``franz_replicamanager_leadercount``
          shows it leading as many as it led before (RF=1 only: the controller marks
          them leaderless while it is away and elects it again when it is back; with
          RF > 1 leadership moves away at the controlled shutdown and returns only at
          the next preferred-leader election), (d) every
          partition it led before the stop (or a ``--verify-sample`` of them) answers
          the end offset written before the stop to
          ``GET /topics/{t}/partitions/{p}/offsets`` on its own listener; the
          verification pass is timed apart. /metrics (which lists every partition's
          log size) is polled at most every 4 x its last scrape time.
stop      SIGTERM to the three brokers at once; each one's stop time and exit code.

The per-broker budget: each broker lowers ``max.partitions.per.broker`` to what
``vm.max_map_count`` allows (core/broker/controller/partition_limits.py): 30,717
partition replicas at the usual 65,530, short of the ~33,400 per broker that
100,000 partitions at RF=1 need. ``--raise-max-map-count N`` (root only) writes N to
/proc/sys/vm/max_map_count before the brokers start and restores the old value at the
end (as Kafka's operations guide recommends for many partitions); without it the
expected refusal is announced before the run and the broker's own refusal reported.
Each broker checks the budget against its own view of what the others host, so
creations in flight on different brokers at once can pass it together and overshoot
it; ``--create-concurrency 1`` shows the refusal exactly where it falls.

Everything is bounded by counts and time limits (``--timeout`` for the whole run,
``--request-timeout`` per request, ``--stop-timeout`` per SIGTERM). ``--json FILE``
writes every figure (``-``: stdout). Exit code 1 when a produce failed, a partition was
not readable after the restart, or the run failed or timed out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
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
if str(ROOT / "benchmarks") not in sys.path:  # cluster_bench.py, partition_scale.py beside it
    sys.path.insert(0, str(ROOT / "benchmarks"))

from cluster_bench import Cluster  # noqa: E402
from partition_scale import (  # noqa: E402
    cluster_id,
    disk_usage,
    get_json,
    mem_fds,
    partition_count_metric,
    plan_topics,
    produce_all,
    raise_nofile,
    write_json,
)

from app.bench.http1 import RawConn, Req  # noqa: E402
from app.bench.workloads import BenchError, machine_notes, run_loop  # noqa: E402
from core.broker.controller.partition_limits import (  # noqa: E402
    MAPPINGS_PER_PARTITION,
    RESERVED_MAPPINGS,
    affordable_partitions,
)

JSON = "application/json"
MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")
ZK_ROOT = "/franz-bench"  # Cluster's chroot


class Deadline:
    """The whole run's time limit (``--timeout``)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = max(0.0, self.end - time.monotonic())
        return left if cap is None else min(cap, left)


class Pacer:
    """Sleeps between /metrics polls: at least ``floor`` s and 4 x the last scrape, so a
    /metrics answer that grows with the partitions (per-partition log sizes) costs the
    polled broker at most ~20 % of its time while it is being measured."""

    def __init__(self, floor: float = 0.2) -> None:
        self.floor = floor
        self.t = 0.0
        self.last_scrape_s = 0.0
        self.max_scrape_s = 0.0

    def begin(self) -> None:
        self.t = time.perf_counter()

    async def pause(self) -> None:
        self.last_scrape_s = time.perf_counter() - self.t
        self.max_scrape_s = max(self.max_scrape_s, self.last_scrape_s)
        await asyncio.sleep(max(self.floor, 4 * self.last_scrape_s))


# --- vm.max_map_count --------------------------------------------------------------------------


def read_max_map_count() -> int | None:
    try:
        return int(MAX_MAP_COUNT.read_text())
    except (OSError, ValueError):
        return None


def raise_max_map_count(value: int) -> dict[str, Any]:
    """Write ``value`` when it is above the current one (root only); what was done."""
    old = read_max_map_count()
    out: dict[str, Any] = {"asked": value, "before": old, "raised": False}
    if old is None:
        out["note"] = "no /proc/sys/vm/max_map_count (not Linux?)"
    elif value <= old:
        out["note"] = f"already {old}, not lowered"
    elif os.geteuid() != 0:
        out["note"] = "not root: left unchanged"
    else:
        try:
            MAX_MAP_COUNT.write_text(f"{value}\n")
            out["raised"] = True
        except OSError as exc:
            out["note"] = f"could not write it: {exc}"
    out["now"] = read_max_map_count()
    return out


def restore_max_map_count(done: dict[str, Any] | None) -> None:
    if not done or not done.get("raised"):
        return
    try:
        MAX_MAP_COUNT.write_text(f"{done['before']}\n")
        done["restored"] = read_max_map_count() == done["before"]
    except OSError as exc:
        done["restored"] = False
        done["restore_error"] = repr(exc)
    print(f"vm.max_map_count restored to {read_max_map_count()}", flush=True)


def override_value(overrides: list[str], key: str) -> str | None:
    found = None
    for o in overrides:
        k, _, v = o.partition("=")
        if k.strip() == key:
            found = v.strip()
    return found


def budget_check(args: argparse.Namespace) -> dict[str, Any]:
    """What each broker will allow (as partition_limits.py computes it) against what the
    run needs; printed before the run so a refusal is expected, not a surprise."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_files = hard if hard != resource.RLIM_INFINITY else soft  # brokers raise to hard
    mmc = read_max_map_count()
    affordable = affordable_partitions(open_files, mmc)
    prop = override_value(args.override, "max.partitions.per.broker")
    per_broker = min(affordable, int(prop) if prop else 50_000)
    # Kafka's assignment round-robins from a random broker per topic: a little uneven
    needed = math.ceil(args.partitions * args.replication_factor / 3) + args.partitions_per_topic
    out = {"vm_max_map_count": mmc, "affordable_per_broker": affordable,
           "max_partitions_per_broker_property": int(prop) if prop else 50_000,
           "effective_per_broker": per_broker, "needed_per_broker_about": needed,
           "fits": needed <= per_broker}
    if not out["fits"]:
        fixes = []
        if affordable < needed:
            want = needed * MAPPINGS_PER_PARTITION + RESERVED_MAPPINGS
            fixes.append(f"vm.max_map_count >= {want} (--raise-max-map-count N, as root)")
        if out["max_partitions_per_broker_property"] < needed:
            fixes.append(f"max.partitions.per.broker >= {needed} (--override)")
        out["note"] = (f"each broker allows {per_broker} partition replicas (vm.max_map_count="
                       f"{mmc}, max.partitions.per.broker={out['max_partitions_per_broker_property']})"
                       f", the run needs about {needed}: creation will be refused part way; "
                       f"{' and '.join(fixes)} would fit it.")
    return out


# --- per-broker figures --------------------------------------------------------------------------


def map_count(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def pid_of(c: Cluster, i: int) -> int | None:
    proc = c.procs[i]
    return None if proc is None or proc.poll() is not None else proc.pid


async def hosted(port: int, timeout: float = 30.0) -> int | None:
    try:
        conn = await asyncio.wait_for(RawConn("127.0.0.1", port).connect(), timeout)
    except (OSError, TimeoutError):
        return None
    try:
        return await asyncio.wait_for(partition_count_metric(conn), timeout)
    except (OSError, asyncio.IncompleteReadError, TimeoutError):
        return None
    finally:
        await conn.close()


async def leader_count(port: int, timeout: float = 10.0) -> int | None:
    """``franz_replicamanager_leadercount`` of /metrics: partitions this broker leads."""
    try:
        conn = await asyncio.wait_for(RawConn("127.0.0.1", port).connect(), timeout)
    except (OSError, TimeoutError):
        return None
    try:
        status, _h, body = await asyncio.wait_for(conn.send(Req("GET", "/metrics", b"", {})),
                                                  timeout)
    except (OSError, asyncio.IncompleteReadError, TimeoutError):
        return None
    finally:
        await conn.close()
    if status != 200:
        return None
    for line in body.splitlines():
        if line.startswith(b"franz_replicamanager_leadercount"):
            return int(float(line.split()[-1]))
    return None


async def broker_figures(c: Cluster, leaders: dict[int, int] | None = None,
                         disk: bool = False) -> list[dict[str, Any]]:
    rows = []
    for i in range(3):
        pid = pid_of(c, i)
        row: dict[str, Any] = {"broker": i, "pid": pid}
        if pid is not None:
            row.update(mem_fds(pid))
            row["maps"] = map_count(pid)
            row["hosted"] = await hosted(c.ports[i])
            row["leads_metric"] = await leader_count(c.ports[i])
        if leaders is not None:
            row["leads_zk"] = leaders.get(i, 0)  # user partitions, from the state znodes
        if disk:
            row["disk_mb"] = round(disk_usage(c.tmp / f"data-{i}") / 1e6, 1)
        rows.append(row)
    return rows


def zk_leaders(c: Cluster, topics: list[tuple[str, int]],
               chunk: int = 1000) -> dict[tuple[str, int], int]:
    """The leader of every partition from its state znode (kazoo, ``chunk`` reads in
    flight; run in a thread)."""
    paths = [(t, p) for t, n in topics for p in range(n)]
    out: dict[tuple[str, int], int] = {}
    for k in range(0, len(paths), chunk):
        part = paths[k:k + chunk]
        futures = [c.kazoo.get_async(f"{ZK_ROOT}/brokers/topics/{t}/partitions/{p}/state")
                   for t, p in part]
        for tp, fut in zip(part, futures, strict=True):
            try:
                out[tp] = int(orjson.loads(fut.get(timeout=60)[0])["leader"])
            except Exception:  # noqa: BLE001  (no state: counted as leaderless)
                out[tp] = -1
    return out


# --- create ----------------------------------------------------------------------------------------


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 4)


async def create_all(c: Cluster, cid: str, topics: list[tuple[str, int]],
                     args: argparse.Namespace, deadline: Deadline) -> dict[str, Any]:
    """The topics sent round-robin to the three listeners, ``--create-concurrency`` at
    once; the first refusal or failure stops the creation (requests in flight finish)."""
    jobs = iter(enumerate(topics))
    created: list[tuple[str, int]] = []
    per_request: list[float] = []
    per_broker: dict[int, int] = {0: 0, 1: 0, 2: 0}
    stop: dict[str, Any] = {}
    t0 = time.perf_counter()
    t_end = time.monotonic() + deadline.left(args.create_timeout)
    body_extra = {"replication_factor": args.replication_factor}

    async def worker() -> None:
        conns: dict[int, RawConn] = {}
        try:
            for n, (name, count) in jobs:
                if stop:
                    return
                if time.monotonic() > t_end:
                    stop.setdefault("refusal", {"kind": "timeout",
                                                "message": "creation passed its time limit"})
                    return
                b = n % 3
                body = orjson.dumps({"topic_name": name, "partitions_count": count,
                                     **body_extra})
                t1 = time.perf_counter()
                try:
                    if b not in conns:
                        conns[b] = await RawConn("127.0.0.1", c.ports[b]).connect()
                    status, _h, rbody = await asyncio.wait_for(conns[b].send(Req(
                        "POST", f"/v3/clusters/{cid}/topics", body,
                        {"Content-Type": JSON, "Accept": JSON})), args.request_timeout)
                except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                    stop.setdefault("refusal", {"kind": "failed", "topic": name, "broker": b,
                                                "message": repr(exc)})
                    return
                per_request.append(time.perf_counter() - t1)
                if status == 201:
                    created.append((name, count))
                    per_broker[b] += 1
                    continue
                try:
                    err = orjson.loads(rbody)
                except orjson.JSONDecodeError:
                    err = {"message": rbody[:300].decode(errors="replace")}
                kind = "refused" if status == 400 and err.get("error_code") == 40002 else "failed"
                stop.setdefault("refusal", {
                    "kind": kind, "status": status, "error_code": err.get("error_code"),
                    "message": err.get("message"), "topic": name, "broker": b,
                    "partitions_created_before": sum(k for _t, k in created)})
                return
        finally:
            for conn in conns.values():
                await conn.close()

    await asyncio.gather(*(worker() for _ in range(max(1, args.create_concurrency))))
    secs = time.perf_counter() - t0
    n = sum(k for _t, k in created)
    created.sort()
    return {"created_topics": created, "topics_created": len(created), "partitions_created": n,
            "create_s": round(secs, 3), "partitions_per_s": round(n / secs, 1) if secs else None,
            "requests": len(per_request), "request_s_p50": _pct(per_request, 0.5),
            "request_s_max": _pct(per_request, 1.0), "topics_per_listener": per_broker,
            "refusal": stop.get("refusal")}


async def wait_hosted_total(c: Cluster, expected: int, t0: float, timeout: float) -> dict[str, Any]:
    """Poll the three partition-count metrics until they add up to ``expected``."""
    end = time.monotonic() + timeout
    counts: list[int | None] = [None, None, None]
    pacer = Pacer()
    while True:
        pacer.begin()
        counts = [await hosted(port, 30.0) for port in c.ports]
        total = sum(x or 0 for x in counts)
        done = {"hosted": counts, "expected_total": expected,
                "metrics_scrape_s_max": round(pacer.max_scrape_s, 3)}
        if total >= expected:
            return {"all_hosted_s": round(time.perf_counter() - t0, 3), **done}
        if time.monotonic() > end:
            return {"all_hosted_s": None, **done}
        await pacer.pause()


# --- produce ---------------------------------------------------------------------------------------


async def produce_everywhere(c: Cluster, topics: list[tuple[str, int]], args: argparse.Namespace,
                             deadline: Deadline) -> dict[str, Any]:
    """partition_scale.produce_all against each broker at once, a third of the topics each."""
    timeout = deadline.left(args.produce_timeout)
    t0 = time.perf_counter()
    parts = await asyncio.gather(*(
        produce_all(c.ports[i], topics[i::3], args.records_per_partition, args.record_size,
                    args.connections, timeout)
        for i in range(3) if topics[i::3]))
    secs = time.perf_counter() - t0
    errors: dict[str, int] = {}
    for pr in parts:
        for k, v in pr["errors"].items():
            errors[k] = errors.get(k, 0) + v
    records = sum(pr["records"] for pr in parts)
    requests = sum(pr["requests"] for pr in parts)
    expected = sum(k for _t, k in topics) * args.records_per_partition
    return {"produce_s": round(secs, 3), "records": records, "records_expected": expected,
            "requests": requests, "rec_per_s": round(records / secs, 1) if secs else None,
            "req_per_s": round(requests / secs, 1) if secs else None, "errors": errors,
            "first_errors": [e for pr in parts for e in pr["first_errors"]][:5],
            "per_listener": parts}


# --- restart ---------------------------------------------------------------------------------------


def stop_broker(c: Cluster, i: int, timeout: float) -> dict[str, Any]:
    """SIGTERM; seconds until exit and the exit code (SIGKILL after ``timeout``)."""
    proc = c.procs[i]
    if proc is None or proc.poll() is not None:
        return {"stop_s": 0.0, "exit_code": None if proc is None else proc.returncode}
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    killed = False
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        killed = True
    return {"stop_s": round(time.perf_counter() - t0, 3), "exit_code": proc.returncode,
            "killed_after_timeout": killed}


def stop_all(c: Cluster, timeout: float) -> list[dict[str, Any]]:
    """SIGTERM to every broker at once; per broker: seconds until exit, exit code."""
    t0 = time.perf_counter()
    live = [i for i in range(3) if pid_of(c, i) is not None]
    for i in live:
        c.signal(i, signal.SIGTERM)
    rows = []
    for i in range(3):
        proc = c.procs[i]
        if i not in live or proc is None:
            rows.append({"broker": i, "stop_s": None, "exit_code": None, "not_running": True})
            continue
        killed = False
        try:
            proc.wait(max(1.0, timeout - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            killed = True
        rows.append({"broker": i, "stop_s": round(time.perf_counter() - t0, 3),
                     "exit_code": proc.returncode, "killed_after_timeout": killed})
    return rows


async def start_again(c: Cluster, i: int, timeout: float) -> float:
    """``Cluster.start_broker`` (it waits 60 s for ``GET /v3/clusters``), waiting on up to
    ``timeout`` when the broker is alive but slower than that; seconds from the start."""
    t0 = time.perf_counter()
    try:
        await c.start_broker(i)
        return time.perf_counter() - t0
    except BenchError:
        proc = c.procs[i]
        if proc is None or proc.poll() is not None:
            raise
    end = time.monotonic() + timeout - (time.perf_counter() - t0)
    while time.monotonic() < end:
        proc = c.procs[i]
        if proc is None or proc.poll() is not None:
            raise BenchError(f"broker {i} exited during its restart (broker-{i}.log)")
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, TimeoutError):
            conn = await RawConn("127.0.0.1", c.ports[i]).connect()
            try:
                status, _b = await asyncio.wait_for(get_json(conn, "/v3/clusters", JSON), 5.0)
                if status < 500:
                    return time.perf_counter() - t0
            finally:
                await conn.close()
        await asyncio.sleep(0.2)
    raise BenchError(f"broker {i} did not answer within {timeout:.0f} s of its restart")


async def verify_readable(port: int, parts: list[tuple[str, int]], expected_end: int,
                          connections: int, t_start: float, timeout: float) -> dict[str, Any]:
    """``GET /topics/{t}/partitions/{p}/offsets`` until each answers ``expected_end``,
    retrying the ones not there yet, until ``timeout``."""
    end = time.monotonic() + timeout
    todo = list(parts)
    wrong: dict[str, int] = {}
    first_wrong: list[str] = []
    round_s: list[float] = []
    rounds = 0
    t_verify = time.perf_counter()
    while todo and time.monotonic() < end:
        rounds += 1
        it = iter(todo)
        again: list[tuple[str, int]] = []
        t_round = time.perf_counter()

        def note(kind: str, what: str, secs: float) -> None:
            wrong[kind] = wrong.get(kind, 0) + 1
            if len(first_wrong) < 5:
                first_wrong.append(f"{what}: {kind} after {secs:.2f} s")

        async def worker(it: Any = it, again: list[tuple[str, int]] = again) -> None:
            conn: RawConn | None = None
            try:
                for t, p in it:
                    if time.monotonic() > end:
                        again.append((t, p))
                        continue
                    t1 = time.perf_counter()
                    try:
                        if conn is None:
                            conn = await RawConn("127.0.0.1", port).connect()
                        status, body = await asyncio.wait_for(
                            get_json(conn, f"/topics/{t}/partitions/{p}/offsets"), 60.0)
                    except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                        note(type(exc).__name__, f"{t}-{p}", time.perf_counter() - t1)
                        again.append((t, p))
                        if conn is not None:
                            await conn.close()
                        conn = None
                        continue
                    if status == 200 and isinstance(body, dict) \
                            and body.get("end_offset") == expected_end:
                        continue
                    kind = (f"http_{status} {str(body)[:160]}" if status != 200 else
                            f"end_{body.get('end_offset') if isinstance(body, dict) else '?'}")
                    note(kind.split(" ")[0], f"{t}-{p}: {kind}", time.perf_counter() - t1)
                    again.append((t, p))
            finally:
                if conn is not None:
                    await conn.close()

        await asyncio.gather(*(worker() for _ in range(max(1, connections))))
        round_s.append(round(time.perf_counter() - t_round, 3))
        todo = again
        if todo:
            await asyncio.sleep(0.2)
    now = time.perf_counter()
    return {"all_readable_s": round(now - t_start, 3) if not todo else None,
            "verify_pass_s": round(now - t_verify, 3), "verify_rounds": rounds,
            "verify_round_s": round_s[:20], "partitions_checked": len(parts),
            "not_readable": len(todo), "not_readable_first": [f"{t}-{p}" for t, p in todo[:10]],
            "wrong_answers_seen": wrong, "first_wrong_answers": first_wrong}


async def restart_one(c: Cluster, victim: int, topics: list[tuple[str, int]],
                      leaders: dict[tuple[str, int], int], args: argparse.Namespace,
                      deadline: Deadline) -> dict[str, Any]:
    led = sorted(tp for tp, b in leaders.items() if b == victim)
    sample = led
    if args.verify_sample and args.verify_sample < len(led):
        step = len(led) / args.verify_sample
        sample = [led[int(k * step)] for k in range(args.verify_sample)]
    out: dict[str, Any] = {"broker": victim, "was_controller": c.controller() == victim,
                           "led_before_stop": len(led)}
    out["hosted_before_stop"] = await hosted(c.ports[victim])
    out["leads_metric_before_stop"] = await leader_count(c.ports[victim])
    out["stop"] = stop_broker(c, victim, deadline.left(args.stop_timeout))
    print(f"restart: broker {victim} stopped (SIGTERM) in {out['stop']['stop_s']:.1f} s, exit "
          f"code {out['stop']['exit_code']}", flush=True)
    t_start = time.perf_counter()
    timeout = deadline.left(args.ready_timeout)
    out["http_s"] = round(await start_again(c, victim, timeout), 3)
    # partitions hosted again (the metric), then readable with the right end offset
    expected = out["hosted_before_stop"] or 0
    end = time.monotonic() + max(0.0, timeout - (time.perf_counter() - t_start))
    now_hosted = None
    out["all_hosted_s"] = None
    pacer = Pacer(0.1)
    while time.monotonic() < end:
        pacer.begin()
        now_hosted = await hosted(c.ports[victim], 30.0)
        if now_hosted is not None and now_hosted >= expected:
            out["all_hosted_s"] = round(time.perf_counter() - t_start, 3)
            break
        await pacer.pause()
    out["hosted_after"] = now_hosted
    # leaders again: with RF=1 the controller sets leader -1 on the partitions of a broker
    # that is gone and elects it again when it is back (one state znode write each). The
    # target is the user partitions it led (ZooKeeper); the metric also counts the
    # __consumer_offsets partitions it leads, which a controlled shutdown moves away
    # when they have other replicas (back only at the next preferred-leader election).
    # With RF > 1 a controlled shutdown moves leadership to other replicas, and it comes
    # back only at the next preferred-leader election: not waited for then.
    leads_before = len(led)
    out["all_led_again_s"] = None
    now_leads = None
    while args.replication_factor == 1 and time.monotonic() < end:
        pacer.begin()
        now_leads = await leader_count(c.ports[victim], 30.0)
        if now_leads is not None and now_leads >= leads_before:
            out["all_led_again_s"] = round(time.perf_counter() - t_start, 3)
            break
        await pacer.pause()
    out["leads_metric_after"] = now_leads
    out["metrics_scrape_s_max"] = round(pacer.max_scrape_s, 3)
    left = max(30.0, timeout - (time.perf_counter() - t_start))
    out["verify"] = await verify_readable(c.ports[victim], sample, args.records_per_partition,
                                          args.connections * 3, t_start, left)
    return out


# --- the run ---------------------------------------------------------------------------------------


async def amain(args: argparse.Namespace, out: dict[str, Any]) -> None:
    deadline = Deadline(args.timeout)
    tmp = Path(tempfile.mkdtemp(prefix="franz-cluster-partscale-", dir=args.tmp_dir))
    out["tmp"] = str(tmp)
    c = Cluster(tmp, args.session_ms, args.lag_ms)
    c.overrides += list(args.override)
    try:
        t = time.perf_counter()
        c.start_zookeeper()
        for i in range(3):
            await c.start_broker(i)
        out["cluster_start_s"] = round(time.perf_counter() - t, 3)
        conn = await RawConn("127.0.0.1", c.ports[0]).connect()
        try:
            cid = await cluster_id(conn)
        finally:
            await conn.close()
        out["controller"] = c.controller()
        out["idle"] = await broker_figures(c)
        base = [r.get("hosted") or 0 for r in out["idle"]]
        print(f"cluster up in {out['cluster_start_s']:.1f} s (controller: broker "
              f"{out['controller']}); creating {args.partitions} partitions as "
              f"{math.ceil(args.partitions / args.partitions_per_topic)} topics x <= "
              f"{args.partitions_per_topic}, RF={args.replication_factor}, "
              f"{args.create_concurrency} in flight", flush=True)

        plan = plan_topics(args.partitions, args.partitions_per_topic)
        cr = await create_all(c, cid, plan, args, deadline)
        topics = cr.pop("created_topics")
        out["create"] = cr
        if cr["refusal"]:
            print(f"creation stopped after {cr['partitions_created']} partitions: "
                  f"{cr['refusal']}", flush=True)
        t_created = time.perf_counter()
        settle = await wait_hosted_total(
            c, sum(base) + cr["partitions_created"] * args.replication_factor,
            t_created, deadline.left(args.ready_timeout))
        cr["settle"] = settle
        print(f"created {cr['partitions_created']} partitions in {cr['create_s']:.1f} s "
              f"(per request p50 {cr['request_s_p50']} s, max {cr['request_s_max']} s); every "
              f"replica hosted {settle['all_hosted_s']} s later (hosted: {settle['hosted']})",
              flush=True)
        if not topics:
            out["error"] = "no partition was created"
            return

        pr = await produce_everywhere(c, topics, args, deadline)
        out["produce"] = pr
        print(f"produced {pr['records']} / {pr['records_expected']} records in "
              f"{pr['produce_s']:.1f} s ({pr['rec_per_s']} rec/s)"
              f"{' ERRORS ' + str(pr['errors']) if pr['errors'] else ''}", flush=True)

        t = time.perf_counter()
        leaders = await asyncio.to_thread(zk_leaders, c, topics)
        out["leaders_read_s"] = round(time.perf_counter() - t, 3)
        lead_counts: dict[int, int] = {}
        for b in leaders.values():
            lead_counts[b] = lead_counts.get(b, 0) + 1
        out["leaderless"] = lead_counts.get(-1, 0)
        out["after_produce"] = await broker_figures(c, lead_counts, disk=True)
        print_brokers("after the produce", out["after_produce"])

        controller = c.controller()
        victim = args.restart_broker
        if victim is None or victim < 0:
            victim = next((b for b in range(3) if b != controller), 0)
        rs = await restart_one(c, victim, topics, leaders, args, deadline)
        out["restart"] = rs
        v = rs["verify"]
        print(f"restart of broker {victim}: HTTP {rs['http_s']} s, all hosted (metric) "
              f"{rs['all_hosted_s']} s, leads them all again (metric) {rs['all_led_again_s']} s, "
              f"every led partition readable {v['all_readable_s']} s "
              f"(verify pass {v['verify_pass_s']} s over {v['partitions_checked']} of "
              f"{rs['led_before_stop']}); not readable: {v['not_readable']}", flush=True)
        out["after_restart"] = await broker_figures(c)
        print_brokers("after the restart", out["after_restart"])
    finally:
        out["final_stop"] = stop_all(c, deadline.left(args.stop_timeout) + 30.0)
        c.close()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def print_brokers(title: str, rows: list[dict[str, Any]]) -> None:
    cols = (("broker", "broker", "d"), ("hosted", "hosted", "d"), ("leads", "leads_metric", "d"),
            ("RSS MB", "rss_mb", ".0f"), ("anon MB", "rss_anon_mb", ".0f"),
            ("fds", "open_fds", "d"), ("maps", "maps", "d"), ("disk MB", "disk_mb", ".1f"))
    print(f"  {title}:")
    print("  " + " ".join(f"{h:>8}" for h, _k, _f in cols))
    for r in rows:
        print("  " + " ".join(f"{format(r[k], f) if r.get(k) is not None else '-':>8}"
                              for _h, k, f in cols), flush=True)


def print_table(out: dict[str, Any]) -> None:
    cr = out.get("create", {})
    pr = out.get("produce", {})
    rs = out.get("restart", {})
    v = rs.get("verify", {})
    rows = [
        ("partitions asked / created", f"{out['args']['partitions']} / "
                                       f"{cr.get('partitions_created', 0)}"),
        ("create, s (partitions/s)", f"{cr.get('create_s')} ({cr.get('partitions_per_s')})"),
        ("create request p50 / max, s", f"{cr.get('request_s_p50')} / {cr.get('request_s_max')}"),
        ("after creation: every replica hosted, s",
         f"{cr.get('settle', {}).get('all_hosted_s')}"),
        ("produce, s (records/s)", f"{pr.get('produce_s')} ({pr.get('rec_per_s')})"),
        ("produce errors", f"{pr.get('errors')}"),
        (f"restart broker {rs.get('broker')}: SIGTERM stop, s (exit code)",
         f"{rs.get('stop', {}).get('stop_s')} ({rs.get('stop', {}).get('exit_code')})"),
        ("restart: HTTP answers, s", f"{rs.get('http_s')}"),
        ("restart: all hosted (metric), s", f"{rs.get('all_hosted_s')}"),
        ("restart: leads them all again (metric), s",
         f"{rs.get('all_led_again_s')}" if out["args"]["replication_factor"] == 1
         else "not waited (RF > 1: leadership moved away at the controlled shutdown)"),
        ("restart: every led partition readable, s (verify pass)",
         f"{v.get('all_readable_s')} ({v.get('verify_pass_s')}, "
         f"{v.get('partitions_checked')} checked)"),
        ("not readable after restart", f"{v.get('not_readable')}"),
        ("final stop, s per broker (exit codes)",
         ", ".join(f"{r.get('stop_s')} ({r.get('exit_code')})" for r in out.get("final_stop", []))),
    ]
    if cr.get("refusal"):
        ref = cr["refusal"]
        rows.append(("creation stopped", f"{ref.get('kind')} {ref.get('status', '')}/"
                                         f"{ref.get('error_code', '')}: {ref.get('message')}"))
    if out.get("error"):
        rows.append(("ERROR", out["error"][:300]))
    print()
    width = max(len(k) for k, _v in rows)
    for k, val in rows:
        print(f"{k:<{width}}  {val}")
    for title, key in (("after the produce", "after_produce"), ("after the restart",
                                                                  "after_restart")):
        if out.get(key):
            print_brokers(title, out[key])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=100_000, help="partitions in all")
    ap.add_argument("--partitions-per-topic", type=int, default=100)
    ap.add_argument("--replication-factor", type=int, default=1)
    ap.add_argument("--create-concurrency", type=int, default=4, help="creations in flight")
    ap.add_argument("--records-per-partition", type=int, default=1)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--connections", type=int, default=3,
                    help="produce connections per broker (verification: 3 x this)")
    ap.add_argument("--verify-sample", type=int, default=0,
                    help="partitions checked after the restart (0: every one it led)")
    ap.add_argument("--restart-broker", type=int, default=None,
                    help="broker id to restart (default: the first that is not the controller)")
    ap.add_argument("--raise-max-map-count", type=int, default=None, metavar="N",
                    help="root: write N to /proc/sys/vm/max_map_count for the run, restored "
                         "at the end")
    ap.add_argument("--override", action="append", default=[],
                    help="broker KEY=VALUE, to every broker (repeatable)")
    ap.add_argument("--session-ms", type=int, default=18000, help="zookeeper.session.timeout.ms")
    ap.add_argument("--lag-ms", type=int, default=30000, help="replica.lag.time.max.ms")
    ap.add_argument("--timeout", type=float, default=10800.0, help="the whole run, s")
    ap.add_argument("--create-timeout", type=float, default=3600.0)
    ap.add_argument("--produce-timeout", type=float, default=1800.0)
    ap.add_argument("--ready-timeout", type=float, default=3600.0,
                    help="all replicas hosted after creation; a restart until readable")
    ap.add_argument("--stop-timeout", type=float, default=900.0, help="per SIGTERM stop")
    ap.add_argument("--request-timeout", type=float, default=300.0, help="per creation")
    ap.add_argument("--tmp-dir", default=None, help="where the temporary directory goes")
    ap.add_argument("--keep", action="store_true", help="keep data directories and logs")
    ap.add_argument("--json", help="write the results here ('-': stdout)")
    args = ap.parse_args()
    if args.partitions < 1 or args.partitions_per_topic < 1 or not 1 <= args.replication_factor <= 3:
        ap.error("--partitions and --partitions-per-topic >= 1, --replication-factor 1..3")
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # "connection refused" while ZK starts
    raise_nofile()
    notes = machine_notes()
    notes["open_files_limit"] = resource.getrlimit(resource.RLIMIT_NOFILE)
    out: dict[str, Any] = {"args": vars(args), "machine": notes}
    mmc = None
    if args.raise_max_map_count:
        mmc = raise_max_map_count(args.raise_max_map_count)
        out["max_map_count"] = mmc
        print(f"vm.max_map_count: {mmc['before']} -> {mmc['now']}"
              f"{' (' + mmc['note'] + ')' if mmc.get('note') else ''}", flush=True)
    t0 = time.perf_counter()
    try:
        out["budget"] = budget_check(args)
        if out["budget"].get("note"):
            print(f"NOTE: {out['budget']['note']}", flush=True)
        try:
            # the phases are bounded by --timeout themselves; this is the backstop
            _r, out["machine"]["generator_loop"] = run_loop(
                asyncio.wait_for(amain(args, out), args.timeout + 60.0))
        except TimeoutError:
            out["error"] = f"the run passed --timeout ({args.timeout:.0f} s)"
        except Exception as exc:  # noqa: BLE001  (reported with what was measured)
            out["error"] = repr(exc)
    finally:
        restore_max_map_count(mmc)
    out["run_s"] = round(time.perf_counter() - t0, 1)
    if out.get("error"):
        print(f"FAILED: {out['error']}", flush=True)
    print_table(out)
    print(f"\nrun took {out['run_s']:.0f} s")
    write_json(args.json, out)
    bad = (out.get("error") or out.get("produce", {}).get("errors")
           or out.get("restart", {}).get("verify", {}).get("not_readable")
           or "restart" not in out)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
