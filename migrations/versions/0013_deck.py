"""deck: a card's first review (for the new-cards-per-day limit), each player's new cards per day and
timezone, and FSRS parameters fitted per team (tenant) (issue 28 section 1)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

Existing rows: a card already studied gets ``introduced_at`` = its first logged review (else its last
review, else its creation: a card studied before the review log existed); every player gets 10 new
cards a day and no timezone (UTC), as before this revision.

Downgrade drops the columns and the team parameters.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN: a batch rebuild of review_cards on SQLite would cascade-delete its review log.
    op.add_column("review_cards", sa.Column("introduced_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE review_cards SET introduced_at = COALESCE("
        "(SELECT MIN(r.reviewed_at) FROM card_reviews r WHERE r.card_id = review_cards.id), "
        "last_reviewed_at, created_at) WHERE phase <> 'new'"
    )
    # practice_settings has no children: a batch rebuild (SQLite) is safe and carries the CHECKs.
    with op.batch_alter_table("practice_settings") as batch_op:
        batch_op.add_column(sa.Column("new_per_day", sa.Integer(), server_default="10", nullable=False))
        batch_op.add_column(sa.Column("timezone", sa.String(length=64), nullable=True))
        batch_op.create_check_constraint("new_per_day_range", "new_per_day >= 0 AND new_per_day <= 200")
        batch_op.create_check_constraint("timezone_not_empty", "timezone IS NULL OR timezone <> ''")
    op.create_table(
        "practice_team_parameters",
        sa.Column("tenant", sa.String(length=140), nullable=False),
        sa.Column("fsrs_parameters", sa.JSON(), nullable=False),
        sa.Column("reviews", sa.Integer(), nullable=False),
        sa.Column("players", sa.Integer(), nullable=False),
        sa.Column("fitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("reviews >= 0 AND players >= 1", name=op.f("ck_practice_team_parameters_counts")),
        sa.CheckConstraint("tenant <> ''", name=op.f("ck_practice_team_parameters_tenant_not_empty")),
        sa.PrimaryKeyConstraint("tenant", name=op.f("pk_practice_team_parameters")),
    )


def downgrade() -> None:
    op.drop_table("practice_team_parameters")
    with op.batch_alter_table("practice_settings") as batch_op:
        batch_op.drop_constraint(op.f("ck_practice_settings_timezone_not_empty"), type_="check")
        batch_op.drop_constraint(op.f("ck_practice_settings_new_per_day_range"), type_="check")
        batch_op.drop_column("timezone")
        batch_op.drop_column("new_per_day")
    op.drop_column("review_cards", "introduced_at")
