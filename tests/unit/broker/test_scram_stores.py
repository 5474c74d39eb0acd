"""SCRAM credentials in the standalone stores: the SQL catalog (a real SQLite file, the
users table's scram_sha_256 / scram_sha_512 columns of Alembic 0004, Kafka's text in
them) and the memory store. Both keep them beside the scrypt credential, replace them
all at once, drop them with the user; the offline ``franz users add`` writes all three."""

from __future__ import annotations

import argparse
import io
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import migrations
from app.commands import users as users_command
from core.broker.security.credentials import StoredCredential
from core.broker.security.memory_store import MemorySecurityStore
from core.broker.security.scram import (
    MECHANISMS,
    SCRAM_SHA_512,
    ScramCredential,
    scram_credentials,
)
from core.broker.security.sql_store import SqlSecurityStore
from core.broker.security.store import SecurityStore

CRED = StoredCredential.create("pw", n=1024)
SCRAM = scram_credentials("pw")


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'data' / 'metadata.db'}"


@pytest.fixture(params=["sql", "memory"])
async def store(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[SecurityStore]:
    s: SecurityStore = (SqlSecurityStore(db_url) if request.param == "sql"
                        else MemorySecurityStore())
    await s.start()
    yield s
    await s.close()


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(sql)]
    finally:
        engine.dispose()


async def test_scram_round_trip_beside_scrypt(store: SecurityStore) -> None:
    assert await store.get_scram("alice", "SCRAM-SHA-256") is None
    await store.put_user("alice", CRED, SCRAM)
    assert await store.get_user("alice") == CRED
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert await store.get_scram("alice", mechanism) == SCRAM[mechanism]
    assert await store.get_scram("alice", "SCRAM-SHA-1") is None
    assert await store.get_scram("alice", "scrypt") is None
    assert await store.list_users() == ["alice"]

    # a new password replaces every credential; a mechanism not given is removed
    new = {"SCRAM-SHA-512": ScramCredential.create(SCRAM_SHA_512, "new")}
    await store.put_user("alice", CRED, new)
    assert await store.get_scram("alice", "SCRAM-SHA-256") is None
    assert await store.get_scram("alice", "SCRAM-SHA-512") == new["SCRAM-SHA-512"]
    await store.put_user("alice", CRED)
    assert await store.get_scram("alice", "SCRAM-SHA-512") is None

    await store.put_user("alice", CRED, SCRAM)
    assert await store.delete_user("alice") is True
    assert await store.get_scram("alice", "SCRAM-SHA-256") is None
    assert await store.get_user("alice") is None and await store.list_users() == []


async def test_unknown_mechanisms_are_refused_before_writing(store: SecurityStore) -> None:
    with pytest.raises(ValueError, match="not a SCRAM mechanism: SCRAM-SHA-1"):
        await store.put_user("alice", CRED, {"SCRAM-SHA-1": SCRAM["SCRAM-SHA-256"]})
    assert await store.list_users() == []


async def test_sql_columns_hold_kafkas_text(db_url: str) -> None:
    store = SqlSecurityStore(db_url)
    await store.start()
    try:
        await store.put_user("alice", CRED, SCRAM)
        assert rows(db_url, "SELECT name, credential, scram_sha_256, scram_sha_512 FROM users") \
            == [("alice", CRED.encode(), SCRAM["SCRAM-SHA-256"].encode(),
                 SCRAM["SCRAM-SHA-512"].encode())]
        text = SCRAM["SCRAM-SHA-256"].encode()
        assert text.startswith("salt=") and ",stored_key=" in text and ",server_key=" in text
        assert text.endswith(",iterations=4096")
    finally:
        await store.close()


async def test_sql_skips_a_malformed_stored_credential(db_url: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    store = SqlSecurityStore(db_url)
    await store.start()
    try:
        await store.put_user("alice", CRED, SCRAM)
        engine = sa.create_engine(db_url)
        with engine.begin() as conn:  # SHA-512 keys in the SHA-256 column; a bad count
            conn.exec_driver_sql("UPDATE users SET scram_sha_256 = ?, scram_sha_512 = ?", (
                SCRAM["SCRAM-SHA-512"].encode(),
                SCRAM["SCRAM-SHA-512"].encode().replace("=4096", "=99")))
        engine.dispose()
        with caplog.at_level(logging.WARNING):
            assert await store.get_scram("alice", "SCRAM-SHA-256") is None
            assert await store.get_scram("alice", "SCRAM-SHA-512") is None
        assert "skipping the SCRAM-SHA-256 credential of 'alice'" in caplog.text
        assert await store.get_user("alice") == CRED  # the scrypt one still works
    finally:
        await store.close()


async def test_users_stored_before_0004_keep_their_password(db_url: str, tmp_path: Path
                                                            ) -> None:
    (tmp_path / "data").mkdir()
    migrations.upgrade_to_head(db_url)
    migrations.downgrade_to(db_url, "0003")
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO users (name, credential, updated_ms) VALUES (?, ?, 0)",
                             ("old", CRED.encode()))
    engine.dispose()
    store = SqlSecurityStore(db_url)  # upgrades to 0004
    await store.start()
    try:
        assert await store.get_user("old") == CRED
        assert await store.get_scram("old", "SCRAM-SHA-256") is None
        await store.put_user("old", CRED, SCRAM)
        assert await store.get_scram("old", "SCRAM-SHA-256") == SCRAM["SCRAM-SHA-256"]
    finally:
        await store.close()
    migrations.downgrade_to(db_url, "0003")  # and back: the rows stay, the columns go
    assert rows(db_url, "SELECT name, credential FROM users") == [("old", CRED.encode())]


def test_offline_users_add_writes_all_three(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    args = argparse.Namespace(action="add", name="carol", api_key=False, output="text",
                              data_dir=str(data_dir), zookeeper=None)
    monkeypatch.setattr("sys.stdin", io.StringIO("carol-secret\n"))
    assert users_command.run_offline(args) == 0
    url = f"sqlite:///{data_dir / 'metadata.db'}"
    [(credential, sha256, sha512)] = rows(
        url, "SELECT credential, scram_sha_256, scram_sha_512 FROM users WHERE name='carol'")
    assert StoredCredential.decode(str(credential)).verify("carol-secret")
    for mechanism, text in (("SCRAM-SHA-256", sha256), ("SCRAM-SHA-512", sha512)):
        m = MECHANISMS[mechanism]
        stored = ScramCredential.decode(str(text), m)
        assert stored.iterations == 4096
        again = ScramCredential.create(m, "carol-secret", salt=stored.salt)
        assert again == stored  # derived from the same password
