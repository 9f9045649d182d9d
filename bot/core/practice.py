"""Practice use cases: a 5-question quiz, flashcard review with FSRS, the daily nudge, and explain prompts.

Every public method is one service call in its own unit of work. Practice never writes standings,
points, completions or badges: the competitive leaderboard is untouched, and practice figures come from
:meth:`PracticeService.stats`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import itertools
import logging
import random
from collections.abc import Callable, Sequence
from typing import Protocol

from fsrs import Scheduler

from bot.core.cards import PracticeNudgeCard
from bot.core.deck import deck_card, one_line, why_of
from bot.core.errors import InvalidAnswerError, NotFoundError, RankZeroError
from bot.core.grading import grade_explanation
from bot.core.insights import INSIGHT_DAYS, TOPIC_MIN_ATTEMPTS, WEAKEST_TOPICS, weakest_topics
from bot.core.models import PlayerRef, Question, QuestionCandidate, Tenant
from bot.core.player_day import PlayerDay, day_streak, parse_timezone, player_day
from bot.core.ports import Clock, UnitOfWork
from bot.core.practice_models import (
    MAX_NEW_PER_DAY,
    DaySettings,
    DueNudge,
    ExplainPromptCard,
    ExplainResultCard,
    FlashcardCard,
    NudgeReport,
    OptimizeOutcome,
    PracticeStatsCard,
    QuizFeedback,
    QuizItemResult,
    QuizQuestionCard,
    QuizResultCard,
    QuizRow,
    ReviewCardRow,
    ReviewOutcome,
    ReviewRecord,
    ReviewSummary,
)
from bot.core.srs import GRADES, CardState, Grade, make_scheduler, previews, schedule
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS, Kind

log = logging.getLogger(__name__)

QUIZ_SIZE = 5
#: Reviews a player needs before their FSRS parameters are optimised: the reviews fsrs's Optimizer
#: learns from (a card's first 64 reviews, each made a day or more after that card's previous one).
#: Below 512, its mini-batch size, fsrs returns the default parameters unchanged, so running it earlier
#: would spend CPU for nothing (fsrs 6.3.2's ``compute_optimal_parameters``).
OPTIMIZE_MIN_REVIEWS = 512
#: How long fitted parameters are kept before ``serve`` fits them again to the longer history.
PARAMETERS_REFRESH = dt.timedelta(days=30)
#: fsrs's Optimizer reads only the first 64 reviews of each card.
_OPTIMIZER_SEQ_LEN = 64
#: Anki's "learn ahead limit": when nothing is due, learning cards due within this are shown early.
LEARN_AHEAD = dt.timedelta(minutes=20)
#: A failed explain prompt comes back (before prompts not yet seen) once this long has passed since the
#: failed attempt: Anki's default relearning step, long enough that the player answers from memory rather
#: than rereading the model answer just shown, short enough to come back in the same sitting.
EXPLAIN_RETRY_AFTER = dt.timedelta(minutes=10)
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


class ParameterOptimizer(Protocol):
    """Fits FSRS parameters to one player's review history (CPU-bound: run in a worker thread)."""

    def optimize(self, reviews: Sequence[ReviewRecord]) -> tuple[float, ...]:
        """The optimised parameters (21 floats, within fsrs's bounds)."""
        ...


class NudgeSender(Protocol):
    """The one platform method the daily nudge needs: a private message to a player."""

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        """Tell ``player`` privately (a DM) that flashcards are due; raise if it cannot be delivered."""
        ...


def optimizer_reviews(reviews: Sequence[ReviewRecord]) -> int:
    """How many of these reviews fsrs's Optimizer learns from: per card, among its first 64 reviews,
    those made at least a whole day after the card's previous review.
    """
    by_card: dict[int, list[dt.datetime]] = {}
    for r in reviews:
        by_card.setdefault(r.card_id, []).append(r.reviewed_at)
    count = 0
    for times in by_card.values():
        times = sorted(times)[:_OPTIMIZER_SEQ_LEN]
        count += sum((later - earlier).days > 0 for earlier, later in itertools.pairwise(times))
    return count


@functools.lru_cache(maxsize=256)
def _scheduler_for(parameters: tuple[float, ...] | None) -> Scheduler:
    return make_scheduler(parameters)


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


