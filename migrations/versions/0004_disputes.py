"""disputes, answer corrections and re-scoring (issue 7)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21

Reserved slot in the revision chain so parallel work on separate features never forks the head; the
feature fills in upgrade()/downgrade() for its own tables only.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "disputes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("player_pk", sa.Integer(), nullable=False),
        sa.Column("question_version_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=True),
        sa.Column("variant", sa.Boolean(), nullable=False),
        sa.Column("code_sha256", sa.String(length=64), nullable=False),
        sa.Column("verdict_status", sa.String(length=16), nullable=False),
        sa.Column("verification", sa.String(length=16), nullable=False),
        sa.Column("matched_letter", sa.String(length=1), nullable=True),
        sa.Column("official_letter", sa.String(length=1), nullable=True),
        sa.Column("explanation", sa.String(length=4000), nullable=False),
        sa.Column("verdict", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "verification IN ('confirmed', 'contradicted', 'cannot_check')",
            name=op.f("ck_disputes_verification_valid"),
        ),
        sa.ForeignKeyConstraint(
            ["player_pk"], ["players.id"], name=op.f("fk_disputes_player_pk_players"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["problem_id"], ["problems.id"], name=op.f("fk_disputes_problem_id_problems"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["question_version_id"],
            ["question_versions.id"],
            name=op.f("fk_disputes_question_version_id_question_versions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_disputes")),
    )
    with op.batch_alter_table("disputes", schema=None) as batch_op:
        batch_op.create_index("ix_disputes_player_created", ["player_pk", "created_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_disputes_question_version_id"), ["question_version_id"], unique=False
        )

    op.create_table(
        "question_flags",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.String(length=64), nullable=False),
        sa.Column("question_version_id", sa.Integer(), nullable=False),
        sa.Column("dispute_id", sa.Integer(), nullable=True),
        sa.Column("official_letter", sa.String(length=1), nullable=True),
        sa.Column("matched_letter", sa.String(length=1), nullable=True),
        sa.Column("explanation", sa.String(length=4000), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('open', 'resolved')", name=op.f("ck_question_flags_status_valid")),
        sa.ForeignKeyConstraint(
            ["dispute_id"], ["disputes.id"], name=op.f("fk_question_flags_dispute_id_disputes"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["question_id"], ["questions.id"], name=op.f("fk_question_flags_question_id_questions"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["question_version_id"],
            ["question_versions.id"],
            name=op.f("fk_question_flags_question_version_id_question_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_question_flags")),
        sa.UniqueConstraint("question_version_id", name=op.f("uq_question_flags_question_version_id")),
    )
    with op.batch_alter_table("question_flags", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_question_flags_question_id"), ["question_id"], unique=False)

    op.create_table(
        "answer_corrections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.String(length=64), nullable=False),
        sa.Column("from_version_id", sa.Integer(), nullable=False),
        sa.Column("to_version_id", sa.Integer(), nullable=False),
        sa.Column("old_letter", sa.String(length=1), nullable=True),
        sa.Column("new_letter", sa.String(length=1), nullable=False),
        sa.Column("corrected_by", sa.String(length=200), nullable=False),
        sa.Column("corrected_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sessions_rescored", sa.Integer(), nullable=False),
        sa.Column("points_delta", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["from_version_id"],
            ["question_versions.id"],
            name=op.f("fk_answer_corrections_from_version_id_question_versions"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["question_id"],
            ["questions.id"],
            name=op.f("fk_answer_corrections_question_id_questions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["to_version_id"],
            ["question_versions.id"],
            name=op.f("fk_answer_corrections_to_version_id_question_versions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_answer_corrections")),
    )
    with op.batch_alter_table("answer_corrections", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_answer_corrections_question_id"), ["question_id"], unique=False)

    op.create_table(
        "correction_notes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("correction_id", sa.Integer(), nullable=False),
        sa.Column("channel_pk", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(length=2000), nullable=False),
        sa.Column("announced_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["channel_pk"], ["channels.id"], name=op.f("fk_correction_notes_channel_pk_channels"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["correction_id"],
            ["answer_corrections.id"],
            name=op.f("fk_correction_notes_correction_id_answer_corrections"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_correction_notes")),
        sa.UniqueConstraint(
            "correction_id", "channel_pk", name=op.f("uq_correction_notes_correction_id_channel_pk")
        ),
    )
    with op.batch_alter_table("correction_notes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_correction_notes_channel_pk"), ["channel_pk"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("correction_notes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_correction_notes_channel_pk"))
    op.drop_table("correction_notes")
    with op.batch_alter_table("answer_corrections", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_answer_corrections_question_id"))
    op.drop_table("answer_corrections")
    with op.batch_alter_table("question_flags", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_question_flags_question_id"))
    op.drop_table("question_flags")
    with op.batch_alter_table("disputes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_disputes_question_version_id"))
        batch_op.drop_index("ix_disputes_player_created")
    op.drop_table("disputes")
