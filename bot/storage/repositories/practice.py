"""SqlPracticeRepository: quizzes, flashcard reviews and explain answers (the PracticeRepository port).

Practice tables are written only here and never joined into standings.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, case, delete, func, or_, select, update

from bot.core.deck import DECK_KINDS, deck_question_ids
from bot.core.grading import ConceptResult
from bot.core.models import PlayerRef, QuestionCandidate, Tenant
from bot.core.practice_models import (
    CardSource,
    DaySettings,
    PracticeTotals,
    QuizItemRow,
    QuizRow,
    ReviewCardRow,
    ReviewRecord,
    TopicCount,
)
from bot.core.srs import GRADES, CardState, Grade
from bot.core.vocabulary import Difficulty
from bot.storage.mapping import question_from_version
from bot.storage.models import (
    CardReviewRow,
    ChallengeRow,
    ChannelRow,
    ExplainAttemptRow,
    PlayerRow,
    PlaySessionRow,
    PracticeNudgeRow,
    PracticeQuizItemRow,
    PracticeQuizRow,
    PracticeSettingsRow,
    PracticeTeamParametersRow,
    ProblemRow,
    QuestionVersionRow,
    ReviewCardModel,
)
from bot.storage.models import QuestionRow as QuestionModel
from bot.storage.repositories.questions import tenant_bank
from bot.storage.sql import SqlRepository, latest_versions

#: The order new cards are introduced in: beginner facts before expert ones.
_LEVELS = {str(level): level.rank for level in Difficulty}
#: A card is suspended while its question is retired (by the operator): it is kept, not shown.
_ACTIVE = QuestionModel.retired_at.is_(None)


def _new_order(qid: str, kind: str, difficulty: str) -> tuple[int, int, str]:
    """Beginner cards first; within a level, the hand-written recall cards, then the questions' cards,
    then explain prompts; within those, topics mixed by a stable hash (not the alphabet of ids).
    """
    rank = 0 if kind == "flashcard" else 2 if kind == "explain" else 1
    return (_LEVELS.get(difficulty, 9), rank, hashlib.sha256(qid.encode()).hexdigest())


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

    async def practice_candidates(
        self, player_pk: int, kinds: Sequence[str], view: Tenant | None = None
    ) -> list[QuestionCandidate]:
        """Questions of these kinds as ``view`` plays them (the daily picker's tenant_bank: its own
        questions and corrections included, its retirements left out; None: the shared bank alone);
        ``uses`` counts this player's quiz items and explain attempts.
        """
        rows = list(
            await self.s.scalars(
                tenant_bank(view.key if view is not None else None, kinds).order_by(
                    QuestionVersionRow.question_id
                )
            )
        )
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
    async def _deck_rows(self) -> list[tuple[str, str, str]]:
        """(question id, kind, difficulty) of the shared bank's active questions of the deck's kinds."""
        # The picker's query for the shared bank (no tenant), narrowed to the three columns the deck needs.
        stmt = tenant_bank(None, sorted(DECK_KINDS)).with_only_columns(
            QuestionVersionRow.question_id, QuestionVersionRow.kind, QuestionVersionRow.difficulty
        )
        return [(str(q), str(k), str(d)) for q, k, d in (await self.s.execute(stmt)).tuples()]

    def _card_values(self, player_pk: int, qid: str, source: CardSource, now: dt.datetime) -> dict[str, Any]:
        return {
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

    async def ensure_review_cards(self, player_pk: int, now: dt.datetime) -> int:
        """Add the player's missing cards: the deck drawn from the bank (bot.core.deck), and the shared
        questions of challenges they got wrong or timed out on.
        """
        rows = await self._deck_rows()
        meta = {qid: (kind, d) for qid, kind, d in rows}
        bank = deck_question_ids((qid, kind) for qid, kind, _ in rows)
        missed = (
            select(QuestionVersionRow.question_id)
            .join(ProblemRow, ProblemRow.question_version_id == QuestionVersionRow.id)
            .join(PlaySessionRow, PlaySessionRow.problem_id == ProblemRow.id)
            .join(QuestionModel, QuestionModel.id == QuestionVersionRow.question_id)
            .where(
                PlaySessionRow.player_pk == player_pk,
                PlaySessionRow.outcome.in_(("wrong", "timeout")),
                QuestionModel.owner_tenant.is_(None),  # a tenant's own question stays in its tenant
            )
            .distinct()
        )
        have = set(
            await self.s.scalars(
                select(ReviewCardModel.question_id).where(ReviewCardModel.player_pk == player_pk)
            )
        )
        mistakes = sorted(str(q) for q in await self.s.scalars(missed))
        bank_new = sorted((q for q in bank if q not in mistakes), key=lambda q: _new_order(q, *meta[q]))
        # Inserted in the order they are to be introduced: new cards are taken by (mistake first, id).
        values = [self._card_values(player_pk, q, "mistake", now) for q in mistakes if q not in have]
        values += [self._card_values(player_pk, q, "bank", now) for q in bank_new if q not in have]
        if not values:
            return 0
        # ON CONFLICT: a concurrent session may have added the same card; the unique key keeps one.
        stmt = self._db.insert(ReviewCardModel).values(values).on_conflict_do_nothing()
        result = await self.s.execute(stmt)
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def add_mistake_card(self, player_pk: int, question_id: str, now: dt.datetime) -> bool:
        """Put a question the player got wrong in their deck once; a card still new moves ahead of the
        bank's new cards. A tenant's own question makes no card (the deck is the shared bank's: a player
        reviews it wherever they are). True when a card was added or moved ahead.
        """
        owner = await self.s.execute(
            select(QuestionModel.owner_tenant).where(QuestionModel.id == question_id, _ACTIVE)
        )
        found = owner.first()
        if found is None or found[0] is not None:
            return False
        added = await self.s.execute(
            self._db.insert(ReviewCardModel)
            .values(self._card_values(player_pk, question_id, "mistake", now))
            .on_conflict_do_nothing()
        )
        if added.rowcount:  # type: ignore[attr-defined]
            return True
        moved = await self.s.execute(
            update(ReviewCardModel)
            .where(
                ReviewCardModel.player_pk == player_pk,
                ReviewCardModel.question_id == question_id,
                ReviewCardModel.phase == "new",
                ReviewCardModel.source == "bank",
            )
            .values(source="mistake")
        )
        return bool(moved.rowcount)  # type: ignore[attr-defined]

    async def _cards(
        self, where: Any, limit: int | None = None, *, new_order: bool = False, view: Tenant | None = None
    ) -> list[ReviewCardRow]:
        # The version each card shows is the latest one the reviewing tenant sees (its correction of a
        # shared question, if any): the visibility rule of the picker, never another tenant's versions.
        latest = latest_versions(view.key if view is not None else None)
        order = (
            (case((ReviewCardModel.source == "mistake", 0), else_=1), ReviewCardModel.id)
            if new_order
            else (ReviewCardModel.due_at, ReviewCardModel.id)
        )
        stmt = (
            select(ReviewCardModel, QuestionVersionRow, QuestionModel.retired_at)
            .join(latest, latest.c.question_id == ReviewCardModel.question_id)
            .join(
                QuestionVersionRow,
                and_(
                    QuestionVersionRow.question_id == latest.c.question_id,
                    QuestionVersionRow.version == latest.c.v,
                ),
            )
            .join(QuestionModel, QuestionModel.id == ReviewCardModel.question_id)
            .where(where)
            .order_by(*order)
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
                suspended=retired is not None,
            )
            for card, version, retired in (await self.s.execute(stmt)).tuples()
        ]

    async def due_cards(
        self,
        player_pk: int,
        until: dt.datetime,
        limit: int,
        phases: Sequence[str] | None = None,
        view: Tenant | None = None,
    ) -> list[ReviewCardRow]:
        """The player's studied (not new) cards due by ``until``, soonest first; suspended ones left out;
        each as ``view`` sees its question (None: the shared bank).
        """
        where = and_(
            ReviewCardModel.player_pk == player_pk,
            ReviewCardModel.due_at <= until,
            ReviewCardModel.phase != "new",
            _ACTIVE,
        )
        if phases is not None:
            where = and_(where, ReviewCardModel.phase.in_(list(phases)))
        return await self._cards(where, limit, view=view)

    async def day_due_cards(
        self, player_pk: int, now: dt.datetime, day_end: dt.datetime, limit: int, view: Tenant | None = None
    ) -> list[ReviewCardRow]:
        """Studied cards due for the player's day: (re)learning ones due by ``now``, review ones due before
        ``day_end`` (the player's next day cutoff, as Anki); soonest first, suspended ones left out.
        """
        where = and_(
            ReviewCardModel.player_pk == player_pk,
            _ACTIVE,
            or_(
                and_(ReviewCardModel.phase.in_(("learning", "relearning")), ReviewCardModel.due_at <= now),
                and_(ReviewCardModel.phase == "review", ReviewCardModel.due_at < day_end),
            ),
        )
        return await self._cards(where, limit, view=view)

    async def new_cards(self, player_pk: int, limit: int, view: Tenant | None = None) -> list[ReviewCardRow]:
        """The player's next new cards: mistakes first, then the bank's in the deck's order."""
        if limit <= 0:
            return []
        where = and_(ReviewCardModel.player_pk == player_pk, ReviewCardModel.phase == "new", _ACTIVE)
        return await self._cards(where, limit, new_order=True, view=view)

    async def introduced_since(self, player_pk: int, since: dt.datetime) -> int:
        """How many of the player's cards were studied for the first time at or after ``since``."""
        found = await self.s.scalar(
            select(func.count())
            .select_from(ReviewCardModel)
            .where(ReviewCardModel.player_pk == player_pk, ReviewCardModel.introduced_at >= since)
        )
        return int(found or 0)

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
                # The first review introduces a card (the new-cards-per-day limit counts these).
                introduced_at=func.coalesce(ReviewCardModel.introduced_at, now),
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

    async def set_card_state(self, card_id: int, before: CardState, after: CardState) -> bool:
        """Compare-and-set on ``reps``: a rescheduled state, unless the card was graded meanwhile."""
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
            )
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def players_with_due_cards(self, now: dt.datetime) -> list[tuple[PlayerRef, int]]:
        """Players with cards due now and how many."""
        rows = await self.s.execute(
            select(PlayerRow.platform, PlayerRow.user_id, PlayerRow.display_name, func.count())
            .join(ReviewCardModel, ReviewCardModel.player_pk == PlayerRow.id)
            .join(QuestionModel, QuestionModel.id == ReviewCardModel.question_id)
            .where(ReviewCardModel.due_at <= now, _ACTIVE)
            .group_by(PlayerRow.id, PlayerRow.platform, PlayerRow.user_id, PlayerRow.display_name)
            .order_by(PlayerRow.id)
        )
        return [(PlayerRef(p, u, name), int(n)) for p, u, name, n in rows.tuples()]

    async def deck_topics(self, player_pk: int, now: dt.datetime, day_end: dt.datetime) -> list[TopicCount]:
        """Per topic of the player's active cards: how many, how many studied ones are due for the day,
        how many are new.
        """
        latest = latest_versions()
        studied_due = or_(
            and_(ReviewCardModel.phase.in_(("learning", "relearning")), ReviewCardModel.due_at <= now),
            and_(ReviewCardModel.phase == "review", ReviewCardModel.due_at < day_end),
        )
        rows = await self.s.execute(
            select(
                QuestionVersionRow.topic,
                func.count(ReviewCardModel.id),
                func.coalesce(func.sum(case((studied_due, 1), else_=0)), 0),
                func.coalesce(func.sum(case((ReviewCardModel.phase == "new", 1), else_=0)), 0),
            )
            .join(latest, latest.c.question_id == ReviewCardModel.question_id)
            .join(
                QuestionVersionRow,
                and_(
                    QuestionVersionRow.question_id == latest.c.question_id,
                    QuestionVersionRow.version == latest.c.v,
                ),
            )
            .join(QuestionModel, QuestionModel.id == ReviewCardModel.question_id)
            .where(ReviewCardModel.player_pk == player_pk, _ACTIVE)
            .group_by(QuestionVersionRow.topic)
            .order_by(QuestionVersionRow.topic)
        )
        return [TopicCount(str(t), int(c), int(d), int(n)) for t, c, d, n in rows.tuples()]

    async def review_times(self, player_pk: int, since: dt.datetime) -> list[dt.datetime]:
        """When the player reviewed a card, since ``since`` (for the practice streak)."""
        rows = await self.s.scalars(
            select(CardReviewRow.reviewed_at)
            .join(ReviewCardModel, ReviewCardModel.id == CardReviewRow.card_id)
            .where(ReviewCardModel.player_pk == player_pk, CardReviewRow.reviewed_at >= since)
        )
        return list(rows)

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
        *,
        passed: bool,
    ) -> int:
        """Store a graded explain answer with its verdict."""
        row = ExplainAttemptRow(
            player_pk=player_pk,
            question_version_id=version_id,
            answer=answer,
            covered=sum(c.covered for c in concepts),
            total=len(concepts),
            concepts=[{"name": c.name, "covered": c.covered, "matched": c.matched} for c in concepts],
            passed=passed,
            created_at=now,
        )
        self.s.add(row)
        await self.s.flush()
        return row.id

    async def failed_explains(self, player_pk: int) -> dict[str, dt.datetime]:
        """Question id -> when, for the explain prompts whose latest attempt by this player failed."""
        # The latest attempt per question is the highest id (ids grow with inserts; two attempts in the
        # same instant still have an order). Only this player's rows are read: players are per tenant.
        latest = (
            select(func.max(ExplainAttemptRow.id).label("id"))
            .join(QuestionVersionRow, QuestionVersionRow.id == ExplainAttemptRow.question_version_id)
            .where(ExplainAttemptRow.player_pk == player_pk)
            .group_by(QuestionVersionRow.question_id)
            .subquery()
        )
        stmt = (
            select(QuestionVersionRow.question_id, ExplainAttemptRow.created_at)
            .join(latest, latest.c.id == ExplainAttemptRow.id)
            .join(QuestionVersionRow, QuestionVersionRow.id == ExplainAttemptRow.question_version_id)
            .where(ExplainAttemptRow.passed.is_(False))
        )
        return {str(qid): at for qid, at in (await self.s.execute(stmt)).tuples()}

    async def practice_totals(
        self, player_pk: int, now: dt.datetime, day_end: dt.datetime | None = None
    ) -> PracticeTotals:
        """Counts of the player's practice (a handful of aggregate queries on indexed columns).

        ``cards`` counts suspended cards too; ``cards_due``: studied cards due for the day ending at
        ``day_end`` (None: due now), new cards apart.
        """
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
        studied_due = or_(
            and_(ReviewCardModel.phase.in_(("learning", "relearning")), ReviewCardModel.due_at <= now),
            and_(ReviewCardModel.phase == "review", ReviewCardModel.due_at < (day_end or now)),
        )
        cards, due, new, suspended = (
            await self.s.execute(
                select(
                    func.count(ReviewCardModel.id),
                    func.coalesce(func.sum(case((and_(_ACTIVE, studied_due), 1), else_=0)), 0),
                    func.coalesce(
                        func.sum(case((and_(_ACTIVE, ReviewCardModel.phase == "new"), 1), else_=0)), 0
                    ),
                    func.coalesce(func.sum(case((_ACTIVE, 0), else_=1)), 0),
                )
                .join(QuestionModel, QuestionModel.id == ReviewCardModel.question_id)
                .where(ReviewCardModel.player_pk == player_pk)
            )
        ).one()
        next_due = await self.s.scalar(
            select(func.min(ReviewCardModel.due_at))
            .join(QuestionModel, QuestionModel.id == ReviewCardModel.question_id)
            .where(
                ReviewCardModel.player_pk == player_pk,
                ReviewCardModel.due_at > now,
                ReviewCardModel.phase != "new",
                _ACTIVE,
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
            suspended=int(suspended),
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

    # ---------------------------------------------------------------- the player's day and new cards
    async def day_settings(self, player_pk: int) -> DaySettings:
        """The player's new cards per day and timezone (defaults when they never set them)."""
        found = (
            await self.s.execute(
                select(PracticeSettingsRow.new_per_day, PracticeSettingsRow.timezone).where(
                    PracticeSettingsRow.player_pk == player_pk
                )
            )
        ).first()
        if found is None:
            return DaySettings()
        return DaySettings(int(found[0]), found[1])

    async def set_new_per_day(self, player_pk: int, count: int, now: dt.datetime) -> None:
        """Set how many new cards a day the player studies."""
        row = await self._settings(player_pk, now)
        row.new_per_day = count
        row.updated_at = now
        await self.s.flush()

    async def set_timezone(self, player_pk: int, timezone: str | None, now: dt.datetime) -> None:
        """Set the player's IANA timezone (None: UTC)."""
        row = await self._settings(player_pk, now)
        row.timezone = timezone
        row.updated_at = now
        await self.s.flush()

    # ---------------------------------------------------------------- team parameters
    async def player_team(self, player_pk: int) -> str | None:
        """The player's team: the tenant whose daily challenges they played most (latest on a tie), or
        None for a player who never played one.
        """
        tenant = ChannelRow.platform + ":" + ChannelRow.workspace_id
        found = await self.s.scalar(
            select(tenant)
            .select_from(PlaySessionRow)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
            .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
            .where(PlaySessionRow.player_pk == player_pk)
            .group_by(ChannelRow.platform, ChannelRow.workspace_id)
            .order_by(func.count().desc(), func.max(PlaySessionRow.started_at).desc())
            .limit(1)
        )
        return str(found) if found is not None else None

    async def team_players(self, tenant: str) -> list[int]:
        """Players whose team is ``tenant`` and who have reviewed a card."""
        return sorted(pk for pk, team in (await self.reviewer_teams()).items() if team == tenant)

    async def reviewer_teams(self) -> dict[int, str]:
        """Every reviewer's team, from one grouped query (not one query per reviewer: the daily fit runs
        it for every team of the install).
        """
        reviewers = (
            select(ReviewCardModel.player_pk)
            .join(CardReviewRow, CardReviewRow.card_id == ReviewCardModel.id)
            .distinct()
        )
        tenant = ChannelRow.platform + ":" + ChannelRow.workspace_id
        rows = await self.s.execute(
            select(PlaySessionRow.player_pk, tenant, func.count(), func.max(PlaySessionRow.started_at))
            .select_from(PlaySessionRow)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
            .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
            .where(PlaySessionRow.player_pk.in_(reviewers))
            .group_by(PlaySessionRow.player_pk, ChannelRow.platform, ChannelRow.workspace_id)
        )
        best: dict[int, tuple[int, dt.datetime, str]] = {}
        for player_pk, team, plays, latest in rows.tuples():
            # The same order as player_team: most plays, then the latest play.
            key = (int(plays), _aware(latest), str(team))
            if player_pk not in best or key[:2] > best[player_pk][:2]:
                best[int(player_pk)] = key
        return {pk: team for pk, (_, _, team) in best.items()}

    async def teams(self) -> list[str]:
        """Every tenant that has run a daily challenge somewhere."""
        rows = await self.s.execute(select(ChannelRow.platform, ChannelRow.workspace_id).distinct())
        return sorted(f"{p}:{w}" for p, w in rows.tuples())

    async def team_parameters(self, tenant: str) -> tuple[float, ...] | None:
        """The FSRS parameters fitted to the team's pooled reviews, or None."""
        found = await self.s.scalar(
            select(PracticeTeamParametersRow.fsrs_parameters).where(
                PracticeTeamParametersRow.tenant == tenant
            )
        )
        return tuple(float(x) for x in found) if found else None

    async def team_fitted_at(self, tenant: str) -> dt.datetime | None:
        """When the team's parameters were fitted, or None."""
        found: dt.datetime | None = await self.s.scalar(
            select(PracticeTeamParametersRow.fitted_at).where(PracticeTeamParametersRow.tenant == tenant)
        )
        return found

    async def save_team_parameters(
        self, tenant: str, parameters: Sequence[float], reviews: int, players: int, now: dt.datetime
    ) -> None:
        """Store (or replace) the team's fitted parameters."""
        row = await self.s.get(PracticeTeamParametersRow, tenant)
        if row is None:
            row = PracticeTeamParametersRow(tenant=tenant)
            self.s.add(row)
        row.fsrs_parameters = [float(x) for x in parameters]
        row.reviews = reviews
        row.players = players
        row.fitted_at = now
        await self.s.flush()

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

    async def nudge_candidates(self, now: dt.datetime) -> list[tuple[int, PlayerRef, str | None]]:
        """Opted-in players with an active card due within a day of ``now`` (new ones included), and their
        timezone:
        the service counts each one's day and claims the reminder of that day.
        """
        rows = await self.s.execute(
            select(
                PlayerRow.id,
                PlayerRow.platform,
                PlayerRow.user_id,
                PlayerRow.display_name,
                PracticeSettingsRow.timezone,
            )
            .join(PracticeSettingsRow, PracticeSettingsRow.player_pk == PlayerRow.id)
            .join(ReviewCardModel, ReviewCardModel.player_pk == PlayerRow.id)
            .join(QuestionModel, QuestionModel.id == ReviewCardModel.question_id)
            # A superset: due before the latest any player's day can end (a day is at most 25 hours); the
            # service counts what is due in each player's own day.
            .where(
                PracticeSettingsRow.daily_nudge.is_(True),
                ReviewCardModel.due_at < now + dt.timedelta(hours=26),
                _ACTIVE,
            )
            .group_by(
                PlayerRow.id,
                PlayerRow.platform,
                PlayerRow.user_id,
                PlayerRow.display_name,
                PracticeSettingsRow.timezone,
            )
            .order_by(PlayerRow.id)
        )
        return [(pk, PlayerRef(p, u, name), tz) for pk, p, u, name, tz in rows.tuples()]

    async def nudge_claimed(self, player_pk: int, day: dt.date) -> bool:
        """Whether the player's reminder of ``day`` is already claimed."""
        found = await self.s.scalar(
            select(PracticeNudgeRow.id).where(
                PracticeNudgeRow.player_pk == player_pk, PracticeNudgeRow.day == day
            )
        )
        return found is not None

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


def _aware(value: object) -> dt.datetime:
    """An aggregate's timestamp as an aware UTC datetime (SQLite returns MAX() of a column as text)."""
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
