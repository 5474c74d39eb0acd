"""The access log (``http.access.log=true``): one INFO record per HTTP request on the
logger ``api.access_log``, written when the answer is complete:

    127.0.0.1:52344 "POST /topics/orders HTTP/1.1" 200 131 B 1.84 ms User:alice

client, request line (path without the query string, which may carry names one would
rather not log), status, body bytes sent (after gzip, when on), duration from the
request's arrival to the last byte handed to the server, principal (``User:ANONYMOUS``
without authentication; ``-`` when authentication refused the request). The same
fields ride on the record as ``record.access`` (a dict), which ``log.format=json``
writes as JSON fields (``app.logs``). A client that goes away mid-answer still gets its
line, with status 0 when nothing had been sent.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.security.authentication import PRINCIPAL

log = logging.getLogger(__name__)


class AccessLogMiddleware:
    """Pure ASGI; wraps ``send`` to see the status and count the body bytes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        sent = 0

        async def counting_send(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            _write(scope, status, sent, time.perf_counter() - started)


def _write(scope: Scope, status: int, sent: int, seconds: float) -> None:
    client = scope.get("client")
    principal = scope.get(PRINCIPAL)
    fields: dict[str, Any] = {
        "client": f"{client[0]}:{client[1]}" if client else "-",
        "method": scope["method"],
        "path": scope["path"],
        "http_version": scope.get("http_version", "1.1"),
        "status": status,
        "bytes": sent,
        "duration_ms": round(seconds * 1000, 3),
        "principal": str(principal) if principal is not None else "-",
    }
    log.info('%s "%s %s HTTP/%s" %d %d B %.2f ms %s', fields["client"], fields["method"],
             fields["path"], fields["http_version"], status, sent, fields["duration_ms"],
             fields["principal"], extra={"access": fields})
