"""The keep-alive client of every call between brokers, against real sockets: answers, reuse, and every
failure mapped to the cluster client's errors with the connection dropped."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.broker.cluster.keepalive_http import KeepAliveClient
from core.broker.errors import BrokerNotAvailableError, RequestTimedOutError

Handler = Callable[[bytes], bytes | None]  # request body -> raw answer (None: hang up)


async def _serve(handler: Handler) -> tuple[asyncio.Server, list[int]]:
    connections: list[int] = []

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                body = await reader.readexactly(length)
                answer = handler(body)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    return server, connections


def _ok(body: bytes, *, close: bool = False) -> bytes:
    extra = b"Connection: close\r\n" if close else b""
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


@pytest.fixture
async def poster() -> AsyncIterator[KeepAliveClient]:
    p = KeepAliveClient(connect_timeout_s=2)
    yield p
    await p.close()


async def test_answers_and_reuses_the_connection(poster: KeepAliveClient) -> None:
    server, conns = await _serve(lambda body: _ok(body[::-1] * 3000))
    addr = server.sockets[0].getsockname()[:2]
    for i in range(5):
        status, body = await poster.post(addr, "/x", b"ab%d" % i, "application/json", 5)
        assert status == 200 and body == (b"ab%d" % i)[::-1] * 3000
    assert len(conns) == 1  # one keep-alive connection for all five
    server.close()


async def test_connection_close_and_errors(poster: KeepAliveClient) -> None:
    answers = iter([_ok(b"one", close=True), _ok(b"two"), None,
                    b"HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}",
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"])
    server, conns = await _serve(lambda _b: next(answers))
    addr = server.sockets[0].getsockname()[:2]
    assert (await poster.post(addr, "/x", b"", "t", 5))[1] == b"one"
    assert (await poster.post(addr, "/x", b"", "t", 5))[1] == b"two"  # a new connection
    with pytest.raises(BrokerNotAvailableError):  # the server hangs up mid-call
        await poster.post(addr, "/x", b"", "t", 5)
    assert await poster.post(addr, "/x", b"", "t", 5) == (409, b"{}")
    with pytest.raises(BrokerNotAvailableError, match="transfer-encoding"):
        await poster.post(addr, "/x", b"", "t", 5)
    assert len(conns) == 3  # "one" (closed); "two" then the hang-up; the 409 and the last
    server.close()


async def test_timeout_and_refused(poster: KeepAliveClient) -> None:
    server, _ = await _serve(lambda _b: b"")  # never answers
    addr = server.sockets[0].getsockname()[:2]
    with pytest.raises(RequestTimedOutError):
        await poster.post(addr, "/x", b"", "t", 0.2)
    server.close()
    await server.wait_closed()
    with pytest.raises(BrokerNotAvailableError):
        await poster.post(addr, "/x", b"", "t", 1)


async def test_every_internal_method_through_a_real_uvicorn(poster: KeepAliveClient) -> None:
    """GET with a query and an empty body, POST with a body, on one kept connection of a
    real uvicorn server (the brokers' own HTTP stack)."""
    async def echo(request: Request) -> Response:
        body = await request.body()
        return Response(b"%s %s?%s %d" % (request.method.encode(), request.url.path.encode(),
                                          request.url.query.encode(), len(body)))

    app = Starlette(routes=[Route("/internal/v1/{p}", echo, methods=["GET", "POST"])])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                                           lifespan="off"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        addr = ("127.0.0.1", port)
        got = await poster.request("GET", addr, "/internal/v1/offsets?topic=t&partition=3",
                                   b"", "application/octet-stream", 5)
        assert got == (200, b"GET /internal/v1/offsets?topic=t&partition=3 0")
        got = await poster.request("POST", addr, "/internal/v1/append?acks=-1", b"x" * 70_000,
                                   "application/octet-stream", 5)
        assert got == (200, b"POST /internal/v1/append?acks=-1 70000")
        assert sum(len(c) for c in poster._idle.values()) == 1  # one connection, kept
    finally:
        server.should_exit = True
        await task
