"""Disputes and admin questions on Discord: the runner preview before saving a question, ``/dispute`` with a
variant typed in a form, ``/question correct`` and ``/question flags``.

The runner settings of a question added through the form go on the **first line of its Code field**::

    runner: MODE [RANKS] [gpus=N] [init]

``MODE`` is ``python``, ``dp`` or ``ddp``; ``RANKS`` the number of ddp ranks (1 otherwise); ``gpus=N`` the
GPUs needed to reproduce it faithfully; ``init`` lets the runner call ``init_process_group`` first. E.g.
``runner: ddp 2 init``. The line is removed from the code. A ``predict_output`` question with code and no
such line runs as one plain Python process (``runner: python``); the schema checks the rest.

The preview. A valid ``predict_output`` question with code is not imported on submit: its draft is kept in
this process under a random key (:class:`DraftStore`, one hour, oldest dropped past 200) and the admin gets
an ephemeral message with the runner's verdict (per rank output, status, the choice it matches) and
**Save** / **Cancel** buttons whose custom ids carry the key. Only Save imports. The buttons are a
DynamicItem, so after a restart a click still gets an answer: the draft is gone, submit the form again.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Protocol

import discord

from bot.adapters.discord import dispute_render, render
from bot.adapters.discord.failures import SafeModal, tell_failure
from bot.adapters.discord.play import actor_of
from bot.adapters.discord.sanitize import no_mentions, safe_text
from bot.adapters.drafts import DraftStore
from bot.core.errors import ConfigurationError, RankZeroError
from bot.core.vocabulary import Kind

if TYPE_CHECKING:
    from bot.adapters.discord.commands import CommandHandler
    from bot.core.ports import SyncReport

log = logging.getLogger(__name__)

#: The longest variant the form takes (Discord's limit for a text input).
MAX_VARIANT_INPUT = 4000

RUNNER_SYNTAX = "runner: MODE [RANKS] [gpus=N] [init], e.g. `runner: ddp 2 init` (MODE: python, dp or ddp)"
#: The runner block of a predict_output question with code and no runner line.
DEFAULT_RUNNER: dict[str, Any] = {"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False}
EXPIRED = (
    "This draft is gone (drafts are kept one hour in memory, and a restart drops them): run `/question add` "
    "again."
)

_RUNNER_LINE = re.compile(r"\A[ \t]*runner[ \t]*:(?P<rest>[^\n]*)(?:\n|\Z)", re.IGNORECASE)
_GPUS = re.compile(r"gpus?=(\d+)", re.IGNORECASE)
_NPROC = re.compile(r"(?:nproc=)?(\d+)", re.IGNORECASE)


class RunnerLineError(ValueError):
    """The Code field's ``runner:`` line cannot be read."""


# ---------------------------------------------------------------------- the form's runner line
def parse_runner_line(rest: str) -> dict[str, Any]:
    """The ``runner`` block a line's settings describe (after ``runner:``); ranges are the schema's job."""
    tokens = rest.replace(",", " ").split()
    if not tokens:
        raise RunnerLineError(f"the runner line names no mode: write {RUNNER_SYNTAX}")
    mode = tokens[0].lower()
    if mode not in ("python", "dp", "ddp"):
        raise RunnerLineError(f"unknown runner mode {tokens[0]!r}: write {RUNNER_SYNTAX}")
    runner: dict[str, Any] = {"mode": mode, "nproc": 1, "gpus": 0, "init_process_group": False}
    for token in tokens[1:]:
        if m := _GPUS.fullmatch(token):
            runner["gpus"] = int(m[1])
        elif m := _NPROC.fullmatch(token):
            runner["nproc"] = int(m[1])
        elif token.lower() in ("init", "init_process_group"):
            runner["init_process_group"] = True
        else:
            raise RunnerLineError(f"unknown runner setting {token!r}: write {RUNNER_SYNTAX}")
    return runner


def split_runner_line(code: str, kind: str) -> tuple[dict[str, Any] | None, str]:
    """``(runner block or None, code without the runner line)`` from the form's Code field.

    Only the first line is read. A predict_output question with code and no runner line gets
    :data:`DEFAULT_RUNNER`; other kinds get none unless the line is there (the schema then judges it).
    """
    m = _RUNNER_LINE.match(code)
    if m is not None:
        return parse_runner_line(m["rest"]), code[m.end() :]
    if kind == Kind.PREDICT_OUTPUT and code.strip():
        return dict(DEFAULT_RUNNER), code
    return None, code


