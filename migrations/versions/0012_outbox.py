"""outbox: every outgoing post (daily post, reminder, results) is stored with the state change that causes
it and marked sent only once the platform accepted it (issue 25)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

Nothing is back-filled: posts made before this revision were made (or lost) the old way.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(length=140), nullable=False),
        sa.Column("channel_pk", sa.Integer(), nullable=False),
        sa.Column("challenge_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=120), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("told", sa.String(length=200), nullable=True),
        sa.Column("message_ref", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('challenge', 'reminder', 'results')", name=op.f("ck_outbox_kind_valid")),
        sa.CheckConstraint("status IN ('pending', 'sent', 'failed')", name=op.f("ck_outbox_status_valid")),
        sa.CheckConstraint("tenant <> ''", name=op.f("ck_outbox_tenant_not_empty")),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_outbox_attempts_not_negative")),
        sa.ForeignKeyConstraint(
            ["challenge_id"],
            ["challenges.id"],
            name=op.f("fk_outbox_challenge_id_challenges"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["channel_pk"], ["channels.id"], name=op.f("fk_outbox_channel_pk_channels"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
        sa.UniqueConstraint("kind", "key", name=op.f("uq_outbox_kind_key")),
    )
    op.create_index(op.f("ix_outbox_tenant"), "outbox", ["tenant"], unique=False)
    op.create_index(op.f("ix_outbox_challenge_id"), "outbox", ["challenge_id"], unique=False)
    op.create_index("ix_outbox_status_next_attempt_at", "outbox", ["status", "next_attempt_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_outbox_status_next_attempt_at", table_name="outbox")
    op.drop_index(op.f("ix_outbox_challenge_id"), table_name="outbox")
    op.drop_index(op.f("ix_outbox_tenant"), table_name="outbox")
    op.drop_table("outbox")
