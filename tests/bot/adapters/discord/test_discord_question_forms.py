"""The "Add a question" form on Discord never loses what an admin typed (issue 25 section 5).

Through discord.py's real client against the strict fake of the Discord REST API (tests/discord_fake.py),
with the real services on a migrated SQLite database and the SQL draft repositories, as ``rankzero
serve`` wires them: a submission after the form's 15 minutes or after a restart is still imported; a refused
one keeps the text and offers Edit again, filled in; ``/question restore`` reopens the admin's own latest
form of this server for 24 hours (time driven by the injected clock); the runner preview's Save works after
a restart. The repository and the migration are tested on SQLite and PostgreSQL in
tests/test_form_drafts.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from bot.adapters.discord.question_form import FIELD_PREFIX, FORM_PREFIX
from bot.core.models import ChannelRef
from bot.core.verdicts import Hardware, RankOutcome, RunnerHealth, RunSpec, RunVerdict
from tests import discord_env as env
from tests.discord_fake import (
    CHANNEL_ID,
    GUILD_ID,
    MANAGE_GUILD,
    FakeDiscord,
    Interactions,
    no_unexpected_rejections,
)
from tests.fakes import FrozenClock

CHANNEL = ChannelRef("discord", str(GUILD_ID), str(CHANNEL_ID), "general")
OTHER_GUILD = GUILD_ID + 7
CPU = Hardware(0, (), "2.13.0+cpu", None)
#: The five fields of a valid conceptual question, by field name.
GOOD = {
    "prompt": "What does DDP all-reduce in backward?",
    "code": "model = DDP(model)",
    "choices": "gradients\nweights\nactivations",
    "correct": "a",
    "notes": "think backward\n---\nDDP averages gradients during backward.",
}
ALL_REDUCE = (
    "import torch\nimport torch.distributed as dist\n"
    "t = torch.ones(1) * (dist.get_rank() + 1)\ndist.all_reduce(t)\nprint(t)\n"
)


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every request the bot makes must be one Discord accepts."""
    yield
    no_unexpected_rejections(request)


class TwoRanksPrintThree:
    """A runner whose every run is two gloo ranks printing ``tensor([3.])``."""

    async def health(self) -> RunnerHealth:
        return RunnerHealth(CPU, ("python", "dp", "ddp"), ("gloo",), True, 8, 300.0)

    async def run(self, spec: RunSpec) -> RunVerdict:
        ranks = tuple(RankOutcome(r, 0, None, "tensor([3.])\n", "", False, None, None) for r in range(2))
        return RunVerdict("ok", spec.mode, 2, "gloo", 1.0, CPU, True, None, (), ranks)


@dataclass
class Bot(env.Bot):
    """One running adapter process (a restart is a new Bot on the same database), with the form helpers."""

    def callbacks(self, token: str) -> list[Any]:
        return [r.body for r in self.fake.calls("POST", rf"/interactions/\d+/{token}/callback")]

    def followups(self, token: str) -> list[Any]:
        return [r.body for r in self.fake.calls("POST", rf"/webhooks/\d+/{token}")]

    def edits(self, token: str) -> list[Any]:
        return [r.body for r in self.fake.calls("PATCH", rf"/webhooks/\d+/{token}/messages/@original")]

    async def text(self, token: str) -> str:
        """Everything the bot answered privately to ``token`` (waits for a follow-up)."""
        await self.fake.wait_for(lambda: self.followups(token))
        return "\n".join(str(f.get("content") or "") for f in self.followups(token))

    async def modal(self, token: str) -> dict[str, Any]:
        """The modal (or message) the bot answered ``token`` with, first response."""
        await self.fake.wait_for(lambda: self.callbacks(token))
        [response] = self.callbacks(token)
        return dict(response)

    async def open_form_data(self, qid: str, kind: str = "conceptual", **kw: Any) -> dict[str, Any]:
        opts = [
            {"type": 3, "name": "id", "value": qid},
            {"type": 3, "name": "topic", "value": "DDP"},
            {"type": 3, "name": "difficulty", "value": "advanced"},
            {"type": 3, "name": "kind", "value": kind},
        ]
        token = self.act.command(self.client, "question add", opts, permissions=MANAGE_GUILD, **kw)
        response = await self.modal(token)
        assert response["type"] == 9, response
        return dict(response["data"])

    def submit(self, custom_id: str, fields: dict[str, str], **kw: Any) -> str:
        """Submit the form ``custom_id`` with ``fields`` by name (the others as the form holds them)."""
        values = {f"{FIELD_PREFIX}{name}": value for name, value in fields.items()}
        return self.act.submit_modal(self.client, custom_id, values, permissions=MANAGE_GUILD, **kw)

    def message_with(self, prefix: str) -> int:
        """The latest message carrying a button whose custom id starts with ``prefix``."""
        return max(
            mid
            for mid, msg in self.fake.messages.items()
            if any(
                str(c.get("custom_id", "")).startswith(prefix)
                for row in msg.get("components") or []
                for c in row.get("components") or []
            )
        )

    def button(self, message_id: int, label: str) -> str:
        custom_id: str = next(
            c["custom_id"]
            for row in self.fake.messages[message_id]["components"]
            for c in row["components"]
            if c.get("label") == label
        )
        return custom_id

    async def question_ids(self) -> list[str]:
        return [q.id for q in await self.quiz.list_questions(view=CHANNEL.tenant)]

    async def close(self) -> None:
        await env.close_bot(self)


