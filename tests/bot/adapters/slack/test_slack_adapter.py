"""The Slack adapter end to end: signed HTTP requests into the Bolt app served on loopback, outgoing Web
API calls into a recording fake on loopback, the real service on a migrated SQLite database.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.adapters.slack import blocks as bk
from bot.adapters.slack.app import EVENTS_PATH, SlackAdapter, build_adapter
from bot.bootstrap import build_services
from bot.config import Settings
from bot.core.errors import ConfigurationError
from bot.core.models import Actor, PlayerRef, Tenant
from bot.services import Services
from tests.conftest import ADMIN, START, make_spec, test_bank
from tests.fakes import FrozenClock
from tests.slack_fake import SECRET, TEAM, FakeSlackApi, SlackSender, sign

#: The fake workspace's tenant: questions its admins add are its own.
SLACK_TENANT = Tenant("slack", TEAM)

PLAYER = "UPLAYER"
OWNER = "UOWNER"  # a workspace owner according to users.info
LISTED = "ULISTED"  # an admin by RANKZERO_ADMINS


class Harness:
    """Everything a test drives: the sender, the fake API, the services, the clock."""

    def __init__(
        self,
        send: SlackSender,
        api: FakeSlackApi,
        services: Services,
        adapter: SlackAdapter,
        clock: FrozenClock,
    ) -> None:
        self.send = send
        self.api = api
        self.services = services
        self.adapter = adapter
        self.clock = clock
        #: (method, error) refusals a test provokes on purpose (any other fails the test).
        self.expected_refusals: list[tuple[str, str]] = []

    async def post_challenge(self) -> int:
        """``/rankzero post-now`` by the owner; returns the challenge id from the posted Start button."""
        r = await self.send.command(OWNER, "post-now")
        assert r.status_code == 200
        post = (await self.api.wait_for("chat.postMessage"))[0]
        start = next(
            e["action_id"] for b in post.args["blocks"] if b["type"] == "actions" for e in b["elements"]
        )
        assert start.startswith("rz:start:")
        return int(start.split(":")[2])

    async def start(self, challenge_id: int, user: str = PLAYER) -> tuple[str, dict[str, Any]]:
        """Click Start; returns (view id, the modal shown: a "Loading" modal opens at once, then the
        problem replaces it by view id)."""
        n = len(self.api.of("views.open"))
        u = len(self.api.of("views.update"))
        r = await self.send.click(user, f"rz:start:{challenge_id}")
        assert r.status_code == 200
        opened = (await self.api.wait_for("views.open", n + 1))[-1]
        assert "Loading" in json.dumps(opened.args["view"])
        view_id = str(opened.args["_view_id"])
        filled = (await self.api.wait_for("views.update", u + 1))[-1].args
        assert filled["view_id"] == view_id
        await self.clock_started(user, filled["view"])
        return view_id, filled["view"]

    async def clock_started(self, user: str, shown: dict[str, Any]) -> None:
        """Wait until the player's clock runs for the problem ``shown`` (it starts once Slack accepted the
        view, just after it), so a test that moves the clock moves it from there.
        """
        answers = [b for b in buttons(shown) if b.startswith("rz:answer:")]
        if not answers:
            return
        key = (user, int(answers[0].split(":")[2]))
        for _ in range(1000):
            if key in self.adapter.ctx.flow.timers.armed_keys():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"the clock of {key} never started")

    async def click_in_view(self, user: str, action_id: str, view_id: str, **kw: Any) -> dict[str, Any]:
        """Click inside the modal and return the next views.update."""
        n = len(self.api.of("views.update"))
        r = await self.send.click(user, action_id, view_id=view_id, **kw)
        assert r.status_code == 200
        view: dict[str, Any] = (await self.api.wait_for("views.update", n + 1))[-1].args["view"]
        return view


def buttons(view: dict[str, Any]) -> list[str]:
    """Every action id in a view or message."""
    return [e["action_id"] for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]]


def text_of(view: dict[str, Any]) -> str:
    return json.dumps(view, ensure_ascii=False)


async def _harness(
    tmp_path: Path, template: Path, bank: list[dict[str, Any]], **settings_kw: Any
) -> AsyncIterator[Harness]:
    """The adapter over ``bank``; ``settings_kw`` adds settings (e.g. the Slack admin channel)."""
    db = tmp_path / "slack.db"
    shutil.copy(template, db)
    api = FakeSlackApi(
        users={
            OWNER: {"is_owner": True, "profile": {"display_name": "Olga"}},
            PLAYER: {"profile": {"display_name": "Pat"}},
        }
    )
    await api.start()
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{db}",
        slack_bot_token=SecretStr("xoxb-test"),
        slack_signing_secret=SecretStr(SECRET),
        slack_port=0,
        admins=[LISTED],
        health_port=0,
        **settings_kw,
    )
    adapter = build_adapter(settings, base_url=api.base_url)
    clock = FrozenClock(START)
    adapter.ctx.clock = clock
    services = await build_services(settings, [adapter], clock=clock, migrate=False)
    await services.quiz.admin_import(ADMIN, bank)
    await adapter.start(services)
    assert adapter.http is not None
    url = f"http://127.0.0.1:{adapter.http.port}{EVENTS_PATH}"
    async with httpx.AsyncClient(timeout=10) as http:
        h = Harness(SlackSender(url, api, http), api, services, adapter, clock)
        try:
            yield h
            # Strict fake: whatever Slack refused (a 429 retried is fine) is a failure unless expected.
            unexpected = [r for r in api.refused if r[1] != "ratelimited" and r not in h.expected_refusals]
            assert not unexpected, f"Slack refused: {unexpected}"
        finally:
            await adapter.stop()
            await services.app.close()
            await api.stop()


# ---------------------------------------------------------------------- transport
async def test_forged_signature_is_refused_with_401(slack: Harness) -> None:
    r = await slack.send.command(OWNER, "post-now", signer=lambda body: sign(body, secret="not-the-secret"))
    assert r.status_code == 401
    # Tampering with the body after signing is refused too.
    r = await slack.send.command(
        OWNER, "post-now", signer=lambda body: sign(body.replace("post-now", "help"))
    )
    assert r.status_code == 401
    await asyncio.sleep(0.2)
    assert slack.api.calls == []


async def test_stale_timestamp_is_refused_with_401(slack: Harness) -> None:
    stale = int(time.time()) - 6 * 60
    r = await slack.send.command(OWNER, "post-now", signer=lambda body: sign(body, timestamp=stale))
    assert r.status_code == 401
    recent = int(time.time()) - 4 * 60
    r = await slack.send.command(OWNER, "help", signer=lambda body: sign(body, timestamp=recent))
    assert r.status_code == 200
    await slack.api.wait_for("response")
    assert not slack.api.of("chat.postMessage")


# ---------------------------------------------------------------------- the problem flow
async def test_post_start_wrong_then_right_then_next(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    post = slack.api.of("chat.postMessage")[0]
    assert post.args["channel"] == "C1"
    # post-now without a schedule: a day's window, closed by the scheduler
    # (tests/bot/test_scheduling_closing.py)
    assert "Closes <!date^" in post.dump()
    view_id, view = await slack.start(challenge_id)
    assert "Problem 1 of 5" in text_of(view)
    assert "Attempts left: *2* of 2" in text_of(view)
    assert "<!date^" in text_of(view)  # the deadline, in the player's own timezone
    answers = [b for b in buttons(view) if b.startswith("rz:answer:")]
    assert len(answers) == 4 and any(b.startswith("rz:hint:") for b in buttons(view))
    problem_id = int(answers[0].split(":")[2])

    wrong = await slack.click_in_view(PLAYER, f"rz:answer:{problem_id}:B", view_id)
    assert "Not quite: 1 attempt left" in text_of(wrong)
    assert f"rz:answer:{problem_id}:B" not in buttons(wrong)
    assert "Attempts left: *1* of 2" in text_of(wrong)

    right = await slack.click_in_view(PLAYER, f"rz:answer:{problem_id}:A", view_id)
    assert "Correct!" in text_of(right)
    assert "*Answer: A*" in text_of(right) and "because" in text_of(right)  # the explanation
    assert buttons(right) == [f"rz:next:{challenge_id}"]

    nxt = await slack.click_in_view(PLAYER, f"rz:next:{challenge_id}", view_id)
    assert "Problem 2 of 5" in text_of(nxt)
    # The player is recorded under their Slack display name, not the user id.
    board = await slack.services.quiz.leaderboard(
        slack.adapter.ctx.channel(TEAM, "C1"), player=PlayerRef("slack", PLAYER, "Pat")
    )
    assert [r.display_name for r in board.rows] == ["Pat"]


async def test_hint_is_shown_in_the_modal(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    hint = next(b for b in buttons(view) if b.startswith("rz:hint:"))
    shown = await slack.click_in_view(PLAYER, hint, view_id)
    assert "Hint:" in text_of(shown) and "hint for" in text_of(shown)
    assert hint not in buttons(shown)


async def test_attempt_limit_reveals_the_answer_and_refuses_more(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    pid = int(buttons(view)[0].split(":")[2])
    await slack.click_in_view(PLAYER, f"rz:answer:{pid}:B", view_id)
    out = await slack.click_in_view(PLAYER, f"rz:answer:{pid}:C", view_id)
    assert "Wrong: the answer was A" in text_of(out)
    assert not [b for b in buttons(out) if b.startswith("rz:answer:")]
    late = await slack.click_in_view(PLAYER, f"rz:answer:{pid}:D", view_id)  # a stale modal's button
    assert "already over" in text_of(late)
    actor = Actor(PlayerRef("slack", PLAYER, "Pat"))
    card = await slack.services.quiz.view_problem(actor, pid)
    assert card.attempts_left == 0 and card.over


async def test_redelivered_answer_is_not_a_second_attempt(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    pid = int(buttons(view)[0].split(":")[2])
    await slack.click_in_view(PLAYER, f"rz:answer:{pid}:B", view_id, action_ts="1700000200.000001")
    updates = len(slack.api.of("views.update"))
    r = await slack.send.click(
        PLAYER,
        f"rz:answer:{pid}:B",
        view_id=view_id,
        action_ts="1700000200.000001",
        headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
    )
    assert r.status_code == 200
    await asyncio.sleep(0.3)
    assert len(slack.api.of("views.update")) == updates
    card = await slack.services.quiz.view_problem(Actor(PlayerRef("slack", PLAYER, "Pat")), pid)
    assert card.attempts_left == 1  # one attempt used, not two
    # Even past the adapter's memory (another process, a restart), the service's key makes it a no-op.
    feedback = await slack.services.quiz.answer(
        Actor(PlayerRef("slack", PLAYER, "Pat")),
        pid,
        "B",
        idempotency_key=f"slack:{PLAYER}:1700000200.000001",
    )
    assert feedback.duplicate and feedback.attempts_left == 1


async def test_time_up_updates_the_modal(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    pid = int(buttons(view)[0].split(":")[2])
    n = len(slack.api.of("views.update"))
    slack.clock.advance(121)  # the timer's sleep_until wakes at the stored deadline
    updated = (await slack.api.wait_for("views.update", n + 1))[-1].args
    assert updated["view_id"] == view_id
    assert "Time is up" in text_of(updated["view"])
    assert not [b for b in buttons(updated["view"]) if b.startswith("rz:answer:")]
    card = await slack.services.quiz.view_problem(Actor(PlayerRef("slack", PLAYER, "Pat")), pid)
    assert card.over and card.attempts_left == 2
    late = await slack.click_in_view(PLAYER, f"rz:answer:{pid}:A", view_id)
    assert "time is up" in text_of(late)


# ---------------------------------------------------------------------- admin
QUESTION_FORM: dict[str, Any] = {
    "id": "slack-added-1",
    "kind": ("select", "conceptual"),
    "topic": "DDP",
    "difficulty": ("select", "advanced"),
    "prompt": "Which collective does DDP use for gradients?",
    "choices": "*all-reduce\nbroadcast\nscatter",
    "explanation": "Buckets are all-reduced.",
}


async def test_question_add_modal_shows_errors_on_fields_then_adds(slack: Harness) -> None:
    r = await slack.send.command(OWNER, "question add")
    assert r.status_code == 200
    opened = (await slack.api.wait_for("views.open"))[0].args
    assert opened["trigger_id"].startswith("trigger-cmd-") and "Loading" in text_of(opened["view"])
    form = (await slack.api.wait_for("views.update"))[0].args
    assert form["view_id"] == opened["_view_id"] and form["view"]["callback_id"] == bk.QUESTION_CALLBACK

    bad = {**QUESTION_FORM, "id": "Bad Id!", "attempts": "9"}
    r = await slack.send.submit(OWNER, bk.QUESTION_CALLBACK, bad)
    assert r.status_code == 200
    answer = r.json()
    assert answer["response_action"] == "errors"
    assert set(answer["errors"]) == {"id", "attempts"}
    assert "slug" in answer["errors"]["id"]
    assert "slack-added-1" not in [q.id for q in await slack.services.quiz.list_questions(view=SLACK_TENANT)]

    no_correct = {**QUESTION_FORM, "choices": "all-reduce\nbroadcast"}
    r = await slack.send.submit(OWNER, bk.QUESTION_CALLBACK, no_correct)
    assert r.json()["response_action"] == "errors" and "choices" in r.json()["errors"]

    r = await slack.send.submit(OWNER, bk.QUESTION_CALLBACK, QUESTION_FORM)
    assert r.status_code == 200 and r.text in ("", "{}")
    assert "slack-added-1" in [q.id for q in await slack.services.quiz.list_questions(view=SLACK_TENANT)]


async def test_non_admin_is_refused(slack: Harness) -> None:
    for text in ("post-now", "question add", "close-now", "schedule set --time 09:00"):
        r = await slack.send.command(PLAYER, text)
        assert r.status_code == 200
    replies = await slack.api.wait_for("response", 3)
    assert all("only admins" in c.dump() for c in replies)
    # question add opens its modal at once (before the lookup that decides who is an admin): the
    # refusal replaces the "Loading" modal, and no form is ever shown.
    refused = (await slack.api.wait_for("views.update"))[0].args
    assert "only admins" in text_of(refused["view"])
    assert not [c for c in slack.api.of("views.update") if 'callback_id": "rz_question_add' in c.dump()]
    assert not slack.api.of("chat.postMessage")
    # The submission itself is refused too (a form opened by someone who lost admin, or forged).
    r = await slack.send.submit(PLAYER, bk.QUESTION_CALLBACK, QUESTION_FORM)
    assert r.json()["response_action"] == "errors" and "only admins" in r.json()["errors"]["id"]


async def test_configured_admin_schedules_and_closes(slack: Harness) -> None:
    r = await slack.send.command(LISTED, "schedule set --time 09:30 --days mon-fri")
    assert r.status_code == 200
    reply = (await slack.api.wait_for("response"))[0]
    assert "09:30" in reply.dump() and "<!date^" in reply.dump()
    assert "Mon–Fri at 09:30 UTC, 5 problems" in reply.dump() and "ScheduleConfig(" not in reply.dump()
    await slack.post_challenge()
    await slack.send.command(LISTED, "close-now")
    await slack.api.wait_for("chat.update")
    closed = slack.api.of("chat.update")[0].args
    assert closed["channel"] == "C1" and "closed" in closed["blocks"][1]["elements"][0]["text"]
    results = (await slack.api.wait_for("chat.postMessage", 2))[1].args
    assert results["thread_ts"] == closed["ts"]  # the results go in the daily post's thread
    assert "Results" in json.dumps(results["blocks"])


async def test_scheduled_post_shows_the_window_end_in_each_readers_timezone(slack: Harness) -> None:
    closes = dt.datetime(2026, 11, 21, 17, 0, tzinfo=dt.UTC)
    channel = slack.adapter.ctx.channel(TEAM, "C9")
    await slack.services.quiz.post_daily(channel, closes_at=closes)
    post = (await slack.api.wait_for("chat.postMessage"))[0]
    token = f"<!date^{int(closes.timestamp())}^{{date_short_pretty}} {{time}}|2026-11-21 17:00 UTC>"
    assert token in post.dump()
    assert post.args["channel"] == "C9" and any(b.startswith("rz:start:") for b in buttons(post.args))


# ---------------------------------------------------------------------- escaping and limits
@pytest.fixture
async def hostile(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Harness]:
    """A bank whose every text tries to ping the channel or break the markup."""
    bank = [
        make_spec(
            f"evil-{i}",
            "advanced",
            "<!here> & co",
            prompt="<!channel> ping & <@U123> <https://evil|click>",
            code="if a < b and c > d: print('&')\n```\nbreak out",
        )
        for i in range(6)
    ]
    async for h in _harness(tmp_path, sqlite_template, bank):
        yield h


async def test_echoed_text_is_escaped(hostile: Harness) -> None:
    challenge_id = await hostile.post_challenge()
    post = hostile.api.of("chat.postMessage")[0].dump()
    assert "<!here>" not in post and "&lt;!here&gt; &amp; co" in post
    _, view = await hostile.start(challenge_id)
    shown = text_of(view)
    assert "<!channel>" not in shown and "<@U123>" not in shown and "<https://evil" not in shown
    assert "&lt;!channel&gt; ping &amp; &lt;@U123&gt;" in shown
    assert "a &lt; b and c &gt; d" in shown
    code = next(
        b["text"]["text"] for b in view["blocks"] if b["type"] == "section" and "```" in b["text"]["text"]
    )
    assert code.count("```") == 2  # the snippet's own fence cannot close the block early


async def test_long_prompt_and_code_are_split_to_slack_limits(tmp_path: Path, sqlite_template: Path) -> None:
    # As long as the bank lets a question be (questions/display.py): a prompt over 3000 characters goes
    # on in a further section, the code in its own block, and nothing is cut.
    prompt = "word " * 640
    code = "".join(f"y_{i} = {i}\n" for i in range(140))
    bank = [make_spec(f"long-{i}", "advanced", "DDP", prompt=prompt, code=code) for i in range(6)]
    async for h in _harness(tmp_path, sqlite_template, bank):
        challenge_id = await h.post_challenge()
        _, view = await h.start(challenge_id)
        texts = [b["text"]["text"] for b in view["blocks"] if b["type"] == "section"]
        assert all(len(t) <= bk.MAX_TEXT for t in texts)
        assert not any(bk.TRUNCATED in t for t in texts)
        fenced = [t for t in texts if t.startswith("```")]
        assert fenced and all(t.endswith("```") for t in fenced)
        code_shown = "\n".join(t[3:-3] for t in fenced) + "\n"
        assert all(f"y_{i} = {i}\n" in code_shown for i in range(140))
        assert sum(t.count("word") for t in texts) == 640


def test_block_limits_split_and_truncate() -> None:
    assert bk.clip("a" * 3001).endswith(bk.TRUNCATED) and len(bk.clip("a" * 3001)) == 3000
    assert bk.clip("a" * 3000) == "a" * 3000
    many = [bk.button(str(i), f"b{i}") for i in range(60)]
    blocks = bk.actions(many)
    assert [len(b["elements"]) for b in blocks] == [25, 25, 10]
    messages = bk.split_message([bk.section(str(i)) for i in range(120)])
    assert [len(m) for m in messages] == [50, 50, 20]
    view = bk.fit_view([bk.section(str(i)) for i in range(150)])
    assert len(view) == 100 and "51 more blocks" in json.dumps(view[-1])
    assert len(bk.button("z" * 200, "x")["text"]["text"]) == 75


# ---------------------------------------------------------------------- events
async def test_app_home_opened_publishes_the_home_tab_once(slack: Harness) -> None:
    event = {"type": "app_home_opened", "user": PLAYER, "channel": "D1", "tab": "home"}
    r = await slack.send.event(event, "Ev001")
    assert r.status_code == 200
    published = (await slack.api.wait_for("views.publish"))[0].args
    assert published["user_id"] == PLAYER
    home = published["view"]
    assert home["type"] == "home"
    assert "Stats · Pat" in text_of(home) and "this workspace" in text_of(home)
    r = await slack.send.event(
        event, "Ev001", headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"}
    )
    assert r.status_code == 200
    await asyncio.sleep(0.3)
    assert len(slack.api.of("views.publish")) == 1


async def test_a_redelivered_event_is_dropped_by_another_process(slack: Harness) -> None:
    event = {"type": "app_home_opened", "user": PLAYER, "channel": "D1", "tab": "home"}
    assert (await slack.send.event(event, "Ev777")).status_code == 200
    await slack.api.wait_for("views.publish")
    # Another process (no memory of this delivery) gets Slack's retry: the database drops it.
    slack.adapter.ctx.deliveries.forget_local()
    retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    assert (await slack.send.event(event, "Ev777", headers=retry)).status_code == 200
    await asyncio.sleep(0.3)
    assert len(slack.api.of("views.publish")) == 1
    assert (await slack.send.event(event, "Ev778")).status_code == 200  # a new event still works
    await slack.api.wait_for("views.publish", 2)


async def test_help_and_leaderboard_commands(slack: Harness) -> None:
    await slack.send.command(PLAYER, "help")
    await slack.send.command(PLAYER, "leaderboard workspace week")
    await slack.send.command(PLAYER, "<!channel>&huh")
    replies = await slack.api.wait_for("response", 3)
    dumps = sorted(c.dump() for c in replies)
    assert any("/rankzero" in d and "post-now" not in d for d in dumps)  # players do not see admin help
    assert any("this workspace" in d and "this week" in d for d in dumps)
    assert any("Unknown command" in d and "&lt;!channel&gt;" in d for d in dumps)


# ---------------------------------------------------------------------- configuration
def test_registry_picks_http_or_socket_mode() -> None:
    from bot.adapters.registry import build_adapters

    base: dict[str, Any] = {
        "database_url": "sqlite+aiosqlite:///unused.db",
        "slack_bot_token": SecretStr("xoxb-x"),
    }
    # A bot token alone cannot receive anything: named as half a configuration, not silently left out.
    with pytest.raises(ConfigurationError, match="Slack is half configured"):
        build_adapters(Settings(**base))
    http = [
        a for a in build_adapters(Settings(**base, slack_signing_secret=SecretStr("s"))) if a.name == "slack"
    ]
    assert len(http) == 1 and isinstance(http[0], SlackAdapter) and http[0].http is not None
    socket = [
        a for a in build_adapters(Settings(**base, slack_app_token=SecretStr("xapp-1"))) if a.name == "slack"
    ]
    assert len(socket) == 1 and isinstance(socket[0], SlackAdapter) and socket[0].http is None


async def test_dispute_is_refused_until_the_problem_is_over_then_says_why(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    pid = int(buttons(view)[0].split(":")[2])
    await slack.send.command(PLAYER, f"dispute {pid}")
    early = (await slack.api.wait_for("response", 2))[1].dump()  # [0]: the post-now reply
    assert "once it is over for you" in early
    await slack.click_in_view(PLAYER, f"rz:answer:{pid}:A", view_id)
    await slack.send.command(PLAYER, f"dispute {pid}")
    later = (await slack.api.wait_for("response", 3))[2].dump()
    assert "has no runnable code" in later  # the test bank has no runner blocks
    await slack.send.command(PLAYER, "dispute abc")  # a question id, but not one asked today
    assert (
        "no problem of today's challenge asks question 'abc'"
        in (await slack.api.wait_for("response", 4))[3].dump()
    )
    await slack.send.command(PLAYER, "dispute two words")
    assert "usage: /rankzero dispute" in (await slack.api.wait_for("response", 5))[4].dump()


async def test_a_second_click_on_a_tried_wrong_letter_costs_no_attempt(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    pid = int(buttons(view)[0].split(":")[2])
    await slack.click_in_view(PLAYER, f"rz:answer:{pid}:B", view_id)
    again = await slack.click_in_view(PLAYER, f"rz:answer:{pid}:B", view_id)  # a stale modal's button
    assert "you already tried B" in text_of(again) and "Attempts left: *1* of 2" in text_of(again)
    card = await slack.services.quiz.view_problem(Actor(PlayerRef("slack", PLAYER, "Pat")), pid)
    assert card.attempts_left == 1 and not card.over


async def test_another_workspaces_owner_gets_missing_for_this_workspaces_objects(slack: Harness) -> None:
    """Issue 24: the owner of another workspace naming this one's challenge by id, or retiring or
    correcting a shared question, changes nothing here; a missing id reads the same as ours.
    """
    challenge_id = await slack.post_challenge()
    await slack.api.wait_for("response")  # the post-now's own reply
    other = dataclasses.replace(slack.send, team="T0002")

    async def reply(text: str) -> str:
        before = len(slack.api.of("response"))
        await other.command(OWNER, text)
        answer = (await slack.api.wait_for("response", before + 1))[before].args
        return json.dumps(answer.get("blocks") or answer.get("text"), ensure_ascii=False)

    theirs = await reply(f"close-now {challenge_id}")
    missing = await reply(f"close-now {challenge_id + 1000}")
    assert "no challenge" in theirs
    assert theirs.replace(str(challenge_id), "N") == missing.replace(str(challenge_id + 1000), "N")
    assert (await slack.services.quiz.get_challenge(challenge_id)).status == "open"
    assert "Retired `int-0`" in await reply("question retire int-0")
    assert "int-0" in {q.id for q in await slack.services.quiz.list_questions(view=SLACK_TENANT)}
    assert "int-0" not in {
        q.id for q in await slack.services.quiz.list_questions(view=Tenant("slack", "T0002"))
    }


async def test_a_workspace_not_in_the_allow_list_is_ignored_and_logged(
    tmp_path: Path, sqlite_template: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24: with RANKZERO_ALLOWED_TENANTS, requests from another workspace are acknowledged and
    dropped (nothing posted, nothing answered), with a log line; the allowed workspace plays as usual.
    """
    caplog.set_level("WARNING", logger="bot.adapters.slack.app")
    async for h in _harness(tmp_path, sqlite_template, test_bank(), allowed_tenants=[f"slack:{TEAM}"]):
        stranger = dataclasses.replace(h.send, team="T0002")
        r = await stranger.command(OWNER, "post-now")
        assert r.status_code == 200 and not r.content
        await asyncio.sleep(0.3)  # listeners run after the ack: give an unwanted one time to act
        assert not h.api.of("chat.postMessage") and not h.api.of("response")
        assert "workspace T0002: it is not in RANKZERO_ALLOWED_TENANTS" in caplog.text
        assert await h.post_challenge() > 0  # the allowed workspace
