"""tenants: every dispute and flag belongs to one tenant (a Discord server, a Slack workspace or Grid org,
the console's local tenant); tenants get their own questions, retirements and answer corrections, as an
overlay on the operator's shared bank (issue 24)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27

Existing rows are assigned as follows:

- a dispute belongs to the tenant of its problem's channel (``<platform>:<workspace id>``); a dispute whose
  problem was deleted, to the tenant of the channel its player last played in, or else to
  ``<platform>:unassigned`` (a tenant nobody acts from, so nobody sees it);
- a flag belongs to the tenant of the dispute that raised it (same fallback);
- every existing question, version, retirement and correction stays the operator's: before this revision
  there was one bank, changed by whoever was an admin anywhere, and nothing recorded which server added
  or corrected what. The operator reviews them (``rankzero questions list``).

Downgrade drops the tenant columns: tenants' own questions and corrected versions become shared ones,
their retirements are dropped, and of two tenants' flags on one version only the older is kept.
"""

import contextlib
from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT = sa.String(length=140)

#: The tenant of a dispute: its problem's channel, else where its player last played, else unassigned.
DISPUTE_TENANT = """
COALESCE(
    (SELECT c.platform || ':' || c.workspace_id FROM problems p
       JOIN challenges ch ON ch.id = p.challenge_id JOIN channels c ON c.id = ch.channel_pk
      WHERE p.id = disputes.problem_id),
    (SELECT c.platform || ':' || c.workspace_id FROM play_sessions s
       JOIN problems p ON p.id = s.problem_id JOIN challenges ch ON ch.id = p.challenge_id
       JOIN channels c ON c.id = ch.channel_pk
      WHERE s.player_pk = disputes.player_pk ORDER BY s.started_at DESC, s.id DESC LIMIT 1),
    (SELECT pl.platform || ':' || 'unassigned' FROM players pl WHERE pl.id = disputes.player_pk)
)
"""

FLAG_TENANT = """
COALESCE(
    (SELECT d.tenant FROM disputes d WHERE d.id = question_flags.dispute_id),
    'unassigned' || ':' || 'unassigned'
)
"""


@contextlib.contextmanager
def _flag_disputes_kept() -> Iterator[None]:
    """Around the batch rebuild of disputes: on SQLite it drops the old table, and with foreign keys on
    that DROP sets every flag's dispute_id to NULL (ON DELETE SET NULL). Keep them aside and put them back.
    """
    if op.get_bind().dialect.name != "sqlite":
        yield
        return
    op.execute("CREATE TEMP TABLE flag_disputes_kept AS SELECT id, dispute_id FROM question_flags")
    yield
    op.execute(
        "UPDATE question_flags SET dispute_id = "
        "(SELECT k.dispute_id FROM flag_disputes_kept k WHERE k.id = question_flags.id)"
    )
    op.execute("DROP TABLE flag_disputes_kept")


def upgrade() -> None:
    # Plain ADD COLUMNs (no table rebuild: on SQLite a rebuild of `questions` would cascade-delete the
    # rows hanging off it).
    op.add_column("questions", sa.Column("owner_tenant", TENANT, nullable=True))
    op.create_index(op.f("ix_questions_owner_tenant"), "questions", ["owner_tenant"])
    op.add_column("question_versions", sa.Column("tenant", TENANT, nullable=True))
    op.add_column("answer_corrections", sa.Column("tenant", TENANT, nullable=True))
    op.create_index(op.f("ix_answer_corrections_tenant"), "answer_corrections", ["tenant"])
    op.create_table(
        "question_retirements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant", TENANT, nullable=False),
        sa.Column("question_id", sa.String(length=64), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("tenant <> ''", name=op.f("ck_question_retirements_tenant_not_empty")),
        sa.ForeignKeyConstraint(
            ["question_id"],
            ["questions.id"],
            name=op.f("fk_question_retirements_question_id_questions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_question_retirements")),
        sa.UniqueConstraint("tenant", "question_id", name=op.f("uq_question_retirements_tenant_question_id")),
    )
    op.create_index(op.f("ix_question_retirements_question_id"), "question_retirements", ["question_id"])

    op.add_column("disputes", sa.Column("tenant", TENANT, nullable=True))
    op.add_column("question_flags", sa.Column("tenant", TENANT, nullable=True))
    op.execute(f"UPDATE disputes SET tenant = {DISPUTE_TENANT}")  # noqa: S608 - constant SQL
    op.execute(f"UPDATE question_flags SET tenant = {FLAG_TENANT}")  # noqa: S608 - constant SQL
    with _flag_disputes_kept(), op.batch_alter_table("disputes") as batch_op:
        batch_op.alter_column("tenant", existing_type=TENANT, nullable=False)
        batch_op.create_check_constraint("tenant_not_empty", "tenant <> ''")
    op.create_index("ix_disputes_tenant_created", "disputes", ["tenant", "created_at"])
    with op.batch_alter_table("question_flags") as batch_op:
        batch_op.alter_column("tenant", existing_type=TENANT, nullable=False)
        batch_op.create_check_constraint("tenant_not_empty", "tenant <> ''")
        batch_op.drop_constraint(op.f("uq_question_flags_question_version_id"), type_="unique")
        batch_op.create_unique_constraint(
            op.f("uq_question_flags_tenant_question_version_id"), ["tenant", "question_version_id"]
        )


def downgrade() -> None:
    # One flag per version again: keep the oldest.
    op.execute(
        "DELETE FROM question_flags WHERE id NOT IN "
        "(SELECT MIN(id) FROM question_flags GROUP BY question_version_id)"
    )
    with op.batch_alter_table("question_flags") as batch_op:
        batch_op.drop_constraint(op.f("uq_question_flags_tenant_question_version_id"), type_="unique")
        batch_op.drop_constraint(op.f("ck_question_flags_tenant_not_empty"), type_="check")
        batch_op.create_unique_constraint(
            op.f("uq_question_flags_question_version_id"), ["question_version_id"]
        )
        batch_op.drop_column("tenant")
    op.drop_index("ix_disputes_tenant_created", table_name="disputes")
    with _flag_disputes_kept(), op.batch_alter_table("disputes") as batch_op:
        batch_op.drop_constraint(op.f("ck_disputes_tenant_not_empty"), type_="check")
        batch_op.drop_column("tenant")
    op.drop_index(op.f("ix_question_retirements_question_id"), table_name="question_retirements")
    op.drop_table("question_retirements")
    # Plain DROP COLUMNs (SQLite 3.35+): a batch rebuild of these tables would cascade to their children.
    op.drop_index(op.f("ix_answer_corrections_tenant"), table_name="answer_corrections")
    op.drop_column("answer_corrections", "tenant")
    op.drop_column("question_versions", "tenant")
    op.drop_index(op.f("ix_questions_owner_tenant"), table_name="questions")
    op.drop_column("questions", "owner_tenant")
