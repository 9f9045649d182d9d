"""Practice in Discord (/quiz, /review, /explain, the /stats panel) and /challenge, /rankzero post-now,
through discord.py's real client against the local fake of the Discord REST API (tests/discord_fake.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from bot.adapters.discord import practice_render, sanitize
from bot.core.models import PlayerRef
from bot.core.schedule_service import NO_SCHEDULE_WINDOW
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, test_bank
from tests.discord_env import CHANNEL, Bot, BotOptions, close_bot, open_bot
from tests.discord_fake import (
    CHANNEL_ID,
    GUILD_ID,
    MANAGE_GUILD,
    FakeDiscord,
    no_unexpected_rejections,
)
from tests.fakes import FrozenClock


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every request the bot makes must be one Discord accepts (unless the test takes the refusal)."""
    yield
    no_unexpected_rejections(request)


ALICE = PlayerRef("discord", "111", "alice")
CHANNEL_POSTS = rf"/channels/{CHANNEL_ID}/messages"

CONCEPTS = [
    ("The batch is split across the GPUs", ["split", "scatter"]),
    ("The model is replicated on every GPU", ["replica", "copy"]),
    ("The GPUs run in parallel", ["in parallel", "simultaneously"]),
    ("Outputs are gathered on the main GPU", ["gather", "concatenate"]),
    ("Gradients are summed into the original model", ["gradient", "backward"]),
]


def _bank() -> list[dict[str, Any]]:
    """The test bank (18 multiple-choice questions, A is right), two recall cards, one explain prompt."""
    cards = [
        {
            "id": f"card-{i}",
            "kind": "flashcard",
            "topic": "DDP",
            # Beginner: the deck starts new cards beginner first, so the review shows these two first.
            "difficulty": "beginner",
            "front": f"Front {i}?",
            "back": f"Back {i}.",
            "explanation": f"Why {i}.",
        }
        for i in (1, 2)
    ]
    explain = {
        "id": "explain-dp",
        "kind": "explain",
        "topic": "DataParallel",
        "difficulty": "intermediate",
        "prompt": "Explain how `nn.DataParallel` trains one model on several GPUs.",
        "concepts": [{"name": name, "keywords": kws} for name, kws in CONCEPTS[:-1]]
        + [
            {
                "name": CONCEPTS[-1][0],
                "keywords": CONCEPTS[-1][1],
                # Bank text with markdown and a ping: the renderer must show it inert.
                "misconceptions": [
                    {
                        "claim": "gradients must be **synced** by hand @everyone",
                        "correction": "backward sums them",
                        "patterns": ["yourself|by hand + gradient"],
                    }
                ],
            }
        ],
        "model_answer": "It scatters the batch, replicates the model @everyone, gathers outputs.",
    }
    return [*test_bank(), *cards, explain]


OPTIONS = BotOptions(bank=_bank())


@pytest.fixture
def bot_options() -> BotOptions:
    """The test bank with two recall cards and an explain prompt."""
    return OPTIONS


def _embeds(message: dict[str, Any]) -> list[dict[str, Any]]:
    return list(message["embeds"])


def _field(embed: dict[str, Any], name: str) -> str:
    return str(next(f["value"] for f in embed["fields"] if f["name"].startswith(name)))


def _labels(message: dict[str, Any]) -> list[list[str]]:
    return [[c["label"] for c in row["components"]] for row in message.get("components") or []]


def _content(bot: Bot, token: str) -> str:
    return "\n".join(b.get("content") or "" for b in bot.followups(token))


