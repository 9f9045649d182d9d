"""The ``uow.challenges`` storage port; its SQL implementation is bot/storage/repositories/challenges.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

from bot.core.models import Challenge, ChannelRef, OpenWindow, Tenant


class ChallengeRepository(Protocol):
    """Daily challenges and their problems (``uow.challenges``)."""

    async def get_challenge(self, channel_pk: int, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day."""
        ...

    async def get_challenge_by_id(self, challenge_id: int) -> Challenge | None:
        """A challenge by id, whatever its tenant: for the bot's own jobs (the scheduler, a button on a
        message it posted), never for an id a user typed (see :meth:`tenant_challenge`).
        """
        ...

    async def tenant_challenge(self, view: Tenant | None, challenge_id: int) -> Challenge | None:
        """A challenge by id if it belongs to ``view``'s channels (None: the operator, any tenant's)."""
        ...

    async def find_challenge(self, ref: ChannelRef, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day, looked up by the channel's platform ids."""
        ...

    async def latest_challenge(self, channel_pk: int) -> Challenge | None:
        """The channel's most recent challenge."""
        ...

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
        """Create the day's challenge; raise AlreadyExistsError if the channel has one for that day.

        ``time_limit_s`` / ``attempts`` override every question's own for this challenge.
        """
        ...

    async def close_challenge(self, challenge_id: int, now: dt.datetime) -> bool:
        """Close if open (``UPDATE ... WHERE status='open'``); True only for the call that closed it."""
        ...

    async def set_message_ref(self, challenge_id: int, message_ref: str) -> None:
        """Remember where the challenge was posted."""
        ...

    async def delete_unposted_challenge(self, challenge_id: int) -> bool:
        """Remove a challenge the platform refused to post (nobody saw it); False if posted or played."""
        ...

    async def open_windows(self) -> list[OpenWindow]:
        """Every open challenge that has a closing time, with its channel."""
        ...

    async def windowless(self) -> list[tuple[int, dt.datetime]]:
        """(challenge id, opened_at) of every open challenge that has no closing time."""
        ...

    async def adopt_window(self, challenge_id: int, closes_at: dt.datetime) -> bool:
        """Give an open challenge that has no closing time this one; True only for the caller that did."""
        ...

    async def challenge_id_of_problem(self, problem_id: int) -> int | None:
        """The challenge a problem belongs to."""
        ...
