"""Alembic migrations of the SQL catalog (the embedded metadata store's schema)."""