# ---------------------------------------------------------------------- quiz
async def test_quiz_one_question_at_a_time_to_you_got_n_of_5(bot: Bot) -> None:
    token = bot.act.command(bot.client, "quiz")
    await bot.fake.wait_for(lambda: bot.edits(token))
    [ack] = bot.callbacks(token)
    assert ack["type"] == 5 and ack["data"]["flags"] == 64  # acknowledged first, ephemeral
    msg = bot.fake.originals[token]
    for n in range(1, 6):
        shown = bot.fake.messages[msg]
        [question] = _embeds(shown)
        assert question["title"].startswith(f"Quiz {n}/5")
        assert _labels(shown) == [["A", "B", "C", "D"]]
        assert all(cid.startswith("rz:practice:quiz:") for cid in bot.buttons(msg).values())
        letter = "A" if n <= 3 else "B"  # A is right in the test bank
        t = await bot.click(msg, letter)
        assert bot.callbacks(t)[0]["type"] == 6  # deferred update of the practice message
        feedback = _embeds(bot.fake.messages[msg])[0]
        right = min(n, 3)
        if letter == "A":
            assert feedback["title"] == f"✅ Correct! ({right}/{n} so far)"
        else:
            assert feedback["title"] == f"❌ Wrong: the answer was A ({right}/{n} so far)"
        assert feedback["description"].startswith("because ")  # the explanation, at once
        assert "↳ fb 0" in _field(feedback, "Choices")  # per-choice feedback
        if n < 5:
            assert _labels(bot.fake.messages[msg]) == [["Next"]]
            await bot.click(msg, "Next")
    done = bot.fake.messages[msg]
    assert [e["title"] for e in _embeds(done)][1] == "You got 3/5"
    assert done["components"] == []
    stats = await bot.practice.stats(ALICE)
    assert (stats.quizzes, stats.quiz_correct, stats.quiz_answers) == (1, 3, 5)
    assert (await bot.quiz.stats(ALICE)).points == 0  # practice is never ranked


async def test_quiz_on_an_unknown_topic_lists_the_topics(bot: Bot) -> None:
    msg = await bot.command("quiz", [{"type": 3, "name": "topic", "value": "<@123> Nope"}])
    content = bot.fake.messages[msg]["content"]
    assert content.startswith("⚠️") and "Available topics:" in content and "FSDP" in content
    assert "<@123>" not in content  # the echoed topic cannot ping


# ---------------------------------------------------------------------- review
async def test_review_reveal_then_grade_stores_the_due_date(bot: Bot) -> None:
    msg = await bot.command("review")
    shown = bot.fake.messages[msg]
    assert "10 cards due" in shown["content"], "the day's 10 new cards of the 21 in the deck"
    assert _embeds(shown)[0]["description"] == "Front 1?"
    assert _labels(shown) == [["Reveal answer"]]
    await bot.click(msg, "Reveal answer")
    back = bot.fake.messages[msg]
    assert _field(_embeds(back)[0], "Answer") == "Back 1."
    # Each grade button shows what it would schedule (FSRS with its default parameters, a new card).
    assert _labels(back) == [["Again · 1m", "Hard · 6m", "Good · 10m", "Easy · 8d"]]
    grade_id = bot.buttons(msg)["Good · 10m"]
    graded_components = back["components"]
    card_id = int(grade_id.split(":")[3])
    t = await bot.click(msg, "Good · 10m")
    after = bot.fake.messages[msg]
    assert after["content"].startswith("→ **good**: next review in 10m")
    assert _embeds(after)[0]["description"] == "Front 2?"  # the next due card
    due = bot.clock.now() + dt.timedelta(minutes=10)
    async with SqlUnitOfWork(session_factory(bot.engine)) as uow:
        row = await uow.practice.get_review_card(card_id)
    assert row is not None and row.state.due == due and row.state.phase == "learning"
    # The same grade button again (a double click: the client still shows the back): nothing changes.
    bot.fake.messages[msg]["components"] = graded_components
    again = bot.act.click(bot.client, msg, grade_id)
    await bot.fake.wait_for(lambda: bot.edits(again))
    assert "(already graded)" in bot.fake.messages[msg]["content"]
    async with SqlUnitOfWork(session_factory(bot.engine)) as uow:
        row = await uow.practice.get_review_card(card_id)
    assert row is not None and row.state.due == due and row.state.reps == 1
    assert len(bot.callbacks(t)) == 1


async def test_review_with_nothing_due_says_when_the_next_card_is(bot: Bot) -> None:
    await bot.practice.set_new_per_day(ALICE, 2)
    for _ in range(2):
        card = await bot.practice.next_card(ALICE) if await bot.practice.start_review(ALICE) else None
        assert card is not None
        await bot.practice.grade_card(ALICE, card.card_id, "easy", card.showing)
    msg = await bot.command("review")
    [embed] = _embeds(bot.fake.messages[msg])
    assert embed["title"] == "Nothing due right now"
    assert "Next card due <t:" in embed["description"]
    assert bot.fake.messages[msg]["components"] == []


