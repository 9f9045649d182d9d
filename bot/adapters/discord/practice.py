"""Practice in Discord: ``/quiz [topic]``, ``/review`` and ``/explain [topic]``, all ephemeral to the player.

The Discord twin of bot/adapters/console/practice.py: payload -> one PracticeService call -> render.
Commands acknowledge with a deferred ephemeral response and then fill it in; button clicks on that
message acknowledge with a deferred update and edit it in place; the explain Answer button's first (and
acknowledging) response is the answer form itself. Buttons are persistent (practice_components.py), and
so is the answer form: its custom id ``rz:explain:<version id>`` names the prompt and no View is kept, so
an answer submitted after discord.py's timeout or a restart is still graded (submissions.py routes it).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import discord
from discord import app_commands

from bot.adapters.discord import practice_render as render
from bot.adapters.discord.failures import tell_failure
from bot.adapters.discord.play import actor_of, tenant_of
from bot.adapters.discord.render import error_text
from bot.adapters.discord.replies import give_back
from bot.adapters.discord.sanitize import no_mentions
from bot.adapters.discord.submissions import EXPLAIN_FORM, submitted_values
from bot.commands.admin import AdminPolicy
from bot.commands.deadline import within
from bot.commands.practice import PracticeFlow
from bot.core.errors import RankZeroError
from bot.core.models import PlayerRef, Tenant
from bot.core.player_day import zone_choices
from bot.core.practice import MAX_ANSWER_CHARS, PracticeService

log = logging.getLogger(__name__)

#: Discord's limit for a text input's value.
TEXT_INPUT_MAX = 4000
#: The explanation form's one input: its custom id and its longest value.
ANSWER_INPUT = "rz:xanswer"
ANSWER_MAX = min(TEXT_INPUT_MAX, MAX_ANSWER_CHARS)
#: Answers that could not be graded, kept to pre-fill the next form of the same player and prompt (bounded;
#: the oldest go first). The player is also sent the text, which survives a restart.
MAX_UNGRADED = 200


@dataclass
class Screen:
    """What one practice message shows."""

    content: str | None = None
    embeds: list[discord.Embed] = field(default_factory=list)
    view: discord.ui.View | None = None


def explain_form(version_id: int, typed: str | None = None) -> discord.ui.Modal:
    """The answer form of the explain prompt ``version_id`` (pre-filled with ``typed``, cut to the input's
    limit, when a player's earlier answer could not be graded).

    Its custom id ``rz:explain:<version id>`` carries the prompt, so no View is kept (the modal is stopped
    before it is sent): a submission is routed by submissions.py whenever it comes, after discord.py's
    timeout or a restart, to :meth:`PracticeHandler.on_explain`, which checks the prompt is this server's.
    """
    answer: discord.ui.TextInput[Any] = discord.ui.TextInput(
        label="Explain in your own words",
        style=discord.TextStyle.paragraph,
        custom_id=ANSWER_INPUT,
        placeholder="A few sentences: what happens, and why.",
        max_length=ANSWER_MAX,
        # Discord refuses a default longer than the input's max_length.
        default=typed[:ANSWER_MAX] if typed else None,
    )
    return EXPLAIN_FORM.form(str(version_id), "Your explanation", [answer])


#: Discord's most choices in an autocomplete answer.
MAX_ZONE_CHOICES = 25


async def timezone_choices(
    interaction: discord.Interaction[Any], current: str
) -> list[app_commands.Choice[str]]:
    """``/review timezone:``'s suggestions: the IANA names matching what is typed (Discord shows 25 at most).

    Discord does not tell bots a user's timezone (an interaction carries their language, ``locale``, only),
    so the zone is picked from the names.
    """
    return [app_commands.Choice(name=z, value=z) for z in zone_choices(current, MAX_ZONE_CHOICES)]


class PracticeHandler:
    """The bodies of the practice commands and buttons."""

    def __init__(self, practice: PracticeService, *, admins: AdminPolicy | None = None) -> None:
        self.practice = practice
        self.admins = admins
        #: The platform-neutral practice steps (bot.commands.practice); this handler renders them.
        self.flow = PracticeFlow(practice)
        #: (user id, version id) -> an answer that could not be graded, to pre-fill the next form.
        self._ungraded: OrderedDict[tuple[str, int], str] = OrderedDict()

    def _player(self, interaction: discord.Interaction[Any]) -> PlayerRef:
        return actor_of(interaction, self.admins).player

    @staticmethod
    async def _show(interaction: discord.Interaction[Any], screen: Screen) -> None:
        await interaction.edit_original_response(
            content=screen.content,
            embeds=render.fit_message(screen.embeds),
            view=screen.view,
            allowed_mentions=no_mentions(),
        )

    async def _command(
        self, interaction: discord.Interaction[Any], body: Callable[[PlayerRef], Awaitable[Screen]]
    ) -> None:
        """Acknowledge (ephemeral, thinking), run ``body``, fill the response in (or show the error)."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            screen = await within(deadline, body(self._player(interaction)))
        except RankZeroError as exc:
            screen = Screen(content=error_text(str(exc)))
        await self._show(interaction, screen)

    # ------------------------------------------------------------------ commands
    def slash_commands(self) -> list[app_commands.Command[Any, ..., None]]:
        """``/quiz``, ``/review`` and ``/explain``, whose callbacks are these bound methods."""
        return [
            app_commands.Command(
                name="quiz",
                description="Practice: 5 untimed questions with feedback (not ranked)",
                callback=self.quiz,
            ),
            app_commands.Command(
                name="review",
                description="Practice: your due flashcards (spaced repetition)",
                callback=self.review,
            ),
            app_commands.Command(
                name="explain",
                description="Practice: explain a concept in your own words, graded",
                callback=self.explain,
            ),
        ]

    @app_commands.describe(topic="a topic, e.g. FSDP, or weakest: this server's weakest (default: any)")
    async def quiz(self, interaction: discord.Interaction[Any], topic: str | None = None) -> None:
        """``/quiz [topic]``: five untimed questions, the first one now."""

        async def body(player: PlayerRef) -> Screen:
            # In a server, topic "weakest" is that team's weakest topics (not in a DM: no team there).
            card = await self.flow.start_quiz(player, topic, tenant_of(interaction))
            return Screen(embeds=[render.quiz_question_embed(card)], view=render.quiz_question_view(card))

        await self._command(interaction, body)

    @app_commands.describe(
        nudge="a daily DM when cards are due: on or off (then no review now)",
        new_per_day="new cards to start a day, 0-200 (default 10; then no review now)",
        timezone="your timezone, e.g. Europe/Paris: your day starts at 4 am there (then no review now)",
    )
    @app_commands.autocomplete(timezone=timezone_choices)
    async def review(
        self,
        interaction: discord.Interaction[Any],
        nudge: Literal["on", "off"] | None = None,
        new_per_day: app_commands.Range[int, 0, 200] | None = None,
        timezone: app_commands.Range[str, 1, 64] | None = None,
    ) -> None:
        """``/review [nudge:on|off] [new_per_day:N] [timezone:ZONE]``: the player's due flashcards, one at
        a time; with a setting, change it instead (the daily DM, new cards a day, the player's timezone).
        """

        async def body(player: PlayerRef) -> Screen:
            said = []
            if nudge is not None:
                said.append(render.nudge_setting_text(await self.flow.set_nudge(player, nudge)))
            if new_per_day is not None:
                said.append(render.new_per_day_text(await self.flow.set_new_per_day(player, new_per_day)))
            if timezone is not None:
                said.append(render.timezone_text(await self.flow.set_timezone(player, timezone)))
            if said:
                return Screen(content="\n".join(said))
            step = await self.flow.review(player, tenant_of(interaction))
            if step.card is None:
                assert step.summary is not None
                return Screen(embeds=[render.review_done_embed(0, step.summary)])
            assert step.summary is not None
            return Screen(
                content=render.review_summary_text(step.summary),
                embeds=[render.flashcard_front_embed(step.card)],
                view=render.flashcard_front_view(step.card, 0),
            )

        await self._command(interaction, body)

    @app_commands.describe(topic="a topic, e.g. DDP (default: any)")
    async def explain(self, interaction: discord.Interaction[Any], topic: str | None = None) -> None:
        """``/explain [topic]``: an explain prompt with its Answer button."""

        async def body(player: PlayerRef) -> Screen:
            card = await self.flow.explain(player, topic, tenant_of(interaction))
            return Screen(embeds=[render.explain_prompt_embed(card)], view=render.explain_prompt_view(card))

        await self._command(interaction, body)

    # ------------------------------------------------------------------ buttons
    async def on_practice(
        self, interaction: discord.Interaction[Any], verb: str, args: tuple[str, ...]
    ) -> None:
        """Acknowledge a click, call the service, edit the practice message (or say what went wrong)."""
        if verb == "explain":
            # A modal must be the first response: opening it is the acknowledgement.
            try:
                version_id = int(args[0])
            except (ValueError, IndexError):
                await interaction.response.send_message(
                    error_text("this button is malformed"), ephemeral=True
                )
                return
            typed = self._ungraded.get((str(interaction.user.id), version_id))
            await interaction.response.send_modal(explain_form(version_id, typed))
            return
        await interaction.response.defer()
        player = self._player(interaction)
        try:
            if verb == "quiz":
                screen = await self._answer_quiz(player, int(args[0]), int(args[1]), args[2])
            elif verb == "next":
                screen = await self._next_question(player, int(args[0]))
            elif verb == "reveal":
                screen = await self._reveal(
                    player, int(args[0]), int(args[1]), int(args[2]), tenant_of(interaction)
                )
            elif verb == "grade":
                screen = await self._grade(
                    player, int(args[0]), int(args[1]), args[2], int(args[3]), tenant_of(interaction)
                )
            else:  # pragma: no cover - the button template admits no other verb
                raise ValueError(verb)
        except RankZeroError as exc:
            await interaction.followup.send(
                error_text(str(exc)), ephemeral=True, allowed_mentions=no_mentions()
            )
            return
        except (ValueError, IndexError):
            await interaction.followup.send(error_text("this button is malformed"), ephemeral=True)
            return
        await self._show(interaction, screen)

    async def _answer_quiz(self, player: PlayerRef, quiz_id: int, position: int, letter: str) -> Screen:
        step = await self.flow.answer_quiz(player, quiz_id, position, letter)
        assert step.feedback is not None
        embeds = [render.quiz_feedback_embed(step.feedback)]
        if step.result is not None:
            embeds.append(render.quiz_result_embed(step.result))
        return Screen(embeds=embeds, view=render.quiz_next_view(step.feedback))

    async def _next_question(self, player: PlayerRef, quiz_id: int) -> Screen:
        step = await self.flow.next_question(player, quiz_id)
        if step.question is None:  # every question answered (e.g. Next clicked on an old message)
            assert step.result is not None
            return Screen(embeds=[render.quiz_result_embed(step.result)])
        return Screen(
            embeds=[render.quiz_question_embed(step.question)], view=render.quiz_question_view(step.question)
        )

    async def _reveal(
        self, player: PlayerRef, card_id: int, showing: int, reviewed: int, tenant: Tenant | None
    ) -> Screen:
        step = await self.flow.reveal(player, card_id, showing, tenant)
        if step.card is None:
            assert step.summary is not None
            return Screen(embeds=[render.review_done_embed(reviewed, step.summary)])
        if step.moved:
            # Graded meanwhile (another message, a double click): show the card that is due now.
            return Screen(
                content="That card was already graded; here is your next one.",
                embeds=[render.flashcard_front_embed(step.card)],
                view=render.flashcard_front_view(step.card, reviewed),
            )
        return Screen(
            embeds=[render.flashcard_back_embed(step.card)], view=render.grade_view(step.card, reviewed)
        )

    async def _grade(
        self, player: PlayerRef, card_id: int, showing: int, grade: str, reviewed: int, tenant: Tenant | None
    ) -> Screen:
        step = await self.flow.grade(player, card_id, showing, grade, tenant)
        assert step.outcome is not None
        reviewed += 0 if step.outcome.duplicate else 1
        line = render.review_outcome_text(step.outcome)
        if step.card is None:
            assert step.summary is not None
            return Screen(content=line, embeds=[render.review_done_embed(reviewed, step.summary)])
        return Screen(
            content=line,
            embeds=[render.flashcard_front_embed(step.card)],
            view=render.flashcard_front_view(step.card, reviewed),
        )

    async def on_explain(self, interaction: discord.Interaction[Any], key: str) -> None:
        """An explanation form's submission, whenever it arrives (``key``: the prompt's version id from the
        custom id, digits only): acknowledge (a deferred update of the prompt's message), grade, show.
        """
        if interaction.message is not None:
            await interaction.response.defer()
        else:  # not opened from the prompt's message (Discord refuses to update no message): a new one
            await interaction.response.defer(ephemeral=True, thinking=True)
        text = submitted_values(interaction.data).get(ANSWER_INPUT, "")[:ANSWER_MAX]
        await self.submit_explanation(interaction, int(key), text)

    async def submit_explanation(
        self, interaction: discord.Interaction[Any], version_id: int, text: str
    ) -> None:
        """Grade a submitted explanation of a prompt this server sees and show it under the prompt (the
        Answer button goes away). When it cannot be graded the prompt and its button stay, the player is
        told why and sent the answer back, and the next form of this prompt opens with it filled in.
        """
        mine = (str(interaction.user.id), version_id)
        # The version id came back from the client: only a prompt this server sees is graded.
        tenant = Tenant("discord", str(interaction.guild_id)) if interaction.guild_id is not None else None
        try:
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            result = await within(
                deadline,
                self.flow.submit_explanation(self._player(interaction), version_id, text, tenant=tenant),
            )
        except RankZeroError as exc:  # e.g. only blanks: the prompt and its Answer button stay
            await interaction.followup.send(
                error_text(str(exc)), ephemeral=True, allowed_mentions=no_mentions()
            )
            if text.strip():
                await self._keep_ungraded(interaction, mine, text)
            return
        except Exception as exc:  # the database failed or was too slow: say so, keep the answer
            await tell_failure(interaction, exc, "explanation form")
            await self._keep_ungraded(interaction, mine, text)
            return
        self._ungraded.pop(mine, None)
        prompt = interaction.message.embeds[:1] if interaction.message is not None else []
        await self._show(
            interaction,
            Screen(
                embeds=[*prompt, render.explain_result_embed(result)], view=render.explain_result_view(result)
            ),
        )

    async def _keep_ungraded(
        self, interaction: discord.Interaction[Any], mine: tuple[str, int], text: str
    ) -> None:
        """Remember ``text`` to pre-fill the next form of this player and prompt, and send it to them."""
        self._ungraded[mine] = text
        self._ungraded.move_to_end(mine)
        while len(self._ungraded) > MAX_UNGRADED:
            self._ungraded.popitem(last=False)
        await interaction.followup.send(
            "Your answer was not graded, but it is not lost: **Answer** on the prompt reopens the form with "
            "it filled in, and here it is to copy.",
            ephemeral=True,
            allowed_mentions=no_mentions(),
        )
        await give_back(interaction, text)


def register_practice_commands(tree: app_commands.CommandTree[Any], h: PracticeHandler) -> None:
    """Add ``/quiz``, ``/review`` and ``/explain`` to ``tree``."""
    for command in h.slash_commands():
        tree.add_command(command)