def runner_hint(errors: list[str]) -> list[str]:
    """``errors`` plus how to write the runner line when one of them is about the runner block."""
    if any("runner" in e for e in errors):
        return [*errors, f"give the runner settings as the Code field's first line: {RUNNER_SYNTAX}"]
    return errors


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

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's draft handler."""
        handler: DraftClickHandler | None = getattr(interaction.client, "rankzero_drafts", None)
        if handler is None:  # started without handlers (should not happen): still acknowledge
            await interaction.response.send_message(
                "RankZero is starting, try again in a moment", ephemeral=True
            )
            return
        try:
            await handler.on_draft(interaction, self.verb, self.key)
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
class VariantModal(SafeModal, title="Dispute with your variant"):
    """``/dispute problem:<id> variant:True``: the variant's code in a paragraph input."""

    code: discord.ui.TextInput[VariantModal] = discord.ui.TextInput(
        label="Your version of the code",
        style=discord.TextStyle.paragraph,
        placeholder="e.g. the snippet with world_size=4; it runs with the question's runner settings",
        max_length=MAX_VARIANT_INPUT,
    )

    def __init__(self, handler: CommandHandler, problem: int) -> None:
        super().__init__(timeout=900)
        self.handler = handler
        self.problem = problem

    async def on_submit(self, interaction: discord.Interaction[Any]) -> None:
        """Run the variant and show the verdict (like ``/dispute`` without one)."""
        code = self.code.value
        await self.handler.run(interaction, lambda: self.handler.dispute(interaction, self.problem, code))


# ---------------------------------------------------------------------- the handler
class DisputeHandler:
    """The runner preview of a new question, its Save/Cancel, and the admin commands on flags."""

    def __init__(self, commands: CommandHandler) -> None:
        self.commands = commands
        self.drafts = DraftStore()

    async def preview_draft(self, interaction: discord.Interaction[Any], spec: dict[str, Any]) -> None:
        """Run a valid draft on the runner and show the verdict with Save / Cancel (nothing imported yet)."""
        h = self.commands
        actor = actor_of(interaction, h.admin_roles)
        question_id = str(spec.get("id", "?"))
        key = self.drafts.put(spec, str(interaction.user.id))
        try:
            if h.disputes is None:
                raise ConfigurationError("no runner is configured on this bot (RANKZERO_RUNNER_URL)")
            card = await h.disputes.preview_question(actor, spec)
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
        await h._send(
            interaction,
            f"What the runner really printed for `{safe_text(question_id)}`. Nothing is saved until you "
            "press **Save**; **Cancel** drops the draft.",
            embed=embed,
            view=draft_view(key, verified=verified),
        )

    async def on_draft(self, interaction: discord.Interaction[Any], verb: str, key: str) -> None:
        """Save imports the draft, Cancel drops it; the preview message says which, buttons removed."""
        await interaction.response.defer()  # a deferred update of the preview message
        h = self.commands
        draft = self.drafts.get(key)
        if draft is None:
            await self._close_message(interaction, self.drafts.outcome(key) or EXPIRED)
            return
        actor = actor_of(interaction, h.admin_roles)
        if not actor.is_admin or str(interaction.user.id) != draft.owner_id:
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
            report = await h.quiz.admin_import(actor, [draft.spec])
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
        h = self.commands
        if h.disputes is None:
            raise ConfigurationError("disputes are not set up on this bot")
        card = await h.disputes.correct_answer(actor_of(interaction, h.admin_roles), question, letter)
        await h._send(interaction, dispute_render.correction_text(card))

    async def flags(self, interaction: discord.Interaction[Any], everything: bool) -> None:
        """``/question flags``: questions a dispute contradicted (open ones, or all)."""
        h = self.commands
        if h.disputes is None:
            raise ConfigurationError("disputes are not set up on this bot")
        flags = await h.disputes.flags(actor_of(interaction, h.admin_roles), None if everything else "open")
        await h._send(interaction, embed=dispute_render.flags_embed(flags, everything=everything))


def register_dispute_commands(question: discord.app_commands.Group, h: CommandHandler) -> None:
    """Add ``correct`` and ``flags`` to the ``/question`` group (admins only)."""

    @question.command(name="correct", description="Fix a question's answer and re-score past attempts")
    @discord.app_commands.describe(question="the question id", letter="the right choice, e.g. B")
    async def question_correct(
        interaction: discord.Interaction[Any],
        question: str,
        letter: discord.app_commands.Range[str, 1, 1],
    ) -> None:
        await h.run(interaction, lambda: h.disputes_ui.correct(interaction, question, letter), admin=True)

    @question.command(name="flags", description="Questions whose official answer a dispute contradicted")
    @discord.app_commands.describe(everything="also the resolved ones")
    async def question_flags(interaction: discord.Interaction[Any], everything: bool = False) -> None:
        await h.run(interaction, lambda: h.disputes_ui.flags(interaction, everything), admin=True)
