"""Avro beside binary through the REST Proxy, measured in one run.

    python benchmarks/schema_bench.py [--rounds 3] [--duration 5] [--connections 8] [--json out.json]

It starts, on loopback only, one franz broker (``python -m app.cli serve``) pinned with
``taskset`` to ``--server-cpu`` (default 0) and pins itself to ``--client-cpu`` (default
1), as ``http_bench.py`` does (``--franz HOST:PORT [--franz-pid PID]`` uses a running
one instead). It registers an Avro record schema (``ORDER``: a string, two longs, a
double, a boolean, a nullable string union and an enum), then per round runs each pair
of cases back to back, binary first, so both see the same machine noise:

produce_binary    POST /topics/schema-bench-binary/partitions/0, 1000 records per request,
                  Content-Type application/vnd.kafka.binary.v2+json: the records
                  pre-encoded in Confluent's wire format (magic 0, schema id, Avro
                  binary), base64
produce_avro      POST /topics/schema-bench-avro/partitions/0, the same 1000 records as
                  Avro JSON, Content-Type application/vnd.kafka.avro.v2+json with
                  value_schema_id (the broker validates and encodes them)
range_binary      GET /topics/schema-bench-read/partitions/0/records?offset=&count=1000,
                  Accept binary: the wire-format bytes, base64; each connection walks its
                  own stretch of a preloaded topic (--preload records, batch-aligned)
range_avro        the same reads with Accept application/vnd.kafka.avro.v2+json: decoded
instance_binary   one consumer instance per connection, format binary (create, assign,
                  seek, auto commit off), GET .../records?max_bytes= the bytes of 1000
                  records (= 1000 records per answer)
instance_avro     the same with format avro and the avro Accept

The summary is the median of the rounds (records/s, requests/s, MB/s of request or
response bodies, server CPU utilisation and CPU ms per 1000 records) and, per pair, the
median of the per-round avro/binary ratios of records/s and of server CPU per record.
On a shared machine the CPU ratio is the steadier of the two.

Every load loop is bounded by time (``--warmup`` + ``--duration``) and by a request count
per connection (``--max-requests``); setup calls have timeouts.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: import this tree's app
    sys.path.insert(0, str(ROOT))

from app.bench.http1 import BINARY, V2, RawConn, Req, Resp, free_port, parse_addr  # noqa: E402
from app.bench.stats import med  # noqa: E402
from app.bench.workloads import (  # noqa: E402
    BenchError,
    Target,
    closed_loop,
    machine_notes,
    pin_self,
    run_loop,
    spawn,
    stop,
    wait_ready,
)

AVRO = "application/vnd.kafka.avro.v2+json"
SR = "application/vnd.schemaregistry.v1+json"
BATCH = 1000
SETUP_TIMEOUT_S = 30.0
PRODUCE_BINARY, PRODUCE_AVRO = "schema-bench-binary", "schema-bench-avro"
READ_TOPIC = "schema-bench-read"
STATUSES = ["NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]
ORDER = {
    "type": "record", "name": "Order", "namespace": "bench.shop", "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer_id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": STATUSES}},
        {"name": "created_at", "type": "long"},
    ]}
PAIRS = {"produce": ("produce_binary", "produce_avro"),
         "range": ("range_binary", "range_avro"),
         "instance": ("instance_binary", "instance_avro")}


# --- records ------------------------------------------------------------------------------


def make_records(n: int) -> list[dict[str, Any]]:
    """``n`` orders as Python values (fastavro's input), deterministic."""
    base_ms = 1_790_000_000_000
    return [{"order_id": f"ord-{i:08d}", "customer_id": 10_000 + (i * 7919) % 90_000,
             "amount": round(5 + (i * 37 % 10_000) / 100, 2), "paid": i % 3 != 0,
             "coupon": None if i % 4 else f"SAVE{i % 50:02d}",
             "status": STATUSES[i % len(STATUSES)], "created_at": base_ms + i * 1013}
            for i in range(n)]


def avro_json(record: dict[str, Any]) -> dict[str, Any]:
    """Avro's JSON encoding of a record (what the avro embedded format takes and answers):
    a union value other than null is ``{"<branch>": value}``."""
    out = dict(record)
    if out["coupon"] is not None:
        out["coupon"] = {"string": out["coupon"]}
    return out


def wire(schema_id: int, parsed: Any, record: dict[str, Any]) -> bytes:
    """Confluent's wire format: magic byte 0, the 4-byte schema id, the Avro binary."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, record)
    return b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()


class Payloads:
    """The request bodies, built once: the same records in both formats."""

    def __init__(self, schema_id: int) -> None:
        parsed = fastavro.parse_schema(ORDER)
        self.schema_id = schema_id
        self.records = make_records(BATCH)
        self.json_values = [avro_json(r) for r in self.records]
        self.wire_values = [wire(schema_id, parsed, r) for r in self.records]
        self.batch_value_bytes = sum(len(v) for v in self.wire_values)
        self.binary_body = orjson.dumps({"records": [
            {"value": base64.b64encode(v).decode("ascii")} for v in self.wire_values]})
        self.avro_body = orjson.dumps({"value_schema_id": schema_id, "records": [
            {"value": v} for v in self.json_values]})


# --- setup --------------------------------------------------------------------------------


async def send(target: Target, req: Req) -> Resp:
    conn = await RawConn(target.host, target.port).connect()
    try:
        return await asyncio.wait_for(conn.send(req), SETUP_TIMEOUT_S)
    finally:
        await conn.close()


def json_req(method: str, path: str, body: Any, ctype: str, accept: str = V2) -> Req:
    return Req(method, path, orjson.dumps(body), {"Content-Type": ctype, "Accept": accept})


async def register(target: Target, subject: str) -> int:
    status, _h, body = await send(target, json_req(
        "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(ORDER)}, SR, SR))
    if status != 200:
        raise BenchError(f"register {subject}: {status} {body[:300]!r}")
    return int(orjson.loads(body)["id"])


async def setup(target: Target, preload: int) -> tuple[Payloads, int]:
    """The schema registered under each topic's value subject (one id), the read topic
    preloaded with ``preload`` records (rounded down to whole batches, at least one)."""
    ids = {await register(target, f"{t}-value") for t in (PRODUCE_AVRO, PRODUCE_BINARY, READ_TOPIC)}
    if len(ids) != 1:
        raise BenchError(f"one schema, several ids: {ids}")
    payloads = Payloads(ids.pop())
    batches = max(1, preload // BATCH)
    conn = await RawConn(target.host, target.port).connect()
    try:
        req = Req("POST", f"/topics/{READ_TOPIC}/partitions/0", payloads.binary_body,
                  {"Content-Type": BINARY, "Accept": V2})
        for _ in range(batches):
            status, _h, body = await asyncio.wait_for(conn.send(req), SETUP_TIMEOUT_S)
            if status != 200:
                raise BenchError(f"preload: {status} {body[:300]!r}")
    finally:
        await conn.close()
    return payloads, batches * BATCH


# --- cases --------------------------------------------------------------------------------


class Cases:
    def __init__(self, args: argparse.Namespace, target: Target, payloads: Payloads,
                 preloaded: int) -> None:
        self.args, self.target, self.p, self.preloaded = args, target, payloads, preloaded
        self.run_id = f"{os.getpid()}-{int(time.time())}"
        self.groups = 0

    async def _conns(self) -> list[RawConn]:
        return [await RawConn(self.target.host, self.target.port).connect()
                for _ in range(self.args.connections)]

    async def _run(self, conns: list[RawConn], next_req: Callable[[int], Req],
                   on_resp: Any) -> dict[str, Any]:
        try:
            res = await closed_loop(self.target, conns, next_req, on_resp,
                                    warmup=self.args.warmup, duration=self.args.duration,
                                    max_requests=self.args.max_requests)
        finally:
            for c in conns:
                await c.close()
        return res.summary()

    def _starts(self) -> list[int]:
        """Batch-aligned start offsets, one stretch of the read topic per connection."""
        n = self.args.connections
        stride = max(BATCH, (self.preloaded // n) // BATCH * BATCH)
        return [(i * stride) % self.preloaded for i in range(n)]

    def _check_rows(self, name: str, rows: Any, fmt: str) -> None:
        """The first answer of a read case: 1000 records, the first one the batch's first."""
        if not isinstance(rows, list) or len(rows) != BATCH:
            got = len(rows) if isinstance(rows, list) else rows
            raise BenchError(f"{name}: expected {BATCH} records per answer, got {got!r:.300}")
        value = rows[0]["value"]
        want: Any = self.p.json_values[0] if fmt == "avro" else \
            base64.b64encode(self.p.wire_values[0]).decode("ascii")
        if value != want:
            raise BenchError(f"{name}: first value {value!r:.300} is not {want!r:.300}")

    async def produce(self, fmt: str) -> dict[str, Any]:
        if fmt == "avro":
            topic, body, ctype = PRODUCE_AVRO, self.p.avro_body, AVRO
        else:
            topic, body, ctype = PRODUCE_BINARY, self.p.binary_body, BINARY
        req = Req("POST", f"/topics/{topic}/partitions/0", body,
                  {"Content-Type": ctype, "Accept": V2})
        checked = False

        async def on_resp(_i: int, _req: Req, resp: Resp) -> tuple[int, int]:
            nonlocal checked
            if not checked:
                answer = orjson.loads(resp[2])
                offsets = answer["offsets"]
                bad = [o for o in offsets if o.get("error_code") is not None]
                if len(offsets) != BATCH or bad or \
                        (fmt == "avro" and answer.get("value_schema_id") != self.p.schema_id):
                    raise BenchError(f"produce_{fmt}: bad answer {resp[2][:300]!r}")
                checked = True
            return BATCH, len(body)

        return await self._run(await self._conns(), lambda _i: req, on_resp)

    async def range_read(self, fmt: str) -> dict[str, Any]:
        pos = self._starts()
        accept = {"Accept": AVRO if fmt == "avro" else BINARY}
        # a cap well above 1000 records in either rendering: count=1000 cuts the answer
        max_bytes = 20 * self.p.batch_value_bytes
        checked = False

        def next_req(i: int) -> Req:
            return Req("GET", f"/topics/{READ_TOPIC}/partitions/0/records?offset={pos[i]}"
                              f"&count={BATCH}&max_bytes={max_bytes}", b"", accept)

        async def on_resp(i: int, _req: Req, resp: Resp) -> tuple[int, int]:
            nonlocal checked
            body = resp[2]
            if not checked:
                self._check_rows(f"range_{fmt}", orjson.loads(body), fmt)
                checked = True
            n = body.count(b'"offset":')
            nxt = int(resp[1].get("x-franz-next-offset", pos[i] + n))
            pos[i] = nxt if nxt + BATCH <= self.preloaded else 0
            return n, len(body)

        return await self._run(await self._conns(), next_req, on_resp)

    async def _instance(self, conn: RawConn, fmt: str, start: int) -> str:
        self.groups += 1
        group = f"schema-bench-{self.run_id}-{self.groups}"
        status, _h, body = await conn.send(json_req(
            "POST", f"/consumers/{group}",
            {"format": fmt, "auto.offset.reset": "earliest", "auto.commit.enable": "false"}, V2))
        if status != 200:
            raise BenchError(f"create consumer: {status} {body[:300]!r}")
        base = f"/consumers/{group}/instances/{orjson.loads(body)['instance_id']}"
        status, _h, body = await conn.send(json_req(
            "POST", base + "/assignments",
            {"partitions": [{"topic": READ_TOPIC, "partition": 0}]}, V2))
        if status >= 300:
            raise BenchError(f"assign: {status} {body[:300]!r}")
        status, _h, body = await conn.send(self._seek(base, start))
        if status >= 300:
            raise BenchError(f"seek: {status} {body[:300]!r}")
        return base

    @staticmethod
    def _seek(base: str, offset: int) -> Req:
        return json_req("POST", base + "/positions",
                        {"offsets": [{"topic": READ_TOPIC, "partition": 0, "offset": offset}]}, V2)

    async def instance_read(self, fmt: str) -> dict[str, Any]:
        starts = self._starts()
        pos = list(starts)
        conns = await self._conns()
        bases: list[str] = []
        try:
            for c, s in zip(conns, starts, strict=True):
                bases.append(await self._instance(c, fmt, s))
        except BaseException:
            for c in conns:
                await c.close()
            raise
        accept = AVRO if fmt == "avro" else BINARY
        # max_bytes counts keys and values: exactly 1000 of these records
        reqs = [Req("GET", b + f"/records?max_bytes={self.p.batch_value_bytes}", b"",
                    {"Accept": accept}) for b in bases]
        checked = False

        async def on_resp(i: int, _req: Req, resp: Resp) -> tuple[int, int]:
            nonlocal checked
            body = resp[2]
            if not checked:
                self._check_rows(f"instance_{fmt}", orjson.loads(body), fmt)
                checked = True
            n = body.count(b'"offset":')
            pos[i] += n
            if pos[i] + BATCH > self.preloaded:
                pos[i] = 0
                status, _h, b = await conns[i].send(self._seek(bases[i], 0))
                if status >= 300:
                    raise BenchError(f"seek: {status} {b[:300]!r}")
            return n, len(body)

        try:
            return await self._run(conns, lambda i: reqs[i], on_resp)
        finally:
            conn = await RawConn(self.target.host, self.target.port).connect()
            try:
                for base in bases:
                    await asyncio.wait_for(conn.send(Req("DELETE", base, b"", {"Content-Type": V2})),
                                           SETUP_TIMEOUT_S)
            finally:
                await conn.close()

    async def verify_produced(self) -> None:
        """Both produce topics hold the same bytes: the first record of the avro one (the
        broker encoded it) is the pre-encoded wire-format record the binary one holds."""
        for topic in (PRODUCE_BINARY, PRODUCE_AVRO):
            status, _h, body = await send(self.target, Req(
                "GET", f"/topics/{topic}/partitions/0/records?offset=0&count=1", b"",
                {"Accept": BINARY}))
            rows = orjson.loads(body) if status == 200 else None
            if not rows or base64.b64decode(rows[0]["value"]) != self.p.wire_values[0]:
                raise BenchError(f"{topic}: offset 0 is not the pre-encoded record: "
                                 f"{status} {body[:300]!r}")

    async def run(self, case: str) -> dict[str, Any]:
        kind, fmt = case.rsplit("_", 1)
        if kind == "produce":
            return await self.produce(fmt)
        if kind == "range":
            return await self.range_read(fmt)
        return await self.instance_read(fmt)


# --- orchestration --------------------------------------------------------------------------


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for case in (c for pair in PAIRS.values() for c in pair):
        per = [r[case] for r in rounds if case in r]
        if not per:
            continue
        s = {m: med([x[m] for x in per]) for m in ("rec_per_s", "req_per_s", "mb_per_s",
                                                   "server_cpu_util", "errors")}
        cpu = [1e3 * x["server_cpu_util"] / x["rec_per_s"] * BATCH for x in per if x["rec_per_s"]]
        s["server_cpu_ms_per_1000_rec"] = med(cpu) if cpu else None
        summary[case] = s
    ratios: dict[str, Any] = {}
    for pair, (b, a) in PAIRS.items():
        both = [r for r in rounds if b in r and a in r and r[b]["rec_per_s"] and r[a]["rec_per_s"]]
        if not both:
            continue
        rec = [r[a]["rec_per_s"] / r[b]["rec_per_s"] for r in both]
        cpu = [(r[a]["server_cpu_util"] / r[a]["rec_per_s"]) /
               (r[b]["server_cpu_util"] / r[b]["rec_per_s"])
               for r in both if r[b]["server_cpu_util"] > 0]
        ratios[pair] = {"avro_over_binary_rec_per_s": med(rec), "per_round": rec,
                        "avro_over_binary_server_cpu_per_rec": med(cpu) if cpu else None}
    return {"cases": summary, "ratios": ratios}


def print_summary(summary: dict[str, Any]) -> None:
    print()
    print(f"{'case':18} {'rec/s':>10} {'req/s':>8} {'MB/s':>7} {'srv cpu':>7} "
          f"{'srv ms/1000 rec':>15} {'errors':>6}")
    for case, s in summary["cases"].items():
        cpu = s["server_cpu_ms_per_1000_rec"]
        print(f"{case:18} {s['rec_per_s']:10.0f} {s['req_per_s']:8.1f} {s['mb_per_s']:7.1f} "
              f"{s['server_cpu_util']:7.2f} {'' if cpu is None else f'{cpu:.1f}':>15} "
              f"{s['errors']:6.0f}")
    print()
    print(f"{'avro / binary':18} {'rec/s':>10} {'srv cpu/rec':>12}")
    for pair, r in summary["ratios"].items():
        cpu = r["avro_over_binary_server_cpu_per_rec"]
        print(f"{pair:18} {r['avro_over_binary_rec_per_s']:10.2f} "
              f"{'' if cpu is None else f'{cpu:.2f}':>12}")


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    pairs = [p.strip() for p in args.cases.split(",") if p.strip()]
    unknown = set(pairs) - set(PAIRS)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {', '.join(PAIRS)}")
    tmp = Path(tempfile.mkdtemp(prefix="franz-schema-bench-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        if args.franz:
            host, port = parse_addr(args.franz)
            target = Target("franz", host, port, args.franz_pid)
        else:
            port = free_port()
            cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port",
                   str(port), "--data-dir", str(tmp / "data"), "--log-level", "WARNING"]
            for o in args.override:
                cmd += ["--override", o]
            proc = spawn(cmd, args.server_cpu, tmp / "franz.log", cwd=ROOT)
            target = Target("franz", "127.0.0.1", port, proc.pid)
        await wait_ready(target, "/topics", proc, tmp / "franz.log")
        t = time.perf_counter()
        payloads, preloaded = await setup(target, args.preload)
        print(f"schema id {payloads.schema_id}; {BATCH} records: {payloads.batch_value_bytes} "
              f"bytes in the wire format, binary body {len(payloads.binary_body)} bytes, avro "
              f"body {len(payloads.avro_body)} bytes; preloaded {preloaded} records in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
        cases = Cases(args, target, payloads, preloaded)
        rounds: list[dict[str, Any]] = []
        for r in range(args.rounds):
            out: dict[str, Any] = {}
            for pair in pairs:
                for case in PAIRS[pair]:
                    out[case] = await cases.run(case)
                    print(f"round {r + 1}/{args.rounds} {case}: "
                          f"{out[case]['rec_per_s']:.0f} records/s", flush=True)
                if pair == "produce" and r == 0:
                    await cases.verify_produced()
            rounds.append(out)
        summary = summarize(rounds)
        print_summary(summary)
        return {"rounds": rounds, "summary": summary, "schema": ORDER,
                "schema_id": payloads.schema_id, "preloaded": preloaded,
                "batch_wire_bytes": payloads.batch_value_bytes,
                "body_bytes": {"binary": len(payloads.binary_body),
                               "avro": len(payloads.avro_body)}}
    finally:
        if proc is not None:
            stop(proc)
        if args.keep_logs:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="produce,range,instance",
                    help="pairs to run, comma separated: produce, range, instance")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds per case")
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    ap.add_argument("--max-requests", type=int, default=20_000, help="per connection and case")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--preload", type=int, default=100_000, help="records for the read cases")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--franz", help="HOST:PORT of a running franz (loopback)")
    ap.add_argument("--franz-pid", type=int, help="its pid, for its CPU time")
    ap.add_argument("--override", action="append", default=[], help="franz KEY=VALUE")
    ap.add_argument("--json", type=Path, help="write rounds and summary here")
    ap.add_argument("--label", default="", help="stored in the JSON")
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    if args.rounds < 1 or args.duration <= 0 or args.connections < 1:
        raise SystemExit("--rounds and --connections must be >= 1, --duration > 0")
    notes = machine_notes()
    notes["client_pinned"] = pin_self(args.client_cpu)
    notes["server_pinned"] = bool(shutil.which("taskset")) and args.server_cpu >= 0 \
        and not args.franz
    result, notes["generator_loop"] = run_loop(amain(args))
    result["machine"] = notes
    result["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    result["label"] = args.label
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
