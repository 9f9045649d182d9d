"""The top-level slash commands any member runs: ``/leaderboard``, ``/stats``, ``/web``, ``/challenge`` and
``/dispute``. Each method translates the interaction (Actor, ChannelRef, typed options), calls the command
layer (bot.commands) and renders the card; the shared plumbing (acknowledge, deadline, domain errors) is
:meth:`Slash.answering <bot.adapters.discord.slash.Slash.answering>`. :func:`register_commands` adds these and
the admin groups (admin_commands.py) to the tree.
"""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands

from bot.adapters import charts
from bot.adapters.chart_drawing import missing_note
from bot.adapters.discord import attachments, practice_render, render
from bot.adapters.discord.admin_commands import QuestionGroup, RankZeroGroup
from bot.adapters.discord.play import PLATFORM
from bot.adapters.discord.sanitize import no_mentions
from bot.adapters.discord.slash import Slash, choices_of
from bot.commands.handlers import NoChallenge
from bot.commands.parsing import parse_period, parse_scope
from bot.commands.web import web_link
from bot.core.models import PlayerRef, bounded_display_name
from bot.core.vocabulary import Period, Scope

log = logging.getLogger(__name__)

#: Discord's limits for autocomplete answers: 25 choices, names of at most 100 characters.
MAX_CHOICES = 25
MAX_CHOICE_NAME = 100
#: The longest text /dispute's problem option takes (a question id is at most 64; Discord enforces it).
PROBLEM_OPTION_MAX = 100

#: What /leaderboard calls each scope: Discord's word for a workspace is "server".
SCOPE_NAMES: dict[Scope, str] = {Scope.CHANNEL: "channel", Scope.WORKSPACE: "server"}

SlashCommand = app_commands.Command[Any, ..., None]


