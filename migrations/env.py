"""Alembic environment: the URL comes from the config built in ``migrations.alembic_config``.

Deliberately no ``logging.config.fileConfig`` here: migrations run inside the broker
process at start, and must not reconfigure its logging. No ``target_metadata``
either: revisions are written by hand against explicit table definitions, and
``tests/unit/test_migrations.py`` checks that the head schema matches the tables the
store uses.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

config = context.config


def run_migrations_offline() -> None:
    """Emit SQL to stdout (``alembic upgrade --sql``) without a database connection."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    try:
        with connectable.connect() as connection:
            # render_as_batch: SQLite cannot ALTER most things; batch mode copies tables.
            context.configure(connection=connection, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        connectable.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
