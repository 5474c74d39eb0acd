"""SqlSecurityStore on a real SQLite file under tmp_path: users, ACLs, change notices
(own writes directly, another store instance's through the poller)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from core.broker.metadata.embedded_store import EmbeddedMetadataStore
from core.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from core.broker.security.credentials import StoredCredential
from core.broker.security.sql_store import SqlSecurityStore
from core.broker.security.store import SecurityChange, SecurityStore
from core.clock import ManualClock

ROOT = Path(__file__).resolve().parents[3]
POLL_S = 0.05
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
PAY = ResourcePattern(ResourceType.TOPIC, "pay-", PatternType.PREFIXED)


def acl(pattern: ResourcePattern, who: str = "User:alice", op: Operation = Operation.READ,
        permission: Permission = Permission.ALLOW) -> AclBinding:
    return AclBinding(pattern, AccessControlEntry(who, "*", op, permission))


def cred(secret: str = "pw") -> StoredCredential:
    return StoredCredential.create(secret, n=1024)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'data' / 'metadata.db'}"


OpenStore = Callable[[], Awaitable[SqlSecurityStore]]


@pytest.fixture
async def open_store(db_url: str) -> AsyncIterator[OpenStore]:
    """Opens started stores on the same file (each as another process would); all are
    closed at the end."""
    made: list[SqlSecurityStore] = []

    async def _open() -> SqlSecurityStore:
        s = SqlSecurityStore(db_url, poll_interval_s=POLL_S)
        await s.start()
        made.append(s)
        return s

    yield _open
    for s in made:
        await s.close()


@pytest.fixture
async def store(open_store: OpenStore) -> SqlSecurityStore:
    return await open_store()


def record(s: SqlSecurityStore) -> list[SecurityChange]:
    changes: list[SecurityChange] = []
    s.watch(changes.append)
    return changes


async def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


# --- lifecycle ---------------------------------------------------------------------------


def test_is_a_security_store(store: SqlSecurityStore) -> None:
    _: SecurityStore = store  # checked by mypy; the protocol has no runtime check


async def test_shares_the_file_with_the_metadata_store(db_url: str) -> None:
    metadata = EmbeddedMetadataStore(db_url, clock=ManualClock())
    security = SqlSecurityStore(db_url)
    # both upgrade the same fresh file at once: the migrations' lock makes them take turns
    await asyncio.gather(metadata.start(), security.start())
    try:
        await security.put_user("alice", cred())
        assert await metadata.topic_names() == []
        assert await security.list_users() == ["alice"]
    finally:
        await security.close()
        await metadata.close()


# Started by each racing process: waits for the shared start time, opens, lists users.
_RACER = """
import asyncio, sys, time
from core.broker.security.sql_store import SqlSecurityStore
async def main():
    store = SqlSecurityStore(sys.argv[1])
    while time.time() < float(sys.argv[2]):
        pass
    await store.start()
    print(await store.list_users())
    await store.close()
