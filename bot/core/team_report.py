"""A channel's weekly team report (issue 30): first-attempt accuracy by topic x difficulty, the week's
most-missed problems with their explanations, and the week's movers on the channel's weekly leaderboard.

The report is queued with the weekly summary (bot/core/schedule_service.py) as an outbox row of its own
kind, holding only its title and a day of its week; the card is built here when the row is delivered, so
a retry after an answer correction shows the corrected week, as the summary's leaderboard does. "The
week" is the ISO week (Monday to Sunday) of the challenges' local dates: the channel's timezone, the same
week the channel's weekly standings count.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from bot.core.cards import HeatCell, MissedQuestion, TeamReportCard
from bot.core.models import Tenant
from bot.core.ports import UnitOfWork
from bot.core.repositories.reports import ProblemFirstTries
from bot.core.standings import PeriodKey
from bot.core.vocabulary import Difficulty

#: Most-missed problems a report lists, and risers (and newcomers) among its movers.
MISSED_TOP = 3
MOVERS_TOP = 3
#: Problems of one week read at most: a daily schedule posts at most 7 x 10; the bound keeps a channel
#: flooded by ``post-now`` and ``play`` from making the report's read unbounded.
MAX_PROBLEMS = 500
#: The longest explanation a report carries (the rest is cut with an ellipsis): it is shown behind a
#: button, in one message of the platform's.
MAX_EXPLANATION = 1500
NO_EXPLANATION = "No explanation is stored for this question."


def week_start(day: dt.date) -> dt.date:
    """The Monday of ``day``'s ISO week."""
    return day - dt.timedelta(days=day.isoweekday() - 1)


def last_complete_week(day: dt.date) -> dt.date:
    """The Monday of the last complete ISO week (Monday to Sunday) before ``day``: the week a weekly
    post made on ``day`` reports, whatever weekday ``day`` is (a Wednesday's post still reports the
    whole week before, never the Monday and Tuesday of the week still running).
    """
    return week_start(day) - dt.timedelta(days=7)


def team_report_title(day: dt.date) -> str:
    """``Team report · week of 2026-11-23`` (the Monday of ``day``'s week)."""
    return f"Team report · week of {week_start(day).isoformat()}"


async def team_report_card(
    uow: UnitOfWork, tenant: Tenant, channel_pk: int, payload: dict[str, Any]
) -> TeamReportCard:
    """The team report of ``channel_pk`` (one of ``tenant``'s channels) from its stored form (the
    summary's: a title and a day of the week it covers), from the data as it stands now.
    """
    start = week_start(dt.date.fromisoformat(str(payload["day"])))
    end = start + dt.timedelta(days=6)
    tries = await uow.standings.first_tries(tenant, channel_pk, start, end, MAX_PROBLEMS)
    risers, newcomers = await uow.standings.movers(
        tenant,
        channel_pk,
        PeriodKey.week(start),
        PeriodKey.week(start - dt.timedelta(days=7)),
        MOVERS_TOP,
    )
    return TeamReportCard(
        title=str(payload["title"]),
        week_start=start,
        cells=heat_cells(tries),
        missed=most_missed(tries),
        movers=(*risers, *newcomers),
    )


def _difficulty_order(label: str) -> tuple[int, str]:
    """Known difficulty labels in their order of difficulty, then any other label by name."""
    try:
        return (Difficulty(label).rank, label)
    except ValueError:
        return (len(Difficulty), label)


def heat_cells(tries: Iterable[ProblemFirstTries]) -> tuple[HeatCell, ...]:
    """First attempts summed per (topic, difficulty), by topic, then difficulty from easiest."""
    sums: dict[tuple[str, str], list[int]] = {}
    for t in tries:
        cell = sums.setdefault((t.topic, t.difficulty), [0, 0])
        cell[0] += t.first_attempts
        cell[1] += t.first_correct
    order = sorted(sums, key=lambda k: (k[0], _difficulty_order(k[1])))
    return tuple(HeatCell(topic, level, *sums[(topic, level)]) for topic, level in order)


def most_missed(tries: Sequence[ProblemFirstTries], top: int = MISSED_TOP) -> tuple[MissedQuestion, ...]:
    """The ``top`` problems with the lowest first-attempt accuracy, among those someone missed.

    Exact fractions, not floats, so 1/3 and 2/6 tie; a tie goes to the problem more players tried first
    (more misses behind the same share), then to the lower problem id: the same data, the same three.
    """
    missed = [t for t in tries if t.first_attempts >= 1 and t.first_correct < t.first_attempts]
    missed.sort(key=lambda t: (Fraction(t.first_correct, t.first_attempts), -t.first_attempts, t.problem_id))
    return tuple(
        MissedQuestion(
            problem_id=t.problem_id,
            question_id=t.question_id,
            topic=t.topic,
            first_attempts=t.first_attempts,
            first_correct=t.first_correct,
            explanation=_bounded(t.explanation),
        )
        for t in missed[:top]
    )


def _bounded(explanation: str | None) -> str:
    text = (explanation or "").strip()
    if not text:
        return NO_EXPLANATION
    return text if len(text) <= MAX_EXPLANATION else text[: MAX_EXPLANATION - 1].rstrip() + "…"
