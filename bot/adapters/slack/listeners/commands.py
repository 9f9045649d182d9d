"""The one slash command, ``/rankzero <subcommand>``: parse, make one service call, answer ephemerally.

It acks at once (empty body: nothing shown yet) and answers through ``respond`` (the command's
response_url), so database or Web API time never runs into Slack's 3-second limit.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures, permissions, uploads
from bot.adapters.slack import insight_blocks as ib
from bot.adapters.slack import practice_blocks as pb
from bot.adapters.slack.context import SlackContext
from bot.adapters.slack.listeners import disputes, practice
from bot.commands.handlers import NoChallenge, PostCheck
from bot.commands.parsing import (
    parse_close_now,
    parse_leaderboard,
    parse_post_now,
    parse_retire,
    parse_schedule_options,
)
from bot.commands.web import web_link
from bot.core.errors import ConfigurationError, RankZeroError
from bot.core.models import Actor, ChannelRef
from bot.core.schedule_text import describe_schedule, meanwhile_text

COMMAND = "/rankzero"

Handler = Callable[[SlackContext, Actor, ChannelRef, list[str], dict[str, Any]], Awaitable[list[bk.Block]]]


async def _help(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    return [bk.section(bk.help_text(actor.is_admin))]


async def _challenge(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    # Only shows: a challenge is created by a post (scheduled or post-now), which also gives it its
    # channel message and closing time.
    card = await ctx.commands.challenge(ch)
    if isinstance(card, NoChallenge):
        return [
            bk.section(
                "There is no challenge in this channel today. Practise any time with `/rankzero quiz`,"
                " `/rankzero review` or `/rankzero explain` (private, not ranked)."
            )
        ]
    return bk.challenge_blocks(card)


async def _leaderboard(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    scope, period = parse_leaderboard(args)
    return bk.leaderboard_blocks(await ctx.commands.leaderboard(actor, ch, scope, period))


async def _stats(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    stats = await ctx.commands.stats(actor.player, ch)
    practice = [] if stats.practice is None else pb.practice_stats_blocks(stats.practice)
    # The figures first, privately, as every reply here; then the chart (issue 30). Slack has no private
    # files in a channel, so the chart goes to the player's DM with the app and the reply's second line
    # says where it is, or why it could not be sent: the figures never wait on it or depend on it.
    respond = failures.Responder(ctx.client, body)
    for chunk in bk.split_message([*bk.stats_blocks(stats.record), *practice]):
        await respond(blocks=chunk, text="RankZero", response_type="ephemeral")
    return [bk.context(await uploads.send_stats_chart(ctx.client, actor.player.user_id, stats.record))]


async def _web(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    # Any member, for the channel asked in: the page shows what this channel already sees. The reply is
    # ephemeral like every one here (the link is a credential until it expires).
    if args:
        raise ConfigurationError("usage: /rankzero web (no options: a link to this channel's page)")
    return [bk.section(bk.esc(web_link(ctx.services.web_links, ch).text()))]


async def _dispute(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    return await disputes.dispute(ctx, actor, ch, args, str(body.get("text") or ""))


async def _schedule(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    sub = args[0] if args else "show"
    meanwhile = ""
    if sub == "set":
        ctx.admin_policy.require(actor)
        options = parse_schedule_options(args[1:])
        meanwhile = meanwhile_text(await ctx.commands.schedule_set(actor, ch, options, _can_post(ctx, ch)))
    elif sub in ("pause", "resume"):
        meanwhile = meanwhile_text(await ctx.commands.schedule_pause(actor, ch, paused=sub == "pause"))
    elif sub != "show":
        raise ConfigurationError("usage: /rankzero schedule show|set --time 09:00 ...|pause|resume")
    view = await ctx.commands.schedule_show(ch)
    if view is None:
        return [bk.section("This channel has no schedule: `/rankzero schedule set --time 09:00`")]
    nxt = ", ".join(bk.date_token(t) for t in view.next_posts) or "none (paused)"
    said = [bk.section(f"*Schedule* · {bk.esc(describe_schedule(view.schedule))}\nNext posts: {nxt}")]
    # Another admin's save in between is named, not hidden (issue 25 §5).
    return [bk.section(f":warning: {bk.esc(meanwhile)}"), *said] if meanwhile else said


def _can_post(ctx: SlackContext, ch: ChannelRef) -> PostCheck:
    async def check() -> None:
        await permissions.ensure_can_post(ctx.client, ch.channel_id, ctx.scopes)

    return check


async def _post_now(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    ctx.admin_policy.require(actor)
    parse_post_now(args, command=COMMAND + " ")
    card = await ctx.commands.post_now(actor, ch, _can_post(ctx, ch))
    closes = f", closes {bk.date_token(card.closes_at)}" if card.closes_at else ", open until `close-now`"
    return [bk.section(f"Posted *{bk.esc(card.title)}* (challenge {card.challenge_id}{closes}).")]


async def _close_now(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    ctx.admin_policy.require(actor)
    results = await ctx.commands.close_now(actor, ch, parse_close_now(args, command=COMMAND + " "))
    if results is None:
        return [bk.section("That challenge was already closed.")]
    closed = f"Closed *{bk.esc(results.title)}*: {results.players} players"
    if results.not_posted is not None:
        # The close stands (answers are over); the admin hears why the results are not out, and that the
        # outbox goes on trying: pressing again would only say "already closed".
        return [bk.section(f"{closed}. The results are *not posted yet*: {bk.esc(results.not_posted)}.")]
    return [bk.section(f"{closed}; results posted.")]


async def _question(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    ctx.admin_policy.require(actor)
    if args[:1] == ["add"]:
        # The dispatcher opened a "Loading" modal before the user lookup (see open_form_early).
        await ctx.update_view(str(body[failures.OPENED_VIEW]), bk.question_modal())
        return []
    if args[:1] == ["retire"]:
        question_id = parse_retire(args[1:], command=COMMAND + " ")
        await ctx.commands.retire(actor, question_id)
        return [bk.section(f"Retired `{bk.esc(question_id)}`: it will not be picked again.")]
    if args[:1] == ["correct"]:
        return await disputes.question_correct(ctx, actor, args[1:])
    if args[:1] == ["flags"]:
        return await disputes.question_flags(ctx, actor, args[1:])
    raise ConfigurationError(
        "usage: /rankzero question add | retire <question-id> | correct <question-id> <letter> | flags [all]"
    )


async def _difficulty(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    ctx.admin_policy.require(actor)
    return ib.difficulty_blocks(await ctx.commands.difficulty(actor))


async def _insights(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    ctx.admin_policy.require(actor)
    return ib.insights_blocks(await ctx.commands.insights(actor))


SUBCOMMANDS: dict[str, Handler] = {
    "help": _help,
    "challenge": _challenge,
    "leaderboard": _leaderboard,
    "stats": _stats,
    "dispute": _dispute,
    "schedule": _schedule,
    "post-now": _post_now,
    "close-now": _close_now,
    "question": _question,
    "web": _web,
    "difficulty": _difficulty,
    "insights": _insights,
    **practice.COMMANDS,
}


async def open_form_early(ctx: SlackContext, sub: str, args: list[str], body: dict[str, Any]) -> None:
    """``question add``: open a "Loading" modal before anything else (the admin check may call users.info,
    and the trigger_id expires 3 s after the command was sent); the form or the refusal replaces it.
    """
    if sub == "question" and args[:1] == ["add"]:
        body[failures.OPENED_VIEW] = await ctx.open_view(
            body["trigger_id"], bk.message_view("Loading the question form…")
        )


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach ``/rankzero``."""

    @app.command(COMMAND)
    async def rankzero(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        respond = failures.Responder(ctx.client, body)
        try:
            # A ``` block (a dispute's variant) is code, not words: only the text before it is split.
            words = shlex.split(str(body.get("text") or "").partition("```")[0])
        except ValueError as exc:
            await respond(text=f"Could not read that command: {exc}", response_type="ephemeral")
            return
        sub, args = (words[0].lower(), words[1:]) if words else ("help", [])
        handler = SUBCOMMANDS.get(sub)
        await practice.open_early(ctx, sub, body)
        await open_form_early(ctx, sub, args, body)
        actor = await ctx.actor(
            str(body["user_id"]), str(body.get("user_name") or body["user_id"]), body=body
        )
        channel = ctx.channel(ctx.workspace_id(body), str(body["channel_id"]), body.get("channel_name"))
        if handler is None:
            text = f"Unknown command `{bk.esc(sub)}`.\n{bk.help_text(actor.is_admin)}"
            await respond(text=text, blocks=[bk.section(text)], response_type="ephemeral")
            return
        try:
            out = await handler(ctx, actor, channel, args, body)
        except RankZeroError as exc:
            if failures.OPENED_VIEW in body:  # a modal is open for this command: say it there
                await ctx.update_view(str(body[failures.OPENED_VIEW]), bk.message_view(str(exc)))
                return
            out = [bk.section(f":warning: {bk.esc(str(exc))}")]
        for chunk in bk.split_message(out) if out else []:
            await respond(blocks=chunk, text="RankZero", response_type="ephemeral")
