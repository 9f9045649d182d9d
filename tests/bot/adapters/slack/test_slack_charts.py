"""Issue 30 on Slack: ``/rankzero stats`` sends the player's chart to their DM with the app (Slack has no
private files in a channel), the weekly team report shares the heatmap and carries "Explanation" buttons;
everything through slack_sdk's ``files_upload_v2`` against the strict fake (files:write, alt text within
1000 characters, upload tickets used once).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters import charts
from bot.core.cards import HeatCell, MissedQuestion, Mover, TeamReportCard
from bot.core.errors import PostRefusedError
from bot.core.models import ChannelRef
from tests.bot.adapters.slack.test_slack_adapter import PLAYER, Harness
from tests.slack_fake import MAX_ALT_TXT, TEAM, FakeSlackApi

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNEL = ChannelRef("slack", TEAM, "C1", "general", "UTC")


async def _responses(h: Harness, count: int, prefix: str = "cmd") -> list[dict[str, Any]]:
    """The last ``count`` private answers to clicks (``act``) or to commands (``cmd``), once all arrived."""
    await h.api.wait_for("response", count)

    def answers() -> list[dict[str, Any]]:
        return [c.args for c in h.api.of("response") if str(c.args["_name"]).startswith(prefix)]

    await h.api.wait_for("response", len(h.api.of("response")) - len(answers()) + count)
    return answers()[-count:]


async def _closed_problems(h: Harness) -> list[int]:
    challenge_id = await h.post_challenge()
    await h.services.quiz.close_challenge(challenge_id)
    return [p.id for p in (await h.services.quiz.get_challenge(challenge_id)).problems]


def _report(problem_ids: list[int]) -> TeamReportCard:
    return TeamReportCard(
        title="Weekly report <!here>",
        week_start=dt.date(2026, 11, 16),
        cells=(HeatCell("DDP", "advanced", 10, 3), HeatCell("FSDP <b>", "beginner", 4, 4)),
        missed=tuple(MissedQuestion(p, f"q{p}", "DDP", 10, 2, f"because q{p}") for p in problem_ids[:3]),
        movers=(Mover("Bob <@U1> & co", 40, 1, 4), Mover("Carol", 30, 2, None)),
    )


def _buttons(blocks: list[dict[str, Any]]) -> dict[str, str]:
    return {
        b["accessory"]["text"]["text"]: b["accessory"]["action_id"]
        for b in blocks
        if b.get("accessory", {}).get("type") == "button"
    }


# ---------------------------------------------------------------------- /rankzero stats
async def test_stats_sends_the_chart_to_the_players_dm_with_alt_text(slack: Harness) -> None:
    await slack.send.command(PLAYER, "stats")

    figures, note = await _responses(slack, 2)
    assert figures["response_type"] == "ephemeral" and "Stats" in json.dumps(figures["blocks"])
    assert "in your messages" in json.dumps(note["blocks"])
    [upload] = slack.api.uploads
    assert upload.channel == PLAYER and upload.team == TEAM  # the app's DM with the player
    assert upload.data.startswith(PNG_SIGNATURE) and upload.filename == "rankzero-stats.png"
    assert upload.alt_txt and len(upload.alt_txt) <= MAX_ALT_TXT and "points" in upload.alt_txt.lower()


async def test_stats_without_files_write_keeps_the_figures_and_says_why(slack: Harness) -> None:
    slack.api.scopes.discard("files:write")  # installed before issue 30, not reinstalled
    slack.expected_refusals.append(("files.getUploadURLExternal", "missing_scope"))
    await slack.send.command(PLAYER, "stats")

    figures, note = await _responses(slack, 2)
    assert "Stats" in json.dumps(figures["blocks"])
    assert "files:write" in json.dumps(note["blocks"]) and "could not be attached" in json.dumps(note)
    assert not slack.api.uploads


async def test_stats_when_the_chart_cannot_be_drawn(slack: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(card: Any) -> charts.Chart:
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(charts, "player_chart", broken)
    await slack.send.command(PLAYER, "stats")

    figures, note = await _responses(slack, 2)
    assert "Stats" in json.dumps(figures["blocks"]) and "could not be attached" in json.dumps(note)
    assert not slack.api.of("files.getUploadURLExternal")


# ---------------------------------------------------------------------- the team report
async def test_team_report_shares_heatmap_then_blocks_with_buttons(slack: Harness) -> None:
    problems = await _closed_problems(slack)
    await slack.adapter.platform.post_team_report(CHANNEL, _report(problems))

    [upload] = slack.api.uploads
    assert upload.channel == "C1" and upload.data.startswith(PNG_SIGNATURE)
    assert upload.alt_txt and "DDP" in upload.alt_txt and len(upload.alt_txt) <= MAX_ALT_TXT
    post = slack.api.of("chat.postMessage")[-1].args
    assert post["text"] == "Weekly report &lt;!here&gt;"  # escaped: no ping (the header is plain_text)
    text = json.dumps([b for b in post["blocks"] if b["type"] != "header"])
    assert "<@U1>" not in text and "&lt;@U1&gt; &amp; co" in text
    buttons = _buttons(post["blocks"])
    assert sorted(buttons.values()) == sorted(f"rz:miss:{p}" for p in problems[:3])


async def test_explanation_button_answers_privately(slack: Harness) -> None:
    problems = await _closed_problems(slack)
    await slack.adapter.platform.post_team_report(CHANNEL, _report(problems))
    action = _buttons(slack.api.of("chat.postMessage")[-1].args["blocks"])["Explanation #1"]

    await slack.send.click(PLAYER, action)

    [answer] = await _responses(slack, 1, "act")
    assert answer["response_type"] == "ephemeral" and answer["replace_original"] in (False, "false")
    [shown] = slack.api.ephemeral[PLAYER]
    assert "because" in json.dumps(shown.blocks)


async def test_explanation_of_another_workspaces_problem_is_refused(slack: Harness) -> None:
    problems = await _closed_problems(slack)
    slack.send.team = "T0OTHER"  # a click from another workspace, naming this one's problem id

    await slack.send.click(PLAYER, f"rz:miss:{problems[0]}")
    await slack.send.click(PLAYER, "rz:miss:999999")

    theirs, missing = await _responses(slack, 2, "act")
    assert "because" not in json.dumps(theirs) and "no problem" in theirs["text"]
    pid = str(problems[0])
    assert theirs["text"].replace(pid, "N") == missing["text"].replace("999999", "N")


async def test_team_report_without_files_write_goes_as_text(slack: Harness) -> None:
    slack.api.scopes.discard("files:write")
    slack.expected_refusals.append(("files.getUploadURLExternal", "missing_scope"))
    await slack.adapter.platform.post_team_report(CHANNEL, _report(await _closed_problems(slack)))

    post = slack.api.of("chat.postMessage")[-1].args
    assert "files:write" in json.dumps(post["blocks"]) and _buttons(post["blocks"])
    assert not slack.api.uploads


async def test_team_report_refused_by_the_channel_is_a_post_refused_error(slack: Harness) -> None:
    problems = await _closed_problems(slack)
    slack.api.channels["C1"].member = False
    slack.api.scopes.discard("chat:write.public")
    slack.expected_refusals.append(("files.completeUploadExternal", "not_in_channel"))

    with pytest.raises(PostRefusedError, match="not a member"):
        await slack.adapter.platform.post_team_report(CHANNEL, _report(problems))
    assert not slack.api.uploads


# ---------------------------------------------------------------------- the fake's rules
@pytest.fixture
async def api() -> Any:
    fake = FakeSlackApi(users={PLAYER: {}})
    await fake.start()
    yield fake
    await fake.stop()


def _web(api: FakeSlackApi) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=api.base_url)


async def test_fake_refuses_alt_text_over_1000(api: FakeSlackApi) -> None:
    with pytest.raises(SlackApiError) as refused:
        await _web(api).files_getUploadURLExternal(filename="a.png", length=3, alt_txt="a" * 1001)
    assert refused.value.response["error"] == "alt_txt_too_large"


async def test_fake_refuses_without_files_write(api: FakeSlackApi) -> None:
    api.scopes.discard("files:write")
    with pytest.raises(SlackApiError) as refused:
        await _web(api).files_upload_v2(content=b"abc", filename="a.png", channel="C1")
    assert refused.value.response["error"] == "missing_scope"
    assert refused.value.response["needed"] == "files:write"


async def test_fake_refuses_unknown_unuploaded_and_reused_file_ids(api: FakeSlackApi) -> None:
    web = _web(api)
    with pytest.raises(SlackApiError, match="file_not_found"):
        await web.files_completeUploadExternal(files=[{"id": "F404"}], channel_id="C1")
    ticket = await web.files_getUploadURLExternal(filename="a.png", length=3)
    with pytest.raises(SlackApiError, match="file_not_found"):  # the bytes never reached the upload URL
        await web.files_completeUploadExternal(files=[{"id": ticket["file_id"]}], channel_id="C1")
    async with httpx.AsyncClient() as http:
        assert (await http.post(str(ticket["upload_url"]), content=b"abcd")).status_code == 400  # not 3
        assert (await http.post(str(ticket["upload_url"]), content=b"abc")).status_code == 200
    await web.files_completeUploadExternal(files=[{"id": ticket["file_id"]}], channel_id="C1")
    with pytest.raises(SlackApiError, match="file_not_found"):  # a ticket is good for one share
        await web.files_completeUploadExternal(files=[{"id": ticket["file_id"]}], channel_id="C1")
    assert [u.data for u in api.uploads] == [b"abc"]


async def test_fake_refuses_a_channel_the_bot_is_not_in(api: FakeSlackApi) -> None:
    api.channels["C1"].private = True
    api.channels["C1"].member = False
    with pytest.raises(SlackApiError) as refused:
        await _web(api).files_upload_v2(content=b"abc", filename="a.png", channel="C1", alt_txt="x")
    assert refused.value.response["error"] == "channel_not_found"
    api.channels["C9"].member = False
    api.scopes.discard("chat:write.public")
    with pytest.raises(SlackApiError) as refused:
        await _web(api).files_upload_v2(content=b"abc", filename="a.png", channel="C9", alt_txt="x")
    assert refused.value.response["error"] == "not_in_channel"
    assert not api.uploads


async def test_stats_chart_when_slack_cannot_be_reached_is_a_note_not_an_error() -> None:
    """slack_sdk passes a network failure on as aiohttp's own error: the player still gets a note."""
    from bot.adapters.slack import uploads
    from bot.core.cards import StatsCard
    from tests.net import free_port

    unreachable = AsyncWebClient(token="xoxb-test", base_url=f"http://127.0.0.1:{free_port()}/api/")
    card = StatsCard("Ada", 0, 0, 0, 0, 0, 0, (), ())
    note = await uploads.send_stats_chart(unreachable, PLAYER, card)
    assert "could not be reached" in note
