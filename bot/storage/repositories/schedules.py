"""SqlScheduleRepository: channel schedules and the scheduler's one-time claims."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, literal, select, update

from bot.core.errors import ScheduleConflictError
from bot.core.schedule import Schedule, ScheduleConfig
from bot.storage.mapping import to_channel_ref
from bot.storage.models import ChannelRow, SchedulerClaimRow, ScheduleRow
from bot.storage.sql import SqlRepository


class SqlScheduleRepository(SqlRepository):
    """The ScheduleRepository port (bot/core/repositories/schedules.py) over one unit of work."""

    async def _schedules(self, where: Any) -> list[Schedule]:
        rows = (
            await self.s.execute(
                select(ScheduleRow, ChannelRow)
                .join(ChannelRow, ChannelRow.id == ScheduleRow.channel_pk)
                .where(where)
                .order_by(ScheduleRow.channel_pk)
            )
        ).tuples()
        return [
            Schedule(
                channel_pk=r.channel_pk,
                channel=to_channel_ref(c),
                config=ScheduleConfig(
                    hour=r.post_hour,
                    minute=r.post_minute,
                    timezone=r.timezone,
                    days=tuple(int(d) for d in r.days),
                    problems=r.problems,
                    time_limit_s=r.time_limit_s,
                    attempts=r.attempts,
                    window_minutes=r.window_minutes,
                    reminder_minutes=r.reminder_minutes,
                    summary_day=r.summary_day,
                    paused=r.paused,
                    team_report=r.team_report,
                ),
                updated_at=r.updated_at,
                version=r.version,
            )
            for r, c in rows
        ]

    async def get_schedule(self, channel_pk: int) -> Schedule | None:
        """A channel's schedule."""
        found = await self._schedules(ScheduleRow.channel_pk == channel_pk)
        return found[0] if found else None

    async def list_schedules(self) -> list[Schedule]:
        """Every stored schedule."""
        return await self._schedules(literal(True))

    async def save_schedule(
        self,
        channel_pk: int,
        config: ScheduleConfig,
        now: dt.datetime,
        expected_version: int | None = None,
    ) -> Schedule:
        """Insert or replace the channel's schedule (one row per channel) and adopt its timezone.

        ``expected_version``: the version the caller read (0: it read no schedule); when the stored one is
        another (someone saved in between), nothing is written and :class:`ScheduleConflictError` is
        raised. None: save whatever is stored (system changes). Every save bumps the version.
        """
        values = {
            "post_hour": config.hour,
            "post_minute": config.minute,
            "timezone": config.timezone,
            "days": "".join(str(d) for d in sorted(config.days)),
            "problems": config.problems,
            "time_limit_s": config.time_limit_s,
            "attempts": config.attempts,
            "window_minutes": config.window_minutes,
            "reminder_minutes": config.reminder_minutes,
            "summary_day": config.summary_day,
            "paused": config.paused,
            "team_report": config.team_report,
            "updated_at": now,
        }
        insert = self._db.insert(ScheduleRow).values(channel_pk=channel_pk, version=1, **values)
        if expected_version is None:
            bump = {**values, "version": ScheduleRow.version + 1}
            await self.s.execute(insert.on_conflict_do_update(index_elements=["channel_pk"], set_=bump))
        elif expected_version == 0:
            created = await self.s.execute(insert.on_conflict_do_nothing())
            if not created.rowcount:  # type: ignore[attr-defined]
                raise ScheduleConflictError("another admin created this schedule meanwhile")
        else:
            # On PostgreSQL a concurrent saver's UPDATE waits for ours to commit, then finds the version
            # changed and updates nothing: the lost update becomes a conflict the service resolves.
            changed = await self.s.execute(
                update(ScheduleRow)
                .where(ScheduleRow.channel_pk == channel_pk, ScheduleRow.version == expected_version)
                .values(**values, version=ScheduleRow.version + 1)
            )
            if not changed.rowcount:  # type: ignore[attr-defined]
                raise ScheduleConflictError("another admin saved this schedule meanwhile")
        # Days, streaks and leaderboards of the channel follow the schedule's timezone.
        await self.s.execute(
            update(ChannelRow).where(ChannelRow.id == channel_pk).values(timezone=config.timezone)
        )
        saved = await self.get_schedule(channel_pk)
        assert saved is not None
        return saved

    async def claim(self, kind: str, key: str, now: dt.datetime) -> bool:
        """First insert of (kind, key) wins; a concurrent or later claimer gets False."""
        stmt = self._db.insert(SchedulerClaimRow).values(kind=kind, key=key, claimed_at=now)
        result = await self.s.execute(stmt.on_conflict_do_nothing())
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def claimed_at(self, kind: str, key: str) -> dt.datetime | None:
        """When the claim (kind, key) was made (aware UTC; SQLite hands it back naive); None: none."""
        when = await self.s.scalar(
            select(SchedulerClaimRow.claimed_at).where(
                SchedulerClaimRow.kind == kind, SchedulerClaimRow.key == key
            )
        )
        if when is None:
            return None
        return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)

    async def release(self, kind: str, key: str) -> bool:
        """Delete the claim (kind, key); True only for the caller whose delete removed it."""
        result = await self.s.execute(
            delete(SchedulerClaimRow).where(SchedulerClaimRow.kind == kind, SchedulerClaimRow.key == key)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]
