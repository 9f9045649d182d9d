"""SqlStandingRepository: leaderboards, completed challenges, badges and a player's record."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, literal, or_, select

from bot.core.models import Challenge, StandingRow, Tenant
from bot.core.repositories import CompletionRow
from bot.core.standings import PeriodKey, ScopeKey
from bot.storage.models import (
    AttemptRow,
    BadgeRow,
    ChallengeRow,
    ChannelRow,
    CompletionRowModel,
    PlayerRow,
    PlaySessionRow,
    ProblemRow,
    QuestionVersionRow,
    StandingRowModel,
)
from bot.storage.repositories.reports import SqlReportRepository
from bot.storage.sql import INSERT_OR_NOTHING, upsert_sql

_COMPLETION_COLUMNS = (
    "challenge_id",
    "player_pk",
    "channel_pk",
    "day",
    "problems",
    "correct",
    "hints_used",
    "max_answer_ms",
    "points",
    "completed_at",
)
_BADGE_COLUMNS = ("player_pk", "badge", "scope_key", "challenge_id", "awarded_at")


def _in_tenant(tenant: Tenant) -> Any:
    """A clause on ChannelRow: the channel is one of ``tenant``'s."""
    return and_(ChannelRow.platform == tenant.platform, ChannelRow.workspace_id == tenant.workspace_id)


def _sessions_in_tenant(stmt: Any, tenant: Tenant) -> Any:
    """``stmt`` over PlaySessionRow, kept to the sessions of the tenant's challenges."""
    return (
        stmt.join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
        .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
        .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
        .where(_in_tenant(tenant))
    )


