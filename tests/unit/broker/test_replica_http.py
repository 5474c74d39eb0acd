"""The follower fetch's keep-alive client against real sockets: answers, reuse, and every
failure mapped to the cluster client's errors with the connection dropped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from core.broker.cluster.replica_http import KeepAlivePoster
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
async def poster() -> AsyncIterator[KeepAlivePoster]:
    p = KeepAlivePoster(connect_timeout_s=2)
    yield p
    await p.close()


async def test_answers_and_reuses_the_connection(poster: KeepAlivePoster) -> None:
    server, conns = await _serve(lambda body: _ok(body[::-1] * 3000))
    addr = server.sockets[0].getsockname()[:2]
    for i in range(5):
        status, body = await poster.post(addr, "/x", b"ab%d" % i, "application/json", 5)
        assert status == 200 and body == (b"ab%d" % i)[::-1] * 3000
    assert len(conns) == 1  # one keep-alive connection for all five
    server.close()


async def test_connection_close_and_errors(poster: KeepAlivePoster) -> None:
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


async def test_timeout_and_refused(poster: KeepAlivePoster) -> None:
    server, _ = await _serve(lambda _b: b"")  # never answers
    addr = server.sockets[0].getsockname()[:2]
    with pytest.raises(RequestTimedOutError):
        await poster.post(addr, "/x", b"", "t", 0.2)
    server.close()
    await server.wait_closed()
    with pytest.raises(BrokerNotAvailableError):
        await poster.post(addr, "/x", b"", "t", 1)
