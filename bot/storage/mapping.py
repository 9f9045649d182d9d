"""Rows to domain values: stored question versions, challenges, sessions (shared by the repositories).

Also the labelled columns the hot-path readers select (``challenge_columns``, ``version_key_columns``)
and the process-wide cache of parsed question versions, since both go with the mapping that reads them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.models import LETTERS, Attempt, Challenge, ChannelRef, Choice, PlaySession, Problem, Question
from bot.storage.models import ChallengeRow, ChannelRow, PlaySessionRow, QuestionVersionRow


def content_hash(spec: dict[str, Any]) -> str:
    """A stable hash of a question's content (key order and defaults normalised by the caller)."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def question_from_version(row: QuestionVersionRow) -> Question:
    """Build the domain Question of a stored version."""
    spec = row.spec
    choices = tuple(
        Choice(LETTERS[i], c["text"], bool(c.get("correct")), c.get("feedback"))
        for i, c in enumerate(spec.get("choices") or [])
    )
    extra = {k: spec[k] for k in ("front", "back", "concepts", "model_answer", "source") if spec.get(k)}
    return Question(
        version_id=row.id,
        id=row.question_id,
        version=row.version,
        kind=row.kind,
        topic=row.topic,
        difficulty=row.difficulty,
        prompt=spec.get("prompt") or spec.get("front") or "",
        code=spec.get("code"),
        hint=spec.get("hint"),
        explanation=spec.get("explanation"),
        time_limit_s=int(spec.get("time_limit_s", 120)),
        attempts=int(spec.get("attempts", 2)),
        choices=choices,
        tags=tuple(spec.get("tags") or ()),
        runner=spec.get("runner"),
        extra=extra,
    )


def as_asked(question: Question, time_limit_s: int | None, attempts: int | None) -> Question:
    """The question as a challenge asks it: a schedule's time limit / attempts override its own."""
    if time_limit_s is None and attempts is None:
        return question
    return replace(
        question,
        time_limit_s=time_limit_s if time_limit_s is not None else question.time_limit_s,
        attempts=attempts if attempts is not None else question.attempts,
    )


# Parsed questions by everything that determines them: (version id, question id, version, content hash).
# Question versions are never rewritten, so an entry never goes stale; the full key also keeps two
# databases in one process (the test suite, the benchmark) from ever sharing a wrong entry.
_QUESTIONS: dict[tuple[int, str, int, str], Question] = {}
_QUESTIONS_MAX = 4096


async def cached_question(
    session: AsyncSession, version_id: int, question_id: str, version: int, digest: str
) -> Question:
    """A question version, parsed once per process (versions are immutable; see ``_QUESTIONS``)."""
    key = (version_id, question_id, version, digest)
    question = _QUESTIONS.get(key)
    if question is None:
        row = await session.get_one(QuestionVersionRow, version_id)
        question = question_from_version(row)
        if len(_QUESTIONS) >= _QUESTIONS_MAX:
            _QUESTIONS.clear()  # crude bound; a bank has hundreds of versions, not thousands
        _QUESTIONS[key] = question
    return question


def version_key_columns(v: Any) -> list[Any]:
    """The columns that identify a parsed question in ``_QUESTIONS`` (not the spec itself)."""
    return [
        v.c.id.label("v_id"),
        v.c.question_id.label("v_question_id"),
        v.c.version.label("v_version"),
        v.c.content_hash.label("v_hash"),
    ]


def challenge_columns(c: Any, ch: Any) -> list[Any]:
    """A challenge's columns and its channel's, labelled as the hot-path readers expect."""
    return [
        c.c.id.label("c_id"),
        c.c.channel_pk.label("c_channel_pk"),
        c.c.day.label("c_day"),
        c.c.status.label("c_status"),
        c.c.title.label("c_title"),
        c.c.opened_at.label("c_opened_at"),
        c.c.closes_at.label("c_closes_at"),
        c.c.message_ref.label("c_message_ref"),
        c.c.time_limit_s.label("c_time_limit_s"),
        c.c.attempts.label("c_attempts"),
        ch.c.platform.label("ch_platform"),
        ch.c.workspace_id.label("ch_workspace_id"),
        ch.c.channel_id.label("ch_channel_id"),
        ch.c.name.label("ch_name"),
        ch.c.timezone.label("ch_timezone"),
    ]


def challenge_from_columns(r: Any, problems: tuple[Problem, ...], size: int = 0) -> Challenge:
    """A Challenge from a row holding ``challenge_columns``."""
    return Challenge(
        id=r.c_id,
        channel_pk=r.c_channel_pk,
        channel=ChannelRef(r.ch_platform, r.ch_workspace_id, r.ch_channel_id, r.ch_name, r.ch_timezone),
        day=r.c_day,
        status="open" if r.c_status == "open" else "closed",
        title=r.c_title,
        opened_at=r.c_opened_at,
        closes_at=r.c_closes_at,
        problems=problems,
        message_ref=r.c_message_ref,
        size=size,
    )


def to_challenge(
    row: ChallengeRow, channel: ChannelRow, problems: tuple[Problem, ...], size: int = 0
) -> Challenge:
    """A Challenge from its ORM row and its channel's."""
    return Challenge(
        id=row.id,
        channel_pk=row.channel_pk,
        channel=to_channel_ref(channel),
        day=row.day,
        status="open" if row.status == "open" else "closed",
        title=row.title,
        opened_at=row.opened_at,
        closes_at=row.closes_at,
        problems=problems,
        message_ref=row.message_ref,
        size=size,
    )


def to_channel_ref(channel: ChannelRow) -> ChannelRef:
    """The platform identity of a stored channel."""
    c = channel
    return ChannelRef(c.platform, c.workspace_id, c.channel_id, c.name, c.timezone)


def to_session(row: PlaySessionRow, attempts: tuple[Attempt, ...]) -> PlaySession:
    """A PlaySession from its ORM row and its attempts."""
    return PlaySession(
        id=row.id,
        problem_id=row.problem_id,
        player_pk=row.player_pk,
        started_at=row.started_at,
        deadline=row.deadline,
        hint_used=row.hint_used_at is not None,
        finished_at=row.finished_at,
        outcome=row.outcome,  # type: ignore[arg-type]
        points=row.points,
        attempts=attempts,
    )
