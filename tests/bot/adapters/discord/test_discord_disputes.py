"""Discord disputes and admin questions through discord.py's real client against the local fake of the
Discord REST API (tests/discord_fake.py), with the real DisputeService and QuizService on a migrated
database.

The runner is a scripted fake returning realistic multi-rank verdicts (a DDP all-reduce, a hang stuck in
init_process_group); the runner itself and its contract are tested in test_runner_contract.py and
test_disputes_e2e.py. Here the point is the adapter: the runner preview before saving a question, Save and
Cancel, the runner line of the form, /dispute with a variant form, /question correct and flags, the admin
channel, and that nothing the runner printed can ping anyone or break a code block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from bot.adapters.discord import disputes as dd
from bot.adapters.discord.dispute_render import ENDING_MANY_RANKS, verdict_embed
from bot.adapters.discord.sanitize import EMBED_TOTAL, FIELD_VALUE, MARKER, ZWSP
from bot.commands import questions as cq
from bot.core.dispute_service import DisputeCard, question_from_spec
from bot.core.disputes import match_verdict
from bot.core.errors import RunnerUnavailableError
from bot.core.models import PlayerRef
from bot.core.verdicts import (
    RankException,
    RankOutcome,
    RunnerHealth,
    RunSpec,
    RunVerdict,
    StuckAt,
)
from bot.runner_client import HttpRunnerClient
from tests.conftest import ADMIN
from tests.discord_env import ADMIN_CHANNEL, CHANNEL, Bot, BotOptions, close_bot, open_bot
from tests.discord_fake import (
    MANAGE_GUILD,
    FakeDiscord,
    no_unexpected_rejections,
)
from tests.fakes import FrozenClock
from tests.runner_server import RunnerServer
from tests.verdicts import CPU, cpu_health, printed_verdict


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every request the bot makes must be one Discord accepts (unless the test takes the refusal)."""
    yield
    no_unexpected_rejections(request)


ALICE = PlayerRef("discord", "111", "alice")

ALL_REDUCE = (
    "import torch\nimport torch.distributed as dist\n"
    "t = torch.ones(1) * (dist.get_rank() + 1)\ndist.all_reduce(t)\nprint(t)\n"
)
#: What a user types in the form's Code field: the runner line, then the snippet.
FORM_CODE = "runner: ddp 2 init\n" + ALL_REDUCE
HOSTILE = "@everyone ``` closed? <@123> starting\n"

