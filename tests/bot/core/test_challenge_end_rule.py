"""The stored end of a challenge is the rule, not the job that closes it (issue 25, section 5).

No scheduler runs in these tests: the challenge stays ``open`` in the database past its ``closes_at``, as
it does when the close job is late (a frozen database, a process down). Starting or answering after the
end is refused all the same, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import update

from bot.core.errors import ChallengeClosedError, TimeUpError
from bot.core.service import QuizService
from bot.storage.db import make_engine
from bot.storage.models import ChallengeRow
from tests.conftest import CHANNEL, START, actor
from tests.fakes import FrozenClock

END = START + dt.timedelta(minutes=10)


async def _posted(service: QuizService) -> list[int]:
    card = await service.post_daily(CHANNEL, closes_at=END)
    challenge = await service.get_challenge(card.challenge_id)
    assert challenge.status == "open" and challenge.closes_at == END
    return [p.id for p in challenge.problems]


async def test_a_problem_started_after_the_end_is_refused_while_nothing_closed_it(
    service: QuizService, clock: FrozenClock
) -> None:
    problems = await _posted(service)
    clock.current = END + dt.timedelta(minutes=5)  # the close job has not run: still "open" in the table
    with pytest.raises(ChallengeClosedError, match="ended at 09:10 UTC"):
        await service.start_problem(actor("late"), problems[0])
    board = await service.leaderboard(CHANNEL, period="today")
    assert board.total_players == 0, "nothing scored after the end"


async def test_an_answer_after_the_end_is_not_counted_even_within_the_problem_time(
    service: QuizService, clock: FrozenClock
) -> None:
    problems = await _posted(service)
    clock.current = END - dt.timedelta(seconds=30)
    card = await service.start_problem(actor("close-call"), problems[0])
    assert card.deadline == END, "the countdown shows the challenge's end, not 120 s from now"
    clock.current = END + dt.timedelta(seconds=10)  # within 120 s of the start, after the end
    with pytest.raises(TimeUpError, match="not counted"):
        await service.answer(actor("close-call"), problems[0], "A")
    assert (await service.leaderboard(CHANNEL, period="today")).total_players == 0


async def test_an_end_moved_earlier_after_the_start_still_wins(
    service: QuizService, clock: FrozenClock, db_url: str
) -> None:
    problems = await _posted(service)
    clock.current = START + dt.timedelta(minutes=1)
    card = await service.start_problem(actor("moved"), problems[0])
    assert card.deadline == START + dt.timedelta(minutes=3)
    engine = make_engine(db_url)  # an admin (or another process) moves the end to 09:02
    async with engine.begin() as conn:
        await conn.execute(update(ChallengeRow).values(closes_at=START + dt.timedelta(minutes=2)))
    await engine.dispose()
    clock.current = START + dt.timedelta(minutes=2, seconds=30)  # before the problem's own deadline
    with pytest.raises(ChallengeClosedError, match="ended at 09:02 UTC: your answer was not counted"):
        await service.answer(actor("moved"), problems[0], "A")
    assert (await service.leaderboard(CHANNEL, period="today")).total_players == 0


async def test_an_answer_just_before_the_end_still_counts(service: QuizService, clock: FrozenClock) -> None:
    problems = await _posted(service)
    clock.current = END - dt.timedelta(seconds=30)
    await service.start_problem(actor("in-time"), problems[0])
    clock.current = END - dt.timedelta(seconds=1)
    feedback = await service.answer(actor("in-time"), problems[0], "A")
    assert feedback.correct and feedback.points > 0
