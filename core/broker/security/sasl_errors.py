"""The two ways a SASL authentication ends badly, with Kafka's error numbers (the wire
server answers SaslHandshake / SaslAuthenticate with ``error_code`` and ``message``).

Every failure of an exchange, whatever its cause (a malformed message, a channel binding
asked for, a wrong password, an unknown user), is ``SaslAuthenticationFailedError``; its
message says what was wrong with the message, never whether the user exists.
"""

from __future__ import annotations

from core.errors import FranzError


class SaslAuthenticationFailedError(FranzError):
    """Kafka's SASL_AUTHENTICATION_FAILED: the exchange failed; the connection is closed
    after the answer."""

    error_code = 58


class UnsupportedSaslMechanismError(FranzError):
    """Kafka's UNSUPPORTED_SASL_MECHANISM: the client asked for a mechanism this
    listener does not enable (or franz does not have)."""

    error_code = 33
