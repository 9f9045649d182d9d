"""flashcards: FSRS replaces SM-2 (stability and difficulty, mapped from each card's SM-2 interval and
ease so no deck resets), the review log keeps both eras, per-player practice settings (the daily nudge
opt-in, optimised FSRS parameters) and the nudge claims (unique per player and day) (issue 17)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25

The mapping, per card (due dates are kept as they are):

- new -> new (FSRS Learning, never reviewed); learning -> learning, same step (SM-2's learning steps, 1 m
  and 10 m, are FSRS's): no memory state yet, FSRS gives it one at the next answer, as for a first review;
- review -> review with stability = the SM-2 interval (at FSRS's 90 % retention the next interval equals
  the stability, so the card stays due when SM-2 said), and relearning -> relearning with stability =
  the interval it will return to;
- difficulty from ease: the one that makes Good on the due day multiply the stability by the card's old
  ease, as SM-2 multiplied its interval. With FSRS's recall-stability formula at retrievability 0.9,
  ease = 1 + e^w8 * (11 - D) * S^-w9 * (e^(0.1 * w10) - 1), so D = 11 - (ease - 1) / (e^w8 * S^-w9 *
  (e^(0.1 * w10) - 1)), clamped to FSRS's 1..10. This is how fsrs-rs turns SM-2 states into memory
  states when it has no review history. w8, w9, w10 are FSRS-6's defaults, frozen here so that this
  migration gives the same result whatever fsrs version is installed later.

Downgrade inverts it: ease from difficulty and stability (at least 1.30), the interval from the stability.
"""
import contextlib
import datetime as dt
import math
from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

W8, W9, W10 = 1.8722, 0.1666, 0.796  # FSRS-6 default parameters 8, 9, 10


def _growth(stability: float) -> float:
    """Stability growth per difficulty point of a Good answered at 90 % retrievability."""
    # float ** float is typed Any (a negative base gives a complex); stability is always positive.
    return math.exp(W8) * float(stability**-W9) * (math.exp(0.1 * W10) - 1)


def difficulty_from_sm2(ease: int, interval_days: int) -> tuple[float, float]:
    """(stability, difficulty) of an SM-2 review card (ease in thousandths)."""
    stability = float(max(interval_days, 1))
    difficulty = 11 - (ease / 1000 - 1) / _growth(stability)
    return stability, min(10.0, max(1.0, difficulty))


def ease_from_fsrs(stability: float | None, difficulty: float | None) -> int:
    """SM-2 ease (thousandths) of an FSRS state; 2500 (SM-2's starting ease) without one."""
    if stability is None or difficulty is None:
        return 2500
    return max(1300, round(1000 * (1 + (11 - difficulty) * _growth(max(stability, 1.0)))))


@contextlib.contextmanager
def _review_log_kept() -> Iterator[None]:
    """Around a batch rebuild of review_cards: on SQLite, batch mode drops the old table, and with
    foreign keys on that DROP deletes every card_reviews row (ON DELETE CASCADE). Copy them aside and
    put them back (same ids, same card ids: the rebuilt table keeps its rows' ids).
    """
    if op.get_bind().dialect.name != "sqlite":
        yield
        return
    op.execute("CREATE TEMP TABLE card_reviews_kept AS SELECT * FROM card_reviews")
    yield
    op.execute("INSERT INTO card_reviews SELECT * FROM card_reviews_kept")
    op.execute("DROP TABLE card_reviews_kept")


