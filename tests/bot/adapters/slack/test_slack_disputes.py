"""Slack disputes and admin questions end to end: signed HTTP requests into the Bolt app on loopback, the
Web API fake recording outgoing calls, the real DisputeService and QuizService on a migrated database.

The runner is a fake that "runs" ``print(<literal>)`` snippets (rank 0 prints, as under
``if dist.get_rank() == 0``); its contract and the real sandbox are tested in test_runner_contract.py and
test_disputes_e2e.py. Here the point is the adapter: the preview before saving, Save/Cancel, the
commands, the admin channel, and that nothing the runner printed can ping or break a block.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import dispute_blocks as dbk
from bot.adapters.slack.app import build_adapter
from bot.adapters.slack.listeners import disputes as sd
from bot.bootstrap import PlatformRouter
from bot.config import Settings
from bot.core.dispute_service import DisputeCard, DisputeService, question_from_spec
from bot.core.disputes import AdminNotice, match_verdict
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
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.bot.adapters.slack.test_slack_adapter import (
    OWNER,
    PLAYER,
    SLACK_TENANT,
    Harness,
    _harness,
    buttons,
)
from tests.conftest import make_spec
from tests.slack_fake import TEAM
from tests.verdicts import CPU, cpu_health, printed_verdict

ADMIN_CHANNEL = "CADMIN"
RUNNER = {"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False}


class PrintRunner:
    """A fake runner: rank 0 prints each ``print(<literal>)`` of the snippet; records the specs it ran.

    ``gate`` holds runs until set (a runner slower than Slack's 3 s); ``error`` makes runs fail.
    """

    def __init__(self) -> None:
        self.specs: list[RunSpec] = []
        self.gate: asyncio.Event | None = None
        self.error: Exception | None = None

    async def health(self) -> RunnerHealth:
        return cpu_health()

    async def run(self, spec: RunSpec) -> RunVerdict:
        self.specs.append(spec)
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        printed = "".join(
            f"{node.args[0].value!s}\n"
            for node in ast.walk(ast.parse(spec.code))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        )
        n = spec.nproc if spec.mode == "ddp" else 1
        backend = "gloo" if spec.init_process_group else None
        return printed_verdict(spec, printed, *[""] * (n - 1), backend=backend, seconds=0.25)


def contradicted_bank() -> list[dict[str, Any]]:
    """6 predict_output questions whose code prints choice B while the official answer is A."""
    return [
        make_spec(
            f"po-{i}",
            level,
            "DDP",
            kind="predict_output",
            code=f"print('po-{i} choice 1')\n",
            runner=RUNNER,
        )
        for i, level in enumerate(["intermediate"] * 2 + ["advanced"] * 2 + ["expert"] * 2)
    ]


def use_runner(h: Harness, runner: PrintRunner) -> None:
    """Give the services a DisputeService over ``runner``, posting notices through the real router."""
    factory = session_factory(h.services.app.engine)
    h.services.app.disputes = h.adapter.ctx.commands.disputes = DisputeService(
        lambda: SqlUnitOfWork(factory),
        h.clock,
        runner,
        PlatformRouter({h.adapter.name: h.adapter.platform}),
    )


@pytest.fixture
async def admin_slack(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[tuple[Harness, PrintRunner]]:
    """The adapter with an admin channel, over a bank whose official answers the runner contradicts."""
    async for h in _harness(
        tmp_path, sqlite_template, contradicted_bank(), slack_admin_channel_id=ADMIN_CHANNEL
    ):
        runner = PrintRunner()
        use_runner(h, runner)
        yield h, runner


async def command(h: Harness, user: str, text: str) -> str:
    """Send ``/rankzero text`` and return the ephemeral reply (as JSON text)."""
    n = len(h.api.of("response"))
    r = await h.send.command(user, text)
    assert r.status_code == 200
    return (await h.api.wait_for("response", n + 1))[n].dump()


async def question_ids(h: Harness) -> list[str]:
    return [q.id for q in await h.services.quiz.list_questions(view=SLACK_TENANT)]


# ---------------------------------------------------------------------- question add with the preview
PREDICT_FORM: dict[str, Any] = {
    "id": "slack-predict-1",
    "kind": ("select", "predict_output"),
    "topic": "DDP",
    "difficulty": ("select", "advanced"),
    "prompt": "Two ranks; only rank 0 prints. What is printed?",
    "code": "import torch.distributed as dist\nif dist.get_rank() == 0:\n    print('hello')\n",
    "choices": "*hello\nhello hello\nnothing",
    "runner_mode": ("select", "ddp"),
    "runner_nproc": "2",
    "runner_init": ("checkboxes", ["yes"]),
}


async def test_predict_output_is_previewed_on_the_runner_then_saved(
    admin_slack: tuple[Harness, PrintRunner],
) -> None:
    h, runner = admin_slack
    assert (await h.send.command(OWNER, "question add")).status_code == 200
    form = (await h.api.wait_for("views.update"))[0].args["view"]  # replaces the "Loading" modal
    assert {"runner_mode", "runner_nproc", "runner_gpus", "runner_init"} <= {
        b.get("block_id") for b in form["blocks"]
    }

    r = await h.send.submit(OWNER, bk.QUESTION_CALLBACK, PREDICT_FORM)
    answer = r.json()
    assert answer["response_action"] == "push"  # over the form: Cancel goes back to it
    preview = answer["view"]
    assert preview["callback_id"] == dbk.PREVIEW_CALLBACK and preview["submit"]["text"] == "Save"
    assert preview["notify_on_close"] is True
    # The runner ran the draft as its runner fields say, and the preview shows its real output.
    assert [(s.mode, s.nproc, s.gpus, s.init_process_group) for s in runner.specs] == [("ddp", 2, 0, True)]
    shown = json.dumps(preview, ensure_ascii=False)
    assert "*Rank 0* · exit 0\\n```hello```" in shown and "*Rank 1* · exit 0\\n_(nothing)_" in shown
    assert "Ran on CPU only · torch 2.13.0+cpu · sandboxed · *ok*" in shown
    assert "choice *A* matches" in shown and "Confirmed" in shown
    assert "slack-predict-1" not in await question_ids(h)  # nothing is saved before Save

    r = await h.send.submit(OWNER, dbk.PREVIEW_CALLBACK, {}, metadata=preview["private_metadata"])
    assert r.json() == {"response_action": "clear"}
    saved = next(
        s for s in await h.services.quiz.export_questions(view=SLACK_TENANT) if s["id"] == "slack-predict-1"
    )
    assert saved["runner"] == {"mode": "ddp", "nproc": 2, "gpus": 0, "init_process_group": True}
    assert saved["code"] == PREDICT_FORM["code"] and saved["choices"][0]["correct"] is True


async def test_cancel_imports_nothing_and_drops_a_large_draft(
    admin_slack: tuple[Harness, PrintRunner],
) -> None:
    h, _ = admin_slack
    big = {**PREDICT_FORM, "id": "slack-big-1", "code": PREDICT_FORM["code"] + "# pad\n" * 600}
    r = await h.send.submit(OWNER, bk.QUESTION_CALLBACK, big)
    preview = r.json()["view"]
    metadata = preview["private_metadata"]
    assert metadata.startswith("k:") and len(metadata) < 100  # too big for Slack's 3000: kept here
    store = sd.drafts(h.adapter.ctx)
    assert store.get(metadata[2:]) is not None

    closed = {
        "type": "view_closed",
        "team": {"id": TEAM, "domain": "test"},
        "user": {"id": OWNER, "username": "uowner", "name": "uowner", "team_id": TEAM},
        "api_app_id": "A1",
        "token": "unused",
        "is_cleared": False,
        "view": {
            "id": "VP",
            "type": "modal",
            "callback_id": dbk.PREVIEW_CALLBACK,
            "private_metadata": metadata,
        },
    }
    r = await h.send.interactive(closed)
    assert r.status_code == 200
    assert store.get(metadata[2:]) is None and "slack-big-1" not in await question_ids(h)
    # A Save that arrives for the cancelled draft (a stale modal) saves nothing and says why.
    r = await h.send.submit(OWNER, dbk.PREVIEW_CALLBACK, {}, metadata=metadata)
    assert r.json()["response_action"] == "update" and "expired" in json.dumps(r.json())
    assert "slack-big-1" not in await question_ids(h)


async def test_a_large_draft_survives_a_restart_and_is_saved(
    admin_slack: tuple[Harness, PrintRunner],
) -> None:
    h, _ = admin_slack
    big = {**PREDICT_FORM, "id": "slack-restart-1", "code": PREDICT_FORM["code"] + "# pad\n" * 600}
    r = await h.send.submit(OWNER, bk.QUESTION_CALLBACK, big)
    metadata = r.json()["view"]["private_metadata"]
    assert metadata.startswith("k:")  # too big for the modal: kept by the bot, now in the database
    await sd.drafts(h.adapter.ctx).flush()
    del sd._STORES[h.adapter.ctx]  # what a restart does to the process's memory
    r = await h.send.submit(OWNER, dbk.PREVIEW_CALLBACK, {}, metadata=metadata)
    assert r.json() == {"response_action": "clear"} and "slack-restart-1" in await question_ids(h)


async def test_a_slow_run_shows_running_then_the_preview(
    admin_slack: tuple[Harness, PrintRunner], monkeypatch: pytest.MonkeyPatch
) -> None:
    h, runner = admin_slack
    monkeypatch.setattr(sd, "PREVIEW_WAIT_S", 0.05)
    runner.gate = asyncio.Event()
    r = await h.send.submit(OWNER, bk.QUESTION_CALLBACK, {**PREDICT_FORM, "id": "slack-slow-1"})
    running = r.json()["view"]
    assert r.json()["response_action"] == "push" and "submit" not in running  # nothing to save yet
    assert "Running `slack-slow-1` on the runner" in json.dumps(running)
    runner.gate.set()
    update = (await h.api.wait_for("views.update"))[0].args
    assert update["external_id"] == running["external_id"]  # the pushed modal, found by its external id
    assert update["view"]["submit"]["text"] == "Save" and "```hello```" in json.dumps(update["view"])
    r = await h.send.submit(OWNER, dbk.PREVIEW_CALLBACK, {}, metadata=update["view"]["private_metadata"])
    assert r.json() == {"response_action": "clear"} and "slack-slow-1" in await question_ids(h)


async def test_runner_down_says_why_and_allows_an_unverified_save(
    admin_slack: tuple[Harness, PrintRunner],
) -> None:
    h, runner = admin_slack
    runner.error = RunnerUnavailableError("the runner at http://127.0.0.1:9 is unreachable")
    r = await h.send.submit(OWNER, bk.QUESTION_CALLBACK, {**PREDICT_FORM, "id": "slack-down-1"})
    view = r.json()["view"]
    assert "could not run `slack-down-1`" in json.dumps(view) and "unreachable" in json.dumps(view)
    assert view["submit"]["text"] == "Save unverified"
    assert "slack-down-1" not in await question_ids(h)


async def test_runner_fields_are_validated_on_the_form(admin_slack: tuple[Harness, PrintRunner]) -> None:
    h, runner = admin_slack
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"runner_nproc": "two"}, "runner_nproc", "whole number"),
        ({"runner_mode": ("select", "python"), "runner_nproc": "2"}, "runner_nproc", "only mode 'ddp'"),
        ({"runner_gpus": "9"}, "runner_gpus", "less than or equal to 8"),
        ({"kind": ("select", "conceptual")}, "runner_mode", "only for predict_output and debug"),
    ]
    for change, field, message in cases:
        r = await h.send.submit(OWNER, bk.QUESTION_CALLBACK, {**PREDICT_FORM, **change})
        answer = r.json()
        assert answer["response_action"] == "errors", change
        assert message in answer["errors"][field], (change, answer)
    assert not runner.specs and "slack-predict-1" not in await question_ids(h)
    # A predict_output question without code needs no runner: it is added at once, as before.
    no_code = {k: v for k, v in PREDICT_FORM.items() if not k.startswith("runner") and k != "code"}
    r = await h.send.submit(OWNER, bk.QUESTION_CALLBACK, {**no_code, "id": "slack-nocode-1"})
    assert r.text in ("", "{}") and "slack-nocode-1" in await question_ids(h)


async def test_non_admins_are_refused(admin_slack: tuple[Harness, PrintRunner]) -> None:
    h, runner = admin_slack
    r = await h.send.submit(PLAYER, bk.QUESTION_CALLBACK, PREDICT_FORM)
    assert r.json()["response_action"] == "errors" and "only admins" in r.json()["errors"]["id"]
    assert not runner.specs  # refused before the runner works
    for text in ("question correct po-1 B", "question flags"):
        assert "only admins" in await command(h, PLAYER, text)
    # A Save forged by a non-admin (signed, with a valid draft) imports nothing.
    draft = sd.encode_draft(sd.drafts(h.adapter.ctx), make_spec("forged-1", "advanced", "DDP"))
    r = await h.send.submit(PLAYER, dbk.PREVIEW_CALLBACK, {}, metadata=draft)
    assert "Not saved: only admins" in json.dumps(r.json())
    assert "forged-1" not in await question_ids(h)


# ---------------------------------------------------------------------- disputes, flags, corrections
async def answered_problem(h: Harness) -> int:
    """The player starts today's challenge and answers its first problem with A (the official answer)."""
    challenge_id = await h.post_challenge()
    view_id, view = await h.start(challenge_id)
    pid = int(next(b for b in buttons(view) if b.startswith("rz:answer:")).split(":")[2])
    await h.click_in_view(PLAYER, f"rz:answer:{pid}:A", view_id)
    return pid


async def test_contradicted_dispute_flags_notifies_admins_and_correct_rescores(
    admin_slack: tuple[Harness, PrintRunner],
) -> None:
    h, _ = admin_slack
    pid = await answered_problem(h)
    pat = PlayerRef("slack", PLAYER, "Pat")
    points_before = (await h.services.quiz.stats(pat)).points
    assert points_before > 0

    reply = await command(h, PLAYER, f"dispute {pid}")
    assert "choice *B* matches" in reply and "Contradicted" in reply
    assert "(official)" in reply and "flagged for the admins" in reply
    assert "*Rank 0* · exit 0" in reply and "choice 1```" in reply
    notices = [c for c in h.api.of("chat.postMessage") if c.args["channel"] == ADMIN_CHANNEL]
    assert len(notices) == 1
    notice = notices[0].dump()
    assert "the official answer is A, but the runner shows B" in notice and "Raised by Pat" in notice
    qid = json.loads(notice)["blocks"][1]["elements"][0]["text"].split("question correct ")[1].split()[0]
    assert qid.startswith("po-")

    flags = await command(h, OWNER, "question flags")
    assert "1 flagged question" in flags and f"`{qid}` v1: official *A*, runner *B*" in flags
    fixed = await command(h, OWNER, f"question correct {qid} b")
    assert "answer A → *B* (v1 → v2)" in fixed and "1 session(s) re-scored" in fixed
    assert "1 flag(s) resolved" in fixed
    assert (await h.services.quiz.stats(pat)).points == 0  # A is no longer right: the points went
    assert "No flagged questions" in await command(h, OWNER, "question flags")
    assert "1 flagged question" in await command(h, OWNER, "question flags all")
    assert "is not a choice" in await command(h, OWNER, f"question correct {qid} Z")
    assert "usage: /rankzero question correct" in await command(h, OWNER, "question correct")


async def test_a_variant_runs_from_the_code_block_and_its_output_is_escaped(
    admin_slack: tuple[Harness, PrintRunner],
) -> None:
    h, runner = admin_slack
    pid = await answered_problem(h)
    # As Slack sends it: &, < and > of the typed text arrive as entities.
    text = f"dispute {pid} ```python\nprint('&lt;!channel&gt; &amp; ```boom')\n```"
    reply = await command(h, PLAYER, text)
    assert runner.specs[-1].code == "print('<!channel> & ```boom')\n"
    assert "your variant" in reply and "<!channel>" not in reply
    assert "&lt;!channel&gt; &amp; `\u200b``boom" in reply
    rank0 = next(
        b["text"]["text"]
        for b in json.loads(reply)["blocks"]
        if "*Rank 0*" in b.get("text", {}).get("text", "")
    )
    assert rank0.count("```") == 2  # the printed fence cannot close the block early
    assert "no choice matches" in reply and "Not flagged: a variant" in reply
    assert not [c for c in h.api.of("chat.postMessage") if c.args["channel"] == ADMIN_CHANNEL]
    assert "not closed" in await command(h, PLAYER, f"dispute {pid} ```print(1)")


# ---------------------------------------------------------------------- rendering and wiring
def test_verdict_blocks_show_every_rank_and_stay_within_limits() -> None:
    spec = make_spec(
        "render-1",
        "expert",
        "DDP",
        kind="predict_output",
        code="x",
        runner={"mode": "ddp", "nproc": 3, "gpus": 0, "init_process_group": True},
        choices=[{"text": "It hangs in all_reduce", "correct": True}, {"text": "<!here> 42"}],
    )
    q = question_from_spec(spec)
    ranks = (
        RankOutcome(
            0, None, None, "<!channel>\n" + "y" * 5000, "", True, None, StuckAt("main", 7, "all_reduce")
        ),
        RankOutcome(1, 1, None, "", "", False, RankException("RuntimeError", "<@U1> boom", 9), None),
        RankOutcome(2, None, 9, "", "", False, None, None),
    )
    verdict = RunVerdict("timeout", "ddp", 3, "gloo", 30.0, CPU, True, 1, ("killed after 30 s",), ranks)
    card = DisputeCard(
        q.id,
        1,
        q.prompt,
        RunSpec.from_question("x", spec["runner"]),
        False,
        q.choices,
        verdict,
        match_verdict(q, verdict, "x"),
    )
    blocks = dbk.verdict_blocks(card)
    text = json.dumps(blocks, ensure_ascii=False)
    assert "<!channel>" not in text and "<@U1>" not in text and "<!here>" not in text
    assert "stuck in all_reduce at line 7 (main)" in text and "output cut by the runner" in text
    assert ":dart: *root cause:* RuntimeError: &lt;@U1&gt; boom (line 9)" in text
    assert "killed by signal 9" in text and "note: killed after 30 s" in text
    assert "ddp × 3 ranks" in text
    for b in blocks:
        inner = b.get("text", {}).get("text") or b["elements"][0]["text"]
        assert len(inner) <= bk.MAX_TEXT
        assert inner.count("```") % 2 == 0  # every code block is closed, even when cut
    assert len(blocks) <= bk.MAX_MESSAGE_BLOCKS


async def test_admin_notice_without_a_channel_is_logged(
    tmp_path: Path, sqlite_template: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async for h in _harness(tmp_path, sqlite_template, contradicted_bank()):
        notice = AdminNotice("po-1", 1, "A", "B", "it printed 'x'", 7, "Pat")
        with caplog.at_level(logging.WARNING):
            await h.adapter.platform.post_admin_notice(notice)
        assert "no RANKZERO_SLACK_ADMIN_CHANNEL_ID set" in caplog.text
        assert not h.api.of("chat.postMessage")


def test_admin_channel_setting_reaches_the_platform() -> None:
    settings = Settings(
        database_url="sqlite+aiosqlite:///unused.db",
        slack_bot_token=SecretStr("xoxb-x"),
        slack_signing_secret=SecretStr("s"),
        slack_admin_channel_id="C0ADMIN",
    )
    assert build_adapter(settings).platform.admin_channel == "C0ADMIN"


async def test_preview_warns_when_the_marked_answer_is_wrong(
    admin_slack: tuple[Harness, PrintRunner],
) -> None:
    h, _ = admin_slack
    wrong = {**PREDICT_FORM, "id": "slack-wrong-1", "choices": "hello\nhello hello\n*nothing"}
    view = (await h.send.submit(OWNER, bk.QUESTION_CALLBACK, wrong)).json()["view"]
    shown = json.dumps(view, ensure_ascii=False)
    assert "*Preview of `slack-wrong-1`* · ddp × 2 ranks" in shown  # a draft has no version yet
    assert "contradicts the answer marked correct" in shown and "choice *A* matches" in shown
    assert view["submit"]["text"] == "Save"  # the admin decides; nothing is saved until then
    assert "slack-wrong-1" not in await question_ids(h)
