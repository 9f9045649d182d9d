"""No silent failures on Slack, at the real boundary (signed HTTP into the Bolt app, the strict fake Web
API): every interaction gets an answer whatever fails, and 429s are waited out, even in a rush.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import dispute_blocks as dbk
from bot.adapters.slack import failures
from bot.adapters.slack import practice_blocks as pb
from bot.adapters.slack.listeners.actions import TOO_LONG
from bot.core.errors import ConfigurationError
from bot.core.ports import TransientConflictError
from tests.bot.adapters.slack.test_slack_adapter import (
    OWNER,
    PLAYER,
    SLACK_TENANT,
    Harness,
    _harness,
    buttons,
    text_of,
)
from tests.bot.adapters.slack.test_slack_practice import _command_modal
from tests.conftest import make_spec, test_bank
from tests.shipped import shipped_specs
from tests.slack_fake import ACK_TIMEOUT_S


def broken(error: BaseException) -> Any:
    async def fail(*_args: Any, **_kw: Any) -> Any:
        raise error

    return fail


async def test_a_crash_after_start_shows_an_error_instead_of_loading_forever(
    slack: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    challenge_id = await slack.post_challenge()
    monkeypatch.setattr(slack.services.quiz, "preview_next", broken(RuntimeError("database is locked")))
    r = await slack.send.click(PLAYER, f"rz:start:{challenge_id}")
    assert r.status_code == 200
    view_id = (await slack.api.wait_for("views.open"))[0].args["_view_id"]
    shown = (await slack.api.wait_for("views.update"))[0].args
    assert shown["view_id"] == view_id and failures.INTERNAL in text_of(shown["view"])
    assert "database is locked" not in text_of(shown["view"])  # the cause is logged, not shown


async def test_a_transient_conflict_on_an_answer_says_try_again(
    slack: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    pid = int(buttons(view)[0].split(":")[2])
    monkeypatch.setattr(slack.services.quiz, "answer", broken(TransientConflictError("deadlock")))
    shown = await slack.click_in_view(PLAYER, f"rz:answer:{pid}:A", view_id)
    assert failures.BUSY in text_of(shown)


async def test_a_crashing_command_answers_ephemerally(
    slack: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slack.services.quiz, "leaderboard", broken(OSError("connection reset")))
    r = await slack.send.command(PLAYER, "leaderboard")
    assert r.status_code == 200
    reply = (await slack.api.wait_for("response"))[0]
    assert failures.INTERNAL in reply.dump() and reply.args["response_type"] == "ephemeral"


async def test_a_start_whose_modal_cannot_open_shows_the_problem_in_a_message(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    slack.api.fail["views.open"] = "expired_trigger_id"  # Slack was slow to deliver the click
    slack.expected_refusals.append(("views.open", "expired_trigger_id"))
    await slack.send.click(PLAYER, f"rz:start:{challenge_id}")
    # Two replies: the post-now one and the click's, in whichever order they arrive (they are sent
    # concurrently over one shared connection pool).
    replies = await slack.api.wait_for("response", 2)
    (reply,) = [r for r in replies if r.args["_name"] != "cmd1"]
    # The expired trigger costs the player nothing: the problem comes as a private message instead of a
    # modal (no trigger needed), not "press again".
    assert "Problem 1 of" in reply.dump() and reply.args["response_type"] == "ephemeral"
    assert failures.EXPIRED not in reply.dump()


async def test_a_problem_too_long_for_a_message_does_not_start_the_clock(
    slack: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    challenge_id = await slack.post_challenge()
    slack.api.fail["views.open"] = "expired_trigger_id"
    slack.expected_refusals.append(("views.open", "expired_trigger_id"))
    monkeypatch.setattr(bk, "fits_message", lambda _view: False)  # as a problem over 50 blocks would be
    await slack.send.click(PLAYER, f"rz:start:{challenge_id}")
    replies = await slack.api.wait_for("response", 2)
    (reply,) = [r for r in replies if r.args["_name"] != "cmd1"]
    assert TOO_LONG[:40] in reply.dump()
    # Not on the player's screen: no problem started, so no clock runs (the next Start shows it afresh).
    async with slack.services.app.engine.connect() as conn:
        started = (await conn.execute(text("SELECT COUNT(*) FROM play_sessions"))).scalar_one()
    assert started == 0


# ---------------------------------------------------------------------- the rush
# A rush of players pressing Start at once: tests/bot/adapters/slack/test_slack_rush.py (200 players, modals
# or messages).


# ---------------------------------------------------------------------- 3 seconds
#: The submission's ack budget in these tests (the app's is failures.ACK_BUDGET_S, 2 s): work that stalls
#: past it is answered "Working…" and shown when done, as with the real budget, a test stall can be short.
#: Slack's own deadline (tests/slack_fake.py ACK_TIMEOUT_S, 3 s) is unchanged, so the "Working…" ack has
#: more room to arrive in time than in the app.
TEST_ACK_BUDGET_S = 0.5


@pytest.fixture
def short_ack_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failures, "ACK_BUDGET_S", TEST_ACK_BUDGET_S)


def stalled(real: Any, seconds: float) -> Any:
    """``real`` after a stall (a database that takes ``seconds`` to answer), then the real work."""

    async def slow(*args: Any, **kw: Any) -> Any:
        await asyncio.sleep(seconds)
        return await real(*args, **kw)

    return slow


QUESTION = {
    "id": "slack-stalled-1",
    "kind": ("select", "conceptual"),
    "topic": "DDP",
    "difficulty": ("select", "advanced"),
    "prompt": "Which collective does DDP use for gradients?",
    "choices": "*all-reduce\nbroadcast\nscatter",
    "explanation": "Buckets are all-reduced.",
}


async def test_question_add_opens_its_form_while_users_info_is_slow(slack: Harness) -> None:
    slack.api.stall["users.info"] = 3.5  # longer than the trigger_id lives
    r = await slack.send.command(OWNER, "question add")
    assert r.status_code == 200
    opened = (await slack.api.wait_for("views.open"))[0].args
    form = (await slack.api.wait_for("views.update", timeout=15))[0].args
    assert form["view_id"] == opened["_view_id"] and form["view"]["callback_id"] == bk.QUESTION_CALLBACK


async def test_a_database_stall_past_slacks_3_s_on_question_add_answers_in_time_and_saves(
    slack: Harness, monkeypatch: pytest.MonkeyPatch, short_ack_budget: None
) -> None:
    quiz = slack.services.quiz
    # Longer than Slack waits for the answer (3 s): without the budget the admin would see an error.
    monkeypatch.setattr(quiz, "admin_import", stalled(quiz.admin_import, ACK_TIMEOUT_S + 0.5))
    r = await slack.send.submit(OWNER, bk.QUESTION_CALLBACK, QUESTION)
    assert not slack.send.late, slack.send.late  # answered within 3 s: no error shown to the admin
    assert r.json()["response_action"] == "update" and "Working" in text_of(r.json()["view"])
    done = (await slack.api.wait_for("views.update", timeout=20))[0].args
    assert "Added question slack-stalled-1" in text_of(done["view"])
    assert "slack-stalled-1" in [q.id for q in await quiz.list_questions(view=SLACK_TENANT)]


async def test_a_stalled_preview_save_answers_in_time_and_saves(
    slack: Harness, monkeypatch: pytest.MonkeyPatch, short_ack_budget: None
) -> None:
    quiz = slack.services.quiz
    monkeypatch.setattr(quiz, "admin_import", stalled(quiz.admin_import, 2 * TEST_ACK_BUDGET_S))
    spec = make_spec("slack-stalled-2", "advanced", "DDP")
    r = await slack.send.submit(OWNER, dbk.PREVIEW_CALLBACK, {}, metadata="d:" + json.dumps(spec))
    assert not slack.send.late and r.json()["response_action"] == "update"
    done = (await slack.api.wait_for("views.update", timeout=20))[0].args
    assert "Saved question slack-stalled-2" in text_of(done["view"])
    assert "slack-stalled-2" in [q.id for q in await quiz.list_questions(view=SLACK_TENANT)]


async def test_a_stalled_explain_grading_answers_in_time(
    tmp_path: Path, sqlite_template: Path, monkeypatch: pytest.MonkeyPatch, short_ack_budget: None
) -> None:
    explains = [s for s in shipped_specs() if s["kind"] == "explain"]
    async for h in _harness(tmp_path, sqlite_template, test_bank() + explains):
        _, view = await _command_modal(h, PLAYER, "explain basics")
        practice = h.services.app.practice
        monkeypatch.setattr(
            practice, "submit_explanation", stalled(practice.submit_explanation, 2 * TEST_ACK_BUDGET_S)
        )
        updates = len(h.api.of("views.update"))
        answer = "Check that CUDA is available, then call model.to(device)."
        r = await h.send.submit(
            PLAYER, pb.EXPLAIN_CALLBACK, {"answer": answer}, metadata=view["private_metadata"]
        )
        assert not h.send.late and r.json()["response_action"] == "update"
        graded = (await h.api.wait_for("views.update", updates + 1, timeout=20))[-1].args
        assert "concepts" in text_of(graded["view"])


async def test_a_late_refusal_brings_the_form_back_with_what_the_admin_typed(
    slack: Harness, monkeypatch: pytest.MonkeyPatch, short_ack_budget: None
) -> None:
    async def slow_refusal(*_args: Any, **_kw: Any) -> Any:
        await asyncio.sleep(2 * TEST_ACK_BUDGET_S)
        raise ConfigurationError("the question bank is being synced: try again in a minute")

    monkeypatch.setattr(slack.services.quiz, "admin_import", slow_refusal)
    r = await slack.send.submit(OWNER, bk.QUESTION_CALLBACK, QUESTION)
    assert not slack.send.late and r.json()["response_action"] == "update"
    back = (await slack.api.wait_for("views.update", timeout=20))[0].args["view"]
    assert back["callback_id"] == bk.QUESTION_CALLBACK and "being synced" in text_of(back)
    prompt = next(b for b in back["blocks"] if b.get("block_id") == "prompt")
    assert prompt["element"]["initial_value"] == QUESTION["prompt"]
    kind = next(b for b in back["blocks"] if b.get("block_id") == "kind")
    assert kind["element"]["initial_option"]["value"] == "conceptual"
