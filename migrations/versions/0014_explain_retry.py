"""explain retry: each explain attempt keeps its verdict, so a failed prompt is offered again (issue 28
section 2, "a failed prompt is not offered again")

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27

Existing rows: ``passed`` stays NULL (graded before verdicts were kept, by an older grader whose verdict
cannot be recomputed faithfully); NULL is read as "not known to have failed", so those prompts are
picked as before this revision. The index serves the per-player "latest attempt per prompt" query.

Downgrade drops the column and the index.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN (nullable, no default): no table rebuild on SQLite, no rewrite on PostgreSQL.
    op.add_column("explain_attempts", sa.Column("passed", sa.Boolean(), nullable=True))
    op.create_index(
        "ix_explain_attempts_player_version",
        "explain_attempts",
        ["player_pk", "question_version_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_explain_attempts_player_version", table_name="explain_attempts")
    with op.batch_alter_table("explain_attempts") as batch_op:
        batch_op.drop_column("passed")
