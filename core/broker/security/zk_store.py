"""Users and ACLs in ZooKeeper: ``ZkSecurityStore``, the cluster backend of
``SecurityStore``, on Kafka's znode layout (see ``core.broker.security.store``), so
Kafka's tools and operators find them where Kafka keeps them.

This module owns the ACL znodes (``/kafka-acl``, ``/kafka-acl-extended/prefixed``), their
change notifications (``/kafka-acl-changes``, ``/kafka-acl-extended-changes``) and the
credential entries of ``/config/users/<name>`` with their ``users/<name>`` notification
in ``/config/changes`` (the user znode and notification codecs are
``core.broker.metadata.zk.paths``'): ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` exactly as
Kafka stores SCRAM credentials (``salt=...,stored_key=...,server_key=...,iterations=N``,
so a user made by Kafka's ``kafka-configs.sh`` authenticates with SCRAM here too) and
franz's ``scrypt`` beside them. A user is a znode with any of the three.

The store opens a ZooKeeper session of its own in ``start()`` (no broker needed: the
offline ``franz users`` and ``franz acls`` commands use it too) and closes it in
``close()``. Every public method is a coroutine for the event loop; ZooKeeper calls run
on the blocking-work pool through ``core.broker.metadata.zk.client.call``, bounded by the
session timeout, and what ZooKeeper raises (connection loss, timeouts) becomes
``MetadataStoreError``.

Writes are read-modify-write on the znode's version, each committed in one multi-op with
its change notification; a lost race (BadVersion, NodeExists, NoNode) is read again, so
two brokers adding ACLs to one resource at once lose nothing. Entries this store cannot
decode (an operation of a newer Kafka) are kept as they are when a znode is rewritten,
and so are a user's other config entries (quotas): its znode goes with its last entry.
Reads skip what is malformed with a warning. A name that cannot be a znode name (``/``,
``.``, ``..``, control characters) is refused with ValueError before anything is written.

Changes: children watches on the three notification znodes report every notification
newer than the newest present at ``start()``; each is re-read and handed to the
listeners as a ``SecurityChange`` on the event loop. A write through this store notifies
its listeners directly once committed (and its own notification is then not reported
again by the watch: writes and re-reads hold one lock). After a lost session, listeners
get ``SecurityChange()`` (re-read everything). Notifications older than 15 minutes are
purged when a new one is written, as Kafka does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from kazoo import exceptions as kz
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch

from core.broker.metadata.store import MetadataStoreError
from core.broker.metadata.zk.client import (
    OpFailed,
    ZkClient,
    call,
    connect,
    split_connect,
    stop_client,
)
from core.broker.metadata.zk.paths import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    MalformedZNodeError,
)
from core.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from core.broker.security.credentials import StoredCredential, check_user_name
from core.broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from core.broker.security.scram import ScramCredential
from core.broker.security.store import SecurityChange, SecurityListener, check_scram
from core.storage.blocking import run_blocking

log = logging.getLogger(__name__)

T = TypeVar("T")
E = TypeVar("E", ResourceType, PatternType, Operation, Permission)

USERS = "users"  # the config entity type of users
SCRYPT_KEY = "scrypt"  # the user's config entry holding its scrypt credential
#: Every config entry of a user that is a credential (the SCRAM ones are Kafka's names).
CREDENTIAL_KEYS = (*SCRAM_MECHANISMS, SCRYPT_KEY)
ACL_ROOTS = {PatternType.LITERAL: "/kafka-acl",
             PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}
ACL_CHANGES = {PatternType.LITERAL: "/kafka-acl-changes",
               PatternType.PREFIXED: "/kafka-acl-extended-changes"}
ACL_CHANGE_PREFIX = "acl_changes_"
RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                  ResourceType.TRANSACTIONAL_ID)
#: Each watched notification znode and the prefix of its sequential children.
NOTICE_PREFIXES = {
    ConfigEntityChangeNotificationZNode.path: ConfigEntityChangeNotificationSequenceZNode.prefix,
    ACL_CHANGES[PatternType.LITERAL]: ACL_CHANGE_PREFIX,
    ACL_CHANGES[PatternType.PREFIXED]: ACL_CHANGE_PREFIX,
}
RACE_RETRIES = 10  # re-reads after a lost optimistic race before giving up
REFRESH_RETRY_S = 1.0  # a notification re-read that failed is tried again after this
PURGE_AFTER_MS = 15 * 60 * 1000  # Kafka's notification lifetime


# --- names and codecs (pure) ---------------------------------------------------------------


def check_znode_name(name: str, what: str) -> str:
    """``name`` when it can be one znode's name, else ValueError naming why."""
    if "/" in name:
        raise ValueError(f"{what} {name!r} holds '/', which ZooKeeper does not allow "
                         "in a znode name")
    if name in ("", ".", ".."):
        raise ValueError(f"{what} {name!r} cannot be a ZooKeeper znode name")
    if any(_refused_by_zookeeper(c) for c in name):
        raise ValueError(f"{what} {name!r} holds control or reserved characters that "
                         "ZooKeeper does not allow in a znode name")
    return name


