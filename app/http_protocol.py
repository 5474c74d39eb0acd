"""uvicorn's httptools protocol with each response's head and body in one socket write.

uvicorn writes the status line and headers when the app sends ``http.response.start``
and the body on ``http.response.body``: two ``send`` system calls, and often two TCP
segments, for every small answer. On this machine a write costs about 25 us, so a
one-record produce or a woken long-poll paid it twice. ``CoalescingTransport`` holds a
written block that ends a header section (``\\r\\n\\r\\n``) and sends it together with
the next write (one ``writelines``: a single ``writev``, no copy). A held block that
nothing follows in the same event-loop iteration (a body-less answer, ``100 Continue``,
a chunked answer's last chunk) is written on the next iteration.

On a TLS connection every request's scope carries the ASGI TLS extension
(``scope["extensions"]["tls"]``): the client certificate (PEM; the leaf only, as Python
before 3.13 cannot read the chain a client sent), its subject as Java's RFC 2253 string
(``core.broker.security.distinguished_name``: what ``ssl.principal.mapping.rules`` match),
the TLS version and the cipher suite's IANA number. It is computed once, when the
connection is made (after the handshake); a request pays one dict.

TLS connections are served through ``BufferedTlsHttpProtocol``: uvloop's TLS layer hands
decrypted bytes to an ``asyncio.Protocol`` by reading each TLS record (at most 16 KiB)
into a fresh 256 KiB bytes object, which cost 212 us for a 150 KB produce body here,
against 83 us when it decrypts into a buffer the protocol lends (``get_buffer``), which
it only does for a protocol that is not an ``asyncio.Protocol``.

Connection limits (``ConnectionLimits``, one per listener; docs/connection-limits.md):

- idle connections: a connection is closed when the server has been waiting on the
  client for ``connections.max.idle.ms`` (uvicorn's keep-alive timer, in seconds in
  ``Config.timeout_keep_alive``): from the moment it is made, after each answer, and
  while a request's head or body is still arriving (the timer restarts on every read).
  A request the server is working on (a long-poll waiting for records) is never idle.
- ``max.connections``: a connection made while the listener already has that many
  gets ``503`` (JSON body, ``Connection: close``) before anything is read, then is
  closed; the others are untouched.
- request heads: more than ``max_head_bytes`` of request line and headers, or more
  than ``max_headers`` headers, is answered ``431`` and the connection closed. httptools
  keeps a header until it is complete, so the bytes are counted as they are read
  (whole reads inside the head, checked exactly once a read could have passed the
  limit): at most the limit plus one read is ever buffered.

A refusal sent before the client has finished sending (431, a 503 for too many
connections, or an app's ``Connection: close`` answer before the request body is
complete, such as a 413) is a lingering close: the answer and a FIN are sent, what the
client still sends is read and dropped, and the socket is closed when the client
closes its side, or after ``_LINGER_S``. Closing at once would make the kernel answer
the unread bytes with a reset, which many clients report instead of the answer.
At most ``_MAX_LINGERING`` connections of a listener linger; past that, and on TLS
(which has no half-close), they are closed at once.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import Any

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from core.broker.security.distinguished_name import subject_dn

log = logging.getLogger(__name__)

_END_OF_HEAD = b"\r\n\r\n"
_TLS_VERSIONS = {"TLSv1": 0x0301, "TLSv1.1": 0x0302, "TLSv1.2": 0x0303, "TLSv1.3": 0x0304}
_CIPHER_IDS: dict[str, int] = {}  # OpenSSL cipher name -> IANA number, filled on demand

MAX_HEAD_BYTES = 64 * 1024  # request line and headers
MAX_HEADERS = 100
_LINGER_S = 2.0  # longest lingering close
_MAX_LINGERING = 64  # lingering connections per listener; more are closed at once
_WARN_EVERY_S = 10.0  # a refusal of each kind is logged at most this often per listener


class ConnectionLimits:
    """The connection limits of one listener, and its shared counters."""

    __slots__ = ("max_connections", "max_head_bytes", "max_headers", "lingering", "_warned")

    def __init__(self, max_connections: int | None = None, *,
                 max_head_bytes: int = MAX_HEAD_BYTES, max_headers: int = MAX_HEADERS) -> None:
        self.max_connections = max_connections  # None: no limit
        self.max_head_bytes = max_head_bytes
        self.max_headers = max_headers
        self.lingering = 0  # connections of this listener in a lingering close
        self._warned: dict[str, float] = {}

    def warn(self, kind: str, message: str, *args: object) -> None:
        """Log a refusal, at most once per ``_WARN_EVERY_S`` per kind."""
        now = time.monotonic()
        if now - self._warned.get(kind, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned[kind] = now
            log.warning(message, *args)


_DEFAULT_LIMITS = ConnectionLimits()


def _refusal(status: bytes, code: int, message: str, extra: bytes = b"") -> bytes:
    """A complete HTTP answer with a Confluent-style JSON error body, then close."""
    body = orjson.dumps({"error_code": code, "message": message})
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n" + extra
            + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)


def too_many_connections(limit: int) -> bytes:
    return _refusal(b"503 Service Unavailable", 503,
                    f"Too many connections: this listener already has max.connections={limit} "
                    "open connections; retry later", b"retry-after: 1\r\n")


def head_too_large(limits: ConnectionLimits) -> bytes:
    return _refusal(b"431 Request Header Fields Too Large", 431,
                    f"Request header fields too large: the request line and headers are "
                    f"limited to {limits.max_head_bytes} bytes and {limits.max_headers} headers")


class _HeadTooLarge(Exception):
    """Raised in a parser callback to stop parsing a head over the limits."""


class CoalescingTransport:
    """A transport proxy: ``write`` as described above, ``close``/``write_eof``
    send what is held first, everything else goes to the real transport."""

    __slots__ = ("_transport", "_loop", "_held", "closer")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        # what ``close`` does instead of closing at once (the protocol's lingering close)
        self.closer: Any = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif data[-4:] == _END_OF_HEAD:
            self._held = data
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def writelines(self, chunks: Any) -> None:
        for data in chunks:
            self.write(data)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        closer = self.closer
        if closer is not None:
            closer()
        else:
            self.close_now()

    def close_now(self) -> None:
        self.flush()
        self._transport.close()

    @property
    def raw(self) -> asyncio.Transport:
        return self._transport

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` over a ``CoalescingTransport`` (``uvicorn.Config(http=...)``),
    with the TLS extension in the scope of requests on TLS connections, and the
    connection limits of the module's docstring (``limits``: the listener's)."""

    _tls: dict[str, Any] | None = None  # this connection's ASGI TLS extension
    _limits: ConnectionLimits = _DEFAULT_LIMITS
    _discard = False  # refused or lingering: what the client sends is dropped
    _linger: asyncio.TimerHandle | None = None  # the end of a lingering close
    _shutting_down = False
    _chunk_len = 0  # length of the read being parsed
    _in_head = False  # a request head has begun and is not complete
    _head_upper = 0  # bytes of the reads that touched this head (at least its size)
    _head_inner = 0  # bytes of the reads wholly inside this head (at most its size)

    def __init__(self, *args: Any, limits: ConnectionLimits | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if limits is not None:
            self._limits = limits

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limit = self._limits.max_connections
        if limit is not None and len(self.connections) >= limit:
            self._refuse_connection(transport, limit)
            return
        coalescing = CoalescingTransport(transport, self.loop)
        coalescing.closer = self._close
        super().connection_made(coalescing)  # type: ignore[arg-type]
        if self.scheme == "https":
            ssl_object = transport.get_extra_info("ssl_object")
            if ssl_object is not None:
                self._tls = tls_extension(ssl_object)
        # idle until the first request arrives (uvicorn arms the timer after answers only)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def _refuse_connection(self, transport: asyncio.Transport, limit: int) -> None:
        self.transport = transport
        self._discard = True
        self._limits.warn("max.connections", "refusing connections: the listener has "
                          "max.connections=%d open connections", limit)
        transport.write(too_many_connections(limit))
        self._linger_close(transport)

    def data_received(self, data: bytes) -> None:
        # uvicorn's, plus the head limits and the idle timer while waiting on the client
        if self._discard:
            return
        self._unset_keepalive_if_required()
        in_head = self._in_head
        n = self._chunk_len = len(data)
        if in_head:
            self._head_upper += n
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, _HeadTooLarge):
                self._refuse_head()
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._in_head:  # the head goes on in the next read
            if in_head:
                self._head_inner += n
            if self._head_upper > self._limits.max_head_bytes and self._head_over(complete=False):
                self._refuse_head()
                return
        cycle = self.cycle
        # waiting on the client (between requests, or inside a head or a body): idle clock
        if ((cycle is None or cycle.response_complete or cycle.more_body)
                and not self.transport.is_closing()):
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_upper = self._chunk_len
        self._head_inner = 0
        if self._tls is not None:
            self.scope["extensions"] = {"tls": self._tls}  # type: ignore[dict-item]

    def on_headers_complete(self) -> None:
        self._in_head = False
        limits = self._limits
        if ((self._head_upper > limits.max_head_bytes or len(self.headers) > limits.max_headers)
                and self._head_over(complete=True)):
            raise _HeadTooLarge
        super().on_headers_complete()

    def _head_over(self, *, complete: bool) -> bool:
        """Whether the head read so far is over the limits: its exact size once parsed,
        else the larger of what the parser handed over and the reads wholly inside it."""
        limits = self._limits
        if len(self.headers) > limits.max_headers:
            return True
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if not complete:
            size = max(size, self._head_inner)
        return size > limits.max_head_bytes

    def _refuse_head(self) -> None:
        self._discard = True
        self._in_head = False
        limits = self._limits
        limits.warn("head", "refusing requests with over %d bytes or %d headers in their "
                    "head (431)", limits.max_head_bytes, limits.max_headers)
        transport: CoalescingTransport = self.transport  # type: ignore[assignment]
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            transport.close_now()  # an earlier request is being answered: no room for a 431
            return
        transport.write(head_too_large(limits))
        transport.flush()
        self._linger_close(transport.raw)

    def _close(self) -> None:
        """``CoalescingTransport.close``: a lingering close when the request being
        answered has not been fully received (an answer sent before the body), else
        at once."""
        transport: CoalescingTransport = self.transport  # type: ignore[assignment]
        cycle = self.cycle
        if (self._linger is None and not self._shutting_down and cycle is not None
                and cycle.response_complete and cycle.more_body):
            transport.flush()
            self._linger_close(transport.raw)
        else:
            transport.close_now()

    def _linger_close(self, transport: asyncio.Transport) -> None:
        self._discard = True
        if transport.is_closing():
            return
        limits = self._limits
        if limits.lingering >= _MAX_LINGERING or not transport.can_write_eof():
            transport.close()
            return
        try:
            transport.write_eof()
        except (OSError, RuntimeError):
            transport.close()
            return
        limits.lingering += 1
        self._linger = self.loop.call_later(_LINGER_S, transport.close)
        if self.flow is not None:
            self.flow.resume_reading()  # drain what the client still sends

    def timeout_keep_alive_handler(self) -> None:
        transport = self.transport
        if not transport.is_closing():
            if isinstance(transport, CoalescingTransport):
                transport.close_now()  # idle: nothing to linger for
            else:
                transport.close()

    def shutdown(self) -> None:
        self._shutting_down = True  # no lingering: the server is stopping
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
            self._limits.lingering -= 1
        transport = self.transport
        if isinstance(transport, CoalescingTransport):
            transport.closer = None
        super().connection_lost(exc)


