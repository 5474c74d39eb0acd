"""Request body limits on every route, before any route runs (docs/connection-limits.md).

``RequestLimitsMiddleware`` is a pure ASGI middleware outside everything that reads a
body (the hot routes of ``api.hot_routes`` included). Each request's limit is
``request.body.max.bytes``, except:

- v2 produce (``POST /topics/{t}`` and ``POST /topics/{t}/partitions/{p}``) and the
  broker-to-broker routes (``/internal/...``: forwarded appends, follower fetches):
  ``max.request.size``, the largest produce body;
- v3 produce (``POST /v3/clusters/{c}/topics/{t}/records``): none here; its body is a
  stream of records, possibly long-lived, and ``api.v3.produce`` holds each record to
  ``max.request.size`` as it arrives;
- v3 batch produce (``POST .../records:batch``): ``max.request.size``, as v2 produce.

A body over the limit is answered ``413`` with a Confluent error body
(``{"error_code": 413, "message": "Request body of N bytes exceeds
request.body.max.bytes=L"}``, the produce routes' wording) and ``Connection: close``, so
the rest of the body is never read (``app.http_protocol`` drops it while the client
sees the answer):

- a ``Content-Length`` over the limit: at once, before anything of the body is read;
- a chunked body (``Transfer-Encoding``): it is read here before the route runs, and
  refused as soon as what arrived passes the limit; a body within it is handed to the
  route unchanged (the same messages, in order).

A request with neither header has no body (RFC 9112 §6.3) and passes untouched: on the
produce path the whole cost is one walk over the request's headers.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import V2_MEDIA, V3_MEDIA, ErrorCode, error_body

_V2_MEDIA = V2_MEDIA.encode()
_DEFAULTS = {"request.body.max.bytes": 1048576, "max.request.size": 67108864}  # as declared
_V3_MEDIA = V3_MEDIA.encode()


def body_limits(broker: Any) -> dict[str, int]:
    """The middleware's arguments from the broker's config (the declared defaults for
    a stand-in broker without those properties)."""
    config = getattr(broker, "config", None)

    def setting(name: str) -> int:
        try:
            return int(config[name])  # type: ignore[index]
        except (KeyError, TypeError):
            return _DEFAULTS[name]

    return {"body_max_bytes": setting("request.body.max.bytes"),
            "produce_max_bytes": setting("max.request.size")}


class RequestLimitsMiddleware:
    def __init__(self, app: ASGIApp, *, body_max_bytes: int, produce_max_bytes: int) -> None:
        self.app = app
        self.body_max_bytes = body_max_bytes  # request.body.max.bytes
        self.produce_max_bytes = produce_max_bytes  # max.request.size

    def limit_of(self, scope: Scope) -> tuple[int, str] | None:
        """(limit, property) of a request's body; None: not limited here."""
        if scope["method"] == "POST":
            path: str = scope["path"]
            if path.startswith(("/topics/", "/internal/")):
                return self.produce_max_bytes, "max.request.size"
            if path.startswith("/v3/") and path.endswith("/records"):
                return None
            if path.startswith("/v3/") and path.endswith("/records:batch"):
                return self.produce_max_bytes, "max.request.size"
        return self.body_max_bytes, "request.body.max.bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared: bytes | None = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = value
            elif name == b"transfer-encoding":
                chunked = True
        if declared is None and not chunked:  # no body
            await self.app(scope, receive, send)
            return
        found = self.limit_of(scope)
        if found is None:
            await self.app(scope, receive, send)
            return
        limit, prop = found
        if chunked:
            await self._streamed(scope, receive, send, limit, prop)
            return
        try:
            length = int(declared)  # type: ignore[arg-type]
        except ValueError:  # the HTTP parser refuses those first; stay safe anyway
            length = limit + 1
        if length > limit:
            await _refuse(scope, send, f"Request body of {length} bytes exceeds {prop}={limit}")
            return
        await self.app(scope, receive, send)

    async def _streamed(self, scope: Scope, receive: Receive, send: Send, limit: int,
                        prop: str) -> None:
        """Read a body of unknown length up to ``limit``, then run the route over the
        same messages."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # the client went away: the route sees it
                break
            size += len(message.get("body", b""))
            if size > limit:
                await _refuse(scope, send, f"Request body of more than {limit} bytes "
                                           f"exceeds {prop}={limit}")
                return
            if not message.get("more_body", False):
                break
        messages.reverse()

        async def replay() -> Message:
            if messages:
                return messages.pop()
            return await receive()

        await self.app(scope, replay, send)


async def _refuse(scope: Scope, send: Send, message: str) -> None:
    body = error_body(ErrorCode.PAYLOAD_TOO_LARGE, message)
    media = _V3_MEDIA if scope["path"].startswith("/v3") else _V2_MEDIA
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", media),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the rest of the body is not read
    ]
    start: dict[str, Any] = {"type": "http.response.start", "status": 413, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": body})