def _refused_by_zookeeper(char: str) -> bool:
    """ZooKeeper's path check; beyond U+FFFF, Java's UTF-16 surrogates are refused."""
    o = ord(char)
    return o < 0x20 or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xF8FF or o >= 0xFFF0


def _is_znode_name(name: str) -> bool:
    try:
        check_znode_name(name, "name")
    except ValueError:
        return False
    return True


def _named(cls: type[E], text: object) -> E:
    if not isinstance(text, str):
        raise ValueError(f"{cls.__name__}: expected a string, got {text!r}")
    return cast(E, cls.from_name(text))


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def acl_path(pattern: ResourcePattern) -> str:
    return f"{ACL_ROOTS[pattern.pattern_type]}/{pattern.resource_type.camel}/{pattern.name}"


def encode_entry(entry: AccessControlEntry) -> dict[str, str]:
    return {"principal": entry.principal, "permissionType": entry.permission.camel,
            "operation": entry.operation.camel, "host": entry.host}


def decode_entry(obj: Any) -> AccessControlEntry:
    """ValueError (or KeyError, TypeError) when ``obj`` is not an entry this store knows."""
    return AccessControlEntry(str(obj["principal"]), str(obj["host"]),
                              _named(Operation, obj["operation"]),
                              _named(Permission, obj["permissionType"]))


def _entry_or_none(obj: Any) -> AccessControlEntry | None:
    try:
        return decode_entry(obj)
    except (KeyError, TypeError, ValueError):
        return None


def encode_acls(raw_entries: list[Any]) -> bytes:
    return _dumps({"version": 1, "acls": raw_entries})