# ---------------------------------------------------------------------- daily nudge
async def test_review_nudge_on_then_the_daily_nudge_is_a_dm_once_a_day(bot: Bot) -> None:
    msg = await bot.command("review", [{"name": "nudge", "type": 3, "value": "on"}])
    assert "Daily reminder **on**" in bot.fake.messages[msg]["content"]
    assert await bot.practice.nudge_enabled(ALICE) is True
    bob = PlayerRef("discord", "222", "bob")
    for who in (ALICE, bob):
        await bot.practice.start_review(who)
    await bot.practice.set_nudge(bob, True)
    bot.fake.dms_closed.add(222)  # Bob's privacy settings refuse DMs from the bot
    report = await bot.practice.send_nudges(bot.adapter.platform)
    assert [p.user_id for p in report.sent] == ["111"] and [p.user_id for p in report.failed] == ["222"]
    [opened, *_] = bot.fake.calls("POST", "/users/@me/channels")
    assert opened.body == {"recipient_id": 111}
    dm = next(c for c, u in bot.fake.dm_channels.items() if u == 111)
    [sent] = [m for m in bot.fake.messages.values() if m["channel_id"] == str(dm)]
    assert sent["content"].startswith("🔔 **10 flashcards due**") and "/review nudge:off" in sent["content"]
    bob_dm = next(c for c, u in bot.fake.dm_channels.items() if u == 222)
    refused = {"message": "Cannot send messages to this user", "code": 50007}
    assert bot.fake.take_rejections() == [(403, "POST", f"/channels/{bob_dm}/messages", refused)]
    # The same day again: nothing more for Alice; Bob's undelivered nudge is tried again (and refused).
    again = await bot.practice.send_nudges(bot.adapter.platform)
    assert again.sent == () and [p.user_id for p in again.failed] == ["222"]
    assert [r[3]["code"] for r in bot.fake.take_rejections()] == [50007]
    off = await bot.command("review", [{"name": "nudge", "type": 3, "value": "off"}])
    assert bot.fake.messages[off]["content"] == "Daily reminder **off**."


# ---------------------------------------------------------------------- explain
async def test_explain_answered_through_the_modal(bot: Bot) -> None:
    msg = await bot.command("explain")
    [prompt] = _embeds(bot.fake.messages[msg])
    assert "nn.DataParallel" in prompt["description"] and "5 concepts" in _field(prompt, "How it is graded")
    token = bot.act.click(bot.client, msg, bot.buttons(msg)["Answer"])
    await bot.fake.wait_for(lambda: bot.callbacks(token))
    [modal] = bot.callbacks(token)
    assert modal["type"] == 9  # the form is the acknowledgement
    [row] = modal["data"]["components"]
    field = row["components"][0]
    assert field["style"] == 2  # a paragraph
    # Only blanks: refused with a clear message, the prompt and its Answer button stay.
    blank = bot.act.submit_modal(
        bot.client, modal["data"]["custom_id"], {field["custom_id"]: "   "}, message_id=msg
    )
    await bot.fake.wait_for(lambda: bot.followups(blank))
    assert "your answer is empty" in _content(bot, blank)
    assert _labels(bot.fake.messages[msg]) == [["Answer"]]

    token = bot.act.click(bot.client, msg, bot.buttons(msg)["Answer"])
    await bot.fake.wait_for(lambda: bot.callbacks(token))
    modal = bot.callbacks(token)[0]
    field_id = modal["data"]["components"][0]["components"][0]["custom_id"]
    answer = "Each GPU gets a copy of the model, the batch is split, and the outputs are gathered."
    sub = bot.act.submit_modal(bot.client, modal["data"]["custom_id"], {field_id: answer}, message_id=msg)
    await bot.fake.wait_for(lambda: bot.edits(sub))
    assert bot.callbacks(sub)[0]["type"] == 6  # acknowledged first (deferred update)
    graded = bot.fake.messages[msg]
    shown_prompt, result = _embeds(graded)
    assert "nn.DataParallel" in shown_prompt["description"]  # the prompt stays above the grade
    assert result["title"] == "You got 3/5 concepts"
    assert "split" in _field(result, "Covered")
    missed = _field(result, "Missed")
    assert "The GPUs run in parallel" in missed and "Gradients are summed" in missed
    assert (
        result["description"].startswith("**Model answer**")
        and "replicates the model" in result["description"]
    )
    assert "@everyone" not in result["description"]  # echoed bank text cannot ping
    assert graded["components"] == []
    assert graded.get("allowed_mentions", {"parse": []}) == {"parse": []}
    assert (await bot.practice.stats(ALICE)).explain_attempts == 1


