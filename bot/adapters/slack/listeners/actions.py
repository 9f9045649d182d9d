"""Button clicks (block_actions): Start on the daily post, then answer / Hint / Next on the problem.

Each handler acks first (Slack wants an answer within 3 s), then calls the command layer's problem flow
(bot.commands.flow: the service calls and the time-up timer) and shows the outcome where the problem is:
a modal (views.update with its hash) or, in a rush, a private message in the channel (the click's
response_url). Start chooses with the workspace's request budget (budget.py); the player's clock starts
only once Slack accepted the view or message with the problem (ProblemFlow.next_shown). An answer carries
the action's ``action_ts`` as the service's idempotency key, so a redelivered click records nothing and
changes nothing.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures
from bot.adapters.slack.context import SlackContext, Surface
from bot.commands.flow import Shown
from bot.core import ids
from bot.core.errors import RankZeroError
from bot.core.models import Actor

log = logging.getLogger(__name__)

#: A Start click older than this (seconds since ``action_ts``) does not try a modal: views.open must use
#: the trigger_id within 3 s of the click (https://api.slack.com/docs/triggers), and the call takes time.
TRIGGER_MARGIN_S = 2.5
#: What views.open answers for a trigger that is too old or used.
TRIGGER_ERRORS = ("expired_trigger_id", "exchanged_trigger_id")

#: Shown instead of a problem too long for a private message (a rush plays in messages).
TOO_LONG = (
    "This problem is too long for a message: press Start again in a minute to open it in a window "
    "(your time has not started)."
)


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


def _click_age(body: dict[str, Any], now: float) -> float:
    """Seconds since the user clicked (Slack's ``action_ts``); 0 when the payload does not say."""
    try:
        return max(0.0, now - float(body["actions"][0]["action_ts"]))
    except (KeyError, IndexError, TypeError, ValueError):
        return 0.0


def _surface(body: dict[str, Any]) -> tuple[Surface, str | None]:
    """Where the clicked problem is shown: its modal (the view id names the surface), or the private
    message the click came from (changed through this click's response_url; one surface per challenge).
    """
    view = body.get("view")
    if view and view.get("id"):
        return Surface(view_id=str(view["id"])), str(view["id"])
    return Surface(response_url=str(body["response_url"])), None


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach the button listeners."""

    async def show_next(
        actor: Actor,
        challenge_id: int,
        surface: Surface,
        sid: str | None,
        *,
        replace: bool,
    ) -> None:
        async def show(shown: Shown) -> bool:
            view = _next_view(shown)
            if surface.view_id is None and not bk.fits_message(view):
                # Too long for a message (50 blocks; a modal holds 100): say how to see it whole. The
                # problem is not on the player's screen, so its clock must not start (False).
                await ctx.show(surface, bk.message_view(TOO_LONG), replace=replace)
                return False
            return await ctx.show(surface, view, replace=replace)

        try:
            await ctx.flow.next_shown(actor, challenge_id, surface, show, sid)
        except RankZeroError as exc:
            await ctx.show(surface, bk.message_view(str(exc)), replace=replace)

    @app.action(re.compile(r"^rz:start:"))
    async def start(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        ws = ctx.workspace_key()
        # A modal costs a views.open within the trigger's 3 s and views.update calls after it, from the
        # workspace's Tier 4 budget (budget.py). When the budget has both to spare now (keeping half a
        # burst for the answers of players already in modals) the problem opens in a modal; in a rush it
        # comes as a private message through the click's response_url, which no Web API budget limits.
        # The trigger_id is good for 3 s from the click (action_ts): a click that waited in a queue (ours
        # or Slack's) goes to the message at once rather than to a views.open bound to be refused.
        keep = ctx.budget.burst / 2
        fresh = _click_age(body, time.time()) < TRIGGER_MARGIN_S  # Slack's time, not the game clock
        modal = (
            fresh
            and ctx.budget.available(ws, "views.update") >= 1 + keep
            and ctx.budget.try_take(ws, "views.open", keep=keep)
        )
        url = body.get("response_url")
        surface, sid = Surface(response_url=str(url)), None
        if modal or not url:
            try:
                view_id = await ctx.open_view(body["trigger_id"], bk.message_view("Loading your problem…"))
                body[failures.OPENED_VIEW] = view_id
                surface, sid = Surface(view_id=view_id), view_id
            except SlackApiError as exc:
                # Expired on the way, or refused: the message path still needs no trigger.
                if not url or exc.response.get("error") not in TRIGGER_ERRORS:
                    raise
                log.info(
                    "Start: views.open refused (%s); the problem goes to a message", exc.response["error"]
                )
        actor = await ctx.player_actor(body)
        await show_next(actor, int(args[0]), surface, sid, replace=False)

    @app.action(re.compile(r"^rz:answer:"))
    async def answer(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        problem_id, letter = int(args[0]), args[1]
        surface, sid = _surface(body)
        actor = await ctx.player_actor(body)
        key = f"slack:{actor.player.user_id}:{body['actions'][0]['action_ts']}"

        async def fresh() -> dict[str, Any]:
            return bk.problem_view(await ctx.flow.view(actor, problem_id))

        try:
            shown = await ctx.flow.answer(actor, problem_id, letter, key, surface, sid)
        except RankZeroError as exc:  # late, out of attempts, already tried...: say it on the problem
            card = await ctx.flow.view(actor, problem_id)
            await ctx.show(surface, bk.problem_view(card, None, note=str(exc)), rerender=fresh)
            return
        if shown.feedback is not None and shown.feedback.duplicate:
            return  # a redelivered click: already answered and shown
        assert shown.card is not None
        await ctx.show(surface, bk.problem_view(shown.card, shown.feedback), rerender=fresh)

    @app.action(re.compile(r"^rz:hint:"))
    async def hint(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        problem_id = int(args[0])
        surface, sid = _surface(body)
        actor = await ctx.player_actor(body)

        async def fresh() -> dict[str, Any]:
            return bk.problem_view(await ctx.flow.view(actor, problem_id))

        try:
            shown = await ctx.flow.hint(actor, problem_id, surface, sid)
        except RankZeroError as exc:
            card = await ctx.flow.view(actor, problem_id)
            await ctx.show(surface, bk.problem_view(card, None, note=str(exc)), rerender=fresh)
            return
        assert shown.card is not None
        await ctx.show(surface, bk.problem_view(shown.card), rerender=fresh)

    @app.action(re.compile(r"^rz:next:"))
    async def next_(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        _, args = _action(body)
        surface, sid = _surface(body)
        actor = await ctx.player_actor(body)
        await show_next(actor, int(args[0]), surface, sid, replace=True)
