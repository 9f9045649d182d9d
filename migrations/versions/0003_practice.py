"""practice modes - quiz results, flashcard reviews, explain answers (issue 8)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21

Reserved slot in the revision chain so parallel work on separate features never forks the head; the
feature fills in upgrade()/downgrade() for its own tables only.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "practice_quizzes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("player_pk", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=80), nullable=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("correct", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("size >= 1", name=op.f("ck_practice_quizzes_size_positive")),
        sa.CheckConstraint(
            "correct IS NULL OR (correct >= 0 AND correct <= size)",
            name=op.f("ck_practice_quizzes_correct_in_range"),
        ),
        sa.ForeignKeyConstraint(
            ["player_pk"], ["players.id"], name=op.f("fk_practice_quizzes_player_pk_players"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_practice_quizzes")),
    )
    op.create_index("ix_practice_quizzes_player", "practice_quizzes", ["player_pk"], unique=False)

    op.create_table(
        "practice_quiz_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("quiz_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("question_version_id", sa.Integer(), nullable=False),
        sa.Column("letter", sa.String(length=1), nullable=True),
        sa.Column("correct", sa.Boolean(), nullable=True),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("position >= 1", name=op.f("ck_practice_quiz_items_position_positive")),
        sa.ForeignKeyConstraint(
            ["quiz_id"],
            ["practice_quizzes.id"],
            name=op.f("fk_practice_quiz_items_quiz_id_practice_quizzes"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["question_version_id"],
            ["question_versions.id"],
            name=op.f("fk_practice_quiz_items_question_version_id_question_versions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_practice_quiz_items")),
        sa.UniqueConstraint("quiz_id", "position", name=op.f("uq_practice_quiz_items_quiz_id_position")),
    )
    op.create_index(
        op.f("ix_practice_quiz_items_question_version_id"),
        "practice_quiz_items",
        ["question_version_id"],
        unique=False,
    )

    op.create_table(
        "review_cards",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("player_pk", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("phase", sa.String(length=12), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("ease", sa.Integer(), nullable=False),
        sa.Column("interval_days", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reps", sa.Integer(), nullable=False),
        sa.Column("lapses", sa.Integer(), nullable=False),
        sa.Column("last_reviewed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("source IN ('bank', 'mistake')", name=op.f("ck_review_cards_source_valid")),
        sa.CheckConstraint(
            "phase IN ('new', 'learning', 'review', 'relearning')", name=op.f("ck_review_cards_phase_valid")
        ),
        sa.CheckConstraint("ease >= 1300", name=op.f("ck_review_cards_ease_floor")),
        sa.CheckConstraint(
            "interval_days >= 0 AND step >= 0 AND reps >= 0 AND lapses >= 0",
            name=op.f("ck_review_cards_counts"),
        ),
        sa.ForeignKeyConstraint(
            ["player_pk"], ["players.id"], name=op.f("fk_review_cards_player_pk_players"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["question_id"],
            ["questions.id"],
            name=op.f("fk_review_cards_question_id_questions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_cards")),
        sa.UniqueConstraint("player_pk", "question_id", name=op.f("uq_review_cards_player_pk_question_id")),
    )
    op.create_index("ix_review_cards_due", "review_cards", ["player_pk", "due_at"], unique=False)

    op.create_table(
        "card_reviews",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("card_id", sa.Integer(), nullable=False),
        sa.Column("grade", sa.String(length=5), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("phase", sa.String(length=12), nullable=False),
        sa.Column("interval_days", sa.Integer(), nullable=False),
        sa.Column("ease", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "grade IN ('again', 'hard', 'good', 'easy')", name=op.f("ck_card_reviews_grade_valid")
        ),
        sa.ForeignKeyConstraint(
            ["card_id"], ["review_cards.id"], name=op.f("fk_card_reviews_card_id_review_cards"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_card_reviews")),
    )
    op.create_index("ix_card_reviews_card", "card_reviews", ["card_id"], unique=False)

    op.create_table(
        "explain_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("player_pk", sa.Integer(), nullable=False),
        sa.Column("question_version_id", sa.Integer(), nullable=False),
        sa.Column("answer", sa.String(length=5000), nullable=False),
        sa.Column("covered", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("concepts", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "covered >= 0 AND covered <= total", name=op.f("ck_explain_attempts_covered_in_range")
        ),
        sa.ForeignKeyConstraint(
            ["player_pk"], ["players.id"], name=op.f("fk_explain_attempts_player_pk_players"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["question_version_id"],
            ["question_versions.id"],
            name=op.f("fk_explain_attempts_question_version_id_question_versions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_explain_attempts")),
    )
    op.create_index("ix_explain_attempts_player", "explain_attempts", ["player_pk"], unique=False)
    op.create_index(
        op.f("ix_explain_attempts_question_version_id"),
        "explain_attempts",
        ["question_version_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_explain_attempts_question_version_id"), table_name="explain_attempts")
    op.drop_index("ix_explain_attempts_player", table_name="explain_attempts")
    op.drop_table("explain_attempts")
    op.drop_index("ix_card_reviews_card", table_name="card_reviews")
    op.drop_table("card_reviews")
    op.drop_index("ix_review_cards_due", table_name="review_cards")
    op.drop_table("review_cards")
    op.drop_index(op.f("ix_practice_quiz_items_question_version_id"), table_name="practice_quiz_items")
    op.drop_table("practice_quiz_items")
    op.drop_index("ix_practice_quizzes_player", table_name="practice_quizzes")
    op.drop_table("practice_quizzes")
