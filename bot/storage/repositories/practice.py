"""SqlPracticeRepository: quizzes, flashcard reviews and explain answers (the PracticeRepository port).

Practice tables are written only here and never joined into standings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, case, delete, func, select, update

from bot.core.grading import ConceptResult
from bot.core.models import PlayerRef, QuestionCandidate
from bot.core.practice_models import (
    CardSource,
    PracticeTotals,
    QuizItemRow,
    QuizRow,
    ReviewCardRow,
    ReviewRecord,
)
from bot.core.srs import GRADES, CardState, Grade
from bot.core.vocabulary import Kind
from bot.storage.mapping import question_from_version
from bot.storage.models import (
    CardReviewRow,
    ExplainAttemptRow,
    PlayerRow,
    PlaySessionRow,
    PracticeNudgeRow,
    PracticeQuizItemRow,
    PracticeQuizRow,
    PracticeSettingsRow,
    ProblemRow,
    QuestionVersionRow,
    ReviewCardModel,
)
from bot.storage.models import QuestionRow as QuestionModel
from bot.storage.sql import SqlRepository, latest_versions


def _state(row: ReviewCardModel) -> CardState:
    return CardState(
        phase=row.phase,  # type: ignore[arg-type]
        step=row.step,
        stability=row.stability,
        difficulty=row.difficulty,
        due=row.due_at,
        last_review=row.last_reviewed_at,
        interval_days=row.interval_days,
        reps=row.reps,
        lapses=row.lapses,
    )


class SqlPracticeRepository(SqlRepository):
    """The PracticeRepository port (bot/core/repositories/practice.py) over one unit of work."""

    async def _latest_active(self, kinds: Sequence[str]) -> list[QuestionVersionRow]:
        latest = latest_versions()
        stmt = (
            select(QuestionVersionRow)
            .join(
                latest,
                and_(
                    QuestionVersionRow.question_id == latest.c.question_id,
                    QuestionVersionRow.version == latest.c.v,
                ),
            )
            .join(QuestionModel, QuestionModel.id == QuestionVersionRow.question_id)
            .where(QuestionModel.retired_at.is_(None), QuestionVersionRow.kind.in_(list(kinds)))
            .order_by(QuestionVersionRow.question_id)
        )
        return list(await self.s.scalars(stmt))

    async def practice_candidates(self, player_pk: int, kinds: Sequence[str]) -> list[QuestionCandidate]:
        """Active questions of these kinds; ``uses`` counts this player's quiz items and explain attempts."""
        rows = await self._latest_active(kinds)
        used: dict[str, int] = {}
        quiz_uses = (
            select(QuestionVersionRow.question_id, func.count())
            .join(PracticeQuizItemRow, PracticeQuizItemRow.question_version_id == QuestionVersionRow.id)
            .join(PracticeQuizRow, PracticeQuizRow.id == PracticeQuizItemRow.quiz_id)
            .where(PracticeQuizRow.player_pk == player_pk)
            .group_by(QuestionVersionRow.question_id)
        )
        explain_uses = (
            select(QuestionVersionRow.question_id, func.count())
            .join(ExplainAttemptRow, ExplainAttemptRow.question_version_id == QuestionVersionRow.id)
            .where(ExplainAttemptRow.player_pk == player_pk)
            .group_by(QuestionVersionRow.question_id)
        )
        for stmt in (quiz_uses, explain_uses):
            for qid, n in (await self.s.execute(stmt)).tuples():
                used[str(qid)] = used.get(str(qid), 0) + int(n)
        return [
            QuestionCandidate(v.id, v.question_id, v.topic, v.difficulty, v.kind, used.get(v.question_id, 0))
            for v in rows
        ]

    # ---------------------------------------------------------------- quiz
    async def create_quiz(
        self, player_pk: int, topic: str | None, version_ids: Sequence[int], now: dt.datetime
    ) -> QuizRow:
        """Store a new quiz with its questions."""
        quiz = PracticeQuizRow(
            player_pk=player_pk, topic=topic, size=len(version_ids), correct=None, started_at=now
        )
        self.s.add(quiz)
        await self.s.flush()
        self.s.add_all(
            PracticeQuizItemRow(quiz_id=quiz.id, position=i, question_version_id=v)
            for i, v in enumerate(version_ids, start=1)
        )
        await self.s.flush()
        found = await self.get_quiz(quiz.id)
        assert found is not None
        return found

    async def get_quiz(self, quiz_id: int) -> QuizRow | None:
        """A quiz and its items (with the question versions asked)."""
        quiz = (
            await self.s.execute(
                select(
                    PracticeQuizRow.id,
                    PracticeQuizRow.player_pk,
                    PracticeQuizRow.topic,
                    PracticeQuizRow.started_at,
                    PracticeQuizRow.finished_at,
                ).where(PracticeQuizRow.id == quiz_id)
            )
        ).first()
        if quiz is None:
            return None
        items = (
            await self.s.execute(
                select(
                    PracticeQuizItemRow.position,
                    PracticeQuizItemRow.letter,
                    PracticeQuizItemRow.correct,
                    QuestionVersionRow,
                )
                .join(QuestionVersionRow, QuestionVersionRow.id == PracticeQuizItemRow.question_version_id)
                .where(PracticeQuizItemRow.quiz_id == quiz_id)
                .order_by(PracticeQuizItemRow.position)
            )
        ).tuples()
        return QuizRow(
            id=quiz.id,
            player_pk=quiz.player_pk,
            topic=quiz.topic,
            started_at=quiz.started_at,
            finished_at=quiz.finished_at,
            items=tuple(QuizItemRow(p, question_from_version(v), letter, ok) for p, letter, ok, v in items),
        )

    async def answer_quiz_item(
        self, quiz_id: int, position: int, letter: str, correct: bool, now: dt.datetime
    ) -> bool:
        """Record one answer once; True for the call that recorded it."""
        result = await self.s.execute(
            update(PracticeQuizItemRow)
            .where(
                PracticeQuizItemRow.quiz_id == quiz_id,
                PracticeQuizItemRow.position == position,
                PracticeQuizItemRow.letter.is_(None),
            )
            .values(letter=letter, correct=correct, answered_at=now)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def finish_quiz(self, quiz_id: int, correct: int, now: dt.datetime) -> bool:
        """Store the score once."""
        result = await self.s.execute(
            update(PracticeQuizRow)
            .where(PracticeQuizRow.id == quiz_id, PracticeQuizRow.finished_at.is_(None))
            .values(correct=correct, finished_at=now)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    # ---------------------------------------------------------------- flashcards
    async def ensure_review_cards(self, player_pk: int, now: dt.datetime) -> int:
        """Add the player's missing cards: bank flashcards, and challenge questions they missed."""
        bank = [v.question_id for v in await self._latest_active((Kind.FLASHCARD,))]
        missed = (
            select(QuestionVersionRow.question_id)
            .join(ProblemRow, ProblemRow.question_version_id == QuestionVersionRow.id)
            .join(PlaySessionRow, PlaySessionRow.problem_id == ProblemRow.id)
            .where(PlaySessionRow.player_pk == player_pk, PlaySessionRow.outcome.in_(("wrong", "timeout")))
            .distinct()
        )
        wanted: dict[str, CardSource] = dict.fromkeys(bank, "bank")
        for qid in await self.s.scalars(missed):
            wanted.setdefault(str(qid), "mistake")
        have = set(
            await self.s.scalars(
                select(ReviewCardModel.question_id).where(ReviewCardModel.player_pk == player_pk)
            )
        )
        values = [
            {
                "player_pk": player_pk,
                "question_id": qid,
                "source": source,
                "phase": "new",
                "step": 0,
                "interval_days": 0,
                "due_at": now,
                "reps": 0,
                "lapses": 0,
                "created_at": now,
            }
            for qid, source in sorted(wanted.items())
            if qid not in have
        ]
        if not values:
            return 0
        # ON CONFLICT: a concurrent session may have added the same card; the unique key keeps one.
        stmt = self._db.insert(ReviewCardModel).values(values).on_conflict_do_nothing()
        result = await self.s.execute(stmt)
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def _cards(self, where: Any, limit: int | None = None) -> list[ReviewCardRow]:
        latest = latest_versions()
        stmt = (
            select(ReviewCardModel, QuestionVersionRow)
            .join(latest, latest.c.question_id == ReviewCardModel.question_id)
            .join(
                QuestionVersionRow,
                and_(
                    QuestionVersionRow.question_id == latest.c.question_id,
                    QuestionVersionRow.version == latest.c.v,
                ),
            )
            .where(where)
            .order_by(ReviewCardModel.due_at, ReviewCardModel.id)
        )
        if limit is not None:
            stmt = stmt.limit(limit)
        return [
            ReviewCardRow(
                id=card.id,
                player_pk=card.player_pk,
                question=question_from_version(version),
                source="bank" if card.source == "bank" else "mistake",
                state=_state(card),
            )
            for card, version in (await self.s.execute(stmt)).tuples()
        ]

    async def due_cards(
        self, player_pk: int, until: dt.datetime, limit: int, phases: Sequence[str] | None = None
    ) -> list[ReviewCardRow]:
        """The player's cards due by ``until``, soonest first."""
        where = and_(ReviewCardModel.player_pk == player_pk, ReviewCardModel.due_at <= until)
        if phases is not None:
            where = and_(where, ReviewCardModel.phase.in_(list(phases)))
        return await self._cards(where, limit)

    async def get_review_card(self, card_id: int) -> ReviewCardRow | None:
        """A card by id."""
        found = await self._cards(ReviewCardModel.id == card_id, 1)
        return found[0] if found else None

    async def save_review(
        self, card_id: int, before: CardState, after: CardState, grade: Grade, now: dt.datetime
    ) -> bool:
        """Compare-and-set on ``reps``: only the first grade of one showing is stored; log it."""
        assert after.due is not None
        result = await self.s.execute(
            update(ReviewCardModel)
            .where(ReviewCardModel.id == card_id, ReviewCardModel.reps == before.reps)
            .values(
                phase=after.phase,
                step=after.step,
                stability=after.stability,
                difficulty=after.difficulty,
                interval_days=after.interval_days,
                due_at=after.due,
                reps=after.reps,
                lapses=after.lapses,
                last_reviewed_at=now,
            )
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            return False
        self.s.add(
            CardReviewRow(
                card_id=card_id,
                grade=grade,
                reviewed_at=now,
                phase=after.phase,
                interval_days=after.interval_days,
                stability=after.stability,
                difficulty=after.difficulty,
                due_at=after.due,
            )
        )
        await self.s.flush()
        return True

    async def players_with_due_cards(self, now: dt.datetime) -> list[tuple[PlayerRef, int]]:
        """Players with cards due now and how many."""
        rows = await self.s.execute(
            select(PlayerRow.platform, PlayerRow.user_id, PlayerRow.display_name, func.count())
            .join(ReviewCardModel, ReviewCardModel.player_pk == PlayerRow.id)
            .where(ReviewCardModel.due_at <= now)
            .group_by(PlayerRow.id, PlayerRow.platform, PlayerRow.user_id, PlayerRow.display_name)
            .order_by(PlayerRow.id)
        )
        return [(PlayerRef(p, u, name), int(n)) for p, u, name, n in rows.tuples()]

    # ---------------------------------------------------------------- the review log (FSRS's optimizer)
    async def review_history(self, player_pk: int) -> list[ReviewRecord]:
        """Every logged self-grade of the player's cards, oldest first."""
        rows = await self.s.execute(
            select(CardReviewRow.card_id, CardReviewRow.grade, CardReviewRow.reviewed_at)
            .join(ReviewCardModel, ReviewCardModel.id == CardReviewRow.card_id)
            .where(ReviewCardModel.player_pk == player_pk)
            .order_by(CardReviewRow.reviewed_at, CardReviewRow.id)
        )
        grades: dict[str, Grade] = {g: g for g in GRADES}
        return [ReviewRecord(card, grades[grade], at) for card, grade, at in rows.tuples()]

    # ---------------------------------------------------------------- explain and totals
    async def add_explain_attempt(
        self,
        player_pk: int,
        version_id: int,
        answer: str,
        concepts: Sequence[ConceptResult],
        now: dt.datetime,
    ) -> int:
        """Store a graded explain answer."""
        row = ExplainAttemptRow(
            player_pk=player_pk,
            question_version_id=version_id,
            answer=answer,
            covered=sum(c.covered for c in concepts),
            total=len(concepts),
            concepts=[{"name": c.name, "covered": c.covered, "matched": c.matched} for c in concepts],
            created_at=now,
        )
        self.s.add(row)
        await self.s.flush()
        return row.id

    async def practice_totals(self, player_pk: int, now: dt.datetime) -> PracticeTotals:
        """Counts of the player's practice (a handful of aggregate queries on indexed columns)."""
        quizzes = int(
            await self.s.scalar(
                select(func.count())
                .select_from(PracticeQuizRow)
                .where(PracticeQuizRow.player_pk == player_pk, PracticeQuizRow.finished_at.is_not(None))
            )
            or 0
        )
        answers, right = (
            await self.s.execute(
                select(
                    func.count(PracticeQuizItemRow.id),
                    func.coalesce(func.sum(case((PracticeQuizItemRow.correct.is_(True), 1), else_=0)), 0),
                )
                .join(PracticeQuizRow, PracticeQuizRow.id == PracticeQuizItemRow.quiz_id)
                .where(PracticeQuizRow.player_pk == player_pk, PracticeQuizItemRow.letter.is_not(None))
            )
        ).one()
        cards, due, new = (
            await self.s.execute(
                select(
                    func.count(ReviewCardModel.id),
                    func.coalesce(func.sum(case((ReviewCardModel.due_at <= now, 1), else_=0)), 0),
                    func.coalesce(func.sum(case((ReviewCardModel.phase == "new", 1), else_=0)), 0),
                ).where(ReviewCardModel.player_pk == player_pk)
            )
        ).one()
        next_due = await self.s.scalar(
            select(func.min(ReviewCardModel.due_at)).where(
                ReviewCardModel.player_pk == player_pk, ReviewCardModel.due_at > now
            )
        )
        reviews = int(
            await self.s.scalar(
                select(func.count())
                .select_from(CardReviewRow)
                .join(ReviewCardModel, ReviewCardModel.id == CardReviewRow.card_id)
                .where(ReviewCardModel.player_pk == player_pk)
            )
            or 0
        )
        attempts, covered, total = (
            await self.s.execute(
                select(
                    func.count(ExplainAttemptRow.id),
                    func.coalesce(func.sum(ExplainAttemptRow.covered), 0),
                    func.coalesce(func.sum(ExplainAttemptRow.total), 0),
                ).where(ExplainAttemptRow.player_pk == player_pk)
            )
        ).one()
        return PracticeTotals(
            quizzes=quizzes,
            quiz_answers=int(answers),
            quiz_correct=int(right),
            cards=int(cards),
            cards_due=int(due),
            new_cards=int(new),
            reviews=reviews,
            explain_attempts=int(attempts),
            concepts_covered=int(covered),
            concepts_total=int(total),
            next_due=next_due,
        )


class SqlPracticeSettingsRepository(SqlRepository):
    """Each player's practice settings: fitted FSRS parameters and the opt-in daily nudge with its claims."""

    # ---------------------------------------------------------------- FSRS parameters
    async def _settings(self, player_pk: int, now: dt.datetime) -> PracticeSettingsRow:
        """The player's settings row, created (nudge off, default parameters) on first use."""
        await self.s.execute(
            self._db.insert(PracticeSettingsRow)
            .values(player_pk=player_pk, daily_nudge=False, updated_at=now)
            .on_conflict_do_nothing()
        )
        row = await self.s.get(PracticeSettingsRow, player_pk, populate_existing=True)
        assert row is not None
        return row

    async def fsrs_parameters(self, player_pk: int) -> tuple[float, ...] | None:
        """The player's optimised FSRS parameters, or None."""
        found = await self.s.scalar(
            select(PracticeSettingsRow.fsrs_parameters).where(PracticeSettingsRow.player_pk == player_pk)
        )
        return tuple(float(x) for x in found) if found else None

    async def save_fsrs_parameters(
        self, player_pk: int, parameters: Sequence[float], reviews: int, now: dt.datetime
    ) -> None:
        """Store the player's optimised parameters."""
        row = await self._settings(player_pk, now)
        row.fsrs_parameters = [float(x) for x in parameters]
        row.parameters_reviews = reviews
        row.parameters_at = now
        row.updated_at = now
        await self.s.flush()

    async def optimization_candidates(self, min_reviews: int, stale_before: dt.datetime) -> list[PlayerRef]:
        """Players with enough logged reviews and no parameters fitted since ``stale_before``."""
        fitted = select(PracticeSettingsRow.player_pk).where(
            PracticeSettingsRow.parameters_at >= stale_before
        )
        rows = await self.s.execute(
            select(PlayerRow.platform, PlayerRow.user_id, PlayerRow.display_name)
            .join(ReviewCardModel, ReviewCardModel.player_pk == PlayerRow.id)
            .join(CardReviewRow, CardReviewRow.card_id == ReviewCardModel.id)
            .where(PlayerRow.id.not_in(fitted))
            .group_by(PlayerRow.id, PlayerRow.platform, PlayerRow.user_id, PlayerRow.display_name)
            .having(func.count(CardReviewRow.id) >= min_reviews)
            .order_by(PlayerRow.id)
        )
        return [PlayerRef(p, u, name) for p, u, name in rows.tuples()]

    # ---------------------------------------------------------------- the daily nudge
    async def set_nudge(self, player_pk: int, enabled: bool, now: dt.datetime) -> None:
        """Turn the player's daily reminder on or off."""
        row = await self._settings(player_pk, now)
        row.daily_nudge = enabled
        row.updated_at = now
        await self.s.flush()

    async def nudge_enabled(self, player_pk: int) -> bool:
        """Whether the player opted in."""
        found = await self.s.scalar(
            select(PracticeSettingsRow.daily_nudge).where(PracticeSettingsRow.player_pk == player_pk)
        )
        return bool(found)

    async def nudge_candidates(self, now: dt.datetime, day: dt.date) -> list[tuple[int, PlayerRef, int]]:
        """Opted-in players with cards due and no claim for ``day``."""
        claimed = select(PracticeNudgeRow.id).where(
            PracticeNudgeRow.player_pk == PlayerRow.id, PracticeNudgeRow.day == day
        )
        rows = await self.s.execute(
            select(PlayerRow.id, PlayerRow.platform, PlayerRow.user_id, PlayerRow.display_name, func.count())
            .join(PracticeSettingsRow, PracticeSettingsRow.player_pk == PlayerRow.id)
            .join(ReviewCardModel, ReviewCardModel.player_pk == PlayerRow.id)
            .where(
                PracticeSettingsRow.daily_nudge.is_(True), ReviewCardModel.due_at <= now, ~claimed.exists()
            )
            .group_by(PlayerRow.id, PlayerRow.platform, PlayerRow.user_id, PlayerRow.display_name)
            .order_by(PlayerRow.id)
        )
        return [(pk, PlayerRef(p, u, name), int(n)) for pk, p, u, name, n in rows.tuples()]

    async def claim_nudge(self, player_pk: int, day: dt.date, due: int, now: dt.datetime) -> bool:
        """First insert of (player, day) wins."""
        result = await self.s.execute(
            self._db.insert(PracticeNudgeRow)
            .values(player_pk=player_pk, day=day, due=due, claimed_at=now)
            .on_conflict_do_nothing()
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def release_nudge(self, player_pk: int, day: dt.date) -> None:
        """Drop an undelivered claim."""
        await self.s.execute(
            delete(PracticeNudgeRow).where(
                PracticeNudgeRow.player_pk == player_pk, PracticeNudgeRow.day == day
            )
        )
