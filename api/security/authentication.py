"""The authentication middleware: every HTTP request gets a principal before any route.

The principal comes from, in order:

1. a verified client certificate (mutual TLS; the ASGI TLS extension carries its
   subject), mapped with ``ssl.principal.mapping.rules``;
2. HTTP Basic credentials when ``authentication.method=BASIC`` (a user and password, or
   an API key and secret): required then, a missing or bad one is answered 401 with
   ``WWW-Authenticate: Basic realm="franz"`` and error_code 40101 before anything runs;
3. else ``User:ANONYMOUS``.

It is put on the scope (``PRINCIPAL``, ``CLIENT_HOST``) by this middleware alone; the
routes read it through ``principal_of`` and ``client_host_of``.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import V2_MEDIA, V3_MEDIA, ErrorCode, error_body
from core.broker.security.audit import audit
from core.broker.security.principal import ANONYMOUS, Principal

if TYPE_CHECKING:
    from core.broker.security.service import Security

PRINCIPAL = "franz.principal"
CLIENT_HOST = "franz.client_host"
AUDITED = "franz.audited"  # set by a route whose outcome goes to the audit log
REALM = 'Basic realm="franz"'
MAX_AUTHORIZATION_BYTES = 4096


class AuthenticationMiddleware:
    """The broker's ``Security`` is read from the app's state on each request (the app
    is built before the broker serves)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        security: Security = scope["app"].state.broker.security
        client = scope.get("client")
        host = client[0] if client else ""
        principal: Principal | None = None
        tls = (scope.get("extensions") or {}).get("tls")
        subject = tls.get("client_cert_name") if tls else None
        if subject:
            principal = security.certificate_principal(subject)
            if principal is None:
                await _refuse(scope, send, "No principal mapping rule matches the client "
                                           "certificate.")
                return
        elif security.basic:
            failure, principal = await _basic(security, scope, host)
            if principal is None:
                await _refuse(scope, send, failure)
                return
        scope[PRINCIPAL] = principal or ANONYMOUS
        scope[CLIENT_HOST] = host
        if scope["method"] == "GET":
            await self.app(scope, receive, send)
            return

        async def send_audited(message: Message) -> None:
            if message["type"] == "http.response.start" and scope.get(AUDITED):
                route = scope.get("route")
                audit("admin", principal=str(scope[PRINCIPAL]), host=host,
                      operation=f"{scope['method']} {getattr(route, 'path', '')}",
                      resource=scope["path"], result=str(message["status"]))
            await send(message)

        await self.app(scope, receive, send_audited)


async def _basic(security: Security, scope: Scope, host: str) -> tuple[str, Principal | None]:
    header = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            header = value
            break
    if header is None:
        return "Authentication required.", None
    credentials = _parse_basic(header)
    if credentials is None:
        return "Malformed Basic credentials.", None
    user, secret = credentials
    principal = security.cached_basic(user, secret)
    if principal is None:
        principal = await security.authenticate_basic(user, secret, host=host)
    if principal is None:
        return "Authentication failed: unknown user or wrong password.", None
    return "", principal


def _parse_basic(header: bytes) -> tuple[str, str] | None:
    if len(header) > MAX_AUTHORIZATION_BYTES:
        return None
    scheme, _, token = header.partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        text = b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, secret = text.partition(":")
    if not sep or not user:
        return None
    return user, secret


async def _refuse(scope: Scope, send: Send, message: str) -> None:
    media = V3_MEDIA if scope["path"].startswith("/v3") else V2_MEDIA
    body = error_body(ErrorCode.KAFKA_AUTHENTICATION, message)
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", media.encode()), (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", REALM.encode())]})
    await send({"type": "http.response.body", "body": body})


def principal_of(request: Request) -> Principal:
    principal: Principal = request.scope.get(PRINCIPAL, ANONYMOUS)
    return principal


def principal_name(request: Request) -> str:
    """``User:alice``: how a consumer instance records its owner."""
    return str(principal_of(request))


def client_host_of(request: Request) -> str:
    host: str = request.scope.get(CLIENT_HOST, "")
    return host
