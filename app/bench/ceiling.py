"""Ceiling servers for ``franz bench ceiling`` and ``benchmarks/http_bench.py``: the same
stack as franz (uvicorn + httptools + uvloop with franz's coalescing transport, one
worker, FastAPI) answering the same request shapes with as little work as possible, so
the generator measures franz against "what this machine, this stack and this generator
can do at all" in the same run.

    python -m app.bench.ceiling --port 18090              # FastAPI app
    python -m app.bench.ceiling --port 18091 --plain      # bare ASGI callable (tiny GET only)

(``benchmarks/ceiling.py`` is the same command.)

Routes of the FastAPI app (the paths are franz's, so the generator sends identical
requests to both servers):

- ``POST /topics/{topic}`` and ``POST /topics/{topic}/partitions/{partition}``: raw
  body, ``orjson.loads``, check there is a ``records`` list, answer the produce shape
  ``{"offsets": [{"partition", "offset", "error_code", "error"} x n], ...}`` with orjson.
  No base64 decoding, no validation, no storage: the "raw orjson POST echo" ceiling.
- ``GET /topics/{topic}/partitions/{partition}/records`` and
  ``GET /consumers/{group}/instances/{instance}/records``: ``orjson.dumps`` of 1000
  pre-built binary-format record dicts (100-byte values, base64) per request: the "GET
  building 1000 records with orjson" ceiling.
- ``GET /ceiling/records-bytes``: the same 1000 records serialized once at start-up
  (no per-request work at all; shows what HTTP alone costs for a 170 KB answer).
- ``GET /ceiling/tiny``: ``{}``.
- ``GET /ceiling/poll?timeout=ms`` waits (like a long-polling consumer) until
  ``POST /ceiling/poll`` hands it a produce-shaped body, and answers its ``records``
  as a JSON list: the "long-poll wake-up" ceiling of end-to-end latency.

The plain ASGI server answers ``{}`` to every request (the "GET tiny in plain ASGI"
row of docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from starlette.responses import Response

from api.fastapi_options import NO_OPENTELEMETRY
from app.http_protocol import CoalescingHttpToolsProtocol

V2_MEDIA = "application/vnd.kafka.v2+json"
BINARY_MEDIA = "application/vnd.kafka.binary.v2+json"


def prebuilt_records(n: int = 1000, size: int = 100, topic: str = "bench") -> list[dict[str, Any]]:
    value = base64.b64encode(os.urandom(size)).decode()
    return [
        {
            "topic": topic,
            "key": None,
            "value": value,
            "partition": 0,
            "offset": 1_000_000 + i,
            "timestamp": 1_727_784_000_000 + i,
            "timestamp_type": "CreateTime",
            "headers": [],
        }
        for i in range(n)
    ]


def create_app(records: int = 1000, size: int = 100) -> FastAPI:
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, **NO_OPENTELEMETRY)
    rows = prebuilt_records(records, size)
    rows_bytes = orjson.dumps(rows)
    dumps, loads = orjson.dumps, orjson.loads

    async def echo(request: Request) -> Response:
        body = loads(await request.body())
        recs = body["records"]
        if not isinstance(recs, list) or not recs:
            return Response(b'{"error_code":422,"message":"no records"}', status_code=422)
        out = {
            "offsets": [
                {"partition": 0, "offset": i, "error_code": None, "error": None}
                for i in range(len(recs))
            ],
            "key_schema_id": None,
            "value_schema_id": None,
        }
        return Response(dumps(out), media_type=V2_MEDIA)

    @app.post("/topics/{topic}")
    async def produce_topic(topic: str, request: Request) -> Response:
        return await echo(request)

    @app.post("/topics/{topic}/partitions/{partition}")
    async def produce_partition(topic: str, partition: int, request: Request) -> Response:
        return await echo(request)

    @app.get("/topics/{topic}/partitions/{partition}/records")
    async def range_records(topic: str, partition: int) -> Response:
        return Response(dumps(rows), media_type=BINARY_MEDIA)

    @app.get("/consumers/{group}/instances/{instance}/records")
    async def instance_records(group: str, instance: str) -> Response:
        return Response(dumps(rows), media_type=BINARY_MEDIA)

    @app.get("/ceiling/records-bytes")
    async def records_bytes() -> Response:
        return Response(rows_bytes, media_type=BINARY_MEDIA)

    @app.get("/ceiling/tiny")
    async def tiny() -> Response:
        return Response(b"{}", media_type=V2_MEDIA)

    waiters: list[asyncio.Future[bytes]] = []

    @app.get("/ceiling/poll")
    async def poll(timeout: int = 1000) -> Response:
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        waiters.append(fut)
        try:
            payload = await asyncio.wait_for(fut, max(0, timeout) / 1000)
        except TimeoutError:
            payload = b"[]"
        finally:
            if fut in waiters:
                waiters.remove(fut)
        return Response(payload, media_type=BINARY_MEDIA)

    @app.post("/ceiling/poll")
    async def wake(request: Request) -> Response:
        payload = dumps(loads(await request.body())["records"])
        woken = 0
        while waiters:
            fut = waiters.pop()
            if not fut.done():
                fut.set_result(payload)
                woken += 1
        return Response(dumps({"woken": woken}), media_type=V2_MEDIA)

    return app


async def plain_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Bare ASGI: ``{}`` for every HTTP request."""
    if scope["type"] != "http":
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", V2_MEDIA.encode()), (b"content-length", b"2")],
        }
    )
    await send({"type": "http.response.body", "body": b"{}"})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18090)
    parser.add_argument("--plain", action="store_true", help="bare ASGI tiny-GET server")
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("ceiling servers listen on loopback only")
    app: Any = plain_app if args.plain else create_app(args.records, args.size)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        http=CoalescingHttpToolsProtocol,  # the transport franz serves with
        loop="uvloop",
        lifespan="off",
    )


if __name__ == "__main__":
    main()
