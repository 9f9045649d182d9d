"""Disputes and admin questions on Discord: the runner preview before saving a question, ``/dispute`` with a
variant typed in a form, ``/question correct`` and ``/question flags``.

The runner settings of a question added through the form go on the **first line of its Code field**
(``runner: ddp 2 init``; read by bot.commands.questions, which every platform's form shares).

The preview. A valid ``predict_output`` question with code is not imported on submit: its draft is kept
under a random key (:class:`DraftStore`, written through to the database of services.drafts; one hour,
oldest dropped past 200) and the admin gets an ephemeral message with the runner's verdict (per rank
output, status, the choice it matches) and **Save** / **Cancel** buttons whose custom ids carry the key.
Only Save imports. The buttons are a DynamicItem, so after a restart a click still saves the draft (read
back from the database).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import discord

from bot.adapters.discord import dispute_render, render
from bot.adapters.discord.failures import served_here, tell_failure
from bot.adapters.discord.play import PLATFORM, actor_of
from bot.adapters.discord.replies import send_private
from bot.adapters.discord.sanitize import no_mentions, safe_text
from bot.adapters.discord.submissions import VARIANT_FORM
from bot.adapters.drafts import DraftStore
from bot.commands.admin import AdminPolicy
from bot.commands.deadline import within
from bot.commands.handlers import Commands
from bot.commands.parsing import parse_correct
from bot.core.errors import ConfigurationError, RankZeroError
from bot.core.models import Tenant

if TYPE_CHECKING:
    from bot.core.repositories import SyncReport

log = logging.getLogger(__name__)

#: The longest variant the form takes (Discord's limit for a text input).
MAX_VARIANT_INPUT = 4000
#: The custom id of the variant form's one input.
VARIANT_INPUT = "rz:vcode"

EXPIRED = (
    "This draft is gone (a preview waits one hour for Save): reopen your form with `/question restore`, or "
    "run `/question add` again."
)


def draft_owner(interaction: discord.Interaction[Any]) -> str:
    """Who may save a previewed draft: this admin in this server (``<guild id>:<user id>``), so a draft's
    button never saves into another server, whoever clicks it.
    """
    return f"{interaction.guild_id}:{interaction.user.id}"


# ---------------------------------------------------------------------- the Save / Cancel buttons
class DraftClickHandler(Protocol):
    """What a Save/Cancel click is handed to."""

    async def on_draft(self, interaction: discord.Interaction[Any], verb: str, key: str) -> None:
        """Handle a click on a draft's button."""
        ...


class DraftButton(
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"rzq:(?P<verb>save|cancel):(?P<key>[A-Za-z0-9_-]{8,40})",
):
    """Save or Cancel of a previewed draft; the custom id ``rzq:<verb>:<key>`` names the draft."""

    def __init__(self, verb: str, key: str, *, label: str, style: discord.ButtonStyle) -> None:
        self.verb = verb
        self.key = key
        super().__init__(discord.ui.Button(label=label, style=style, custom_id=f"rzq:{verb}:{key}"))

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> DraftButton:
        """Rebuild the button from a clicked custom id (any message, any process)."""
        label = getattr(item, "label", None) or match["verb"]
        return cls(match["verb"], match["key"], label=label, style=discord.ButtonStyle.secondary)

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Take clicks from allowed servers only (a post made before its server was dropped keeps its
        buttons): discord.py runs dynamic items' checks, never the command tree's.
        """
        return await served_here(interaction, "button")

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's draft handler."""
        handler: DraftClickHandler | None = getattr(interaction.client, "rankzero_drafts", None)
        if handler is None:  # started without handlers (should not happen): still acknowledge
            await interaction.response.send_message(
                "RankZero is starting, try again in a moment", ephemeral=True
            )
            return
        try:
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            await within(deadline, handler.on_draft(interaction, self.verb, self.key))
        except Exception as exc:  # discord.py would only log it: the admin must get an answer
            await tell_failure(interaction, exc, f"draft button {self.verb}")


def draft_view(key: str, *, verified: bool) -> discord.ui.View:
    """Save (or Save unverified) and Cancel for the draft under ``key``."""
    view = discord.ui.View(timeout=None)
    view.add_item(
        DraftButton(
            "save",
            key,
            label="Save" if verified else "Save unverified",
            style=discord.ButtonStyle.success if verified else discord.ButtonStyle.secondary,
        )
    )
    view.add_item(DraftButton("cancel", key, label="Cancel", style=discord.ButtonStyle.danger))
    return view


# ---------------------------------------------------------------------- the variant form
def variant_form(problem_id: int) -> discord.ui.Modal:
    """``/dispute problem:<id> variant:True``: the variant's code in a paragraph input.

    Its custom id ``rz:variant:<problem id>`` carries the problem, so no View is kept: the submission is
    routed by submissions.py whenever it comes (after discord.py's timeout, after a restart) and handled
    by ``Slash.on_variant`` (slash.py), which checks again that the problem is this server's.
    """
    code: discord.ui.TextInput[Any] = discord.ui.TextInput(
        label="Your version of the code",
        style=discord.TextStyle.paragraph,
        custom_id=VARIANT_INPUT,
        placeholder="e.g. the snippet with world_size=4; it runs with the question's runner settings",
        max_length=MAX_VARIANT_INPUT,
    )
    return VARIANT_FORM.form(str(problem_id), "Dispute with your variant", [code])


