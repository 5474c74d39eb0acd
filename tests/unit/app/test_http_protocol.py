"""The coalescing HTTP protocol, served by a real uvicorn on loopback: answers stay
byte-correct (small, chunked, body-less, large, 100-continue, keep-alive, close) and a
small answer reaches the socket in one write."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn

from app.http_protocol import CoalescingHttpToolsProtocol, CoalescingTransport

BIG = bytes(range(256)) * 8192  # 2 MiB: the transport's write buffer fills up


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    body = b""
    while True:  # read the whole request body
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for part in (b"one,", b"two,", b"three"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/empty":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    answer = {"/small": b"hello", "/big": BIG, "/echo": body, "/crlf": b"x\r\n\r\n"}[path]
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(answer)).encode())]})
    await send({"type": "http.response.body", "body": answer})


class _Counting:
    """The real transport, counting the calls that reach the socket."""

    def __init__(self, transport: asyncio.Transport, calls: list[int]) -> None:
        self._t, self._calls = transport, calls

    def write(self, data: bytes) -> None:
        self._calls.append(1)
        self._t.write(data)

    def writelines(self, chunks: Any) -> None:
        chunks = list(chunks)
        self._calls.append(len(chunks))
        self._t.writelines(chunks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._t, name)


WRITES: list[int] = []


class _CountingProtocol(CoalescingHttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # CoalescingHttpToolsProtocol's own wrapping, over a counter of real writes
        super(CoalescingHttpToolsProtocol, self).connection_made(
            CoalescingTransport(_Counting(transport, WRITES), self.loop))  # type: ignore[arg-type]


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    config = uvicorn.Config(_app, host="127.0.0.1", port=0, http=_CountingProtocol,
                            lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await asyncio.wait_for(task, 10)


async def test_answers_are_intact_on_one_keep_alive_connection(base_url: str) -> None:
    limits = httpx.Limits(max_connections=1)
    async with httpx.AsyncClient(base_url=base_url, limits=limits) as client:
        for _ in range(3):  # every shape, several times over the same connection
            assert (await client.get("/small")).content == b"hello"
            r = await client.get("/stream")
            assert r.headers["transfer-encoding"] == "chunked"
            assert r.content == b"one,two,three"
            r = await client.get("/empty")
            assert r.status_code == 204 and r.content == b""
            assert (await client.get("/crlf")).content == b"x\r\n\r\n"
            assert (await client.get("/big")).content == BIG
            assert (await client.post("/echo", content=b"ping" * 1000)).content == b"ping" * 1000


async def test_a_small_answer_is_one_write(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        await client.get("/small")  # connection set up
        WRITES.clear()
        assert (await client.get("/small")).content == b"hello"
        assert WRITES == [2]  # head and body, one writelines call
        WRITES.clear()
        assert (await client.get("/empty")).status_code == 204
        assert len(WRITES) == 1


async def test_expect_100_continue_and_connection_close(base_url: str) -> None:
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                     b"Expect: 100-continue\r\nConnection: close\r\n\r\n")
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert interim.startswith(b"HTTP/1.1 100 Continue")
        writer.write(b"pong")
        answer = await asyncio.wait_for(reader.read(), 5)  # until the server closes
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"connection: close" in head.lower()
        assert body == b"pong"
    finally:
        writer.close()
