"""The dispute variant form and the explanation form never lose what a player typed (issue 25).

Both forms used to be discord.py Modal objects kept in memory with a View timeout (15 and 30 minutes): a
submission after that, or after a restart, found nothing and the typing was dropped. Now their custom ids
carry their context (``rz:variant:<problem id>``, ``rz:explain:<version id>``), no View is kept, and the
client's ``on_interaction`` routes every submission through one table (bot/adapters/discord/submissions.py).

Through discord.py's real client against the strict fake of the Discord REST API (tests/discord_fake.py;
``submit_modal`` sends only what Discord's client would, for modals the bot opened; ``forge_modal`` is a
hostile client), with the real services on a migrated database; time is the injected clock, never slept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import select

from bot.adapters.discord import submissions
from bot.adapters.discord.disputes import VARIANT_INPUT
from bot.adapters.discord.practice import ANSWER_INPUT, ANSWER_MAX
from bot.core.errors import RunnerUnavailableError
from bot.core.models import Actor, PlayerRef, Tenant
from bot.storage.models import QuestionVersionRow
from tests.bot.adapters.discord import test_discord_disputes as td
from tests.bot.adapters.discord import test_discord_practice as tp
from tests.discord_env import Bot, close_bot, open_bot
from tests.discord_fake import GUILD_ID, FakeDiscord, no_unexpected_rejections
from tests.fakes import FrozenClock

OTHER_GUILD = GUILD_ID + 7
#: A variant of the hang question's code (the runner is scripted: what it prints is the hang verdict).
VARIANT = "import os\nprint(os.environ.get('WORLD_SIZE'))\n"
ANSWER = "Each GPU gets a copy of the model, the batch is split, and the outputs are gathered."


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every request the bot makes must be one Discord accepts."""
    yield
    no_unexpected_rejections(request)


def _held_modals(client: Any) -> dict[str, Any]:
    """The modals discord.py keeps in memory to route their submissions to (its View store)."""
    return dict(client._connection._view_store._modals)


async def _first_response(fake: FakeDiscord, callbacks: Any, token: str) -> dict[str, Any]:
    await fake.wait_for(lambda: callbacks(token))
    return dict(callbacks(token)[0])


# ---------------------------------------------------------------------- the variant form
@pytest.fixture
async def disputes(fake: FakeDiscord, db: str, clock: FrozenClock) -> AsyncIterator[Bot]:
    bot = await open_bot(fake, db, clock, td.OPTIONS.but(runner=td.ScriptedRunner(td.hang_verdict)))
    yield bot
    await close_bot(bot)


async def _open_variant(bot: Bot, problem: int | str) -> dict[str, Any]:
    """``/dispute problem:<problem> variant:True`` as alice; the first response (the form, or a refusal)."""
    kind = 4 if isinstance(problem, int) else 3
    opts = [
        {"type": kind, "name": "problem", "value": problem},
        {"type": 5, "name": "variant", "value": True},
    ]
    token = bot.act.command(bot.client, "dispute", opts)
    return await _first_response(bot.fake, bot.callbacks, token)


async def _texts(bot: Bot, token: str, at_least: int = 1) -> list[str]:
    """The private follow-ups sent for ``token`` (waits for ``at_least`` of them)."""
    await bot.fake.wait_for(lambda: len(bot.followups(token)) >= at_least)
    return [str(f.get("content") or "") for f in bot.followups(token)]


async def test_the_variant_form_names_its_problem_and_keeps_no_view(disputes: Bot) -> None:
    problem = await td._answered_hang_problem(disputes)
    response = await _open_variant(disputes, problem)
    assert response["type"] == 9
    form = response["data"]
    assert form["custom_id"] == f"rz:variant:{problem}" and len(form["custom_id"]) <= 100
    assert len(form["title"]) <= 45
    [[field]] = [row["components"] for row in form["components"]]
    assert field["custom_id"] == VARIANT_INPUT and field["style"] == 2
    # Nothing in memory waits for it: there is no timeout to run out, nothing a restart loses.
    assert form["custom_id"] not in _held_modals(disputes.client)


