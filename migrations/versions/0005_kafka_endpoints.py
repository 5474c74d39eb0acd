"""Kafka endpoints of a broker registration (Kafka's wire protocol beside HTTP; see
app/kafka_listeners.py).

    brokers.kafka_endpoints   /brokers/ids/<id> "endpoints" and      a JSON array of
                              "listener_security_protocol_map"       {"listener", "host",
                              (its Kafka listeners, not franz's      "port",
                              HTTP one: host and port)               "security_protocol"}

NULL when the broker advertises none: registrations written before this revision, a
broker whose Kafka listeners are off.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # ALTER TABLE ... ADD COLUMN (SQLite adds a nullable column in place)
    op.add_column("brokers", sa.Column("kafka_endpoints", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("brokers") as batch:  # SQLite: the table is copied without it
        batch.drop_column("kafka_endpoints")
