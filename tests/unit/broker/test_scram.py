"""SCRAM's server side (core.broker.security.scram): the RFC 5802 and RFC 7677 test
vectors, full exchanges driven by kafka-python's own SCRAM client (SHA-256 and SHA-512;
right and wrong passwords, unknown users), the gs2 header and SASL-name rules, Kafka's
stored text form, and malformed input that never raises anything but
SaslAuthenticationFailedError."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient

from core.broker.security.sasl_errors import SaslAuthenticationFailedError
from core.broker.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MAX_MESSAGE_BYTES,
    MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramMechanism,
    ScramServerExchange,
    decode_saslname,
    encode_saslname,
    scram_credentials,
)

KEY = b"test fake-salt key"
SCRAM_SHA_1 = ScramMechanism("SCRAM-SHA-1", "sha1")  # RFC 5802's vector only; not offered
WRONG = "Authentication failed during authentication due to invalid credentials"


def b64(text: str) -> bytes:
    return base64.b64decode(text)


# --- the RFCs' vectors ----------------------------------------------------------------------


@pytest.mark.parametrize(("mechanism", "cnonce", "snonce", "salt", "proof", "signature"), [
    # RFC 5802 section 5 (SCRAM-SHA-1)
    (SCRAM_SHA_1, "fyko+d2lbbFgONRv9qkxdawL", "3rfcNHYJY1ZVvWVs7j", "QSXCR+Q6sek8bf92",
     "v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=", "rmF9pqV8S7suAoZWja4dJRkFsKQ="),
    # RFC 7677 section 3 (SCRAM-SHA-256)
    (SCRAM_SHA_256, "rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
     "W22ZaJ0SNY7soEsUEjb6gQ==", "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
     "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
], ids=["rfc5802", "rfc7677"])
def test_rfc_vectors(mechanism: ScramMechanism, cnonce: str, snonce: str, salt: str,
                     proof: str, signature: str) -> None:
    credential = ScramCredential.create(mechanism, "pencil", salt=b64(salt), iterations=4096)
    ex = ScramServerExchange(mechanism, fake_key=KEY, server_nonce=snonce)
    assert ex.receive_client_first(f"n,,n=user,r={cnonce}".encode()) == "user"
    assert ex.user == "user" and not ex.complete
    assert ex.server_first(credential) == f"r={cnonce}{snonce},s={salt},i=4096".encode()
    final = f"c=biws,r={cnonce}{snonce},p={proof}".encode()
    assert ex.receive_client_final(final) == f"v={signature}".encode()
    assert ex.complete

    # the same exchange with one bit of the proof flipped fails
    ex = ScramServerExchange(mechanism, fake_key=KEY, server_nonce=snonce)
    ex.receive_client_first(f"n,,n=user,r={cnonce}".encode())
    ex.server_first(credential)
    bad = bytearray(b64(proof))
    bad[0] ^= 1
    with pytest.raises(SaslAuthenticationFailedError, match=WRONG):
        ex.receive_client_final(f"c=biws,r={cnonce}{snonce},p=".encode()
                                + base64.b64encode(bytes(bad)))
    assert not ex.complete


# --- kafka-python's SCRAM client against the server ------------------------------------------


def drive(mechanism: str, user: str, password: str, credential: ScramCredential | None
          ) -> tuple[ScramServerExchange, ScramClient, bytes]:
    """kafka-python's client and the server up to the client's final message."""
    client = ScramClient(user, password, mechanism)
    ex = ScramServerExchange(MECHANISMS[mechanism], fake_key=KEY)
    assert ex.receive_client_first(client.first_message()) == user
    server_first = ex.server_first(credential)
    client.process_server_first_message(server_first)
    return ex, client, server_first


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_kafka_python_client_authenticates(mechanism: str) -> None:
    credential = ScramCredential.create(MECHANISMS[mechanism], "s3cret-Passw0rd")
    ex, client, _ = drive(mechanism, "alice", "s3cret-Passw0rd", credential)
    # the client derived the same keys from the salt and iterations it was sent
    assert client.stored_key == credential.stored_key
    assert client.server_key == credential.server_key
    server_final = ex.receive_client_final(client.final_message())
    client.process_server_final_message(server_final)  # raises on a wrong server signature
    assert ex.complete and ex.user == "alice"


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_wrong_password_and_unknown_user_fail_alike(mechanism: str) -> None:
    credential = ScramCredential.create(MECHANISMS[mechanism], "right")
    ex, client, real_first = drive(mechanism, "alice", "wrong", credential)
    with pytest.raises(SaslAuthenticationFailedError) as wrong:
        ex.receive_client_final(client.final_message())
    assert not ex.complete

    ex, client, fake_first = drive(mechanism, "nobody", "whatever", None)
    with pytest.raises(SaslAuthenticationFailedError) as unknown:
        ex.receive_client_final(client.final_message())
    assert not ex.complete
    assert wrong.value.message == unknown.value.message == (
        f"{WRONG} with SASL mechanism {mechanism}")
    assert wrong.value.error_code == 58

    # the fake server-first looks like a real one: same fields, salt size, iterations
    def fields(msg: bytes) -> dict[str, str]:
        return dict(item.split("=", 1) for item in msg.decode().split(","))

    real, fake = fields(real_first), fields(fake_first)
    assert real.keys() == fake.keys() == {"r", "s", "i"}
    assert len(b64(real["s"])) == len(b64(fake["s"])) and real["i"] == fake["i"] == "4096"
    assert len(real["r"]) == len(fake["r"])


def test_a_fake_salt_is_the_same_for_one_name_and_differs_between_names() -> None:
    def salt(user: str, mechanism: ScramMechanism = SCRAM_SHA_256, key: bytes = KEY) -> str:
        ex = ScramServerExchange(mechanism, fake_key=key)
        ex.receive_client_first(f"n,,n={user},r=abc".encode())
        return ex.server_first(None).decode().split(",")[1]

    assert salt("nobody") == salt("nobody")
    assert salt("nobody") != salt("somebody")
    assert salt("nobody") != salt("nobody", SCRAM_SHA_512)
    assert salt("nobody") != salt("nobody", key=b"another broker's key")


def test_a_fake_exchange_fails_even_with_the_right_proof() -> None:
    """White box: had a client the fake keys' password, the exchange would still fail."""
    ex = ScramServerExchange(SCRAM_SHA_256, fake_key=KEY)
    first = b"n,,n=ghost,r=abcdef"
    ex.receive_client_first(first)
    server_first = ex.server_first(None)
    fake = ex._credential  # noqa: SLF001
    assert fake is not None
    ex._credential = ScramCredential.create(SCRAM_SHA_256, "pw", salt=fake.salt)  # noqa: SLF001
    with pytest.raises(SaslAuthenticationFailedError, match=WRONG):
        ex.receive_client_final(client_final(first, server_first, "pw"))


