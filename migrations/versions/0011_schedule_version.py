"""schedules.version: optimistic concurrency for two admins saving one schedule at once

Each save writes ``version = version + 1`` only where the version is the one the admin's command read; a
save that finds another number knows another admin saved in between, reads again, applies its own change
on top and tells the admin what changed meanwhile (bot/core/schedule_service.py).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
        batch.create_check_constraint("version_positive", "version > 0")


def downgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.drop_constraint("version_positive", type_="check")
        batch.drop_column("version")
