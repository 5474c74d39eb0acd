"""SCRAM (RFC 5802, with RFC 7677's SHA-256) as Kafka speaks it: the credentials a
password derives and the server's side of an exchange. Pure: no I/O, no clock, no
logging; the caller looks the credential up between the client's first message and the
server's answer.

Credentials (RFC 5802 section 3), per mechanism, from a password (UTF-8, not SASLprep'd,
as Kafka's ``ScramFormatter``), a random salt and an iteration count:

    SaltedPassword = Hi(password, salt, i)        PBKDF2 with HMAC-H, dkLen = H's size
    ClientKey      = HMAC(SaltedPassword, "Client Key")
    StoredKey      = H(ClientKey)
    ServerKey      = HMAC(SaltedPassword, "Server Key")

Only salt, StoredKey, ServerKey and i are kept, in Kafka's text form (the value of
``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` in ``/config/users/<name>``):

    salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=4096

The exchange (``ScramServerExchange``), no channel binding (Kafka has no -PLUS
mechanism):

    client-first   n,[a=AUTHZID],n=USER,r=CNONCE         gs2 flag n (or y); p= refused;
                                                         a= absent or the user itself;
                                                         no m=, no extensions (Kafka's
                                                         ``tokenauth`` included: franz has
                                                         no delegation tokens)
    server-first   r=CNONCE+SNONCE,s=SALT,i=N
    client-final   c=base64(gs2 header),r=CNONCE+SNONCE,p=PROOF
    server-final   v=ServerSignature

USER and AUTHZID are SASL names: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=``
is malformed. The proof is checked in constant time (``hmac.compare_digest`` of
H(ClientKey) against StoredKey).

Every malformed, out-of-order or wrong message raises ``SaslAuthenticationFailedError``
and ends the exchange. Its message never tells whether the user exists: for a user
without a credential of this mechanism the server goes through a fake exchange, with a
salt derived from the user name under a secret key (the same salt for the same name, as
a real user's), the default iteration count and a StoredKey no proof matches, and fails
at the client's final message with the same text as a wrong password. Every input is
bounded: a message at most ``MAX_MESSAGE_BYTES``, a user name ``MAX_USER_CHARS``, a
nonce ``MAX_NONCE_CHARS``, a stored iteration count ``MAX_ITERATIONS``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

from core.broker.security.credentials import MAX_USER_CHARS, check_secret
from core.broker.security.sasl_errors import SaslAuthenticationFailedError

DEFAULT_ITERATIONS = 4096  # Kafka's default, and its minimum for SHA-256 and SHA-512
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations
SALT_BYTES = 32
MAX_SALT_BYTES = 256  # of a stored credential (Kafka's own salts are ~31 bytes)
MAX_MESSAGE_BYTES = 4096  # a client message
MAX_NONCE_CHARS = 512  # the client's nonce
SERVER_NONCE_BYTES = 24  # 32 base64url characters


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """One SCRAM-<hash> mechanism: its SASL name and hashlib's name of H."""

    name: str
    hash_name: str
    min_iterations: int = DEFAULT_ITERATIONS

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hi(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password, salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512")
#: The mechanisms franz offers (and stores credentials of), by SASL name.
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}

INVALID_CREDENTIALS = ("Authentication failed during authentication due to invalid "
                       "credentials with SASL mechanism {}")  # Kafka's words


