"""form drafts: what an admin typed into the question form (its options, the five fields and the last
validation error), kept a day per tenant and admin so a form lost to Discord's 15 minutes or a restart can
be reopened filled in (issue 25 section 5)

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27

A new table; downgrade drops it (the drafts are lost, nothing else refers to them).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "form_drafts",
        sa.Column("nonce", sa.String(length=32), nullable=False),
        sa.Column("tenant", sa.String(length=140), nullable=False),
        sa.Column("owner_id", sa.String(length=64), nullable=False),
        sa.Column("question_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("topic", sa.String(length=80), nullable=False),
        sa.Column("difficulty", sa.String(length=32), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("error", sa.String(length=2000), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("tenant <> ''", name=op.f("ck_form_drafts_tenant_not_empty")),
        sa.CheckConstraint("owner_id <> ''", name=op.f("ck_form_drafts_owner_not_empty")),
        sa.CheckConstraint("nonce <> ''", name=op.f("ck_form_drafts_nonce_not_empty")),
        sa.CheckConstraint("expires_at > updated_at", name=op.f("ck_form_drafts_expires_after_update")),
        sa.CheckConstraint(
            "error IS NULL OR submitted_at IS NOT NULL", name=op.f("ck_form_drafts_error_needs_submission")
        ),
        sa.PrimaryKeyConstraint("nonce", name=op.f("pk_form_drafts")),
    )
    op.create_index(op.f("ix_form_drafts_expires_at"), "form_drafts", ["expires_at"], unique=False)
    op.create_index(
        "ix_form_drafts_tenant_owner_id_updated_at",
        "form_drafts",
        ["tenant", "owner_id", "updated_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_form_drafts_tenant_owner_id_updated_at", table_name="form_drafts")
    op.drop_index(op.f("ix_form_drafts_expires_at"), table_name="form_drafts")
    op.drop_table("form_drafts")