def upgrade() -> None:
    with op.batch_alter_table("review_cards") as batch_op:
        batch_op.add_column(sa.Column("stability", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("difficulty", sa.Double(), nullable=True))
    cards = sa.table(
        "review_cards",
        sa.column("id", sa.Integer),
        sa.column("phase", sa.String),
        sa.column("ease", sa.Integer),
        sa.column("interval_days", sa.Integer),
        sa.column("due_at", sa.DateTime(timezone=True)),
        sa.column("last_reviewed_at", sa.DateTime(timezone=True)),
        sa.column("stability", sa.Double),
        sa.column("difficulty", sa.Double),
    )
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(cards.c.id, cards.c.ease, cards.c.interval_days, cards.c.due_at, cards.c.last_reviewed_at).where(
            cards.c.phase.in_(("review", "relearning"))
        )
    ).all()
    updates = []
    for card_id, ease, interval, due_at, last in rows:
        stability, difficulty = difficulty_from_sm2(ease, interval)
        # FSRS measures recall from the last review: a card without one gets "its interval before due".
        last = last if last is not None else due_at - dt.timedelta(days=max(interval, 1))
        updates.append({"card_id": card_id, "s": stability, "d": difficulty, "last": last})
    if updates:
        conn.execute(
            cards.update()
            .where(cards.c.id == sa.bindparam("card_id"))
            .values(stability=sa.bindparam("s"), difficulty=sa.bindparam("d"), last_reviewed_at=sa.bindparam("last")),
            updates,
        )
    with _review_log_kept(), op.batch_alter_table("review_cards") as batch_op:
        batch_op.drop_constraint(op.f("ck_review_cards_ease_floor"), type_="check")
        batch_op.drop_column("ease")
        batch_op.create_check_constraint("stability_positive", "stability IS NULL OR stability > 0")
        batch_op.create_check_constraint(
            "difficulty_range", "difficulty IS NULL OR (difficulty >= 1 AND difficulty <= 10)"
        )

    with op.batch_alter_table("card_reviews") as batch_op:
        batch_op.alter_column("ease", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("stability", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("difficulty", sa.Double(), nullable=True))

    op.create_table(
        "practice_settings",
        sa.Column("player_pk", sa.Integer(), nullable=False),
        sa.Column("daily_nudge", sa.Boolean(), nullable=False),
        sa.Column("fsrs_parameters", sa.JSON(), nullable=True),
        sa.Column("parameters_reviews", sa.Integer(), nullable=True),
        sa.Column("parameters_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "parameters_reviews IS NULL OR parameters_reviews >= 0",
            name=op.f("ck_practice_settings_reviews_counted"),
        ),
        sa.ForeignKeyConstraint(
            ["player_pk"], ["players.id"], name=op.f("fk_practice_settings_player_pk_players"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("player_pk", name=op.f("pk_practice_settings")),
    )
    op.create_table(
        "practice_nudges",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("player_pk", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("due", sa.Integer(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("due >= 1", name=op.f("ck_practice_nudges_due_positive")),
        sa.ForeignKeyConstraint(
            ["player_pk"], ["players.id"], name=op.f("fk_practice_nudges_player_pk_players"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_practice_nudges")),
        sa.UniqueConstraint("player_pk", "day", name=op.f("uq_practice_nudges_player_pk_day")),
    )


def downgrade() -> None:
    op.drop_table("practice_nudges")
    op.drop_table("practice_settings")
    conn = op.get_bind()

    logs = sa.table(
        "card_reviews",
        sa.column("id", sa.Integer),
        sa.column("ease", sa.Integer),
        sa.column("stability", sa.Double),
        sa.column("difficulty", sa.Double),
    )
    rows = conn.execute(sa.select(logs.c.id, logs.c.stability, logs.c.difficulty).where(logs.c.ease.is_(None)))
    fills = [{"log_id": i, "e": ease_from_fsrs(s, d)} for i, s, d in rows]
    if fills:
        conn.execute(logs.update().where(logs.c.id == sa.bindparam("log_id")).values(ease=sa.bindparam("e")), fills)
    with op.batch_alter_table("card_reviews") as batch_op:
        batch_op.drop_column("difficulty")
        batch_op.drop_column("stability")
        batch_op.alter_column("ease", existing_type=sa.Integer(), nullable=False)

    with op.batch_alter_table("review_cards") as batch_op:
        batch_op.add_column(sa.Column("ease", sa.Integer(), nullable=True))
    cards = sa.table(
        "review_cards",
        sa.column("id", sa.Integer),
        sa.column("phase", sa.String),
        sa.column("ease", sa.Integer),
        sa.column("interval_days", sa.Integer),
        sa.column("stability", sa.Double),
        sa.column("difficulty", sa.Double),
    )
    rows = conn.execute(
        sa.select(cards.c.id, cards.c.phase, cards.c.interval_days, cards.c.stability, cards.c.difficulty)
    )
    back = []
    for card_id, phase, interval, stability, difficulty in rows:
        if phase in ("review", "relearning"):
            # SM-2 keeps a (re)learning card's return interval, at least a day.
            interval = max(interval, 1, round(stability or 1))
        back.append({"card_id": card_id, "e": ease_from_fsrs(stability, difficulty), "i": interval})
    if back:
        conn.execute(
            cards.update()
            .where(cards.c.id == sa.bindparam("card_id"))
            .values(ease=sa.bindparam("e"), interval_days=sa.bindparam("i")),
            back,
        )
    with _review_log_kept(), op.batch_alter_table("review_cards") as batch_op:
        batch_op.drop_constraint(op.f("ck_review_cards_difficulty_range"), type_="check")
        batch_op.drop_constraint(op.f("ck_review_cards_stability_positive"), type_="check")
        batch_op.drop_column("difficulty")
        batch_op.drop_column("stability")
        batch_op.alter_column("ease", existing_type=sa.Integer(), nullable=False)
        batch_op.create_check_constraint("ease_floor", "ease >= 1300")