# --- credentials ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def create(cls, mechanism: ScramMechanism, password: str, *,
               iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
               ) -> ScramCredential:
        """ValueError for an empty or too long password or an iteration count out of
        ``mechanism.min_iterations`` .. ``MAX_ITERATIONS``."""
        _check_iterations(mechanism, iterations)
        salt = os.urandom(SALT_BYTES) if salt is None else salt
        salted = mechanism.hi(check_secret(password), salt, iterations)
        return cls.from_salted_password(mechanism, salted, salt, iterations)

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salted: bytes, salt: bytes,
                             iterations: int) -> ScramCredential:
        client_key = mechanism.hmac(salted, b"Client Key")
        return cls(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"),
                   iterations)

    def encode(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str, mechanism: ScramMechanism | None = None) -> ScramCredential:
        """Kafka's text form (fields in any order); ValueError when malformed or, given
        ``mechanism``, unusable with it (key sizes, iteration count)."""
        if len(text) > 4 * MAX_MESSAGE_BYTES:
            raise ValueError("SCRAM credential too long")
        fields: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep or key in fields:
                raise ValueError(f"malformed SCRAM credential field {key[:32]!r}")
            fields[key] = value
        try:
            salt = base64.b64decode(fields["salt"], validate=True)
            stored_key = base64.b64decode(fields["stored_key"], validate=True)
            server_key = base64.b64decode(fields["server_key"], validate=True)
            digits = fields["iterations"]
        except KeyError as exc:
            raise ValueError(f"SCRAM credential without {exc.args[0]}") from None
        except (binascii.Error, ValueError):
            raise ValueError("SCRAM credential with malformed base64") from None
        if not digits.isascii() or not digits.isdigit() or len(digits) > 9:
            raise ValueError("SCRAM credential with malformed iterations")
        iterations = int(digits)
        if not 1 <= len(salt) <= MAX_SALT_BYTES:
            raise ValueError("SCRAM credential with an empty or too long salt")
        if not stored_key or len(stored_key) != len(server_key):
            raise ValueError("SCRAM credential with keys of different sizes")
        if mechanism is not None:
            if len(stored_key) != mechanism.digest_size:
                raise ValueError(f"SCRAM credential keys are not {mechanism.name} keys")
            _check_iterations(mechanism, iterations)
        return cls(salt, stored_key, server_key, iterations)


def _check_iterations(mechanism: ScramMechanism, iterations: int) -> None:
    if not mechanism.min_iterations <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"{mechanism.name} iterations must be {mechanism.min_iterations} to "
                         f"{MAX_ITERATIONS}, got {iterations}")


def scram_credentials(password: str, *, iterations: int = DEFAULT_ITERATIONS
                      ) -> dict[str, ScramCredential]:
    """One credential per mechanism franz offers, from one password (each its own salt)."""
    return {name: ScramCredential.create(m, password, iterations=iterations)
            for name, m in MECHANISMS.items()}


# --- SASL names -------------------------------------------------------------------------------


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(text: str, what: str = "user name") -> str:
    """``=2C`` -> ``,`` and ``=3D`` -> ``=``; SaslAuthenticationFailedError for any other
    ``=``, an empty name or one longer than ``MAX_USER_CHARS``."""
    if not text:
        raise _malformed(f"empty {what}")
    if "=" in text:
        out: list[str] = []
        i = 0
        while i < len(text):
            c = text[i]
            if c == "=":
                escape = text[i + 1:i + 3]
                if escape not in ("2C", "3D"):
                    raise _malformed(f"{what} with a bad '=' escape (=2C or =3D expected)")
                out.append("," if escape == "2C" else "=")
                i += 3
            else:
                out.append(c)
                i += 1
        text = "".join(out)
    if len(text) > MAX_USER_CHARS:
        raise _malformed(f"{what} longer than {MAX_USER_CHARS} characters")
    return text


# --- the exchange -------------------------------------------------------------------------------

_CLIENT_FIRST, _SERVER_FIRST, _CLIENT_FINAL, _DONE, _FAILED = range(5)


@dataclass(frozen=True, slots=True)
class ClientFirst:
    """What a client-first message says (parsed, nothing verified)."""

    gs2_header: str
    authzid: str
    user: str
    nonce: str
    bare: str  # client-first-message-bare, as received


