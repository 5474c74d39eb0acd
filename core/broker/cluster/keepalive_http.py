"""The lean keep-alive HTTP/1.1 client of every call between brokers.

Every follower sends a replica fetch to its leader as soon as the previous one answered,
so the client's own cost is paid on every round trip of acks=all: httpx spent about a
third of a follower's CPU on it. This client does only what the internal API needs: one
request at a time per connection, a body with Content-Length both ways, connections
kept and reused, and any doubt (a closed connection, a malformed answer, a timeout)
closing the connection so the next call starts clean. Errors are the cluster client's:
transport failures (a failed TLS handshake too) ``BrokerNotAvailableError``, a timeout
``RequestTimedOutError``.

TLS: ``scheme_of(address)`` says, when a connection is opened, whether that broker
serves ``https`` (its registered scheme); such connections use ``ssl_context``
(verifying the broker's certificate against the host name of its address, and
presenting this broker's own). ``headers`` go with every request (``Authorization``
when the brokers require HTTP Basic).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Mapping

from core.broker.errors import BrokerNotAvailableError, RequestTimedOutError

Address = tuple[str, int]
MAX_HEADER_BYTES = 64 * 1024


def _http(_address: Address) -> str:
    return "http"


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class KeepAliveClient:
    """``await request(method, address, path, body, content_type, timeout_s) -> (status,
    body)``; idle connections are kept per address. Event-loop only; ``close()`` at the
    end."""

    def __init__(self, *, connect_timeout_s: float = 5.0,
                 ssl_context: ssl.SSLContext | None = None,
                 scheme_of: Callable[[Address], str] = _http,
                 headers: Mapping[str, str] | None = None) -> None:
        self._idle: dict[Address, list[_Conn]] = {}
        self._connect_timeout_s = connect_timeout_s
        self._ssl_context = ssl_context
        self._scheme_of = scheme_of
        lines = [f"{k}: {v}\r\n" for k, v in (headers or {}).items()]
        if any("\r" in line[:-2] or "\n" in line[:-2] for line in lines):
            raise ValueError("a header name or value holds a line break")
        self._extra_head = "".join(lines)

    async def post(self, address: Address, path: str, body: bytes, content_type: str,
                   timeout_s: float) -> tuple[int, bytes]:
        return await self.request("POST", address, path, body, content_type, timeout_s)

    async def request(self, method: str, address: Address, path: str, body: bytes,
                      content_type: str, timeout_s: float) -> tuple[int, bytes]:
        conn = await self._take(address)
        head = (f"{method} {path} HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n"
                f"{self._extra_head}Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        try:
            conn.writer.write(head + body)
            status, answer, keep = await asyncio.wait_for(_read_response(conn.reader),
                                                          timeout_s)
        except TimeoutError:
            conn.close()
            raise RequestTimedOutError(
                f"broker {address[0]}:{address[1]} did not answer {path} in time") from None
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError) as exc:
            conn.close()
            raise BrokerNotAvailableError(
                f"broker {address[0]}:{address[1]} is not reachable: {type(exc).__name__} {exc}"
            ) from exc
        except BaseException:  # cancelled mid-call: the connection's state is unknown
            conn.close()
            raise
        if keep:
            self._idle.setdefault(address, []).append(conn)
        else:
            conn.close()
        return status, answer

    async def _take(self, address: Address) -> _Conn:
        idle = self._idle.get(address)
        while idle:
            conn = idle.pop()
            if not conn.writer.is_closing() and not conn.reader.at_eof():
                return conn
            conn.close()
        tls = self._tls_for(address)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(address[0], address[1], limit=MAX_HEADER_BYTES, ssl=tls,
                                        server_hostname=address[0] if tls else None),
                self._connect_timeout_s)
        except (OSError, TimeoutError) as exc:
            raise BrokerNotAvailableError(
                f"broker {address[0]}:{address[1]} is not reachable: {type(exc).__name__} {exc}"
            ) from exc
        return _Conn(reader, writer)

    def _tls_for(self, address: Address) -> ssl.SSLContext | None:
        if self._scheme_of(address) != "https":
            return None
        if self._ssl_context is None:  # the system's CAs, no client certificate
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    async def close(self) -> None:
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, keep-alive) of one answer with a Content-Length body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    status = int(parts[1])
    length: int | None = None
    keep = parts[0] == "HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "transfer-encoding":
            raise ValueError(f"unexpected transfer-encoding {value.strip()!r}")
        elif name == "connection":
            keep = value.strip().lower() != "close"
    if length is None or length < 0:
        raise ValueError("answer without a Content-Length")
    body = await reader.readexactly(length) if length else b""
    return status, body, keep
