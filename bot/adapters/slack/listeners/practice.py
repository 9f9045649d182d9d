"""Practice in Slack: ``/rankzero quiz|review|explain`` and their buttons and form, in a private modal.

Each command opens a small "Loading…" modal at once (a trigger_id is valid for 3 seconds), then makes
its service call and replaces the modal by view id. Buttons (``rz:practice:`` ids) ack first, make one
service call (a second for what comes next) and update the modal. The explain answer is graded before
the submission's ack, because the result (or an error on the field) travels in the ack; grading is
deterministic and takes milliseconds.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures
from bot.adapters.slack import practice_blocks as pb
from bot.adapters.slack.context import SlackContext
from bot.commands.practice import PracticeFlow, ReviewStep
from bot.core.errors import RankZeroError
from bot.core.models import Actor, ChannelRef
from bot.core.practice import PracticeError, PracticeService


def _flow(ctx: SlackContext) -> PracticeFlow:
    """The platform-neutral practice steps over the running services (bot.commands.practice)."""
    practice: PracticeService = ctx.services.app.practice
    return PracticeFlow(practice)


#: Where the dispatcher leaves the id of the modal it opened for this command (see open_early).
_OPENED = failures.OPENED_VIEW


async def _open_loading(ctx: SlackContext, body: dict[str, Any], title: str) -> str:
    if _OPENED in body:
        return str(body[_OPENED])
    body[_OPENED] = await ctx.open_view(body["trigger_id"], pb.loading_view(title))
    return str(body[_OPENED])


async def open_early(ctx: SlackContext, sub: str, body: dict[str, Any]) -> None:
    """Open a practice command's "Loading…" modal before anything else (the actor lookup may call
    users.info, and the trigger_id expires 3 s after the command was sent).
    """
    title = {"quiz": pb.QUIZ_TITLE, "review": pb.REVIEW_TITLE, "explain": pb.EXPLAIN_TITLE}.get(sub)
    if title is not None:
        await _open_loading(ctx, body, title)


async def _fill(
    ctx: SlackContext, view_id: str, title: str, make: Callable[[], Awaitable[dict[str, Any]]]
) -> None:
    """Show ``make()``'s view in the modal, or the service's refusal (unknown topic, empty bank...)."""
    try:
        view = await make()
    except RankZeroError as exc:
        view = pb.message_view(title, str(exc))
    await ctx.update_view(view_id, view)


def _review_view(ctx: SlackContext, step: ReviewStep, lead: str | None) -> dict[str, Any]:
    """The step's card front, or the end of the session."""
    if step.card is not None:
        return pb.flashcard_front_view(step.card, lead)
    assert step.summary is not None
    return pb.review_done_view(step.summary, ctx.clock.now(), lead)


