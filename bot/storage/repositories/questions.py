"""SqlQuestionRepository: the question bank. Editing a question adds a version; none is rewritten, so
attempts keep pointing at the version they were asked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, and_, delete, exists, func, or_, select, update

from bot.core.errors import QuestionBankError
from bot.core.models import Question, QuestionCandidate, Tenant
from bot.core.repositories import QuestionRow, SyncReport
from bot.core.scoring import experience_of, style_of
from bot.storage.mapping import content_hash, question_from_version
from bot.storage.models import (
    AnswerCorrectionRow,
    ChallengeRow,
    ProblemRow,
    QuestionFlagRow,
    QuestionRetirementRow,
    QuestionVersionRow,
    ReviewCardModel,
)
from bot.storage.models import QuestionRow as QuestionModel
from bot.storage.sql import SqlRepository, latest_versions, visible_versions

#: The longest question id the ``questions.id`` column holds.
ID_LENGTH = 64


def _key(view: Tenant | None) -> str | None:
    return view.key if view is not None else None


def _correction_hash(spec: dict[str, Any], version: int) -> str:
    """A correction's content hash, salted with its version number (see add_corrected_version)."""
    return hashlib.sha256(f"{content_hash(spec)}:correction:v{version}".encode()).hexdigest()


def _retired_for(view: str | None) -> Any:
    """A clause: the question is retired for ``view`` (by the operator, or by that tenant)."""
    retired = QuestionModel.retired_at.is_not(None)
    if view is None:
        return retired
    r = QuestionRetirementRow
    return or_(retired, exists().where(r.tenant == view, r.question_id == QuestionModel.id))


def tenant_bank(view: str | None, kinds: Sequence[str]) -> Select[tuple[QuestionVersionRow]]:
    """The bank as ``view`` plays it: a SELECT of the latest version it sees of each question of these
    kinds that is not retired for it (shared questions with its own corrections taking precedence, and
    its own questions; None: the shared bank alone). The daily picker and practice both read this one
    query, so a team practises exactly what it plays and never another tenant's questions.
    """
    latest = latest_versions(view)
    return (
        select(QuestionVersionRow)
        .join(
            latest,
            and_(
                QuestionVersionRow.question_id == latest.c.question_id,
                QuestionVersionRow.version == latest.c.v,
            ),
        )
        .join(QuestionModel, QuestionModel.id == QuestionVersionRow.question_id)
        .where(~_retired_for(view), QuestionVersionRow.kind.in_(list(kinds)))
    )


