"""SqlCorrectionRepository: answer corrections, and the re-scoring primitives that move stored plays,
standings and completions to a corrected answer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

from sqlalchemy import delete, select, update

from bot.core.models import Tenant
from bot.core.repositories import QuestionPlay
from bot.core.standings import StandingKeys
from bot.storage.models import (
    AnswerCorrectionRow,
    AttemptRow,
    ChallengeRow,
    ChannelRow,
    CompletionRowModel,
    CorrectionNoteRow,
    PlaySessionRow,
    ProblemRow,
    QuestionVersionRow,
    StandingRowModel,
)
from bot.storage.repositories.challenges import SqlChallengeRepository
from bot.storage.repositories.plays import SqlPlayRepository
from bot.storage.sql import SqlContext, SqlRepository


class SqlCorrectionRepository(SqlRepository):
    """The CorrectionRepository port (bot/core/repositories/corrections.py) over one unit of work."""

    def __init__(self, db: SqlContext, challenges: SqlChallengeRepository, plays: SqlPlayRepository) -> None:
        super().__init__(db)
        self._challenges = challenges
        self._plays = plays

    @staticmethod
    def _problems_of(view: Tenant | None, question_id: str) -> Any:
        """The ids of the problems of ``view``'s channels that asked any version of the question."""
        stmt = (
            select(ProblemRow.id)
            .join(QuestionVersionRow, QuestionVersionRow.id == ProblemRow.question_version_id)
            .where(QuestionVersionRow.question_id == question_id)
        )
        if view is not None:
            stmt = (
                stmt.join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
                .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
                .where(ChannelRow.platform == view.platform, ChannelRow.workspace_id == view.workspace_id)
            )
        return stmt

    async def question_plays(self, view: Tenant | None, question_id: str) -> list[QuestionPlay]:
        """Every session on a problem of the view's channels that asked any version of the question."""
        problems = (
            (
                await self.s.execute(
                    select(ProblemRow.id, ProblemRow.challenge_id)
                    .where(ProblemRow.id.in_(self._problems_of(view, question_id)))
                    .order_by(ProblemRow.id)
                )
            )
            .tuples()
            .all()
        )
        plays: list[QuestionPlay] = []
        for problem_id, challenge_id in problems:
            challenge = await self._challenges.get_challenge_by_id(challenge_id)
            if challenge is None:  # pragma: no cover - foreign key guarantees it
                continue
            problem = next(p for p in challenge.problems if p.id == problem_id)
            sessions = await self._plays.sessions_where(PlaySessionRow.problem_id == problem_id)
            hints = dict(
                (
                    await self.s.execute(
                        select(PlaySessionRow.id, PlaySessionRow.hint_used_at).where(
                            PlaySessionRow.problem_id == problem_id
                        )
                    )
                )
                .tuples()
                .all()
            )
            plays.extend(
                QuestionPlay(
                    s,
                    challenge.id,
                    challenge.channel_pk,
                    challenge.channel,
                    challenge.day,
                    problem.question,
                    hints.get(s.id),
                )
                for s in sessions
            )
        return plays

    async def problem_versions(self, view: Tenant | None, question_id: str) -> list[int]:
        """The distinct version ids the view's problems that asked the question were asked on."""
        rows = await self.s.execute(
            select(ProblemRow.question_version_id)
            .where(ProblemRow.id.in_(self._problems_of(view, question_id)))
            .distinct()
            .order_by(ProblemRow.question_version_id)
        )
        return [int(v) for v in rows.scalars().all()]

    async def repoint_problems(
        self,
        view: Tenant | None,
        question_id: str,
        to_version_id: int,
        from_version_ids: Collection[int] | None = None,
    ) -> int:
        """Point the view's problems that asked the question (only those on ``from_version_ids`` when
        given) at ``to_version_id``.
        """
        where = [ProblemRow.id.in_(self._problems_of(view, question_id))]
        if from_version_ids is not None:
            if not from_version_ids:
                return 0
            where.append(ProblemRow.question_version_id.in_(sorted(from_version_ids)))
        result = await self.s.execute(
            update(ProblemRow).where(*where).values(question_version_id=to_version_id)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def set_attempt_correct(self, session_id: int, attempt_no: int, correct: bool) -> None:
        """Re-judge one attempt."""
        await self.s.execute(
            update(AttemptRow)
            .where(AttemptRow.session_id == session_id, AttemptRow.attempt_no == attempt_no)
            .values(correct=correct)
        )

    async def set_session_result(
        self, session_id: int, outcome: str | None, points: int, finished_at: dt.datetime | None
    ) -> None:
        """Overwrite a session's outcome and points."""
        await self.s.execute(
            update(PlaySessionRow)
            .where(PlaySessionRow.id == session_id)
            .values(outcome=outcome, points=points, finished_at=finished_at)
        )

    async def adjust_standings(
        self, keys: StandingKeys, player_pk: int, points: int, correct: int, answer_ms: int
    ) -> None:
        """Add deltas to every (scope, period) standing of the player (creating rows as needed)."""
        values = [
            {
                "scope": scope,
                "period": period,
                "player_pk": player_pk,
                "points": points,
                "correct": correct,
                "answer_ms": answer_ms,
            }
            for scope, period in keys.pairs()
        ]
        stmt = self._db.insert(StandingRowModel).values(values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["scope", "period", "player_pk"],
            set_={
                "points": StandingRowModel.points + stmt.excluded.points,
                "correct": StandingRowModel.correct + stmt.excluded.correct,
                "answer_ms": StandingRowModel.answer_ms + stmt.excluded.answer_ms,
            },
        )
        await self.s.execute(stmt)
        # A player left with no solved problem leaves the board, as if they had never scored.
        st = StandingRowModel
        await self.s.execute(
            delete(st).where(
                st.player_pk == player_pk,
                st.scope.in_([s.key for s in keys.scopes]),
                st.period.in_([p.key for p in keys.periods]),
                st.correct <= 0,
                st.points <= 0,
            )
        )

    async def adjust_completion(self, challenge_id: int, player_pk: int, correct: int, points: int) -> None:
        """Add deltas to a completed challenge's counts."""
        c = CompletionRowModel
        await self.s.execute(
            update(c)
            .where(c.challenge_id == challenge_id, c.player_pk == player_pk)
            .values(correct=c.correct + correct, points=c.points + points)
        )

    async def add_correction(
        self,
        view: Tenant | None,
        question_id: str,
        from_version_id: int,
        to_version_id: int,
        old_letter: str | None,
        new_letter: str,
        corrected_by: str,
        now: dt.datetime,
        sessions_rescored: int,
        points_delta: int,
    ) -> int:
        """Record a correction."""
        row = AnswerCorrectionRow(
            tenant=view.key if view is not None else None,
            question_id=question_id,
            from_version_id=from_version_id,
            to_version_id=to_version_id,
            old_letter=old_letter,
            new_letter=new_letter,
            corrected_by=corrected_by[:200],
            corrected_at=now,
            sessions_rescored=sessions_rescored,
            points_delta=points_delta,
        )
        self.s.add(row)
        await self.s.flush()
        return int(row.id)

    async def add_correction_note(self, correction_id: int, channel_pk: int, text: str) -> None:
        """Queue a note for the channel's next results post."""
        stmt = self._db.insert(CorrectionNoteRow).values(
            correction_id=correction_id, channel_pk=channel_pk, text=text[:2000], announced_at=None
        )
        await self.s.execute(stmt.on_conflict_do_nothing())

    async def take_correction_notes(self, channel_pk: int, now: dt.datetime) -> list[str]:
        """Pending notes of a channel, marked announced."""
        n = CorrectionNoteRow
        rows = (
            (
                await self.s.execute(
                    select(n.id, n.text)
                    .where(n.channel_pk == channel_pk, n.announced_at.is_(None))
                    .order_by(n.id)
                )
            )
            .tuples()
            .all()
        )
        if rows:
            await self.s.execute(update(n).where(n.id.in_([r[0] for r in rows])).values(announced_at=now))
        return [str(t) for _, t in rows]
