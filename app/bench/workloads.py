"""Load shapes of the generator and the processes it measures.

- ``closed_loop``: N connections, each sending its next request as soon as the previous
  answer came; counts only requests sent and answered inside the measured window
  (after ``warmup``, before ``warmup + duration``), and everything acknowledged in
  ``sent_*``. Bounded by time, by a per-connection request count and optionally by a
  shared ``Budget`` of requests.
- ``paced_load``: open-loop sends at a fixed rate (the background of a latency case).
- ``e2e_latency``: one producer connection POSTs one record, a long-polling consumer
  connection receives it; latency = receive time - send time on one clock.
- ``spawn`` / ``wait_ready`` / ``stop``: server processes, pinned with ``taskset``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import signal
import ssl as ssl_module
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

try:
    import uvloop
except ImportError:  # not installed on Windows (pyproject): run_loop falls back to asyncio
    uvloop = None  # type: ignore[assignment]

from app.bench.http1 import BINARY, V2, IdempotencyKeys, IdempotentReq, RawConn, Req, Resp
from app.bench.stats import latency_summary, pct

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MAX_ERRORS = 20


class BenchError(RuntimeError):
    """The server answered something the benchmark cannot go on with."""


# --- payloads ------------------------------------------------------------------------------


def produce_body(n: int, size: int = 100, *, keys: int = 0, headers: int = 0) -> bytes:
    """A v2 binary produce body of ``n`` records with random ``size``-byte values; with
    ``keys`` > 0 record i has the key ``key-<i mod keys>`` (``keys`` distinct keys, so
    Kafka's partitioner spreads them), with ``headers`` > 0 each record carries that many
    headers ``h0..`` of 8 random bytes."""

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    rows: list[dict[str, Any]] = []
    for i in range(n):
        row: dict[str, Any] = {}
        if keys > 0:
            row["key"] = b64(f"key-{i % keys}".encode())
        row["value"] = b64(os.urandom(size))
        if headers > 0:
            row["headers"] = [{"key": f"h{j}", "value": b64(os.urandom(8))}
                              for j in range(headers)]
        rows.append(row)
    return orjson.dumps({"records": rows})


def produce_req(path: str, body: bytes, idempotency: IdempotencyKeys | None = None) -> Req:
    """A produce POST; with ``idempotency``, each send carries its next Idempotency-Key
    (an ``IdempotentReq``: one per connection)."""
    headers = {"Content-Type": BINARY, "Accept": V2}
    if idempotency is None:
        return Req("POST", path, body, headers)
    return IdempotentReq("POST", path, body, headers, keys=idempotency)


# --- CPU accounting ------------------------------------------------------------------------


def proc_cpu(pid: int | None) -> float:
    """User+system CPU seconds of a process (all threads); 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def machine_cpu_ticks() -> tuple[int, int] | None:
    """(steal, total) CPU ticks of the whole machine since boot (/proc/stat); None when
    unknown. Steal is time the hypervisor gave this VM's CPUs to someone else."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_pct(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Percent of the machine's CPU time stolen between two ``machine_cpu_ticks``."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round(100 * (after[0] - before[0]) / (after[1] - before[1]), 1)


@dataclass
class Target:
    """A server to load: where, its pid (for its CPU time), and how to connect (TLS
    context for https, the ``Authorization`` header value for a secured broker)."""

    name: str
    host: str
    port: int
    pid: int | None = None
    ssl: ssl_module.SSLContext | None = None
    authorization: str | None = field(default=None, repr=False)

    def conn(self, cls: Any = RawConn) -> Any:
        """A connection to this server, not yet connected."""
        if self.ssl is None and self.authorization is None:
            return cls(self.host, self.port)
        return cls(self.host, self.port, ssl=self.ssl, authorization=self.authorization)


# --- closed-loop throughput ----------------------------------------------------------------


@dataclass
class LoadResult:
    requests: int = 0
    records: int = 0
    bytes: int = 0
    errors: int = 0
    seconds: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)
    # everything answered with success, warm-up and stragglers included
    sent_requests: int = 0
    sent_records: int = 0
    sent_bytes: int = 0

    def summary(self) -> dict[str, Any]:
        s = self.seconds or 1e-9
        lat = sorted(self.latencies)
        return {
            "requests": self.requests,
            "records": self.records,
            "bytes": self.bytes,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "req_per_s": self.requests / s,
            "rec_per_s": self.records / s,
            "mb_per_s": self.bytes / s / 1e6,
            "server_cpu_util": self.server_cpu / s,
            "client_cpu_util": self.client_cpu / s,
            "server_cpu_us_per_req": 1e6 * self.server_cpu / self.requests if self.requests else None,
            "client_cpu_us_per_req": 1e6 * self.client_cpu / self.requests if self.requests else None,
            "req_latency_ms_p50": 1e3 * pct(lat, 50) if lat else None,
            "req_latency_ms_p90": 1e3 * pct(lat, 90) if lat else None,
            "req_latency_ms_p99": 1e3 * pct(lat, 99) if lat else None,
            "req_latency_ms_p999": 1e3 * pct(lat, 99.9) if lat else None,
            "req_latency_ms_max": 1e3 * lat[-1] if lat else None,
            "records_acked": self.sent_records,
            "requests_acked": self.sent_requests,
        }

    def latency_ms(self) -> dict[str, Any]:
        return latency_summary(self.latencies)


class Budget:
    """A request count shared by all connections of one run."""

    def __init__(self, requests: int) -> None:
        self.left = requests

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


# A "job" tells a connection what to send next (None: this connection is done) and how
# many records/bytes an answer holds.
NextReq = Callable[[int], Req | None]
OnResp = Callable[[int, Req, Resp], Awaitable[tuple[int, int]]]


async def closed_loop(
    target: Target, conns: list[Any], next_req: NextReq, on_resp: OnResp, *,
    warmup: float, duration: float, max_requests: int, budget: Budget | None = None,
    res: LoadResult | None = None,
) -> LoadResult:
    res = res if res is not None else LoadResult()
    loop_t = time.perf_counter
    t_start = loop_t() + warmup
    t_end = t_start + duration
    marks: dict[str, float] = {}

    async def clock() -> None:
        await asyncio.sleep(max(0.0, t_start - loop_t()))
        marks["s0"], marks["c0"], marks["t0"] = proc_cpu(target.pid), time.process_time(), loop_t()
        await asyncio.sleep(max(0.0, t_end - loop_t()))
        marks["s1"], marks["c1"], marks["t1"] = proc_cpu(target.pid), time.process_time(), loop_t()

    async def worker(i: int, conn: Any) -> None:
        sent = 0
        while sent < max_requests:
            t0 = loop_t()
            if t0 >= t_end:
                return
            req = next_req(i)
            if req is None or (budget is not None and not budget.take()):
                return
            resp = await conn.send(req)
            t1 = loop_t()
            sent += 1
            if resp[0] >= 300:
                res.errors += 1
                if res.errors > MAX_ERRORS:
                    raise BenchError(f"{target.name}: too many errors, last HTTP {resp[0]} "
                                     f"{resp[2][:300]!r}")
                continue
            records, nbytes = await on_resp(i, req, resp)
            res.sent_requests += 1
            res.sent_records += records
            res.sent_bytes += nbytes
            if t0 >= t_start and t1 <= t_end:
                res.requests += 1
                res.records += records
                res.bytes += nbytes
                res.latencies.append(t1 - t0)

    clock_task = asyncio.ensure_future(clock())
    try:
        await asyncio.gather(*(worker(i, c) for i, c in enumerate(conns)))
    except BaseException:
        clock_task.cancel()
        raise
    if "t1" not in marks:  # stopped early by a request bound
        marks["s1"], marks["c1"], marks["t1"] = proc_cpu(target.pid), time.process_time(), loop_t()
        clock_task.cancel()
    else:
        await clock_task
    if "t0" not in marks:
        raise BenchError("the run ended before the warm-up did: lower the warm-up or raise "
                         "the request bound")
    res.seconds = marks["t1"] - marks["t0"]
    res.server_cpu = marks["s1"] - marks["s0"]
    res.client_cpu = marks["c1"] - marks["c0"]
    return res


async def open_conns(target: Target, n: int, cls: Any = RawConn) -> list[Any]:
    conns: list[Any] = []
    try:
        for _ in range(n):
            conns.append(await target.conn(cls).connect())
    except BaseException:
        await close_all(conns)
        raise
    return conns


async def close_all(conns: list[Any]) -> None:
    for c in conns:
        await c.close()


# --- open-loop (paced) load ------------------------------------------------------------------


async def paced_load(target: Target, req: Req, records_per_req: int, rate_rec_s: float,
                     stop: Callable[[], bool], max_seconds: float,
                     n_conns: int = 4) -> dict[str, Any]:
    """Send ``req`` at ``rate_rec_s`` records/s over ``n_conns`` connections until
    ``stop()`` or ``max_seconds``; sends that fall behind schedule go at once (counted as
    ``late_sends``)."""
    conns = await open_conns(target, n_conns)
    interval = records_per_req * n_conns / max(rate_rec_s, 1.0)  # per connection
    t_begin = time.perf_counter()
    count = late = 0

    async def worker(i: int, conn: RawConn) -> None:
        nonlocal count, late
        t_next = t_begin + i * interval / n_conns
        while not stop() and time.perf_counter() - t_begin < max_seconds:
            delay = t_next - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                late += 1
            status, _h, body = await conn.send(req)
            if status != 200:
                raise BenchError(f"paced produce: HTTP {status} {body[:300]!r}")
            count += 1
            t_next += interval

    try:
        await asyncio.gather(*(worker(i, c) for i, c in enumerate(conns)))
    finally:
        await close_all(conns)
    secs = time.perf_counter() - t_begin
    return {"target_rec_per_s": rate_rec_s, "rec_per_s": count * records_per_req / secs,
            "late_sends": late, "seconds": secs}


# --- end-to-end latency -----------------------------------------------------------------------


async def e2e_latency(prod: RawConn, cons: RawConn, post_path: str, get: Req, *, samples: int,
                      gap_s: float, max_seconds: float = 600.0,
                      sample_timeout_s: float = 2.0,
                      on_sample: Callable[[int], None] | None = None) -> dict[str, Any]:
    """``samples`` times: POST one record (its value = the sample number) to
    ``post_path`` on ``prod``; a consumer loop long-polling ``get`` on ``cons`` notes
    when it arrives; wait for it (at most ``sample_timeout_s``, else it is ``lost``),
    sleep ``gap_s``. Stops early after ``max_seconds``. Latencies in ms."""
    sent: dict[int, float] = {}
    got: dict[int, float] = {}
    arrived: dict[int, asyncio.Event] = {}
    done = False

    async def consumer() -> None:
        while not done:
            status, _h, body = await cons.send(get)
            now = time.perf_counter()
            if status != 200:
                raise BenchError(f"long poll: HTTP {status} {body[:300]!r}")
            for row in orjson.loads(body):
                seq = int(base64.b64decode(row["value"]))
                got.setdefault(seq, now)
                ev = arrived.get(seq)
                if ev is not None:
                    ev.set()

    cons_task = asyncio.ensure_future(consumer())
    await asyncio.sleep(0.2)  # let the first long poll park
    lost = 0
    t_begin = time.perf_counter()
    try:
        for seq in range(samples):
            if cons_task.done():
                cons_task.result()  # raises what stopped the consumer
                raise BenchError("the consumer loop ended")
            if time.perf_counter() - t_begin >= max_seconds:
                break
            body = orjson.dumps({"records": [{"value": base64.b64encode(str(seq).encode()).decode()}]})
            req = produce_req(post_path, body)
            ev = arrived[seq] = asyncio.Event()
            sent[seq] = time.perf_counter()
            status, _h, rbody = await prod.send(req)
            if status != 200:
                raise BenchError(f"latency produce: HTTP {status} {rbody[:300]!r}")
            try:
                await asyncio.wait_for(ev.wait(), sample_timeout_s)
            except TimeoutError:
                lost += 1
            if on_sample is not None:
                on_sample(seq + 1)
            await asyncio.sleep(gap_s)
    finally:
        done = True
        # one more record wakes the last long poll so the consumer loop ends promptly
        with contextlib.suppress(Exception):
            await prod.send(produce_req(post_path, orjson.dumps(
                {"records": [{"value": base64.b64encode(b"-1").decode()}]})))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(cons_task, 3.0)
        if not cons_task.done():
            cons_task.cancel()
    lat = [got[s] - sent[s] for s in sent if s in got]
    summary = latency_summary(lat)
    return {
        "samples": summary["samples"],
        "lost": lost,
        "p50_ms": summary["p50"],
        "p90_ms": summary["p90"],
        "p99_ms": summary["p99"],
        "p999_ms": summary["p999"],
        "max_ms": summary["max"],
        "mean_ms": summary["mean"],
    }


# --- processes ----------------------------------------------------------------------------------


def spawn(cmd: list[str], cpu: int | None, log: Path, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own session, output to ``log``, pinned to ``cpu`` with
    taskset when there is one."""
    if cpu is not None and cpu >= 0 and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    f = open(log, "wb")  # noqa: SIM115  (closed with the process)
    return subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)


