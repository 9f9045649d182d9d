"""The weekly posts (leaderboard, team report) Slack accepted before their sender died are not posted again
(the survivor finds the message by its metadata mark), as tests/bot/adapters/slack/test_outbox_exactly_once.py
does for the other posts.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from typing import Any

import pytest

from tests.bot.adapters.slack.test_outbox_exactly_once import (  # noqa: F401 (fixture)
    CHANNEL,
    slack,
    survivor_takes_over,
    top_level,
)
from tests.bot.adapters.slack.test_slack_adapter import Harness
from tests.fakes import Died, die_mid_post


async def _queued(h: Harness, kind: Any) -> int:
    """Queue the channel's weekly post of ``kind`` (summary or team_report) for the week of 2026-11-23."""
    quiz = h.services.quiz
    async with quiz._uow() as uow:
        pk = await uow.players.ensure_channel(CHANNEL)
        item_id = await quiz.outbox.queue_summary(
            uow, CHANNEL, pk, "Team report · week of 2026-11-23", dt.date(2026, 11, 23), f"{pk}:p", kind=kind
        )
    assert item_id is not None
    return item_id


@pytest.mark.parametrize("kind", ["summary", "team_report"])
async def test_weekly_post_accepted_before_a_death_is_not_posted_again(slack: Harness, kind: Any) -> None:  # noqa: F811
    """The survivor's try after the lease finds the accepted message and posts nothing."""
    item_id = await _queued(slack, kind)
    await die_mid_post(slack.services.quiz.outbox, item_id)
    before = len(top_level(slack))
    assert before == 1
    assert await survivor_takes_over(slack, item_id) == "sent"
    assert len(top_level(slack)) == 1, "posted twice"


async def test_team_report_accepted_before_its_part_record_is_not_posted_again(
    slack: Harness,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heatmap's part was recorded, the report message's was not: the survivor finds the message."""
    from bot.core import parts

    real_accepted = parts.PartLedger.accepted

    async def _dies(self: parts.PartLedger, count: int, digest: str) -> None:
        if count < 2:  # the heatmap file's record goes through; the report message's does not
            return await real_accepted(self, count, digest)
        raise Died

    quiz = slack.services.quiz
    item_id = await _queued(slack, "team_report")
    with monkeypatch.context() as patched:
        patched.setattr(parts.PartLedger, "accepted", _dies)
        with contextlib.suppress(Died):
            await quiz.outbox.deliver(item_id)
    assert len(top_level(slack)) == 1
    assert await survivor_takes_over(slack, item_id) == "sent"
    assert len(top_level(slack)) == 1, "posted twice"


async def test_a_retry_without_files_write_keeps_the_missing_heatmap_note(
    slack: Harness,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without files:write the heatmap part posts nothing and the report says why; a try that dies after
    the heatmap part was recorded leaves the survivor to post the report: it says the same (the note is
    asked of Slack again, auth.test's scopes), not a report that silently lacks its heatmap.
    """
    from bot.core import parts

    slack.api.scopes.discard("files:write")
    slack.expected_refusals.append(("files.getUploadURLExternal", "missing_scope"))
    real_accepted = parts.PartLedger.accepted

    async def _dies(self: parts.PartLedger, count: int, digest: str) -> None:
        await real_accepted(self, count, digest)
        raise Died  # right after the heatmap part's record: the report is left to the next try

    quiz = slack.services.quiz
    item_id = await _queued(slack, "team_report")
    with monkeypatch.context() as patched:
        patched.setattr(parts.PartLedger, "accepted", _dies)
        with contextlib.suppress(Died):
            await quiz.outbox.deliver(item_id)
    assert not top_level(slack)
    assert await survivor_takes_over(slack, item_id) == "sent"
    [post] = top_level(slack)
    assert "files:write" in json.dumps(post) and "reinstall" in json.dumps(post)
    assert not slack.api.uploads
