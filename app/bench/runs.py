"""The load runs behind ``franz bench``: closed-loop produce and consume, the end-to-end
latency run and the ceiling servers' cases, each against a ``Target`` over keep-alive
HTTP/1.1 connections (``app.bench.http1``), returning a JSON-ready result. The command
line, topic set-up and output are in ``app.commands.bench``; this module is imported
only when a benchmark runs (by it, never by ``franz --help``), so it imports the
generator at its top.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import orjson

from app.bench.http1 import BINARY, V2, IdempotencyKeys, RawConn, Req, free_port
from app.bench.progress import ProgressLine
from app.bench.workloads import (
    BenchError,
    Budget,
    LoadResult,
    Target,
    close_all,
    closed_loop,
    e2e_latency,
    open_conns,
    paced_load,
    produce_body,
    produce_req,
    spawn,
    stop,
    wait_ready,
)


def progress_enabled(args: argparse.Namespace) -> bool:
    """A progress line on stderr: asked for, or stderr is a terminal."""
    return bool(args.progress or sys.stderr.isatty())

def _load_result(res: LoadResult, target: Target | None = None) -> dict[str, Any]:
    s = res.summary()
    keys = ("records", "records_acked", "requests", "requests_acked", "bytes", "errors",
            "seconds", "rec_per_s", "mb_per_s", "req_per_s", "client_cpu_util",
            "client_cpu_us_per_req", "server_cpu_util", "server_cpu_us_per_req")
    out = {k: s[k] for k in keys}
    if target is None or target.pid is None:  # no server CPU without its pid
        out["server_cpu_util"] = out["server_cpu_us_per_req"] = None
    out["latency_ms"] = res.latency_ms()
    return out

async def produce_load(target: Target, path: str, *, records: int, batch: int, size: int,
                       connections: int, warmup: float, duration: float, progress: bool,
                       label: str = "produce", keys: int = 0, headers: int = 0,
                       idempotency_keys: bool = False) -> dict[str, Any]:
    """Closed-loop produce of at most ``records`` records to ``path`` (``keys`` distinct
    keys, 0 = unkeyed; ``headers`` headers per record; ``idempotency_keys``: every
    request with an Idempotency-Key of its own)."""
    idem = IdempotencyKeys() if idempotency_keys else None
    body = produce_body(batch, size, keys=keys, headers=headers)
    # one request per connection when each send patches its key in (IdempotentReq)
    fulls = ([produce_req(path, body, idem) for _ in range(connections)] if idem is not None
             else [produce_req(path, body)] * connections)
    counts = {id(body): batch}  # records per body (header objects have "value" too)
    left = records
    record_errors = 0
    first_error: str | None = None
    checked = False

    def next_req(i: int) -> Any:
        nonlocal left
        if left <= 0:
            return None
        n = min(batch, left)
        left -= n
        if n == batch:
            return fulls[i]
        req = produce_req(path, produce_body(n, size, keys=keys, headers=headers), idem)
        counts[id(req.body)] = n
        return req

    async def on_resp(_i: int, req: Any, resp: Any) -> tuple[int, int]:
        nonlocal checked, record_errors, first_error
        body = resp[2]
        n = counts[id(req.body)]
        ok = body.count(b'"error_code":null')
        if not checked or ok != n:
            offsets = orjson.loads(body).get("offsets")
            if not isinstance(offsets, list) or len(offsets) != n:
                raise BenchError(f"{target.name}: unexpected produce answer {body[:300]!r}")
            bad = [o for o in offsets if o.get("error_code") is not None]
            checked = True
            ok = n - len(bad)
            if bad:
                record_errors += len(bad)
                first_error = first_error or f"error {bad[0]['error_code']}: {bad[0].get('error')}"
        return ok, len(req.body)

    conns = await open_conns(target, connections)
    res = LoadResult()
    try:
        with ProgressLine(label, lambda: (res.sent_records, res.sent_bytes), enabled=progress):
            await closed_loop(target, conns, next_req, on_resp, warmup=warmup,
                              duration=duration, max_requests=records, res=res)
    finally:
        await close_all(conns)
    out = _load_result(res, target)
    out["record_errors"] = record_errors
    out["first_record_error"] = first_error
    return out

def plan_stretches(offsets: dict[int, tuple[int, int]], records: int, connections: int,
                   batch: int, *, from_beginning: bool) -> list[list[tuple[int, int, int]]]:
    """Per connection, the (partition, first offset, end offset) stretches it reads:
    ``records`` at most in all, taken from each partition in proportion to its size, the
    first ones (``from_beginning``) or the last ones; stretches split (at multiples of
    ``batch`` from their start) until there is one per connection where possible."""
    sizes = {p: hi - lo for p, (lo, hi) in offsets.items() if hi > lo}
    total = sum(sizes.values())
    want = min(records, total)
    stretches: list[tuple[int, int, int]] = []
    given = 0
    for i, (p, size) in enumerate(sorted(sizes.items())):
        take = want - given if i == len(sizes) - 1 else min(size, round(want * size / total))
        take = min(take, size)
        given += take
        if take <= 0:
            continue
        lo, hi = offsets[p]
        stretches.append((p, lo, lo + take) if from_beginning else (p, hi - take, hi))
    while 0 < len(stretches) < connections:
        stretches.sort(key=lambda s: s[2] - s[1])
        p, lo, hi = stretches[-1]
        half = (hi - lo) // 2 // batch * batch
        if half < batch:
            break
        stretches[-1:] = [(p, lo, lo + half), (p, lo + half, hi)]
    per_conn: list[list[tuple[int, int, int]]] = [[] for _ in range(connections)]
    for i, s in enumerate(sorted(stretches)):
        per_conn[i % connections].append(s)
    return per_conn

async def consume_load(target: Target, topic: str, plan: list[list[tuple[int, int, int]]], *,
                       batch: int, size: int, warmup: float, duration: float,
                       progress: bool) -> dict[str, Any]:
    plan = [stretches for stretches in plan if stretches]
    t = quote(topic, safe="")
    max_bytes = batch * size
    queues = [list(s) for s in plan]  # remaining stretches per connection
    pos = [q[0][1] for q in queues]
    accept = {"Accept": BINARY}
    checked = False

    def current(i: int) -> tuple[int, int, int] | None:
        q = queues[i]
        while q and pos[i] >= q[0][2]:
            q.pop(0)
            if q:
                pos[i] = q[0][1]
        return q[0] if q else None

    def next_req(i: int) -> Any:
        s = current(i)
        if s is None:
            return None
        n = min(batch, s[2] - pos[i])
        return Req("GET", f"/topics/{t}/partitions/{s[0]}/records?offset={pos[i]}&count={n}"
                          f"&max_bytes={max_bytes}", b"", accept)

    async def on_resp(i: int, _req: Any, resp: Any) -> tuple[int, int]:
        nonlocal checked
        body = resp[2]
        if not checked:
            rows = orjson.loads(body)
            if not isinstance(rows, list):
                raise BenchError(f"{target.name}: unexpected records answer {body[:300]!r}")
            checked = True
        n = body.count(b'"offset":')
        nxt = int(resp[1].get("x-franz-next-offset", pos[i] + n))
        if n == 0 or nxt <= pos[i]:  # nothing more in this stretch (deleted, compacted)
            s = queues[i][0] if queues[i] else None
            nxt = s[2] if s is not None else pos[i]
        pos[i] = nxt
        return n, len(body)

    if not plan:
        return {**_load_result(LoadResult()), "note": "no records to read"}
    conns = await open_conns(target, len(plan))
    res = LoadResult()
    try:
        with ProgressLine("consume", lambda: (res.sent_records, res.sent_bytes),
                          enabled=progress):
            await closed_loop(target, conns, next_req, on_resp, warmup=warmup,
                              duration=duration, max_requests=1 << 62, res=res)
    finally:
        await close_all(conns)
    return _load_result(res, target)

async def _new_instance(conn: Any, group: str, topic: str) -> str:
    """A binary consumer instance assigned partition 0 of ``topic``, at its end."""
    cfg = {"format": "binary", "auto.offset.reset": "latest", "auto.commit.enable": "false"}
    status, _h, body = await conn.send(Req("POST", f"/consumers/{quote(group, safe='')}",
                                           orjson.dumps(cfg),
                                           {"Content-Type": V2, "Accept": V2}))
    if status != 200:
        raise BenchError(f"create consumer: HTTP {status} {body[:300]!r}")
    base = f"/consumers/{quote(group, safe='')}/instances/{orjson.loads(body)['instance_id']}"
    parts = orjson.dumps({"partitions": [{"topic": topic, "partition": 0}]})
    for path in ("/assignments", "/positions/end"):
        status, _h, body = await conn.send(Req("POST", base + path, parts, {"Content-Type": V2}))
        if status >= 300:
            raise BenchError(f"consumer {path[1:]}: HTTP {status} {body[:300]!r}")
    return base

async def e2e_run(target: Target, topic: str, *, samples: int, gap_s: float, duration: float,
                  load_fraction: float, load_rate: float | None, calibrate: float, batch: int,
                  size: int, connections: int, progress: bool, group: str) -> dict[str, Any]:
    t = quote(topic, safe="")
    load_path = f"/topics/{quote(topic + '-load', safe='')}"
    calibration: dict[str, Any] | None = None
    if load_fraction > 0 and load_rate is None:
        calibration = await produce_load(
            target, load_path, records=1 << 40, batch=batch, size=size,
            connections=connections, warmup=0.5, duration=calibrate, progress=progress,
            label="calibrate")
        load_rate = calibration["rec_per_s"]
    prod = await target.conn().connect()
    cons = await target.conn().connect()
    stop_flag = False
    bg_task = None
    base = None
    count = 0

    def on_sample(n: int) -> None:
        nonlocal count
        count = n

    try:
        base = await _new_instance(cons, group, topic)
        get = Req("GET", base + "/records?timeout=1000", b"", {"Accept": BINARY})
        if load_fraction > 0 and load_rate:
            req = produce_req(load_path, produce_body(batch, size))
            bg_task = asyncio.ensure_future(paced_load(
                target, req, batch, load_rate * load_fraction, lambda: stop_flag,
                max_seconds=duration + 30.0))
            await asyncio.sleep(1.0)  # let the load settle
        with ProgressLine("e2e", lambda: (count, 0), enabled=progress, unit="samples"):
            out = await e2e_latency(prod, cons, f"/topics/{t}/partitions/0", get,
                                    samples=samples, gap_s=gap_s, max_seconds=duration,
                                    on_sample=on_sample)
    finally:
        stop_flag = True
        background = await bg_task if bg_task is not None else None
        if base is not None:
            with contextlib.suppress(Exception):
                await prod.send(Req("DELETE", base, b"", {"Content-Type": V2}))
        await prod.close()
        await cons.close()
    out["latency_ms"] = {"samples": out["samples"], "p50": out["p50_ms"], "p90": out["p90_ms"],
                         "p99": out["p99_ms"], "p999": out["p999_ms"], "max": out["max_ms"],
                         "mean": out["mean_ms"]}
    out["background"] = background
    out["load_rate_max"] = load_rate if load_fraction > 0 else None
    out["calibration"] = calibration
    return out

async def ceiling_run(args: argparse.Namespace) -> dict[str, Any]:
    cases: list[str] = args.case_list
    tmp = Path(tempfile.mkdtemp(prefix="franz-ceiling-"))
    procs = []
    try:
        def start(name: str, extra: list[str]) -> Any:
            port = free_port()
            log = tmp / f"{name}.log"
            proc = spawn([sys.executable, "-m", "app.bench.ceiling", "--port", str(port),
                          "--records", str(args.batch), "--size", str(args.record_size),
                          *extra], args.server_cpu, log)
            procs.append(proc)
            return Target(name, "127.0.0.1", port, proc.pid), proc, log

        def given(url: str, name: str) -> Target:
            parts = urlsplit(url if "://" in url else "http://" + url)
            return Target(name, parts.hostname or "127.0.0.1", parts.port or 80, args.server_pid)

        fastapi_t = plain_t = None
        if set(cases) - {"tiny_plain"}:
            if args.server:
                fastapi_t = given(args.server, "ceiling")
            else:
                fastapi_t, proc, log = start("ceiling", [])
                await wait_ready(fastapi_t, "/ceiling/tiny", proc, log)
        if "tiny_plain" in cases:
            if args.plain_server:
                plain_t = given(args.plain_server, "ceiling-plain")
            else:
                plain_t, proc, log = start("ceiling-plain", ["--plain"])
                await wait_ready(plain_t, "/", proc, log)

        progress = progress_enabled(args)
        out: dict[str, Any] = {}
        echo = None
        if "echo" in cases:
            echo = produce_body(args.batch, args.record_size)

        async def load(name: str, target: Target, req: Req, records: int) -> dict[str, Any]:
            per_req = max(records, 1)
            budget = Budget(-(-args.records // per_req) if records else args.records)
            conns = await open_conns(target, args.connections)
            res = LoadResult()

            async def on_resp(_i: int, _req: Req, resp: Any) -> tuple[int, int]:
                n = records
                if name == "get":
                    n = resp[2].count(b'"offset":')
                return n, len(req.body) if req.body else len(resp[2])

            try:
                with ProgressLine(f"ceiling {name}", lambda: (res.sent_records, res.sent_bytes),
                                  enabled=progress):
                    await closed_loop(target, conns, lambda _i: req, on_resp,
                                      warmup=args.warmup, duration=args.duration,
                                      max_requests=1 << 62, budget=budget, res=res)
            finally:
                await close_all(conns)
            return _load_result(res, target)

        for case in cases:
            if case == "echo":
                assert fastapi_t is not None and echo is not None
                out["echo"] = await load("echo", fastapi_t, Req(
                    "POST", "/topics/bench", echo, {"Content-Type": BINARY, "Accept": V2}),
                    args.batch)
            elif case == "get":
                assert fastapi_t is not None
                out["get"] = await load("get", fastapi_t, Req(
                    "GET", "/topics/bench/partitions/0/records", b"", {"Accept": BINARY}),
                    args.batch)
            elif case == "tiny":
                assert fastapi_t is not None
                out["tiny"] = await load("tiny", fastapi_t,
                                         Req("GET", "/ceiling/tiny", b"", {"Accept": V2}), 0)
            elif case == "tiny_plain":
                assert plain_t is not None
                out["tiny_plain"] = await load("tiny_plain", plain_t,
                                               Req("GET", "/", b"", {"Accept": V2}), 0)
            elif case == "latency":
                assert fastapi_t is not None
                prod = await RawConn(fastapi_t.host, fastapi_t.port).connect()
                cons = await RawConn(fastapi_t.host, fastapi_t.port).connect()
                try:
                    lat = await e2e_latency(
                        prod, cons, "/ceiling/poll",
                        Req("GET", "/ceiling/poll?timeout=1000", b"", {"Accept": BINARY}),
                        samples=min(args.samples, args.records), gap_s=args.gap_ms / 1000,
                        max_seconds=args.duration)
                finally:
                    await prod.close()
                    await cons.close()
                lat["latency_ms"] = {"samples": lat["samples"], "p50": lat["p50_ms"],
                                     "p90": lat["p90_ms"], "p99": lat["p99_ms"],
                                     "p999": lat["p999_ms"], "max": lat["max_ms"],
                                     "mean": lat["mean_ms"]}
                out["latency"] = lat
        return out
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
