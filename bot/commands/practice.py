"""Practice (quiz, review, explain) sequenced once for every platform.

Each method is what one command or click does: the service calls in order, returned as a step the
adapter renders. Nothing here is ranked or timed; the rules (FSRS, grading) stay in
:class:`~bot.core.practice.PracticeService`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.errors import NotFoundError
from bot.core.insights import INSIGHT_DAYS, TOPIC_MIN_ATTEMPTS
from bot.core.models import PlayerRef, Tenant
from bot.core.practice import PracticeService
from bot.core.practice_models import (
    ExplainPromptCard,
    ExplainResultCard,
    FlashcardCard,
    QuizFeedback,
    QuizQuestionCard,
    QuizResultCard,
    ReviewOutcome,
    ReviewSummary,
)


@dataclass(frozen=True)
class QuizStep:
    """A quiz question to show, the feedback on an answer (with the result once the quiz is finished),
    or the result alone (every question answered).
    """

    question: QuizQuestionCard | None = None
    feedback: QuizFeedback | None = None
    result: QuizResultCard | None = None


@dataclass(frozen=True)
class ReviewStep:
    """The review's next screen: a card (its front, or its back when ``revealed``), or the end of the
    session with its summary (``card`` None). ``outcome``: the grade just given; ``moved``: the deck
    changed since the click (graded elsewhere, another card fell due), so ``card`` is the one due now.
    """

    card: FlashcardCard | None
    summary: ReviewSummary | None = None
    outcome: ReviewOutcome | None = None
    revealed: bool = False
    moved: bool = False


#: The quiz "topic" that means the team's weakest topics (a word no bank topic is).
WEAKEST = "weakest"


class PracticeFlow:
    """The practice commands and buttons, platform-neutral."""

    def __init__(self, practice: PracticeService) -> None:
        self.practice = practice

    # ------------------------------------------------------------------ quiz
    async def start_quiz(
        self, player: PlayerRef, topic: str | None, tenant: Tenant | None = None
    ) -> QuizQuestionCard:
        """Five untimed questions (on ``topic`` when given); the first one. The topic ``weakest``, typed
        in a team (``tenant``), is the team's weakest topics (``/rankzero insights`` offers it).
        """
        if tenant is not None and topic is not None and topic.strip().casefold() == WEAKEST:
            topics = await self.practice.team_weakest_topics(tenant)
            if not topics:
                raise NotFoundError(
                    f"your team has no weak topic yet (a topic needs {TOPIC_MIN_ATTEMPTS} first attempts in "
                    f"the last {INSIGHT_DAYS} days): practise any topic without naming one"
                )
            return await self.practice.start_quiz(player, among=topics, tenant=tenant)
        return await self.practice.start_quiz(player, topic, tenant=tenant)

    async def answer_quiz(self, player: PlayerRef, quiz_id: int, position: int, letter: str) -> QuizStep:
        """Feedback on the answer; the quiz's result too when that was its last question."""
        feedback = await self.practice.answer_quiz(player, quiz_id, position, letter)
        result = await self.practice.quiz_result(player, quiz_id) if feedback.finished else None
        return QuizStep(feedback=feedback, result=result)

    async def next_question(self, player: PlayerRef, quiz_id: int) -> QuizStep:
        """The quiz's next question, or its result when every question is answered (an old Next)."""
        question = await self.practice.quiz_question(player, quiz_id)
        if question is not None:
            return QuizStep(question=question)
        return QuizStep(result=await self.practice.quiz_result(player, quiz_id))

    # ------------------------------------------------------------------ review
    async def set_nudge(self, player: PlayerRef, choice: str) -> bool:
        """Turn the daily DM of due cards on or off (``choice``: "on"/"off", any case); the new setting.

        Raises ValueError for any other word, so each adapter shows its own usage line.
        """
        cleaned = choice.strip().lower()
        if cleaned not in ("on", "off"):
            raise ValueError(f"nudge must be 'on' or 'off', not {choice.strip()[:20]!r}")
        return await self.practice.set_nudge(player, cleaned == "on")

    async def set_new_per_day(self, player: PlayerRef, count: str | int) -> int:
        """Set how many new cards a day the player starts; the new setting.

        Raises ValueError for anything but a whole number (each adapter shows its own usage line), and
        the service's PracticeError for a number out of range.
        """
        text = str(count).strip()
        if not text.isdigit():
            raise ValueError(f"new cards per day must be a whole number, not {text[:20]!r}")
        return await self.practice.set_new_per_day(player, int(text[:6]))

    async def set_timezone(self, player: PlayerRef, name: str) -> str:
        """Set the player's timezone (IANA, e.g. Europe/Paris); the zone stored. An unknown name raises
        InvalidTimezoneError with the closest names.
        """
        return await self.practice.set_timezone(player, name)

    async def timezone(self, player: PlayerRef) -> str | None:
        """The player's timezone setting (None: not set, their day is UTC's)."""
        return (await self.practice.day_settings(player)).timezone

    async def review(self, player: PlayerRef, tenant: Tenant | None = None) -> ReviewStep:
        """Start a review session: what is due (the summary) and the first card's front (its question as
        ``tenant`` plays it, when given).
        """
        summary = await self.practice.start_review(player)
        return ReviewStep(await self.practice.next_card(player, tenant=tenant), summary)

    async def reveal(
        self, player: PlayerRef, card_id: int, showing: int, tenant: Tenant | None = None
    ) -> ReviewStep:
        """The back of the card the click was for, if it is still the one due; else the deck as it is."""
        card = await self.practice.next_card(player, tenant=tenant)
        if card is None:
            return ReviewStep(None, await self.practice.start_review(player))
        if (card.card_id, card.showing) != (card_id, showing):
            return ReviewStep(card, moved=True)
        return ReviewStep(card, revealed=True)

    async def grade(
        self, player: PlayerRef, card_id: int, showing: int, grade: str, tenant: Tenant | None = None
    ) -> ReviewStep:
        """Self-grade a card (FSRS schedules it), then the next due card or the end of the session.

        A second click on the same showing changes nothing (``outcome.duplicate``).
        """
        outcome = await self.practice.grade_card(player, card_id, grade, showing)
        card = await self.practice.next_card(player, tenant=tenant)
        if card is None:
            return ReviewStep(None, await self.practice.start_review(player), outcome=outcome)
        return ReviewStep(card, outcome=outcome)

    # ------------------------------------------------------------------ explain
    async def explain(
        self, player: PlayerRef, topic: str | None, tenant: Tenant | None = None
    ) -> ExplainPromptCard:
        """A concept to explain in one's own words (from the bank as ``tenant`` plays it, when given)."""
        return await self.practice.explain_prompt(player, topic, tenant=tenant)

    async def submit_explanation(
        self, player: PlayerRef, version_id: int, answer: str, *, tenant: Tenant | None = None
    ) -> ExplainResultCard:
        """Grade an explanation by the concepts it names (of a prompt ``tenant`` sees, when given)."""
        return await self.practice.submit_explanation(player, version_id, answer, tenant=tenant)
