"""The SQL-catalog ``SecurityStore``: users and ACLs of a standalone broker.

It lives in the same SQLite file as the embedded metadata store (``<data dir>/metadata.db``;
schema: ``migrations/versions/0002_*``, ``0004_*``) and works the same way: ``start()`` upgrades the
schema to head and opens its own engine, configured as the metadata store's; every call
runs one short transaction off the event loop through ``core.storage.blocking.run_blocking``,
writes under ``BEGIN IMMEDIATE``. Database failures become ``MetadataStoreError``.

    users              name, credential (``StoredCredential.encode()``), scram_sha_256,
                       scram_sha_512 (``ScramCredential.encode()``, Kafka's text; NULL: none),
                       updated_ms
    acls               one row per binding; enum columns hold the enum names ("TOPIC")
    security_changes   one row: seq, bumped by every write that changed something

Changes reach watchers two ways. A write made here tells them directly, on the event loop
after the commit (``SecurityChange(user=...)`` or one ``SecurityChange(pattern=...)``
per changed pattern). A write made by another process (``franz users add`` offline while
the broker runs) is noticed by a task polling ``security_changes.seq`` every
``poll_interval_s``: when the counter moved past what this store accounts for, watchers
get ``SecurityChange()`` (re-read everything).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row

import migrations
from core.broker.metadata.embedded_store import create_catalog_engine, writer_engine
from core.broker.metadata.store import MetadataStoreError
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

#: What a write body returns: its result, the changes to tell watchers of, and the change
#: counter's value before the write bumped it (None: nothing changed, not bumped).
_Written = tuple[T, list[SecurityChange], int | None]

# --- tables (kept identical to the migrations' head; tests/unit/test_migrations.py checks) --

METADATA = sa.MetaData()

USERS = sa.Table(
    "users", METADATA,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("credential", sa.Text(), nullable=False),
    sa.Column("updated_ms", sa.BigInteger(), nullable=False),
    sa.Column("scram_sha_256", sa.Text(), nullable=True),
    sa.Column("scram_sha_512", sa.Text(), nullable=True),
)
#: The column of each SCRAM mechanism's credential.
SCRAM_COLUMNS = {"SCRAM-SHA-256": USERS.c.scram_sha_256, "SCRAM-SHA-512": USERS.c.scram_sha_512}
assert set(SCRAM_COLUMNS) == set(SCRAM_MECHANISMS)
ACLS = sa.Table(
    "acls", METADATA,
    sa.Column("resource_type", sa.String(32), primary_key=True),
    sa.Column("pattern_type", sa.String(16), primary_key=True),
    sa.Column("resource_name", sa.String(1024), primary_key=True),
    sa.Column("principal", sa.String(512), primary_key=True),
    sa.Column("host", sa.String(255), primary_key=True),
    sa.Column("operation", sa.String(32), primary_key=True),
    sa.Column("permission", sa.String(16), primary_key=True),
)
SECURITY_CHANGES = sa.Table(
    "security_changes", METADATA,
    sa.Column("seq", sa.BigInteger(), nullable=False),
)

#: How long ``start()`` keeps retrying a schema upgrade that lost a race to another process.
class SqlSecurityStore:
    """``SecurityStore`` over SQLAlchemy Core on a SQLite file (``sqlite:///<dir>/metadata.db``).

    Lifecycle: ``start()``, calls, ``close()``. Listeners are called on the event loop; one
    that raises is logged and does not stop the others.
    """

    def __init__(self, url: str, *, poll_interval_s: float = 1.0) -> None:
        self._url = url
        self._poll_interval_s = poll_interval_s
        self._engine: Engine | None = None
        self._writer: Engine | None = None
        self._listeners: list[SecurityListener] = []
        self._poller: asyncio.Task[None] | None = None
        # The counter value up to which watchers have been told of every change. Own
        # writes and the poller update it under ``_seq_lock``, so the poller never takes
        # a write of ours that has committed but is not yet accounted for as foreign.
        self._seen_seq = 0
        self._seq_lock = asyncio.Lock()

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        if self._engine is not None:
            raise RuntimeError("SqlSecurityStore already started")
        try:
            engine, self._seen_seq = await run_blocking(self._migrate_and_open)
        except sa.exc.SQLAlchemyError as exc:
            raise MetadataStoreError(f"security store: cannot open: {exc}") from exc
        self._engine = engine
        self._writer = writer_engine(engine)
        self._start_polling()

    async def close(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with suppress(asyncio.CancelledError):
                await poller
        engine, self._engine, self._writer = self._engine, None, None
        if engine is not None:
            await run_blocking(engine.dispose)

    def watch(self, listener: SecurityListener) -> None:
        self._listeners.append(listener)
        self._start_polling()

    # --- users -------------------------------------------------------------------------

    async def get_user(self, name: str) -> StoredCredential | None:
        text = await self._run(self._get_credential, name)
        if text is None:
            return None
        try:
            return StoredCredential.decode(text)
        except ValueError as exc:
            log.warning("security store: skipping user %r: %s", name, exc)
            return None

    async def get_scram(self, name: str, mechanism: str) -> ScramCredential | None:
        column = SCRAM_COLUMNS.get(mechanism)
        if column is None:
            return None
        text = await self._run(self._get_scram, name, column)
        if text is None:
            return None
        try:
            return ScramCredential.decode(text, SCRAM_MECHANISMS[mechanism])
        except ValueError as exc:
            log.warning("security store: skipping the %s credential of %r: %s", mechanism,
                        name, exc)
            return None

    async def list_users(self) -> list[str]:
        return await self._run(self._list_users)

    async def put_user(self, name: str, credential: StoredCredential,
                       scram: Mapping[str, ScramCredential] | None = None) -> None:
        check_user_name(name)
        checked = check_scram(scram)
        values: dict[str, str | None] = {"credential": credential.encode()}
        for mechanism, column in SCRAM_COLUMNS.items():
            found = checked.get(mechanism)
            values[column.name] = found.encode() if found is not None else None
        await self._write_and_tell(self._put_user, name, values)

    async def delete_user(self, name: str) -> bool:
        return await self._write_and_tell(self._delete_user, name)

    # --- ACLs --------------------------------------------------------------------------

    async def all_acls(self) -> list[AclBinding]:
        return await self._run(self._select_acls, None)

    async def acls_of(self, pattern: ResourcePattern) -> list[AclBinding]:
        return await self._run(self._select_acls, pattern)

    async def add_acls(self, bindings: Iterable[AclBinding]) -> None:
        await self._write_and_tell(self._add_acls, list(dict.fromkeys(bindings)))

    async def remove_acls(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        return await self._write_and_tell(self._remove_acls, list(dict.fromkeys(bindings)))

    # --- plumbing ----------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._engine is None:
            raise RuntimeError("SqlSecurityStore is not started")
        try:
            return await run_blocking(fn, *args)
        except sa.exc.SQLAlchemyError as exc:
            raise MetadataStoreError(f"security store: {exc}") from exc

    async def _write_and_tell(self, fn: Callable[..., _Written[T]], *args: Any) -> T:
        """Run the write body ``fn``, account for its bump of the counter, then tell the
        watchers what it changed."""
        async with self._seq_lock:
            result, changes, before = await self._run(fn, *args)
            if before is not None and before == self._seen_seq:
                self._seen_seq = before + 1
            # else, if bumped, another process wrote since what we accounted for: that
            # gap stays for the poller, whose full re-read covers this write too
        for change in changes:
            self._tell(change)
        return result

    def _tell(self, change: SecurityChange) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("security listener %r failed on %s", listener, change)

    def _start_polling(self) -> None:
        if self._poller is None and self._engine is not None and self._listeners:
            self._poller = asyncio.get_running_loop().create_task(
                self._poll(), name="franz-security-poll")

    async def _poll(self) -> None:
        engine = self._engine
        assert engine is not None
        while True:
            await asyncio.sleep(self._poll_interval_s)
            try:
                async with self._seq_lock:
                    seq = await run_blocking(_read_seq, engine)
                    moved = seq != self._seen_seq
                    self._seen_seq = seq
            except sa.exc.SQLAlchemyError as exc:
                log.warning("security store: cannot poll for changes: %s", exc)
                continue
            if moved:
                self._tell(SecurityChange())

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        assert self._engine is not None
        with self._engine.connect() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        assert self._writer is not None
        with self._writer.begin() as conn:
            yield conn

    def _migrate_and_open(self) -> tuple[Engine, int]:
        """The open engine and the change counter's current value."""
        url = sa.engine.make_url(self._url)
        if url.get_backend_name() == "sqlite":
            if url.database in (None, "", ":memory:"):
                raise ValueError("the security store needs a SQLite file, not memory")
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        migrations.upgrade_to_head(self._url)  # retried while another process upgrades
        engine = create_catalog_engine(self._url)
        try:
            return engine, _read_seq(engine)  # also fails now, not at the first call
        except BaseException:
            engine.dispose()
            raise

    # --- blocking bodies (run on the pool, one transaction each) --------------------------

    def _get_credential(self, name: str) -> str | None:
        with self._read() as conn:
            return conn.execute(sa.select(USERS.c.credential)
                                .where(USERS.c.name == name)).scalar_one_or_none()

    def _get_scram(self, name: str, column: sa.Column[str]) -> str | None:
        with self._read() as conn:
            return conn.execute(sa.select(column)
                                .where(USERS.c.name == name)).scalar_one_or_none()

    def _list_users(self) -> list[str]:
        with self._read() as conn:
            return list(conn.execute(sa.select(USERS.c.name).order_by(USERS.c.name)).scalars())

    def _put_user(self, name: str, values: dict[str, str | None]) -> _Written[None]:
        """``values``: the credential columns, all of them (a SCRAM one None: removed)."""
        now_ms = time.time_ns() // 1_000_000
        with self._write() as conn:
            updated = conn.execute(sa.update(USERS).where(USERS.c.name == name)
                                   .values(**values, updated_ms=now_ms)).rowcount
            if not updated:
                conn.execute(sa.insert(USERS).values(name=name, **values, updated_ms=now_ms))
            return None, *_bump(conn, [SecurityChange(user=name)])

    def _delete_user(self, name: str) -> _Written[bool]:
        with self._write() as conn:
            if not conn.execute(sa.delete(USERS).where(USERS.c.name == name)).rowcount:
                return False, [], None
            return True, *_bump(conn, [SecurityChange(user=name)])

    def _select_acls(self, pattern: ResourcePattern | None) -> list[AclBinding]:
        query = sa.select(ACLS)
        if pattern is not None:
            query = query.where(ACLS.c.resource_type == pattern.resource_type.name,
                                ACLS.c.pattern_type == pattern.pattern_type.name,
                                ACLS.c.resource_name == pattern.name)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return sorted(b for b in map(_binding_of, rows) if b is not None)

    def _add_acls(self, bindings: list[AclBinding]) -> _Written[None]:
        with self._write() as conn:
            added = [b for b in bindings if not _exists(conn, b)]
            if added:
                conn.execute(sa.insert(ACLS), [_columns_of(b) for b in added])
            return None, *_bump(conn, _pattern_changes(added))

    def _remove_acls(self, bindings: list[AclBinding]) -> _Written[list[AclBinding]]:
        with self._write() as conn:
            removed = [b for b in bindings
                       if conn.execute(sa.delete(ACLS).where(*_key_of(b))).rowcount]
            return removed, *_bump(conn, _pattern_changes(removed))


# --- helpers ------------------------------------------------------------------------------


def _read_seq(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(SECURITY_CHANGES.c.seq)).scalar_one())


