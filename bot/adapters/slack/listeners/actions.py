"""Button clicks (block_actions): Start on the daily post, then answer / Hint / Next inside the modal.

Each handler acks first (Slack wants an answer within 3 s), then makes its service call and updates the
modal. An answer carries the action's ``action_ts`` as the service's idempotency key, so a redelivered
click records nothing and changes nothing.
"""

from __future__ import annotations

import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures
from bot.adapters.slack.context import SlackContext
from bot.core import ids
from bot.core.errors import RankZeroError, TimeUpError
from bot.core.models import Actor


def _action(body: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    decoded = ids.decode(str(body["actions"][0]["action_id"]))
    if decoded is None:  # pragma: no cover - the listeners match the rz: prefix
        raise ValueError("not a RankZero component")
    return decoded.action, decoded.args


async def _next_view(ctx: SlackContext, actor: Actor, challenge_id: int) -> tuple[dict[str, Any], Any]:
    """The modal for the player's next problem (started now), or their summary when all are over."""
    quiz = ctx.services.quiz
    problem = await quiz.next_problem(actor, challenge_id)
    if problem is None:
        return bk.summary_view(await quiz.summary(actor, challenge_id)), None
    card = await quiz.start_problem(actor, problem.id)
    return bk.problem_view(card), card


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach the button listeners."""

    @app.action(re.compile(r"^rz:start:"))
    async def start(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        # The trigger_id expires 3 s after the click: open the modal before users.info and the
        # database, then put the problem in it by view id.
        opened = await ctx.client.views_open(
            trigger_id=body["trigger_id"], view=bk.message_view("Loading your problem…")
        )
        view_id = body[failures.OPENED_VIEW] = str(opened["view"]["id"])
        actor = await ctx.actor(body["user"])
        try:
            view, card = await _next_view(ctx, actor, int(args[0]))
        except RankZeroError as exc:
            view, card = bk.message_view(str(exc)), None
        await ctx.update_view(view_id, view)
        if card is not None and not card.over:
            ctx.arm_timer(view_id, actor, card.problem_id, card.deadline)

    @app.action(re.compile(r"^rz:answer:"))
    async def answer(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        problem_id, letter = int(args[0]), args[1]
        view_id = str(body["view"]["id"])
        actor = await ctx.actor(body["user"])
        key = f"slack:{actor.player.user_id}:{body['actions'][0]['action_ts']}"
        quiz = ctx.services.quiz
        try:
            feedback = await quiz.answer(actor, problem_id, letter, idempotency_key=key)
        except TimeUpError as exc:
            card = await quiz.view_problem(actor, problem_id)
            await ctx.update_view(view_id, bk.problem_view(card, None, note=str(exc)))
            return
        except RankZeroError as exc:
            card = await quiz.view_problem(actor, problem_id)
            await ctx.update_view(view_id, bk.problem_view(card, None, note=str(exc)))
            return
        if feedback.duplicate:
            return  # a redelivered click: already answered and shown
        card = await quiz.view_problem(actor, problem_id)
        await ctx.update_view(view_id, bk.problem_view(card, feedback))

    @app.action(re.compile(r"^rz:hint:"))
    async def hint(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        problem_id = int(args[0])
        actor = await ctx.actor(body["user"])
        quiz = ctx.services.quiz
        note = None
        try:
            await quiz.hint(actor, problem_id)
        except RankZeroError as exc:
            note = str(exc)
        card = await quiz.view_problem(actor, problem_id)
        await ctx.update_view(str(body["view"]["id"]), bk.problem_view(card, None, note=note))

    @app.action(re.compile(r"^rz:next:"))
    async def next_(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        view_id = str(body["view"]["id"])
        actor = await ctx.actor(body["user"])
        try:
            view, card = await _next_view(ctx, actor, int(args[0]))
        except RankZeroError as exc:
            view, card = bk.message_view(str(exc)), None
        ctx.showing[view_id] = card.problem_id if card is not None else -1
        await ctx.update_view(view_id, view)
        if card is not None and not card.over:
            ctx.arm_timer(view_id, actor, card.problem_id, card.deadline)
