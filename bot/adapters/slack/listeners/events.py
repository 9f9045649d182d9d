"""Events API: ``app_home_opened`` publishes the player's Home tab (stats, streak, badges, practice,
leaderboard).
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import practice_blocks as pb
from bot.adapters.slack.context import SlackContext
from bot.core.vocabulary import Period, Scope


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach the event listeners."""

    @app.event("app_home_opened")
    async def home(event: dict[str, Any], body: dict[str, Any]) -> None:
        if event.get("tab", "home") != "home":
            return
        user = str(event["user"])
        player = ctx.player(user, await ctx.display_name(user))
        channel = ctx.channel(ctx.workspace_id(body), str(event.get("channel") or f"home-{user}"))
        quiz = ctx.services.quiz
        stats = await quiz.stats(player, channel)
        board = await quiz.leaderboard(channel, scope=Scope.WORKSPACE, period=Period.ALL, player=player)
        practice = pb.practice_stats_blocks(await ctx.services.app.practice.stats(player))
        await ctx.client.views_publish(user_id=user, view=bk.home_view(stats, board, practice))