def _bump(conn: Connection, changes: list[SecurityChange]
          ) -> tuple[list[SecurityChange], int | None]:
    """Advance the change counter inside the caller's write if it changed anything;
    returns ``changes`` and the counter's value before (None: not bumped)."""
    if not changes:
        return changes, None
    before = int(conn.execute(sa.select(SECURITY_CHANGES.c.seq)).scalar_one())
    conn.execute(sa.update(SECURITY_CHANGES).values(seq=SECURITY_CHANGES.c.seq + 1))
    return changes, before


def _pattern_changes(bindings: list[AclBinding]) -> list[SecurityChange]:
    return [SecurityChange(pattern=p) for p in sorted({b.pattern for b in bindings})]


def _columns_of(b: AclBinding) -> dict[str, str]:
    p, e = b.pattern, b.entry
    return {"resource_type": p.resource_type.name, "pattern_type": p.pattern_type.name,
            "resource_name": p.name, "principal": e.principal, "host": e.host,
            "operation": e.operation.name, "permission": e.permission.name}


def _key_of(b: AclBinding) -> list[sa.ColumnElement[bool]]:
    return [ACLS.c[column] == value for column, value in _columns_of(b).items()]


def _exists(conn: Connection, b: AclBinding) -> bool:
    return conn.execute(sa.select(sa.literal(1)).where(*_key_of(b))).first() is not None


def _binding_of(row: Row[Any]) -> AclBinding | None:
    """The binding a row holds, or None (logged) when it does not decode."""
    try:
        return AclBinding(
            ResourcePattern(ResourceType[row.resource_type], row.resource_name,
                            PatternType[row.pattern_type]),
            AccessControlEntry(row.principal, row.host, Operation[row.operation],
                               Permission[row.permission]))
    except (KeyError, ValueError) as exc:
        log.warning("security store: skipping ACL row %s: %s", tuple(row), exc)
        return None
