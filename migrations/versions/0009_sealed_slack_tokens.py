"""Slack tokens stored encrypted: the token columns of slack_installations and slack_bots widened from
200 to 1000 characters (a Fernet-encrypted 200-character token takes about 370) (issue 24)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

No data changes here: tokens already stored stay readable as they are, and `rankzero secrets rotate`
encrypts them. A downgrade narrows the columns again, which PostgreSQL refuses (and nothing is lost) while
an encrypted token is longer than 200 characters.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = {
    "slack_installations": ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token"),
    "slack_bots": ("bot_token", "bot_refresh_token"),
}


def _resize(old: int, new: int) -> None:
    for table, columns in COLUMNS.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.alter_column(
                    column,
                    type_=sa.String(length=new),
                    existing_type=sa.String(length=old),
                    existing_nullable=True,
                )


def upgrade() -> None:
    _resize(200, 1000)


def downgrade() -> None:
    _resize(1000, 200)
