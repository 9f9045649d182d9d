"""SqlQuestionRepository: the question bank. Editing a question adds a version; none is rewritten, so
attempts keep pointing at the version they were asked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, select, update

from bot.core.models import Question, QuestionCandidate
from bot.core.repositories import QuestionRow, SyncReport
from bot.storage.mapping import content_hash, question_from_version
from bot.storage.models import ChallengeRow, ProblemRow, QuestionVersionRow
from bot.storage.models import QuestionRow as QuestionModel
from bot.storage.sql import SqlRepository, latest_versions


class SqlQuestionRepository(SqlRepository):
    """The QuestionRepository port (bot/core/repositories/questions.py) over one unit of work."""

    async def _latest_versions(self) -> dict[str, QuestionVersionRow]:
        latest = latest_versions()
        rows = await self.s.scalars(
            select(QuestionVersionRow).join(
                latest,
                and_(
                    QuestionVersionRow.question_id == latest.c.question_id,
                    QuestionVersionRow.version == latest.c.v,
                ),
            )
        )
        return {r.question_id: r for r in rows}

    async def sync_questions(self, specs: Sequence[dict[str, Any]], now: dt.datetime) -> SyncReport:
        """Insert new questions and new versions of changed ones; versions are never rewritten."""
        latest = await self._latest_versions()
        added: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        for spec in specs:
            qid = spec["id"]
            digest = content_hash(spec)
            current = latest.get(qid)
            if spec.get("retired"):
                # A bank file retires a question by flagging it (removing it would leave it in rotation):
                # never picked again, while past attempts keep pointing at the version they were asked.
                await self._retire_on_import(qid, current is None, now)
            if current is not None and current.content_hash == digest:
                unchanged.append(qid)
                continue
            if current is not None and await self._had_content(qid, digest):
                # An older version had this content (e.g. a bank file re-imported after an admin
                # corrected the answer in the database): keep the newer version, never resurrect it.
                unchanged.append(qid)
                continue
            if current is None:
                if not spec.get("retired"):
                    self.s.add(QuestionModel(id=qid, created_at=now, retired_at=None))
                version = 1
                added.append(qid)
            else:
                version = current.version + 1
                updated.append(qid)
            self.s.add(
                QuestionVersionRow(
                    question_id=qid,
                    version=version,
                    content_hash=digest,
                    kind=spec["kind"],
                    topic=spec["topic"],
                    difficulty=spec["difficulty"],
                    spec=spec,
                    created_at=now,
                )
            )
            await self.s.flush()
        return SyncReport(tuple(added), tuple(updated), tuple(unchanged))

    async def _retire_on_import(self, question_id: str, is_new: bool, now: dt.datetime) -> None:
        if is_new:
            # Stored retired from its first version: it was never in rotation here.
            self.s.add(QuestionModel(id=question_id, created_at=now, retired_at=now))
            await self.s.flush()
            return
        await self.s.execute(
            update(QuestionModel)
            .where(QuestionModel.id == question_id, QuestionModel.retired_at.is_(None))
            .values(retired_at=now)
        )

    async def _had_content(self, question_id: str, digest: str) -> bool:
        found = await self.s.scalar(
            select(QuestionVersionRow.id).where(
                QuestionVersionRow.question_id == question_id, QuestionVersionRow.content_hash == digest
            )
        )
        return found is not None

    async def retire_question(self, question_id: str, now: dt.datetime) -> bool:
        """Retire a question; False if it does not exist."""
        exists = await self.s.scalar(select(QuestionModel.id).where(QuestionModel.id == question_id))
        if exists is None:
            return False
        await self.s.execute(
            update(QuestionModel)
            .where(QuestionModel.id == question_id, QuestionModel.retired_at.is_(None))
            .values(retired_at=now)
        )
        return True

    async def list_questions(self, include_retired: bool) -> list[QuestionRow]:
        """Every question with its latest version's metadata."""
        latest = await self._latest_versions()
        retired = dict(
            (await self.s.execute(select(QuestionModel.id, QuestionModel.retired_at))).tuples().all()
        )
        out = [
            QuestionRow(qid, v.version, v.kind, v.topic, v.difficulty, retired.get(qid) is not None)
            for qid, v in sorted(latest.items())
        ]
        return [r for r in out if include_retired or not r.retired]

    async def latest_question(self, question_id: str) -> Question | None:
        """The latest version of a question."""
        row = await self.s.scalar(
            select(QuestionVersionRow)
            .where(QuestionVersionRow.question_id == question_id)
            .order_by(QuestionVersionRow.version.desc())
            .limit(1)
        )
        return question_from_version(row) if row is not None else None

    async def latest_specs(self, include_retired: bool) -> list[dict[str, Any]]:
        """The latest version of every question as its spec dict."""
        rows = await self.list_questions(include_retired)
        latest = await self._latest_versions()
        return [latest[r.id].spec for r in rows]

    async def question_candidates(self, channel_pk: int, kinds: Sequence[str]) -> list[QuestionCandidate]:
        """Active questions of these kinds (latest version) and their use count in this channel."""
        latest = latest_versions()
        used = (
            select(
                QuestionVersionRow.question_id.label("qid"),
                func.count(ProblemRow.id).label("n"),
                func.max(ChallengeRow.day).label("last"),
            )
            .join(ProblemRow, ProblemRow.question_version_id == QuestionVersionRow.id)
            .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
            .where(ChallengeRow.channel_pk == channel_pk)
            .group_by(QuestionVersionRow.question_id)
            .subquery()
        )
        stmt = (
            select(QuestionVersionRow, func.coalesce(used.c.n, 0), used.c.last)
            .join(
                latest,
                and_(
                    QuestionVersionRow.question_id == latest.c.question_id,
                    QuestionVersionRow.version == latest.c.v,
                ),
            )
            .join(QuestionModel, QuestionModel.id == QuestionVersionRow.question_id)
            .outerjoin(used, used.c.qid == QuestionVersionRow.question_id)
            .where(QuestionModel.retired_at.is_(None), QuestionVersionRow.kind.in_(list(kinds)))
            .order_by(QuestionVersionRow.question_id)
        )
        return [
            QuestionCandidate(v.id, v.question_id, v.topic, v.difficulty, v.kind, int(n), last)
            for v, n, last in (await self.s.execute(stmt)).tuples()
        ]

    async def question_version(self, version_id: int) -> Question | None:
        """A stored question version."""
        row = await self.s.get(QuestionVersionRow, version_id)
        return question_from_version(row) if row is not None else None

    async def version_spec(self, version_id: int) -> dict[str, Any] | None:
        """The stored spec of a version."""
        row = await self.s.get(QuestionVersionRow, version_id)
        return dict(row.spec) if row is not None else None

    async def add_corrected_version(self, question_id: str, spec: dict[str, Any], now: dt.datetime) -> int:
        """Store ``spec`` as the question's next version; return its version id.

        Its content hash is salted with the version number, so a correction may restore the content of
        an earlier version, and re-importing the uncorrected bank file matches the older version and
        changes nothing (see sync_questions).
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
