"""SqlReportRepository: what a channel's weekly team report reads (first attempts, weekly ranks)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import and_, case, func, select

from bot.core.cards import Mover
from bot.core.models import Tenant
from bot.core.repositories.reports import ProblemFirstTries
from bot.core.standings import PeriodKey, ScopeKey
from bot.storage.models import (
    AttemptRow,
    ChallengeRow,
    ChannelRow,
    PlayerRow,
    PlaySessionRow,
    ProblemRow,
    QuestionVersionRow,
    StandingRowModel,
)
from bot.storage.sql import SqlRepository


def _channel_of(tenant: Tenant, channel_pk: int) -> Any:
    """A clause on ChannelRow: the channel ``channel_pk``, and only while it is one of ``tenant``'s."""
    return and_(
        ChannelRow.id == channel_pk,
        ChannelRow.platform == tenant.platform,
        ChannelRow.workspace_id == tenant.workspace_id,
    )


class SqlReportRepository(SqlRepository):
    """The ReportRepository port (bot/core/repositories/reports.py), the team report's reads; a base of
    SqlStandingRepository (``uow.standings``).
    """

    async def first_tries(
        self, tenant: Tenant, channel_pk: int, first_day: dt.date, last_day: dt.date, limit: int
    ) -> list[ProblemFirstTries]:
        """First attempts per problem of the channel's challenges of those days, by problem id."""
        tally = (
            select(
                ProblemRow.id.label("problem_id"),
                func.count().label("tries"),
                func.sum(case((AttemptRow.correct.is_(True), 1), else_=0)).label("right"),
            )
            .select_from(AttemptRow)
            .join(PlaySessionRow, PlaySessionRow.id == AttemptRow.session_id)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
            .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
            .where(
                _channel_of(tenant, channel_pk),
                ChallengeRow.day >= first_day,
                ChallengeRow.day <= last_day,
                AttemptRow.attempt_no == 1,
            )
            .group_by(ProblemRow.id)
            .subquery()
        )
        # The JSON spec is read outside the aggregate (PostgreSQL cannot group by a json column).
        qv = QuestionVersionRow
        rows = (
            await self.s.execute(
                select(tally.c.problem_id, tally.c.tries, tally.c.right, qv.question_id, qv.topic)
                .add_columns(qv.difficulty, qv.spec)
                .join(ProblemRow, ProblemRow.id == tally.c.problem_id)
                .join(qv, qv.id == ProblemRow.question_version_id)
                .order_by(tally.c.problem_id)
                .limit(limit)
            )
        ).all()
        return [
            ProblemFirstTries(
                problem_id=r.problem_id,
                question_id=r.question_id,
                topic=r.topic,
                difficulty=r.difficulty,
                first_attempts=int(r.tries),
                first_correct=int(r.right or 0),
                explanation=_explanation(r.spec),
            )
            for r in rows
        ]

    async def movers(
        self, tenant: Tenant, channel_pk: int, week: PeriodKey, previous: PeriodKey, limit: int
    ) -> tuple[list[Mover], list[Mover]]:
        """Risers and newcomers of the channel's weekly board (window ranks, on both backends)."""
        mine = await self.s.scalar(select(ChannelRow.id).where(_channel_of(tenant, channel_pk)))
        if mine is None:  # not this tenant's channel: its standings are not read
            return [], []
        now, before = _ranked(channel_pk, week), _ranked(channel_pk, previous)
        base = (
            select(PlayerRow.display_name, now.c.points, now.c.rank, before.c.rank.label("previous"))
            .select_from(now)
            .join(PlayerRow, PlayerRow.id == now.c.player_pk)
            .outerjoin(before, before.c.player_pk == now.c.player_pk)
        )
        risers = base.where(before.c.rank > now.c.rank).order_by(
            (before.c.rank - now.c.rank).desc(), now.c.rank.asc()
        )
        newcomers = base.where(before.c.rank.is_(None)).order_by(now.c.rank.asc())
        out: list[list[Mover]] = []
        for stmt in (risers, newcomers):
            rows = (await self.s.execute(stmt.limit(limit))).all()
            out.append(
                [Mover(r.display_name, int(r.points), int(r.rank), _opt_int(r.previous)) for r in rows]
            )
        return out[0], out[1]


def _ranked(channel_pk: int, period: PeriodKey) -> Any:
    """The channel's board of ``period`` with each player's rank, ranked as the leaderboard ranks."""
    st = StandingRowModel
    rank = func.row_number().over(order_by=(st.points.desc(), st.answer_ms.asc(), st.player_pk.asc()))
    return (
        select(st.player_pk, st.points, rank.label("rank"))
        .where(st.scope == ScopeKey.channel(channel_pk).key, st.period == period.key)
        .subquery()
    )


def _explanation(spec: Any) -> str | None:
    value = spec.get("explanation") if isinstance(spec, dict) else None
    return value if isinstance(value, str) and value.strip() else None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
