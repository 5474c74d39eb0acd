"""uvicorn's httptools protocol with each response's head and body in one socket write.

uvicorn writes the status line and headers when the app sends ``http.response.start``
and the body on ``http.response.body``: two ``send`` system calls, and often two TCP
segments, for every small answer. On this machine a write costs about 25 us, so a
one-record produce or a woken long-poll paid it twice. ``CoalescingTransport`` holds a
written block that ends a header section (``\\r\\n\\r\\n``) and sends it together with
the next write (one ``writelines``: a single ``writev``, no copy). A held block that
nothing follows in the same event-loop iteration (a body-less answer, ``100 Continue``,
a chunked answer's last chunk) is written on the next iteration.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_END_OF_HEAD = b"\r\n\r\n"


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
    """``HttpToolsProtocol`` over a ``CoalescingTransport`` (``uvicorn.Config(http=...)``)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
