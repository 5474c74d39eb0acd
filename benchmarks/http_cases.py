"""The cases of ``benchmarks/http_bench.py``: ``Bench`` runs each against one target.

A target is a franz broker or a ceiling server; each case (produce, consume by range or
through consumer instances, fixed GETs, end-to-end latency idle and under a paced
background load) returns the summary of one closed-loop run, or of the latency samples,
on the generator pieces of ``app.bench`` (shared with ``franz bench``). ``http_bench.py``
sets up the servers, interleaves the rounds and summarizes them.

Imported by ``http_bench.py`` from beside it (not a package), after ``http_bench.py`` has
put this tree on ``sys.path``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from app.bench.http1 import BINARY, V2, HttpxConn, RawConn, Req, Resp
from app.bench.workloads import (
    NextReq,
    OnResp,
    Target,
    closed_loop,
    e2e_latency,
    paced_load,
    produce_body,
    produce_req,
)

BATCH = 1000
VALUE_SIZE = 100
READ_MAX_BYTES = BATCH * VALUE_SIZE  # key+value bytes of 1000 records


class Bench:
    def __init__(self, args: argparse.Namespace, franz: Target, ceiling: Target,
                 plain: Target | None) -> None:
        self.args = args
        self.franz, self.ceiling, self.plain = franz, ceiling, plain
        self.baseline: Target | None = None
        self.conn_cls = HttpxConn if args.client == "httpx" else RawConn
        self.batch_body = produce_body(BATCH)
        self.one_body = produce_body(1)
        self.read_topic = "bench-read"
        self.preloaded = 0
        self.run_id = f"{os.getpid()}-{int(time.time())}"
        self.groups = 0

    async def conns(self, target: Target, n: int | None = None, cls: Any = None) -> list[Any]:
        cls = cls or self.conn_cls
        return [await cls(target.host, target.port).connect()
                for _ in range(n or self.args.connections)]

    async def _load(self, target: Target, next_req: NextReq, on_resp: OnResp,
                    n_conns: int | None = None, cls: Any = None) -> dict[str, Any]:
        conns = await self.conns(target, n_conns, cls)
        try:
            res = await closed_loop(target, conns, next_req, on_resp, warmup=self.args.warmup,
                                    duration=self.args.duration,
                                    max_requests=self.args.max_requests)
        finally:
            for c in conns:
                await c.close()
        return res.summary()

    # --- produce -------------------------------------------------------------------------

    async def produce(self, target: Target, body: bytes, n: int) -> dict[str, Any]:
        req = produce_req("/topics/bench-produce", body)
        checked = False

        async def on_resp(_i: int, _req: Req, resp: Resp) -> tuple[int, int]:
            nonlocal checked
            if not checked:
                offsets = orjson.loads(resp[2])["offsets"]
                bad = [o for o in offsets if o.get("error_code") is not None]
                if len(offsets) != n or bad:
                    raise RuntimeError(f"{target.name}: bad produce answer {resp[2][:300]!r}")
                checked = True
            return n, len(body)

        return await self._load(target, lambda _i: req, on_resp)

    # --- consume ---------------------------------------------------------------------------

    async def preload(self, target: Target, total: int) -> None:
        conn = await RawConn(target.host, target.port).connect()
        try:
            req = produce_req(f"/topics/{self.read_topic}/partitions/0", self.batch_body)
            for _ in range(total // BATCH):
                status, _h, body = await conn.send(req)
                if status != 200:
                    raise RuntimeError(f"preload failed: {status} {body[:300]!r}")
            self.preloaded = (total // BATCH) * BATCH
        finally:
            await conn.close()

    def _starts(self) -> list[int]:
        n = self.args.connections
        stride = max(BATCH, (self.preloaded // n) // BATCH * BATCH)
        return [(i * stride) % self.preloaded for i in range(n)]

    async def consume_range(self, target: Target) -> dict[str, Any]:
        pos = self._starts()
        t = self.read_topic
        accept = {"Accept": BINARY}
        checked = False

        def next_req(i: int) -> Req:
            return Req("GET", f"/topics/{t}/partitions/0/records?offset={pos[i]}&count={BATCH}"
                              f"&max_bytes={READ_MAX_BYTES}", b"", accept)

        async def on_resp(i: int, _req: Req, resp: Resp) -> tuple[int, int]:
            nonlocal checked
            body = resp[2]
            if not checked:
                rows = orjson.loads(body)
                if len(rows) != BATCH or len(base64.b64decode(rows[0]["value"])) != VALUE_SIZE:
                    raise RuntimeError(f"{target.name}: bad read answer {body[:300]!r}")
                checked = True
            n = body.count(b'"offset":')
            nxt = int(resp[1].get("x-franz-next-offset", pos[i] + n))
            pos[i] = nxt if nxt + BATCH <= self.preloaded else 0
            return n, len(body)

        return await self._load(target, next_req, on_resp)

    async def _new_instance(self, conn: Any, *, start: int | None, topic: str,
                            seek_end: bool = False) -> str:
        self.groups += 1
        group = f"bench-{self.run_id}-{self.groups}"
        cfg = {"format": "binary", "auto.offset.reset": "earliest",
               "auto.commit.enable": "true" if self.args.auto_commit else "false"}
        status, _h, body = await conn.send(Req("POST", f"/consumers/{group}", orjson.dumps(cfg),
                                               {"Content-Type": V2, "Accept": V2}))
        if status != 200:
            raise RuntimeError(f"create consumer: {status} {body[:300]!r}")
        inst = orjson.loads(body)["instance_id"]
        base = f"/consumers/{group}/instances/{inst}"
        status, _h, body = await conn.send(Req(
            "POST", base + "/assignments",
            orjson.dumps({"partitions": [{"topic": topic, "partition": 0}]}),
            {"Content-Type": V2}))
        if status >= 300:
            raise RuntimeError(f"assign: {status} {body[:300]!r}")
        if seek_end:
            status, _h, body = await conn.send(Req(
                "POST", base + "/positions/end",
                orjson.dumps({"partitions": [{"topic": topic, "partition": 0}]}),
                {"Content-Type": V2}))
        else:
            status, _h, body = await conn.send(self._seek(base, topic, start or 0))
        if status >= 300:
            raise RuntimeError(f"seek: {status} {body[:300]!r}")
        return base

    @staticmethod
    def _seek(base: str, topic: str, offset: int) -> Req:
        return Req("POST", base + "/positions",
                   orjson.dumps({"offsets": [{"topic": topic, "partition": 0, "offset": offset}]}),
                   {"Content-Type": V2})

    async def _delete_instances(self, target: Target, bases: list[str]) -> None:
        conn = await RawConn(target.host, target.port).connect()
        try:
            for base in bases:
                await conn.send(Req("DELETE", base, b"", {"Content-Type": V2}))
        finally:
            await conn.close()

    async def consume_instance(self, target: Target, *, ceiling: bool = False) -> dict[str, Any]:
        starts = self._starts()
        pos = list(starts)
        t = self.read_topic
        conns = await self.conns(target)
        if ceiling:
            bases = [f"/consumers/g/instances/i{i}" for i in range(len(conns))]
        else:
            bases = [await self._new_instance(c, start=s, topic=t) for c, s in zip(conns, starts, strict=True)]
        reqs = [Req("GET", b + f"/records?max_bytes={READ_MAX_BYTES}", b"", {"Accept": BINARY})
                for b in bases]
        checked = False

        async def on_resp(i: int, _req: Req, resp: Resp) -> tuple[int, int]:
            nonlocal checked
            body = resp[2]
            if not checked:
                rows = orjson.loads(body)
                if len(rows) != BATCH or len(base64.b64decode(rows[0]["value"])) != VALUE_SIZE:
                    raise RuntimeError(f"{target.name}: bad records answer {body[:300]!r}")
                checked = True
            n = body.count(b'"offset":')
            pos[i] += n
            if not ceiling and pos[i] + BATCH > self.preloaded:
                pos[i] = 0
                status, _h, b = await conns[i].send(self._seek(bases[i], t, 0))
                if status >= 300:
                    raise RuntimeError(f"seek: {status} {b[:300]!r}")
            return n, len(body)

        try:
            res = await closed_loop(target, conns, lambda i: reqs[i], on_resp,
                                    warmup=self.args.warmup, duration=self.args.duration,
                                    max_requests=self.args.max_requests)
        finally:
            for c in conns:
                await c.close()
        if not ceiling:
            await self._delete_instances(target, bases)
        return res.summary()

    async def get_fixed(self, target: Target, path: str, records: int) -> dict[str, Any]:
        req = Req("GET", path, b"", {"Accept": BINARY if records else V2})

        async def on_resp(_i: int, _req: Req, resp: Resp) -> tuple[int, int]:
            return records, len(resp[2])

        return await self._load(target, lambda _i: req, on_resp)

    # --- latency ------------------------------------------------------------------------------

    async def latency(self, target: Target, *, ceiling: bool,
                      background: Callable[[], Awaitable[dict[str, Any]]] | None = None,
                      ) -> dict[str, Any]:
        topic = f"bench-lat-{self.run_id}"
        samples, gap = self.args.samples, self.args.lat_gap / 1000
        prod = await RawConn(target.host, target.port).connect()
        cons = await RawConn(target.host, target.port).connect()
        if ceiling:
            base, get = None, Req("GET", "/ceiling/poll?timeout=1000", b"", {"Accept": BINARY})
            post_path = "/ceiling/poll"
        else:
            # the topic must exist before the instance is assigned to it
            status, _h, body = await prod.send(produce_req(f"/topics/{topic}", produce_body(1)))
            if status != 200:
                raise RuntimeError(f"latency topic: {status} {body[:300]!r}")
            base = await self._new_instance(cons, start=None, topic=topic, seek_end=True)
            get = Req("GET", base + "/records?timeout=1000", b"", {"Accept": BINARY})
            post_path = f"/topics/{topic}"
        bg_task = asyncio.ensure_future(background()) if background is not None else None
        try:
            out = await e2e_latency(prod, cons, post_path, get, samples=samples, gap_s=gap)
        finally:
            bg = None
            if bg_task is not None:
                bg = await bg_task
            await prod.close()
            await cons.close()
            if base is not None:
                await self._delete_instances(target, [base])
        if bg is not None:
            out["background"] = bg
        return out

    async def paced_produce(self, target: Target, rate_rec_s: float, stop: Callable[[], bool],
                            max_seconds: float) -> dict[str, Any]:
        """Open-loop 1000-record POSTs at ``rate_rec_s`` records/s over 4 connections."""
        req = produce_req("/topics/bench-load", self.batch_body)
        return await paced_load(target, req, BATCH, rate_rec_s, stop, max_seconds, n_conns=4)

    async def latency_load(self, target: Target, produce_rate: float) -> dict[str, Any]:
        stop_flag = {"stop": False}
        rate = produce_rate * self.args.load_fraction

        async def bg() -> dict[str, Any]:
            return await self.paced_produce(target, rate, lambda: stop_flag["stop"],
                                            max_seconds=120.0)

        return await self._latency_with_stop(target, bg, stop_flag)

    async def _latency_with_stop(self, target: Target, bg: Callable[[], Awaitable[dict[str, Any]]],
                                 stop_flag: dict[str, bool]) -> dict[str, Any]:
        bg_task = asyncio.ensure_future(bg())
        await asyncio.sleep(1.0)  # let the load settle
        try:
            out = await self.latency(target, ceiling=False)
        finally:
            stop_flag["stop"] = True
            load = await bg_task
        out["background"] = load
        return out