def test_credentials_unusable_with_the_mechanism_give_a_fake_exchange() -> None:
    sha512 = ScramCredential.create(SCRAM_SHA_512, "pw")
    ex, client, _ = drive("SCRAM-SHA-256", "alice", "pw", sha512)  # keys of the wrong size
    with pytest.raises(SaslAuthenticationFailedError, match=WRONG):
        ex.receive_client_final(client.final_message())


# --- gs2 header, SASL names, extensions ----------------------------------------------------


def exchange_with(first: bytes, password: str = "pw", user: str = "alice"
                  ) -> tuple[ScramServerExchange, bytes]:
    """The server after ``first`` and its server-first, alice's credential stored."""
    credential = ScramCredential.create(SCRAM_SHA_256, password)
    ex = ScramServerExchange(SCRAM_SHA_256, fake_key=KEY)
    assert ex.receive_client_first(first) == user
    return ex, ex.server_first(credential)


def client_final(first: bytes, server_first: bytes, password: str = "pw",
                 binding: bytes | None = None) -> bytes:
    """The client-final message a correct client sends (as RFC 5802 computes it)."""
    m = SCRAM_SHA_256
    gs2_end = first.index(b",", first.index(b",") + 1) + 1
    header, bare = first[:gs2_end], first[gs2_end:]
    fields = dict(f.split(b"=", 1) for f in server_first.split(b","))
    salted = m.hi(password.encode(), b64(fields[b"s"].decode()), int(fields[b"i"]))
    without_proof = (b"c=" + base64.b64encode(header if binding is None else binding)
                     + b",r=" + fields[b"r"])
    auth = bare + b"," + server_first + b"," + without_proof
    client_key = m.hmac(salted, b"Client Key")
    signature = m.hmac(m.hash(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return without_proof + b",p=" + base64.b64encode(proof)


def test_authzid_equal_to_the_user_is_accepted_with_its_own_binding() -> None:
    first = b"n,a=alice,n=alice,r=abcdef"
    ex, server_first = exchange_with(first)
    assert ex.receive_client_final(client_final(first, server_first)).startswith(b"v=")
    assert ex.complete

    # c=biws (the header without a=) does not match this client-first's gs2 header
    ex, server_first = exchange_with(first)
    with pytest.raises(SaslAuthenticationFailedError, match="channel binding data"):
        ex.receive_client_final(client_final(first, server_first, binding=b"n,,"))


def test_the_y_flag_is_accepted() -> None:
    first = b"y,,n=alice,r=abcdef"
    ex, server_first = exchange_with(first)
    ex.receive_client_final(client_final(first, server_first))
    assert ex.complete


@pytest.mark.parametrize(("first", "reason"), [
    (b"p=tls-unique,,n=alice,r=abc", "channel binding is not supported"),
    (b"n,a=bob,n=alice,r=abc", "authorization id that is different from username"),
    (b"n,,n=alice,r=abc,tokenauth=true", "extension 'tokenauth' is not supported"),
    (b"n,,m=ext,n=alice,r=abc", "mandatory SCRAM extensions"),
    (b"n,,n=al=2Xce,r=abc", "bad '=' escape"),
    (b"n,,n=alice=,r=abc", "bad '=' escape"),
    (b"n,,n=,r=abc", "empty user name"),
    (b"n,,n=alice,r=", "client nonce"),
    (b"n,,n=alice,r=ab\x7fc", "client nonce"),
    (b"n,,n=alice", "not gs2-header"),
    (b"x,,n=alice,r=abc", "channel-binding flag"),
    (b"n,z=alice,n=alice,r=abc", "authorization id"),
    (b"n,,r=abc,n=alice", "without a user name"),
    (b"n,,n=alice,x=abc", "without a nonce"),
    (b"n,,n=" + b"a" * 256 + b",r=abc", "longer than 255"),
    (b"n,,n=alice,r=" + b"a" * 600, "client nonce"),
    (b"n,,n=\xff,r=abc", "not UTF-8"),
    (b"n,,n=al\x00ice,r=abc", "NUL"),
    (b"n,,n=alice,r=" + b"a" * MAX_MESSAGE_BYTES, f"longer than {MAX_MESSAGE_BYTES} bytes"),
])
def test_bad_client_first_messages(first: bytes, reason: str) -> None:
    ex = ScramServerExchange(SCRAM_SHA_256, fake_key=KEY)
    with pytest.raises(SaslAuthenticationFailedError, match=reason):
        ex.receive_client_first(first)
    assert ex.user is None and not ex.complete
    with pytest.raises(SaslAuthenticationFailedError, match="exchange is over"):
        ex.receive_client_first(b"n,,n=alice,r=abc")  # a failed exchange stays failed


def test_sasl_names_escape_comma_and_equals() -> None:
    assert encode_saslname("a,b=c") == "a=2Cb=3Dc"
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    first = b"n,a=a=3Db,n=a=3Db,r=abcdef"  # user "a=b", authzid the same, both escaped
    ex, server_first = exchange_with(first, user="a=b")
    ex.receive_client_final(client_final(first, server_first))
    assert ex.complete and ex.user == "a=b"


@pytest.mark.parametrize(("mutate", "reason"), [
    (lambda f: f.replace(b",r=", b",r=x", 1), "nonce"),
    (lambda f: f.replace(b"c=biws", b"c=eSws"), "channel binding data"),  # "y,,"
    (lambda f: f.replace(b"c=biws", b"c=b!ws"), "not base64"),
    (lambda f: f[:f.index(b",p=")], "without a proof"),
    (lambda f: f[:f.index(b",p=")] + b",p=AAAA", "not 32 bytes"),
    (lambda f: f.replace(b"c=biws,", b""), "not c=...,r=...,p="),
    (lambda f: f.replace(b",p=", b",r=again,p="), "repeats"),
    (lambda f: f.replace(b",p=", b",1=x,p="), "malformed attribute"),
    (lambda f: f + b"\xff", "not UTF-8"),
])
def test_bad_client_final_messages(mutate: Callable[[bytes], bytes], reason: str) -> None:
    first = b"n,,n=alice,r=abcdef"
    ex, server_first = exchange_with(first)
    good = client_final(first, server_first)
    with pytest.raises(SaslAuthenticationFailedError, match=reason):
        ex.receive_client_final(mutate(good))
    assert not ex.complete
    with pytest.raises(SaslAuthenticationFailedError, match="exchange is over"):
        ex.receive_client_final(good)  # no second try on one exchange


def test_extensions_in_the_client_final_message_are_ignored() -> None:
    first = b"n,,n=alice,r=abcdef"
    ex, server_first = exchange_with(first)
    m = SCRAM_SHA_256
    fields = dict(f.split(b"=", 1) for f in server_first.split(b","))
    salted = m.hi(b"pw", b64(fields[b"s"].decode()), int(fields[b"i"]))
    without_proof = b"c=biws,r=" + fields[b"r"] + b",x=future"
    auth = b"n=alice,r=abcdef," + server_first + b"," + without_proof
    client_key = m.hmac(salted, b"Client Key")
    proof = bytes(a ^ b for a, b in zip(client_key, m.hmac(m.hash(client_key), auth),
                                        strict=True))
    ex.receive_client_final(without_proof + b",p=" + base64.b64encode(proof))
    assert ex.complete


def test_messages_out_of_order_fail() -> None:
    ex = ScramServerExchange(SCRAM_SHA_256, fake_key=KEY)
    with pytest.raises(SaslAuthenticationFailedError, match="out of order"):
        ex.server_first(None)
    ex = ScramServerExchange(SCRAM_SHA_256, fake_key=KEY)
    with pytest.raises(SaslAuthenticationFailedError, match="out of order"):
        ex.receive_client_final(b"c=biws,r=abc,p=AAAA")
    first = b"n,,n=alice,r=abcdef"
    ex, server_first = exchange_with(first)
    ex.receive_client_final(client_final(first, server_first))
    with pytest.raises(SaslAuthenticationFailedError, match="exchange is over"):
        ex.receive_client_final(client_final(first, server_first))


# --- credentials -------------------------------------------------------------------------------


def test_kafkas_stored_text_form_round_trips() -> None:
    credential = ScramCredential.create(SCRAM_SHA_512, "pw")
    text = credential.encode()
    salt, stored, server, iterations = text.split(",")
    assert salt == "salt=" + base64.b64encode(credential.salt).decode()
    assert stored == "stored_key=" + base64.b64encode(credential.stored_key).decode()
    assert server == "server_key=" + base64.b64encode(credential.server_key).decode()
    assert iterations == "iterations=4096"
    assert ScramCredential.decode(text, SCRAM_SHA_512) == credential
    # any order, as Kafka's parser takes it
    assert ScramCredential.decode(",".join([iterations, server, salt, stored])) == credential
    with pytest.raises(ValueError, match="not SCRAM-SHA-256 keys"):
        ScramCredential.decode(text, SCRAM_SHA_256)


def test_credentials_from_one_password() -> None:
    both = scram_credentials("pw")
    assert set(both) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert len(both["SCRAM-SHA-256"].stored_key) == 32
    assert len(both["SCRAM-SHA-512"].stored_key) == 64
    assert both["SCRAM-SHA-256"].salt != both["SCRAM-SHA-512"].salt
    assert {c.iterations for c in both.values()} == {DEFAULT_ITERATIONS}
    assert "pw" not in both["SCRAM-SHA-256"].encode()


@pytest.mark.parametrize("iterations", [4095, MAX_ITERATIONS + 1, 0])
def test_iteration_counts_are_bounded(iterations: int) -> None:
    with pytest.raises(ValueError, match="iterations"):
        ScramCredential.create(SCRAM_SHA_256, "pw", iterations=iterations)
    text = ScramCredential.create(SCRAM_SHA_256, "pw").encode().replace(
        "iterations=4096", f"iterations={iterations}")
    with pytest.raises(ValueError, match="iterations"):
        ScramCredential.decode(text, SCRAM_SHA_256)


@pytest.mark.parametrize("text", [
    "", "salt=AA==", "salt=AA==,stored_key=AA==,server_key=AA==",
    "salt=%%,stored_key=AA==,server_key=AA==,iterations=4096",
    "salt=AA==,stored_key=AA==,server_key=AAAA,iterations=4096",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096,salt=AA==",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=١٢",
    "salt=,stored_key=AA==,server_key=AA==,iterations=4096",
])
def test_malformed_stored_credentials_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        ScramCredential.decode(text)


def test_empty_or_too_long_passwords_are_refused() -> None:
    with pytest.raises(ValueError):
        ScramCredential.create(SCRAM_SHA_256, "")
    with pytest.raises(ValueError):
        ScramCredential.create(SCRAM_SHA_256, "x" * 1025)


# --- malformed input, generated ------------------------------------------------------------------

_ALICE = ScramCredential.create(SCRAM_SHA_256, "pw", salt=b"0123456789abcdef")
_SCRAMISH = st.text(alphabet=st.sampled_from(list("nyparcsiv=,2CD3ab+/\x00\xff~é")), max_size=80)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200), _SCRAMISH.map(lambda t: t.encode("utf-8"))))
def test_any_client_first_raises_only_authentication_failed(data: bytes) -> None:
    ex = ScramServerExchange(SCRAM_SHA_256, fake_key=KEY)
    try:
        user = ex.receive_client_first(data)
    except SaslAuthenticationFailedError:
        return
    assert isinstance(user, str) and 1 <= len(user) <= 255
    ex.server_first(None)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200), _SCRAMISH.map(lambda t: t.encode("utf-8")),
                 st.builds(lambda tail: b"c=biws,r=abcdef" + tail, st.binary(max_size=60))))
def test_any_client_final_raises_only_authentication_failed(data: bytes) -> None:
    ex = ScramServerExchange(SCRAM_SHA_256, fake_key=KEY)
    ex.receive_client_first(b"n,,n=alice,r=abcdef")
    ex.server_first(_ALICE)
    with pytest.raises(SaslAuthenticationFailedError):
        ex.receive_client_final(data)
    assert not ex.complete
