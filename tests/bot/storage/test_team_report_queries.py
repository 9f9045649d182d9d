"""The team report's reads (``uow.standings``): a channel's first attempts of a range of days and its weekly
movers, and nothing at all when the tenant asked is not the channel's.
"""

from __future__ import annotations

import datetime as dt

from bot.core.models import ChannelRef, Problem
from bot.core.service import QuizService
from bot.core.standings import PeriodKey
from tests.conftest import CHANNEL, actor
from tests.fakes import FrozenClock

UTC = dt.UTC
OTHER = ChannelRef("test", "ws2", "general", "general")
WEEK_47 = dt.date(2026, 11, 16)
WEEK_48 = dt.date(2026, 11, 23)


async def test_reads_are_kept_to_the_channel_its_tenant_and_its_days(
    service: QuizService, clock: FrozenClock
) -> None:
    clock.current = dt.datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    challenge, _ = await service.open_challenge(CHANNEL, problems=2)
    first, second = challenge.problems
    for name, letter in (("ann", first.question.correct_letter or "A"), ("ben", _wrong(first))):
        await service.start_problem(actor(name), first.id)
        await service.answer(actor(name), first.id, letter)
    await service.start_problem(actor("ann"), second.id)
    await service.answer(actor("ann"), second.id, _wrong(second))
    await service.answer(actor("ann"), second.id, second.question.correct_letter or "A")  # not a first try
    pk = challenge.channel_pk
    async with service._uow() as uow:
        tries = await uow.standings.first_tries(CHANNEL.tenant, pk, WEEK_48, WEEK_48 + dt.timedelta(6), 10)
        assert [(t.problem_id, t.first_attempts, t.first_correct) for t in tries] == [
            (first.id, 2, 1),
            (second.id, 1, 0),
        ]
        assert tries[0].question_id == first.question.id and tries[0].topic == first.question.topic
        assert tries[0].explanation == first.question.explanation
        assert (
            await uow.standings.first_tries(CHANNEL.tenant, pk, WEEK_47, WEEK_47 + dt.timedelta(6), 10) == []
        )
        assert len(await uow.standings.first_tries(CHANNEL.tenant, pk, WEEK_48, WEEK_48, 1)) == 0  # Monday
        assert (
            len(await uow.standings.first_tries(CHANNEL.tenant, pk, WEEK_48, WEEK_48 + dt.timedelta(6), 1))
            == 1
        )
        # Another tenant naming this channel's key reads nothing of it.
        assert await uow.standings.first_tries(OTHER.tenant, pk, WEEK_48, WEEK_48 + dt.timedelta(6), 10) == []
        week, before = PeriodKey.week(WEEK_48), PeriodKey.week(WEEK_47)
        risers, newcomers = await uow.standings.movers(CHANNEL.tenant, pk, week, before, 3)
        assert risers == [] and [(m.display_name, m.rank, m.previous_rank) for m in newcomers] == [
            ("Ann", 1, None)
        ]
        assert await uow.standings.movers(OTHER.tenant, pk, week, before, 3) == ([], [])


def _wrong(problem: Problem) -> str:
    return next(c.letter for c in problem.question.choices if not c.correct)
