"""SqlDifficultyRepository: each tenant's learned question difficulty (``question_difficulty``) and the
first attempts it is learned from. Every statement is kept to one tenant: the estimates by their key,
the attempts through the challenge's channel.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping

from sqlalchemy import and_, func, literal, select

from bot.core.difficulty import DifficultyEstimate, FirstAttempt, label_prior
from bot.core.models import Tenant
from bot.core.repositories import AskedAttempt, LearnedDifficulty, TopicAccuracy
from bot.storage.models import (
    AttemptRow,
    ChallengeRow,
    ChannelRow,
    PlaySessionRow,
    ProblemRow,
    QuestionDifficultyRow,
    QuestionVersionRow,
)
from bot.storage.sql import SqlRepository

#: At most this many question ids per IN list (SQLite's bound-parameter limit is 32766; a bank is smaller).
_CHUNK = 500


def _estimate(row: QuestionDifficultyRow) -> DifficultyEstimate:
    return DifficultyEstimate(row.rating, row.information, row.first_attempts, row.first_correct)


class SqlDifficultyRepository(SqlRepository):
    """The ``uow.difficulty`` port on SQLAlchemy."""

    async def challenge_first_attempts(self, challenge_id: int) -> list[AskedAttempt]:
        """Every player's first attempt on each problem of the challenge, with the asked version's label."""
        rows = await self.s.execute(
            select(
                PlaySessionRow.player_pk,
                QuestionVersionRow.question_id,
                QuestionVersionRow.difficulty,
                AttemptRow.correct,
            )
            .select_from(AttemptRow)
            .join(PlaySessionRow, PlaySessionRow.id == AttemptRow.session_id)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(QuestionVersionRow, QuestionVersionRow.id == AttemptRow.question_version_id)
            .where(ProblemRow.challenge_id == challenge_id, AttemptRow.attempt_no == 1)
            .order_by(ProblemRow.position, PlaySessionRow.player_pk)
        )
        return [
            AskedAttempt(FirstAttempt(int(player), str(qid), bool(correct)), str(label))
            for player, qid, label, correct in rows.tuples()
        ]

    async def lock_estimates(
        self, tenant: Tenant, labels: Mapping[str, str], now: dt.datetime
    ) -> dict[str, DifficultyEstimate]:
        """Insert the missing rows at their label's prior (nothing on a conflict: a concurrent close
        inserted it), then read them all FOR UPDATE in question order (PostgreSQL; SQLite has one writer).
        """
        if not labels:
            return {}
        fresh = []
        for qid, label in sorted(labels.items()):
            prior = label_prior(label)
            fresh.append(
                {
                    "tenant": tenant.key,
                    "question_id": qid,
                    "label": label,
                    "rating": prior.rating,
                    "information": prior.information,
                    "first_attempts": 0,
                    "first_correct": 0,
                    "updated_at": now,
                }
            )
        await self.s.execute(self._db.insert(QuestionDifficultyRow).values(fresh).on_conflict_do_nothing())
        found: dict[str, DifficultyEstimate] = {}
        ids = sorted(labels)
        for start in range(0, len(ids), _CHUNK):
            rows = await self.s.scalars(
                select(QuestionDifficultyRow)
                .where(
                    QuestionDifficultyRow.tenant == tenant.key,
                    QuestionDifficultyRow.question_id.in_(ids[start : start + _CHUNK]),
                )
                .order_by(QuestionDifficultyRow.question_id)
                .with_for_update()
                .execution_options(populate_existing=True)
            )
            found.update({row.question_id: _estimate(row) for row in rows})
        return found

    async def lock_learned(self, tenant: Tenant, question_id: str) -> LearnedDifficulty | None:
        """The tenant's row of the question FOR UPDATE (PostgreSQL; SQLite has one writer), or None."""
        row = await self.s.scalar(
            select(QuestionDifficultyRow)
            .where(
                QuestionDifficultyRow.tenant == tenant.key, QuestionDifficultyRow.question_id == question_id
            )
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return None if row is None else LearnedDifficulty(row.question_id, row.label, _estimate(row))

    async def learned_tenants(self, question_id: str) -> list[Tenant]:
        """The tenants with a row of the question, by key."""
        keys = await self.s.scalars(
            select(QuestionDifficultyRow.tenant)
            .where(QuestionDifficultyRow.question_id == question_id)
            .order_by(QuestionDifficultyRow.tenant)
        )
        return [Tenant.from_key(key) for key in keys]

    async def closed_challenges_asking(self, tenant: Tenant, question_id: str) -> list[int]:
        """The tenant's closed challenges (through their channel) with a first attempt whose asked version
        is of the question: the attempts a close counted (an open one's are counted when it closes).
        """
        ids = await self.s.scalars(
            select(ChallengeRow.id)
            .select_from(AttemptRow)
            .join(PlaySessionRow, PlaySessionRow.id == AttemptRow.session_id)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
            .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
            .join(QuestionVersionRow, QuestionVersionRow.id == AttemptRow.question_version_id)
            .where(
                and_(ChannelRow.platform == tenant.platform, ChannelRow.workspace_id == tenant.workspace_id),
                ChallengeRow.status == "closed",
                QuestionVersionRow.question_id == question_id,
                AttemptRow.attempt_no == 1,
            )
            .distinct()
            .order_by(ChallengeRow.id)
        )
        return [int(i) for i in ids]

    async def save_estimates(
        self,
        tenant: Tenant,
        estimates: Mapping[str, DifficultyEstimate],
        labels: Mapping[str, str],
        now: dt.datetime,
    ) -> None:
        """Write the new estimates over the locked rows."""
        for qid in sorted(estimates):
            row = await self.s.get(QuestionDifficultyRow, (tenant.key, qid))
            if row is None:  # pragma: no cover - lock_estimates stored it in this transaction
                raise LookupError(f"no difficulty row for {qid!r}: lock_estimates first")
            e = estimates[qid]
            row.rating, row.information = e.rating, e.information
            row.first_attempts, row.first_correct = e.first_attempts, e.first_correct
            row.label = labels.get(qid, row.label)
            row.updated_at = now
        await self.s.flush()

    async def estimates(self, tenant: Tenant, question_ids: Collection[str]) -> dict[str, DifficultyEstimate]:
        """The tenant's stored estimates of these questions."""
        ids = sorted(set(question_ids))
        found: dict[str, DifficultyEstimate] = {}
        for start in range(0, len(ids), _CHUNK):
            rows = await self.s.scalars(
                select(QuestionDifficultyRow).where(
                    QuestionDifficultyRow.tenant == tenant.key,
                    QuestionDifficultyRow.question_id.in_(ids[start : start + _CHUNK]),
                )
            )
            found.update({row.question_id: _estimate(row) for row in rows})
        return found

    async def learned(self, tenant: Tenant, min_attempts: int) -> list[LearnedDifficulty]:
        """The tenant's estimates with at least ``min_attempts`` first attempts, by question id."""
        rows = await self.s.scalars(
            select(QuestionDifficultyRow)
            .where(
                QuestionDifficultyRow.tenant == tenant.key,
                QuestionDifficultyRow.first_attempts >= max(min_attempts, 0),
            )
            .order_by(QuestionDifficultyRow.question_id)
        )
        return [LearnedDifficulty(row.question_id, row.label, _estimate(row)) for row in rows]

    async def topic_accuracy(self, tenant: Tenant, since: dt.datetime) -> list[TopicAccuracy]:
        """First attempts per topic of the tenant's challenges answered at or after ``since``."""
        right = func.sum(func.cast(AttemptRow.correct == literal(True), type_=AttemptRow.attempt_no.type))
        rows = await self.s.execute(
            select(QuestionVersionRow.topic, func.count(), right)
            .select_from(AttemptRow)
            .join(PlaySessionRow, PlaySessionRow.id == AttemptRow.session_id)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
            .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
            .join(QuestionVersionRow, QuestionVersionRow.id == AttemptRow.question_version_id)
            .where(
                and_(ChannelRow.platform == tenant.platform, ChannelRow.workspace_id == tenant.workspace_id),
                AttemptRow.attempt_no == 1,
                AttemptRow.answered_at >= since,
            )
            .group_by(QuestionVersionRow.topic)
            .order_by(QuestionVersionRow.topic)
        )
        return [TopicAccuracy(str(topic), int(n), int(ok or 0)) for topic, n, ok in rows.tuples()]
