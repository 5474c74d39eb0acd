"""Embedded metadata store: cluster id, controller, brokers, topics, partitions, configs.

The standalone counterpart of Kafka's ZooKeeper layout (see core/broker/metadata/store.py):

    cluster            /cluster/id                           one row: id
    controller         /controller, /controller_epoch        one row: broker_id (NULL: none), epoch
    brokers            /brokers/ids/<id>                     registrations ("ephemeral")
    topics             /brokers/topics/<t>                   name, topic_id, created_ms
    topic_partitions   /brokers/topics/<t>  (replicas) and   replicas and isr are JSON arrays;
                       .../partitions/<p>/state              leader.. NULL until a state is written;
                                                             version is the zkVersion
    topic_configs      /config/topics/<t>                    overrides, one row per key

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cluster",
        sa.Column("id", sa.String(22), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_cluster"),
    )
    controller = op.create_table(
        "controller",
        sa.Column("broker_id", sa.Integer(), nullable=True),
        sa.Column("epoch", sa.Integer(), nullable=False),
    )
    # The single row exists from the start; the store only ever updates it.
    op.bulk_insert(controller, [{"broker_id": None, "epoch": 0}])
    op.create_table(
        "brokers",
        sa.Column("broker_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("rack", sa.String(255), nullable=True),
        sa.Column("timestamp_ms", sa.BigInteger(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("broker_id", name="pk_brokers"),
    )
    op.create_table(
        "topics",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("topic_id", sa.String(64), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_topics"),
    )
    op.create_table(
        "topic_partitions",
        sa.Column("topic", sa.String(255), nullable=False),
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("replicas", sa.Text(), nullable=False),
        sa.Column("leader", sa.Integer(), nullable=True),
        sa.Column("leader_epoch", sa.Integer(), nullable=True),
        sa.Column("isr", sa.Text(), nullable=True),
        sa.Column("controller_epoch", sa.Integer(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["topic"], ["topics.name"], name="fk_topic_partitions_topic", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("topic", "partition", name="pk_topic_partitions"),
    )
    op.create_table(
        "topic_configs",
        sa.Column("topic", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("topic", "key", name="pk_topic_configs"),
    )


def downgrade() -> None:
    op.drop_table("topic_configs")
    op.drop_table("topic_partitions")
    op.drop_table("topics")
    op.drop_table("brokers")
    op.drop_table("controller")
    op.drop_table("cluster")