# ---------------------------------------------------------------------- the handler
class DisputeHandler:
    """The runner preview of a new question, its Save/Cancel, and the admin commands on flags."""

    def __init__(self, commands: Commands, admins: AdminPolicy, drafts: DraftStore | None = None) -> None:
        self.commands = commands
        self.admins = admins
        #: Memory only unless given a store written through to the database (the adapter passes one).
        self.drafts = drafts if drafts is not None else DraftStore()
        #: Told (tenant key, admin id, question id) once a draft is saved: its typed forms are discarded.
        self.on_saved: Callable[[str, str, str], Awaitable[None]] | None = None

    async def preview_draft(self, interaction: discord.Interaction[Any], spec: dict[str, Any]) -> None:
        """Run a valid draft on the runner and show the verdict with Save / Cancel (nothing imported yet)."""
        actor = actor_of(interaction, self.admins)
        question_id = str(spec.get("id", "?"))
        key = self.drafts.put(spec, draft_owner(interaction))
        try:
            if self.commands.disputes is None:
                raise ConfigurationError("no runner is configured on this bot (RANKZERO_RUNNER_URL)")
            card = await self.commands.disputes.preview_question(actor, spec)
        except RankZeroError as exc:
            embed = dispute_render.preview_error_embed(question_id, str(exc))
            verified = False
        except Exception as exc:  # a runner bug must not lose the admin's form: say so, allow saving
            log.exception("runner preview of %s failed", question_id)
            embed = dispute_render.preview_error_embed(question_id, f"internal error ({type(exc).__name__})")
            verified = False
        else:
            embed = dispute_render.verdict_embed(card, preview=True)
            verified = True
        await send_private(
            interaction,
            f"What the runner really printed for `{safe_text(question_id)}`. Nothing is saved until you "
            "press **Save**; **Cancel** drops the draft.",
            embed=embed,
            view=draft_view(key, verified=verified),
        )

    async def on_draft(self, interaction: discord.Interaction[Any], verb: str, key: str) -> None:
        """Save imports the draft, Cancel drops it; the preview message says which, buttons removed."""
        await interaction.response.defer()  # a deferred update of the preview message
        draft = await self.drafts.fetch(key)  # also one made before a restart, or by another process
        if draft is None:
            await self._close_message(interaction, self.drafts.outcome(key) or EXPIRED)
            return
        actor = actor_of(interaction, self.admins)
        if not actor.is_admin or draft_owner(interaction) != draft.owner_id:
            await interaction.followup.send(
                render.error_text("only the admin who filled in this form can save or cancel it"),
                ephemeral=True,
                allowed_mentions=no_mentions(),
            )
            return
        qid = safe_text(draft.question_id)
        if verb == "cancel":
            if not self.drafts.claim(key):  # a Save click is importing it: that click says what became of it
                busy = f"`{draft.question_id}` is being saved right now: it cannot be cancelled."
                await self._tell(interaction, busy)
                return
            outcome = f"Cancelled: `{qid}` was not added."
            self.drafts.close(key, outcome)  # also ends this click's claim
            await self._close_message(interaction, outcome)
            return
        if not self.drafts.claim(key):
            return  # a second click while the first one saves: the first one answers
        report: SyncReport | None = None
        error = ""
        try:
            report = await self.commands.import_questions(actor, [draft.spec])
        except RankZeroError as exc:
            error = f"not saved: {exc}"
        except Exception:  # a bug or a lost connection: logged; the admin may try again
            log.exception("saving the draft of %s failed", draft.question_id)
            error = "not saved: an internal error occurred (logged). The draft is kept: try **Save** again."
        finally:
            if report is None:  # failed or cancelled: release the draft, or every later click is ignored
                self.drafts.release(key)
        if report is None:
            await self._tell(interaction, error)
            return
        state = "added" if report.added else ("updated" if report.updated else "unchanged")
        outcome = f"Question `{qid}` {state}."
        self.drafts.close(key, outcome)
        if self.on_saved is not None and interaction.guild_id is not None:
            tenant = Tenant(PLATFORM, str(interaction.guild_id)).key
            await self.on_saved(tenant, str(interaction.user.id), draft.question_id)
        await self._close_message(interaction, outcome)

    @staticmethod
    async def _tell(interaction: discord.Interaction[Any], text: str) -> None:
        # Only the clicking admin sees it; the preview message and its buttons stay.
        await interaction.followup.send(
            render.error_text(text), ephemeral=True, allowed_mentions=no_mentions()
        )

    @staticmethod
    async def _close_message(interaction: discord.Interaction[Any], text: str) -> None:
        # Keeps the verdict embed; the buttons go.
        await interaction.edit_original_response(content=text, view=None, allowed_mentions=no_mentions())

    async def correct(self, interaction: discord.Interaction[Any], question: str, letter: str) -> None:
        """``/question correct``: fix the official answer and re-score past attempts."""
        question_id, letter = parse_correct([question, letter])
        card = await self.commands.correct(actor_of(interaction, self.admins), question_id, letter)
        await send_private(interaction, dispute_render.correction_text(card))

    async def flags(self, interaction: discord.Interaction[Any], everything: bool) -> None:
        """``/question flags``: questions a dispute contradicted (open ones, or all)."""
        flags = await self.commands.flags(actor_of(interaction, self.admins), everything=everything)
        await send_private(interaction, embed=dispute_render.flags_embed(flags, everything=everything))