async def test_a_variant_submitted_after_the_forms_900_s_is_run(
    disputes: Bot, clock: FrozenClock, fake: FakeDiscord
) -> None:
    problem = await td._answered_hang_problem(disputes)
    form = (await _open_variant(disputes, problem))["data"]
    clock.advance(30 * 60)  # past the old 900 s View timeout, and the command token's 15 minutes
    fake.advance(30 * 60)
    token = disputes.act.submit_modal(disputes.client, form["custom_id"], {VARIANT_INPUT: VARIANT})
    await disputes.reply(token)
    assert [s.code for s in td.scripted(disputes).specs] == [VARIANT]
    [thread] = fake.threads
    [posted] = fake.calls("POST", rf"/channels/{thread}/messages")
    assert "your variant" in posted.body["embeds"][0]["title"]


async def test_a_variant_submitted_after_a_restart_is_run(
    disputes: Bot, fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    problem = await td._answered_hang_problem(disputes)
    form = (await _open_variant(disputes, problem))["data"]
    await disputes.adapter.stop()  # the process that opened the form is gone
    fresh = await open_bot(
        fake, db, clock, td.OPTIONS.but(runner=td.ScriptedRunner(td.hang_verdict)), disputes.act
    )
    try:
        token = fresh.act.submit_modal(fresh.client, form["custom_id"], {VARIANT_INPUT: VARIANT})
        assert "The runner's verdict is in" in (await fresh.reply(token))["content"]
        assert [s.code for s in td.scripted(fresh).specs] == [VARIANT]
    finally:
        await close_bot(fresh)


async def test_a_variant_is_refused_before_typing_when_it_could_not_run(disputes: Bot) -> None:
    problem = await td._answered_hang_problem(disputes)
    refused: list[tuple[int | str, str]] = [
        (problem + 1000, f"no problem with id {problem + 1000}"),
        ("today:9", "problems 1 to 1, not 9"),
    ]
    for reference, why in refused:
        response = await _open_variant(disputes, reference)
        assert response["type"] == 4 and response["data"]["flags"] == 64, response  # private, no form
        assert why in response["data"]["content"], response
    assert td.scripted(disputes).specs == []


async def test_a_variant_of_another_server_or_player_is_refused_and_given_back(disputes: Bot) -> None:
    problem = await td._answered_hang_problem(disputes)
    form = (await _open_variant(disputes, problem))["data"]
    # The same form submitted from another server: its problem is not that server's.
    elsewhere = disputes.act.submit_modal(
        disputes.client, form["custom_id"], {VARIANT_INPUT: VARIANT}, guild_id=OTHER_GUILD
    )
    said = await _texts(disputes, elsewhere, 3)
    assert f"no problem with id {problem}" in said[0]
    assert "not lost" in said[1] and f"/dispute problem:{problem} variant:True" in said[1]
    assert said[2] == f"```py\n{VARIANT.rstrip()}\n```"
    # Bob submits Alice's form: it runs as Bob, for whom the problem is not over.
    bob = disputes.act.submit_modal(disputes.client, form["custom_id"], {VARIANT_INPUT: VARIANT}, user_id=222)
    assert "once it is over for you" in (await _texts(disputes, bob, 3))[0]
    assert td.scripted(disputes).specs == []


async def test_a_variant_the_runner_could_not_run_is_given_back_whole(disputes: Bot) -> None:
    problem = await td._answered_hang_problem(disputes)
    form = (await _open_variant(disputes, problem))["data"]
    td.scripted(disputes).error = RunnerUnavailableError("the runner is unreachable")
    # A long variant with a code fence inside: given back in several messages, the fence made inert.
    long = "".join(f"print({i}, '```')  # line {i}\n" for i in range(130))
    assert 3000 < len(long) <= 4000
    token = disputes.act.submit_modal(disputes.client, form["custom_id"], {VARIANT_INPUT: long})
    said = await _texts(disputes, token, 4)
    assert "the runner is unreachable" in said[0] and "not lost" in said[1]
    blocks = said[2:]
    assert all(len(b) <= 2000 and b.startswith("```py\n") and b.endswith("\n```") for b in blocks)
    given = "\n".join(b.removeprefix("```py\n").removesuffix("\n```") for b in blocks)
    assert given.replace("`\u200b`\u200b`", "```") == long.rstrip("\n")
    # The run did not count: with the runner back, the same form runs (the code kept, pasted again).
    td.scripted(disputes).error = None
    again = disputes.act.submit_modal(disputes.client, form["custom_id"], {VARIANT_INPUT: long})
    assert "The runner's verdict is in" in (await disputes.reply(again))["content"]


# ---------------------------------------------------------------------- the explanation form
@pytest.fixture
async def practice(fake: FakeDiscord, db: str, clock: FrozenClock) -> AsyncIterator[Bot]:
    bot = await open_bot(fake, db, clock, tp.OPTIONS)
    yield bot
    await close_bot(bot)


async def _open_explain(bot: Bot) -> tuple[int, dict[str, Any]]:
    """``/explain`` then Answer as alice: the prompt's message id and the form."""
    msg = await bot.command("explain")
    token = bot.act.click(bot.client, msg, bot.buttons(msg)["Answer"])
    response = await _first_response(bot.fake, bot.callbacks, token)
    assert response["type"] == 9, response
    return msg, dict(response["data"])


def _version(form: dict[str, Any]) -> int:
    return int(form["custom_id"].removeprefix("rz:explain:"))


async def test_the_explanation_form_names_its_prompt_and_keeps_no_view(practice: Bot) -> None:
    msg, form = await _open_explain(practice)
    button = practice.buttons(msg)["Answer"]
    assert form["custom_id"] == f"rz:explain:{button.rsplit(':', 1)[1]}" and len(form["custom_id"]) <= 100
    assert len(form["title"]) <= 45
    [[field]] = [row["components"] for row in form["components"]]
    assert field["custom_id"] == ANSWER_INPUT and field["max_length"] == ANSWER_MAX
    assert form["custom_id"] not in _held_modals(practice.client)


async def test_an_explanation_submitted_after_30_minutes_is_graded_and_stored(
    practice: Bot, clock: FrozenClock, fake: FakeDiscord
) -> None:
    msg, form = await _open_explain(practice)
    clock.advance(31 * 60)  # past the old 1800 s View timeout
    fake.advance(31 * 60)
    token = practice.act.submit_modal(
        practice.client, form["custom_id"], {ANSWER_INPUT: ANSWER}, message_id=msg
    )
    await fake.wait_for(lambda: practice.edits(token))
    assert tp._embeds(fake.messages[msg])[1]["title"] == "You got 3/5 concepts"
    assert (await practice.practice.stats(tp.ALICE)).explain_attempts == 1


async def test_an_explanation_submitted_after_a_restart_is_graded_and_stored(
    practice: Bot, fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    msg, form = await _open_explain(practice)
    await practice.adapter.stop()
    fresh = await open_bot(fake, db, clock, tp.OPTIONS.but(bank=None), practice.act)
    try:
        token = fresh.act.submit_modal(
            fresh.client, form["custom_id"], {ANSWER_INPUT: ANSWER}, message_id=msg
        )
        await fake.wait_for(lambda: fresh.edits(token))
        assert tp._embeds(fake.messages[msg])[1]["title"] == "You got 3/5 concepts"
        assert (await fresh.practice.stats(tp.ALICE)).explain_attempts == 1
    finally:
        await close_bot(fresh)


async def test_another_servers_prompt_is_refused(practice: Bot) -> None:
    theirs = Actor(
        PlayerRef("discord", "9", "boss"), is_admin=True, tenant=Tenant("discord", str(OTHER_GUILD))
    )
    spec = {
        "id": "explain-theirs",
        "kind": "explain",
        "topic": "DDP",
        "difficulty": "intermediate",
        "prompt": "Explain what DDP all-reduces.",
        "concepts": [{"name": "Gradients are averaged", "keywords": ["gradient"]}],
        "model_answer": "The gradients, averaged in backward.",
    }
    await practice.quiz.admin_import(theirs, [spec])
    async with practice.engine.connect() as conn:
        version = (
            await conn.execute(
                select(QuestionVersionRow.id).where(QuestionVersionRow.question_id == spec["id"])
            )
        ).scalar_one()
    custom_id = f"rz:explain:{version}"
    answer = {ANSWER_INPUT: "The gradients are all-reduced."}
    here = practice.act.forge_modal(practice.client, custom_id, answer)
    said = await _texts(practice, here, 3)
    assert f"no explain prompt with version id {version}" in said[0]
    assert (await practice.practice.stats(tp.ALICE)).explain_attempts == 0
    # The control: from its own server the same form is graded (the refusal is the server's, not the id's).
    there = practice.act.forge_modal(practice.client, custom_id, answer, guild_id=OTHER_GUILD)
    await practice.fake.wait_for(lambda: practice.edits(there))
    assert practice.callbacks(there)[0]["data"]["flags"] == 64  # no prompt message: a private answer
    assert practice.edits(there)[0]["embeds"][0]["title"] == "You got 1/1 concepts"
    assert (await practice.practice.stats(tp.ALICE)).explain_attempts == 1


async def test_an_explanation_that_could_not_be_graded_is_given_back_and_prefilled(
    practice: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    msg, form = await _open_explain(practice)
    real = practice.practice.submit_explanation

    async def database_down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(practice.practice, "submit_explanation", database_down)
    long = "\n".join(f"Point {i}: the batch is split and the model replicated. ```" for i in range(60))
    assert 3000 < len(long) <= ANSWER_MAX
    token = practice.act.submit_modal(
        practice.client, form["custom_id"], {ANSWER_INPUT: long}, message_id=msg
    )
    said = await _texts(practice, token, 4)
    assert "Something went wrong" in said[0] and "not lost" in said[1] and "**Answer**" in said[1]
    blocks = said[2:]
    assert all(len(b) <= 2000 and b.startswith("```\n") and b.endswith("\n```") for b in blocks)
    given = "\n".join(b.removeprefix("```\n").removesuffix("\n```") for b in blocks)
    assert given.replace("`\u200b`\u200b`", "```") == long
    assert tp._labels(practice.fake.messages[msg]) == [["Answer"]]  # the prompt stays
    # Answer reopens the form with the answer filled in; submitted as it is, it is graded.
    monkeypatch.setattr(practice.practice, "submit_explanation", real)
    again = practice.act.click(practice.client, msg, practice.buttons(msg)["Answer"])
    reopened = (await _first_response(practice.fake, practice.callbacks, again))["data"]
    assert reopened["custom_id"] == form["custom_id"]
    assert reopened["components"][0]["components"][0]["value"] == long
    graded = practice.act.submit_modal(practice.client, reopened["custom_id"], {}, message_id=msg)
    await practice.fake.wait_for(lambda: practice.edits(graded))
    assert (await practice.practice.stats(tp.ALICE)).explain_attempts == 1


# ---------------------------------------------------------------------- forged ids
@pytest.mark.parametrize(
    "custom_id",
    [
        "rz:explain:" + "1" * 200,  # over Discord's 100 characters
        "rz:explain:" + "9" * 11,  # more digits than any id
        "rz:explain:2147483648",  # past an INTEGER key (PostgreSQL would refuse the query)
        "rz:variant:2147483648",
        "rz:explain:0",
        "rz:explain:-1",
        "rz:explain:1/../2",
        "rz:explain:１２",  # full-width digits: int() would take them, the pattern does not
        "rz:variant:abc",
        "rz:variant:",
        "rz:qform:",
        "rz:nope:1",
        "not-ours",
        "",
    ],
)
async def test_a_forged_form_id_is_refused_clearly(practice: Bot, custom_id: str) -> None:
    assert submissions.parse_custom_id(custom_id) is None
    token = practice.act.forge_modal(practice.client, custom_id, {ANSWER_INPUT: ANSWER, VARIANT_INPUT: "x"})
    response = await _first_response(practice.fake, practice.callbacks, token)
    assert response["type"] == 4 and response["data"]["flags"] == 64  # private
    assert response["data"]["content"] == submissions.FORGED
    assert (await practice.practice.stats(tp.ALICE)).explain_attempts == 0


async def test_an_unknown_prompt_or_problem_id_is_refused_by_its_handler(practice: Bot) -> None:
    for version in (987654, submissions.MAX_ROW_ID):  # well-formed, within an INTEGER key: no such prompt
        prompt = practice.act.forge_modal(practice.client, f"rz:explain:{version}", {ANSWER_INPUT: ANSWER})
        assert f"no explain prompt with version id {version}" in (await _texts(practice, prompt))[0]
    # No such problem: the variant is refused by the dispute service, and given back.
    variant = practice.act.forge_modal(practice.client, "rz:variant:987654", {VARIANT_INPUT: VARIANT})
    said = await _texts(practice, variant, 3)
    assert "no problem with id 987654" in said[0] and VARIANT.rstrip() in said[2]
    empty = practice.act.forge_modal(practice.client, "rz:variant:987654", {})
    assert "your variant is empty" in (await _texts(practice, empty))[0]