_RECEIVE_BUFFER_SIZE = 256 * 1024  # uvloop never asks for more at once


class BufferedTlsHttpProtocol(asyncio.BufferedProtocol):
    """``CoalescingHttpToolsProtocol`` behind the buffered protocol interface (see the
    module's docstring); built by uvicorn with the same keyword arguments. The receive
    buffer is shared by every connection of the factory: uvloop fills it and calls
    ``buffer_updated`` at once, and the HTTP parser copies what it keeps before returning.
    """

    __slots__ = ("_http", "_buffer")

    def __init__(self, *, receive_buffer: memoryview, **kwargs: Any) -> None:
        self._http = CoalescingHttpToolsProtocol(**kwargs)
        self._buffer = receive_buffer

    @classmethod
    def factory(cls, limits: ConnectionLimits | None = None) -> Any:
        """A protocol factory with its own receive buffer (one per listener), and the
        listener's connection limits."""
        receive_buffer = memoryview(bytearray(_RECEIVE_BUFFER_SIZE))

        def create(**kwargs: Any) -> BufferedTlsHttpProtocol:
            return cls(receive_buffer=receive_buffer, limits=limits, **kwargs)

        return create

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._http.connection_made(transport)  # type: ignore[arg-type]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._http.data_received(self._buffer[:nbytes])  # type: ignore[arg-type]

    def eof_received(self) -> bool | None:
        return self._http.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._http.connection_lost(exc)

    def pause_writing(self) -> None:
        self._http.pause_writing()

    def resume_writing(self) -> None:
        self._http.resume_writing()


def tls_extension(ssl_object: ssl.SSLObject | ssl.SSLSocket) -> dict[str, Any]:
    """The ASGI TLS extension of a connection whose handshake is done."""
    der = ssl_object.getpeercert(binary_form=True)
    name: str | None = None
    error: str | None = None
    if der:
        try:
            name = subject_dn(der)
        except ValueError as exc:  # verified by OpenSSL, yet unreadable here: no name
            log.warning("client certificate subject not readable: %s", exc)
            error = str(exc)
    cipher = ssl_object.cipher()
    return {
        "server_cert": None,
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
        "client_cert_name": name,
        "client_cert_error": error,
        "tls_version": _TLS_VERSIONS.get(ssl_object.version() or ""),
        "cipher_suite": _cipher_id(ssl_object.context, cipher[0]) if cipher else None,
    }


def _cipher_id(context: ssl.SSLContext, name: str) -> int | None:
    found = _CIPHER_IDS.get(name)
    if found is None:
        for cipher in context.get_ciphers():  # "id" is 0x0300XXXX, XXXX the IANA number
            _CIPHER_IDS.setdefault(str(cipher["name"]), int(cipher["id"]) & 0xFFFF)
        found = _CIPHER_IDS.get(name)
    return found