asyncio.run(main())
"""


def test_processes_racing_to_create_the_schema_all_start(db_url: str) -> None:
    start_at = str(time.time() + 1.5)  # after every interpreter has imported franz
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, db_url, start_at], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(3)]
    results = [(p.communicate(timeout=60), p.returncode) for p in racers]
    assert [(out, code) for (out, _), code in results] == [("[]\n", 0)] * 3, results
    assert rows(db_url, "SELECT seq FROM security_changes") == [(0,)]


async def test_calls_before_start_fail_clearly(db_url: str) -> None:
    with pytest.raises(RuntimeError, match="not started"):
        await SqlSecurityStore(db_url).list_users()


async def test_memory_database_is_refused() -> None:
    with pytest.raises(ValueError, match="SQLite file"):
        await SqlSecurityStore("sqlite://").start()


# --- users -------------------------------------------------------------------------------


async def test_user_round_trip_and_replace(store: SqlSecurityStore, open_store: OpenStore) -> None:
    assert await store.get_user("alice") is None
    assert await store.list_users() == []
    first = cred("one")
    await store.put_user("bob", cred())
    await store.put_user("alice", first)
    assert await store.get_user("alice") == first
    assert await store.list_users() == ["alice", "bob"]

    await store.put_user("alice", cred("two"))
    again = await (await open_store()).get_user("alice")
    assert again is not None and again.verify("two") and not again.verify("one")


async def test_delete_user(store: SqlSecurityStore) -> None:
    await store.put_user("alice", cred())
    assert await store.delete_user("alice") is True
    assert await store.delete_user("alice") is False
    assert await store.get_user("alice") is None


async def test_bad_user_name_is_refused(store: SqlSecurityStore) -> None:
    with pytest.raises(ValueError, match="user name"):
        await store.put_user("a:b", cred())


async def test_credential_is_stored_as_its_text(store: SqlSecurityStore, db_url: str) -> None:
    c = cred()
    await store.put_user("alice", c)
    assert rows(db_url, "SELECT name, credential FROM users") == [("alice", c.encode())]


# --- ACLs --------------------------------------------------------------------------------


async def test_acl_round_trip(store: SqlSecurityStore, db_url: str) -> None:
    bindings = [acl(ORDERS), acl(ORDERS, "User:bob", Operation.WRITE, Permission.DENY),
                acl(PAY, "User:*", Operation.ALL)]
    await store.add_acls(bindings)
    assert await store.all_acls() == sorted(bindings)
    assert await store.acls_of(ORDERS) == sorted(bindings[:2])
    assert await store.acls_of(PAY) == [bindings[2]]
    assert await store.acls_of(ResourcePattern(ResourceType.GROUP, "orders",
                                               PatternType.LITERAL)) == []
    # enum columns hold the enum names
    assert ("TOPIC", "PREFIXED", "pay-", "User:*", "*", "ALL", "ALLOW") in rows(
        db_url, "SELECT resource_type, pattern_type, resource_name, principal, host, "
                "operation, permission FROM acls")


async def test_add_acls_is_idempotent(store: SqlSecurityStore) -> None:
    await store.add_acls([acl(ORDERS)])
    await store.add_acls([acl(ORDERS), acl(ORDERS), acl(PAY)])
    assert await store.all_acls() == sorted([acl(ORDERS), acl(PAY)])


async def test_remove_acls_returns_only_those_that_existed(store: SqlSecurityStore) -> None:
    await store.add_acls([acl(ORDERS), acl(PAY)])
    removed = await store.remove_acls([acl(ORDERS), acl(ORDERS, "User:bob"), acl(ORDERS)])
    assert removed == [acl(ORDERS)]
    assert await store.remove_acls([acl(ORDERS)]) == []
    assert await store.all_acls() == [acl(PAY)]


async def test_undecodable_rows_are_skipped_with_a_warning(
    store: SqlSecurityStore, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    await store.add_acls([acl(ORDERS)])
    execute(db_url, "INSERT INTO acls VALUES "
                    "('TOPIC', 'LITERAL', 'orders', 'User:x', '*', 'FLY', 'ALLOW')")
    with caplog.at_level(logging.WARNING, logger="core.broker.security.sql_store"):
        assert await store.acls_of(ORDERS) == [acl(ORDERS)]
    assert "FLY" in caplog.text


# --- changes -----------------------------------------------------------------------------


async def test_own_changes_are_told_directly(store: SqlSecurityStore) -> None:
    changes = record(store)
    await store.put_user("alice", cred())
    await store.delete_user("alice")
    await store.delete_user("alice")  # nothing changed: nothing told
    await store.add_acls([acl(ORDERS), acl(PAY), acl(ORDERS, "User:bob")])
    await store.add_acls([acl(ORDERS)])  # already there
    await store.remove_acls([acl(PAY)])
    await store.remove_acls([acl(PAY)])  # already gone
    await asyncio.sleep(POLL_S * 4)  # the poller adds nothing for own writes
    assert changes == [SecurityChange(user="alice"), SecurityChange(user="alice"),
                       SecurityChange(pattern=ORDERS), SecurityChange(pattern=PAY),
                       SecurityChange(pattern=PAY)]


async def test_every_write_bumps_the_counter(store: SqlSecurityStore, db_url: str) -> None:
    assert rows(db_url, "SELECT seq FROM security_changes") == [(0,)]
    await store.put_user("alice", cred())
    await store.add_acls([acl(ORDERS), acl(PAY)])
    await store.add_acls([acl(ORDERS)])
    assert rows(db_url, "SELECT seq FROM security_changes") == [(2,)]


async def test_a_failing_listener_does_not_stop_the_others(store: SqlSecurityStore) -> None:
    def boom(_: SecurityChange) -> None:
        raise RuntimeError("boom")

    store.watch(boom)
    changes = record(store)
    await store.put_user("alice", cred())
    assert changes == [SecurityChange(user="alice")]


async def test_another_process_change_is_noticed(open_store: OpenStore) -> None:
    broker, offline = await open_store(), await open_store()
    changes = record(broker)
    await offline.put_user("alice", cred())
    await wait_for(lambda: SecurityChange() in changes)
    assert await broker.list_users() == ["alice"]

    changes.clear()
    await offline.add_acls([acl(ORDERS)])
    await wait_for(lambda: SecurityChange() in changes)
    assert await broker.all_acls() == [acl(ORDERS)]


async def test_interleaved_writes_still_reach_the_watcher(open_store: OpenStore) -> None:
    broker, offline = await open_store(), await open_store()
    changes = record(broker)
    await offline.put_user("bob", cred())
    await broker.put_user("alice", cred())  # bumps past bob's change: still re-read
    await wait_for(lambda: SecurityChange() in changes)
    assert SecurityChange(user="alice") in changes


async def test_close_stops_polling(store: SqlSecurityStore) -> None:
    record(store)
    poller = store._poller
    assert poller is not None and not poller.done()
    await store.close()
    assert poller.done()


# --- helpers -----------------------------------------------------------------------------


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(sql)]
    finally:
        engine.dispose()


def execute(url: str, sql: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
    finally:
        engine.dispose()
