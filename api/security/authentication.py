"""The authentication middleware: every HTTP request gets a principal before any route.

The principal comes from, in order:

1. a verified client certificate (mutual TLS; the ASGI TLS extension carries its
   subject), mapped with ``ssl.principal.mapping.rules``; a certificate no rule maps is
   answered 401 and audited (an ``authentication`` failure, mechanism SSL, with the
   subject cut to 1024 characters), once per request it refuses, as the Kafka door
   audits the connection it refuses;
2. HTTP Basic credentials when ``authentication.method=BASIC`` (a user and password, or
   an API key and secret): required then, a missing or bad one is answered 401 with
   ``WWW-Authenticate: Basic realm="franz"`` and error_code 40101 before anything runs;
3. else ``User:ANONYMOUS``.

Failed Basic authentications are slowed per principal and per client address
(``api.security.login_throttle``): past the limits an attempt is answered 429 with
``Retry-After`` (error_code 429) before its secret is looked at, and audited.

The client host is ``scope["client"]``'s, which ``api.forwarded`` has already replaced
when a trusted reverse proxy named the client (uvicorn's own forwarded-header handling
is off).

It is put on the scope (``PRINCIPAL``, ``CLIENT_HOST``) by this middleware alone; the
routes read it through ``principal_of`` and ``client_host_of``.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import V2_MEDIA, V3_MEDIA, ErrorCode, error_body
from api.security.login_throttle import LoginThrottle
from core.broker.security.audit import audit
from core.broker.security.principal import ANONYMOUS, Principal
from core.clock import SYSTEM_CLOCK

if TYPE_CHECKING:
    from core.broker.security.service import Security

PRINCIPAL = "franz.principal"
CLIENT_HOST = "franz.client_host"
AUDITED = "franz.audited"  # set by a route whose outcome goes to the audit log
REALM = 'Basic realm="franz"'
MAX_AUTHORIZATION_BYTES = 4096
_UNMAPPED = "No principal mapping rule matches the client certificate."
_UNREADABLE = "The client certificate's subject is not readable."


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
        if tls and tls.get("client_cert_error"):
            # verified by OpenSSL yet unreadable here: refused and audited, as the
            # Kafka door refuses it (never Basic or ANONYMOUS, which ACLs may let in)
            audit("authentication", principal="", host=host, result="failure",
                  mechanism="SSL", reason=_UNREADABLE)
            await _refuse(scope, send, _UNREADABLE)
            return
        if subject:
            principal = security.certificate_principal(subject)
            if principal is None:
                # audited as the Kafka door audits the connection it refuses
                audit("authentication", principal="", host=host, result="failure",
                      mechanism="SSL", subject=subject[:1024], reason=_UNMAPPED)
                await _refuse(scope, send, _UNMAPPED)
                return
        elif security.basic:
            throttle = login_throttle(scope["app"])
            failure, principal, retry_after = await _basic(security, throttle, scope, host)
            if retry_after:
                await _throttled(scope, send, retry_after)
                return
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


async def _basic(security: Security, throttle: LoginThrottle, scope: Scope,
                 host: str) -> tuple[str, Principal | None, int]:
    """(why it failed, the principal, seconds to wait when throttled: 429)."""
    header = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            header = value
            break
    if header is None:
        return "Authentication required.", None, 0
    credentials = _parse_basic(header)
    user = credentials[0] if credentials is not None else None
    retry_after = throttle.retry_after(user, host, credentials[1] if credentials else None)
    if retry_after:  # before the secret is looked at
        audit("authentication", principal=f"User:{(user or '')[:255]}", host=host,
              result="throttled", reason="too many failed authentications",
              retry_after_s=retry_after)
        return "", None, retry_after
    if credentials is None:
        throttle.failed(None, host)
        return "Malformed Basic credentials.", None, 0
    user, secret = credentials
    principal = security.cached_basic(user, secret)
    if principal is None:
        token = throttle.token(user, secret)
        throttle.begin(user, host, token)
        try:
            principal = await security.authenticate_basic(user, secret, host=host)
        finally:
            throttle.end(user, host, token)
    if principal is None:
        throttle.failed(user, host)
        return "Authentication failed: unknown user or wrong password.", None, 0
    throttle.succeeded(user)
    return "", principal, 0


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


async def _throttled(scope: Scope, send: Send, retry_after: int) -> None:
    media = V3_MEDIA if scope["path"].startswith("/v3") else V2_MEDIA
    body = error_body(ErrorCode.TOO_MANY_REQUESTS,
                      f"Too many failed authentications; retry in {retry_after} s.")
    await send({"type": "http.response.start", "status": 429, "headers": [
        (b"content-type", media.encode()), (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after).encode())]})
    await send({"type": "http.response.body", "body": body})


def login_throttle(app: Any) -> LoginThrottle:
    """The app's ``LoginThrottle`` (``app.state.login_throttle``), made from the broker's
    properties and clock the first time."""
    throttle: LoginThrottle | None = getattr(app.state, "login_throttle", None)
    if throttle is None:
        broker = getattr(app.state, "broker", None)
        throttle = LoginThrottle.from_config(getattr(broker, "config", None),
                                             getattr(broker, "clock", SYSTEM_CLOCK))
        app.state.login_throttle = throttle
    return throttle


def principal_of(request: Request) -> Principal:
    principal: Principal = request.scope.get(PRINCIPAL, ANONYMOUS)
    return principal


def principal_name(request: Request) -> str:
    """``User:alice``: how a consumer instance records its owner."""
    return str(principal_of(request))


def client_host_of(request: Request) -> str:
    host: str = request.scope.get(CLIENT_HOST, "")
    return host
