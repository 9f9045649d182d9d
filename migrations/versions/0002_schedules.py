"""channel schedules, reminders and scheduler state (issue 4)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21

Reserved slot in the revision chain so parallel work on separate features never forks the head; the
feature fills in upgrade()/downgrade() for its own tables only.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel_pk", sa.Integer(), nullable=False),
        sa.Column("post_hour", sa.Integer(), nullable=False),
        sa.Column("post_minute", sa.Integer(), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("days", sa.String(length=7), nullable=False),
        sa.Column("problems", sa.Integer(), nullable=False),
        sa.Column("time_limit_s", sa.Integer(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=True),
        sa.Column("window_minutes", sa.Integer(), nullable=True),
        sa.Column("reminder_minutes", sa.Integer(), nullable=True),
        sa.Column("summary_day", sa.Integer(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("days <> ''", name=op.f("ck_schedules_days_not_empty")),
        sa.CheckConstraint("post_hour BETWEEN 0 AND 23", name=op.f("ck_schedules_post_hour_valid")),
        sa.CheckConstraint("post_minute BETWEEN 0 AND 59", name=op.f("ck_schedules_post_minute_valid")),
        sa.CheckConstraint("problems BETWEEN 1 AND 10", name=op.f("ck_schedules_problems_valid")),
        sa.CheckConstraint(
            "reminder_minutes IS NULL OR reminder_minutes > 0", name=op.f("ck_schedules_reminder_positive")
        ),
        sa.CheckConstraint(
            "window_minutes IS NULL OR window_minutes > 0", name=op.f("ck_schedules_window_positive")
        ),
        sa.ForeignKeyConstraint(
            ["channel_pk"], ["channels.id"], name=op.f("fk_schedules_channel_pk_channels"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sa.UniqueConstraint("channel_pk", name=op.f("uq_schedules_channel_pk")),
    )
    op.create_table(
        "scheduler_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduler_claims")),
        sa.UniqueConstraint("kind", "key", name=op.f("uq_scheduler_claims_kind_key")),
    )
    # A schedule's time limit and attempts override each question's own for its challenges.
    with op.batch_alter_table("challenges", schema=None) as batch_op:
        batch_op.add_column(sa.Column("time_limit_s", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("attempts", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("challenges", schema=None) as batch_op:
        batch_op.drop_column("attempts")
        batch_op.drop_column("time_limit_s")
    op.drop_table("scheduler_claims")
    op.drop_table("schedules")