def prefilled(modal: dict[str, Any]) -> dict[str, str]:
    """A modal's pre-filled values by field name (an empty input has none)."""
    return {
        c["custom_id"].removeprefix(FIELD_PREFIX): c.get("value", "")
        for row in modal["components"]
        for c in row["components"]
    }


async def _open(fake: FakeDiscord, db: str, clock: FrozenClock, act: Interactions | None = None) -> Bot:
    """An adapter wired as bot/bootstrap.py wires it (the drafts of both kinds in the database). ``act``:
    the interactions of the process before a restart (their tokens go on counting: none is reused).
    """
    opened = await env.open_bot(fake, db, clock, env.BotOptions(bank=None, runner=TwoRanksPrintThree()), act)
    return Bot(**{f.name: getattr(opened, f.name) for f in dataclasses.fields(opened)})


@pytest.fixture
async def bot(fake: FakeDiscord, db: str, clock: FrozenClock) -> AsyncIterator[Bot]:
    b = await _open(fake, db, clock)
    yield b
    await b.close()


# ---------------------------------------------------------------------- the form itself
async def test_the_form_has_stable_ids_and_keeps_within_discords_limits(bot: Bot) -> None:
    long_id = "ddp-" + "x" * 60  # 64 characters: the title is cut to Discord's 45
    modal = await bot.open_form_data(long_id)
    assert modal["custom_id"].startswith(FORM_PREFIX) and len(modal["custom_id"]) <= 100
    assert len(modal["title"]) <= 45 and len(modal["components"]) == 5
    ids = [row["components"][0]["custom_id"] for row in modal["components"]]
    assert ids == [f"{FIELD_PREFIX}{n}" for n in ("prompt", "code", "choices", "correct", "notes")]
    # discord.py keeps no View for it: its submission is routed by custom id, whenever it comes.
    assert bot.client._connection._view_store._modals == {}


async def test_an_id_too_long_for_the_bank_is_refused_before_the_form_opens(bot: Bot) -> None:
    opts = [
        {"type": 3, "name": "id", "value": "x" * 65},
        {"type": 3, "name": "topic", "value": "DDP"},
        {"type": 3, "name": "difficulty", "value": "advanced"},
    ]
    token = bot.act.command(bot.client, "question add", opts, permissions=MANAGE_GUILD)
    response = await bot.modal(token)
    assert response["type"] == 4 and "1 to 64 characters" in response["data"]["content"]


# ---------------------------------------------------------------------- late submissions
async def test_a_submission_after_the_forms_15_minutes_is_still_imported(
    bot: Bot, clock: FrozenClock, fake: FakeDiscord
) -> None:
    modal = await bot.open_form_data("ddp-late-1")
    clock.advance(20 * 60)  # past discord.py's View timeout and Discord's 15 minutes of the command
    fake.advance(20 * 60)
    token = bot.submit(modal["custom_id"], GOOD)
    assert "`ddp-late-1` added" in await bot.text(token)
    assert "ddp-late-1" in await bot.question_ids()


