"""learned difficulty: each question's difficulty estimated from one tenant's first attempts, updated as
challenges close (issue 30 section 2; bot/core/difficulty.py)

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28

A new table; downgrade drops it (the estimates are lost; the next closes start again from the labels).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "question_difficulty",
        sa.Column("tenant", sa.String(length=140), nullable=False),
        sa.Column("question_id", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=16), nullable=False),
        sa.Column("rating", sa.Double(), nullable=False),
        sa.Column("information", sa.Double(), nullable=False),
        sa.Column("first_attempts", sa.Integer(), nullable=False),
        sa.Column("first_correct", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("tenant <> ''", name=op.f("ck_question_difficulty_tenant_not_empty")),
        sa.CheckConstraint(
            "first_correct >= 0 AND first_correct <= first_attempts",
            name=op.f("ck_question_difficulty_counts_valid"),
        ),
        sa.CheckConstraint("information > 0", name=op.f("ck_question_difficulty_information_positive")),
        sa.CheckConstraint(
            "rating >= -6 AND rating <= 6", name=op.f("ck_question_difficulty_rating_in_range")
        ),
        sa.CheckConstraint("label <> ''", name=op.f("ck_question_difficulty_label_not_empty")),
        sa.ForeignKeyConstraint(
            ["question_id"],
            ["questions.id"],
            name=op.f("fk_question_difficulty_question_id_questions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant", "question_id", name=op.f("pk_question_difficulty")),
    )
    op.create_index(
        op.f("ix_question_difficulty_question_id"), "question_difficulty", ["question_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_question_difficulty_question_id"), table_name="question_difficulty")
    op.drop_table("question_difficulty")
