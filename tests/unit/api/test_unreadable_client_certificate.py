"""Over HTTPS, a client certificate OpenSSL verified but whose subject franz cannot read
is refused (401) and audited, as the Kafka door refuses it: it never falls through to
Basic or ANONYMOUS, which ACLs for ``User:*`` or ``User:ANONYMOUS`` could let in."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from api.security.authentication import AuthenticationMiddleware


def _call(tls: dict[str, Any], *, basic: bool) -> tuple[list[dict[str, Any]], bool]:
    reached = False

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal reached
        reached = True

    security = SimpleNamespace(certificate_principal=lambda subject: None, basic=basic)
    scope = {"type": "http", "method": "GET", "path": "/v3/clusters", "headers": [],
             "client": ("127.0.0.1", 5000), "extensions": {"tls": tls},
             "app": SimpleNamespace(state=SimpleNamespace(broker=SimpleNamespace(
                 security=security)))}
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    asyncio.run(AuthenticationMiddleware(app)(scope, receive, send))
    return sent, reached


@pytest.mark.parametrize("basic", [True, False], ids=["basic-on", "basic-off"])
def test_an_unreadable_certificate_is_refused_and_audited(
        caplog: pytest.LogCaptureFixture, basic: bool) -> None:
    with caplog.at_level(logging.INFO, logger="franz.audit"):
        sent, reached = _call({"client_cert_name": None,
                               "client_cert_error": "bad DN encoding"}, basic=basic)
    assert not reached
    assert sent[0]["status"] == 401
    assert b"not readable" in sent[1]["body"]
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "franz.audit"]
    assert [(a["event"], a["result"], a["mechanism"]) for a in lines] == [
        ("authentication", "failure", "SSL")]
