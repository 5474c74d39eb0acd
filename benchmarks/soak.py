"""A bounded soak of one broker: mixed traffic, 2,000 idle connections, 500 parked
long-polls; memory must stay flat and nothing may fail.

    python benchmarks/soak.py                    # 10 minutes
    python benchmarks/soak.py --duration 90      # a quick proof

It starts one standalone broker from this tree (loopback, fresh data directory, the
open-files limit of both processes raised to the hard limit) and runs, all at once,
until --duration seconds have passed:

idle          --idle-connections (2000) keep-alive connections held open and left idle:
              half sent one ``GET /`` first (idle after an answer), half never sent a
              byte. The broker closes an idle connection after ``connections.max.idle.ms``
              (set to --idle-ms, default 120000, so a 10-minute soak sees it happen); a
              connection it closes is reopened at once, so 2,000 stay held. One closed
              before 0.9 x --idle-ms, or one that receives bytes, is an error.
long-polls    --long-polls (500) v2 consumer instances (binary, auto commit off, 50 groups,
              ``consumer.request.timeout.ms`` = --long-poll-ms), each manually assigned a
              partition of ``soak-park`` (10 partitions) and reading it with
              ``GET .../records?timeout=--long-poll-ms`` on its own connection, over and
              over: 500 reads parked at any time. A trickle producer writes one record to
              a random ``soak-park`` partition every --trickle-s seconds, waking ~50 of them.
produce       --producers (2) connections POSTing 100-record requests (100-byte values)
              to ``soak-data`` (4 partitions, ``segment.bytes`` 8 MiB, ``retention.bytes``
              32 MiB per partition so the disk stays bounded and retention runs; the broker's
              ``log.retention.check.interval.ms`` is 30 s), paced at --produce-rate
              records/s in all.
consume       --consumers (2) instances of group ``soak-readers`` subscribed to
              ``soak-data`` (auto commit on), long-polling with ``timeout=1000``.
admin         every --admin-interval seconds: v3 create a 2-partition topic, v3 describe
              it, v2 describe it, produce one record to it, v3 delete it, v3 list the
              consumer groups, v2 list the topics.

Every --sample-s seconds it samples the broker's VmRSS / RssAnon / open descriptors /
threads and the held idle connections and parked long-polls. At the end it stops the
broker with SIGTERM (it must exit 0) and prints the pass criteria:

- RSS flat within --rss-tolerance (10 %): the median VmRSS of the first window (it
  starts --rss-warmup, 60 s, after the ramp-up: every idle connection and long-poll in
  place) against the median of the last window; the windows are 60 s long (on short
  runs the warm-up is at most a third of the time after the ramp-up and a window a
  third of what remains);
- 0 errors: any 5xx, any 4xx (none is expected), any connection error or timeout, an
  idle connection closed early, a clean stop that is not clean; counted and printed by
  kind (``where:kind``).

Exit code 0 when both hold, 1 otherwise. Every loop checks the end time, every request
has a timeout; the data directory is removed at the end (--keep to keep it).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import random
import resource
import shutil
import statistics
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
    proc_status,
    raise_nofile,
    write_json,
)

from app.bench.http1 import BINARY, V2, RawConn, Req  # noqa: E402
from app.bench.workloads import machine_notes, run_loop  # noqa: E402

PARK_TOPIC, PARK_PARTITIONS = "soak-park", 10
DATA_TOPIC, DATA_PARTITIONS = "soak-data", 4
PARK_GROUPS = 50
CONN_ERRORS = (OSError, asyncio.IncompleteReadError, EOFError, ValueError)


class Soak:
    def __init__(self, args: argparse.Namespace, server: Server) -> None:
        self.args = args
        self.server = server
        self.port = server.port
        self.t0 = time.monotonic()
        self.t_end = self.t0 + args.duration
        self.t_ready: float | None = None
        self.errors: dict[str, int] = {}
        self.first_errors: list[str] = []
        self.counts: dict[str, int] = {}
        self.samples: list[dict[str, Any]] = []
        self.idle_held = 0
        self.parked = 0
        self.idle_lifetimes: list[float] = []
        self.conns: set[RawConn] = set()  # everything open, closed at the end
        self.cid = ""
        self.rng = random.Random(args.seed)

    # --- bookkeeping -----------------------------------------------------------------------

    def over(self) -> bool:
        return time.monotonic() >= self.t_end

    def left(self) -> float:
        return max(0.0, self.t_end - time.monotonic())

    def err(self, where: str, kind: str, detail: str = "") -> None:
        key = f"{where}:{kind}"
        self.errors[key] = self.errors.get(key, 0) + 1
        if len(self.first_errors) < 20:
            self.first_errors.append(f"t={time.monotonic() - self.t0:.1f}s {key} {detail[:300]}")

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    async def connect(self) -> RawConn:
        c = await asyncio.wait_for(RawConn("127.0.0.1", self.port).connect(), 10.0)
        self.conns.add(c)
        return c

    async def close(self, c: RawConn | None) -> None:
        if c is not None:
            self.conns.discard(c)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(c.close(), 2.0)

    async def call(self, where: str, conn: RawConn, req: Req, ok: tuple[int, ...],
                   timeout: float = 10.0) -> tuple[int, dict[str, str], bytes] | None:
        """One request; None (and an error counted) on a bad status or a broken connection
        (the caller then reconnects)."""
        try:
            resp = await asyncio.wait_for(conn.send(req), timeout)
        except TimeoutError:
            self.err(where, "timeout", req.path)
            return None
        except CONN_ERRORS as exc:
            self.err(where, f"connection_{type(exc).__name__}", f"{req.path} {exc!r}")
            return None
        status = resp[0]
        if status not in ok:
            kind = "http_5xx" if status >= 500 else f"http_{status}"
            self.err(where, kind, f"{req.method} {req.path} -> {status} {resp[2][:200]!r}")
            return None
        return resp

    # --- set-up -----------------------------------------------------------------------------

    async def setup(self) -> None:
        c = await self.connect()
        try:
            self.cid = await cluster_id(c)
            for name, parts, configs in (
                    (PARK_TOPIC, PARK_PARTITIONS, []),
                    (DATA_TOPIC, DATA_PARTITIONS,
                     [{"name": "segment.bytes", "value": str(8 << 20)},
                      {"name": "retention.bytes", "value": str(32 << 20)}])):
                r = await self.call("setup", c, Req(
                    "POST", f"/v3/clusters/{self.cid}/topics",
                    orjson.dumps({"topic_name": name, "partitions_count": parts,
                                  "replication_factor": 1, "configs": configs}),
                    {"Content-Type": JSON, "Accept": JSON}), (201,))
                if r is None:
                    raise RuntimeError(f"could not create {name}: {self.first_errors}")
        finally:
            await self.close(c)

    async def new_instance(self, c: RawConn, group: str, name: str, cfg: dict[str, Any],
                           where: str) -> str | None:
        r = await self.call(where, c, Req("POST", f"/consumers/{group}",
                                          orjson.dumps({"name": name, **cfg}),
                                          {"Content-Type": V2, "Accept": V2}), (200,))
        if r is None:
            return None
        return f"/consumers/{group}/instances/{name}"

    # --- idle connections ----------------------------------------------------------------

    async def idle_one(self, i: int) -> None:
        while not self.over():
            try:
                c = await self.connect()
            except (TimeoutError, *CONN_ERRORS) as exc:
                self.err("idle", f"connect_{type(exc).__name__}", repr(exc))
                await asyncio.sleep(1.0)
                continue
            opened = time.monotonic()
            if i % 2 == 0:  # idle after one answer (keep-alive), else never a byte sent
                r = await self.call("idle", c, Req("GET", "/", b"", {"Accept": V2}), (200,))
                if r is None:
                    await self.close(c)
                    await asyncio.sleep(1.0)
                    continue
                opened = time.monotonic()
            self.idle_held += 1
            try:
                assert c.reader is not None
                data = await asyncio.wait_for(c.reader.read(1), self.left() + 0.1)
            except TimeoutError:  # the soak is over: still held, fine
                data = None
            except CONN_ERRORS as exc:
                self.err("idle", f"connection_{type(exc).__name__}", repr(exc))
                data = b""
            finally:
                self.idle_held -= 1
            await self.close(c)
            if data is None:
                return
            if data:
                self.err("idle", "unexpected_bytes", repr(data))
                continue
            life = time.monotonic() - opened
            self.idle_lifetimes.append(life)
            if life < 0.9 * self.args.idle_ms / 1000:
                self.err("idle", "closed_early", f"after {life:.1f} s")
            else:
                self.count("idle_closed_by_server_and_reopened")

    async def idle_all(self) -> None:
        n = self.args.idle_connections
        tasks = []
        for start in range(0, n, 200):  # ramp in steps: do not overflow the accept backlog
            for i in range(start, min(n, start + 200)):
                tasks.append(asyncio.ensure_future(self.idle_one(i)))
            await asyncio.sleep(0.2)
            if self.over():
                break
        await asyncio.gather(*tasks)

    # --- parked long-polls ---------------------------------------------------------------

    async def park_one(self, i: int) -> None:
        a = self.args
        group = f"soak-park-g{i % PARK_GROUPS}"
        cfg = {"format": "binary", "auto.offset.reset": "latest", "auto.commit.enable": "false",
               "consumer.request.timeout.ms": a.long_poll_ms}
        c: RawConn | None = None
        base = None
        while not self.over() and base is None:
            try:
                c = await self.connect()
                base = await self.new_instance(c, group, f"p{i}", cfg, "longpoll.create")
                if base is not None:
                    body = orjson.dumps({"partitions": [
                        {"topic": PARK_TOPIC, "partition": i % PARK_PARTITIONS}]})
                    if await self.call("longpoll.assign", c, Req(
                            "POST", f"{base}/assignments", body,
                            {"Content-Type": V2, "Accept": V2}), (204,)) is None:
                        base = None
            except (TimeoutError, *CONN_ERRORS) as exc:
                self.err("longpoll.create", f"connection_{type(exc).__name__}", repr(exc))
            if base is None:
                await self.close(c)
                c = None
                await asyncio.sleep(1.0)
        get = Req("GET", f"{base}/records?timeout={a.long_poll_ms}&max_bytes=100000", b"",
                  {"Accept": BINARY})
        try:
            while not self.over() and c is not None:
                self.parked += 1
                try:
                    # the soak's end interrupts a parked read: that is not an error
                    resp = await asyncio.wait_for(c.send(get), min(self.left() + 0.05,
                                                                   a.long_poll_ms / 1000 + 30))
                except TimeoutError:
                    if not self.over():
                        self.err("longpoll", "timeout", "no answer within the wait + 30 s")
                    break
                except CONN_ERRORS as exc:
                    self.err("longpoll", f"connection_{type(exc).__name__}", repr(exc))
                    break
                finally:
                    self.parked -= 1
                if resp[0] != 200:
                    self.err("longpoll", "http_5xx" if resp[0] >= 500 else f"http_{resp[0]}",
                             resp[2][:200].decode(errors="replace"))
                    await asyncio.sleep(1.0)
                    continue
                n = resp[2].count(b'"offset":')
                self.count("longpoll_answers")
                self.count("longpoll_records", n)
        finally:
            await self.close(c)

    async def park_all(self) -> None:
        tasks = []
        for i in range(self.args.long_polls):  # started 16 at a time, 50 ms apart
            tasks.append(asyncio.ensure_future(self.park_one(i)))
            if i % 16 == 15:
                await asyncio.sleep(0.05)
        await asyncio.gather(*tasks)

    async def trickle(self) -> None:
        c = await self.connect()
        body = orjson.dumps({"records": [{"value": base64.b64encode(b"wake").decode()}]})
        try:
            while self.left() > self.args.trickle_s:
                await asyncio.sleep(self.args.trickle_s)
                p = self.rng.randrange(PARK_PARTITIONS)
                r = await self.call("trickle", c, Req("POST", f"/topics/{PARK_TOPIC}/partitions/{p}",
                                                      body, {"Content-Type": BINARY, "Accept": V2}),
                                    (200,))
                if r is None:
                    await self.close(c)
                    c = await self.connect()
                else:
                    self.count("trickle_records")
        finally:
            await self.close(c)

    # --- produce / consume / admin ------------------------------------------------------------

    async def produce(self, k: int) -> None:
        a = self.args
        per_req = 100
        body = orjson.dumps({"records": [{"value": base64.b64encode(os.urandom(100)).decode()}
                                         for _ in range(per_req)]})
        req = Req("POST", f"/topics/{DATA_TOPIC}", body, {"Content-Type": BINARY, "Accept": V2})
        interval = per_req * a.producers / max(a.produce_rate, 1.0)
        c = await self.connect()
        t_next = time.monotonic() + k * interval / a.producers
        try:
            while not self.over():
                delay = t_next - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(min(delay, self.left()))
                    if self.over():
                        break
                t_next = max(t_next + interval, time.monotonic() - 1.0)  # no catch-up bursts
                r = await self.call("produce", c, req, (200,))
                if r is None:
                    await self.close(c)
                    c = await self.connect()
                    continue
                ok = r[2].count(b'"error_code":null')
                if ok != per_req:
                    self.err("produce", "record_error", r[2][:200].decode(errors="replace"))
                self.count("produced_records", ok)
        finally:
            await self.close(c)

    async def consume(self, k: int) -> None:
        c = await self.connect()
        cfg = {"format": "binary", "auto.offset.reset": "earliest", "auto.commit.enable": "true"}
        base = await self.new_instance(c, "soak-readers", f"r{k}", cfg, "consume.create")
        try:
            if base is None:
                return
            r = await self.call("consume.subscribe", c, Req(
                "POST", f"{base}/subscription", orjson.dumps({"topics": [DATA_TOPIC]}),
                {"Content-Type": V2, "Accept": V2}), (204,))
            if r is None:
                return
            get = Req("GET", f"{base}/records?timeout=1000&max_bytes=1000000", b"",
                      {"Accept": BINARY})
            while not self.over():
                r = await self.call("consume", c, get, (200,), timeout=30.0)
                if r is None:
                    await self.close(c)
                    c = await self.connect()
                    await asyncio.sleep(0.5)
                    continue
                self.count("consumed_records", r[2].count(b'"offset":'))
            with contextlib.suppress(Exception):
                await self.call("consume.delete", c, Req("DELETE", base, b"",
                                                         {"Accept": V2}), (204,))
        finally:
            await self.close(c)

    async def admin(self) -> None:
        a = self.args
        c = await self.connect()
        v3 = f"/v3/clusters/{self.cid}"
        jh = {"Content-Type": JSON, "Accept": JSON}
        one = orjson.dumps({"records": [{"value": base64.b64encode(b"admin").decode()}]})
        n = 0
        try:
            while self.left() > a.admin_interval + 5:
                t_loop = time.monotonic()
                name = f"soak-admin-{n}"
                n += 1
                steps = [
                    ("admin.create", Req("POST", f"{v3}/topics", orjson.dumps(
                        {"topic_name": name, "partitions_count": 2, "replication_factor": 1}),
                        jh), (201,)),
                    ("admin.describe_v3", Req("GET", f"{v3}/topics/{name}", b"", jh), (200,)),
                    ("admin.describe_v2", Req("GET", f"/topics/{name}", b"", {"Accept": V2}),
                     (200,)),
                    ("admin.produce", Req("POST", f"/topics/{name}", one,
                                          {"Content-Type": BINARY, "Accept": V2}), (200,)),
                    ("admin.delete", Req("DELETE", f"{v3}/topics/{name}", b"", jh), (204,)),
                    ("admin.list_groups", Req("GET", f"{v3}/consumer-groups", b"", jh), (200,)),
                    ("admin.list_topics", Req("GET", "/topics", b"", {"Accept": V2}), (200,)),
                ]
                for where, req, ok in steps:
                    r = await self.call(where, c, req, ok, timeout=30.0)
                    if r is None:
                        await self.close(c)
                        c = await self.connect()
                    else:
                        self.count("admin_ops")
                await asyncio.sleep(max(0.0, a.admin_interval - (time.monotonic() - t_loop)))
        finally:
            await self.close(c)

    # --- sampling ---------------------------------------------------------------------------

    async def sampler(self) -> None:
        a = self.args
        last_print = 0.0
        while True:
            now = time.monotonic()
            st = proc_status(self.server.pid)
            mf = mem_fds(self.server.pid)
            s = {"t": round(now - self.t0, 1), "rss_kb": st.get("VmRSS"),
                 "rss_anon_kb": st.get("RssAnon"), "fds": mf["open_fds"],
                 "threads": st.get("Threads"), "idle_held": self.idle_held,
                 "parked": self.parked, "errors": sum(self.errors.values()),
                 "produced": self.counts.get("produced_records", 0),
                 "consumed": self.counts.get("consumed_records", 0)}
            self.samples.append(s)
            if (self.t_ready is None and self.idle_held >= a.idle_connections
                    and self.parked >= a.long_polls):
                self.t_ready = now
                print(f"t={s['t']:.0f}s ramp-up done: {self.idle_held} idle connections held, "
                      f"{self.parked} long-polls parked", flush=True)
            if now - last_print >= a.print_s:
                last_print = now
                print(f"t={s['t']:5.0f}s RSS {(s['rss_kb'] or 0) / 1024:7.1f} MB (anon "
                      f"{(s['rss_anon_kb'] or 0) / 1024:6.1f}) fds {s['fds']} idle {s['idle_held']} "
                      f"parked {s['parked']} produced {s['produced']:,} consumed "
                      f"{s['consumed']:,} admin {self.counts.get('admin_ops', 0)} errors "
                      f"{s['errors']}", flush=True)
            if self.over():
                return
            await asyncio.sleep(min(a.sample_s, self.left()))

    async def guard(self, name: str, coro: Any) -> None:
        """A load task that dies (e.g. the broker stopped answering) is an error of its
        kind; the others go on to the end."""
        try:
            await coro
        except Exception as exc:  # noqa: BLE001
            self.err(name, f"crashed_{type(exc).__name__}", repr(exc))

    async def run(self) -> None:
        await self.setup()
        a = self.args
        tasks = [self.sampler(), self.guard("idle", self.idle_all()),
                 self.guard("longpoll", self.park_all()), self.guard("trickle", self.trickle()),
                 self.guard("admin", self.admin())]
        tasks += [self.guard("produce", self.produce(k)) for k in range(a.producers)]
        tasks += [self.guard("consume", self.consume(k)) for k in range(a.consumers)]
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), a.duration + 120)
        except TimeoutError:
            self.err("soak", "overran", "the tasks did not end within duration + 120 s")
        finally:
            for c in list(self.conns):
                await self.close(c)


def rss_verdict(samples: list[dict[str, Any]], t_ready: float | None, t0: float,
                t_end: float, tolerance: float, warmup: float) -> dict[str, Any]:
    if t_ready is None:
        return {"ok": False, "why": "the ramp-up never completed (idle connections or "
                                    "long-polls not all in place)"}
    end = t_end - t0
    # a warm-up after the ramp-up (caches, buffers, the first segments filling), then the
    # first window; both shrink on short runs
    start = t_ready - t0 + min(warmup, (end - (t_ready - t0)) / 3)
    w = min(60.0, (end - start) / 3)
    first = [s["rss_kb"] for s in samples if start <= s["t"] <= start + w and s["rss_kb"]]
    last = [s["rss_kb"] for s in samples if end - w <= s["t"] <= end and s["rss_kb"]]
    if not first or not last:
        return {"ok": False, "why": "too few samples"}
    f, lst = statistics.median(first), statistics.median(last)
    growth = lst / f - 1
    return {"ok": abs(growth) <= tolerance, "window_s": round(w, 1),
            "first_window": [round(start, 1), round(start + w, 1)],
            "last_window": [round(end - w, 1), round(end, 1)],
            "first_rss_mb": round(f / 1024, 1), "last_rss_mb": round(lst / 1024, 1),
            "growth_pct": round(100 * growth, 2), "tolerance_pct": 100 * tolerance,
            "max_rss_mb": round(max(s["rss_kb"] or 0 for s in samples) / 1024, 1)}


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="franz-soak-", dir=args.tmp_dir))
    overrides = [f"connections.max.idle.ms={args.idle_ms}",
                 f"consumer.request.timeout.max.ms={max(300000, args.long_poll_ms)}",
                 "log.retention.check.interval.ms=30000", *args.override]
    server = Server(tmp / "data", tmp / "franz.log", overrides=overrides, cpu=args.server_cpu)
    result: dict[str, Any] = {}
    try:
        server.start()
        result["start_http_s"] = round(await server.wait_http(args.ready_timeout), 3)
        soak = Soak(args, server)
        print(f"soak: {args.duration:.0f} s, {args.idle_connections} idle connections "
              f"(idle close after {args.idle_ms} ms), {args.long_polls} long-polls of "
              f"{args.long_poll_ms} ms, produce {args.produce_rate:.0f} rec/s, "
              f"{args.consumers} consumers, admin every {args.admin_interval} s", flush=True)
        await soak.run()
        result["rss"] = rss_verdict(soak.samples, soak.t_ready, soak.t0, soak.t_end,
                                    args.rss_tolerance, args.rss_warmup)
        result["server_at_end"] = mem_fds(server.pid) if server.proc and \
            server.proc.poll() is None else None
        result["disk_mb_at_end"] = round(disk_usage(tmp / "data") / 1e6, 1)
        stop = server.stop(args.stop_timeout)
        result["stop"] = stop
        if stop["exit_code"] != 0 or stop.get("killed_after_timeout"):
            soak.err("server", "unclean_stop", str(stop))
        result["ramp_up_s"] = None if soak.t_ready is None else round(soak.t_ready - soak.t0, 1)
        result["errors"] = soak.errors
        result["first_errors"] = soak.first_errors
        result["counts"] = soak.counts
        lt = sorted(soak.idle_lifetimes)
        result["idle_lifetimes_s"] = ({"n": len(lt), "min": round(lt[0], 1),
                                       "max": round(lt[-1], 1)} if lt else {"n": 0})
        result["samples"] = soak.samples
        held = [s["idle_held"] for s in soak.samples
                if soak.t_ready is not None and s["t"] >= soak.t_ready - soak.t0]
        parked = [s["parked"] for s in soak.samples
                  if soak.t_ready is not None and s["t"] >= soak.t_ready - soak.t0]
        result["idle_held_min_after_ramp"] = min(held) if held else None
        result["parked_min_after_ramp"] = min(parked) if parked else None
        result["passed"] = bool(result["rss"].get("ok")) and not soak.errors
        return result
    finally:
        server.kill()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600.0, help="seconds")
    ap.add_argument("--idle-connections", type=int, default=2000)
    ap.add_argument("--idle-ms", type=int, default=120000,
                    help="the broker's connections.max.idle.ms")
    ap.add_argument("--long-polls", type=int, default=500)
    ap.add_argument("--long-poll-ms", type=int, default=30000)
    ap.add_argument("--trickle-s", type=float, default=5.0)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--produce-rate", type=float, default=10000.0, help="records/s in all")
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--admin-interval", type=float, default=1.0)
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--print-s", type=float, default=30.0)
    ap.add_argument("--rss-tolerance", type=float, default=0.10)
    ap.add_argument("--rss-warmup", type=float, default=60.0,
                    help="seconds after the ramp-up before the first RSS window (at most a "
                         "third of the run after the ramp-up)")
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    ap.add_argument("--stop-timeout", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--server-cpu", type=int, default=None, help="pin the broker (taskset)")
    ap.add_argument("--override", action="append", default=[], help="broker KEY=VALUE")
    ap.add_argument("--tmp-dir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", help="write the results (with every sample) here ('-': stdout)")
    args = ap.parse_args()
    limit = raise_nofile()
    need = args.idle_connections + args.long_polls + args.producers + args.consumers + 64
    if limit < need:
        ap.error(f"the open-files limit ({limit}) is below the {need} connections needed")
    notes = machine_notes()
    notes["open_files_limit"] = resource.getrlimit(resource.RLIMIT_NOFILE)
    result, loop = run_loop(amain(args))
    notes["generator_loop"] = loop
    result["machine"] = notes
    result["args"] = vars(args)
    rss = result["rss"]
    print()
    print(f"ramp-up {result['ramp_up_s']} s; idle connections held (min after ramp-up) "
          f"{result['idle_held_min_after_ramp']}, parked long-polls (min) "
          f"{result['parked_min_after_ramp']}; idle closes by the server "
          f"{result['counts'].get('idle_closed_by_server_and_reopened', 0)} "
          f"(lifetimes {result['idle_lifetimes_s']})")
    c = result["counts"]
    print(f"traffic: produced {c.get('produced_records', 0):,}, consumed "
          f"{c.get('consumed_records', 0):,}, long-poll answers {c.get('longpoll_answers', 0):,} "
          f"({c.get('longpoll_records', 0):,} records), admin ops {c.get('admin_ops', 0):,}; "
          f"disk at end {result['disk_mb_at_end']} MB; stop {result['stop']}")
    if "growth_pct" in rss:
        print(f"RSS: first window {rss['first_window']} s median {rss['first_rss_mb']} MB, last "
              f"window {rss['last_window']} s median {rss['last_rss_mb']} MB: "
              f"{rss['growth_pct']:+.2f} % (tolerance {rss['tolerance_pct']:.0f} %) -> "
              f"{'PASS' if rss['ok'] else 'FAIL'}; max {rss['max_rss_mb']} MB")
    else:
        print(f"RSS: FAIL ({rss.get('why')})")
    if result["errors"]:
        print("errors by kind: FAIL")
        for k, v in sorted(result["errors"].items()):
            print(f"  {k}: {v}")
        for e in result["first_errors"]:
            print(f"    {e}")
    else:
        print("errors: 0 -> PASS")
    print(f"soak {'PASSED' if result['passed'] else 'FAILED'}")
    write_json(args.json, result)
    sys.exit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
