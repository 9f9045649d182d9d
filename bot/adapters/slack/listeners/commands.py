"""The one slash command, ``/rankzero <subcommand>``: parse, make one service call, answer ephemerally.

It acks at once (empty body: nothing shown yet) and answers through ``respond`` (the command's
response_url), so database or Web API time never runs into Slack's 3-second limit.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures, permissions
from bot.adapters.slack import practice_blocks as pb
from bot.adapters.slack.context import SlackContext
from bot.adapters.slack.listeners import disputes, practice
from bot.core.errors import ConfigurationError, NotAdminError, RankZeroError
from bot.core.models import Actor, ChannelRef
from bot.core.schedule_text import describe_schedule
from bot.core.vocabulary import Period, Scope

COMMAND = "/rankzero"

#: ``schedule set`` options and the set_schedule argument each fills (ints where the CLI has ints).
SCHEDULE_OPTIONS: dict[str, tuple[str, type]] = {
    "--time": ("post_time", str),
    "--tz": ("timezone", str),
    "--days": ("days", str),
    "--problems": ("problems", int),
    "--time-limit": ("time_limit_s", int),
    "--attempts": ("attempts", int),
    "--window": ("window", str),
    "--reminder": ("reminder", str),
    "--weekly-summary": ("weekly_summary", str),
}

Handler = Callable[[SlackContext, Actor, ChannelRef, list[str], dict[str, Any]], Awaitable[list[bk.Block]]]


def parse_schedule_options(words: list[str]) -> dict[str, Any]:
    """``--time 09:00 --days mon-fri`` -> set_schedule keyword arguments, or a ConfigurationError."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        opt = words[i]
        if opt not in SCHEDULE_OPTIONS:
            raise ConfigurationError(
                f"unknown schedule option {opt!r}: use {', '.join(SCHEDULE_OPTIONS)} (each with a value)"
            )
        if i + 1 >= len(words):
            raise ConfigurationError(
                f"{opt} needs a value, e.g. {opt} {'09:00' if opt == '--time' else '...'}"
            )
        name, kind = SCHEDULE_OPTIONS[opt]
        try:
            out[name] = kind(words[i + 1])
        except ValueError:
            raise ConfigurationError(f"{opt} takes a whole number, not {words[i + 1]!r}") from None
        i += 2
    if not out:
        raise ConfigurationError("schedule set needs at least one option, e.g. --time 09:00")
    return out


def _require_admin(actor: Actor) -> None:
    if not actor.is_admin:
        raise NotAdminError(
            "only admins can do that: ask a workspace admin (or one listed in RANKZERO_ADMINS)"
        )


async def _help(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    return [bk.section(bk.help_text(actor.is_admin))]


async def _challenge(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    # Only shows: a challenge is created by a post (scheduled or post-now), which also gives it its
    # channel message and closing time. Creating one here would leave it unposted and never closed.
    card = await ctx.services.quiz.find_challenge(ch)
    if card is None:
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
    # ``leaderboard [channel|workspace] [today|week|all]`` in any order; the service names a bad value.
    scopes = [s.value for s in Scope]
    scope = next((a for a in args if a.lower() in scopes), Scope.CHANNEL)
    period = next((a for a in args if a.lower() not in scopes), Period.ALL)
    card = await ctx.services.quiz.leaderboard(ch, scope=scope, period=period, player=actor.player)
    return bk.leaderboard_blocks(card)


async def _stats(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    stats = await ctx.services.quiz.stats(actor.player, ch)
    practice = await ctx.services.app.practice.stats(actor.player)
    return [*bk.stats_blocks(stats), *pb.practice_stats_blocks(practice)]


async def _dispute(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    return await disputes.dispute(ctx, actor, args, str(body.get("text") or ""))


async def _schedule(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    schedules = ctx.services.schedules
    sub = args[0] if args else "show"
    if sub == "set":
        _require_admin(actor)
        await permissions.ensure_can_post(ctx.client, ch.channel_id, ctx.scopes)
        await schedules.set_schedule(actor, ch, **parse_schedule_options(args[1:]))
    elif sub in ("pause", "resume"):
        await schedules.pause_schedule(actor, ch, paused=sub == "pause")
    elif sub != "show":
        raise ConfigurationError("usage: /rankzero schedule show|set --time 09:00 ...|pause|resume")
    view = await schedules.show_schedule(ch)
    if view is None:
        return [bk.section("This channel has no schedule: `/rankzero schedule set --time 09:00`")]
    nxt = ", ".join(bk.date_token(t) for t in view.next_posts) or "none (paused)"
    return [bk.section(f"*Schedule* · {bk.esc(describe_schedule(view.schedule))}\nNext posts: {nxt}")]


async def _post_now(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    _require_admin(actor)
    await permissions.ensure_can_post(ctx.client, ch.channel_id, ctx.scopes)
    # The channel's schedule (window, problem count, time limit, attempts) applies when it has one.
    card = await ctx.services.schedules.post_now(actor, ch)
    closes = f", closes {bk.date_token(card.closes_at)}" if card.closes_at else ", open until `close-now`"
    return [bk.section(f"Posted *{bk.esc(card.title)}* (challenge {card.challenge_id}{closes}).")]


async def _close_now(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    _require_admin(actor)
    if len(args) > 1 or (args and not args[0].isdigit()):
        raise ConfigurationError("usage: /rankzero close-now [challenge-id] (default: the latest open one)")
    results = await ctx.services.quiz.close_open_challenge(ch, int(args[0]) if args else None)
    if results is None:
        return [bk.section("That challenge was already closed.")]
    return [bk.section(f"Closed *{bk.esc(results.title)}*: {results.players} players; results posted.")]


async def _question(
    ctx: SlackContext, actor: Actor, ch: ChannelRef, args: list[str], body: dict[str, Any]
) -> list[bk.Block]:
    _require_admin(actor)
    if args[:1] == ["add"]:
        # The dispatcher opened a "Loading" modal before the user lookup (see open_form_early).
        await ctx.update_view(str(body[failures.OPENED_VIEW]), bk.question_modal())
        return []
    if args[:1] == ["retire"] and len(args) == 2:
        await ctx.services.quiz.admin_retire(actor, args[1])
        return [bk.section(f"Retired `{bk.esc(args[1])}`: it will not be picked again.")]
    if args[:1] == ["correct"]:
        return await disputes.question_correct(ctx, actor, args[1:])
    if args[:1] == ["flags"]:
        return await disputes.question_flags(ctx, actor, args[1:])
    raise ConfigurationError(
        "usage: /rankzero question add | retire <question-id> | correct <question-id> <letter> | flags [all]"
    )


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
    **practice.COMMANDS,
}


async def open_form_early(ctx: SlackContext, sub: str, args: list[str], body: dict[str, Any]) -> None:
    """``question add``: open a "Loading" modal before anything else (the admin check may call users.info,
    and the trigger_id expires 3 s after the command was sent); the form or the refusal replaces it.
    """
    if sub == "question" and args[:1] == ["add"]:
        opened = await ctx.client.views_open(
            trigger_id=body["trigger_id"], view=bk.message_view("Loading the question form…")
        )
        body[failures.OPENED_VIEW] = str(opened["view"]["id"])


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach ``/rankzero``."""

    @app.command(COMMAND)
    async def rankzero(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
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
        actor = await ctx.actor(str(body["user_id"]), str(body.get("user_name") or body["user_id"]))
        channel = ctx.channel(str(body["team_id"]), str(body["channel_id"]), body.get("channel_name"))
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