async def test_explain_names_the_misconception_back_escaped(bot: Bot) -> None:
    msg = await bot.command("explain")
    token = bot.act.click(bot.client, msg, bot.buttons(msg)["Answer"])
    await bot.fake.wait_for(lambda: bot.callbacks(token))
    modal = bot.callbacks(token)[0]
    field_id = modal["data"]["components"][0]["components"][0]["custom_id"]
    answer = "The batch is split and each GPU has a copy; you sync the gradients yourself after backward."
    sub = bot.act.submit_modal(bot.client, modal["data"]["custom_id"], {field_id: answer}, message_id=msg)
    await bot.fake.wait_for(lambda: bot.edits(sub))
    _, result = _embeds(bot.fake.messages[msg])
    assert result["title"] == "You got 2/5 concepts"
    wrong = _field(result, "Misconception")
    assert wrong.startswith("⚠️ You wrote that gradients must be \\*\\*synced\\*\\* by hand")
    assert wrong.endswith(": backward sums them") and "@everyone" not in wrong
    assert "Gradients are summed into the original model" in _field(result, "Missed")


# ---------------------------------------------------------------------- /stats
async def test_stats_shows_the_practice_panel_apart(bot: Bot) -> None:
    card = await bot.practice.start_quiz(ALICE)
    for position in range(1, card.total + 1):
        await bot.practice.answer_quiz(ALICE, card.quiz_id, position, "A")
    token = bot.act.command(bot.client, "stats")
    await bot.fake.wait_for(lambda: bot.followups(token))
    [body] = bot.followups(token)
    competitive, practice = body["embeds"]
    assert competitive["title"] == "Stats · alice" and competitive["description"].startswith("0 points")
    assert practice["title"] == "Practice · alice (not ranked)"
    assert _field(practice, "Quizzes") == "1 finished · 5/5 correct (100%)"
    assert _field(practice, "Explain").startswith("0 answers")
    assert body["allowed_mentions"] == {"parse": []}


# ---------------------------------------------------------------------- /challenge and post-now
async def test_challenge_with_none_today_refuses_politely_and_creates_nothing(bot: Bot) -> None:
    token = bot.act.command(bot.client, "challenge")
    await bot.fake.wait_for(lambda: bot.followups(token))
    text = _content(bot, token)
    assert "There is no challenge in this channel yet today" in text and "/quiz" in text
    assert "no daily schedule" in text
    assert await bot.challenges() == 0
    assert bot.fake.calls("POST", CHANNEL_POSTS) == []  # nothing posted in the channel
    await bot.schedules.set_schedule(ADMIN, CHANNEL, post_time="17:00", timezone="UTC")
    token = bot.act.command(bot.client, "challenge")
    await bot.fake.wait_for(lambda: bot.followups(token))
    at = int(bot.clock.now().replace(hour=17).timestamp())
    assert f"The next one is scheduled <t:{at}:R>" in _content(bot, token)
    assert await bot.challenges() == 0 and bot.fake.calls("POST", CHANNEL_POSTS) == []


async def test_challenge_shows_todays_posted_challenge(bot: Bot) -> None:
    card = await bot.quiz.post_daily(CHANNEL, closes_at=bot.clock.now() + dt.timedelta(hours=8))
    token = bot.act.command(bot.client, "challenge")
    await bot.fake.wait_for(lambda: bot.followups(token))
    [body] = bot.followups(token)
    assert body["embeds"][0]["footer"]["text"].startswith(f"Challenge #{card.challenge_id}")
    assert body["components"][0]["components"][0]["custom_id"] == f"rz:start:{card.challenge_id}"
    assert await bot.challenges() == 1


async def test_post_now_uses_the_channels_schedule(bot: Bot) -> None:
    await bot.schedules.set_schedule(
        ADMIN, CHANNEL, post_time="17:00", timezone="UTC", window="2h", problems=3, attempts=1
    )
    token = bot.act.command(bot.client, "rankzero post-now", permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.followups(token))
    # The day's window runs from the 17:00 slot when posted before it, else from now.
    now = bot.clock.now()
    slot = dt.datetime.combine(now.date(), dt.time(17, 0), tzinfo=dt.UTC)
    closes = max(now, slot) + dt.timedelta(hours=2)
    assert f"It closes <t:{int(closes.timestamp())}:R>" in _content(bot, token)
    [post] = bot.fake.calls("POST", CHANNEL_POSTS)
    assert post.body["embeds"][0]["description"].count("\n**") == 2  # the schedule's 3 problems
    challenge_id = int(post.body["components"][0]["components"][0]["custom_id"].split(":")[2])
    challenge = await bot.quiz.get_challenge(challenge_id)
    assert challenge.closes_at == closes and len(challenge.problems) == 3
    assert [w[0] for w in await bot.schedules.open_windows()] == [challenge_id]  # the scheduler closes it