async def test_a_submission_after_a_restart_is_still_imported(
    bot: Bot, fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    modal = await bot.open_form_data("ddp-restart-1")
    await bot.adapter.stop()  # the process that opened the form is gone
    fresh = await _open(fake, db, clock, bot.act)
    try:
        token = fresh.submit(modal["custom_id"], GOOD)
        assert "`ddp-restart-1` added" in await fresh.text(token)
        [spec] = [
            s for s in await fresh.quiz.export_questions(view=CHANNEL.tenant) if s["id"] == "ddp-restart-1"
        ]
        assert (spec["topic"], spec["difficulty"], spec["kind"]) == ("DDP", "advanced", "conceptual")
        assert spec["hint"] == "think backward" and spec["choices"][0]["correct"] is True
    finally:
        await fresh.close()


async def test_another_servers_admin_cannot_submit_into_someone_elses_form(bot: Bot) -> None:
    modal = await bot.open_form_data("ddp-mine")
    token = bot.submit(modal["custom_id"], GOOD, guild_id=OTHER_GUILD)
    assert "nothing was added" in await bot.text(token)
    token = bot.submit(modal["custom_id"], GOOD, user_id=222)  # another admin of the same server
    assert "nothing was added" in await bot.text(token)
    assert "ddp-mine" not in await bot.question_ids()


# ---------------------------------------------------------------------- refused, then edit again
async def test_a_refused_submission_keeps_the_text_and_edit_again_reopens_it_filled_in(
    bot: Bot, fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    modal = await bot.open_form_data("ddp-fix-1")
    typed = {**GOOD, "correct": "E"}  # no choice E among three: refused by the schema
    bad = bot.submit(modal["custom_id"], typed)
    said = await bot.text(bad)
    assert "was not added" in said and "choices" in said and "Edit again" in said
    assert "ddp-fix-1" not in await bot.question_ids()
    # Edit again works after a restart too: the button is routed by its custom id.
    await bot.adapter.stop()
    fresh = await _open(fake, db, clock, bot.act)
    try:
        message = fresh.message_with("rz:qedit:")
        click = fresh.act.click(
            fresh.client, message, fresh.button(message, "Edit again"), permissions=MANAGE_GUILD
        )
        reopened = await fresh.modal(click)
        assert reopened["type"] == 9 and reopened["data"]["custom_id"] == modal["custom_id"]
        assert prefilled(reopened["data"]) == typed  # everything as typed, the wrong letter too
        good = fresh.submit(modal["custom_id"], {"correct": "a"})  # fix one field, keep the rest
        assert "`ddp-fix-1` added" in await fresh.text(good)
        assert "ddp-fix-1" in await fresh.question_ids()
        # Added: the draft is gone.
        restore = fresh.act.command(fresh.client, "question restore", permissions=MANAGE_GUILD)
        assert "no question form saved" in (await fresh.modal(restore))["data"]["content"]
    finally:
        await fresh.close()


async def test_edit_again_is_only_for_the_admin_who_typed_it(bot: Bot) -> None:
    modal = await bot.open_form_data("ddp-fix-2")
    await bot.text(bot.submit(modal["custom_id"], {**GOOD, "correct": "E"}))
    message = bot.message_with("rz:qedit:")
    other = bot.act.click(
        bot.client, message, bot.button(message, "Edit again"), user_id=222, permissions=MANAGE_GUILD
    )
    answer = await bot.modal(other)
    assert answer["type"] == 4 and "no longer saved" in answer["data"]["content"]
    member = bot.act.click(bot.client, message, bot.button(message, "Edit again"))  # not an admin
    assert (await bot.modal(member))["type"] == 4


# ---------------------------------------------------------------------- /question restore
async def test_restore_says_when_there_is_nothing_to_restore(bot: Bot) -> None:
    token = bot.act.command(bot.client, "question restore", permissions=MANAGE_GUILD)
    answer = await bot.modal(token)
    assert answer["type"] == 4 and answer["data"]["flags"] == 64
    assert "no question form saved" in answer["data"]["content"] and "24 hours" in answer["data"]["content"]


async def test_restore_reopens_the_latest_form_for_its_admin_only_for_24_hours(
    bot: Bot, clock: FrozenClock
) -> None:
    first = await bot.open_form_data("ddp-old")
    await bot.text(bot.submit(first["custom_id"], {**GOOD, "correct": "E"}))
    clock.advance(60)
    second = await bot.open_form_data("ddp-new")
    typed = {**GOOD, "prompt": "Latest words", "correct": "Z"}
    await bot.text(bot.submit(second["custom_id"], typed))

    token = bot.act.command(bot.client, "question restore", permissions=MANAGE_GUILD)
    restored = await bot.modal(token)
    assert restored["type"] == 9 and restored["data"]["custom_id"] == second["custom_id"]
    assert prefilled(restored["data"]) == typed and "ddp-new" in restored["data"]["title"]

    # Another server's admin, and another admin of this server, see none of it.
    elsewhere = bot.act.command(
        bot.client, "question restore", permissions=MANAGE_GUILD, guild_id=OTHER_GUILD
    )
    assert "no question form saved" in (await bot.modal(elsewhere))["data"]["content"]
    colleague = bot.act.command(bot.client, "question restore", permissions=MANAGE_GUILD, user_id=222)
    assert "no question form saved" in (await bot.modal(colleague))["data"]["content"]
    member = bot.act.command(bot.client, "question restore")  # not an admin
    assert "only admins" in (await bot.modal(member))["data"]["content"]

    clock.advance(24 * 3600 - 1)  # a day after the last submission, less a second: still there
    still = bot.act.command(bot.client, "question restore", permissions=MANAGE_GUILD)
    assert (await bot.modal(still))["type"] == 9
    clock.advance(2)  # past the day: gone
    late = bot.act.command(bot.client, "question restore", permissions=MANAGE_GUILD)
    assert "no question form saved" in (await bot.modal(late))["data"]["content"]


# ---------------------------------------------------------------------- the runner preview
async def test_the_runner_previews_save_works_after_a_restart(
    bot: Bot, fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    modal = await bot.open_form_data("ddp-preview-1", kind="predict_output")
    fields = {
        "prompt": "Two ranks all-reduce 1 and 2. What is printed?",
        "code": "runner: ddp 2 init\n" + ALL_REDUCE,
        "choices": "tensor([3.])\ntensor([1.])",
        "correct": "a",
        "notes": "",
    }
    token = bot.submit(modal["custom_id"], fields)
    await bot.text(token)
    message = bot.message_with("rzq:save:")
    assert await bot.question_ids() == []  # only Save imports
    await bot.adapter.stop()  # flushes the preview's draft to the database

    fresh = await _open(fake, db, clock, bot.act)
    try:
        click = fresh.act.click(
            fresh.client, message, fresh.button(message, "Save"), permissions=MANAGE_GUILD
        )
        await fake.wait_for(lambda: fresh.edits(click))
        assert fresh.edits(click)[-1]["content"] == "Question `ddp-preview-1` added."
        assert "ddp-preview-1" in await fresh.question_ids()
        # Saved: its typed form is discarded too.
        restore = fresh.act.command(fresh.client, "question restore", permissions=MANAGE_GUILD)
        assert "no question form saved" in (await fresh.modal(restore))["data"]["content"]
    finally:
        await fresh.close()


async def test_a_preview_cannot_be_saved_from_another_server(bot: Bot) -> None:
    modal = await bot.open_form_data("ddp-preview-2", kind="predict_output")
    fields = {
        "prompt": "What is printed?",
        "code": "runner: ddp 2 init\n" + ALL_REDUCE,
        "choices": "tensor([3.])\ntensor([1.])",
        "correct": "a",
    }
    await bot.text(bot.submit(modal["custom_id"], fields))
    message = bot.message_with("rzq:save:")
    save = bot.button(message, "Save")
    # The same admin, clicking it from another server: refused, nothing imported anywhere.
    elsewhere = bot.act.click(bot.client, message, save, permissions=MANAGE_GUILD, guild_id=OTHER_GUILD)
    assert "only the admin who filled in this form" in await bot.text(elsewhere)
    assert await bot.question_ids() == []
    here = bot.act.click(bot.client, message, save, permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.edits(here))
    assert "ddp-preview-2" in await bot.question_ids()


# ---------------------------------------------------------------------- the strict fake
async def test_the_fake_refuses_a_default_longer_than_its_inputs_max_length(fake: FakeDiscord) -> None:
    iid = fake.next_id()
    fake.register_interaction(iid, "tok-long")
    text = {"type": 4, "custom_id": "t", "style": 1, "label": "L", "max_length": 1, "value": "ab"}
    modal = {
        "type": 9,
        "data": {"custom_id": "m", "title": "T", "components": [{"type": 1, "components": [text]}]},
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{fake.base}/interactions/{iid}/tok-long/callback", json=modal) as resp,
    ):
        status, body = resp.status, await resp.json()
    assert status == 400 and body["code"] == 50035
    assert "value" in body["errors"]["data"]["components"]["0"]["components"]["0"]
    fake.take_rejections()


async def test_the_fake_submits_only_what_discords_client_sends(bot: Bot) -> None:
    modal = await bot.open_form_data("ddp-strict")
    with pytest.raises(ValueError, match="no modal"):
        bot.submit("rz:qform:neveropened00", GOOD)
    with pytest.raises(ValueError, match="at most 1"):
        bot.submit(modal["custom_id"], {**GOOD, "correct": "ab"})
    with pytest.raises(ValueError, match="required"):
        bot.submit(modal["custom_id"], {**GOOD, "prompt": ""})
    with pytest.raises(ValueError, match="no inputs"):
        bot.act.submit_modal(bot.client, modal["custom_id"], {"other": "x"}, permissions=MANAGE_GUILD)
