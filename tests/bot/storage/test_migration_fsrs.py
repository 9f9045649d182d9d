"""Migration 0007: SM-2 review states become FSRS states (nobody's deck resets), and back on downgrade.

A database at 0006 gets SM-2 cards in every phase, then ``alembic upgrade head`` runs; the mapped FSRS
state must keep each due date, give review cards stability = interval and the difficulty that makes
Good on the due day grow the interval by the card's old ease (checked through fsrs's own scheduler).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command

from bot.core.srs import CardState, schedule
from bot.storage.db import alembic_config, upgrade
from tests.migration_data import BACKENDS, fetch_rows, fresh_database, run_sql

T0 = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)
DUE = T0 + dt.timedelta(days=10)

# (question, phase, step, ease, interval_days, due_at, reps, lapses, last_reviewed_at)
SM2_CARDS = [
    ("q-new", "new", 0, 2500, 0, T0, 0, 0, None),
    ("q-learning", "learning", 1, 2500, 0, T0 + dt.timedelta(minutes=10), 1, 0, T0),
    ("q-review", "review", 0, 2500, 10, DUE, 4, 0, T0),
    ("q-hard", "review", 0, 1300, 10, DUE, 9, 3, T0),
    ("q-easy", "review", 0, 3100, 100, T0 + dt.timedelta(days=100), 7, 0, None),
    ("q-relearning", "relearning", 0, 2300, 1, T0 + dt.timedelta(minutes=10), 6, 1, T0),
]


@pytest.fixture(params=BACKENDS)
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database(request.param, tmp_path, "fsrs")


def _aware(value: object) -> dt.datetime:
    if isinstance(value, str):  # SQLite returns the stored text on a raw query
        value = dt.datetime.fromisoformat(value)
    assert isinstance(value, dt.datetime)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _seed_sm2(url: str) -> None:
    upgrade(url, "0006")
    cards = [
        {"q": q, "phase": p, "step": st, "ease": e, "ivl": i, "due": d, "reps": r, "lapses": la, "last": last}
        for q, p, st, e, i, d, r, la, last in SM2_CARDS
    ]
    asyncio.run(
        run_sql(
            url,
            (
                "INSERT INTO players (id, platform, user_id, display_name, created_at) "
                "VALUES (1, 'test', 'alice', 'Alice', :t)",
                {"t": T0},
            ),
            (
                "INSERT INTO questions (id, created_at) VALUES (:q, :t)",
                [{"q": c[0], "t": T0} for c in SM2_CARDS],
            ),
            (
                "INSERT INTO review_cards (player_pk, question_id, source, phase, step, ease, interval_days, "
                "due_at, reps, lapses, last_reviewed_at, created_at) VALUES (1, :q, 'bank', :phase, :step, "
                ":ease, :ivl, :due, :reps, :lapses, :last, :due)",
                cards,
            ),
            (
                "INSERT INTO card_reviews (card_id, grade, reviewed_at, phase, interval_days, ease, due_at) "
                "SELECT id, 'good', :t, phase, interval_days, ease, due_at FROM review_cards "
                "WHERE question_id = 'q-review'",
                {"t": T0},
            ),
        )
    )


def test_sm2_states_map_to_fsrs_and_back(fresh_url: str) -> None:
    _seed_sm2(fresh_url)
    upgrade(fresh_url)
    command.check(alembic_config(fresh_url))
    cards = {
        r["question_id"]: r
        for r in asyncio.run(
            fetch_rows(
                fresh_url,
                "SELECT question_id, phase, step, stability, difficulty, interval_days, due_at, reps, "
                "lapses, last_reviewed_at FROM review_cards",
            )
        )
    }
    for q, phase, step, _ease, interval, due, reps, lapses, _last in SM2_CARDS:
        row = cards[q]
        assert (row["phase"], row["step"], row["interval_days"], row["reps"], row["lapses"]) == (
            phase,
            step,
            interval,
            reps,
            lapses,
        ), q
        assert _aware(row["due_at"]) == due, f"{q}: the due date is kept"
    logs = asyncio.run(fetch_rows(fresh_url, "SELECT grade, ease, stability FROM card_reviews"))
    assert logs == [{"grade": "good", "ease": 2500, "stability": None}], "the SM-2 review log is kept"
    assert cards["q-new"]["stability"] is None and cards["q-new"]["difficulty"] is None
    assert cards["q-learning"]["stability"] is None, (
        "a learning card gets its memory state at its next answer"
    )
    # Stability = the SM-2 interval; difficulty from ease (worked out by hand from the formula in 0007).
    assert cards["q-review"]["stability"] == pytest.approx(10.0)
    assert cards["q-review"]["difficulty"] == pytest.approx(6.914, abs=0.01)
    assert cards["q-hard"]["difficulty"] == 10.0, "ease 1.30 at 10 days is past FSRS's hardest: clamped"
    assert cards["q-easy"]["stability"] == pytest.approx(100.0)
    assert cards["q-easy"]["difficulty"] == pytest.approx(2.605, abs=0.01)
    assert _aware(cards["q-easy"]["last_reviewed_at"]) == T0, "no last review: its interval before due"
    assert cards["q-relearning"]["stability"] == pytest.approx(1.0)

    # Through fsrs itself: Good on the due day grows each review card's interval by its old ease (SM-2's
    # Good), and the card is due when SM-2 said.
    for q, sm2_good_days in (("q-review", 25), ("q-easy", 310)):
        row = cards[q]
        state = CardState(
            phase="review",
            stability=float(row["stability"]),  # type: ignore[arg-type]
            difficulty=float(row["difficulty"]),  # type: ignore[arg-type]
            due=_aware(row["due_at"]),
            last_review=_aware(row["last_reviewed_at"]),
            interval_days=int(row["interval_days"]),  # type: ignore[call-overload]
            reps=int(row["reps"]),  # type: ignore[call-overload]
        )
        after = schedule(state, "good", _aware(row["due_at"]))
        assert after.interval_days == sm2_good_days, q

    command.downgrade(alembic_config(fresh_url), "0006")
    back = {
        r["question_id"]: r
        for r in asyncio.run(
            fetch_rows(fresh_url, "SELECT question_id, phase, ease, interval_days, due_at FROM review_cards")
        )
    }
    for q, phase, _step, ease, interval, due, *_ in SM2_CARDS:
        assert (back[q]["phase"], back[q]["interval_days"]) == (phase, interval), q
        assert _aware(back[q]["due_at"]) == due
        expected = max(ease, 1300) if phase in ("review", "relearning") and q != "q-hard" else None
        if expected is not None:
            assert back[q]["ease"] == pytest.approx(expected, abs=2), q
    assert back["q-new"]["ease"] == 2500
    logs = asyncio.run(fetch_rows(fresh_url, "SELECT ease FROM card_reviews"))
    assert [r["ease"] for r in logs] == [2500]
    upgrade(fresh_url)  # and up again
    command.check(alembic_config(fresh_url))
