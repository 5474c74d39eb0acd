"""Alembic migrations on a real SQLite file: up, down, up again, from any directory."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

import migrations
from core.broker.metadata.embedded_store import METADATA
from core.broker.security.sql_store import METADATA as SECURITY_METADATA

TABLES = {"cluster", "controller", "brokers", "topics", "topic_partitions", "topic_configs",
          "users", "acls", "security_changes", "producer_id_block"}


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'metadata.db'}"


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _current_revision(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def _controller_rows(url: str) -> list[tuple[int | None, int]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql("SELECT broker_id, epoch FROM controller")]
    finally:
        engine.dispose()


def test_single_head() -> None:
    script = ScriptDirectory.from_config(migrations.alembic_config("sqlite://"))
    assert script.get_heads() == ["0005"]


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    migrations.upgrade_to_head(db_url)
    assert _tables(db_url) == TABLES
    assert _current_revision(db_url) == "0005"
    assert _controller_rows(db_url) == [(None, 0)]

    migrations.downgrade_to(db_url, "base")
    assert _tables(db_url) == set()
    assert _current_revision(db_url) is None

    migrations.upgrade_to_head(db_url)
    assert _tables(db_url) == TABLES
    assert _controller_rows(db_url) == [(None, 0)]


def test_upgrade_is_idempotent(db_url: str) -> None:
    migrations.upgrade_to_head(db_url)
    migrations.upgrade_to_head(db_url)
    assert _current_revision(db_url) == "0005"
    assert _controller_rows(db_url) == [(None, 0)]


def test_needs_no_ini_and_no_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    url = f"sqlite:///{tmp_path / 'db' / 'metadata.db'}"
    (tmp_path / "db").mkdir()
    migrations.upgrade_to_head(url)
    assert _tables(url) == TABLES
    assert list(elsewhere.iterdir()) == []


def test_head_schema_matches_store_tables(db_url: str) -> None:
    migrations.upgrade_to_head(db_url)
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, [METADATA, SECURITY_METADATA]) == []  # type: ignore[arg-type]
    finally:
        engine.dispose()


def test_logging_is_left_alone(db_url: str) -> None:
    bystander = logging.getLogger("franz.test.bystander")
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    alembic_level = logging.getLogger("alembic").level

    migrations.upgrade_to_head(db_url)

    assert not bystander.disabled  # fileConfig would disable existing loggers
    assert root.handlers == handlers and root.level == level
    assert logging.getLogger("alembic").level == alembic_level
