"""SaslHandshake and SaslAuthenticate: who a connection on a SASL listener is.

On a ``SASL_PLAINTEXT`` / ``SASL_SSL`` listener a connection may send only ApiVersions,
SaslHandshake and SaslAuthenticate until it has authenticated (``server.py`` closes it
otherwise). SaslHandshake (v1: tokens then travel in SaslAuthenticate requests; v0's raw
tokens are not accepted) names the mechanism among the listener's
``sasl.enabled.mechanisms``; each SaslAuthenticate carries one token of the exchange
(``core.broker.security.sasl``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). A failure answers
SASL_AUTHENTICATION_FAILED with a message and closes the connection, as Kafka does; so
do a mechanism the listener does not enable (UNSUPPORTED_SASL_MECHANISM, with the list)
and a second SaslHandshake on the connection (ILLEGAL_SASL_STATE): one connection, one
exchange. ``server.py`` closes such a connection 100 ms after the answer, as Kafka's
``connection.failed.authentication.delay.ms``.
"""

from __future__ import annotations

from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from core.broker.security.audit import audit
from core.broker.security.sasl import SASL_MECHANISMS
from core.broker.security.sasl_errors import SaslAuthenticationFailedError
from core.errors import FranzError

MAX_TOKEN_BYTES = 64 * 1024


def enabled_mechanisms(ctx: RequestContext) -> list[str]:
    configured = ctx.broker.config.values.get("sasl.enabled.mechanisms")
    if not configured:
        return list(SASL_MECHANISMS)
    names = configured if isinstance(configured, (list, tuple)) else str(configured).split(",")
    return [m.strip().upper() for m in names if m.strip()]


@api("SaslHandshake", 1, 1, before_authentication=True)
async def sasl_handshake(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    session, enabled = ctx.session, enabled_mechanisms(ctx)
    if not ctx.listener.is_sasl or session.authenticated:
        return {"error_code": errors.ILLEGAL_SASL_STATE, "mechanisms": enabled}
    if session.sasl_mechanism is not None:  # a second handshake, mid-exchange
        session.sasl = None
        session.close_after_answer = True
        return {"error_code": errors.ILLEGAL_SASL_STATE, "mechanisms": enabled}
    mechanism = str(req["mechanism"])[:64]  # case-sensitive, as Kafka's
    try:
        session.sasl = ctx.broker.security.sasl_server(mechanism, host=session.host,
                                                       enabled=enabled)
    except FranzError as exc:  # UNSUPPORTED_SASL_MECHANISM: the list, then the end
        session.close_after_answer = True
        return {"error_code": errors.code_of(exc), "mechanisms": enabled}
    session.sasl_mechanism = mechanism
    return {"error_code": 0, "mechanisms": enabled}


@api("SaslAuthenticate", 0, 2, before_authentication=True)
async def sasl_authenticate(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    session = ctx.session
    server = session.sasl
    if server is None or session.authenticated:
        session.close_after_answer = True
        return {"error_code": errors.ILLEGAL_SASL_STATE, "auth_bytes": b"",
                "error_message": "SaslAuthenticate without a SaslHandshake naming a mechanism"}
    token = bytes(req["auth_bytes"])
    throttle, host = ctx.throttle, session.host
    claim = server.claim(token)
    wait = throttle.retry_after(claim.user, host, claim.secret) if throttle else 0
    if wait:
        audit("authentication", principal=f"User:{(claim.user or '')[:255]}", host=host,
              result="throttled", mechanism=server.mechanism)
        session.sasl = None
        session.close_after_answer = True
        return {"error_code": errors.SASL_AUTHENTICATION_FAILED, "auth_bytes": b"",
                "error_message": f"too many failed authentications; retry in {wait} s"}
    guard = None
    if throttle is not None and claim.user is not None and claim.secret is not None:
        guard = throttle.token(claim.user, claim.secret)  # PLAIN: one check per password
        throttle.begin(claim.user, host, guard)
    try:
        if len(token) > MAX_TOKEN_BYTES:
            raise SaslAuthenticationFailedError("the SASL token is too large")
        answer = await server.step(token)
    except SaslAuthenticationFailedError as exc:
        if throttle is not None:
            throttle.failed(server.user, host)
        return _failed(session, exc)
    except FranzError as exc:  # the store could not be read: no failed login
        return _failed(session, exc)
    finally:
        if guard is not None:
            throttle.end(claim.user, host, guard)
    if server.complete:
        session.principal = server.principal
        session.authenticated = True
        session.sasl = None
        if throttle is not None and server.user:
            throttle.succeeded(server.user)
    return {"error_code": 0, "error_message": None, "auth_bytes": answer,
            "session_lifetime_ms": 0}


def _failed(session: Any, exc: FranzError) -> dict[str, Any]:
    session.sasl = None
    session.close_after_answer = True
    return {"error_code": errors.code_of(exc), "error_message": errors.message_of(exc),
            "auth_bytes": b""}
