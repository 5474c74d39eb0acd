"""SASL PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` reads it: one message,

    [authzid] NUL authcid NUL passwd

UTF-8, exactly two NULs, a user and a password that are not empty, an authorization id
that is empty or the user itself (Kafka checks it after the password, franz before: a
refused authorization id costs no key derivation and says nothing of the password).
The password is then checked against the user's stored scrypt credential, the one HTTP
Basic checks (``Security.authenticate_basic``). Pure: parsing only.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.broker.security.credentials import MAX_SECRET_BYTES, MAX_USER_CHARS
from core.broker.security.sasl_errors import SaslAuthenticationFailedError

#: authzid and user of at most MAX_USER_CHARS characters (4 bytes each), the password,
#: two NULs.
MAX_MESSAGE_BYTES = 2 * 4 * MAX_USER_CHARS + MAX_SECRET_BYTES + 2


@dataclass(frozen=True, slots=True)
class PlainCredentials:
    user: str
    password: str

    def __repr__(self) -> str:  # never the password, in a log or a traceback
        return f"PlainCredentials(user={self.user!r}, password=...)"


def parse_plain(message: bytes) -> PlainCredentials:
    """The user and password of a PLAIN message; SaslAuthenticationFailedError when it
    is malformed or asks for an authorization id other than the user."""
    if not isinstance(message, bytes | bytearray | memoryview):
        raise _failed("malformed PLAIN message")
    if len(message) > MAX_MESSAGE_BYTES:
        raise _failed(f"PLAIN message longer than {MAX_MESSAGE_BYTES} bytes")
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise _failed("PLAIN message is not UTF-8") from None
    tokens = text.split("\0")
    if len(tokens) != 3:
        raise _failed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                      f"{min(len(tokens), 1000)}")
    authzid, user, password = tokens
    if not user:
        raise _failed("username not specified")
    if not password:
        raise _failed("password not specified")
    if len(user) > MAX_USER_CHARS:
        raise _failed(f"username longer than {MAX_USER_CHARS} characters")
    if len(password.encode("utf-8")) > MAX_SECRET_BYTES:
        raise _failed(f"password longer than {MAX_SECRET_BYTES} bytes")
    if authzid and authzid != user:
        raise _failed("Client requested an authorization id that is different from username")
    return PlainCredentials(user, password)


def _failed(reason: str) -> SaslAuthenticationFailedError:
    return SaslAuthenticationFailedError(f"Authentication failed: {reason}")
