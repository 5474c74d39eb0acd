"""``MemorySecurityStore``: users and ACLs in this process only.

For a broker assembled without a persistent security store (tests of other parts,
embedding): behaves as the real stores do, changes are announced to the watcher, and
everything is gone when the process ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from core.broker.security.acl import AclBinding, ResourcePattern
from core.broker.security.credentials import StoredCredential
from core.broker.security.scram import ScramCredential
from core.broker.security.store import SecurityChange, SecurityListener, check_scram


class MemorySecurityStore:
    def __init__(self) -> None:
        self._users: dict[str, StoredCredential] = {}
        self._scram: dict[str, dict[str, ScramCredential]] = {}  # user -> mechanism -> it
        self._acls: set[AclBinding] = set()
        self._listeners: list[SecurityListener] = []

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def _tell(self, change: SecurityChange) -> None:
        loop = asyncio.get_running_loop()
        for listener in self._listeners:
            loop.call_soon(listener, change)

    async def get_user(self, name: str) -> StoredCredential | None:
        return self._users.get(name)

    async def get_scram(self, name: str, mechanism: str) -> ScramCredential | None:
        return self._scram.get(name, {}).get(mechanism)

    async def list_users(self) -> list[str]:
        return sorted(self._users)

    async def put_user(self, name: str, credential: StoredCredential,
                       scram: Mapping[str, ScramCredential] | None = None) -> None:
        checked = check_scram(scram)
        self._users[name] = credential
        self._scram[name] = checked
        self._tell(SecurityChange(user=name))

    async def delete_user(self, name: str) -> bool:
        self._scram.pop(name, None)
        found = self._users.pop(name, None) is not None
        if found:
            self._tell(SecurityChange(user=name))
        return found

    async def all_acls(self) -> list[AclBinding]:
        return sorted(self._acls)

    async def acls_of(self, pattern: ResourcePattern) -> list[AclBinding]:
        return sorted(b for b in self._acls if b.pattern == pattern)

    async def add_acls(self, bindings: Iterable[AclBinding]) -> None:
        new = set(bindings) - self._acls
        self._acls |= new
        for pattern in {b.pattern for b in new}:
            self._tell(SecurityChange(pattern=pattern))

    async def remove_acls(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        gone = set(bindings) & self._acls
        self._acls -= gone
        for pattern in {b.pattern for b in gone}:
            self._tell(SecurityChange(pattern=pattern))
        return sorted(gone)

    def watch(self, listener: SecurityListener) -> None:
        self._listeners.append(listener)
