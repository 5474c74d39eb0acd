"""SCRAM credentials: a user's SCRAM-SHA-256 and SCRAM-SHA-512 credentials beside its
scrypt one (SASL over Kafka's protocol; see core/broker/security/scram.py).

    users.scram_sha_256   /config/users/<name> "SCRAM-SHA-256"   Kafka's text:
    users.scram_sha_512   /config/users/<name> "SCRAM-SHA-512"   "salt=<b64>,stored_key=<b64>,
                                                                 server_key=<b64>,iterations=N"

NULL when the user has none: the users stored before this revision keep their password
for HTTP Basic and SASL PLAIN and get SCRAM credentials when it is next set.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # one ALTER TABLE ... ADD COLUMN each (SQLite adds a nullable column in place)
    op.add_column("users", sa.Column("scram_sha_256", sa.Text(), nullable=True))
    op.add_column("users", sa.Column("scram_sha_512", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:  # SQLite: the table is copied without them
        batch.drop_column("scram_sha_512")
        batch.drop_column("scram_sha_256")
