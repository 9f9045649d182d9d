"""Practice use cases: a 5-question quiz, flashcard review with SM-2, and explain prompts.

Every public method is one service call in its own unit of work. Practice never writes standings,
points, completions or badges: the competitive leaderboard is untouched, and practice figures come from
:meth:`PracticeService.stats`.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence

from bot.core.errors import InvalidAnswerError, NotFoundError, RankZeroError
from bot.core.grading import grade_explanation
from bot.core.models import PlayerRef, Question, QuestionCandidate
from bot.core.ports import Clock
from bot.core.practice_models import (
    DueNudge,
    ExplainPromptCard,
    ExplainResultCard,
    FlashcardCard,
    PracticeStatsCard,
    PracticeUnitOfWork,
    QuizFeedback,
    QuizItemResult,
    QuizQuestionCard,
    QuizResultCard,
    QuizRow,
    ReviewCardRow,
    ReviewOutcome,
    ReviewSummary,
)
from bot.core.sm2 import ANKI_DEFAULTS, GRADES, CardState, Grade, Sm2Config, schedule
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS, Kind

QUIZ_SIZE = 5
#: Anki's "learn ahead limit": when nothing is due, learning cards due within this are shown early.
LEARN_AHEAD = dt.timedelta(minutes=20)
#: Longest explain answer we grade (a chat message is shorter; this bounds the grader's work).
MAX_ANSWER_CHARS = 5000
GRADE_KEYS: dict[str, Grade] = {
    "1": "again",
    "2": "hard",
    "3": "good",
    "4": "easy",
    "a": "again",
    "h": "hard",
    "g": "good",
    "e": "easy",
}


class PracticeError(RankZeroError):
    """A practice request that cannot be served (empty answer, grade for a card not shown...)."""


def parse_grade(text: str) -> Grade:
    """A grade from a key or word: 1-4, a/h/g/e or again/hard/good/easy."""
    key = text.strip().lower()
    if key in GRADES:
        return key
    if key in GRADE_KEYS:
        return GRADE_KEYS[key]
    raise InvalidAnswerError(f"unknown grade {text!r}: use 1-4, a/h/g/e or again/hard/good/easy")


def format_delay(delta: dt.timedelta) -> str:
    """A short human delay: '1m', '6m', '2h', '4d', '3.5mo', '1.2y' (as Anki labels its buttons)."""
    seconds = delta.total_seconds()
    if seconds < 3600:
        return f"{max(1, round(seconds / 60))}m"
    if seconds < 86400:
        return f"{round(seconds / 3600)}h"
    days = seconds / 86400
    if days < 30:
        return f"{round(days)}d"
    if days < 365:
        return f"{days / 30:.1f}mo"
    return f"{days / 365:.1f}y"


def _choose_topic(wanted: str | None, topics: Sequence[str], what: str) -> list[str]:
    """Topics matching ``wanted`` (case-insensitive: exact name first, else substring); all if None."""
    if wanted is None or not wanted.strip():
        return list(topics)
    key = wanted.strip().casefold()
    exact = [t for t in topics if t.casefold() == key]
    matches = exact or [t for t in topics if key in t.casefold()]
    if not matches:
        listing = ", ".join(sorted(set(topics), key=str.casefold)) or "(none: import the bank first)"
        raise NotFoundError(f"no {what} on topic {wanted!r}. Available topics: {listing}")
    return matches


def _pick(candidates: list[QuestionCandidate], n: int, rng: random.Random) -> list[QuestionCandidate]:
    """``n`` questions, least practised by this player first, ties at random."""
    shuffled = candidates[:]
    rng.shuffle(shuffled)
    shuffled.sort(key=lambda c: c.uses)
    return shuffled[:n]


class PracticeService:
    """Practice use cases over a unit-of-work factory and a clock."""

    def __init__(
        self,
        uow_factory: Callable[[], PracticeUnitOfWork],
        clock: Clock,
        *,
        sm2: Sm2Config = ANKI_DEFAULTS,
        seed: int | None = None,
    ) -> None:
        self._uow = uow_factory
        self._clock = clock
        self._sm2 = sm2
        self._rng = random.Random(seed)

    # ------------------------------------------------------------------ quiz
    async def start_quiz(self, player: PlayerRef, topic: str | None = None) -> QuizQuestionCard:
        """Start a quiz of 5 multiple-choice questions (fewer if the topic has fewer); return the first."""
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.ensure_player(player)
            # A quiz draws from every multiple-choice kind of the bank.
            candidates = await uow.practice_candidates(player_pk, MULTIPLE_CHOICE_KINDS)
            topics = _choose_topic(topic, sorted({c.topic for c in candidates}), "quiz questions")
            pool = [c for c in candidates if c.topic in topics]
            if not pool:
                raise NotFoundError(
                    "the question bank has no multiple-choice questions: import it first "
                    "(rankzero questions import questions/)"
                )
            picks = _pick(pool, QUIZ_SIZE, self._rng)
            label = topics[0] if topic and len(topics) == 1 else topic
            quiz = await uow.create_quiz(player_pk, label, [c.version_id for c in picks], now)
        card = self._quiz_card(quiz)
        assert card is not None
        return card

    async def _own_quiz(self, uow: PracticeUnitOfWork, player: PlayerRef, quiz_id: int) -> QuizRow:
        player_pk = await uow.ensure_player(player)
        quiz = await uow.get_quiz(quiz_id)
        if quiz is None or quiz.player_pk != player_pk:
            raise NotFoundError(f"no quiz {quiz_id} of yours: start one with `quiz`")
        return quiz

    @staticmethod
    def _quiz_card(quiz: QuizRow) -> QuizQuestionCard | None:
        item = next((i for i in quiz.items if i.letter is None), None)
        if item is None:
            return None
        q = item.question
        return QuizQuestionCard(
            quiz_id=quiz.id,
            position=item.position,
            total=len(quiz.items),
            question_id=q.id,
            topic=q.topic,
            difficulty=q.difficulty,
            prompt=q.prompt,
            code=q.code,
            choices=tuple((c.letter, c.text) for c in q.choices),
        )

    async def quiz_question(self, player: PlayerRef, quiz_id: int) -> QuizQuestionCard | None:
        """The quiz's next unanswered question, or None when every question is answered."""
        async with self._uow() as uow:
            return self._quiz_card(await self._own_quiz(uow, player, quiz_id))

    async def answer_quiz(self, player: PlayerRef, quiz_id: int, position: int, letter: str) -> QuizFeedback:
        """Answer one quiz question (one try, untimed); feedback at once. A repeat returns the first
        answer's feedback with ``duplicate=True``.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            quiz = await self._own_quiz(uow, player, quiz_id)
            item = next((i for i in quiz.items if i.position == position), None)
            if item is None:
                raise NotFoundError(f"quiz {quiz_id} has no question {position}")
            q = item.question
            chosen = letter.strip().upper()
            if q.choice(chosen) is None:
                letters = "/".join(c.letter for c in q.choices)
                raise InvalidAnswerError(f"{letter!r} is not a choice of this question: answer {letters}")
            recorded = await uow.answer_quiz_item(quiz_id, position, chosen, chosen == q.correct_letter, now)
            quiz = await self._own_quiz(uow, player, quiz_id)
            answered = [i for i in quiz.items if i.letter is not None]
            score = sum(bool(i.correct) for i in answered)
            finished = len(answered) == len(quiz.items)
            if finished:
                await uow.finish_quiz(quiz_id, score, now)
            stored = next(i for i in quiz.items if i.position == position)
        return QuizFeedback(
            quiz_id=quiz_id,
            position=position,
            total=len(quiz.items),
            letter=stored.letter or chosen,
            correct=bool(stored.correct),
            correct_letter=q.correct_letter or "?",
            choices=q.choices,
            explanation=q.explanation,
            score=score,
            answered=len(answered),
            finished=finished,
            duplicate=not recorded,
        )

    async def quiz_result(self, player: PlayerRef, quiz_id: int) -> QuizResultCard:
        """The quiz's score so far ("You got 4/5" once every question is answered)."""
        async with self._uow() as uow:
            quiz = await self._own_quiz(uow, player, quiz_id)
        items = tuple(
            QuizItemResult(i.position, i.question.id, i.question.topic, i.letter, bool(i.correct))
            for i in quiz.items
        )
        return QuizResultCard(quiz.id, quiz.topic, sum(i.correct for i in items), len(items), items)

    # ------------------------------------------------------------------ flashcards
    async def start_review(self, player: PlayerRef) -> ReviewSummary:
        """Bring the player's deck up to date (new bank cards, cards for challenge mistakes) and count
        what is due.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.ensure_player(player)
            added = await uow.ensure_review_cards(player_pk, now)
            totals = await uow.practice_totals(player_pk, now)
        return ReviewSummary(totals.cards, totals.cards_due, totals.new_cards, added, totals.next_due)

    def _flashcard(self, row: ReviewCardRow, remaining: int, now: dt.datetime) -> FlashcardCard:
        q = row.question
        if row.source == "bank":
            front = str(q.extra.get("front") or q.prompt)
            back = str(q.extra.get("back") or "")
        else:
            front = q.prompt
            right = next((c for c in q.choices if c.correct), None)
            back = f"{right.letter}. {right.text}" if right else ""
        previews = []
        for grade in GRADES:
            after = schedule(row.state, grade, now, self._sm2)
            assert after.due is not None
            previews.append((grade, format_delay(after.due - now)))
        return FlashcardCard(
            card_id=row.id,
            question_id=q.id,
            source=row.source,
            topic=q.topic,
            front=front,
            code=q.code,
            back=back,
            explanation=q.explanation,
            phase=row.state.phase,
            lapses=row.state.lapses,
            next_intervals=tuple(previews),
            remaining=remaining,
            showing=row.state.reps,
        )

    async def next_card(self, player: PlayerRef) -> FlashcardCard | None:
        """The player's next card to review: due cards first; when none, a (re)learning card due within
        the learn-ahead limit (20 minutes, as Anki); None when the session is done.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.ensure_player(player)
            due = await uow.due_cards(player_pk, now, 1)
            totals = await uow.practice_totals(player_pk, now)
            remaining = totals.cards_due
            if not due:
                due = await uow.due_cards(player_pk, now + LEARN_AHEAD, 1, ("learning", "relearning"))
                remaining = len(due)
        return self._flashcard(due[0], remaining, now) if due else None

    async def grade_card(
        self, player: PlayerRef, card_id: int, grade: Grade | str, showing: int | None = None
    ) -> ReviewOutcome:
        """Self-grade a card (again/hard/good/easy) and schedule it with SM-2.

        ``showing`` is the card's :attr:`FlashcardCard.showing` (adapters put it in the button id): a
        second grade of the same showing (double click, redelivery) changes nothing and returns
        ``duplicate=True``. A card not due yet cannot be graded.
        """
        g = parse_grade(grade)
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.ensure_player(player)
            row = await uow.get_review_card(card_id)
            if row is None or row.player_pk != player_pk:
                raise NotFoundError(f"no card {card_id} in your deck: run `review` to get your due cards")
            if showing is not None and showing != row.state.reps:
                return self._outcome(row.id, g, row.state, now, duplicate=True)
            if row.state.due is not None and row.state.due > now + LEARN_AHEAD:
                wait = format_delay(row.state.due - now)
                raise PracticeError(f"that card is not due yet (next review in {wait}): run `review` later")
            after = schedule(row.state, g, now, self._sm2)
            if not await uow.save_review(card_id, row.state, after, g, now):
                current = await uow.get_review_card(card_id)
                assert current is not None
                return self._outcome(row.id, g, current.state, now, duplicate=True)
        return self._outcome(row.id, g, after, now)

    @staticmethod
    def _outcome(
        card_id: int, grade: Grade, state: CardState, now: dt.datetime, *, duplicate: bool = False
    ) -> ReviewOutcome:
        due = state.due or now
        return ReviewOutcome(
            card_id=card_id,
            grade=grade,
            phase=state.phase,
            interval_days=state.interval_days,
            due=due,
            next_in=format_delay(max(dt.timedelta(0), due - now)),
            lapses=state.lapses,
            is_leech=state.is_leech,
            duplicate=duplicate,
        )

    async def players_due(self) -> list[DueNudge]:
        """Players with cards due now, for a daily nudge (adapters send the DM / ephemeral message)."""
        async with self._uow() as uow:
            rows = await uow.players_with_due_cards(self._clock.now())
        return [DueNudge(p, n) for p, n in rows]

    # ------------------------------------------------------------------ explain
    async def explain_prompt(self, player: PlayerRef, topic: str | None = None) -> ExplainPromptCard:
        """An explain prompt (optionally on a topic), the one this player practised least first."""
        async with self._uow() as uow:
            player_pk = await uow.ensure_player(player)
            candidates = await uow.practice_candidates(player_pk, (Kind.EXPLAIN,))
            topics = _choose_topic(topic, sorted({c.topic for c in candidates}), "explain prompts")
            pool = [c for c in candidates if c.topic in topics]
            if not pool:
                raise NotFoundError("the question bank has no explain prompts: import it first")
            pick = _pick(pool, 1, self._rng)[0]
            q = await uow.question_version(pick.version_id)
        assert q is not None
        return ExplainPromptCard(
            question_id=q.id,
            version_id=q.version_id,
            topic=q.topic,
            difficulty=q.difficulty,
            prompt=q.prompt,
            hint=q.hint,
            concepts=len(q.extra.get("concepts") or ()),
        )

    async def submit_explanation(self, player: PlayerRef, version_id: int, answer: str) -> ExplainResultCard:
        """Grade a free-text answer by the concepts it covers, store the attempt, return the grade."""
        text = answer.strip()
        if not text:
            raise PracticeError("your answer is empty: explain in a sentence or more, in your own words")
        if len(text) > MAX_ANSWER_CHARS:
            raise PracticeError(
                f"your answer has {len(text)} characters; keep it under {MAX_ANSWER_CHARS} (a paragraph)"
            )
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.ensure_player(player)
            q = await uow.question_version(version_id)
            if q is None or q.kind != Kind.EXPLAIN:
                raise NotFoundError(f"no explain prompt with version id {version_id}")
            grade = grade_explanation(text, _concepts(q))
            attempt_id = await uow.add_explain_attempt(player_pk, version_id, text, grade.concepts, now)
        return ExplainResultCard(
            attempt_id=attempt_id,
            question_id=q.id,
            covered=grade.covered,
            total=grade.total,
            concepts=grade.concepts,
            model_answer=str(q.extra.get("model_answer") or ""),
            explanation=q.explanation,
            note=grade.note,
        )

    # ------------------------------------------------------------------ stats
    async def stats(self, player: PlayerRef) -> PracticeStatsCard:
        """A player's practice figures (separate from the competitive stats)."""
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.ensure_player(player)
            t = await uow.practice_totals(player_pk, now)
            name = await uow.player_name(player_pk)
        return PracticeStatsCard(
            display_name=name,
            quizzes=t.quizzes,
            quiz_answers=t.quiz_answers,
            quiz_correct=t.quiz_correct,
            cards=t.cards,
            cards_due=t.cards_due,
            reviews=t.reviews,
            explain_attempts=t.explain_attempts,
            concepts_covered=t.concepts_covered,
            concepts_total=t.concepts_total,
        )


def _concepts(q: Question) -> list[dict[str, object]]:
    return [dict(c) for c in q.extra.get("concepts") or ()]
