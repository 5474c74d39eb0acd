"""Producer ids: the last block handed out (Kafka's ``/latest_producer_id_block``).

    producer_id_block   /latest_producer_id_block   one row: broker_id, block_start,
                                                    block_end (inclusive); -1, -1, -1
                                                    before the first block

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    block = op.create_table(
        "producer_id_block",
        sa.Column("broker_id", sa.Integer(), nullable=False),
        sa.Column("block_start", sa.BigInteger(), nullable=False),
        sa.Column("block_end", sa.BigInteger(), nullable=False),
    )
    # The single row exists from the start; the store only ever updates it.
    op.bulk_insert(block, [{"broker_id": -1, "block_start": -1, "block_end": -1}])


def downgrade() -> None:
    op.drop_table("producer_id_block")
