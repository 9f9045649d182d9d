"""A challenge the platform refused to post is removed, so the next post creates and posts it (SQLite and
PostgreSQL): before, the retry found the day's challenge, posted nothing and said it was posted.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.errors import PostRefusedError
from bot.core.service import QuizService
from tests.conftest import CHANNEL, actor
from tests.fakes import FakePlatform


async def test_a_refused_post_leaves_no_challenge_and_the_retry_posts(
    service: QuizService, platform: FakePlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = platform.post_challenge

    async def refuse(*_args: Any) -> str | None:
        raise PostRefusedError("I am not a member of channel C1")

    monkeypatch.setattr(platform, "post_challenge", refuse)
    with pytest.raises(PostRefusedError):
        await service.post_daily(CHANNEL)
    assert await service.find_challenge(CHANNEL) is None
    monkeypatch.setattr(platform, "post_challenge", real)  # the admin fixed it
    card = await service.post_daily(CHANNEL)
    found = await service.find_challenge(CHANNEL)
    assert found is not None and found.challenge_id == card.challenge_id
    assert len(platform.posts) == 1


async def test_a_played_challenge_is_never_removed(service: QuizService) -> None:
    challenge, _ = await service.open_challenge(CHANNEL)
    await service.start_problem(actor("ann"), challenge.problems[0].id)
    async with service._uow() as uow:
        assert not await uow.challenges.delete_unposted_challenge(challenge.id)
    assert await service.find_challenge(CHANNEL) is not None
