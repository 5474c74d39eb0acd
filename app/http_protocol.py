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
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from core.broker.security.distinguished_name import subject_dn

log = logging.getLogger(__name__)

_END_OF_HEAD = b"\r\n\r\n"
_TLS_VERSIONS = {"TLSv1": 0x0301, "TLSv1.1": 0x0302, "TLSv1.2": 0x0303, "TLSv1.3": 0x0304}
_CIPHER_IDS: dict[str, int] = {}  # OpenSSL cipher name -> IANA number, filled on demand


class CoalescingTransport:
    """A transport proxy: ``write`` as described above, ``close``/``write_eof``
    send what is held first, everything else goes to the real transport."""

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif data[-4:] == _END_OF_HEAD:
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def writelines(self, chunks: Any) -> None:
        for data in chunks:
            self.write(data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` over a ``CoalescingTransport`` (``uvicorn.Config(http=...)``),
    with the TLS extension in the scope of requests on TLS connections."""

    _tls: dict[str, Any] | None = None  # this connection's ASGI TLS extension

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
        if self.scheme == "https":
            ssl_object = transport.get_extra_info("ssl_object")
            if ssl_object is not None:
                self._tls = tls_extension(ssl_object)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:
            self.scope["extensions"] = {"tls": self._tls}  # type: ignore[dict-item]


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
    def factory(cls) -> Any:
        """A protocol factory with its own receive buffer (one per listener)."""
        receive_buffer = memoryview(bytearray(_RECEIVE_BUFFER_SIZE))

        def create(**kwargs: Any) -> BufferedTlsHttpProtocol:
            return cls(receive_buffer=receive_buffer, **kwargs)

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
