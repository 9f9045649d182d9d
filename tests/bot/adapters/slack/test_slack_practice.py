"""Practice modes and the challenge / close-now / post-now fixes in Slack, end to end: signed HTTP requests
into the Bolt app on loopback, Web API calls into the recording fake, the real services on SQLite.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import async_sessionmaker

from bot.adapters.slack import practice_blocks as pb
from bot.core.models import Actor, PlayerRef
from bot.storage.models import AttemptRow, ChallengeRow, ReviewCardModel
from tests.bot.adapters.slack.test_slack_adapter import OWNER, PLAYER, Harness, _harness, buttons, text_of
from tests.conftest import START, test_bank
from tests.shipped import shipped_specs

PAT = PlayerRef("slack", PLAYER, "Pat")


def _cards() -> list[dict[str, Any]]:
    return [
        {
            "id": f"card-{i}",
            "kind": "flashcard",
            "topic": "DDP",
            "difficulty": "beginner",
            "front": f"Front {i} <!channel>?",
            "back": f"Back {i} & more.",
            "explanation": f"Why {i}.",
        }
        for i in (1, 2)
    ]


@pytest.fixture
async def slack(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Harness]:
    """The adapter over the test bank (answer A), two flashcards and the shipped explain prompts."""
    explains = [s for s in shipped_specs() if s["kind"] == "explain"]
    async for h in _harness(tmp_path, sqlite_template, test_bank() + _cards() + explains):
        yield h


async def _command_modal(h: Harness, user: str, text: str) -> tuple[str, dict[str, Any]]:
    """Run a modal subcommand: the "Loading" modal opens at once, then the content replaces it."""
    opened_before, updated_before = len(h.api.of("views.open")), len(h.api.of("views.update"))
    r = await h.send.command(user, text)
    assert r.status_code == 200
    opened = (await h.api.wait_for("views.open", opened_before + 1))[-1].args
    assert "Loading" in text_of(opened["view"]) and opened["trigger_id"].startswith("trigger-cmd-")
    filled = (await h.api.wait_for("views.update", updated_before + 1))[-1].args
    assert filled["view_id"] == opened["_view_id"]
    return str(opened["_view_id"]), filled["view"]


async def _count(h: Harness, stmt: Any) -> int:
    async with async_sessionmaker(h.services.app.engine)() as s:
        return int(await s.scalar(stmt) or 0)


async def _challenges(h: Harness) -> int:
    return await _count(h, select(func.count()).select_from(ChallengeRow))


# ---------------------------------------------------------------------- quiz
async def test_quiz_in_a_modal_to_the_score(slack: Harness) -> None:
    view_id, view = await _command_modal(slack, PLAYER, "quiz")
    for n in range(1, 6):
        assert f"Quiz {n} of 5" in text_of(view) and "not ranked" in text_of(view)
        answers = buttons(view)
        assert len(answers) == 4 and all(a.startswith(pb.ID_PREFIX + "quiz:") for a in answers)
        letter = "B" if n == 2 else "A"  # the test bank's answer is A: one wrong answer on purpose
        chosen = next(a for a in answers if a.endswith(f":{letter}"))
        fb = await slack.click_in_view(PLAYER, chosen, view_id)
        if n == 2:
            assert "*Wrong:* the answer was *A*" in text_of(fb) and "(your answer)" in text_of(fb)
        else:
            assert "*Correct!*" in text_of(fb)
        assert "because " in text_of(fb)  # the explanation, at once
        label = fb["blocks"][-1]["elements"][0]["text"]["text"]
        assert label == ("See my score" if n == 5 else "Next question")
        view = await slack.click_in_view(PLAYER, buttons(fb)[0], view_id)
    assert "You got 4/5" in text_of(view) and "never changes the leaderboard" in text_of(view)
    stats = await slack.services.app.practice.stats(PAT)
    assert (stats.quizzes, stats.quiz_answers, stats.quiz_correct) == (1, 5, 4)
    assert await _challenges(slack) == 0  # practice created no challenge
    # The stats reply shows the practice panel next to the (untouched) ranked record.
    await slack.send.command(PLAYER, "stats")
    reply = (await slack.api.wait_for("response"))[0].dump()
    assert "0 points" in reply or "*0* points" in reply
    assert "*Practice* (not ranked)" in reply and "Quizzes: 1 finished · 4/5 correct (80%)" in reply


async def test_quiz_unknown_topic_says_which_exist_escaped(slack: Harness) -> None:
    _, view = await _command_modal(slack, PLAYER, "quiz <!channel>")
    shown = text_of(view)
    assert "<!channel>" not in shown and "&lt;!channel&gt;" in shown
    assert "Available topics" in shown and "Collectives" in shown
    assert not buttons(view)


# ---------------------------------------------------------------------- flashcards
async def test_review_reveal_and_grade_store_the_due_date(slack: Harness) -> None:
    # Two new cards a day: the deck (18 questions, 2 recall cards, the explain prompts) starts with the
    # beginner recall cards.
    await slack.services.app.practice.set_new_per_day(PAT, 2)
    view_id, view = await _command_modal(slack, PLAYER, "review")
    assert "*2 cards due* · " in text_of(view)
    assert "Front 1 &lt;!channel&gt;?" in text_of(view) and "<!channel>" not in text_of(view)
    reveal = buttons(view)
    assert len(reveal) == 1 and ":reveal:" in reveal[0]

    back = await slack.click_in_view(PLAYER, reveal[0], view_id)
    assert "Back 1 &amp; more." in text_of(back)
    labels = [e["text"]["text"] for b in back["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert labels == ["Again · 1m", "Hard · 6m", "Good · 10m", "Easy · 8d"]  # FSRS defaults, new card

    easy = next(a for a in buttons(back) if a.endswith(":easy"))
    nxt = await slack.click_in_view(PLAYER, easy, view_id)
    assert "*easy*: next review in 8d" in text_of(nxt) and "Front 2" in text_of(nxt)
    async with async_sessionmaker(slack.services.app.engine)() as s:
        due = await s.scalar(select(ReviewCardModel.due_at).where(ReviewCardModel.question_id == "card-1"))
    assert due is not None and due.replace(tzinfo=dt.UTC) == START + dt.timedelta(days=8)

    # A second click on the same showing's grade is a no-op: no update, no second review.
    updates = len(slack.api.of("views.update"))
    r = await slack.send.click(PLAYER, easy, view_id=view_id)
    assert r.status_code == 200
    await asyncio.sleep(0.3)
    assert len(slack.api.of("views.update")) == updates
    assert (await slack.services.app.practice.stats(PAT)).reviews == 1

    back2 = await slack.click_in_view(PLAYER, buttons(nxt)[0], view_id)
    good = next(a for a in buttons(back2) if a.endswith(":good"))
    done = await slack.click_in_view(PLAYER, good, view_id)
    # The learning card (due in 10 min) is within the 20-minute learn-ahead: shown again.
    assert "*good*: next review in 10m" in text_of(done) and "Front 2" in text_of(done)
    slack.clock.advance(3600)
    back3 = await slack.click_in_view(PLAYER, buttons(done)[0], view_id)
    finished = await slack.click_in_view(
        PLAYER, next(a for a in buttons(back3) if a.endswith(":easy")), view_id
    )
    assert "No cards due right now" in text_of(finished) and "Next card due in" in text_of(finished)
    assert (await slack.services.app.practice.stats(PAT)).reviews == 3


async def test_review_nudge_on_then_the_daily_nudge_is_a_dm_once_a_day(slack: Harness) -> None:
    _, view = await _command_modal(slack, PLAYER, "review nudge maybe")
    assert "/rankzero review nudge on" in text_of(view)
    practice = slack.services.app.practice
    assert await practice.nudge_enabled(PAT) is False, "a bad value changes nothing"
    _, view = await _command_modal(slack, PLAYER, "review nudge on")
    assert "Daily reminder *on*" in text_of(view) and await practice.nudge_enabled(PAT)
    await practice.start_review(PAT)
    gone = PlayerRef("slack", "UGONE", "Gone")  # left the workspace: Slack knows no such user
    await practice.start_review(gone)
    await practice.set_nudge(gone, True)
    slack.expected_refusals.append(("chat.postMessage", "channel_not_found"))
    report = await practice.send_nudges(slack.adapter.platform)
    assert [p.user_id for p in report.sent] == [PLAYER] and [p.user_id for p in report.failed] == ["UGONE"]
    [dm] = [c.args for c in slack.api.of("chat.postMessage") if c.args.get("channel") == PLAYER]
    assert "*10 flashcards are due*" in dm["text"] and "/rankzero review nudge off" in text_of(dm)
    slack.expected_refusals.append(("chat.postMessage", "channel_not_found"))
    assert (await practice.send_nudges(slack.adapter.platform)).sent == (), "once a day"
    slack.clock.advance(86400)
    _, view = await _command_modal(slack, PLAYER, "review nudge off")
    assert "Daily reminder *off*" in text_of(view)
    await practice.set_nudge(gone, False)
    assert (await practice.send_nudges(slack.adapter.platform)).sent == ()


# ---------------------------------------------------------------------- explain
async def test_explain_submission_shows_covered_and_missed_concepts(slack: Harness) -> None:
    _, view = await _command_modal(slack, PLAYER, "explain basics")
    assert view["callback_id"] == pb.EXPLAIN_CALLBACK and view["submit"]["text"] == "Grade my answer"
    field = next(b for b in view["blocks"] if b["type"] == "input")
    assert field["block_id"] == pb.ANSWER_BLOCK and field["element"]["multiline"] is True
    assert "graded on 4 concepts" in text_of(view)
    version = view["private_metadata"]

    r = await slack.send.submit(PLAYER, pb.EXPLAIN_CALLBACK, {"answer": "   "}, metadata=version)
    assert r.json()["response_action"] == "errors" and "empty" in r.json()["errors"]["answer"]
    answer = (
        "First call model.to(device) so the weights live on the GPU. Then wrap the model in DataParallel."
    )
    r = await slack.send.submit(PLAYER, pb.EXPLAIN_CALLBACK, {"answer": answer}, metadata=version)
    assert r.status_code == 200
    out = r.json()
    assert out["response_action"] == "update"
    shown = text_of(out["view"])
    assert "You got 2/4 concepts" in shown
    assert "*Missed*" in shown and "Move each batch of inputs and labels to the GPU" in shown
    assert "*Model answer*" in shown and "DataParallel" in shown
    stats = await slack.services.app.practice.stats(PAT)
    assert (stats.explain_attempts, stats.concepts_covered, stats.concepts_total) == (1, 2, 4)

    r = await slack.send.submit(PLAYER, pb.EXPLAIN_CALLBACK, {"answer": answer}, metadata="not-a-version")
    assert r.json()["response_action"] == "errors" and "out of date" in r.json()["errors"]["answer"]


async def test_explain_names_a_misconception_and_the_missed_concepts(slack: Harness) -> None:
    _, view = await _command_modal(slack, PLAYER, "explain basics")
    answer = (
        "Check torch.cuda.is_available() and wrap the model in DataParallel; it moves the model and every "
        "batch to the GPU automatically <!channel> & more."
    )
    r = await slack.send.submit(
        PLAYER, pb.EXPLAIN_CALLBACK, {"answer": answer}, metadata=view["private_metadata"]
    )
    shown = text_of(r.json()["view"])
    assert "*Misconception*" in shown
    assert (
        ":warning: You wrote that wrapping the model moves the model and the data to the GPUs by itself: "
        "DataParallel and DDP move nothing for you" in shown
    )
    assert "*Missed*" in shown and ":x: Move the model to its GPU" in shown
    assert "<!channel>" not in shown  # the answer is never echoed unescaped


# ---------------------------------------------------------------------- App Home and help
async def test_app_home_shows_the_practice_panel(slack: Harness) -> None:
    await slack.services.app.practice.start_review(PAT)
    r = await slack.send.event({"type": "app_home_opened", "user": PLAYER, "tab": "home"}, "EvP1")
    assert r.status_code == 200
    home = (await slack.api.wait_for("views.publish"))[0].args["view"]
    shown = text_of(home)
    assert "Stats · Pat" in shown and "*Practice* (not ranked)" in shown
    # The deck: the 18 questions, 2 recall cards and the explain prompts; 10 new cards due a day.
    deck = re.search(r"Flashcards: (\d+) in deck · 10 due · 0 reviews", shown)
    assert deck is not None and int(deck.group(1)) > 20 and "this workspace" in shown
    await slack.send.command(PLAYER, "help")
    assert "`quiz [topic]`" in (await slack.api.wait_for("response"))[0].dump()


# ---------------------------------------------------------------------- challenge / close-now / post-now
async def test_challenge_command_without_a_challenge_creates_nothing(slack: Harness) -> None:
    await slack.send.command(PLAYER, "challenge")
    reply = (await slack.api.wait_for("response"))[0].dump()
    assert "no challenge in this channel today" in reply and "/rankzero quiz" in reply
    assert await _challenges(slack) == 0
    assert not slack.api.of("chat.postMessage")
    # Once posted, it shows that challenge with its Start button (and creates no second one).
    challenge_id = await slack.post_challenge()
    await slack.send.command(PLAYER, "challenge")
    shown = (await slack.api.wait_for("response", 3))[2].args
    assert f"rz:start:{challenge_id}" in json.dumps(shown)
    assert await _challenges(slack) == 1 and len(slack.api.of("chat.postMessage")) == 1


async def test_close_now_without_an_open_challenge_creates_nothing(slack: Harness) -> None:
    await slack.send.command(OWNER, "close-now")
    reply = (await slack.api.wait_for("response"))[0].dump()
    assert "no challenge to close" in reply
    assert await _challenges(slack) == 0
    assert not slack.api.of("chat.postMessage") and not slack.api.of("chat.update")

    challenge_id = await slack.post_challenge()
    await slack.send.command(OWNER, "close-now 999")
    assert "no challenge with id 999 in this channel" in (await slack.api.wait_for("response", 3))[2].dump()
    await slack.send.command(OWNER, f"close-now {challenge_id}")
    assert "Closed" in (await slack.api.wait_for("response", 4))[3].dump()
    await slack.api.wait_for("chat.update")
    await slack.send.command(OWNER, "close-now")
    again = (await slack.api.wait_for("response", 5))[4].dump()
    assert "no open challenge" in again and f"id {challenge_id}" in again
    await slack.send.command(OWNER, "close-now abc")
    assert "usage: /rankzero close-now" in (await slack.api.wait_for("response", 6))[5].dump()
    assert await _challenges(slack) == 1 and len(slack.api.of("chat.update")) == 1


async def test_post_now_uses_the_channel_schedule(slack: Harness) -> None:
    await slack.send.command(OWNER, "schedule set --time 09:30 --window 90 --problems 3 --attempts 1")
    await slack.api.wait_for("response")
    challenge_id = await slack.post_challenge()
    challenge = await slack.services.quiz.get_challenge(challenge_id)
    # Posted at 09:00, before the 09:30 slot: the day's window runs from the slot.
    closes = START + dt.timedelta(minutes=30 + 90)
    assert challenge.closes_at == closes
    assert len(challenge.problems) == 3
    post = slack.api.of("chat.postMessage")[0].dump()
    assert f"<!date^{int(closes.timestamp())}^" in post
    reply = (await slack.api.wait_for("response", 2))[1].dump()
    assert f"challenge {challenge_id}, closes <!date^" in reply


# ---------------------------------------------------------------------- concurrency
async def test_concurrent_clicks_on_the_last_attempt_store_one_answer(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    pid = int(buttons(view)[0].split(":")[2])
    await slack.click_in_view(PLAYER, f"rz:answer:{pid}:B", view_id)  # 1 attempt left
    updates = len(slack.api.of("views.update"))
    r1, r2 = await asyncio.gather(
        slack.send.click(PLAYER, f"rz:answer:{pid}:C", view_id=view_id, action_ts="1700000300.000001"),
        slack.send.click(PLAYER, f"rz:answer:{pid}:A", view_id=view_id, action_ts="1700000300.000002"),
    )
    assert r1.status_code == r2.status_code == 200
    await slack.api.wait_for("views.update", updates + 1)
    await asyncio.sleep(0.5)  # let the other click finish too
    stored = await _count(
        slack,
        select(func.count())
        .select_from(AttemptRow)
        .where(AttemptRow.idempotency_key.like(f"slack:{PLAYER}:%")),
    )
    assert stored == 2  # the wrong first answer and exactly one of the two concurrent ones
    card = await slack.services.quiz.view_problem(Actor(PAT), pid)
    assert card.over and card.attempts_left == 0
    # The loser either found the problem over ("already over") or lost the race on the attempt number
    # (then it is a duplicate and only the winner's update shows): never a third attempt or an error.
    shown = [text_of(c.args["view"]) for c in slack.api.of("views.update")[updates:]]
    assert 1 <= len(shown) <= 2 and all("Problem 1 of 5" in v for v in shown)
    assert any("*Answer: A*" in v for v in shown)


async def test_practice_modal_opens_before_the_user_lookup(slack: Harness) -> None:
    # The trigger_id lasts 3 s: views.open must not wait behind users.info (the actor's name and role).
    await _command_modal(slack, "U0FRESH", "review")
    methods = [c.method for c in slack.api.calls]
    assert "users.info" in methods, "a first command by this user looks the user up"
    assert methods.index("views.open") < methods.index("users.info")


# ---------------------------------------------------------------------- deck settings (issue 28)
async def test_review_new_and_timezone_set_the_players_deck_and_day(slack: Harness) -> None:
    practice = slack.services.app.practice
    _, view = await _command_modal(slack, PLAYER, "review new lots")
    assert "/rankzero review new N" in text_of(view)
    _, view = await _command_modal(slack, PLAYER, "review new 500")
    assert "0 to 200" in text_of(view)
    _, view = await _command_modal(slack, PLAYER, "review new 4")
    assert "*4* new cards a day" in text_of(view)
    _, view = await _command_modal(slack, PLAYER, "review timezone Europe/Pariss")
    assert "not an IANA timezone" in text_of(view) and "Europe/Paris" in text_of(view)
    _, view = await _command_modal(slack, PLAYER, "review timezone Europe/Paris")
    assert "*Europe/Paris*" in text_of(view)
    settings = await practice.day_settings(PAT)
    assert (settings.new_per_day, settings.timezone) == (4, "Europe/Paris")
    summary = await practice.start_review(PAT)
    assert summary.new_today == 4


async def test_review_timezone_alone_offers_the_zone_slack_has_for_the_user(slack: Harness) -> None:
    """Issue 28: Slack's users.info tells the user's zone (``tz``); ``review timezone`` offers it with a
    button, which sets it (validated as a typed zone); once it is set, it is no longer offered.
    """
    slack.api.users[PLAYER] = {"tz": "Asia/Kolkata", "tz_label": "India Standard Time", "tz_offset": 19800}
    view_id, view = await _command_modal(slack, PLAYER, "review timezone")
    shown = text_of(view)
    assert "You have not set a timezone" in shown and "Slack says your timezone is *Asia/Kolkata*" in shown
    offer = buttons(view)
    assert offer == [pb.action_id("tz", "Asia/Kolkata")]
    done = await slack.click_in_view(PLAYER, offer[0], view_id)
    assert "Your timezone is *Asia/Kolkata*" in text_of(done)
    assert (await slack.services.app.practice.day_settings(PAT)).timezone == "Asia/Kolkata"
    _, view = await _command_modal(slack, PLAYER, "review timezone")
    assert "Your timezone is *Asia/Kolkata*" in text_of(view) and not buttons(view)


async def test_review_timezone_offers_nothing_when_slack_does_not_say(slack: Harness) -> None:
    """Without users:read, users.info is ``missing_scope`` (as Slack answers): nothing is offered and
    nothing is stored; a zone Slack reports that is not an IANA name is not offered either.
    """
    slack.api.scopes.discard("users:read")
    _, view = await _command_modal(slack, PLAYER, "review timezone")
    assert "Slack did not share your timezone" in text_of(view) and not buttons(view)
    assert ("users.info", "missing_scope") in slack.api.refused
    slack.expected_refusals.extend(r for r in slack.api.refused if r == ("users.info", "missing_scope"))
    assert (await slack.services.app.practice.day_settings(PAT)).timezone is None
    slack.api.scopes.add("users:read")
    slack.api.users["U0ODD"] = {"tz": "Mars/Olympus_Mons <!channel>"}
    _, view = await _command_modal(slack, "U0ODD", "review timezone")
    assert "Slack did not share your timezone" in text_of(view) and not buttons(view)
    assert "<!channel>" not in text_of(view)


async def test_a_failed_explain_prompt_comes_back_marked_as_a_retry(slack: Harness) -> None:
    """Issue 28: after a failed answer the prompt is offered again (the basics topic has one prompt, so
    at once), saying so above the prompt; a passed one is not marked.
    """
    _, view = await _command_modal(slack, PLAYER, "explain basics")
    assert "did not pass" not in text_of(view)
    version = view["private_metadata"]
    r = await slack.send.submit(PLAYER, pb.EXPLAIN_CALLBACK, {"answer": "GPUs are fast."}, metadata=version)
    result = r.json()["view"]
    assert "Not passed yet" in text_of(result) and result["submit"]["text"] == "Try again"
    _, again = await _command_modal(slack, PLAYER, "explain basics")
    assert again["private_metadata"] == version
    assert ":repeat: Your last answer to this one did not pass" in text_of(again)
