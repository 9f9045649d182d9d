"""What a team's answers teach: the learned difficulty of each question (bot/core/difficulty.py) kept
up to date as challenges close, used by the daily ramp, and shown to the tenant's admins where it
disagrees with the bank's label; the team's weakest topics and the practice quiz that targets them.

Functions over a unit of work (the caller's transaction) and pure helpers; QuizService calls them.
Everything is per tenant: the answers, the estimates and the topics are the team's own.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence

from bot.core.cards import DifficultyCard, DifficultyLine, InsightsCard, WeakTopic
from bot.core.difficulty import DifficultyEstimate, disagrees, label_prior, update_estimates
from bot.core.models import Challenge, QuestionCandidate, Tenant
from bot.core.ports import UnitOfWork
from bot.core.repositories import LearnedDifficulty, TopicAccuracy
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS

#: The window of the weakest topics: the team's first attempts of the last 30 days.
INSIGHT_DAYS = 30
#: A topic needs this many first attempts in the window to be called weak (fewer says little).
TOPIC_MIN_ATTEMPTS = 10
#: How many weakest topics the insights name.
WEAKEST_TOPICS = 3
#: At most this many disagreements in a chat card (the CLI lists more).
CHAT_LINES = 10
#: The most lines any listing returns.
MAX_LINES = 500


async def learn_from_close(uow: UnitOfWork, challenge: Challenge, now: dt.datetime) -> int:
    """Update the tenant's learned difficulty of the challenge's questions from its first attempts, in
    the close's transaction; returns how many first attempts counted.

    Exactly once per challenge: the caller runs this only when its ``UPDATE ... WHERE status='open'``
    closed the challenge, in the same transaction, so a repeated close (another process, a retried job)
    finds it closed and counts nothing, and a failed close rolls the update back with it.
    """
    asked = await uow.difficulty.challenge_first_attempts(challenge.id)
    if not asked:
        return 0
    labels = {a.attempt.question_id: a.label for a in asked}
    tenant = challenge.channel.tenant
    current = await uow.difficulty.lock_estimates(tenant, labels, now)
    updated = update_estimates([a.attempt for a in asked], current)
    await uow.difficulty.save_estimates(tenant, updated, labels, now)
    return len(asked)


async def relearn_question(uow: UnitOfWork, tenant: Tenant, question_id: str, now: dt.datetime) -> bool:
    """Learn the tenant's difficulty of the question again from its label's prior over the first attempts
    of the tenant's closed challenges as they are stored now, in the caller's transaction (an answer
    correction, after it re-scored them: a wrong key made the question look hard). Returns whether the
    tenant had an estimate to redo (a tenant that never learned the question gets none).

    The same model as the closes, replayed in challenge order: each challenge's players' abilities are
    estimated against its other questions' current ratings and this question's replayed one, then this
    question alone is updated (:func:`update_estimates`). Only closed challenges count and the estimate's
    row is locked first (a concurrent close waits, then adds its own challenge to the result), so each
    first attempt is counted once: an open challenge's are counted by its close, as always.
    Linear in the question's history in the tenant, one challenge at a time, like the re-score itself.
    """
    row = await uow.difficulty.lock_learned(tenant, question_id)
    if row is None:
        return False
    estimate = label_prior(row.label)
    for challenge_id in await uow.difficulty.closed_challenges_asking(tenant, question_id):
        asked = await uow.difficulty.challenge_first_attempts(challenge_id)
        labels = {a.attempt.question_id: a.label for a in asked}
        others = set(labels) - {question_id}
        stored = await uow.difficulty.estimates(tenant, others)
        current = {qid: stored[qid] if qid in stored else label_prior(label) for qid, label in labels.items()}
        current[question_id] = estimate
        estimate = update_estimates([a.attempt for a in asked], current).get(question_id, estimate)
    await uow.difficulty.save_estimates(tenant, {question_id: estimate}, {question_id: row.label}, now)
    return True


def with_learned_levels(
    candidates: Sequence[QuestionCandidate], learned: Mapping[str, DifficultyEstimate], min_attempts: int
) -> list[QuestionCandidate]:
    """The candidates with the learned level in place of the label wherever the team made at least
    ``min_attempts`` first attempts (the ramp then places a "beginner" question the team finds hard
    among the hard ones); the others keep their label.
    """
    out = []
    for c in candidates:
        e = learned.get(c.question_id)
        if e is not None and e.first_attempts >= min_attempts:
            c = dataclasses.replace(c, difficulty=e.level.value)
        out.append(c)
    return out


def _gap(row: LearnedDifficulty) -> float:
    """How far the learned rating sits from the label's prior (an unknown label: from the middle)."""
    return abs(row.estimate.rating - label_prior(row.label).rating)


def difficulty_card(rows: Sequence[LearnedDifficulty], min_attempts: int, limit: int) -> DifficultyCard:
    """The disagreements among ``rows`` (estimates with enough attempts), the widest gap first."""
    disagreeing = [r for r in rows if disagrees(r.estimate, r.label, min_attempts)]
    disagreeing.sort(key=lambda r: (-_gap(r), r.question_id))
    lines = tuple(
        DifficultyLine(
            r.question_id,
            r.label,
            r.estimate.level.value,
            r.estimate.rating,
            r.estimate.first_attempts,
            r.estimate.first_correct,
        )
        for r in disagreeing[: max(0, min(limit, MAX_LINES))]
    )
    return DifficultyCard(lines, min_attempts, len(rows), len(disagreeing))


def weakest_topics(rows: Sequence[TopicAccuracy], min_attempts: int, limit: int) -> tuple[WeakTopic, ...]:
    """The topics with at least ``min_attempts`` first attempts, the lowest accuracy first (then the most
    attempted: a weakness seen more often is surer).
    """
    enough = [r for r in rows if r.first_attempts >= min_attempts]
    enough.sort(key=lambda r: (r.accuracy, -r.first_attempts, r.topic))
    return tuple(WeakTopic(r.topic, r.first_attempts, r.first_correct) for r in enough[: max(0, limit)])


async def tenant_difficulty(uow: UnitOfWork, tenant: Tenant, min_attempts: int, limit: int) -> DifficultyCard:
    """The tenant's label disagreements (see :func:`difficulty_card`)."""
    return difficulty_card(await uow.difficulty.learned(tenant, min_attempts), min_attempts, limit)


async def tenant_insights(
    uow: UnitOfWork, tenant: Tenant, now: dt.datetime, min_attempts: int
) -> InsightsCard:
    """The tenant's weakest topics of the last :data:`INSIGHT_DAYS` days, the quiz topic that targets the
    weakest, and the top disagreements.
    """
    since = now - dt.timedelta(days=INSIGHT_DAYS)
    topics = await uow.difficulty.topic_accuracy(tenant, since)
    weakest = weakest_topics(topics, TOPIC_MIN_ATTEMPTS, WEAKEST_TOPICS)
    # The practice quiz draws from the shared bank's multiple-choice questions: offer the weakest topic
    # it can quiz (a topic only the tenant's own questions have would answer "no quiz questions").
    quizzable = {
        q.topic for q in await uow.questions.list_questions(None, False) if q.kind in MULTIPLE_CHOICE_KINDS
    }
    return InsightsCard(
        days=INSIGHT_DAYS,
        min_attempts=TOPIC_MIN_ATTEMPTS,
        weakest=weakest,
        quiz_topic=next((t.topic for t in weakest if t.topic in quizzable), None),
        difficulty=await tenant_difficulty(uow, tenant, min_attempts, CHAT_LINES),
    )
