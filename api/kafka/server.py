"""Kafka listeners: connections, framing, limits, dispatch, answers in order.

Each connection is served as Kafka's network layer serves it: one request at a time,
in order (a client may pipeline several; they wait in the socket buffer, so a client
that never reads its answers stops being read from and holds only its socket's memory).

    size (int32) | api_key int16 | api_version int16 | correlation_id int32 | client_id | body

A frame larger than ``socket.request.max.bytes`` (or smaller than a header), an unknown
API key, an unsupported version (other than ApiVersions', which is answered at v0 with
UNSUPPORTED_VERSION and the list, as Kafka does), a body that does not decode: the
connection is closed and nothing is done. A connection idle past
``connections.max.idle.ms``, or whose frame does not complete within it, is closed.
Request bodies are received in place (``api.kafka.connection``) as their bytes arrive,
each 256 KiB taking its share of a byte budget (``queued.max.request.bytes``) before
more is read: many large requests at once cannot exhaust memory, and a size prefix
claiming 100 MiB holds only the bytes that really arrived (plus the connection's 64 KiB
stage).

An answer is a list of chunks (``codegen``): bytes, and record regions that a plaintext
connection could hand to sendfile(2).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from api.kafka import errors
from api.kafka.apis import Api, load_handlers
from api.kafka.connection import KafkaConnection
from api.kafka.context import ConnectionClosed, ListenerInfo, RequestContext, Session
from api.kafka.fetch_sessions import FetchSessionCache
from api.kafka.protocol.codegen import DecodeError, decoder, encoder
from api.security.login_throttle import LoginThrottle
from core.broker.security.audit import audit
from core.broker.security.distinguished_name import subject_dn
from core.broker.security.principal import ANONYMOUS, Principal
from core.storage.file_region import FileRegion
from core.storage.native import new_buffer

if TYPE_CHECKING:
    import ssl

    from core.broker.broker import Broker

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
API_VERSIONS_KEY = 18
MIN_FRAME = _HEADER.size + 2  # header v1: key, version, correlation id, client id length
FAILED_AUTHENTICATION_DELAY_S = 0.1  # Kafka's connection.failed.authentication.delay.ms
READ_CHUNK = 1 << 20  # frames up to this size are received in place into one buffer
READ_STEP = 256 << 10  # bytes received before they take their share of the budget


@dataclass(frozen=True, slots=True)
class Limits:
    max_request_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    idle_ms: int = 600_000  # connections.max.idle.ms
    queued_request_bytes: int = 512 * 1024 * 1024  # budget for bodies being read or served
    max_connections: int = 10_000


class ByteBudget:
    """Bytes of request bodies held at once, over every connection. A take that does
    not fit waits, first come first served; one that fits while nobody waits is taken
    at once, with no lock and no future (the usual case, once per chunk read)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def take(self, n: int) -> int:
        n = min(n, self.total)  # one frame larger than the budget waits for all of it
        if not self._waiters and self.free >= n:
            self.free -= n
            return n
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((n, granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():  # granted as it was cancelled
                self.give(n)
            else:
                self._wake()  # a cancelled head may have been holding others back
            raise
        return n

    def give(self, n: int) -> None:
        self.free += n
        self._wake()

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters:
            n, granted = waiters[0]
            if granted.done():  # cancelled while waiting
                waiters.popleft()
                continue
            if self.free < n:
                return
            waiters.popleft()
            self.free -= n
            granted.set_result(None)


class KafkaServer:
    """The Kafka door of one broker: every Kafka listener's connections."""

    def __init__(self, broker: Broker, *, limits: Limits | None = None,
                 throttle: LoginThrottle | None = None) -> None:
        self.broker = broker
        self.limits = limits or Limits()
        # failed SASL logins count with failed Basic logins: one throttle per broker
        self.throttle = throttle or LoginThrottle.from_config(broker.config, broker.clock)
        self.fetch_sessions = FetchSessionCache()
        self.zero_copy = hasattr(os, "sendfile")  # Fetch answers with sendfile(2)
        self.apis = load_handlers()
        self._budget = ByteBudget(self.limits.queued_request_bytes)
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self.connections_total = 0
        # API name -> [requests answered, seconds spent]: GET /metrics (api/metrics.py)
        self.request_stats: dict[str, list[float]] = {}

    async def start(self, sock: socket.socket, listener: ListenerInfo, *,
                    ssl_context: ssl.SSLContext | None = None) -> None:
        """Serve a bound socket (``listen`` is called here)."""
        idle_s = self.limits.idle_ms / 1000

        async def on_connect(conn: KafkaConnection) -> None:
            task = asyncio.current_task()
            assert task is not None
            if len(self._connections) >= self.limits.max_connections:
                conn.close()
                return
            self._connections.add(task)
            self.connections_total += 1
            try:
                await self._serve(conn, listener)
            except asyncio.CancelledError:
                pass  # stop(): asyncio would log a cancelled connection task as an error
            finally:
                self._connections.discard(task)

        server = await asyncio.get_running_loop().create_server(
            lambda: KafkaConnection(on_connect, idle_s), sock=sock, ssl=ssl_context,
            # a TLS handshake that does not complete is bounded like an idle connection
            ssl_handshake_timeout=min(60.0, idle_s) if ssl_context else None)
        self._servers.append(server)

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    # --- one connection ------------------------------------------------------------------

    async def _serve(self, conn: KafkaConnection, listener: ListenerInfo) -> None:
        peer = conn.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else ""
        session = Session(host=host, authenticated=not listener.is_sasl)
        ssl_object = conn.get_extra_info("ssl_object")
        if ssl_object is not None and not listener.is_sasl:
            principal = self._certificate_principal(ssl_object, host)
            if principal is None:  # a certificate no rule maps: no connection
                conn.close()
                return
            session.principal = principal
        sock = conn.get_extra_info("socket")
        if ssl_object is None and self.zero_copy and sock is not None:
            session.zero_copy = True
            # drain() then waits until every byte written is sent, so a file region's
            # sendfile(2) follows the bytes before it on the socket
            assert conn.transport is not None
            conn.transport.set_write_buffer_limits(high=0)
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        try:
            while True:
                try:
                    prefix = await conn.read_exact(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                size = _SIZE.unpack(prefix)[0]
                if size < MIN_FRAME or size > self.limits.max_request_bytes:
                    log.info("kafka: closing %s: a request of %d bytes (socket.request.max."
                             "bytes=%d)", host, size, self.limits.max_request_bytes)
                    return
                held = 0
                try:
                    try:
                        frame, held = await self._read_body(conn, size)
                    except (asyncio.IncompleteReadError, ConnectionError):
                        return  # the client went away mid-frame
                    answer = await self._handle(frame, listener, session)
                    del frame
                finally:
                    if held:
                        self._budget.give(held)
                if answer is not None:
                    await self._write(conn, answer, session)
                if session.close_after_answer:  # a failed authentication, as Kafka:
                    # closed 100 ms after its answer (connection.failed.authentication.
                    # delay.ms), so the client reads the error before the end of stream
                    await asyncio.sleep(FAILED_AUTHENTICATION_DELAY_S)
                    return
        except (TimeoutError, ConnectionClosed):
            return
        except ConnectionError:
            return
        finally:
            conn.close()
            try:
                await asyncio.wait_for(conn.wait_closed(), 1)
            except (TimeoutError, ConnectionError, OSError):
                pass

    async def _read_body(self, conn: KafkaConnection, size: int) -> tuple[bytearray, int]:
        """A frame's ``size`` bytes and the budget they took. Up to READ_CHUNK they are
        received in place into one buffer whose pages become memory only as bytes
        arrive, READ_STEP at a time, each step taking its share of the budget once its
        bytes are there; larger frames are READ_CHUNK pieces joined. A size prefix
        claiming 100 MiB so holds the memory of what arrived, never the claim. The
        buffer's bytes are all received before it is used (it starts unset)."""
        held = 0
        try:
            if size <= READ_CHUNK:
                frame = new_buffer(size)
                view = memoryview(frame)
                for at in range(0, size, READ_STEP):
                    step = view[at:at + READ_STEP]
                    await conn.read_into(step)
                    held += await self._budget.take(len(step))
                return frame, held
            parts: list[bytearray] = []
            remaining = size
            while remaining:
                part = new_buffer(min(remaining, READ_CHUNK))
                await conn.read_into(part)
                held += await self._budget.take(len(part))
                parts.append(part)
                remaining -= len(part)
            return bytearray().join(parts), held
        except BaseException:
            if held:
                self._budget.give(held)
            raise

    async def _handle(self, frame: bytes | bytearray, listener: ListenerInfo,
                      session: Session) -> list[Any] | None:
        key, version, correlation_id = _HEADER.unpack_from(frame, 0)
        api = self.apis.get(key)
        if api is None:
            log.info("kafka: closing %s: unknown API key %d", session.host, key)
            raise ConnectionClosed
        if version not in api.versions:
            if key == API_VERSIONS_KEY:  # answered at v0 so any client can read it
                return _frame(correlation_id, None, _encode(api, 0, {
                    "error_code": errors.UNSUPPORTED_VERSION, "api_keys": self.api_list()}))
            log.info("kafka: closing %s: %s v%d is not supported (%d-%d)", session.host,
                     api.name, version, api.versions.low, api.versions.high)
            raise ConnectionClosed
        if not session.authenticated and not api.before_authentication:
            log.info("kafka: closing %s: %s before SASL authentication", session.host, api.name)
            raise ConnectionClosed
        flexible = api.flexible(version)
        view = memoryview(frame)
        try:
            header, pos = decoder("RequestHeader", 2 if flexible else 1)(view, 0)
            # bytes after the request's end are ignored, as Kafka ignores them:
            # librdkafka's Metadata v12 for all topics carries 3 of them
            request, _ = decoder(api.request, version)(view, pos)
        except DecodeError as exc:
            log.info("kafka: closing %s: %s v%d does not decode: %s", session.host, api.name,
                     version, exc)
            raise ConnectionClosed from None
        ctx = RequestContext(self.broker, listener, session, key, version, correlation_id,
                             header["client_id"], self.throttle, self.fetch_sessions)
        started = time.perf_counter()
        try:
            response = await api.handler(ctx, request)
        finally:
            stats = self.request_stats.get(api.name)
            if stats is None:
                stats = self.request_stats[api.name] = [0, 0.0]
            stats[0] += 1
            stats[1] += time.perf_counter() - started
        if response is None:
            return None
        # ApiVersions answers always use response header v0 (KIP-511)
        tagged = flexible and key != API_VERSIONS_KEY
        return _frame(correlation_id, tagged, _encode(api, version, response))

    def _certificate_principal(self, ssl_object: Any, host: str) -> Principal | None:
        """An SSL listener's client: its certificate's subject mapped by
        ``ssl.principal.mapping.rules`` (as HTTPS maps it); ANONYMOUS without a
        certificate (``ssl.client.auth`` none or requested). None, audited, for a
        certificate whose subject cannot be read or that no rule maps: refused, as HTTPS
        refuses it and Kafka's principal builder fails the connection (never ANONYMOUS,
        which ``User:*`` ACLs would let in)."""
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return ANONYMOUS
        try:
            subject = subject_dn(der)
        except ValueError as exc:
            log.warning("kafka: closing %s: its client certificate is not readable: %s",
                        host, exc)
            audit("authentication", principal="", host=host, result="failure",
                  mechanism="SSL", reason="the client certificate's subject is not readable")
            return None
        principal = self.broker.security.certificate_principal(subject)
        if principal is None:
            log.info("kafka: closing %s: no ssl.principal.mapping.rules rule maps the client "
                     "certificate %s", host, subject[:1024])
            audit("authentication", principal="", host=host, result="failure",
                  mechanism="SSL", subject=subject[:1024],
                  reason="No principal mapping rule matches the client certificate.")
        return principal

    @property
    def connections(self) -> int:
        return len(self._connections)

    def api_list(self) -> list[dict[str, int]]:
        return [{"api_key": a.key, "min_version": a.versions.low, "max_version": a.versions.high}
                for a in sorted(self.apis.values(), key=lambda a: a.key)]

    async def _write(self, writer: KafkaConnection, chunks: Iterable[Any],
                     session: Session) -> None:
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                writer.write(chunk)
            elif isinstance(chunk, FileRegion) and session.zero_copy:
                await writer.drain()
                await _sendfile(writer, chunk, self.limits.idle_ms / 1000)
            elif isinstance(chunk, FileRegion):
                writer.write(chunk.read())  # TLS: one copy, through the SSL layer
            else:
                writer.write(bytes(chunk))
        await writer.drain()


def _encode(api: Api, version: int, response: dict[str, Any]) -> list[Any]:
    out = bytearray()
    parts: list[Any] = []
    encoder(api.response, version)(response, out, parts)
    parts.append(out)
    return parts


def _frame(correlation_id: int, tagged_header: bool | None, body: list[Any]) -> list[Any]:
    header = _SIZE.pack(correlation_id) + (b"\x00" if tagged_header else b"")
    size = len(header) + sum(len(p) for p in body)
    return [_SIZE.pack(size) + header, *body]


async def _sendfile(writer: KafkaConnection, region: FileRegion, timeout_s: float) -> None:
    """``region``'s bytes from its file to the connection's socket with sendfile(2),
    on the event loop (page-cache data: a copy inside the kernel), waiting for the
    socket to be writable between partial sends. The socket is used through a
    duplicate descriptor, so a connection closed meanwhile cannot hand its number to
    another file; the segment's descriptor stays pinned until done."""
    loop = asyncio.get_running_loop()
    sock = os.dup(writer.get_extra_info("socket").fileno())
    src = region.acquire()
    try:
        offset, left = region.position, region.length
        while left:
            try:
                sent = os.sendfile(sock, src, offset, left)
            except BlockingIOError:
                await _writable(loop, sock, timeout_s)
                continue
            if sent == 0:  # the file is shorter than the answer promised: end it
                raise ConnectionClosed
            offset += sent
            left -= sent
    finally:
        region.release()
        os.close(sock)


async def _writable(loop: asyncio.AbstractEventLoop, fd: int, timeout_s: float) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await asyncio.wait_for(ready, timeout_s)
    finally:
        loop.remove_writer(fd)
