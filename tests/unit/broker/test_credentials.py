"""Stored credentials: scrypt hashes that verify only their secret, survive a round trip
through their text form, refuse malformed text; the verified cache forgets on time and
on change."""

from __future__ import annotations

import pytest

from core.broker.security.credentials import (
    StoredCredential,
    VerifiedCache,
    check_user_name,
    new_api_key,
)


def test_a_credential_verifies_its_secret_only() -> None:
    cred = StoredCredential.create("s3cret", n=1024)
    assert cred.verify("s3cret")
    assert not cred.verify("s3cret ") and not cred.verify("") and not cred.verify("x" * 5000)
    again = StoredCredential.decode(cred.encode())
    assert again == cred and again.verify("s3cret")
    assert "s3cret" not in cred.encode()
    other = StoredCredential.create("s3cret", n=1024)
    assert other.salt != cred.salt and other.hash != cred.hash  # salted


@pytest.mark.parametrize("text", [
    "", "sha256:abc", "scrypt:n=1000,r=8,p=1,salt=AA==,hash=AA==",  # n not a power of 2
    "scrypt:n=1024,r=8,p=1,salt=%%%,hash=AA==", "scrypt:n=1024,r=8,p=1,salt=AA==",
    "scrypt:n=1024,r=0,p=1,salt=AA==,hash=AA==",
])
def test_malformed_credentials_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        StoredCredential.decode(text)


@pytest.mark.parametrize("name", ["", "a/b", "a:b", "a b", "x" * 256, "ü"])
def test_user_names_that_cannot_be_users(name: str) -> None:
    with pytest.raises(ValueError):
        check_user_name(name)


def test_api_keys_are_valid_user_names_with_long_secrets() -> None:
    key, secret = new_api_key()
    assert check_user_name(key) == key and len(secret) >= 40
    assert new_api_key() != (key, secret)


def test_the_verified_cache_expires_and_forgets() -> None:
    cache = VerifiedCache(ttl_s=10)
    cache.remember("alice", "pw", now=100)
    assert cache.hit("alice", "pw", now=105)
    assert not cache.hit("alice", "other", now=105)
    assert not cache.hit("bob", "pw", now=105)
    assert not cache.hit("alice", "pw", now=111)  # expired
    cache.remember("alice", "pw", now=200)
    cache.forget("alice")
    assert not cache.hit("alice", "pw", now=201)
    small = VerifiedCache(ttl_s=10, max_entries=2)
    for i in range(3):
        small.remember(f"u{i}", "pw", now=0)
    assert not small.hit("u0", "pw", now=1) and small.hit("u2", "pw", now=1)