def raw_entries(path: str, data: bytes) -> list[Any]:
    """The ``acls`` list of an ACL znode, as JSON; MalformedZNodeError if there is none."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedZNodeError(f"{path}: not JSON: {data!r}") from exc
    acls = obj.get("acls") if isinstance(obj, dict) else None
    if not isinstance(acls, list):
        raise MalformedZNodeError(f"{path}: no list of acls: {data!r}")
    return acls


def decode_acls(pattern: ResourcePattern, path: str, data: bytes) -> list[AclBinding]:
    """The bindings of one ACL znode; what cannot be decoded is skipped with a warning."""
    try:
        entries = raw_entries(path, data)
    except MalformedZNodeError as exc:
        log.warning("security store: skipping malformed ACL znode: %s", exc)
        return []
    bindings: dict[AclBinding, None] = {}
    for obj in entries:
        try:
            bindings[AclBinding(pattern, decode_entry(obj))] = None
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("security store: skipping ACL %r of %s: %s", obj, path, exc)
    return list(bindings)


def binding_key(b: AclBinding) -> tuple[str, ...]:
    """A sort key (``AclBinding``'s own order would compare enums, which do not order)."""
    p, e = b.pattern, b.entry
    return (p.resource_type.name, p.pattern_type.name, p.name, e.principal, e.host,
            e.operation.name, e.permission.name)


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    kind = pattern.resource_type.camel
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{kind}:{PatternType.LITERAL.name}:{pattern.name}".encode()
    return _dumps({"version": 1, "resourceType": kind, "name": pattern.name,
                   "patternType": pattern.pattern_type.name})


def decode_literal_acl_change(data: bytes) -> ResourcePattern:
    """``Topic:LITERAL:<name>``, or ``Topic:<name>`` as Kafka before 2.0 wrote it."""
    kind, sep, rest = data.decode().partition(":")
    if not sep:
        raise ValueError(f"not <Type>:<name>: {data!r}")
    pattern_type = PatternType.LITERAL
    head, sep, name = rest.partition(":")
    if sep and head in (PatternType.LITERAL.name, PatternType.PREFIXED.name):
        pattern_type = _named(PatternType, head)
    else:
        name = rest
    return ResourcePattern(_named(ResourceType, kind), name, pattern_type)


def decode_extended_acl_change(data: bytes) -> ResourcePattern:
    obj = json.loads(data)
    return ResourcePattern(_named(ResourceType, obj["resourceType"]), str(obj["name"]),
                           _named(PatternType, obj["patternType"]))


def decode_change(directory: str, data: bytes) -> SecurityChange | None:
    """The change a notification in ``directory`` names; None for other config entities.
    ValueError (or KeyError, TypeError) when it is malformed."""
    if directory == ConfigEntityChangeNotificationZNode.path:
        entity_type, name = ConfigEntityChangeNotificationSequenceZNode.decode(data)
        # "users/<name>/clients/<id>" and "users/<default>" are quotas, not users
        return SecurityChange(user=name) if entity_type == USERS and _is_znode_name(name) \
            else None
    if directory == ACL_CHANGES[PatternType.LITERAL]:
        return SecurityChange(pattern=decode_literal_acl_change(data))
    return SecurityChange(pattern=decode_extended_acl_change(data))


def sequence_of(name: str, prefix: str) -> int | None:
    """The counter ZooKeeper appended to a sequential znode's ``prefix``, if it is one."""
    digits = name[len(prefix):] if name.startswith(prefix) else ""
    return int(digits) if digits.isdigit() else None


def added_to(entries: list[AccessControlEntry], raw: list[Any]) -> list[Any] | None:
    """The JSON entries ``raw`` with ``entries`` added; None when all are there already."""
    present = {_entry_or_none(obj) for obj in raw}
    new = [encode_entry(e) for e in entries if e not in present]
    return raw + new if new else None


def removed_from(wanted: set[AccessControlEntry], gone: list[AccessControlEntry],
                 raw: list[Any]) -> list[Any] | None:
    """The JSON entries ``raw`` without those in ``wanted`` (listed in ``gone``); None when
    none of them is there. Entries this store cannot decode are kept."""
    gone.clear()  # a lost race runs this again on what is there then
    kept = []
    for obj in raw:
        entry = _entry_or_none(obj)
        if entry is None or entry not in wanted:
            kept.append(obj)
        elif entry not in gone:
            gone.append(entry)
    return kept if gone else None


def _user_configs(path: str, data: bytes) -> dict[str, str]:
    try:
        return ConfigEntityZNode.decode(data)
    except MalformedZNodeError as exc:
        log.warning("security store: malformed user znode %s: %s", path, exc)
        return {}


# --- the store -------------------------------------------------------------------------------

#: What a rewrite does with a znode's data: (changed?, the new data or None to delete it).
Update = Callable[[bytes | None], tuple[bool, bytes | None]]


class ZkSecurityStore:
    """``SecurityStore`` on ZooKeeper (see the module docstring). Not for use from
    several event loops."""

    def __init__(self, connect: str, *, session_timeout_s: float = 18.0) -> None:
        self._hosts, self._chroot = split_connect(connect)
        self._timeout_s = session_timeout_s
        self._zk: ZkClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[SecurityListener] = []
        self._lock = asyncio.Lock()  # one write or notification re-read at a time
        self._seen = dict.fromkeys(NOTICE_PREFIXES, -1)  # newest sequence handled per znode
        self._own: dict[str, set[int]] = {d: set() for d in NOTICE_PREFIXES}  # already told
        self._dirty: dict[str, None] = {}  # notification znodes to re-read, in order
        self._refresher: asyncio.Task[None] | None = None
        self._session_lost = False

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        if self._zk is not None:
            raise RuntimeError("ZkSecurityStore already started")
        self._loop = asyncio.get_running_loop()
        zk = await connect(self._hosts, self._chroot, timeout_s=self._timeout_s,
                           listener=self._on_session_state)
        self._zk = zk
        try:
            self._seen = await call(self._prepare)
        except BaseException:
            await self.close()
            raise
        zk.kazoo.handler.spawn(self._start_watches)

    async def close(self) -> None:
        zk, self._zk = self._zk, None
        self._dirty.clear()
        task, self._refresher = self._refresher, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if zk is not None:
            await run_blocking(stop_client, zk.kazoo)

    def watch(self, listener: SecurityListener) -> None:
        self._listeners.append(listener)

    # --- users ---------------------------------------------------------------------------

    async def get_user(self, name: str) -> StoredCredential | None:
        if not _is_znode_name(name):
            return None
        path = ConfigEntityZNode.path(USERS, name)
        found = await self._call(self._client.get_or_none, path)
        text = None if found is None else _user_configs(path, found[0]).get(SCRYPT_KEY)
        if text is None:
            return None
        try:
            return StoredCredential.decode(text)
        except ValueError as exc:
            log.warning("security store: skipping the credential of %s: %s", path, exc)
            return None

    async def get_scram(self, name: str, mechanism: str) -> ScramCredential | None:
        scram = SCRAM_MECHANISMS.get(mechanism)
        if scram is None or not _is_znode_name(name):
            return None
        path = ConfigEntityZNode.path(USERS, name)
        found = await self._call(self._client.get_or_none, path)
        text = None if found is None else _user_configs(path, found[0]).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.decode(text, scram)
        except ValueError as exc:
            log.warning("security store: skipping the %s credential of %s: %s", mechanism,
                        path, exc)
            return None

    async def list_users(self) -> list[str]:
        return await self._call(self._read_user_names)

    async def put_user(self, name: str, credential: StoredCredential,
                       scram: Mapping[str, ScramCredential] | None = None) -> None:
        check_znode_name(check_user_name(name), "user name")
        checked = check_scram(scram)
        path = ConfigEntityZNode.path(USERS, name)

        def update(data: bytes | None) -> tuple[bool, bytes | None]:
            configs = {} if data is None else _user_configs(path, data)
            for mechanism in SCRAM_MECHANISMS:  # in Kafka's order, before franz's own
                found = checked.get(mechanism)
                if found is None:
                    configs.pop(mechanism, None)  # no credential of an older password
                else:
                    configs[mechanism] = found.encode()
            configs.pop(SCRYPT_KEY, None)
            configs[SCRYPT_KEY] = credential.encode()
            return True, ConfigEntityZNode.encode(configs)

        await self._write(path, update, *self._user_notice(name), SecurityChange(user=name))

    async def delete_user(self, name: str) -> bool:
        if not _is_znode_name(name):
            return False
        path = ConfigEntityZNode.path(USERS, name)

        def update(data: bytes | None) -> tuple[bool, bytes | None]:
            if data is None:
                return False, None
            try:
                configs = ConfigEntityZNode.decode(data)
            except MalformedZNodeError:
                return True, None  # unreadable: no user can be left there
            if not [key for key in CREDENTIAL_KEYS if configs.pop(key, None) is not None]:
                return False, None
            # other entries (a quota set by Kafka's tools) stay; the znode goes with the last
            return True, ConfigEntityZNode.encode(configs) if configs else None

        return await self._write(path, update, *self._user_notice(name),
                                 SecurityChange(user=name))

    # --- ACLs ----------------------------------------------------------------------------

    async def all_acls(self) -> list[AclBinding]:
        return sorted(await self._call(self._read_all_acls), key=binding_key)

    async def acls_of(self, pattern: ResourcePattern) -> list[AclBinding]:
        if not _is_znode_name(pattern.name):
            return []  # no such znode can exist
        path = acl_path(pattern)
        found = await self._call(self._client.get_or_none, path)
        return [] if found is None else decode_acls(pattern, path, found[0])

    async def add_acls(self, bindings: Iterable[AclBinding]) -> None:
        for pattern, entries in _by_pattern(bindings).items():
            await self._write_acls(pattern, functools.partial(added_to, entries))

    async def remove_acls(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        removed: list[AclBinding] = []
        for pattern, entries in _by_pattern(bindings).items():
            gone: list[AccessControlEntry] = []
            await self._write_acls(pattern, functools.partial(removed_from, set(entries), gone))
            removed += [AclBinding(pattern, e) for e in gone]
        return removed

    # --- writes --------------------------------------------------------------------------

    async def _write_acls(self, pattern: ResourcePattern,
                          change: Callable[[list[Any]], list[Any] | None]) -> None:
        """Rewrite the ACL znode of ``pattern`` with ``change`` (its entries -> the new
        entries, or None when nothing changes); an empty list deletes the znode."""
        path = acl_path(pattern)

        def update(data: bytes | None) -> tuple[bool, bytes | None]:
            raw: list[Any] = []
            if data is not None:
                try:
                    raw = raw_entries(path, data)
                except MalformedZNodeError as exc:
                    log.warning("security store: replacing malformed ACL znode: %s", exc)
            new = change(raw)
            if new is None:
                return False, None
            return True, encode_acls(new) if new else None

        await self._write(path, update, ACL_CHANGES[pattern.pattern_type] + "/"
                          + ACL_CHANGE_PREFIX, encode_acl_change(pattern),
                          SecurityChange(pattern=pattern))

    @staticmethod
    def _user_notice(name: str) -> tuple[str, bytes]:
        return (ConfigEntityChangeNotificationSequenceZNode.prefix_path,
                ConfigEntityChangeNotificationSequenceZNode.encode(USERS, name))

    async def _write(self, path: str, update: Update, notice_prefix: str, notice: bytes,
                     change: SecurityChange) -> bool:
        """Rewrite ``path`` and write its notification; tell the listeners. False when
        ``update`` changed nothing (then nothing was written)."""
        async with self._lock:
            written = await self._call(self._rewrite, path, update, notice_prefix, notice)
            if written is None:
                return False
            directory, _, name = written.rpartition("/")
            seq = sequence_of(name, NOTICE_PREFIXES[directory])
            if seq is not None:
                self._own[directory].add(seq)  # the watch need not report it again
        self._notify(change)
        return True

    def _rewrite(self, path: str, update: Update, notice_prefix: str, notice: bytes
                 ) -> str | None:
        """Blocking. Read-modify-write of ``path`` on its version, in one multi-op with a
        sequential notification; the notification's path, or None if nothing changed."""
        zk = self._client
        for _ in range(RACE_RETRIES):
            found = zk.get_or_none(path)
            changed, data = update(None if found is None else found[0])
            if not changed or (found is None and data is None):
                return None
            txn = zk.txn(None)
            if found is None:
                txn.create(path, data or b"")
            elif data is None:
                txn.delete(path, found[1].version)
            else:
                txn.set_data(path, data, found[1].version)
            txn.create(notice_prefix, notice, sequence=True)
            try:
                written = str(txn.commit()[-1])
            except OpFailed as exc:
                if not isinstance(exc.cause, kz.BadVersionError | kz.NodeExistsError
                                  | kz.NoNodeError):
                    raise
                if isinstance(exc.cause, kz.NoNodeError):  # a parent removed by someone
                    zk.ensure_path(exc.path.rpartition("/")[0])
                continue
            self._purge_old_notices(written)
            return written
        raise MetadataStoreError(f"security store: {path} kept changing under "
                                 f"{RACE_RETRIES} attempts to update it; try again")

    def _purge_old_notices(self, newest: str) -> None:
        """Blocking, best effort: delete the notifications beside ``newest`` created more
        than 15 minutes before it (ZooKeeper's clock, not ours)."""
        zk = self._client
        directory, _, name = newest.rpartition("/")
        prefix = NOTICE_PREFIXES[directory]
        try:
            stat = zk.exists(newest)
            if stat is None:
                return
            paths = [f"{directory}/{c}" for c in zk.children(directory)
                     if c != name and sequence_of(c, prefix) is not None]
            stale = [p for p, s in zip(paths, zk.exists_many(paths), strict=True)
                     if s is not None and s.ctime < stat.ctime - PURGE_AFTER_MS]
            pending = [zk.kazoo.delete_async(p) for p in stale]
            for result in pending:
                with contextlib.suppress(kz.NoNodeError):
                    result.get(timeout=zk.timeout_s)
        except (kz.KazooException, KazooTimeoutError) as exc:
            log.info("security store: purging old notifications of %s failed: %r",
                     directory, exc)

    # --- changes -------------------------------------------------------------------------

    def _notify(self, change: SecurityChange) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("security listener %r failed on %s", listener, change)

    def _post(self, fn: Callable[..., None], *args: Any) -> bool:
        """From a kazoo thread: run ``fn(*args)`` on the loop. False once closed."""
        loop = self._loop
        if loop is None or self._zk is None:
            return False
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed
            return False
        return True

    def _start_watches(self) -> None:
        """Kazoo thread (a watch's first read may wait for a reconnect: not on our pool).
        Each watch's first callback marks its znode dirty, so a notification written
        between ``_prepare`` and the watch is not missed."""
        for directory in NOTICE_PREFIXES:
            zk = self._zk
            if zk is None:
                return
            try:
                ChildrenWatch(zk.kazoo, directory, functools.partial(self._on_children, directory))
            except kz.ConnectionClosedError:
                return  # closed meanwhile
            except Exception:
                log.exception("security store: cannot watch %s", directory)

    def _on_children(self, directory: str, _children: list[str]) -> bool:
        """Kazoo thread. Returning False ends the watch."""
        return self._post(self._mark_dirty, directory)

    def _on_session_state(self, state: str) -> None:
        """Kazoo's connection thread: must not block or call ZooKeeper."""
        if self._zk is None:
            return  # closing, or still connecting in start()
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("security store: ZooKeeper session lost; reconnecting")
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._post(self._on_new_session)

    def _on_new_session(self) -> None:
        """Watch events may have been missed while there was no session: listeners re-read
        everything, and the notifications are read again (the watches re-arm themselves)."""
        if self._zk is None:
            return
        self._notify(SecurityChange())
        for directory in NOTICE_PREFIXES:
            self._mark_dirty(directory)

    def _mark_dirty(self, directory: str) -> None:
        if self._zk is None:
            return
        self._dirty[directory] = None
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_dirty())

    async def _refresh_dirty(self) -> None:
        while self._dirty and self._zk is not None:
            directory = next(iter(self._dirty))
            del self._dirty[directory]
            try:
                async with self._lock:
                    changes = await self._read_changes(directory)
            except (MetadataStoreError, RuntimeError) as exc:
                log.warning("security store: reading %s failed (%s); retrying", directory, exc)
                if self._loop is not None:
                    self._loop.call_later(REFRESH_RETRY_S, self._mark_dirty, directory)
                continue
            for change in changes:
                self._notify(change)

    async def _read_changes(self, directory: str) -> list[SecurityChange]:
        """The changes named by notifications newer than those handled (lock held)."""
        notices = await self._call(self._read_notices, directory, self._seen[directory])
        own = self._own[directory]
        changes = [c for seq, c in notices if c is not None and seq not in own]
        if notices:
            self._seen[directory] = newest = notices[-1][0]
            self._own[directory] = {seq for seq in own if seq > newest}
        return changes

    # --- blocking reads (on the pool) --------------------------------------------------------

    @property
    def _client(self) -> ZkClient:
        if self._zk is None:
            raise RuntimeError("ZkSecurityStore is not started")
        return self._zk

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._zk is None:
            raise RuntimeError("ZkSecurityStore is not started")
        return await call(fn, *args)

    def _prepare(self) -> dict[str, int]:
        """Create the parents Kafka's authorizer creates (``connect`` made the config
        ones); the newest notification sequence of each watched znode."""
        zk = self._client
        pending = [zk.kazoo.ensure_path_async(p) for p in (
            ConfigEntityTypeZNode.path(USERS), *ACL_CHANGES.values(),
            *(f"{root}/{t.camel}" for root in ACL_ROOTS.values() for t in RESOURCE_TYPES))]
        for result in pending:
            result.get(timeout=zk.timeout_s)
        newest = {}
        for directory, prefix in NOTICE_PREFIXES.items():
            seqs = [sequence_of(c, prefix) for c in zk.children(directory)]
            newest[directory] = max((s for s in seqs if s is not None), default=-1)
        return newest

    def _read_notices(self, directory: str, after: int
                      ) -> list[tuple[int, SecurityChange | None]]:
        """The notifications of ``directory`` newer than sequence ``after``, in order, with
        the change each names (None: not ours, malformed, or purged meanwhile)."""
        zk = self._client
        prefix = NOTICE_PREFIXES[directory]
        fresh = sorted((seq, f"{directory}/{c}") for c in zk.children(directory)
                       if (seq := sequence_of(c, prefix)) is not None and seq > after)
        found = zk.get_many(path for _, path in fresh)
        notices: list[tuple[int, SecurityChange | None]] = []
        for seq, path in fresh:
            change = None
            if path in found:
                try:
                    change = decode_change(directory, found[path][0])
                except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
                    log.warning("security store: skipping malformed notification %s: %s",
                                path, exc)
            notices.append((seq, change))
        return notices

    def _read_user_names(self) -> list[str]:
        zk = self._client
        base = ConfigEntityTypeZNode.path(USERS)
        names = {f"{base}/{n}": n for n in zk.children(base)}
        found = zk.get_many(names)
        return sorted(names[path] for path, (data, _) in found.items()
                      if not _user_configs(path, data).keys().isdisjoint(CREDENTIAL_KEYS))

    def _read_all_acls(self) -> list[AclBinding]:
        zk = self._client
        paths: dict[str, tuple[PatternType, ResourceType, str]] = {}
        for pattern_type, root in ACL_ROOTS.items():
            for kind in RESOURCE_TYPES:
                parent = f"{root}/{kind.camel}"
                for name in zk.children(parent):
                    paths[f"{parent}/{name}"] = (pattern_type, kind, name)
        bindings: list[AclBinding] = []
        for path, (data, _) in zk.get_many(paths).items():
            pattern_type, kind, name = paths[path]
            try:
                pattern = ResourcePattern(kind, name, pattern_type)
            except ValueError as exc:
                log.warning("security store: skipping ACL znode %s: %s", path, exc)
                continue
            bindings += decode_acls(pattern, path, data)
        return bindings


def _by_pattern(bindings: Iterable[AclBinding]
                ) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """The entries per pattern, in order, without repeats; ValueError before anything is
    written if a name cannot be a znode name."""
    grouped: dict[ResourcePattern, dict[AccessControlEntry, None]] = {}
    for b in bindings:
        check_znode_name(b.pattern.name, f"{b.pattern.resource_type.name} name")
        grouped.setdefault(b.pattern, {})[b.entry] = None
    return {pattern: list(entries) for pattern, entries in grouped.items()}