def _pick_explain(
    pool: list[QuestionCandidate], failed: dict[str, dt.datetime], now: dt.datetime, rng: random.Random
) -> tuple[QuestionCandidate, bool]:
    """The explain prompt to offer and whether it is one the player failed: a failed prompt whose retry
    is due (EXPLAIN_RETRY_AFTER), the oldest failure first; else the least practised of the others; else
    (every prompt of the pool failed and none due yet) the one failed longest ago.
    """
    missed = sorted((c for c in pool if c.question_id in failed), key=lambda c: failed[c.question_id])
    if missed and failed[missed[0].question_id] + EXPLAIN_RETRY_AFTER <= now:
        return missed[0], True
    others = [c for c in pool if c.question_id not in failed]
    if others:
        return _pick(others, 1, rng)[0], False
    return missed[0], True


class PracticeService:
    """Practice use cases over a unit-of-work factory and a clock."""

    def __init__(
        self,
        uow_factory: Callable[[], UnitOfWork],
        clock: Clock,
        *,
        seed: int | None = None,
    ) -> None:
        self._uow = uow_factory
        self._clock = clock
        self._rng = random.Random(seed)

    # ------------------------------------------------------------------ quiz
    async def start_quiz(
        self,
        player: PlayerRef,
        topic: str | None = None,
        *,
        among: Sequence[str] = (),
        tenant: Tenant | None = None,
    ) -> QuizQuestionCard:
        """Start a quiz of 5 multiple-choice questions (fewer if the topic has fewer); return the first.
        ``among``: exactly these topics instead (the team's weakest, :meth:`team_weakest_topics`).
        ``tenant``: where the quiz is asked for; it draws from the bank as that tenant plays it (its own
        questions and corrections, not what it retired). None (a DM, the console): the shared bank.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            # A quiz draws from every multiple-choice kind of the bank.
            candidates = await uow.practice.practice_candidates(player_pk, MULTIPLE_CHOICE_KINDS, tenant)
            known = sorted({c.topic for c in candidates})
            if among:
                topics = [t for t in known if t in set(among)]
                if not topics:
                    raise NotFoundError("the practice quiz has no questions on those topics")
            else:
                topics = _choose_topic(topic, known, "quiz questions")
            pool = [c for c in candidates if c.topic in topics]
            if not pool:
                raise NotFoundError(
                    "the question bank has no multiple-choice questions: import it first "
                    "(rankzero questions import questions/)"
                )
            picks = _pick(pool, QUIZ_SIZE, self._rng)
            label = topics[0] if topic and len(topics) == 1 else topic
            if among:
                joined = ", ".join(topics)
                # The stored label is at most 80 characters.
                label = joined if len(joined) <= 80 else joined[:79] + "…"
            quiz = await uow.practice.create_quiz(player_pk, label, [c.version_id for c in picks], now)
        card = self._quiz_card(quiz)
        assert card is not None
        return card

    async def team_weakest_topics(self, tenant: Tenant) -> list[str]:
        """The team's weakest topics (bot/core/insights.py: the lowest first-attempt accuracy over the
        last :data:`INSIGHT_DAYS` days, :data:`TOPIC_MIN_ATTEMPTS` attempts at least), weakest first.
        """
        since = self._clock.now() - dt.timedelta(days=INSIGHT_DAYS)
        async with self._uow() as uow:
            rows = await uow.difficulty.topic_accuracy(tenant, since)
        return [t.topic for t in weakest_topics(rows, TOPIC_MIN_ATTEMPTS, WEAKEST_TOPICS)]

    async def _own_quiz(self, uow: UnitOfWork, player: PlayerRef, quiz_id: int) -> QuizRow:
        player_pk = await uow.players.ensure_player(player)
        quiz = await uow.practice.get_quiz(quiz_id)
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
            recorded = await uow.practice.answer_quiz_item(
                quiz_id, position, chosen, chosen == q.correct_letter, now
            )
            if recorded and chosen != q.correct_letter:
                # Review follows the player's gaps: the question's card joins their deck (once).
                await uow.practice.add_mistake_card(quiz.player_pk, q.id, now)
            quiz = await self._own_quiz(uow, player, quiz_id)
            answered = [i for i in quiz.items if i.letter is not None]
            score = sum(bool(i.correct) for i in answered)
            finished = len(answered) == len(quiz.items)
            if finished:
                await uow.practice.finish_quiz(quiz_id, score, now)
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
    async def _day(self, uow: UnitOfWork, player_pk: int, now: dt.datetime) -> tuple[DaySettings, PlayerDay]:
        """The player's settings and the day (theirs, cutoff to cutoff) that ``now`` falls in."""
        settings = await uow.practice_settings.day_settings(player_pk)
        return settings, player_day(now, settings.timezone)

    @staticmethod
    async def _new_left(uow: UnitOfWork, player_pk: int, settings: DaySettings, day: PlayerDay) -> int:
        """New cards the player may still start today (their limit less the cards first studied today)."""
        return max(0, settings.new_per_day - await uow.practice.introduced_since(player_pk, day.start))

    async def start_review(self, player: PlayerRef) -> ReviewSummary:
        """Bring the player's deck up to date (the bank's cards, cards for challenge mistakes) and count
        what is due today: studied cards due before the player's next day cutoff, plus the new cards
        left of today's limit; per topic too.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            added = await uow.practice.ensure_review_cards(player_pk, now)
            settings, day = await self._day(uow, player_pk, now)
            totals = await uow.practice.practice_totals(player_pk, now, day.end)
            new_today = min(totals.new_cards, await self._new_left(uow, player_pk, settings, day))
            topics = await uow.practice.deck_topics(player_pk, now, day.end)
        return ReviewSummary(
            totals.cards,
            totals.cards_due + new_today,
            totals.new_cards,
            added,
            totals.next_due,
            new_today,
            totals.suspended,
            tuple(topics),
        )

    @staticmethod
    async def _scheduler(uow: UnitOfWork, player_pk: int) -> Scheduler:
        """The player's FSRS scheduler: their own optimised parameters, else their team's, else FSRS's
        defaults.
        """
        own = await uow.practice_settings.fsrs_parameters(player_pk)
        if own is None:
            team = await uow.practice_settings.player_team(player_pk)
            own = await uow.practice_settings.team_parameters(team) if team else None
        return _scheduler_for(own)

    def _flashcard(
        self, row: ReviewCardRow, remaining: int, now: dt.datetime, scheduler: Scheduler
    ) -> FlashcardCard:
        q = row.question
        text = deck_card(q)
        front = text.front if text else one_line(q.prompt)
        back = text.back if text else ""
        # The back holds the explanation's key fact; the whole explanation follows only when it says more.
        explanation = q.explanation
        if q.kind == Kind.EXPLAIN:
            explanation = None  # the back is the model answer
        elif q.kind in MULTIPLE_CHOICE_KINDS and explanation and one_line(explanation) == why_of(explanation):
            explanation = None  # the back's "why" is the whole explanation already
        shown = tuple((g, format_delay(delay)) for g, delay in previews(row.state, now, scheduler))
        return FlashcardCard(
            card_id=row.id,
            question_id=q.id,
            source=row.source,
            topic=q.topic,
            front=front,
            code=q.code,
            back=back,
            explanation=explanation,
            phase=row.state.phase,
            lapses=row.state.lapses,
            next_intervals=shown,
            remaining=remaining,
            showing=row.state.reps,
        )

    async def next_card(self, player: PlayerRef, *, tenant: Tenant | None = None) -> FlashcardCard | None:
        """The player's next card: studied cards due today first (reviews due before their day's cutoff,
        (re)learning ones due now), then new cards up to the day's limit (mistakes first); when none, a
        (re)learning card due within the learn-ahead limit (20 minutes, as Anki); None when done.
        ``tenant``: where the player reviews; a card shows its question as that tenant plays it (its
        correction of the answer), None (a DM, the console) as the shared bank has it.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            settings, day = await self._day(uow, player_pk, now)
            totals = await uow.practice.practice_totals(player_pk, now, day.end)
            new_left = min(totals.new_cards, await self._new_left(uow, player_pk, settings, day))
            remaining = totals.cards_due + new_left
            due = await uow.practice.day_due_cards(player_pk, now, day.end, 1, tenant)
            if not due:
                due = await uow.practice.new_cards(player_pk, min(1, new_left), tenant)
            if not due:
                due = await uow.practice.due_cards(
                    player_pk, now + LEARN_AHEAD, 1, ("learning", "relearning"), tenant
                )
                remaining = len(due)
            scheduler = await self._scheduler(uow, player_pk)
        return self._flashcard(due[0], remaining, now, scheduler) if due else None

    async def grade_card(
        self, player: PlayerRef, card_id: int, grade: Grade | str, showing: int | None = None
    ) -> ReviewOutcome:
        """Self-grade a card (again/hard/good/easy) and schedule it with FSRS (the player's parameters).

        ``showing`` is the card's :attr:`FlashcardCard.showing` (adapters put it in the button id): a
        second grade of the same showing (double click, redelivery) changes nothing and returns
        ``duplicate=True``. A card not due yet (a review card: not due before the player's day ends) or
        suspended (its question retired) cannot be graded.
        """
        g = parse_grade(grade)
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            row = await uow.practice.get_review_card(card_id)
            if row is None or row.player_pk != player_pk:
                raise NotFoundError(f"no card {card_id} in your deck: run `review` to get your due cards")
            if showing is not None and showing != row.state.reps:
                return self._outcome(row.id, g, row.state, now, duplicate=True)
            if row.suspended:
                raise PracticeError("that card is suspended (its question was retired): run `review` again")
            _, day = await self._day(uow, player_pk, now)
            limit = day.end if row.state.phase == "review" else now + LEARN_AHEAD
            if row.state.due is not None and row.state.due > max(limit, now + LEARN_AHEAD):
                wait = format_delay(row.state.due - now)
                raise PracticeError(f"that card is not due yet (next review in {wait}): run `review` later")
            after = schedule(row.state, g, now, await self._scheduler(uow, player_pk))
            if not await uow.practice.save_review(card_id, row.state, after, g, now):
                current = await uow.practice.get_review_card(card_id)
                assert current is not None
                return self._outcome(row.id, g, current.state, now, duplicate=True)
        return self._outcome(row.id, g, after, now)

    # ------------------------------------------------------------------ settings of the deck and the day
    async def set_new_per_day(self, player: PlayerRef, count: int) -> int:
        """Set how many new cards a day the player starts (0 to pause new cards); return it."""
        if not 0 <= count <= MAX_NEW_PER_DAY:
            raise PracticeError(
                f"new cards per day must be 0 to {MAX_NEW_PER_DAY}, not {count} "
                "(0 pauses new cards; reviews of cards already started go on)"
            )
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            await uow.practice_settings.set_new_per_day(player_pk, count, self._clock.now())
        return count

    async def set_timezone(self, player: PlayerRef, name: str) -> str:
        """Set the player's timezone (a validated IANA name; raises InvalidTimezoneError); return it.
        Their day starts at 4 am there (as Anki's): due cards, the review streak and the nudge use it.
        """
        zone = parse_timezone(name)
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            await uow.practice_settings.set_timezone(player_pk, zone, self._clock.now())
        return zone

    async def day_settings(self, player: PlayerRef) -> DaySettings:
        """The player's new cards per day and timezone."""
        async with self._uow() as uow:
            return await uow.practice_settings.day_settings(await uow.players.ensure_player(player))

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
        """Players with cards due now (opted into the nudge or not)."""
        async with self._uow() as uow:
            rows = await uow.practice.players_with_due_cards(self._clock.now())
        return [DueNudge(p, n) for p, n in rows]

    # ------------------------------------------------------------------ the daily nudge
    async def set_nudge(self, player: PlayerRef, enabled: bool) -> bool:
        """Opt the player into (or out of) the daily private reminder of due cards; return the setting."""
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            await uow.practice_settings.set_nudge(player_pk, enabled, self._clock.now())
        return enabled

    async def nudge_enabled(self, player: PlayerRef) -> bool:
        """Whether the player opted into the daily reminder (off unless they turned it on)."""
        async with self._uow() as uow:
            return await uow.practice_settings.nudge_enabled(await uow.players.ensure_player(player))

    async def send_nudges(
        self, platform: NudgeSender, *, platforms: frozenset[str] | None = None
    ) -> NudgeReport:
        """Remind every opted-in player with cards due today, at most once per player and day (the
        player's own day: their timezone, from the 4 am cutoff to the next).

        Each reminder is claimed first (a row unique per player and day, committed before the message
        is sent), so two processes, or a run repeated within the day, never send it twice. A message
        the platform refuses releases its claim, so a later run that day tries again. ``platforms``: the
        players' platforms this process can reach (None: all); the others are left to their process.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            candidates = await uow.practice_settings.nudge_candidates(now)
        if platforms is not None:
            candidates = [c for c in candidates if c[1].platform in platforms]
        sent: list[PlayerRef] = []
        failed: list[PlayerRef] = []
        for player_pk, player, timezone in candidates:
            day = player_day(now, timezone)
            async with self._uow() as uow:
                if await uow.practice_settings.nudge_claimed(player_pk, day.day):
                    continue
                settings = await uow.practice_settings.day_settings(player_pk)
                totals = await uow.practice.practice_totals(player_pk, now, day.end)
                due = totals.cards_due + min(
                    totals.new_cards, await self._new_left(uow, player_pk, settings, day)
                )
                if due == 0 or not await uow.practice_settings.claim_nudge(player_pk, day.day, due, now):
                    continue  # nothing left for today, or another process reminded this player today
            try:
                await platform.send_practice_nudge(
                    player, PracticeNudgeCard(player.display_name, due, day.day)
                )
            except Exception:  # one unreachable player (DMs closed, left the server) stops no other
                log.warning(
                    "could not send the practice nudge to %s:%s",
                    player.platform,
                    player.user_id,
                    exc_info=True,
                )
                async with self._uow() as uow:
                    await uow.practice_settings.release_nudge(player_pk, day.day)
                failed.append(player)
            else:
                sent.append(player)
        return NudgeReport(tuple(sent), tuple(failed))

    # ------------------------------------------------------------------ per-player FSRS parameters
    async def optimize_parameters(self, player: PlayerRef, optimizer: ParameterOptimizer) -> OptimizeOutcome:
        """Fit FSRS's parameters to the player's own review history once it is long enough
        (:data:`OPTIMIZE_MIN_REVIEWS`), store them, and reschedule the player's cards with them. Below
        that, the player is scheduled with their team's parameters (:meth:`optimize_team`), if fitted.
        """
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            history = await uow.practice.review_history(player_pk)
            team = await uow.practice_settings.player_team(player_pk)
            team_fitted = team is not None and await uow.practice_settings.team_parameters(team) is not None
        usable = optimizer_reviews(history)
        if usable < OPTIMIZE_MIN_REVIEWS:
            using = f"your team's ({team}) parameters" if team_fitted else "FSRS's default parameters"
            reason = (
                f"{usable} of the {OPTIMIZE_MIN_REVIEWS} reviews needed (reviews of a card a day or more "
                f"after its previous one): {using} stay in use"
            )
            return OptimizeOutcome(usable, OPTIMIZE_MIN_REVIEWS, False, None, reason)
        # The optimizer runs torch for seconds: off the event loop, so chat handlers keep answering.
        parameters = tuple(await asyncio.to_thread(optimizer.optimize, history))
        scheduler = make_scheduler(
            parameters
        )  # fsrs validates the count and bounds before anything is stored
        async with self._uow() as uow:
            await uow.practice_settings.save_fsrs_parameters(player_pk, parameters, usable, self._clock.now())
        moved = await self._reschedule(player_pk, history, scheduler)
        return OptimizeOutcome(
            usable,
            OPTIMIZE_MIN_REVIEWS,
            True,
            parameters,
            f"optimised from {usable} reviews; {moved} card{'s' if moved != 1 else ''} rescheduled",
        )

    async def optimize_team(self, tenant: str, optimizer: ParameterOptimizer) -> OptimizeOutcome:
        """Fit FSRS's parameters to the pooled reviews of a team (the players whose daily challenges are
        mostly ``tenant``'s) once they are enough, store them, and reschedule the cards of the team's
        players who have no parameters of their own: a bank-only player reaches a fitted schedule long
        before their own 512 reviews.
        """
        async with self._uow() as uow:
            members = await uow.practice_settings.team_players(tenant)
            histories = {pk: await uow.practice.review_history(pk) for pk in members}
            own = {pk for pk in members if await uow.practice_settings.fsrs_parameters(pk) is not None}
        pooled = [r for h in histories.values() for r in h]  # card ids are unique across players
        usable = optimizer_reviews(pooled)
        if usable < OPTIMIZE_MIN_REVIEWS:
            reason = f"team {tenant}: {usable} of the {OPTIMIZE_MIN_REVIEWS} reviews needed"
            return OptimizeOutcome(usable, OPTIMIZE_MIN_REVIEWS, False, None, reason, scope=tenant)
        parameters = tuple(await asyncio.to_thread(optimizer.optimize, pooled))
        scheduler = make_scheduler(parameters)
        async with self._uow() as uow:
            await uow.practice_settings.save_team_parameters(
                tenant, parameters, usable, len(members), self._clock.now()
            )
        moved = 0
        for pk, history in histories.items():
            if pk not in own:
                moved += await self._reschedule(pk, history, scheduler)
        reason = (
            f"team {tenant}: optimised from {usable} reviews of {len(members)} players; "
            f"{moved} card{'s' if moved != 1 else ''} rescheduled"
        )
        return OptimizeOutcome(usable, OPTIMIZE_MIN_REVIEWS, True, parameters, reason, scope=tenant)

    async def _reschedule(self, player_pk: int, history: Sequence[ReviewRecord], scheduler: Scheduler) -> int:
        """Replay each studied card's logged reviews with new parameters and store the schedule they give
        (FSRS's "reschedule cards on change", as Anki): memory state, interval and due date. A card graded
        meanwhile keeps its state. Returns how many cards moved.
        """
        by_card: dict[int, list[ReviewRecord]] = {}
        for r in history:
            by_card.setdefault(r.card_id, []).append(r)
        moved = 0
        for card_id, reviews in by_card.items():
            async with self._uow() as uow:
                row = await uow.practice.get_review_card(card_id)
                if row is None or row.player_pk != player_pk or row.state.phase == "new":
                    continue
                state = CardState()
                for r in sorted(reviews, key=lambda r: r.reviewed_at):
                    state = schedule(state, r.grade, r.reviewed_at, scheduler)
                # The replay's counts are FSRS's; the stored ones (reps: the showing, lapses) stay.
                after = dataclasses.replace(state, reps=row.state.reps, lapses=row.state.lapses)
                if after != row.state and await uow.practice.set_card_state(card_id, row.state, after):
                    moved += 1
        return moved

    async def optimize_all(
        self,
        optimizer: ParameterOptimizer,
        *,
        platforms: frozenset[str] | None = None,
        refresh: dt.timedelta = PARAMETERS_REFRESH,
    ) -> list[OptimizeOutcome]:
        """Fit the parameters of every player with enough reviews whose parameters are missing or older
        than ``refresh`` (``serve`` runs this daily); one player's failure stops no other.
        """
        async with self._uow() as uow:
            stale_before = self._clock.now() - refresh
            players = await uow.practice_settings.optimization_candidates(OPTIMIZE_MIN_REVIEWS, stale_before)
        outcomes = []
        for player in players:
            if platforms is not None and player.platform not in platforms:
                continue
            try:
                outcomes.append(await self.optimize_parameters(player, optimizer))
            except RankZeroError:
                raise  # the optimizer is not installed: the same for everyone
            except Exception:
                log.exception("FSRS optimisation failed for %s:%s", player.platform, player.user_id)
        async with self._uow() as uow:
            teams = []
            # Only teams with reviewers can be fitted: the others are skipped without a query each.
            with_reviewers = set((await uow.practice_settings.reviewer_teams()).values())
            for tenant in sorted(with_reviewers & set(await uow.practice_settings.teams())):
                fitted = await uow.practice_settings.team_fitted_at(tenant)
                if (platforms is None or tenant.split(":", 1)[0] in platforms) and (
                    fitted is None or fitted < stale_before
                ):
                    teams.append(tenant)
        for tenant in teams:
            try:
                outcome = await self.optimize_team(tenant, optimizer)
            except RankZeroError:
                raise
            except Exception:
                log.exception("FSRS optimisation failed for team %s", tenant)
                continue
            if outcome.optimized:
                outcomes.append(outcome)
        return outcomes

    # ------------------------------------------------------------------ explain
    async def explain_prompt(
        self, player: PlayerRef, topic: str | None = None, *, tenant: Tenant | None = None
    ) -> ExplainPromptCard:
        """An explain prompt (optionally on a topic): one the player failed, once its retry is due
        (EXPLAIN_RETRY_AFTER after the failed attempt), else the one this player practised least.
        ``tenant``: drawn from the bank as that tenant plays it (None: the shared bank), as start_quiz.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            candidates = await uow.practice.practice_candidates(player_pk, (Kind.EXPLAIN,), tenant)
            topics = _choose_topic(topic, sorted({c.topic for c in candidates}), "explain prompts")
            pool = [c for c in candidates if c.topic in topics]
            if not pool:
                raise NotFoundError("the question bank has no explain prompts: import it first")
            pick, retry = _pick_explain(pool, await uow.practice.failed_explains(player_pk), now, self._rng)
            q = await uow.questions.question_version(pick.version_id)
        assert q is not None
        return ExplainPromptCard(
            question_id=q.id,
            version_id=q.version_id,
            topic=q.topic,
            difficulty=q.difficulty,
            prompt=q.prompt,
            hint=q.hint,
            concepts=len(q.extra.get("concepts") or ()),
            retry=retry,
        )

    async def submit_explanation(
        self, player: PlayerRef, version_id: int, answer: str, *, tenant: Tenant | None = None
    ) -> ExplainResultCard:
        """Grade a free-text answer by the concepts it covers, store the attempt, return the grade.

        ``tenant``: where the answer comes from (a server, a workspace), when the version id came back
        from a client (a form's custom id): a prompt that tenant does not see is refused as a missing one.
        """
        text = answer.strip()
        if not text:
            raise PracticeError("your answer is empty: explain in a sentence or more, in your own words")
        if len(text) > MAX_ANSWER_CHARS:
            raise PracticeError(
                f"your answer has {len(text)} characters; keep it under {MAX_ANSWER_CHARS} (a paragraph)"
            )
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            q = await uow.questions.question_version(version_id)
            unseen = tenant is not None and not await uow.questions.version_seen_by(tenant, version_id)
            if q is None or q.kind != Kind.EXPLAIN or unseen:
                raise NotFoundError(f"no explain prompt with version id {version_id}")
            grade = grade_explanation(text, _concepts(q))
            attempt_id = await uow.practice.add_explain_attempt(
                player_pk, version_id, text, grade.concepts, now, passed=grade.passed
            )
        return ExplainResultCard(
            attempt_id=attempt_id,
            question_id=q.id,
            covered=grade.covered,
            total=grade.total,
            concepts=grade.concepts,
            model_answer=str(q.extra.get("model_answer") or ""),
            explanation=q.explanation,
            note=grade.note,
            passed=grade.passed,
            required=grade.required,
            version_id=version_id,
            hint=q.hint,
        )

    # ------------------------------------------------------------------ stats
    async def stats(self, player: PlayerRef) -> PracticeStatsCard:
        """A player's practice figures (separate from the competitive stats)."""
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            settings, day = await self._day(uow, player_pk, now)
            t = await uow.practice.practice_totals(player_pk, now, day.end)
            new_today = min(t.new_cards, await self._new_left(uow, player_pk, settings, day))
            topics = await uow.practice.deck_topics(player_pk, now, day.end)
            # A streak longer than a year is still shown as counted over its last year.
            times = await uow.practice.review_times(player_pk, day.start - dt.timedelta(days=366))
            name = await uow.players.player_name(player_pk)
        return PracticeStatsCard(
            display_name=name,
            quizzes=t.quizzes,
            quiz_answers=t.quiz_answers,
            quiz_correct=t.quiz_correct,
            cards=t.cards,
            cards_due=t.cards_due + new_today,
            reviews=t.reviews,
            explain_attempts=t.explain_attempts,
            concepts_covered=t.concepts_covered,
            concepts_total=t.concepts_total,
            review_streak=day_streak(times, now, settings.timezone),
            new_per_day=settings.new_per_day,
            timezone=settings.timezone,
            topics=tuple(topics),
        )


def _concepts(q: Question) -> list[dict[str, object]]:
    return [dict(c) for c in q.extra.get("concepts") or ()]
