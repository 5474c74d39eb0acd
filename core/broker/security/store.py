"""Where users and ACLs live: ``SecurityStore``.

Two backends, as for topic metadata: the SQL catalog of a standalone broker
(``core.broker.security.sql_store``; tables ``users`` and ``acls``) and ZooKeeper in a
cluster (``core.broker.security.zk_store``), where the layout is Kafka's:

    /config/users/<name>                        {"version":1,"config":{"SCRAM-SHA-256":
                                                 "salt=...,stored_key=...,server_key=...,
                                                 iterations=4096","SCRAM-SHA-512":"...",
                                                 "scrypt":"scrypt:n=..."}}
    /config/changes/config_change_<seq> (S)     {"version":2,"entity_path":"users/<name>"}
    /kafka-acl/<Type>/<name>                    {"version":1,"acls":[{"principal":"User:a",
                                                 "permissionType":"Allow","operation":"Read",
                                                 "host":"*"}]}        (LITERAL patterns)
    /kafka-acl-extended/prefixed/<Type>/<name>  the same JSON         (PREFIXED patterns)
    /kafka-acl-changes/acl_changes_<seq> (S)    "Topic:LITERAL:<name>"
    /kafka-acl-extended-changes/acl_changes_<seq> (S)
                                                {"version":1,"resourceType":"Topic",
                                                 "name":"<name>","patternType":"PREFIXED"}

Both backends can be opened without a broker (``franz users`` and ``franz acls``
offline) and tell a running broker of every change, made by it or by anyone else
(another broker, an offline command), through the listener given to ``watch``: it is
called on the event loop with a ``SecurityChange`` after the change is visible to
reads. A listener re-reads what the change names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from core.broker.security.acl import AclBinding, ResourcePattern
from core.broker.security.credentials import StoredCredential
from core.broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from core.broker.security.scram import ScramCredential


@dataclass(frozen=True, slots=True)
class SecurityChange:
    """``user`` set: that user changed (added, new password, deleted). ``pattern`` set:
    the ACLs of that resource pattern changed. Neither: anything may have changed
    (re-read all), as after a reconnect."""

    user: str | None = None
    pattern: ResourcePattern | None = None


SecurityListener = Callable[[SecurityChange], None]


def check_scram(scram: Mapping[str, ScramCredential] | None) -> dict[str, ScramCredential]:
    """``scram`` as a dict, ValueError when it names a mechanism franz does not store."""
    found = dict(scram or {})
    unknown = set(found) - set(SCRAM_MECHANISMS)
    if unknown:
        raise ValueError(f"not a SCRAM mechanism: {', '.join(sorted(unknown))} "
                         f"(expected {' or '.join(SCRAM_MECHANISMS)})")
    return found


class SecurityStore(Protocol):
    async def start(self) -> None: ...
    async def close(self) -> None: ...

    # --- users ---------------------------------------------------------------------
    # A user has a scrypt credential (HTTP Basic, SASL PLAIN) and, beside it, one SCRAM
    # credential per mechanism (SASL SCRAM-SHA-256, SCRAM-SHA-512), all from one password.
    async def get_user(self, name: str) -> StoredCredential | None: ...
    async def get_scram(self, name: str, mechanism: str) -> ScramCredential | None:
        """The user's credential of SCRAM ``mechanism`` ("SCRAM-SHA-256"); None when it
        has none (or the mechanism is not one of ``SCRAM_MECHANISMS``)."""
    async def list_users(self) -> list[str]: ...
    async def put_user(self, name: str, credential: StoredCredential,
                       scram: Mapping[str, ScramCredential] | None = None) -> None:
        """Create the user or replace its credentials: the scrypt one and the SCRAM ones of
        ``scram`` (mechanism name -> credential). A mechanism ``scram`` does not name is
        removed, so no credential of an older password is left; ValueError for a name
        that is not one of ``SCRAM_MECHANISMS``."""
    async def delete_user(self, name: str) -> bool:
        """Remove every credential of the user; False when there was no such user."""

    # --- ACLs ----------------------------------------------------------------------
    async def all_acls(self) -> list[AclBinding]: ...
    async def acls_of(self, pattern: ResourcePattern) -> list[AclBinding]: ...
    async def add_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Add bindings; one already there is left as it is."""
    async def remove_acls(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Remove bindings; the ones that were there."""

    # --- changes -------------------------------------------------------------------
    def watch(self, listener: SecurityListener) -> None:
        """Call ``listener`` on the event loop for every change from now on."""
