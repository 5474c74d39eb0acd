"""A minimal HTTP/1.1 keep-alive client over asyncio streams, for load generation.

``RawConn`` sends one request at a time on one connection and reads the answer
(Content-Length or chunked). It costs the generator about a tenth of the CPU per request
of httpx (benchmarks/README.md "Client"), so the generator does not measure itself.
``HttpxConn`` has the same interface over httpx, for comparison.

Both speak TLS when given an ``ssl`` context (an https server) and send an
``Authorization`` header on every request when given one (``authorization``: the value,
e.g. ``Basic ...``), so the generator measures a secured broker as its clients see it.

``IdempotentReq`` is a request sent with a new ``Idempotency-Key`` each time: its bytes
are still built once, and each send patches the next key into them (``IdempotencyKeys``:
a random prefix per run, then a counter), about a microsecond instead of a copy of the
body.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import ssl as ssl_module
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

BINARY = "application/vnd.kafka.binary.v2+json"
V2 = "application/vnd.kafka.v2+json"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


@dataclass
class Req:
    """One request; its bytes are built once and reused for every send."""

    method: str
    path: str
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    _raw: bytes | None = None

    def raw(self, host: str, authorization: str | None = None) -> bytes | bytearray:
        """The request's bytes, built on the first call (a ``Req`` goes to one server
        with one set of credentials)."""
        if self._raw is None:
            lines = [f"{self.method} {self.path} HTTP/1.1", f"Host: {host}"]
            if authorization is not None:
                lines.append(f"Authorization: {authorization}")
            lines += [f"{k}: {v}" for k, v in self.headers.items()]
            if self.body or self.method in ("POST", "PUT"):
                lines.append(f"Content-Length: {len(self.body)}")
            self._raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body
        return self._raw


class IdempotencyKeys:
    """The Idempotency-Key values of one run, each used once: ``<prefix>-<counter>``, the
    prefix 16 random hex digits (no two runs share a key: the server would answer a
    repeated one from its memory and write nothing), the counter ``DIGITS`` hex digits."""

    DIGITS = 16

    def __init__(self) -> None:
        self.prefix = os.urandom(8).hex()
        self._count = itertools.count()

    def next_digits(self) -> bytes:
        """The counter part of the next key."""
        return b"%016x" % next(self._count)


@dataclass
class IdempotentReq(Req):
    """A ``Req`` whose every ``raw()`` carries the next key of ``keys`` in an
    ``Idempotency-Key`` header. The bytes are one buffer patched in place, so one
    connection at a time may send a given ``IdempotentReq`` (one per connection), and
    patching waits for the answer to the previous send (as ``RawConn`` does): the
    request has been sent whole by then. Only ``RawConn`` sends the key."""

    keys: IdempotencyKeys = field(default_factory=IdempotencyKeys)
    _buffer: bytearray | None = None
    _at: int = 0

    def raw(self, host: str, authorization: str | None = None) -> bytearray:
        if self._buffer is None:
            marker = f"{self.keys.prefix}-"
            placeholder = marker + "0" * IdempotencyKeys.DIGITS
            raw = Req(self.method, self.path, self.body,
                      {**self.headers, "Idempotency-Key": placeholder}).raw(host, authorization)
            self._at = raw.index(f"Idempotency-Key: {marker}".encode()) + len(
                f"Idempotency-Key: {marker}")
            self._buffer = bytearray(raw)
        self._buffer[self._at:self._at + IdempotencyKeys.DIGITS] = self.keys.next_digits()
        return self._buffer


#: (status, headers with lower-case names, body)
Resp = tuple[int, dict[str, str], bytes]


class Conn(Protocol):
    async def connect(self) -> Any: ...

    async def send(self, req: Req) -> Resp: ...

    async def close(self) -> None: ...


class RawConn:
    """HTTP/1.1 keep-alive over asyncio streams (TLS with ``ssl``); one request at a time."""

    def __init__(self, host: str, port: int, *, ssl: ssl_module.SSLContext | None = None,
                 authorization: str | None = None) -> None:
        self.host, self.port = host, port
        self.hostport = f"{host}:{port}"
        self.ssl = ssl
        self.authorization = authorization
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> RawConn:
        # with ssl, the server's certificate is checked against ``host``
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port,
                                                                 limit=1 << 20, ssl=self.ssl)
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self

    async def send(self, req: Req) -> Resp:
        assert self.reader is not None and self.writer is not None, "not connected"
        self.writer.write(req.raw(self.hostport, self.authorization))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        headers: dict[str, str] = {}
        for line in head[:-4].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                parts.append(chunk[:-2])
            body = b"".join(parts)
        else:
            body = b""
        return status, headers, body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()


class HttpxConn:
    """The same interface over one httpx.AsyncClient with one keep-alive connection."""

    def __init__(self, host: str, port: int, *, ssl: ssl_module.SSLContext | None = None,
                 authorization: str | None = None) -> None:
        self.base = f"{'https' if ssl else 'http'}://{host}:{port}"
        self.client = httpx.AsyncClient(
            base_url=self.base,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=30.0,
            verify=ssl or False,
            headers={"Authorization": authorization} if authorization else None,
        )

    async def connect(self) -> HttpxConn:
        return self

    async def send(self, req: Req) -> Resp:
        r = await self.client.request(req.method, req.path, content=req.body or None,
                                      headers=req.headers)
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content

    async def close(self) -> None:
        await self.client.aclose()


def parse_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` on loopback -> (host, port); SystemExit for any other host."""
    host, _, port = addr.rpartition(":")
    if host not in LOOPBACK:
        raise SystemExit(f"servers must be on loopback, not {host!r}")
    return host, int(port)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
