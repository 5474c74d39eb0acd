"""``Security.sasl_server``: what Kafka's wire server calls for SaslHandshake and
SaslAuthenticate. kafka-python's own SASL mechanisms (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) drive it against users stored by ``Security.put_user`` (the path of
``franz users add`` online and ``PUT /v3/.../users``): right and wrong passwords,
unknown users, a changed and a deleted password, unsupported mechanisms, the claim the
throttle reads, the audit line, Kafka's error codes; malformed PLAIN messages."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import SaslMechanismScram

from core.broker.security.memory_store import MemorySecurityStore
from core.broker.security.plain import PlainCredentials, parse_plain
from core.broker.security.principal import Principal
from core.broker.security.sasl import SASL_MECHANISMS, SaslServer
from core.broker.security.sasl_errors import (
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from core.broker.security.service import Security, SecuritySettings
from core.clock import SYSTEM_CLOCK
from core.errors import FranzError

ADMIN = Principal.user("admin")
SCRAMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.fixture
async def security() -> Security:
    security = Security(SecuritySettings(authentication="BASIC"), MemorySecurityStore(),
                        clock=SYSTEM_CLOCK)
    await security.start()
    await security.put_user(ADMIN, "alice", "alice-secret")
    yield security
    await security.stop()


def kafka_python(mechanism: str, user: str, password: str) -> object:
    config = {"sasl_mechanism": mechanism, "sasl_plain_username": user,
              "sasl_plain_password": password, "security_protocol": "SASL_SSL"}
    return (SaslMechanismPlain if mechanism == "PLAIN" else SaslMechanismScram)(**config)


async def authenticate(server: SaslServer, client: object) -> None:
    """kafka-python's client loop: send its bytes, hand it the server's answer."""
    while not client.is_done():  # type: ignore[attr-defined]
        answer = await server.step(client.auth_bytes())  # type: ignore[attr-defined]
        client.receive(answer)  # type: ignore[attr-defined]  # raises on a bad server-final


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
async def test_kafka_python_authenticates(security: Security, mechanism: str) -> None:
    server = security.sasl_server(mechanism, host="10.0.0.7")
    assert server.mechanism == mechanism and not server.complete and server.principal is None
    client = kafka_python(mechanism, "alice", "alice-secret")
    await authenticate(server, client)
    assert client.is_authenticated()  # type: ignore[attr-defined]
    assert server.complete and server.principal == Principal.user("alice")
    assert str(server.principal) == "User:alice" and server.user == "alice"
    with pytest.raises(SaslAuthenticationFailedError, match="over"):
        await server.step(b"more")


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
@pytest.mark.parametrize(("user", "password"), [("alice", "Guess-1234"),
                                                ("nobody", "Guess-5678"),
                                                ("bad name", "Guess-9012")])
async def test_wrong_password_and_unknown_user_fail_alike(
        security: Security, mechanism: str, user: str, password: str,
        caplog: pytest.LogCaptureFixture) -> None:
    server = security.sasl_server(mechanism, host="10.0.0.7")
    client = kafka_python(mechanism, user, password)
    caplog.set_level(logging.INFO, "franz.audit")
    with pytest.raises(SaslAuthenticationFailedError) as failed:
        await authenticate(server, client)
    assert failed.value.error_code == 58
    assert failed.value.message == ("Authentication failed during authentication due to "
                                    f"invalid credentials with SASL mechanism {mechanism}")
    assert not server.complete and server.principal is None
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "franz.audit"]
    assert [(a["event"], a["result"], a["principal"], a["host"], a.get("mechanism"))
            for a in lines] == [
        ("authentication", "failure", f"User:{user}", "10.0.0.7", mechanism)]
    assert password not in caplog.text


@pytest.mark.parametrize("mechanism", SCRAMS)
async def test_a_new_password_replaces_the_scram_credentials(security: Security,
                                                             mechanism: str) -> None:
    await security.put_user(ADMIN, "alice", "new-secret")
    with pytest.raises(SaslAuthenticationFailedError):
        await authenticate(security.sasl_server(mechanism),
                           kafka_python(mechanism, "alice", "alice-secret"))
    await authenticate(security.sasl_server(mechanism),
                       kafka_python(mechanism, "alice", "new-secret"))

    await security.delete_user(ADMIN, "alice")
    with pytest.raises(SaslAuthenticationFailedError):
        await authenticate(security.sasl_server(mechanism),
                           kafka_python(mechanism, "alice", "new-secret"))


async def test_plain_and_basic_check_the_same_password(security: Security) -> None:
    assert await security.authenticate_basic("alice", "alice-secret") == Principal.user("alice")
    server = security.sasl_server("PLAIN")
    assert await server.step(b"\0alice\0alice-secret") == b""  # Kafka answers PLAIN empty
    assert server.principal == Principal.user("alice")
    # the verified cache Basic filled serves PLAIN too, and a new password clears it
    await security.put_user(ADMIN, "alice", "other")
    with pytest.raises(SaslAuthenticationFailedError):
        await security.sasl_server("PLAIN").step(b"alice\0alice\0alice-secret")


async def test_a_user_without_scram_credentials_fails_scram_only(security: Security) -> None:
    """A user stored before SCRAM credentials existed (scrypt only) keeps PLAIN."""
    from core.broker.security.credentials import StoredCredential

    await security.store.put_user("old", StoredCredential.create("old-secret", n=1024))
    plain = security.sasl_server("PLAIN")
    await plain.step(b"\0old\0old-secret")
    assert plain.complete
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
        await authenticate(security.sasl_server("SCRAM-SHA-256"),
                           kafka_python("SCRAM-SHA-256", "old", "old-secret"))


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "scram-sha-256", "", "X" * 999])
def test_unsupported_mechanisms(security: Security, mechanism: str) -> None:
    with pytest.raises(UnsupportedSaslMechanismError) as refused:
        security.sasl_server(mechanism)
    assert refused.value.error_code == 33 and len(refused.value.message) < 120


def test_only_the_listeners_enabled_mechanisms(security: Security) -> None:
    assert security.sasl_server("PLAIN", enabled=["PLAIN"]).mechanism == "PLAIN"
    with pytest.raises(UnsupportedSaslMechanismError, match="SCRAM-SHA-512"):
        security.sasl_server("SCRAM-SHA-512", enabled=["PLAIN", "SCRAM-SHA-256"])


def test_error_classes_are_kafkas_codes() -> None:
    assert FranzError.for_code(58) is SaslAuthenticationFailedError
    assert FranzError.for_code(33) is UnsupportedSaslMechanismError


async def test_claims_name_the_user_before_anything_is_checked(security: Security) -> None:
    plain = security.sasl_server("PLAIN")
    claim = plain.claim(b"\0alice\0guess")
    assert (claim.user, claim.secret) == ("alice", "guess") and "guess" not in repr(claim)
    assert plain.claim(b"garbage").user is None
    assert not plain.complete  # a claim changes nothing

    scram = security.sasl_server("SCRAM-SHA-256")
    assert scram.claim(b"n,,n=alice,r=abc").user == "alice"
    assert scram.claim(b"n,,n=alice").user is None
    await scram.step(b"n,,n=alice,r=abc")
    assert scram.claim(b"c=biws,r=...,p=...").user == "alice"  # the final names nobody new
    assert scram.claim(b"c=biws,r=...,p=...").secret is None


async def test_scram_step_out_of_order_or_malformed(security: Security) -> None:
    server = security.sasl_server("SCRAM-SHA-512")
    with pytest.raises(SaslAuthenticationFailedError, match="malformed"):
        await server.step(b"c=biws,r=abc,p=AAAA")  # a final message first
    with pytest.raises(SaslAuthenticationFailedError, match="over"):
        await server.step(b"n,,n=alice,r=abc")


# --- PLAIN's message -------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "expected"), [
    (b"\0alice\0pw", PlainCredentials("alice", "pw")),
    (b"alice\0alice\0pw", PlainCredentials("alice", "pw")),  # what kafka-python sends
    ("\0zoë\0pässwörd".encode(), PlainCredentials("zoë", "pässwörd")),
    (b"\0alice\0pw with spaces", PlainCredentials("alice", "pw with spaces")),
])
def test_plain_messages(message: bytes, expected: PlainCredentials) -> None:
    assert parse_plain(message) == expected
    assert "pw" not in repr(parse_plain(message))


@pytest.mark.parametrize(("message", "reason"), [
    (b"alice\0pw", "expected 3 tokens, got 2"),
    (b"\0alice\0p\0w", "expected 3 tokens, got 4"),
    (b"\0\0pw", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"bob\0alice\0pw", "authorization id that is different from username"),
    (b"\0al\xffice\0pw", "not UTF-8"),
    (b"\0" + b"a" * 256 + b"\0pw", "longer than 255 characters"),
    (b"\0alice\0" + b"p" * 1025, "longer than 1024 bytes"),
    (b"\0alice\0" + b"p" * 5000, "PLAIN message longer than"),
])
def test_bad_plain_messages(message: bytes, reason: str) -> None:
    with pytest.raises(SaslAuthenticationFailedError, match=reason):
        parse_plain(message)


async def test_a_refused_authzid_costs_no_password_check(security: Security,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    async def never(*_: object, **__: object) -> None:
        raise AssertionError("the password was checked")

    monkeypatch.setattr(security, "authenticate_basic", never)
    with pytest.raises(SaslAuthenticationFailedError, match="authorization id"):
        await security.sasl_server("PLAIN").step(b"bob\0alice\0alice-secret")


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_any_plain_message_raises_only_authentication_failed(data: bytes) -> None:
    try:
        parsed = parse_plain(data)
    except SaslAuthenticationFailedError:
        return
    assert parsed.user and parsed.password
