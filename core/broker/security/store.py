"""Where users and ACLs live: ``SecurityStore``.

Two backends, as for topic metadata: the SQL catalog of a standalone broker
(``core.broker.security.sql_store``; tables ``users`` and ``acls``) and ZooKeeper in a
cluster (``core.broker.security.zk_store``), where the layout is Kafka's:

    /config/users/<name>                        {"version":1,"config":{"scrypt":"n=..."}}
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

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from core.broker.security.acl import AclBinding, ResourcePattern
from core.broker.security.credentials import StoredCredential


@dataclass(frozen=True, slots=True)
class SecurityChange:
    """``user`` set: that user changed (added, new password, deleted). ``pattern`` set:
    the ACLs of that resource pattern changed. Neither: anything may have changed
    (re-read all), as after a reconnect."""

    user: str | None = None
    pattern: ResourcePattern | None = None


SecurityListener = Callable[[SecurityChange], None]


class SecurityStore(Protocol):
    async def start(self) -> None: ...
    async def close(self) -> None: ...

    # --- users ---------------------------------------------------------------------
    async def get_user(self, name: str) -> StoredCredential | None: ...
    async def list_users(self) -> list[str]: ...
    async def put_user(self, name: str, credential: StoredCredential) -> None:
        """Create the user or replace its credential."""
    async def delete_user(self, name: str) -> bool:
        """False when there was no such user."""

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
