"""schedules.team_report: a channel's opt-in to the weekly team report, posted with its weekly summary
through the outbox as a kind of its own (issue 30 section 1)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28

Existing schedules: ``team_report`` false (off until an admin turns it on). The report rides on the weekly
summary's day and time, so a check keeps it off on a schedule without a summary day. Downgrade deletes the
queued team reports (0016's outbox cannot hold the kind), then drops the column and restores the checks.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KINDS = "kind IN ('challenge', 'reminder', 'results', 'summary', 'notice')"
NEW_KINDS = "kind IN ('challenge', 'reminder', 'results', 'summary', 'notice', 'team_report')"
NEEDS_SUMMARY = "NOT team_report OR summary_day IS NOT NULL"


def upgrade() -> None:
    # Batch rebuilds on SQLite (a NOT NULL column and CHECKs); nothing references either table's rows
    # through the rebuilt columns.
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("team_report", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.create_check_constraint("team_report_needs_summary", NEEDS_SUMMARY)
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint(op.f("ck_outbox_kind_valid"), type_="check")
        batch.create_check_constraint("kind_valid", NEW_KINDS)


def downgrade() -> None:
    op.execute("DELETE FROM outbox WHERE kind = 'team_report'")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint(op.f("ck_outbox_kind_valid"), type_="check")
        batch.create_check_constraint("kind_valid", OLD_KINDS)
    with op.batch_alter_table("schedules") as batch:
        batch.drop_constraint(op.f("ck_schedules_team_report_needs_summary"), type_="check")
        batch.drop_column("team_report")
