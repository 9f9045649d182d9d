"""Button clicks (block_actions): Start on the daily post, then answer / Hint / Next inside the modal.

Each handler acks first (Slack wants an answer within 3 s), then calls the command layer's problem flow
(bot.commands.flow: the service calls and the time-up timer) and updates the modal. An answer carries
the action's ``action_ts`` as the service's idempotency key, so a redelivered click records nothing and
changes nothing.
"""

from __future__ import annotations

import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures
from bot.adapters.slack.context import SlackContext
from bot.commands.flow import Shown
from bot.core import ids
from bot.core.errors import RankZeroError


def _action(body: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    decoded = ids.decode(str(body["actions"][0]["action_id"]))
    if decoded is None:  # pragma: no cover - the listeners match the rz: prefix
        raise ValueError("not a RankZero component")
    return decoded.action, decoded.args


def _next_view(shown: Shown) -> dict[str, Any]:
    """The modal for the player's next problem, or their summary when all are over."""
    if shown.card is not None:
        return bk.problem_view(shown.card)
    assert shown.summary is not None
    return bk.summary_view(shown.summary)


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
        actor = await ctx.actor(body["user"], body=body)
        try:
            view = _next_view(await ctx.flow.next(actor, int(args[0]), view_id, view_id))
        except RankZeroError as exc:
            view = bk.message_view(str(exc))
        await ctx.update_view(view_id, view)

    @app.action(re.compile(r"^rz:answer:"))
    async def answer(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        problem_id, letter = int(args[0]), args[1]
        view_id = str(body["view"]["id"])
        actor = await ctx.actor(body["user"], body=body)
        key = f"slack:{actor.player.user_id}:{body['actions'][0]['action_ts']}"
        try:
            shown = await ctx.flow.answer(actor, problem_id, letter, key, view_id, view_id)
        except RankZeroError as exc:  # late, out of attempts, already tried...: say it on the problem
            card = await ctx.flow.view(actor, problem_id)
            await ctx.update_view(view_id, bk.problem_view(card, None, note=str(exc)))
            return
        if shown.feedback is not None and shown.feedback.duplicate:
            return  # a redelivered click: already answered and shown
        assert shown.card is not None
        await ctx.update_view(view_id, bk.problem_view(shown.card, shown.feedback))

    @app.action(re.compile(r"^rz:hint:"))
    async def hint(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        problem_id = int(args[0])
        view_id = str(body["view"]["id"])
        actor = await ctx.actor(body["user"], body=body)
        try:
            shown = await ctx.flow.hint(actor, problem_id, view_id, view_id)
        except RankZeroError as exc:
            card = await ctx.flow.view(actor, problem_id)
            await ctx.update_view(view_id, bk.problem_view(card, None, note=str(exc)))
            return
        assert shown.card is not None
        await ctx.update_view(view_id, bk.problem_view(shown.card))

    @app.action(re.compile(r"^rz:next:"))
    async def next_(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        view_id = str(body["view"]["id"])
        actor = await ctx.actor(body["user"], body=body)
        try:
            view = _next_view(await ctx.flow.next(actor, int(args[0]), view_id, view_id))
        except RankZeroError as exc:
            view = bk.message_view(str(exc))
        await ctx.update_view(view_id, view)