async def test_post_now_without_a_schedule_gets_a_days_window(bot: Bot) -> None:
    token = bot.act.command(bot.client, "rankzero post-now", permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.followups(token))
    closes = bot.clock.now() + NO_SCHEDULE_WINDOW
    assert f"It closes <t:{int(closes.timestamp())}:R>" in _content(bot, token)
    assert await bot.challenges() == 1
    [window] = await bot.schedules.open_windows()  # the scheduler closes it at its end
    assert window.closes_at == closes


# ---------------------------------------------------------------------- persistence, sync, limits
async def test_practice_buttons_survive_a_restart(fake: FakeDiscord, db: str, clock: FrozenClock) -> None:
    first = await open_bot(fake, db, clock, OPTIONS)
    msg = await first.command("quiz")
    await close_bot(first)
    # A new process: a client that never sent this message; only the custom_id routes the click.
    second = await open_bot(fake, db, clock, OPTIONS.but(bank=None))
    second.act = first.act  # one interaction counter: tokens stay unique across both processes
    try:
        assert second.client._connection._view_store.persistent_views == []
        await second.click(msg, "A")
        assert _embeds(fake.messages[msg])[0]["title"].startswith("✅ Correct! (1/1 so far)")
        await second.click(msg, "Next")
        assert _embeds(fake.messages[msg])[0]["title"].startswith("Quiz 2/5")
    finally:
        await close_bot(second)


async def test_practice_commands_are_synced(bot: Bot) -> None:
    bot.adapter.guild_id = GUILD_ID
    await bot.adapter.sync_commands()
    [put] = bot.fake.calls("PUT", rf"/applications/\d+/guilds/{GUILD_ID}/commands")
    names = {c["name"]: c for c in put.body}
    assert {"quiz", "review", "explain", "challenge", "stats"} <= set(names)
    assert [o["name"] for o in names["quiz"]["options"]] == ["topic"]


def test_practice_messages_fit_discords_limits() -> None:
    from bot.core.models import Choice
    from bot.core.practice_models import QuizFeedback, QuizItemResult, QuizQuestionCard, QuizResultCard

    card = QuizQuestionCard(
        1,
        1,
        5,
        "q",
        "DDP",
        "expert",
        "p" * 5000,
        "c" * 3000,
        tuple((letter, "x" * 900) for letter in "ABCDEFGHIJ"),
    )
    rows = [
        [c["label"] for c in row["components"]]
        for row in practice_render.quiz_question_view(card).to_components()
    ]
    assert rows == [list("ABCDE"), list("FGHIJ")]
    assert len(practice_render.quiz_question_embed(card)) <= sanitize.EMBED_TOTAL
    choices = tuple(Choice(letter, "y" * 900, letter == "A", "f" * 500) for letter in "ABCD")
    fb = QuizFeedback(1, 5, 5, "B", False, "A", choices, "e" * 5000, 4, 5, True)
    result = QuizResultCard(
        1, "t" * 300, 4, 5, tuple(QuizItemResult(i, "q", "x" * 300, "A", True) for i in range(5))
    )
    embeds = practice_render.fit_message(
        [practice_render.quiz_feedback_embed(fb), practice_render.quiz_result_embed(result)]
    )
    assert sum(len(e) for e in embeds) <= sanitize.EMBED_TOTAL
    assert all(len(f.value or "") <= sanitize.FIELD_VALUE for e in embeds for f in e.fields)
    assert sanitize.MARKER in (embeds[0].description or "")


