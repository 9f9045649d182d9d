"""outbox: weekly summaries and dispute notices go through the outbox too (a row without a challenge for
the summary), and a post of several messages records how many of them the platform accepted, so a retry
sends only the rest (issue 25 section 1, follow-up)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27

Existing rows: ``parts_sent`` 0 (a pending row is then sent whole, as before this revision).
Downgrade deletes the rows of the new kinds (summaries and notices), then restores the columns.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KINDS = "kind IN ('challenge', 'reminder', 'results')"
NEW_KINDS = "kind IN ('challenge', 'reminder', 'results', 'summary', 'notice')"


def upgrade() -> None:
    # A batch rebuild on SQLite (a CHECK and a NOT NULL change); nothing references the outbox table, so
    # the rebuild cascades nowhere.
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("parts_sent", sa.Integer(), nullable=False, server_default="0"))
        batch.create_check_constraint("parts_sent_not_negative", "parts_sent >= 0")
        batch.alter_column("challenge_id", existing_type=sa.Integer(), nullable=True)
        batch.drop_constraint(op.f("ck_outbox_kind_valid"), type_="check")
        batch.create_check_constraint("kind_valid", NEW_KINDS)


def downgrade() -> None:
    op.execute("DELETE FROM outbox WHERE kind IN ('summary', 'notice') OR challenge_id IS NULL")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint(op.f("ck_outbox_kind_valid"), type_="check")
        batch.create_check_constraint("kind_valid", OLD_KINDS)
        batch.alter_column("challenge_id", existing_type=sa.Integer(), nullable=False)
        batch.drop_constraint(op.f("ck_outbox_parts_sent_not_negative"), type_="check")
        batch.drop_column("parts_sent")
