"""Security: users and ACLs of a standalone broker, and the change counter.

The SQL counterpart of Kafka's ZooKeeper layout (see core/broker/security/store.py):

    users              /config/users/<name>             name, credential (StoredCredential
                                                        text: "scrypt:n=..."), updated_ms
    acls               /kafka-acl/<Type>/<name>,        one row per binding; the enum columns
                       /kafka-acl-extended/prefixed/..  hold the enum names ("TOPIC", "READ")
    security_changes   /config/changes, /kafka-acl-     one row: seq, bumped by every write so
                       changes (sequential nodes)       that other processes notice it

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("credential", sa.Text(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_users"),
    )
    op.create_table(
        "acls",
        sa.Column("resource_type", sa.String(32), nullable=False),
        sa.Column("pattern_type", sa.String(16), nullable=False),
        sa.Column("resource_name", sa.String(1024), nullable=False),
        sa.Column("principal", sa.String(512), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("operation", sa.String(32), nullable=False),
        sa.Column("permission", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint(
            "resource_type", "pattern_type", "resource_name", "principal", "host",
            "operation", "permission", name="pk_acls",
        ),
    )
    changes = op.create_table(
        "security_changes",
        sa.Column("seq", sa.BigInteger(), nullable=False),
    )
    # The single row exists from the start; the store only ever updates it.
    op.bulk_insert(changes, [{"seq": 0}])


def downgrade() -> None:
    op.drop_table("security_changes")
    op.drop_table("acls")
    op.drop_table("users")