async def test_a_practice_button_that_fails_still_answers(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    token = bot.act.command(bot.client, "quiz")
    await bot.fake.wait_for(lambda: bot.edits(token))
    msg = bot.fake.originals[token]

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("practice database gone")

    monkeypatch.setattr(bot.practice, "answer_quiz", broken)
    t = await bot.click(msg, "A")
    said = _content(bot, t)
    assert "Something went wrong on my side" in said and "practice database gone" not in said


# ---------------------------------------------------------------------- deck settings (issue 28)
async def test_review_sets_new_cards_per_day_and_the_timezone(bot: Bot) -> None:
    msg = await bot.command(
        "review",
        [
            {"name": "new_per_day", "type": 4, "value": 3},
            {"name": "timezone", "type": 3, "value": "asia/tokyo"},
        ],
    )
    content = bot.fake.messages[msg]["content"]
    assert "**3** new cards a day" in content and "**Asia/Tokyo**" in content
    settings = await bot.practice.day_settings(ALICE)
    assert (settings.new_per_day, settings.timezone) == (3, "Asia/Tokyo")
    bad = await bot.command("review", [{"name": "timezone", "type": 3, "value": "Asia/Tokio"}])
    assert "not an IANA timezone" in bot.fake.messages[bad]["content"]
    assert "Asia/Tokyo" in bot.fake.messages[bad]["content"], "the closest name is offered"
    assert (await bot.practice.day_settings(ALICE)).timezone == "Asia/Tokyo", "a bad name changes nothing"


async def test_review_timezone_suggests_iana_names_and_says_discord_does_not_share_zones(bot: Bot) -> None:
    """Issue 28: Discord tells bots a user's locale, never their timezone, so ``/review timezone:``
    suggests IANA names as the player types (25 at most, Discord's limit) and the reply says so.
    """
    bot.adapter.guild_id = GUILD_ID
    await bot.adapter.sync_commands()  # the fake now asks only about options declared autocomplete
    [put] = bot.fake.calls("PUT", rf"/applications/\d+/guilds/{GUILD_ID}/commands")
    review = next(c for c in put.body if c["name"] == "review")
    assert next(o for o in review["options"] if o["name"] == "timezone").get("autocomplete") is True
    ask = bot.act.autocomplete(bot.client, "review", "timezone", "kolk")
    await bot.fake.wait_for(lambda: ask in bot.fake.suggestions)
    assert bot.fake.suggestions[ask] == [{"name": "Asia/Kolkata", "value": "Asia/Kolkata"}]
    ask = bot.act.autocomplete(bot.client, "review", "timezone", "Europe/")
    await bot.fake.wait_for(lambda: ask in bot.fake.suggestions)
    names = [c["value"] for c in bot.fake.suggestions[ask]]
    assert len(names) == 25 and all(n.startswith("Europe/") for n in names)
    ask = bot.act.autocomplete(bot.client, "review", "timezone", "<@&1> nowhere")
    await bot.fake.wait_for(lambda: ask in bot.fake.suggestions)
    assert bot.fake.suggestions[ask] == []
    with pytest.raises(ValueError, match="not an autocomplete option"):
        bot.act.autocomplete(bot.client, "quiz", "topic", "DD")
    msg = await bot.command("review", [{"name": "timezone", "type": 3, "value": "Asia/Kolkata"}])
    content = bot.fake.messages[msg]["content"]
    assert "**Asia/Kolkata**" in content and "Discord does not share your timezone" in content
    assert (await bot.practice.day_settings(ALICE)).timezone == "Asia/Kolkata"


async def test_a_failed_explain_prompt_comes_back_marked_as_a_retry(bot: Bot) -> None:
    """Issue 28: the prompt a player failed is offered again with a note saying so, and the result of a
    failed answer keeps its Try again button.
    """
    msg = await bot.command("explain")
    [prompt] = _embeds(bot.fake.messages[msg])
    assert not any(f["name"].startswith("🔁") for f in prompt["fields"])
    token = bot.act.click(bot.client, msg, bot.buttons(msg)["Answer"])
    await bot.fake.wait_for(lambda: bot.callbacks(token))
    modal = bot.callbacks(token)[0]
    field_id = modal["data"]["components"][0]["components"][0]["custom_id"]
    sub = bot.act.submit_modal(
        bot.client, modal["data"]["custom_id"], {field_id: "GPUs are fast."}, message_id=msg
    )
    await bot.fake.wait_for(lambda: bot.edits(sub))
    assert _labels(bot.fake.messages[msg]) == [["Try again"]]
    again = await bot.command("explain")
    [shown] = _embeds(bot.fake.messages[again])
    assert "Your last answer to this one did not pass" in _field(shown, "🔁 Again")
    assert _labels(bot.fake.messages[again]) == [["Answer"]]