async def wait_ready(t: Target, path: str, proc: subprocess.Popen[bytes] | None, log: Path,
                     timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"{t.name} exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            c = await RawConn(t.host, t.port).connect()
            try:
                status, _h, _b = await c.send(Req("GET", path, b"", {"Accept": V2}))
                if status < 500:
                    return
            finally:
                await c.close()
        except (OSError, asyncio.IncompleteReadError):
            pass
        await asyncio.sleep(0.2)
    raise BenchError(f"{t.name} not ready after {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def pin_self(cpu: int | None) -> bool:
    """Pin this process to ``cpu``; False when not possible."""
    if cpu is None or cpu < 0 or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, ValueError):
        return False
    return True


def machine_notes() -> dict[str, Any]:
    notes: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    with contextlib.suppress(OSError):
        notes["loadavg_at_start"] = os.getloadavg()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                notes["cpu"] = line.split(":", 1)[1].strip()
                break
    return notes


def run_loop(coro: Awaitable[Any]) -> tuple[Any, str]:
    """Run ``coro`` on uvloop when installed, else asyncio; (result, loop name)."""
    if uvloop is None:
        return asyncio.run(coro), "asyncio"  # type: ignore[arg-type]
    return uvloop.run(coro), "uvloop"  # type: ignore[arg-type]
