"""question drafts (admins' questions from chat forms waiting for Save) and delivered chat events (to drop
a platform's redelivery in any process), kept in the database

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "question_drafts",
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.String(length=200), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=500), nullable=True),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_question_drafts")),
    )
    op.create_index(op.f("ix_question_drafts_created_at"), "question_drafts", ["created_at"], unique=False)
    op.create_table(
        "delivered_events",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_delivered_events")),
    )
    op.create_index(op.f("ix_delivered_events_seen_at"), "delivered_events", ["seen_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_delivered_events_seen_at"), table_name="delivered_events")
    op.drop_table("delivered_events")
    op.drop_index(op.f("ix_question_drafts_created_at"), table_name="question_drafts")
    op.drop_table("question_drafts")
