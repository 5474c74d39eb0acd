"""The ``Idempotency-Key`` request header of produce (IETF httpapi draft
"The Idempotency-Key HTTP Header Field"; docs/delivery.md).

A produce carrying it is run at most once per key: a later request with the same key
(through any broker, after a failover or a restart, within
``idempotency.key.retention.ms``) gets the first one's answer and writes nothing
(``core.broker.idempotency``). The key is scoped to the authenticated principal, so two
users never see each other's answers. What the request asks is fingerprinted (its path,
so topic and partition, its Content-Type, and its body's length and CRC-32C:
``fingerprint``): the same key with anything else is 422.

The value is 1 to ``MAX_KEY_LENGTH`` printable ASCII characters, bare
(``Idempotency-Key: 5c1f...``, as payment APIs take it) or as the draft's structured
string (``Idempotency-Key: "5c1f..."``); anything else is 400 and nothing is written.
A key needs acks=1 or all: with acks=0 the answer comes before the append, so there is
no result to give a retry (400).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import crc32c
from starlette.requests import Request

from api.errors import ApiError, ErrorCode
from api.security.authentication import principal_name
from core.broker.errors import (
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    IdempotencyKeysExhaustedError,
    IdempotencyOutcomeUnknownError,
)
from core.broker.idempotency.producer import IdempotentRequest

HEADER = "idempotency-key"
#: What fails a whole request carrying a key (never one record of it).
IDEMPOTENCY_REFUSALS = (IdempotencyKeyInUseError, IdempotencyKeyReusedError,
                        IdempotencyKeysExhaustedError, IdempotencyOutcomeUnknownError)
MAX_KEY_LENGTH = 255


def _bad(message: str) -> ApiError:
    return ApiError(400, ErrorCode.BAD_REQUEST, f"Invalid Idempotency-Key header: {message}")


def idempotency_key(request: Request) -> str | None:
    """The header's key, validated; None when the request has none."""
    raw = request.headers.get(HEADER)
    if raw is None:
        return None
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
        if "\\" in value or '"' in value:
            raise _bad("escapes are not accepted in the quoted key")
    if not value:
        raise _bad("the key is empty")
    if len(value) > MAX_KEY_LENGTH:
        raise _bad(f"the key is {len(value)} characters long, at most {MAX_KEY_LENGTH}")
    if not value.isascii() or not value.isprintable():
        raise _bad("the key must be printable ASCII")
    return value


def idempotent_request(request: Request, body: bytes, *, acks: int) -> IdempotentRequest | None:
    """The request's Idempotency-Key scoped to its principal, with the fingerprint of
    what it asks; None without the header."""
    key = idempotency_key(request)
    if key is None:
        return None
    if acks == 0:
        raise ApiError(400, ErrorCode.BAD_REQUEST,
                       "An Idempotency-Key needs acks=1 or acks=all: with acks=0 there is "
                       "no answer to give a retry")
    return IdempotentRequest(_scoped(request, key), fingerprint(request, body))


def fingerprint(request: Request, body: bytes) -> bytes:
    """16 bytes naming what the request asks: a digest of its path and Content-Type
    (8 bytes of SHA-256), the body's length (4) and CRC-32C (4). CRC-32C (the C
    extension, ~25 GB/s) instead of a SHA-256 of the body (~1.6 GB/s: 85 us of a
    140 KB produce): it tells a different body from the first one's for sure when the
    length differs and with probability 1 - 2^-32 otherwise, against mistakes (a key
    reused by accident), not adversaries, whose keys are their own (scoped to their
    principal)."""
    head = _route_digest(request.scope["path"], request.headers.get("content-type", ""))
    return head + (len(body) & 0xFFFFFFFF).to_bytes(4, "big") + \
        crc32c.crc32c(body).to_bytes(4, "big")


@lru_cache(maxsize=1024)
def _route_digest(path: str, content_type: str) -> bytes:
    """8 bytes of SHA-256 of the path and Content-Type (clients repeat theirs)."""
    text = path.encode() + b"\0" + content_type.strip().lower().encode()
    return hashlib.sha256(text).digest()[:8]


def _scoped(request: Request, key: str) -> bytes:
    return principal_name(request).encode() + b"\0" + key.encode()


#: The header as an OpenAPI parameter (``openapi_extra={"parameters": [...]}``).
OPENAPI_PARAMETER = {
    "in": "header", "name": "Idempotency-Key", "required": False,
    "description": "franz extension: run this produce at most once per key. A retry with "
    "the same key and the same request gets the first answer and writes nothing; the same "
    "key with another request is 422; while the first is in progress, 409. 1 to 255 "
    "printable ASCII characters, kept for `idempotency.key.retention.ms` (docs/delivery.md).",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH,
               "pattern": "^[ -~]+$"},
    "example": "9f2c3f4e-6a51-4d1c-9a38-1f0f3c1c2e7a",
}