# ---------------------------------------------------------------------- slash subcommands
async def quiz_command(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    """``/rankzero quiz [topic]``: five untimed questions in a modal."""
    view_id = await _open_loading(ctx, body, pb.QUIZ_TITLE)
    topic = " ".join(args).strip() or None

    async def make() -> dict[str, Any]:
        # "weakest": the workspace's weakest topics (``/rankzero insights`` offers it).
        return pb.quiz_question_view(await _flow(ctx).start_quiz(actor.player, topic, actor.tenant))

    await _fill(ctx, view_id, pb.QUIZ_TITLE, make)
    return []


async def review_command(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    """``/rankzero review``: the due flashcards, one at a time; ``/rankzero review nudge on|off`` turns
    the daily DM of due cards on or off instead, ``review new N`` sets the new cards a day and
    ``review timezone ZONE`` the player's timezone (their day starts at 4 am there); ``review timezone``
    alone shows it and offers the zone Slack has for the user (users.info ``tz``) with a button.
    """
    view_id = await _open_loading(ctx, body, pb.REVIEW_TITLE)

    async def make() -> dict[str, Any]:
        if args[:1] == ["new"]:
            try:
                count = await _flow(ctx).set_new_per_day(actor.player, " ".join(args[1:]))
            except ValueError:
                return pb.message_view(pb.REVIEW_TITLE, "Use `/rankzero review new N` with N from 0 to 200.")
            return pb.message_view(pb.REVIEW_TITLE, pb.new_per_day_text(count))
        if args == ["timezone"]:
            # Slack knows the user's zone (their profile's): offer it rather than make them type it. It
            # is not adopted silently: a player who set another zone on purpose keeps it.
            slack_zone = await ctx.user_timezone(actor.player.user_id)
            return pb.timezone_offer_view(await _flow(ctx).timezone(actor.player), slack_zone)
        if args[:1] == ["timezone"]:
            zone = await _flow(ctx).set_timezone(actor.player, " ".join(args[1:]))
            return pb.message_view(pb.REVIEW_TITLE, pb.timezone_text(zone))
        if args[:1] == ["nudge"]:
            try:
                on = await _flow(ctx).set_nudge(actor.player, " ".join(args[1:]))
            except ValueError:
                return pb.message_view(
                    pb.REVIEW_TITLE, "Use `/rankzero review nudge on` or `/rankzero review nudge off`."
                )
            return pb.message_view(pb.REVIEW_TITLE, pb.nudge_setting_text(on))
        step = await _flow(ctx).review(actor.player, actor.tenant)
        assert step.summary is not None
        return _review_view(ctx, step, pb.review_summary_line(step.summary))

    await _fill(ctx, view_id, pb.REVIEW_TITLE, make)
    return []


async def explain_command(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    """``/rankzero explain [topic]``: a prompt and an answer field; submitting grades it."""
    view_id = await _open_loading(ctx, body, pb.EXPLAIN_TITLE)
    topic = " ".join(args).strip() or None

    async def make() -> dict[str, Any]:
        return pb.explain_modal(await _flow(ctx).explain(actor.player, topic, actor.tenant))

    await _fill(ctx, view_id, pb.EXPLAIN_TITLE, make)
    return []


#: The practice subcommands of ``/rankzero`` (merged into commands.SUBCOMMANDS).
COMMANDS = {"quiz": quiz_command, "review": review_command, "explain": explain_command}


def _answer_text(view: dict[str, Any]) -> str:
    values = (view.get("state") or {}).get("values") or {}
    return str(((values.get(pb.ANSWER_BLOCK) or {}).get("value") or {}).get("value") or "")


# ---------------------------------------------------------------------- buttons and the explain form
def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach the practice button listeners and the explain submission."""

    @app.action(re.compile("^" + re.escape(pb.ID_PREFIX)))
    async def practice_button(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        action, args = pb.parse_action(str(body["actions"][0]["action_id"]))
        view_id = str(body["view"]["id"])
        clicker = await ctx.actor(body["user"], body=body)
        player = clicker.player
        flow = _flow(ctx)
        title = pb.QUIZ_TITLE if action.startswith("quiz") else pb.REVIEW_TITLE

        async def make() -> dict[str, Any] | None:
            if action == "quiz":
                answered = await flow.answer_quiz(player, int(args[0]), int(args[1]), args[2])
                assert answered.feedback is not None
                return None if answered.feedback.duplicate else pb.quiz_feedback_view(answered.feedback)
            if action == "quiznext":
                step = await flow.next_question(player, int(args[0]))
                if step.question is not None:
                    return pb.quiz_question_view(step.question)
                assert step.result is not None
                return pb.quiz_result_view(step.result)
            if action == "tz":  # "Use <Slack's zone>": validated again as any typed zone is
                zone = await flow.set_timezone(player, args[0])
                return pb.message_view(pb.REVIEW_TITLE, pb.timezone_text(zone))
            if action == "reveal":
                shown = await flow.reveal(player, int(args[0]), int(args[1]), clicker.tenant)
                if shown.revealed and shown.card is not None:
                    return pb.flashcard_back_view(shown.card)
                # Graded meanwhile (another click, another device) or another card fell due first: go on
                # with the deck as it is now rather than reveal a card that is not the next one.
                return _review_view(ctx, shown, "Your deck changed meanwhile: here is your next card.")
            graded = await flow.grade(player, int(args[0]), int(args[1]), args[2], clicker.tenant)
            assert graded.outcome is not None
            if graded.outcome.duplicate:
                return None  # a second click on the same showing: the first one updates the modal
            return _review_view(ctx, graded, pb.outcome_line(graded.outcome))

        try:
            view = await make()
        except RankZeroError as exc:
            view = pb.message_view(title, str(exc))
        if view is not None:
            await ctx.update_view(view_id, view)

    @app.view(pb.EXPLAIN_CALLBACK)
    async def explain_submit(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        meta = str(view.get("private_metadata") or "")
        if not meta.isdigit():
            await ack(
                response_action="errors",
                errors={pb.ANSWER_BLOCK: "this form is out of date: run /rankzero explain again"},
            )
            return
        started = time.monotonic()
        answer = _answer_text(view)

        async def grade() -> failures.Submitted:
            player = (await ctx.actor(body["user"], body=body)).player
            try:
                result = await _flow(ctx).submit_explanation(player, int(meta), answer)
            except PracticeError as exc:  # empty or too long: said on the field, the text stays editable
                late = pb.message_view(pb.EXPLAIN_TITLE, f"{exc}: run /rankzero explain again")
                return failures.Submitted(
                    {"response_action": "errors", "errors": {pb.ANSWER_BLOCK: str(exc)[:150]}}, late
                )
            except RankZeroError as exc:
                return failures.Submitted(
                    {"response_action": "update", "view": pb.message_view(pb.EXPLAIN_TITLE, str(exc))}
                )
            return failures.Submitted({"response_action": "update", "view": pb.explain_result_view(result)})

        await failures.answer_submission(
            ack,
            ctx.client,
            str(view.get("id")),
            grade(),
            working=pb.loading_view(pb.EXPLAIN_TITLE),
            started=started,
        )

    @app.view(pb.PRACTICE_CALLBACK)
    async def practice_closed(ack: AsyncAck) -> None:
        # Practice modals other than explain have no submit button; acknowledge anything that arrives.
        await ack()
