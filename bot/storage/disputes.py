"""SqlDisputeStore: the DisputeStore port over the unit of work's session (disputes, flags, corrections)."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select, update

from bot.core.dispute_ports import DisputeRecord, QuestionFlag, QuestionPlay
from bot.storage.models import (
    AnswerCorrectionRow,
    AttemptRow,
    CompletionRowModel,
    CorrectionNoteRow,
    DisputeRowModel,
    PlaySessionRow,
    ProblemRow,
    QuestionFlagRow,
    QuestionVersionRow,
    StandingRowModel,
)

if TYPE_CHECKING:
    from bot.storage.uow import SqlUnitOfWork


def content_hash(spec: dict[str, Any]) -> str:
    """The same content hash as question imports (bot.storage.uow.content_hash)."""
    from bot.storage.uow import content_hash as uow_hash  # imported here: uow imports this module lazily

    return uow_hash(spec)


class SqlDisputeStore:
    """Dispute storage inside one SqlUnitOfWork's transaction."""

    def __init__(self, uow: SqlUnitOfWork) -> None:
        self._uow = uow
        self.s = uow.s

    async def add_dispute(self, record: DisputeRecord) -> int:
        """Store a dispute; return its id."""
        row = DisputeRowModel(
            player_pk=record.player_pk,
            question_version_id=record.question_version_id,
            problem_id=record.problem_id,
            variant=record.variant,
            code_sha256=record.code_sha256,
            verdict_status=record.verdict_status,
            verification=record.verification,
            matched_letter=record.matched_letter,
            official_letter=record.official_letter,
            explanation=record.explanation[:4000],
            verdict=record.verdict,
            created_at=record.created_at,
        )
        self.s.add(row)
        await self.s.flush()
        return int(row.id)

    async def complete_dispute(self, dispute_id: int, record: DisputeRecord) -> None:
        """Fill a reserved dispute with its outcome."""
        await self.s.execute(
            update(DisputeRowModel)
            .where(DisputeRowModel.id == dispute_id)
            .values(
                verdict_status=record.verdict_status,
                verification=record.verification,
                matched_letter=record.matched_letter,
                official_letter=record.official_letter,
                explanation=record.explanation[:4000],
                verdict=record.verdict,
            )
        )

    async def delete_dispute(self, dispute_id: int) -> None:
        """Drop a reservation whose run never happened."""
        await self.s.execute(delete(DisputeRowModel).where(DisputeRowModel.id == dispute_id))

    async def count_disputes_since(self, player_pk: int, since: dt.datetime) -> int:
        """Runs a player asked for since ``since``."""
        d = DisputeRowModel
        n = await self.s.scalar(
            select(func.count()).select_from(d).where(d.player_pk == player_pk, d.created_at >= since)
        )
        return int(n or 0)

    async def flag_question(
        self,
        question_id: str,
        version_id: int,
        dispute_id: int | None,
        official_letter: str | None,
        matched_letter: str | None,
        explanation: str,
        now: dt.datetime,
    ) -> tuple[int, bool]:
        """Flag a version once; (id, created)."""
        stmt = (
            self._uow._insert(QuestionFlagRow)
            .values(
                question_id=question_id,
                question_version_id=version_id,
                dispute_id=dispute_id,
                official_letter=official_letter,
                matched_letter=matched_letter,
                explanation=explanation[:4000],
                status="open",
                created_at=now,
            )
            .on_conflict_do_nothing()
            .returning(QuestionFlagRow.id)
        )
        new_id = await self.s.scalar(stmt)
        if new_id is not None:
            return int(new_id), True
        existing = await self.s.scalar(
            select(QuestionFlagRow.id).where(QuestionFlagRow.question_version_id == version_id)
        )
        return int(existing or 0), False

    async def flags(self, status: str | None) -> list[QuestionFlag]:
        """Flags, newest first."""
        f = QuestionFlagRow
        stmt = select(f, QuestionVersionRow.version).join(
            QuestionVersionRow, QuestionVersionRow.id == f.question_version_id
        )
        if status is not None:
            stmt = stmt.where(f.status == status)
        rows = (await self.s.execute(stmt.order_by(f.id.desc()))).tuples()
        return [
            QuestionFlag(
                r.id,
                r.question_id,
                int(v),
                r.official_letter,
                r.matched_letter,
                r.explanation,
                r.status,
                r.created_at,
            )
            for r, v in rows
        ]

    async def resolve_flags(self, question_id: str, now: dt.datetime) -> int:
        """Resolve a question's open flags."""
        result = await self.s.execute(
            update(QuestionFlagRow)
            .where(QuestionFlagRow.question_id == question_id, QuestionFlagRow.status == "open")
            .values(status="resolved", resolved_at=now)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def version_spec(self, version_id: int) -> dict[str, Any] | None:
        """The stored spec of a version."""
        row = await self.s.get(QuestionVersionRow, version_id)
        return dict(row.spec) if row is not None else None

    async def add_corrected_version(self, question_id: str, spec: dict[str, Any], now: dt.datetime) -> int:
        """Store ``spec`` as the question's next version; return its version id.

        Its content hash is salted with the version number, so a correction may restore the content of
        an earlier version, and re-importing the uncorrected bank file matches the older version and
        changes nothing (see SqlUnitOfWork.sync_questions).
        """
        latest = await self.s.scalar(
            select(func.max(QuestionVersionRow.version)).where(QuestionVersionRow.question_id == question_id)
        )
        version = int(latest or 0) + 1
        digest = hashlib.sha256(f"{content_hash(spec)}:correction:v{version}".encode()).hexdigest()
        row = QuestionVersionRow(
            question_id=question_id,
            version=version,
            content_hash=digest,
            kind=spec["kind"],
            topic=spec["topic"],
            difficulty=spec["difficulty"],
            spec=spec,
            created_at=now,
        )
        self.s.add(row)
        await self.s.flush()
        return int(row.id)

    async def question_plays(self, question_id: str) -> list[QuestionPlay]:
        """Every session on a problem that asked any version of the question."""
        problems = (
            (
                await self.s.execute(
                    select(ProblemRow.id, ProblemRow.challenge_id)
                    .join(QuestionVersionRow, QuestionVersionRow.id == ProblemRow.question_version_id)
                    .where(QuestionVersionRow.question_id == question_id)
                    .order_by(ProblemRow.id)
                )
            )
            .tuples()
            .all()
        )
        plays: list[QuestionPlay] = []
        for problem_id, challenge_id in problems:
            challenge = await self._uow.get_challenge_by_id(challenge_id)
            if challenge is None:  # pragma: no cover - foreign key guarantees it
                continue
            problem = next(p for p in challenge.problems if p.id == problem_id)
            sessions = await self._uow._sessions(PlaySessionRow.problem_id == problem_id)
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
        self,
        scopes: Sequence[str],
        periods: Sequence[str],
        player_pk: int,
        points: int,
        correct: int,
        answer_ms: int,
    ) -> None:
        """Add deltas to every (scope, period) standing of the player (creating rows as needed)."""
        values = [
            {
                "scope": s,
                "period": p,
                "player_pk": player_pk,
                "points": points,
                "correct": correct,
                "answer_ms": answer_ms,
            }
            for s in scopes
            for p in periods
        ]
        stmt = self._uow._insert(StandingRowModel).values(values)
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
                st.scope.in_(list(scopes)),
                st.period.in_(list(periods)),
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

    async def repoint_problems(self, question_id: str, to_version_id: int) -> int:
        """Point every problem that asked the question at ``to_version_id``."""
        versions = select(QuestionVersionRow.id).where(QuestionVersionRow.question_id == question_id)
        result = await self.s.execute(
            update(ProblemRow)
            .where(ProblemRow.question_version_id.in_(versions))
            .values(question_version_id=to_version_id)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def add_correction(
        self,
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
        stmt = self._uow._insert(CorrectionNoteRow).values(
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


__all__ = ["SqlDisputeStore"]
