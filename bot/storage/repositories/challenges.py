"""SqlChallengeRepository: daily challenges and their problems (create, find, post, close)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.engine import CursorResult

from bot.core.models import Challenge, ChannelRef, OpenWindow, Problem, Tenant
from bot.core.ports import AlreadyExistsError
from bot.storage.mapping import (
    as_asked,
    cached_question,
    challenge_columns,
    challenge_from_columns,
    to_challenge,
    to_channel_ref,
    version_key_columns,
)
from bot.storage.models import ChallengeRow, ChannelRow, PlaySessionRow, ProblemRow, QuestionVersionRow
from bot.storage.sql import SqlRepository


def _problems_statement(_dialect: str) -> Any:
    p = ProblemRow.__table__
    v = QuestionVersionRow.__table__
    return (
        select(p.c.id.label("p_id"), p.c.position.label("p_position"), *version_key_columns(v))
        .join(v, v.c.id == p.c.question_version_id)
        .where(p.c.challenge_id == bindparam("challenge_id"))
        .order_by(p.c.position)
    )


def _find_challenge_statement(_dialect: str) -> Any:
    c = ChallengeRow.__table__
    ch = ChannelRow.__table__
    return (
        select(*challenge_columns(c, ch))
        .select_from(c)
        .join(ch, ch.c.id == c.c.channel_pk)
        .where(
            ch.c.platform == bindparam("platform"),
            ch.c.workspace_id == bindparam("workspace_id"),
            ch.c.channel_id == bindparam("channel_id"),
            c.c.day == bindparam("day"),
        )
    )


class SqlChallengeRepository(SqlRepository):
    """The ChallengeRepository port (bot/core/repositories/challenges.py) over one unit of work."""

    async def _challenge(self, row: ChallengeRow | None) -> Challenge | None:
        if row is None:
            return None
        channel = await self.s.get_one(ChannelRow, row.channel_pk)
        return to_challenge(row, channel, await self._problems(row.id, row.time_limit_s, row.attempts))

    async def _problems(
        self, challenge_id: int, time_limit_s: int | None, attempts: int | None
    ) -> tuple[Problem, ...]:
        """A challenge's problems in order, as asked (questions from the version cache, no JSON read)."""
        stmt = self._db.cached("problems", _problems_statement)
        problems = []
        for r in (await self._db.core(stmt, {"challenge_id": challenge_id})).all():
            question = await cached_question(self.s, r.v_id, r.v_question_id, r.v_version, r.v_hash)
            if time_limit_s is not None or attempts is not None:
                question = as_asked(question, time_limit_s, attempts)
            problems.append(Problem(r.p_id, challenge_id, r.p_position, question))
        return tuple(problems)

    async def get_challenge(self, channel_pk: int, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day."""
        row = await self.s.scalar(
            select(ChallengeRow).where(ChallengeRow.channel_pk == channel_pk, ChallengeRow.day == day)
        )
        return await self._challenge(row)

    async def get_challenge_by_id(self, challenge_id: int) -> Challenge | None:
        """A challenge by id."""
        return await self._challenge(await self.s.get(ChallengeRow, challenge_id))

    async def tenant_challenge(self, view: Tenant | None, challenge_id: int) -> Challenge | None:
        """A challenge by id if it belongs to ``view`` (None: the operator, any tenant)."""
        stmt = select(ChallengeRow).where(ChallengeRow.id == challenge_id)
        if view is not None:
            stmt = stmt.join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk).where(
                ChannelRow.platform == view.platform, ChannelRow.workspace_id == view.workspace_id
            )
        return await self._challenge(await self.s.scalar(stmt))

    async def find_challenge(self, ref: ChannelRef, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day, found by the channel's platform ids (no channel row needed)."""
        stmt = self._db.cached("find_challenge", _find_challenge_statement)
        params = {
            "platform": ref.platform,
            "workspace_id": ref.workspace_id,
            "channel_id": ref.channel_id,
            "day": day,
        }
        r = (await self._db.core(stmt, params)).first()
        if r is None:
            return None
        return challenge_from_columns(r, await self._problems(r.c_id, r.c_time_limit_s, r.c_attempts))

    async def latest_challenge(self, channel_pk: int) -> Challenge | None:
        """The channel's most recent challenge."""
        row = await self.s.scalar(
            select(ChallengeRow)
            .where(ChallengeRow.channel_pk == channel_pk)
            .order_by(ChallengeRow.day.desc())
            .limit(1)
        )
        return await self._challenge(row)

    async def create_challenge(
        self,
        channel_pk: int,
        day: dt.date,
        title: str,
        version_ids: Sequence[int],
        opened_at: dt.datetime,
        closes_at: dt.datetime | None,
        *,
        time_limit_s: int | None = None,
        attempts: int | None = None,
    ) -> Challenge:
        """Create the day's challenge; AlreadyExistsError when the channel already has that day's."""
        stmt = (
            self._db.insert(ChallengeRow)
            .values(
                channel_pk=channel_pk,
                day=day,
                title=title,
                status="open",
                opened_at=opened_at,
                closes_at=closes_at,
                time_limit_s=time_limit_s,
                attempts=attempts,
            )
            .on_conflict_do_nothing()
            .returning(ChallengeRow.id)
        )
        challenge_id = await self.s.scalar(stmt)
        if challenge_id is None:
            raise AlreadyExistsError(f"channel {channel_pk} already has a challenge for {day}")
        self.s.add_all(
            ProblemRow(challenge_id=challenge_id, position=i, question_version_id=v)
            for i, v in enumerate(version_ids, start=1)
        )
        await self.s.flush()
        challenge = await self.get_challenge_by_id(challenge_id)
        assert challenge is not None
        return challenge

    async def close_challenge(self, challenge_id: int, now: dt.datetime) -> bool:
        """Close if open; True only for the caller that closed it."""
        result = await self.s.execute(
            update(ChallengeRow)
            .where(ChallengeRow.id == challenge_id, ChallengeRow.status == "open")
            .values(status="closed", closed_at=now)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def set_message_ref(self, challenge_id: int, message_ref: str) -> None:
        """Remember where the challenge was posted."""
        await self.s.execute(
            update(ChallengeRow).where(ChallengeRow.id == challenge_id).values(message_ref=message_ref)
        )

    async def delete_unposted_challenge(self, challenge_id: int) -> bool:
        """Remove a challenge whose post the platform refused (never posted, so nobody saw or played it);
        its problems go with it (ON DELETE CASCADE). False when it was posted or played meanwhile.
        """
        played = select(PlaySessionRow.id).join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
        played = played.where(ProblemRow.challenge_id == challenge_id)
        result = await self.s.execute(
            delete(ChallengeRow).where(
                ChallengeRow.id == challenge_id, ChallengeRow.message_ref.is_(None), ~played.exists()
            )
        )
        return isinstance(result, CursorResult) and result.rowcount > 0

    async def open_windows(self) -> list[OpenWindow]:
        """Open challenges that have a closing time, with their channels."""
        rows = await self.s.execute(
            select(ChallengeRow.id, ChallengeRow.closes_at, ChannelRow)
            .join(ChannelRow, ChannelRow.id == ChallengeRow.channel_pk)
            .where(ChallengeRow.status == "open", ChallengeRow.closes_at.is_not(None))
            .order_by(ChallengeRow.id)
        )
        return [
            OpenWindow(int(i), int(ch.id), at, to_channel_ref(ch))
            for i, at, ch in rows.tuples()
            if at is not None
        ]

    async def windowless(self) -> list[tuple[int, dt.datetime]]:
        """(challenge id, opened_at) of open challenges that have no closing time."""
        rows = await self.s.execute(
            select(ChallengeRow.id, ChallengeRow.opened_at)
            .where(ChallengeRow.status == "open", ChallengeRow.closes_at.is_(None))
            .order_by(ChallengeRow.id)
        )
        return [(int(i), at) for i, at in rows.tuples()]

    async def adopt_window(self, challenge_id: int, closes_at: dt.datetime) -> bool:
        """Give an open challenge without a closing time this one; True only for the caller that did."""
        result = await self.s.execute(
            update(ChallengeRow)
            .where(
                ChallengeRow.id == challenge_id,
                ChallengeRow.status == "open",
                ChallengeRow.closes_at.is_(None),
            )
            .values(closes_at=closes_at)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def challenge_id_of_problem(self, problem_id: int) -> int | None:
        """The challenge a problem belongs to."""
        found = await self.s.scalar(select(ProblemRow.challenge_id).where(ProblemRow.id == problem_id))
        return int(found) if found is not None else None