class PlayerCommands:
    """The top-level commands; their callbacks are these bound methods (:meth:`slash_commands`)."""

    def __init__(self, slash: Slash) -> None:
        self.slash = slash

    def slash_commands(self) -> list[SlashCommand]:
        """The commands to add to the tree, in the order they are published."""
        dispute: SlashCommand = app_commands.Command(
            name="dispute",
            description="Run a problem's code on the runner and see the verdict",
            callback=self.dispute,
        )
        dispute.autocomplete("problem")(self.problem_choices)
        return [
            app_commands.Command(
                name="leaderboard",
                description="Top players of this channel or server",
                callback=self.leaderboard,
            ),
            app_commands.Command(
                name="stats", description="A player's record (yours by default)", callback=self.stats
            ),
            app_commands.Command(
                name="web",
                description="A private link to this channel's read-only leaderboard page",
                callback=self.web,
            ),
            app_commands.Command(
                name="challenge",
                description="Today's challenge of this channel, with its Start button",
                callback=self.challenge,
            ),
            dispute,
        ]

    @app_commands.choices(
        scope=[app_commands.Choice(name=name, value=name) for name in SCOPE_NAMES.values()],
        period=choices_of(Period),
    )
    async def leaderboard(
        self,
        interaction: discord.Interaction[Any],
        scope: str = SCOPE_NAMES[Scope.CHANNEL],
        period: str = Period.ALL.value,
    ) -> None:
        """Top players of the channel or server."""
        async with self.slash.answering(interaction):
            card = await self.slash.commands.leaderboard(
                self.slash.actor(interaction),
                self.slash.channel(interaction),
                parse_scope(scope),
                parse_period(period),
            )
            await self.slash.send(interaction, embed=render.leaderboard_embed(card))

    async def stats(self, interaction: discord.Interaction[Any], member: discord.User | None = None) -> None:
        """A player's record (yours by default), with its chart when one can be drawn."""
        async with self.slash.answering(interaction):
            who = self.slash.actor(interaction).player
            if member is not None:
                who = PlayerRef(
                    PLATFORM, str(member.id), bounded_display_name(member.display_name, str(member.id))
                )
            stats = await self.slash.commands.stats(who, self.slash.channel(interaction))
            embeds = [render.stats_embed(stats.record)]
            if stats.practice is not None:  # practice is shown apart from the competitive record
                embeds.append(practice_render.practice_stats_embed(stats.practice))
            embeds = practice_render.fit_message(embeds)
            # The chart (issue 30) goes with the same private reply; without it the figures still arrive.
            chart, why = await attachments.drawn_file(charts.player_chart, stats.record)
            if chart is not None:
                try:
                    await interaction.followup.send(
                        embeds=embeds, file=chart, ephemeral=True, allowed_mentions=no_mentions()
                    )
                    return
                except discord.HTTPException as exc:  # the picture refused (413...): the text goes alone
                    log.warning("/stats chart refused by Discord: %s %s", exc.status, exc.text)
                    refused_file = exc.status == 403 and exc.code == attachments.MISSING_PERMISSIONS
                    why = attachments.NEEDS_ATTACH_FILES if refused_file else "Discord refused the picture"
            await interaction.followup.send(
                missing_note(why or "unknown"), embeds=embeds, ephemeral=True, allowed_mentions=no_mentions()
            )

    async def web(self, interaction: discord.Interaction[Any]) -> None:
        """A private link to this channel's read-only page (any member, for the channel asked in)."""
        async with self.slash.answering(interaction):
            link = web_link(self.slash.web_links, self.slash.channel(interaction))
            await self.slash.send(interaction, link.text("<{url}>"))  # <...>: no preview fetched by Discord

    async def challenge(self, interaction: discord.Interaction[Any]) -> None:
        """Today's challenge of this channel with its Start button (for a late joiner).

        Never creates one: only the schedule (or an admin's post-now) posts a challenge, with its window.
        """
        async with self.slash.answering(interaction):
            card = await self.slash.commands.challenge(self.slash.channel(interaction))
            if not isinstance(card, NoChallenge):
                view = render.challenge_view(card)
                await self.slash.send(interaction, embed=render.challenge_embed(card), view=view)
                return
            if card.next_post is not None:
                at = card.next_post
                when = f"The next one is scheduled {render.relative(at)} ({render.absolute(at)})."
            else:
                when = "This channel has no daily schedule running."
            await self.slash.send(
                interaction,
                f"There is no challenge in this channel yet today. {when}\n"
                "Meanwhile, practise with `/quiz`, `/review` or `/explain` (not ranked).",
            )

    async def problem_choices(
        self, interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        """``/dispute``'s suggestions while typing: today's problems of this channel (``today:N``, with the
        topic and question id to recognise them), those containing what is typed. Nothing when there is no
        challenge today; a database error is logged and suggests nothing (the command still takes any form).
        """
        quiz = self.slash.quiz
        try:
            card = await quiz.find_challenge(self.slash.channel(interaction))
            challenge = await quiz.get_challenge(card.challenge_id) if card is not None else None
        except Exception:  # a suggestion is a convenience: never an error in the user's face
            log.warning("no /dispute suggestions for channel %s", interaction.channel_id, exc_info=True)
            return []
        if challenge is None:
            return []
        wanted = current.strip().lower()
        choices = []
        for p in challenge.problems:
            value = f"today:{p.position}"
            name = f"{value} · {p.question.topic} · {p.question.id}"[:MAX_CHOICE_NAME]
            if wanted in name.lower():
                choices.append(app_commands.Choice(name=name, value=value))
        return choices[:MAX_CHOICES]

    @app_commands.describe(
        problem="today:N (problem N of today's challenge here), a question id, or the number in its footer",
        variant="True: type your own version of the code in a form and run that instead",
    )
    async def dispute(
        self,
        interaction: discord.Interaction[Any],
        problem: app_commands.Range[str, 1, PROBLEM_OPTION_MAX],
        variant: bool = False,
    ) -> None:
        """Run a problem's code (or, with ``variant``, the player's version of it) on the runner."""
        # str(): a client that still has the tree where this option was an integer sends a number.
        typed = str(problem)
        if variant and self.slash.disputes is not None:  # the form must be the first response
            await self.slash.open_variant(interaction, typed)
            return
        async with self.slash.answering(interaction):
            await self.slash.run_dispute(interaction, typed, None)


def register_commands(tree: app_commands.CommandTree[Any], slash: Slash) -> None:
    """Add RankZero's slash commands to ``tree``: the top-level ones, then ``/rankzero`` and ``/question``."""
    for command in PlayerCommands(slash).slash_commands():
        tree.add_command(command)
    tree.add_command(RankZeroGroup(slash))
    tree.add_command(QuestionGroup(slash))