class SqlStandingRepository(SqlReportRepository):
    """The StandingRepository port (bot/core/repositories/standings.py) over one unit of work."""

    async def leaderboard(
        self, scope: ScopeKey, period: PeriodKey, limit: int, player_pk: int | None
    ) -> tuple[list[StandingRow], StandingRow | None, int]:
        """Top rows by points (ties: less total answer time first), the caller's row, ranked count."""
        st = StandingRowModel
        base = (st.scope == scope.key) & (st.period == period.key)
        top = (
            await self.s.execute(
                select(st.player_pk, PlayerRow.display_name, st.points, st.correct, st.answer_ms)
                .join(PlayerRow, PlayerRow.id == st.player_pk)
                .where(base)
                .order_by(st.points.desc(), st.answer_ms.asc(), st.player_pk.asc())
                .limit(limit)
            )
        ).all()
        rows = [StandingRow(i, r[0], r[1], r[2], r[3], r[4]) for i, r in enumerate(top, start=1)]
        total = int(await self.s.scalar(select(func.count()).select_from(st).where(base)) or 0)
        me: StandingRow | None = next((r for r in rows if r.player_pk == player_pk), None)
        if me is None and player_pk is not None:
            mine = (
                await self.s.execute(
                    select(st.points, st.correct, st.answer_ms, PlayerRow.display_name)
                    .join(PlayerRow, PlayerRow.id == st.player_pk)
                    .where(base, st.player_pk == player_pk)
                )
            ).first()
            if mine is not None:
                ahead = await self.s.scalar(
                    select(func.count())
                    .select_from(st)
                    .where(
                        base,
                        or_(
                            st.points > mine.points,
                            and_(st.points == mine.points, st.answer_ms < mine.answer_ms),
                            and_(
                                st.points == mine.points,
                                st.answer_ms == mine.answer_ms,
                                st.player_pk < player_pk,
                            ),
                        ),
                    )
                )
                me = StandingRow(
                    int(ahead or 0) + 1,
                    player_pk,
                    mine.display_name,
                    mine.points,
                    mine.correct,
                    mine.answer_ms,
                )
        return rows, me, total

    async def challenge_standings(self, challenge_id: int) -> list[StandingRow]:
        """Players of one challenge ranked by points, then by total time to their correct answers."""
        correct_ms = (
            select(AttemptRow.session_id, func.min(AttemptRow.elapsed_ms).label("ms"))
            .where(AttemptRow.correct.is_(True))
            .group_by(AttemptRow.session_id)
            .subquery()
        )
        rows = (
            await self.s.execute(
                select(
                    PlaySessionRow.player_pk,
                    PlayerRow.display_name,
                    func.sum(PlaySessionRow.points).label("pts"),
                    func.count(correct_ms.c.session_id).label("ok"),
                    func.coalesce(func.sum(correct_ms.c.ms), 0).label("ms"),
                )
                .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
                .join(PlayerRow, PlayerRow.id == PlaySessionRow.player_pk)
                .outerjoin(correct_ms, correct_ms.c.session_id == PlaySessionRow.id)
                .where(ProblemRow.challenge_id == challenge_id)
                .group_by(PlaySessionRow.player_pk, PlayerRow.display_name)
                .order_by(
                    func.sum(PlaySessionRow.points).desc(), func.coalesce(func.sum(correct_ms.c.ms), 0).asc()
                )
            )
        ).tuples()
        return [
            StandingRow(i, int(p), str(name), int(pts or 0), int(ok), int(ms))
            for i, (p, name, pts, ok, ms) in enumerate(rows, start=1)
        ]

    async def record_completion(
        self, challenge: Challenge, player_pk: int, row: CompletionRow, points: int
    ) -> bool:
        """Record a completed challenge; True the first time."""
        stmt = self._db.cached(
            "record_completion",
            lambda _: upsert_sql(CompletionRowModel.__table__, _COMPLETION_COLUMNS, INSERT_OR_NOTHING),
        )
        params = {
            "challenge_id": challenge.id,
            "player_pk": player_pk,
            "channel_pk": challenge.channel_pk,
            "day": challenge.day,
            "problems": row.problems,
            "correct": row.correct,
            "hints_used": row.hints_used,
            "max_answer_ms": round(row.max_answer_s * 1000),
            "points": points,
            "completed_at": dt.datetime.now(dt.UTC),
        }
        return (await self._db.core(stmt, params)).scalar() is not None

    async def completions(
        self, player_pk: int, channel_pk: int | None, tenant: Tenant | None = None
    ) -> list[CompletionRow]:
        """A player's completed challenges (in a channel, or in the tenant's channels, or everywhere)."""
        c = CompletionRowModel
        stmt = select(c).where(c.player_pk == player_pk)
        if channel_pk is not None:
            stmt = stmt.where(c.channel_pk == channel_pk)
        if tenant is not None:
            stmt = stmt.join(ChannelRow, ChannelRow.id == c.channel_pk).where(_in_tenant(tenant))
        return [
            CompletionRow(r.day, r.problems, r.correct, r.hints_used, r.max_answer_ms / 1000)
            for r in await self.s.scalars(stmt.order_by(c.day))
        ]

    async def completion_days(self, channel_pk: int, player_pks: Sequence[int]) -> dict[int, list[dt.date]]:
        """The days each of these players completed a challenge in one channel (one query)."""
        c = CompletionRowModel
        days: dict[int, list[dt.date]] = {pk: [] for pk in player_pks}
        if not days:
            return days
        stmt = (
            select(c.player_pk, c.day)
            .where(c.channel_pk == channel_pk, c.player_pk.in_(list(days)))
            .order_by(c.player_pk, c.day)
        )
        for player_pk, day in (await self.s.execute(stmt)).tuples():
            days[int(player_pk)].append(day)
        return days

    async def award_badges(
        self, player_pk: int, challenge_id: int, awards: Sequence[tuple[str, str]], at: dt.datetime
    ) -> list[str]:
        """Award badges idempotently; return the newly awarded codes."""
        stmt = self._db.cached(
            "award_badge", lambda _: upsert_sql(BadgeRow.__table__, _BADGE_COLUMNS, INSERT_OR_NOTHING)
        )
        new: list[str] = []
        for code, scope_key in awards:
            params = {
                "player_pk": player_pk,
                "badge": code,
                "scope_key": scope_key,
                "challenge_id": challenge_id,
                "awarded_at": at,
            }
            if (await self._db.core(stmt, params)).scalar() is not None:
                new.append(code)
        return new

    async def badge_counts(self, player_pk: int, tenant: Tenant | None) -> dict[str, int]:
        """Badge code -> times earned (on the tenant's challenges; None: everywhere)."""
        stmt = select(BadgeRow.badge, func.count()).where(BadgeRow.player_pk == player_pk)
        if tenant is not None:
            stmt = (
                stmt.join(ChallengeRow, ChallengeRow.id == BadgeRow.challenge_id)
                .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
                .where(_in_tenant(tenant))
            )
        rows = await self.s.execute(stmt.group_by(BadgeRow.badge))
        return {code: int(n) for code, n in rows.tuples()}

    async def challenge_badges(self, challenge_id: int) -> list[tuple[int, str]]:
        """(player pk, badge) awarded on a challenge."""
        rows = await self.s.execute(
            select(BadgeRow.player_pk, BadgeRow.badge)
            .where(BadgeRow.challenge_id == challenge_id)
            .order_by(BadgeRow.id)
        )
        return [(int(p), str(b)) for p, b in rows.tuples()]

    async def player_points(self, player_pk: int, tenant: Tenant | None) -> int:
        """All points a player earned in the tenant's challenges (None: everywhere)."""
        stmt = select(func.coalesce(func.sum(PlaySessionRow.points), 0)).where(
            PlaySessionRow.player_pk == player_pk
        )
        if tenant is not None:
            stmt = _sessions_in_tenant(stmt, tenant)
        total = await self.s.scalar(stmt)
        return int(total or 0)

    async def player_daily_points(
        self, player_pk: int, tenant: Tenant | None, since: dt.date
    ) -> dict[dt.date, int]:
        """Points per challenge day (the channel's local day) from ``since`` on, in the tenant's
        challenges (None: everywhere); days without points are absent.
        """
        total = func.sum(PlaySessionRow.points)
        stmt = (
            select(ChallengeRow.day, total)
            .select_from(PlaySessionRow)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
            .where(PlaySessionRow.player_pk == player_pk, ChallengeRow.day >= since)
        )
        if tenant is not None:
            stmt = stmt.join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk).where(_in_tenant(tenant))
        rows = await self.s.execute(stmt.group_by(ChallengeRow.day).having(total > 0))
        return {day: int(points) for day, points in rows.tuples()}

    async def player_accuracy(
        self, player_pk: int, by: str, tenant: Tenant | None
    ) -> list[tuple[str, int, int]]:
        """(topic or kind, finished problems, solved), in the tenant's challenges (None: everywhere)."""
        col = QuestionVersionRow.topic if by == "topic" else QuestionVersionRow.kind
        solved = func.sum(
            func.cast(PlaySessionRow.outcome == literal("correct"), type_=ProblemRow.position.type)
        )
        stmt = (
            select(col, func.count(), solved)
            .select_from(PlaySessionRow)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(QuestionVersionRow, QuestionVersionRow.id == ProblemRow.question_version_id)
            .where(PlaySessionRow.player_pk == player_pk, PlaySessionRow.outcome.is_not(None))
        )
        if tenant is not None:
            stmt = (
                stmt.join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
                .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
                .where(_in_tenant(tenant))
            )
        rows = await self.s.execute(stmt.group_by(col).order_by(col))
        return [(str(name), int(n), int(ok or 0)) for name, n, ok in rows.tuples()]