class ScramServerExchange:
    """The server side of one SCRAM exchange, in three calls:

        user = ex.receive_client_first(msg)     # then look the user's credential up
        answer = ex.server_first(credential)    # None: no such user -> a fake exchange
        answer = ex.receive_client_final(msg)   # the proof checked: ex.complete

    ``fake_key`` keys the fake salts (keep one per broker process or, better, one the
    brokers share); ``server_nonce`` is for test vectors only."""

    def __init__(self, mechanism: ScramMechanism, *, fake_key: bytes,
                 fake_iterations: int = DEFAULT_ITERATIONS,
                 server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._fake_key = fake_key
        self._fake_iterations = fake_iterations
        self._server_nonce = server_nonce
        self._state = _CLIENT_FIRST
        self._first: ClientFirst | None = None
        self._credential: ScramCredential | None = None
        self._fake = False
        self._nonce = ""
        self._server_first = ""

    @property
    def user(self) -> str | None:
        """The user the client named (once its first message parsed), not yet verified."""
        return self._first.user if self._first is not None else None

    @property
    def complete(self) -> bool:
        """The proof verified: ``user`` is authenticated."""
        return self._state == _DONE

    def receive_client_first(self, message: bytes) -> str:
        """The user the message names; SaslAuthenticationFailedError when it is malformed
        or asks for what franz does not do."""
        self._expect(_CLIENT_FIRST)
        try:
            first = parse_client_first(message)
        except SaslAuthenticationFailedError:
            self._state = _FAILED
            raise
        self._first = first
        self._state = _SERVER_FIRST
        return first.user

    def server_first(self, credential: ScramCredential | None) -> bytes:
        """The server-first message for the user's credential (None, or one unusable with
        this mechanism: a fake exchange that fails at the client's final message)."""
        self._expect(_SERVER_FIRST)
        assert self._first is not None
        if credential is not None and not self._usable(credential):
            credential = None
        if credential is None:
            credential, self._fake = self._fake_credential(self._first.user), True
        self._credential = credential
        snonce = self._server_nonce or secrets.token_urlsafe(SERVER_NONCE_BYTES)
        self._nonce = self._first.nonce + snonce
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = _CLIENT_FINAL
        return self._server_first.encode()

    def receive_client_final(self, message: bytes) -> bytes:
        """The server-final message (``v=...``) when the proof is right; else
        SaslAuthenticationFailedError, with the same message for a wrong password and a
        user without a credential."""
        self._expect(_CLIENT_FINAL)
        try:
            answer = self._verify(message)
        except SaslAuthenticationFailedError:
            self._state = _FAILED
            raise
        self._state = _DONE
        return answer

    # --- inside -----------------------------------------------------------------------------

    def _expect(self, state: int) -> None:
        if self._state != state:
            was, self._state = self._state, _FAILED
            raise SaslAuthenticationFailedError(
                "Authentication failed: the SCRAM exchange is over" if was in (_DONE, _FAILED)
                else "Authentication failed: SCRAM message out of order")

    def _usable(self, credential: ScramCredential) -> bool:
        m = self.mechanism
        return (len(credential.stored_key) == len(credential.server_key) == m.digest_size
                and m.min_iterations <= credential.iterations <= MAX_ITERATIONS
                and 1 <= len(credential.salt) <= MAX_SALT_BYTES)

    def _fake_credential(self, user: str) -> ScramCredential:
        """The same for the same user and key: salt and iterations look like a real user's."""
        m, name = self.mechanism, user.encode("utf-8", "surrogatepass")
        seed = m.name.encode() + b"\0" + name
        salt = hmac.new(self._fake_key, b"salt\0" + seed, "sha256").digest()[:SALT_BYTES]
        return ScramCredential(salt, m.hmac(self._fake_key, b"stored\0" + seed),
                               m.hmac(self._fake_key, b"server\0" + seed),
                               self._fake_iterations)

    def _verify(self, message: bytes) -> bytes:
        first, credential, m = self._first, self._credential, self.mechanism
        assert first is not None and credential is not None
        text = _text(message, "client-final message")
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise _malformed("client-final message without a proof (p=)")
        attrs = without_proof.split(",")
        if len(attrs) < 2 or not attrs[0].startswith("c=") or not attrs[1].startswith("r="):
            raise _malformed("client-final message not c=...,r=...,p=...")
        _check_extensions(attrs[2:], "client-final message", refuse=False)
        binding = _b64(attrs[0][2:], "channel binding (c=)")
        if binding != first.gs2_header.encode():
            raise _failed("channel binding data (c=) differs from the client-first "
                          "message's gs2 header")
        if attrs[1][2:] != self._nonce:
            raise _failed("the nonce (r=) is not the one of the server-first message")
        proof = _b64(proof_text, "proof (p=)")
        if len(proof) != m.digest_size:
            raise _malformed(f"proof (p=) is not {m.digest_size} bytes")
        auth_message = f"{first.bare},{self._server_first},{without_proof}".encode()
        client_signature = m.hmac(credential.stored_key, auth_message)
        client_key = _xor(proof, client_signature)
        proven = hmac.compare_digest(m.hash(client_key), credential.stored_key)
        server_signature = m.hmac(credential.server_key, auth_message)
        if not proven or self._fake:
            raise SaslAuthenticationFailedError(INVALID_CREDENTIALS.format(m.name))
        return b"v=" + base64.b64encode(server_signature)


def parse_client_first(message: bytes) -> ClientFirst:
    """A client-first message; SaslAuthenticationFailedError when it is malformed, asks for
    channel binding, a mandatory or any extension, or an authorization id that is not the
    user."""
    text = _text(message, "client-first message")
    parts = text.split(",")
    if len(parts) < 4:
        raise _malformed("client-first message not gs2-header,n=USER,r=NONCE")
    flag, authz = parts[0], parts[1]
    if flag.startswith("p="):
        raise _failed("channel binding is not supported (no -PLUS mechanism)")
    if flag not in ("n", "y"):
        raise _malformed("client-first message without a gs2 channel-binding flag (n)")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise _malformed("client-first message with a bad authorization id (a=)")
        authzid = decode_saslname(authz[2:], "authorization id")
    bare_parts = parts[2:]
    if bare_parts[0].startswith("m="):
        raise _failed("mandatory SCRAM extensions (m=) are not supported")
    if not bare_parts[0].startswith("n="):
        raise _malformed("client-first message without a user name (n=)")
    user = decode_saslname(bare_parts[0][2:])
    if not bare_parts[1].startswith("r="):
        raise _malformed("client-first message without a nonce (r=)")
    nonce = bare_parts[1][2:]
    if not 1 <= len(nonce) <= MAX_NONCE_CHARS or not all("!" <= c <= "~" for c in nonce):
        raise _malformed(f"client nonce (r=) not 1 to {MAX_NONCE_CHARS} printable characters")
    _check_extensions(bare_parts[2:], "client-first message", refuse=True)
    if authzid and authzid != user:
        raise SaslAuthenticationFailedError("Authentication failed: Client requested an "
                                            "authorization id that is different from username")
    gs2_header = f"{flag},{authz},"
    return ClientFirst(gs2_header, authzid, user, nonce, text[len(gs2_header):])


def _check_extensions(attrs: list[str], what: str, *, refuse: bool) -> None:
    for attr in attrs:
        key, sep, _ = attr.partition("=")
        if not sep or not key.isascii() or not key.isalpha() or len(key) > 32:
            raise _malformed(f"{what} with a malformed attribute")
        if key in ("c", "r", "p", "n", "s", "i", "v", "m"):
            raise _malformed(f"{what} repeats the attribute {key}=")
        if refuse:  # Kafka's only one is tokenauth (delegation tokens): franz has none
            raise _failed(f"the SCRAM extension {key!r} is not supported")


def _text(message: bytes, what: str) -> str:
    if not isinstance(message, bytes | bytearray | memoryview):
        raise _malformed(f"{what} is not bytes")
    if len(message) > MAX_MESSAGE_BYTES:
        raise _malformed(f"{what} longer than {MAX_MESSAGE_BYTES} bytes")
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed(f"{what} is not UTF-8") from None
    if "\0" in text:
        raise _malformed(f"{what} holds a NUL character")
    return text


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise _malformed(f"{what} is not base64") from None


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def _malformed(reason: str) -> SaslAuthenticationFailedError:
    return SaslAuthenticationFailedError(f"Authentication failed: malformed SCRAM message: "
                                         f"{reason}")


def _failed(reason: str) -> SaslAuthenticationFailedError:
    return SaslAuthenticationFailedError(f"Authentication failed: {reason}")
