"""standings: cover the rank index with player_pk (index-only rank counts)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("standings") as batch_op:
        batch_op.drop_index("ix_standings_rank")
        batch_op.create_index("ix_standings_rank", ["scope", "period", "points", "answer_ms", "player_pk"])


def downgrade() -> None:
    with op.batch_alter_table("standings") as batch_op:
        batch_op.drop_index("ix_standings_rank")
        batch_op.create_index("ix_standings_rank", ["scope", "period", "points", "answer_ms"])