class SqlQuestionRepository(SqlRepository):
    """The QuestionRepository port (bot/core/repositories/questions.py) over one unit of work."""

    async def _latest_versions(self, view: str | None) -> dict[str, QuestionVersionRow]:
        latest = latest_versions(view)
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

    async def sync_questions(
        self, owner: Tenant | None, specs: Sequence[dict[str, Any]], now: dt.datetime
    ) -> SyncReport:
        """Insert new questions and new versions of changed ones; versions are never rewritten.

        ``owner`` None imports into the shared bank, a tenant into its own questions. An id used outside
        them is refused before anything is written, with the same words whoever uses it (a tenant learns
        nothing about another tenant's questions but that the id is taken).
        """
        view = _key(owner)
        ids = [spec["id"] for spec in specs]
        owners = dict(
            (
                await self.s.execute(
                    select(QuestionModel.id, QuestionModel.owner_tenant).where(QuestionModel.id.in_(ids))
                )
            )
            .tuples()
            .all()
        )
        taken = sorted(qid for qid, who in owners.items() if who != view)
        moved: list[tuple[str, str, str]] = []
        if taken and view is None:
            # The operator's bank always wins: a tenant's own question never blocks it (shipped ids are
            # public, so a tenant admin could otherwise take an id of the next release and stop every
            # start of the bot). The tenant's question keeps everything under a new id of its own.
            for qid in taken:
                tenant_key = owners[qid]
                assert tenant_key is not None  # taken by someone else than the operator
                moved.append((tenant_key, qid, await self._move_aside(qid, set(ids))))
            taken = []
        if taken:
            where = "the shared bank or another server/workspace" if view is not None else "a tenant"
            raise QuestionBankError(
                f"question id {', '.join(repr(t) for t in taken)} is already used by {where}: "
                "choose another id"
            )
        latest = await self._latest_versions(view)
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
                await self._retire_on_import(qid, current is None, owner, now)
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
                    self.s.add(QuestionModel(id=qid, created_at=now, retired_at=None, owner_tenant=view))
                version = 1
                added.append(qid)
            else:
                # Numbered after every version, a tenant's corrections included (unique per question).
                version = await self._next_version(qid)
                updated.append(qid)
            self.s.add(
                QuestionVersionRow(
                    question_id=qid,
                    version=version,
                    tenant=None,
                    content_hash=digest,
                    kind=spec["kind"],
                    topic=spec["topic"],
                    difficulty=spec["difficulty"],
                    spec=spec,
                    created_at=now,
                )
            )
            await self.s.flush()
        return SyncReport(tuple(added), tuple(updated), tuple(unchanged), tuple(moved))

    async def _move_aside(self, question_id: str, reserved: set[str]) -> str:
        """Give a tenant's own question a free id (``<id>-own``, ``<id>-own-2``...; never one of
        ``reserved``), moving its versions, retirements, flags, corrections and flashcards with it.
        Returns the new id.
        """
        new_id = ""
        for n in range(1, 1000):
            suffix = "-own" if n == 1 else f"-own-{n}"
            candidate = question_id[: ID_LENGTH - len(suffix)] + suffix
            if candidate not in reserved and await self.s.get(QuestionModel, candidate) is None:
                new_id = candidate
                break
        if not new_id:  # a thousand taken names: an id crafted to block, refused with the owner unnamed
            raise QuestionBankError(f"no free id to move a server/workspace's question {question_id!r} to")
        old = await self.s.get(QuestionModel, question_id)
        assert old is not None
        self.s.add(
            QuestionModel(
                id=new_id, created_at=old.created_at, retired_at=old.retired_at, owner_tenant=old.owner_tenant
            )
        )
        await self.s.flush()  # the new row first: the children's foreign keys point at it from now on
        for child in (
            QuestionVersionRow,
            QuestionRetirementRow,
            QuestionFlagRow,
            AnswerCorrectionRow,
            ReviewCardModel,
        ):
            await self.s.execute(
                update(child).where(child.question_id == question_id).values(question_id=new_id)
            )
        versions = await self.s.scalars(
            select(QuestionVersionRow).where(QuestionVersionRow.question_id == new_id)
        )
        for row in versions:
            # The id is part of the stored spec and of its content hash: an export round-trips under the
            # new id, and re-importing it matches these versions instead of adding new ones.
            spec = {**row.spec, "id": new_id}
            row.spec = spec
            row.content_hash = (
                content_hash(spec) if row.tenant is None else _correction_hash(spec, row.version)
            )
        await self.s.flush()
        await self.s.execute(delete(QuestionModel).where(QuestionModel.id == question_id))
        return new_id

    async def _next_version(self, question_id: str) -> int:
        latest = await self.s.scalar(
            select(func.max(QuestionVersionRow.version)).where(QuestionVersionRow.question_id == question_id)
        )
        return int(latest or 0) + 1

    async def _retire_on_import(
        self, question_id: str, is_new: bool, owner: Tenant | None, now: dt.datetime
    ) -> None:
        if is_new:
            # Stored retired from its first version: it was never in rotation here.
            self.s.add(
                QuestionModel(id=question_id, created_at=now, retired_at=now, owner_tenant=_key(owner))
            )
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

    async def _sees(self, view: str | None, question_id: str) -> bool:
        owner = QuestionModel.owner_tenant
        found = await self.s.scalar(
            select(QuestionModel.id).where(
                QuestionModel.id == question_id,
                owner.is_(None) if view is None else or_(owner.is_(None), owner == view),
            )
        )
        return found is not None

    async def retire_question(self, view: Tenant | None, question_id: str, now: dt.datetime) -> bool:
        """Retire a question for the tenant (its overlay) or, with None, for everyone; False if the view
        does not see it.
        """
        key = _key(view)
        if not await self._sees(key, question_id):
            return False
        if key is None:
            await self.s.execute(
                update(QuestionModel)
                .where(QuestionModel.id == question_id, QuestionModel.retired_at.is_(None))
                .values(retired_at=now)
            )
            return True
        stmt = self._db.insert(QuestionRetirementRow).values(
            tenant=key, question_id=question_id, retired_at=now
        )
        await self.s.execute(stmt.on_conflict_do_nothing())
        return True

    async def list_questions(self, view: Tenant | None, include_retired: bool) -> list[QuestionRow]:
        """Every question the view sees with its latest version's metadata."""
        key = _key(view)
        latest = await self._latest_versions(key)
        retired = set(
            (
                await self.s.scalars(
                    select(QuestionModel.id).where(QuestionModel.id.in_(list(latest)), _retired_for(key))
                )
            ).all()
        )
        out = [
            QuestionRow(qid, v.version, v.kind, v.topic, v.difficulty, qid in retired)
            for qid, v in sorted(latest.items())
        ]
        return [r for r in out if include_retired or not r.retired]

    async def latest_question(self, view: Tenant | None, question_id: str) -> Question | None:
        """The latest version of a question the view sees."""
        row = await self.s.scalar(
            select(QuestionVersionRow)
            .join(QuestionModel, QuestionModel.id == QuestionVersionRow.question_id)
            .where(QuestionVersionRow.question_id == question_id, visible_versions(_key(view)))
            .order_by(QuestionVersionRow.version.desc())
            .limit(1)
        )
        return question_from_version(row) if row is not None else None

    async def latest_specs(self, view: Tenant | None, include_retired: bool) -> list[dict[str, Any]]:
        """The latest version of every question the view sees, as its spec dict."""
        rows = await self.list_questions(view, include_retired)
        latest = await self._latest_versions(_key(view))
        return [latest[r.id].spec for r in rows]

    async def question_candidates(
        self, tenant: Tenant, channel_pk: int, kinds: Sequence[str]
    ) -> list[QuestionCandidate]:
        """Questions the tenant plays, of these kinds (latest version it sees), and their use count in
        this channel.
        """
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
            tenant_bank(tenant.key, kinds)
            .add_columns(func.coalesce(used.c.n, 0), used.c.last)
            .outerjoin(used, used.c.qid == QuestionVersionRow.question_id)
            .order_by(QuestionVersionRow.question_id)
        )
        return [
            QuestionCandidate(
                v.id,
                v.question_id,
                v.topic,
                v.difficulty,
                v.kind,
                int(n),
                last,
                # Versions imported before experiences existed carry none: their family stands for it.
                experience_of(v.question_id, v.spec.get("concept"), v.spec.get("experience")),
                style_of(v.kind, bool(v.spec.get("arithmetic"))),
            )
            for v, n, last in (await self.s.execute(stmt)).tuples()
        ]

    async def question_version(self, version_id: int) -> Question | None:
        """A stored question version."""
        row = await self.s.get(QuestionVersionRow, version_id)
        return question_from_version(row) if row is not None else None

    async def version_seen_by(self, view: Tenant, version_id: int) -> bool:
        """Whether ``view`` sees the version ``version_id`` (the one visibility rule, visible_versions)."""
        found = await self.s.scalar(
            select(QuestionVersionRow.id)
            .join(QuestionModel, QuestionModel.id == QuestionVersionRow.question_id)
            .where(QuestionVersionRow.id == version_id, visible_versions(view.key))
        )
        return found is not None

    async def version_spec(self, version_id: int) -> dict[str, Any] | None:
        """The stored spec of a version."""
        row = await self.s.get(QuestionVersionRow, version_id)
        return dict(row.spec) if row is not None else None

    async def add_corrected_version(
        self, view: Tenant | None, question_id: str, spec: dict[str, Any], now: dt.datetime
    ) -> int:
        """Store ``spec`` as the question's next version, seen by the view only; return its version id.

        Its content hash is salted with the version number, so a correction may restore the content of
        an earlier version, and re-importing the uncorrected bank file matches the older version and
        changes nothing (see sync_questions).
        """
        version = await self._next_version(question_id)
        digest = _correction_hash(spec, version)
        row = QuestionVersionRow(
            question_id=question_id,
            version=version,
            tenant=_key(view),
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
