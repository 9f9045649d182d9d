"""Correcting an official answer re-scores every past attempt: sessions, standings, completions, results.

No runner needed: the correction is an admin decision (normally after a dispute flagged the question).
Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.adapters.discord.dispute_render import correction_text
from bot.adapters.slack.dispute_blocks import correction_blocks
from bot.core import scoring
from bot.core.errors import InvalidAnswerError, NotAdminError, NotFoundError
from tests.bootstrap import Env, open_env
from tests.conftest import ADMIN, CHANNEL, actor, make_spec
from tests.fakes import FakePlatform, FrozenClock

QID = "rescore-me"


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    # Official answer A (index 0); the truth, as an admin will decide, is B.
    bank = [make_spec(QID, "advanced", "DDP", kind="predict_output", correct=0)]
    async with open_env(db_url, clock, platform, bank=bank, problems_per_challenge=1) as made:
        yield made


async def _play(env: Env, name: str, problem_id: int, answers: list[tuple[float, str]]) -> None:
    who = actor(name)
    start = env.clock.now()
    await env.quiz.start_problem(who, problem_id)
    for at_s, letter in answers:
        env.clock.current = start + dt.timedelta(seconds=at_s)
        await env.quiz.answer(who, problem_id, letter)
    env.clock.current = start


async def _board(env: Env, period: str = "all", scope: str = "channel") -> list[tuple[str, int, int]]:
    card = await env.quiz.leaderboard(CHANNEL, period=period, scope=scope)
    return [(r.display_name, r.points, r.correct) for r in card.rows]


async def test_correction_rescores_points_standings_and_results(env: Env) -> None:
    challenge, _ = await env.quiz.open_challenge(CHANNEL)
    pid = challenge.problems[0].id
    await _play(env, "alice", pid, [(10, "A")])  # right under the old answer
    await _play(env, "bob", pid, [(20, "B"), (30, "C")])  # right under the new one, first attempt
    await _play(env, "carol", pid, [(15, "C"), (40, "B")])  # right under the new one, second attempt
    await _play(env, "dave", pid, [(5, "D"), (6, "C")])  # wrong either way

    def pts(attempt: int, elapsed: float) -> int:
        return scoring.points_for(
            difficulty="advanced",
            correct=True,
            attempt_no=attempt,
            elapsed_s=elapsed,
            time_limit_s=120,
            hint_used=False,
        )

    assert await _board(env) == [("Alice", pts(1, 10), 1)]
    assert await _board(env, "week", "workspace") == [("Alice", pts(1, 10), 1)]

    with pytest.raises(NotAdminError):
        await env.disputes.correct_answer(actor("alice"), QID, "B")
    with pytest.raises(InvalidAnswerError, match="already the official answer"):
        await env.disputes.correct_answer(ADMIN, QID, "a")
    with pytest.raises(InvalidAnswerError, match="pick one of A, B, C, D"):
        await env.disputes.correct_answer(ADMIN, QID, "F")
    with pytest.raises(NotFoundError):
        await env.disputes.correct_answer(ADMIN, "no-such-question", "B")

    fix = await env.disputes.correct_answer(ADMIN, QID, "b")
    assert (fix.old_letter, fix.new_letter, fix.from_version, fix.to_version) == ("A", "B", 1, 2)
    assert fix.sessions_rescored == 4 and fix.players_affected == 3
    assert fix.points_delta == pts(1, 20) + pts(2, 40) - pts(1, 10)

    expected = [("Bob", pts(1, 20), 1), ("Carol", pts(2, 40), 1)]
    for period in ("all", "today", "week"):
        for scope in ("channel", "workspace"):
            assert await _board(env, period, scope) == expected, (period, scope)
    assert (await env.quiz.stats(actor("alice").player)).points == 0
    assert (await env.quiz.stats(actor("bob").player)).points == pts(1, 20)
    assert (await env.quiz.stats(actor("dave").player)).correct == 0

    # The problem now shows the corrected version; the attempts were re-judged.
    results = await env.quiz.results(challenge.id)
    assert results.problems[0].correct_letter == "B"
    assert results.problems[0].solved == 2
    assert [q.version for q in await env.quiz.list_questions() if q.id == QID] == [2]
    # Re-importing the uncorrected bank file does not undo the correction.
    report = await env.quiz.admin_import(ADMIN, [make_spec(QID, "advanced", "DDP", kind="predict_output")])
    assert report.unchanged == (QID,)
    assert [q.version for q in await env.quiz.list_questions() if q.id == QID] == [2]

    # The next results post of the channel carries the note, once.
    card = await env.quiz.close_challenge(challenge.id)
    assert card is not None
    assert card.notes == (
        f"Correction: the answer to {QID} is B, not A (checked on the runner). 4 past answers re-scored; "
        "leaderboards updated.",
    )
    assert env.platform.results[-1][1].notes == card.notes
    env.clock.advance(86_400)
    tomorrow, _ = await env.quiz.open_challenge(CHANNEL)
    later = await env.quiz.close_challenge(tomorrow.id)
    assert later is not None and later.notes == ()


async def test_a_second_correction_moves_points_back(env: Env) -> None:
    challenge, _ = await env.quiz.open_challenge(CHANNEL)
    pid = challenge.problems[0].id
    await _play(env, "alice", pid, [(10, "A")])
    original = await _board(env)
    await env.disputes.correct_answer(ADMIN, QID, "B")
    assert await _board(env) == []
    back = await env.disputes.correct_answer(ADMIN, QID, "A")
    assert back.to_version == 3
    assert await _board(env) == original


def _reordered(spec: dict[str, Any], order: list[int]) -> dict[str, Any]:
    """The spec with its whole choice entries (text, key, feedback) shown in ``order``."""
    return {**spec, "choices": [spec["choices"][i] for i in order]}


async def test_a_correction_after_a_reorder_judges_old_attempts_by_the_text_chosen(env: Env) -> None:
    # Day 1 asks v1: A = "choice 0" (keyed), B = "choice 1" (the truth, as the admin will decide).
    day1, _ = await env.quiz.open_challenge(CHANNEL)
    p1 = day1.problems[0].id
    await _play(env, "alice", p1, [(10, "A")])  # chose "choice 0": right under the old key
    await _play(env, "bob", p1, [(20, "B")])  # chose "choice 1": right under the correction
    await env.quiz.close_challenge(day1.id)
    # The bank reorders the choices: v2 shows "choice 1" as A and "choice 0" as B (still keyed).
    v1 = make_spec(QID, "advanced", "DDP", kind="predict_output", correct=0)
    report = await env.quiz.admin_import(ADMIN, [_reordered(v1, [1, 0, 2, 3])])
    assert report.unchanged == ()
    env.clock.advance(86_400)
    day2, _ = await env.quiz.open_challenge(CHANNEL)
    assert day2.problems[0].question.version == 2
    p2 = day2.problems[0].id
    await _play(env, "carol", p2, [(10, "A")])  # chose "choice 1" on the new order
    await _play(env, "dave", p2, [(10, "B")])  # chose "choice 0" on the new order: right for now
    assert {n for n, _, _ in await _board(env)} == {"Alice", "Dave"}

    # The admin reads v2 and makes "choice 1" (its letter A) the answer.
    fix = await env.disputes.correct_answer(ADMIN, QID, "A")
    assert (fix.from_version, fix.to_version, fix.old_letter, fix.new_letter) == (2, 3, "B", "A")
    assert fix.sessions_rescored == 4 and fix.left_as_scored == 0 and fix.left_note == ""
    assert fix.players_affected == 4
    board = {n: (pts, correct) for n, pts, correct in await _board(env)}
    assert set(board) == {"Bob", "Carol"}, "bob's letter B on the old order was the corrected text"
    assert all(correct == 1 for _, correct in board.values())
    for name in ("alice", "dave"):
        assert (await env.quiz.stats(actor(name).player)).correct == 0

    # Day 1's problem keeps the version it was asked on (its letters mean v1's choices); day 2's, whose
    # choices read exactly as the corrected version's, shows the corrected key.
    old = (await env.quiz.results(day1.id)).problems[0]
    assert old.solved == 1
    today = (await env.quiz.results(day2.id)).problems[0]
    assert (today.correct_letter, today.solved) == ("A", 1)
    assert (await env.quiz.get_challenge(day1.id)).problems[0].question.version == 1
    assert (await env.quiz.get_challenge(day2.id)).problems[0].question.version == 3


async def test_a_rewritten_choice_leaves_older_attempts_as_scored_and_counts_them(env: Env) -> None:
    day1, _ = await env.quiz.open_challenge(CHANNEL)
    p1 = day1.problems[0].id
    await _play(env, "alice", p1, [(10, "A")])  # right under the old key
    await _play(env, "bob", p1, [(10, "B"), (20, "C")])  # wrong either way on v1
    await env.quiz.close_challenge(day1.id)
    before = await _board(env)
    # v2 rewrites choice B; the admin then makes that new wording the answer.
    v2 = make_spec(QID, "advanced", "DDP", kind="predict_output", correct=0)
    v2["choices"][1] = {**v2["choices"][1], "text": "a new wording of choice 1"}
    await env.quiz.admin_import(ADMIN, [v2])
    env.clock.advance(86_400)
    day2, _ = await env.quiz.open_challenge(CHANNEL)
    p2 = day2.problems[0].id
    await _play(env, "carol", p2, [(10, "B")])  # the new wording

    fix = await env.disputes.correct_answer(ADMIN, QID, "B")
    assert fix.sessions_rescored == 1 and fix.left_as_scored == 2
    assert fix.left_note == "2 attempts on an older wording were left as scored."
    board = {n: pts for n, pts, _ in await _board(env)}
    assert board["Alice"] == dict((n, p) for n, p, _ in before)["Alice"], "alice's result stands"
    assert board["Carol"] > 0 and "Bob" not in board
    assert (await env.quiz.results(day1.id)).problems[0].correct_letter == "A"
    assert (await env.quiz.results(day2.id)).problems[0].correct_letter == "B"
    # The admin reads the count wherever the correction is made.
    assert fix.left_note in correction_text(fix)
    assert any(fix.left_note in str(b) for b in correction_blocks(fix))