HANG_SPEC: dict[str, Any] = {
    "id": "disc-hardcoded-world-size",
    "kind": "predict_output",
    "topic": "DDP",
    "difficulty": "advanced",
    "prompt": "Started with plain `python train.py` (one process). What happens?",
    "code": "import torch.distributed as dist\n\n\ndef setup():\n    print('@everyone starting')\n"
    "    dist.init_process_group('gloo', rank=0, world_size=2)\n\n\nsetup()\n",
    "runner": {"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False},
    "choices": [
        {"text": "RuntimeError: world_size (2) does not match the number of processes", "correct": True},
        {"text": "It hangs in init_process_group, waiting for rank 1"},
        {"text": "joined"},
    ],
}


def all_reduce_verdict(spec: RunSpec) -> RunVerdict:
    """Two gloo ranks that each print the all-reduced tensor."""
    return printed_verdict(spec, *["tensor([3.])\n"] * spec.nproc, backend="gloo", seconds=1.25)


def hang_verdict(spec: RunSpec) -> RunVerdict:
    """One process stuck in init_process_group (waiting for rank 1), killed at the timeout; it printed
    a mention and a code fence before it hung.
    """
    rank = RankOutcome(0, None, 9, HOSTILE, "", False, None, StuckAt("setup", 6, "init_process_group"))
    return RunVerdict(
        "timeout", spec.mode, 1, None, 30.0, CPU, True, 0, ("killed after 30 s without finishing",), (rank,)
    )


class ScriptedRunner:
    """A RunnerClient whose verdicts come from ``verdict``; records the specs it ran; ``error`` fails runs."""

    def __init__(self, verdict: Callable[[RunSpec], RunVerdict]) -> None:
        self.verdict = verdict
        self.specs: list[RunSpec] = []
        self.error: Exception | None = None

    async def health(self) -> RunnerHealth:
        return cpu_health()

    async def run(self, spec: RunSpec) -> RunVerdict:
        self.specs.append(spec)
        if self.error is not None:
            raise self.error
        return self.verdict(spec)


def scripted(bot: Bot) -> ScriptedRunner:
    """The ScriptedRunner ``bot`` was opened with (its recorded specs and its ``error`` switch)."""
    assert isinstance(bot.runner, ScriptedRunner), bot.runner
    return bot.runner


#: Without a runner: each bot gets its own ScriptedRunner (it records what it ran).
OPTIONS = BotOptions(bank=None, admin_channel=ADMIN_CHANNEL)


@pytest.fixture
def bot_options() -> BotOptions:
    """Disputes on a runner that prints the all-reduce's answer; notices to ADMIN_CHANNEL; no bank."""
    return OPTIONS.but(runner=ScriptedRunner(all_reduce_verdict))


def _field(embed: dict[str, Any], name: str) -> str:
    return next(str(f["value"]) for f in embed["fields"] if f["name"].startswith(name))


# ---------------------------------------------------------------------- the form's runner line
def test_runner_line_is_parsed_and_stripped_from_the_code() -> None:
    runner, code = cq.split_runner_line(FORM_CODE, "predict_output")
    assert runner == {"mode": "ddp", "nproc": 2, "gpus": 0, "init_process_group": True}
    assert code == ALL_REDUCE
    assert cq.split_runner_line("Runner: dp gpus=2\nx = 1\n", "debug")[0] == {
        "mode": "dp",
        "nproc": 1,
        "gpus": 2,
        "init_process_group": False,
    }
    # predict_output with code and no line: one plain Python process; other kinds: no runner block.
    assert cq.split_runner_line("print(1)\n", "predict_output") == (cq.DEFAULT_RUNNER, "print(1)\n")
    assert cq.split_runner_line("model = DDP(model)", "conceptual") == (None, "model = DDP(model)")
    with pytest.raises(cq.RunnerLineError, match="unknown runner mode 'gpu'"):
        cq.split_runner_line("runner: gpu 2\nprint(1)\n", "predict_output")
    with pytest.raises(cq.RunnerLineError, match="unknown runner setting 'fast'"):
        cq.split_runner_line("runner: ddp 2 fast\n", "predict_output")


async def test_bad_runner_settings_are_listed_and_nothing_is_run(bot: Bot) -> None:
    bad_mode = await bot.submit_form("disc-bad-mode", "runner: gpu 2\nprint(1)\n")
    assert "unknown runner mode 'gpu'" in (await bot.reply(bad_mode))["content"]
    too_many = await bot.submit_form("disc-too-many", "runner: ddp 9\nprint(1)\n")
    text = (await bot.reply(too_many))["content"]
    assert "was not added" in text and "runner.nproc" in text
    # A debug question with code needs the line: the schema's error comes with how to write it.
    debug = await bot.submit_form("disc-debug", "x = 1\n", kind="debug")
    text = (await bot.reply(debug))["content"]
    assert "need a 'runner' block" in text and "Code field's first line" in text
    assert scripted(bot).specs == [] and await bot.question_ids() == []
    # With the line it is saved at once: the runner previews predict_output questions only (the choices of
    # a debug question explain a bug, they are not outputs to match).
    fixed = await bot.submit_form("disc-debug", "runner: python\nx = 1\n", kind="debug")
    assert (await bot.reply(fixed))["content"] == "Question `disc-debug` added."
    [stored] = await bot.quiz.export_questions(view=CHANNEL.tenant)
    assert stored["runner"]["mode"] == "python" and stored["code"] == "x = 1\n" and scripted(bot).specs == []


# ---------------------------------------------------------------------- the preview before saving
async def test_admin_sees_the_runner_output_then_save_adds_the_question(bot: Bot) -> None:
    token = await bot.submit_form("disc-predict-1", FORM_CODE)
    preview = await bot.reply(token)
    # Ran as the runner line says, with the line removed from the code; nothing saved yet.
    [spec] = scripted(bot).specs
    assert (spec.mode, spec.nproc, spec.init_process_group, spec.code) == ("ddp", 2, True, ALL_REDUCE)
    assert await bot.question_ids() == []
    assert preview["flags"] == 64 and preview["allowed_mentions"] == {"parse": []}
    embed = preview["embeds"][0]
    assert "Runner preview" in embed["title"] and "ddp × 2 ranks" in embed["title"]
    assert "CPU only · torch 2.13.0+cpu" in embed["description"] and "**ok**" in embed["description"]
    for rank in (0, 1):
        assert "tensor([3.])" in _field(embed, f"Rank {rank}")
    assert "choice **A** matches" in _field(embed, "Verdict")
    assert "confirms the answer marked correct" in _field(embed, "Preview")
    message = bot.draft_message()
    assert list(bot.buttons(message)) == ["Save", "Cancel"]

    # A double click: both clicks arrive before either is answered; one import, one answer.
    save_id = bot.buttons(message)["Save"]
    first = bot.act.click(bot.client, message, save_id, permissions=MANAGE_GUILD)
    second = bot.act.click(bot.client, message, save_id, permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.edits(first) or bot.edits(second))
    assert all(bot.callbacks(t)[0]["type"] == 6 for t in (first, second))  # acknowledged as updates
    [done] = bot.edits(first) + bot.edits(second)
    assert done["content"] == "Question `disc-predict-1` added." and done["components"] == []
    assert bot.fake.messages[message]["components"] == []
    [stored] = [
        s for s in await bot.quiz.export_questions(view=CHANNEL.tenant) if s["id"] == "disc-predict-1"
    ]
    assert stored["runner"] == {"mode": "ddp", "nproc": 2, "gpus": 0, "init_process_group": True}
    assert stored["code"] == ALL_REDUCE and stored["choices"][0]["correct"] is True
    assert [c["text"] for c in stored["choices"]] == [
        "tensor([3.])\ntensor([3.])",
        "tensor([1.])\ntensor([2.])",
        "tensor([3.])",
    ]


async def test_cancel_imports_nothing(bot: Bot) -> None:
    await bot.reply(await bot.submit_form("disc-cancel", FORM_CODE))
    message = bot.draft_message()
    token = await bot.click(message, "Cancel", permissions=MANAGE_GUILD)
    assert bot.edits(token)[-1]["content"] == "Cancelled: `disc-cancel` was not added."
    assert bot.fake.messages[message]["components"] == []  # the buttons are gone
    assert await bot.question_ids() == [] and len(bot.adapter.client.rankzero_drafts.drafts) == 0  # type: ignore[union-attr]


async def test_a_save_that_fails_unexpectedly_says_so_and_can_be_tried_again(
    bot: Bot, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await bot.reply(await bot.submit_form("disc-retry", FORM_CODE))
    message = bot.draft_message()
    real_import = bot.quiz.admin_import
    calls: list[str] = []

    async def fails_once(actor: Any, specs: Any) -> Any:
        calls.append(specs[0]["id"])
        if len(calls) == 1:  # not a RankZeroError: a bug or a lost database connection
            raise OSError("connection reset by <@123> peer")
        return await real_import(actor, specs)

    monkeypatch.setattr(bot.quiz, "admin_import", fails_once)
    failed = await bot.click(message, "Save", permissions=MANAGE_GUILD)
    [error] = bot.followups(failed)
    assert error["flags"] == 64 and error["allowed_mentions"] == {"parse": []}
    assert "not saved" in error["content"] and "try **Save** again" in error["content"]
    assert "<@123>" not in error["content"]  # the exception's text is logged, not echoed
    assert "saving the draft of disc-retry failed" in caplog.text
    assert bot.edits(failed) == [] and list(bot.buttons(message)) == ["Save", "Cancel"]
    assert await bot.question_ids() == []
    # The failed save released the draft: the next click saves it.
    retried = await bot.click(message, "Save", permissions=MANAGE_GUILD)
    assert bot.edits(retried)[-1]["content"] == "Question `disc-retry` added."
    assert calls == ["disc-retry", "disc-retry"] and await bot.question_ids() == ["disc-retry"]


async def test_cancel_while_a_save_is_running_leaves_the_draft_to_the_save(bot: Bot) -> None:
    await bot.reply(await bot.submit_form("disc-busy", FORM_CODE))
    message = bot.draft_message()
    key = bot.buttons(message)["Save"].split(":")[2]
    drafts = bot.adapter.client.rankzero_drafts.drafts  # type: ignore[union-attr]
    assert drafts.claim(key)  # a Save click is importing it right now
    token = await bot.click(message, "Cancel", permissions=MANAGE_GUILD)
    [busy] = bot.followups(token)
    assert busy["flags"] == 64 and "being saved" in busy["content"]
    assert bot.edits(token) == [] and "Cancelled" not in busy["content"]
    assert drafts.get(key) is not None and drafts.outcome(key) is None
    assert list(bot.buttons(message)) == ["Save", "Cancel"]
    # Once that save is over (here: it failed and let go), Save works as usual.
    drafts.release(key)
    saved = await bot.click(message, "Save", permissions=MANAGE_GUILD)
    assert bot.edits(saved)[-1]["content"] == "Question `disc-busy` added."


async def test_only_the_admin_who_filled_the_form_can_save_it(bot: Bot) -> None:
    await bot.reply(await bot.submit_form("disc-owner", FORM_CODE))
    message = bot.draft_message()
    for who in ({"user_id": 222, "permissions": 0}, {"user_id": 333, "permissions": MANAGE_GUILD}):
        token = await bot.click(message, "Save", **who)
        assert "only the admin who filled in this form" in bot.followups(token)[-1]["content"]
    assert await bot.question_ids() == []
    await bot.click(message, "Save", permissions=MANAGE_GUILD)
    assert await bot.question_ids() == ["disc-owner"]


async def test_a_runner_that_cannot_run_it_says_why_and_allows_an_unverified_save(bot: Bot) -> None:
    scripted(bot).error = RunnerUnavailableError("the runner at http://127.0.0.1:9 is unreachable")
    preview = await bot.reply(await bot.submit_form("disc-down", FORM_CODE))
    assert "127.0.0.1:9 is unreachable" in preview["embeds"][0]["description"]
    message = bot.draft_message()
    assert list(bot.buttons(message)) == ["Save unverified", "Cancel"]
    await bot.click(message, "Save unverified", permissions=MANAGE_GUILD)
    assert await bot.question_ids() == ["disc-down"]


async def test_a_draft_saved_after_a_restart_is_added(
    fake: FakeDiscord, db: str, clock: FrozenClock, bot: Bot
) -> None:
    """The draft behind Save is kept in the database (as ``serve`` wires it): a restart loses nothing."""
    await bot.reply(await bot.submit_form("disc-restart", FORM_CODE))
    message = bot.draft_message()
    await bot.adapter.stop()
    fresh = await open_bot(fake, db, clock, OPTIONS.but(runner=ScriptedRunner(all_reduce_verdict)))
    try:
        token = await fresh.click(message, "Save", permissions=MANAGE_GUILD)
        assert "Question `disc-restart` added." in fresh.edits(token)[-1]["content"]
        assert await fresh.question_ids() == ["disc-restart"]
    finally:
        await close_bot(fresh)


# ---------------------------------------------------------------------- disputes, flags, corrections
async def _answered_hang_problem(bot: Bot) -> int:
    """Alice answers the hang question with its (wrong) official answer A; returns the problem id."""
    await bot.quiz.admin_import(ADMIN, [HANG_SPEC])
    await bot.quiz.post_daily(CHANNEL, problems=1)
    post = max(bot.fake.messages)
    start = bot.act.click(bot.client, post, bot.buttons(post)["Start"])
    await bot.fake.wait_for(lambda: bot.edits(start))
    eph = bot.fake.originals[start]
    answered = bot.act.click(bot.client, eph, bot.buttons(eph)["A"])
    await bot.fake.wait_for(lambda: bot.edits(answered))
    return int(bot.edits(answered)[-1]["embeds"][0]["footer"]["text"].split()[-1])


async def _points(bot: Bot) -> int:
    board = await bot.quiz.leaderboard(CHANNEL, period="all", player=ALICE)
    return {r.display_name: r.points for r in board.rows}.get("alice", 0)  # 0 points: not ranked


async def test_contradicted_dispute_verdict_flag_admin_notice_and_correction(
    fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    bot = await open_bot(fake, db, clock, OPTIONS.but(runner=ScriptedRunner(hang_verdict)))
    try:
        problem = await _answered_hang_problem(bot)
        points = await _points(bot)
        assert points > 0
        token = bot.act.command(bot.client, "dispute", [{"type": 4, "name": "problem", "value": problem}])
        await bot.reply(token)
        [thread] = fake.threads
        [posted] = fake.calls("POST", rf"/channels/{thread}/messages")
        assert posted.body["allowed_mentions"] == {"parse": []}
        embed = posted.body["embeds"][0]
        assert "Dispute · disc-hardcoded-world-size v1 · python" in embed["title"]
        assert "CPU only" in embed["description"] and "**timeout**" in embed["description"]
        assert "Root cause: **rank 0**" in embed["description"]
        rank = _field(embed, "Rank 0 · 🎯 root cause")
        assert r"stuck in init\_process\_group at line 6 (setup)" in rank
        # The runner's output: inside one code block, its fence inert, nobody pinged, even in text.
        assert rank.count("```") == 2 and "@everyone" not in rank and f"@{ZWSP}everyone" in rank
        assert "<@123>" not in rank
        assert "killed after 30 s" in _field(embed, "Notes")
        verdict = _field(embed, "Verdict")
        assert verdict.startswith("**Contradicted** (choice **B** matches)")
        assert "never joined" in verdict and verdict.endswith(
            "choice B matches, but the official answer is A"
        )
        assert "✘ **A** *(official)*" in _field(embed, "Choices")
        assert "flagged for the admins" in _field(embed, "Flag")
        assert sum(len(f["value"]) + len(f["name"]) for f in embed["fields"]) < EMBED_TOTAL

        # The admin channel is told, with mentions disabled.
        [notice] = fake.calls("POST", rf"/channels/{ADMIN_CHANNEL}/messages")
        assert notice.body["allowed_mentions"] == {"parse": []}
        assert "`disc-hardcoded-world-size` v1: the official answer is **A**" in notice.body["content"]
        assert "/question correct question:disc-hardcoded-world-size" in notice.body["content"]

        # Non-admins cannot list flags or correct answers.
        for name, opts in (
            ("question flags", []),
            (
                "question correct",
                [
                    {"type": 3, "name": "question", "value": HANG_SPEC["id"]},
                    {"type": 3, "name": "letter", "value": "B"},
                ],
            ),
        ):
            refused = bot.act.command(bot.client, name, opts, user_id=222, user="mallory")
            assert "only admins" in (await bot.reply(refused))["content"]
        assert await _points(bot) == points

        flags = bot.act.command(bot.client, "question flags", [], permissions=MANAGE_GUILD, user_id=9)
        listed = (await bot.reply(flags))["embeds"][0]
        assert listed["title"] == "🚩 Open flags · 1"
        [flag] = listed["fields"]
        assert "disc-hardcoded-world-size v1 · open" in flag["name"]
        assert "official **A**, runner **B**" in flag["value"]

        fix = bot.act.command(
            bot.client,
            "question correct",
            [
                {"type": 3, "name": "question", "value": HANG_SPEC["id"]},
                {"type": 3, "name": "letter", "value": "b"},
            ],
            permissions=MANAGE_GUILD,
            user_id=9,
        )
        text = (await bot.reply(fix))["content"]
        assert "answer A → **B** (v1 → v2); 1 session(s) re-scored, 1 player(s) moved" in text
        assert await _points(bot) == 0  # alice answered A, which is no longer right
        after = bot.act.command(bot.client, "question flags", [], permissions=MANAGE_GUILD, user_id=9)
        assert (await bot.reply(after))["embeds"][0]["description"] == "No flagged questions."
    finally:
        await close_bot(bot)


async def test_dispute_variant_is_typed_in_a_form_and_never_flags(
    fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    bot = await open_bot(fake, db, clock, OPTIONS.but(runner=ScriptedRunner(hang_verdict)))
    try:
        problem = await _answered_hang_problem(bot)
        opts = [
            {"type": 4, "name": "problem", "value": problem},
            {"type": 5, "name": "variant", "value": True},
        ]
        token = bot.act.command(bot.client, "dispute", opts)
        await fake.wait_for(lambda: bot.callbacks(token))
        [modal] = bot.callbacks(token)
        assert modal["type"] == 9  # the form is the response
        [row] = modal["data"]["components"]
        field = row["components"][0]
        assert field["style"] == 2 and field["max_length"] == dd.MAX_VARIANT_INPUT  # a paragraph input
        variant = "import os\nprint(os.environ.get('WORLD_SIZE'))\n"
        sub = bot.act.submit_modal(bot.client, modal["data"]["custom_id"], {field["custom_id"]: variant})
        await bot.reply(sub)
        assert [s.code for s in scripted(bot).specs] == [variant]
        [thread] = fake.threads
        [posted] = fake.calls("POST", rf"/channels/{thread}/messages")
        embed = posted.body["embeds"][0]
        assert "your variant" in embed["title"]
        assert "a variant is another snippet" in _field(embed, "Flag")
        assert fake.calls("POST", rf"/channels/{ADMIN_CHANNEL}/messages") == []
    finally:
        await close_bot(bot)


# ---------------------------------------------------------------------- limits
def test_a_verdict_of_eight_noisy_ranks_stays_within_discord_limits() -> None:
    spec = {**HANG_SPEC, "runner": {"mode": "ddp", "nproc": 8, "gpus": 0, "init_process_group": True}}
    question = question_from_spec(spec, version=1)
    noisy = ("@here ```py\n" + "x" * 200 + "\n") * 20
    # Every rank died of a long exception too: the endings alone would take ~2.4k of the 6000.
    died = RankException("RuntimeError", "NCCL error: " + "unhandled system error " * 13, 4)
    assert len(died.message) > 290
    ranks = tuple(RankOutcome(r, 1, None, noisy, "", True, died, None) for r in range(8))
    verdict = RunVerdict("ok", "ddp", 8, "gloo", 2.0, CPU, True, 3, ("output cut",) * 3, ranks)
    run = RunSpec.from_question(spec["code"], spec["runner"])
    card = DisputeCard(
        question.id,
        1,
        question.prompt,
        run,
        False,
        question.choices,
        verdict,
        match_verdict(question, verdict),
    )
    embed = verdict_embed(card)
    assert len(embed) <= EMBED_TOTAL
    names = [f.name or "" for f in embed.fields]
    assert names[:8] == [f"Rank {r}" + (" · 🎯 root cause" if r == 3 else "") for r in range(8)]
    # The conclusion survives the ranks' output, whole: nothing was cut or dropped to fit the total.
    assert names[8:] == ["Notes", "Choices", "Verdict", "Flag"]
    assert embed.description is not None and embed.description.startswith("**⚠️ contradicted**")
    assert "Root cause: **rank 3**" in embed.description and MARKER not in embed.description
    fields = {f.name: f.value or "" for f in embed.fields}
    assert fields["Verdict"].startswith("**Contradicted** (no choice matches): it printed")
    assert fields["Choices"].startswith("✘ **A** *(official)*") and MARKER not in fields["Choices"]
    assert fields["Flag"] == "Not flagged."
    for r in range(8):
        value = fields[f"Rank {r}" + (" · 🎯 root cause" if r == 3 else "")]
        assert value.startswith("**ended:** RuntimeError: NCCL error: unhandled system error")
        ending = value.split("\n", 1)[0]
        assert len(ending) <= len("**ended:** ") + ENDING_MANY_RANKS + len(" · *output cut by the runner*")
        assert "```text\n" in value  # some of each rank's output is still shown
    for f in embed.fields:
        assert len(f.value or "") <= FIELD_VALUE
        assert (f.value or "").count("```") in (0, 2) and "@here" not in (f.value or "")


# ---------------------------------------------------------------------- with the real sandboxed runner
@pytest.mark.slow
async def test_preview_shows_what_the_real_runner_printed_per_rank(
    fake: FakeDiscord, db: str, clock: FrozenClock, runner: RunnerServer
) -> None:
    """The whole path once: the form's runner line -> HttpRunnerClient -> a sandboxed 2-rank gloo run."""
    async with HttpRunnerClient(runner.url, runner.token) as client:
        bot = await open_bot(fake, db, clock, OPTIONS.but(runner=client))
        try:
            # A real 2-rank sandbox run: on a loaded 2-core machine it can take far longer than a
            # scripted reply, so the hang guard is generous.
            preview = await bot.reply(await bot.submit_form("disc-real-runner", FORM_CODE), timeout=180)
            embed = preview["embeds"][0]
            for rank in (0, 1):
                assert "tensor([3.])" in _field(embed, f"Rank {rank}")
            assert "sandboxed" in embed["description"] and "CPU only · torch" in embed["description"]
            assert "choice **A** matches" in _field(embed, "Verdict")
            assert await bot.question_ids() == []
            await bot.click(bot.draft_message(), "Save", permissions=MANAGE_GUILD)
            assert await bot.question_ids() == ["disc-real-runner"]
        finally:
            await close_bot(bot)


def test_admin_channel_setting_reaches_the_platform() -> None:
    from bot.adapters.discord.app import build_adapter
    from bot.config import Settings

    adapter = build_adapter(
        Settings(
            discord_token=SecretStr("t"), discord_admin_channel_id=ADMIN_CHANNEL, database_url="sqlite://"
        )
    )
    assert adapter.platform.admin_channel_id == ADMIN_CHANNEL


def test_a_question_needing_more_gpus_says_it_cannot_be_reproduced() -> None:
    spec = {**HANG_SPEC, "runner": {"mode": "ddp", "nproc": 2, "gpus": 2, "init_process_group": True}}
    question = question_from_spec(spec, version=3)
    run = RunSpec.from_question(spec["code"], spec["runner"])
    why = "cannot reproduce here: needs 2 GPUs, this runner has none"
    card = DisputeCard(question.id, 3, question.prompt, run, False, question.choices, None, None, why)
    embed = verdict_embed(card)
    assert embed.description is not None and f"⛔ {why}" in embed.description
    assert "cannot check" in embed.description
    assert [f.name for f in embed.fields] == ["Flag"]  # no rank pretends to have run


# ---------------------------------------------------------------------- /dispute's problem forms
async def test_dispute_takes_today_n_and_question_ids_with_suggestions(
    fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    """``/dispute problem:`` takes what Slack and the CLI take: ``today:N``, a question id asked today, or
    the problem's number; while typing, Discord suggests today's problems of the channel.
    """
    bot = await open_bot(fake, db, clock, OPTIONS.but(runner=ScriptedRunner(hang_verdict)))
    try:
        await bot.adapter.sync_commands()  # the fake now checks options against the published tree
        problem = await _answered_hang_problem(bot)
        ask = bot.act.autocomplete(bot.client, "dispute", "problem", "TOD")
        await fake.wait_for(lambda: ask in fake.suggestions)
        assert fake.suggestions[ask] == [
            {"name": "today:1 · DDP · disc-hardcoded-world-size", "value": "today:1"}
        ]
        ask = bot.act.autocomplete(bot.client, "dispute", "problem", "no-such")
        await fake.wait_for(lambda: ask in fake.suggestions)
        assert fake.suggestions[ask] == []

        def dispute(value: str) -> str:
            return bot.act.command(bot.client, "dispute", [{"type": 3, "name": "problem", "value": value}])

        for n, value in enumerate(("today:1", HANG_SPEC["id"], str(problem)), 1):
            token = dispute(value)
            await bot.reply(token)
            assert len(fake.threads) == n, value
            [posted] = fake.calls("POST", rf"/channels/{list(fake.threads)[-1]}/messages")
            assert "disc-hardcoded-world-size" in posted.body["embeds"][0]["title"]
        # What names nothing gets a clear answer, with the forms it takes; nothing runs.
        runs = len(scripted(bot).specs)
        for value, says in (
            ("today:7", "problems 1 to 1, not 7"),
            ("ddp-other", "use today:N or one of (1: disc-hardcoded-world-size)"),
            ("²", "today:N"),
            ("99999999999999999999", "no problem"),
        ):
            reply = await bot.reply(dispute(value))
            assert says in reply["content"], (value, reply["content"])
        assert len(scripted(bot).specs) == runs
    finally:
        await close_bot(bot)
