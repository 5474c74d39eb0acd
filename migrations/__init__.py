"""Alembic migrations of the SQL catalog (the embedded metadata store's schema).

The environment is driven from code, never from an ``alembic.ini`` or the working
directory: ``alembic_config(url)`` points Alembic at this package's directory, so the
same call works from a source checkout and from an installed wheel (``env.py``,
``script.py.mako`` and ``versions/*.py`` ship as package data). ``env.py`` does not
touch logging; the application's logging setup decides what Alembic's INFO lines show.

    upgrade_to_head("sqlite:////var/lib/franz/metadata.db")
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

log = logging.getLogger(__name__)

SCRIPT_LOCATION = Path(__file__).resolve().parent

# Alembic publishes the running migration context through the module-global
# ``alembic.context`` proxy, so two migrations in different threads of one process
# would trample each other; run them one at a time.
_LOCK = threading.Lock()
#: How long an upgrade retries while another process upgrades the same file.
RACE_RETRY_S = 10.0


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` built in code (no ini file, no logging setup)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_LOCATION))
    cfg.set_main_option("path_separator", "os")
    # set_main_option goes through ConfigParser interpolation: '%' (URL-encoded
    # passwords) must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade_to_head(url: str) -> None:
    """Create or upgrade the schema at ``url`` to the newest revision. Idempotent; blocking.

    Within a process, upgrades take turns on ``_LOCK``. Across processes (a broker
    starting while ``franz users add --data-dir`` opens the same file) nothing serialises
    them, and SQLite DDL through pysqlite is not transactional, so the loser of a race
    fails ("table ... already exists", "database is locked"); it retries, and once the
    winner has recorded the head revision the retry finds nothing to do. Revisions create
    their tables in one order, so the process behind fails before writing anything."""
    deadline = time.monotonic() + RACE_RETRY_S
    delay = 0.05
    while True:
        try:
            with _LOCK:
                command.upgrade(alembic_config(url), "head")
            return
        except sa.exc.OperationalError as exc:
            if time.monotonic() >= deadline:
                raise
            log.info("schema upgrade raced another process (%s); retrying", exc.orig)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def downgrade_to(url: str, revision: str) -> None:
    """Downgrade the schema at ``url`` to ``revision`` (``"base"`` drops everything). Blocking."""
    with _LOCK:
        command.downgrade(alembic_config(url), revision)
