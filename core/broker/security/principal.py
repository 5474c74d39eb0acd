"""Kafka principals: ``User:<name>``.

Every request has one: the user a Basic credential names, the name mapped from a
client certificate, or ``User:ANONYMOUS`` when authentication is off (Kafka's
PLAINTEXT principal). ``User:*`` appears only in ACLs, where it matches every user.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"
MAX_NAME_CHARS = 255


@dataclass(frozen=True, slots=True)
class Principal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> Principal:
        return cls(USER_TYPE, name)

    @classmethod
    def parse(cls, text: str) -> Principal:
        """``Type:name``; ValueError naming what is wrong otherwise."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"principal {text!r} is not of the form Type:name (e.g. User:alice)")
        if len(name) > MAX_NAME_CHARS:
            raise ValueError(f"principal name longer than {MAX_NAME_CHARS} characters")
        return cls(kind, name)


ANONYMOUS = Principal.user("ANONYMOUS")
WILDCARD_PRINCIPAL = Principal.user("*")


def parse_super_users(text: str) -> frozenset[Principal]:
    """``super.users``: ``User:a;User:b`` (semicolon-separated, as Kafka)."""
    return frozenset(Principal.parse(p.strip()) for p in text.split(";") if p.strip())
