"""The "Add a question" form on Discord, which never loses what an admin typed.

discord.py routes a modal's submission to the View object that opened it, and only while that View lives
(its timeout, at most Discord's 15 minutes of an open form, and never after a restart): a late submission
arrives, finds no View, and the admin's typing is dropped. So this form does not depend on a View:

- Its custom id is ``rz:qform:<nonce>`` and its five text inputs have fixed ids (``rz:qf:<field>``). The
  modal object is stopped before it is sent, so discord.py keeps nothing for it; every submission, early or
  late, in this process or another, is routed by the client's ``on_interaction`` (app.py, through
  submissions.py's table of form kinds) to :meth:`QuestionForms.on_submit`, which reads the values from
  the interaction's data.
- The command's options (id, kind, topic, difficulty) are stored under the nonce when the form opens; each
  submission stores the five fields and, when it is refused, the reason: a form draft
  (bot/core/repositories/form_drafts.py), per server and admin, for 24 hours.
- A refused submission is answered with what to fix and an **Edit again** button (``rz:qedit:<nonce>``, a
  DynamicItem, so it works after a restart) that reopens the form filled in; ``/question restore`` reopens
  the admin's latest draft. An added question deletes its drafts.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import discord

from bot.adapters.discord import render
from bot.adapters.discord.failures import served_here, tell_failure
from bot.adapters.discord.play import PLATFORM, actor_of
from bot.adapters.discord.replies import send_private
from bot.adapters.discord.sanitize import no_mentions, safe_text, truncate
from bot.adapters.discord.submissions import QUESTION_FORM, submitted_values
from bot.commands import questions
from bot.commands.admin import AdminPolicy
from bot.commands.deadline import within
from bot.commands.handlers import Commands
from bot.core.errors import RankZeroError
from bot.core.models import Tenant
from bot.core.ports import Clock
from bot.core.repositories.form_drafts import (
    FORM_DRAFT_TTL,
    FORM_FIELDS,
    FormDraft,
    FormDraftRepository,
    MemoryFormDrafts,
)

if TYPE_CHECKING:
    from bot.adapters.discord.disputes import DisputeHandler

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A form's custom id is the prefix and its nonce (secrets.token_urlsafe(12): 16 URL-safe characters).
FORM_PREFIX = QUESTION_FORM.prefix
FIELD_PREFIX = "rz:qf:"
#: Discord's limits (docs: Interaction Response "Modal", Component Reference "Text Input").
MODAL_TITLE = 45
INPUT_LABEL = 45
#: The longest question id and topic the form takes (the bank's limits: a slug of 3-64, a topic of 80).
MAX_QUESTION_ID = 64
MAX_TOPIC = 80
#: The longest refusal kept with a draft (the column's size).
MAX_ERROR = 2000
#: The database read or write before a form opens must leave time to answer within Discord's 3 s.
FIRST_RESPONSE_BUDGET_S = 2.0
#: Drafts remembered in memory too, for a database that failed a write (bounded; oldest dropped).
MEMORY_DRAFTS = 200

HOURS = int(FORM_DRAFT_TTL.total_seconds() // 3600)
NO_DRAFT = (
    f"You have no question form saved in this server. A form you submit is kept {HOURS} hours (also when "
    "it was refused or lost), for you alone; start a new one with `/question add`."
)
GONE = (
    f"This form is no longer saved: forms are kept {HOURS} hours after their last submission, and only for "
    "the admin who typed them. Start again with `/question add`."
)
UNKNOWN_FORM = (
    "I no longer know this form's question id, topic and difficulty (it was opened over "
    f"{HOURS} hours ago, or in another server): nothing was added. Run `/question add` again."
)
SLOW = "The database did not answer in time, so the form could not open: please try again in a moment."


@dataclass(frozen=True)
class FormInput:
    """One text input of the form: its label (≤ 45), style, whether required, its size and placeholder."""

    label: str
    style: discord.TextStyle
    required: bool
    max_length: int
    placeholder: str | None = None


INPUTS: dict[str, FormInput] = {
    "prompt": FormInput("Prompt (Markdown)", discord.TextStyle.paragraph, True, 4000),
    "code": FormInput(
        "Code; 1st line may be: runner: ddp 2 init",
        discord.TextStyle.paragraph,
        False,
        4000,
        "runner: MODE [RANKS] [gpus=N] [init]  (python, dp or ddp), then the snippet",
    ),
    "choices": FormInput(
        "Choices, one per line (A, B, C...)",
        discord.TextStyle.paragraph,
        True,
        3000,
        "one choice per line; write \\n for a line break inside a choice (several ranks' output)",
    ),
    "correct": FormInput("Correct letter", discord.TextStyle.short, True, 1),
    "notes": FormInput(
        "Hint, then a line '---', then the explanation", discord.TextStyle.paragraph, False, 3000
    ),
}
assert tuple(INPUTS) == FORM_FIELDS and len(INPUTS) <= 5
assert all(len(i.label) <= INPUT_LABEL for i in INPUTS.values())


def submitted_inputs(data: Mapping[str, Any] | None) -> dict[str, str]:
    """The five fields of a submission, by name (a field Discord did not send is empty)."""
    typed = {
        custom_id.removeprefix(FIELD_PREFIX): value
        for custom_id, value in submitted_values(data).items()
        if custom_id.startswith(FIELD_PREFIX)
    }
    # Bounded by the form's own limits: a client cannot store more than the form lets it type.
    return {name: typed.get(name, "")[: spec.max_length] for name, spec in INPUTS.items()}


def build_form(draft: FormDraft) -> discord.ui.Modal:
    """The form of ``draft``, filled in with what was typed; stopped, so discord.py keeps no View for it
    (its submission is routed by custom id, see the module's docstring).
    """
    title = truncate(f"Add a question: {draft.question_id}", MODAL_TITLE)
    inputs: list[discord.ui.TextInput[Any]] = []
    for name, spec in INPUTS.items():
        default = draft.inputs.get(name) or None
        inputs.append(
            discord.ui.TextInput(
                label=spec.label,
                style=spec.style,
                custom_id=f"{FIELD_PREFIX}{name}",
                required=spec.required,
                max_length=spec.max_length,
                placeholder=spec.placeholder,
                # Discord refuses a default longer than the input's max_length.
                default=default[: spec.max_length] if default else None,
            )
        )
    return QUESTION_FORM.form(draft.nonce, title, inputs)


class FormEditHandler(Protocol):
    """What an Edit again click is handed to (the client's ``rankzero_forms``)."""

    async def on_edit(self, interaction: discord.Interaction[Any], nonce: str) -> None:
        """Reopen the form of ``nonce``, filled in."""
        ...


class EditFormButton(
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"rz:qedit:(?P<nonce>[A-Za-z0-9_-]{8,32})",
):
    """**Edit again** under a refused submission: reopens that form filled in (any process)."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        super().__init__(
            discord.ui.Button(
                label="Edit again", style=discord.ButtonStyle.primary, custom_id=f"rz:qedit:{nonce}"
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> EditFormButton:
        """Rebuild the button from a clicked custom id."""
        return cls(match["nonce"])

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Take clicks from allowed servers only."""
        return await served_here(interaction, "button")

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's form handler."""
        handler: FormEditHandler | None = getattr(interaction.client, "rankzero_forms", None)
        if handler is None:
            await interaction.response.send_message(
                "RankZero is starting, try again in a moment", ephemeral=True
            )
            return
        try:
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            await within(deadline, handler.on_edit(interaction, self.nonce))
        except Exception as exc:  # the admin must get an answer
            await tell_failure(interaction, exc, "form button edit")


def edit_view(nonce: str) -> discord.ui.View:
    """The Edit again button of the form ``nonce``."""
    view = discord.ui.View(timeout=None)
    view.add_item(EditFormButton(nonce))
    return view


async def _quick(work: Awaitable[T]) -> T:
    """``work`` within the time a first response leaves (TimeoutError past it)."""
    return await asyncio.wait_for(work, FIRST_RESPONSE_BUDGET_S)


class QuestionForms:
    """Opens, receives, reopens and restores question forms; stores what was typed."""

    def __init__(
        self,
        commands: Commands,
        admins: AdminPolicy,
        clock: Clock,
        disputes_ui: DisputeHandler,
        repository: FormDraftRepository | None = None,
    ) -> None:
        self.commands = commands
        self.admins = admins
        self.clock = clock
        self.disputes_ui = disputes_ui
        #: Without a database (tests of other things, the console) the drafts live in memory.
        self.repository: FormDraftRepository = repository or MemoryFormDrafts()
        # A copy of recent drafts: the form still works when the database refused a write.
        self._memory: OrderedDict[str, FormDraft] = OrderedDict()

    # ------------------------------------------------------------------ who and where
    @staticmethod
    def _scope(interaction: discord.Interaction[Any]) -> tuple[str, str] | None:
        """(tenant key, owner id) of an interaction; None outside a server (the commands are guild-only)."""
        if interaction.guild_id is None:
            return None
        return Tenant(PLATFORM, str(interaction.guild_id)).key, str(interaction.user.id)

    def _remember(self, draft: FormDraft) -> None:
        self._memory[draft.nonce] = draft
        self._memory.move_to_end(draft.nonce)
        while len(self._memory) > MEMORY_DRAFTS:
            self._memory.popitem(last=False)

    async def _store(self, draft: FormDraft) -> None:
        """Keep ``draft`` (in memory at once; a database failure is logged, the memory copy remains)."""
        self._remember(draft)
        try:
            await self.repository.save(draft)
        except Exception:
            log.exception("could not store the question form %s of %s", draft.nonce, draft.tenant)

    async def _find(self, tenant: str, owner: str, nonce: str) -> FormDraft | None:
        now = self.clock.now()
        found = await self.repository.find(tenant, owner, nonce, now)
        if found is not None:
            return found
        kept = self._memory.get(nonce)
        if kept is not None and (kept.tenant, kept.owner_id) == (tenant, owner) and kept.expires_at > now:
            return kept
        return None

    # ------------------------------------------------------------------ open, reopen, restore
    async def open(
        self, interaction: discord.Interaction[Any], qid: str, kind: str, topic: str, difficulty: str
    ) -> None:
        """``/question add`` by an admin: store the options under a new nonce, then open the empty form."""
        scope = self._scope(interaction)
        problem = None
        if scope is None:
            problem = "this command works in a server channel"
        elif not qid.strip() or len(qid.strip()) > MAX_QUESTION_ID:
            problem = f"the question id must be 1 to {MAX_QUESTION_ID} characters"
        elif not topic.strip() or len(topic.strip()) > MAX_TOPIC:
            problem = f"the topic must be 1 to {MAX_TOPIC} characters"
        if problem is not None or scope is None:
            await interaction.response.send_message(
                render.error_text(problem or ""), ephemeral=True, allowed_mentions=no_mentions()
            )
            return
        tenant, owner = scope
        now = self.clock.now()
        draft = FormDraft(
            nonce=secrets.token_urlsafe(12),
            tenant=tenant,
            owner_id=owner,
            question_id=qid.strip(),
            kind=kind,
            topic=topic.strip(),
            difficulty=difficulty,
            updated_at=now,
            expires_at=now + FORM_DRAFT_TTL,
        )
        # Stored before the form opens, so a submission reaching another process (or this one after a
        # restart) finds the options; a slow database must not cost the 3 s answer: the form opens anyway.
        self._remember(draft)
        try:
            await _quick(self.repository.save(draft))
        except Exception:
            log.warning("the question form %s opens unstored (database slow or failing)", draft.nonce)
        await interaction.response.send_modal(build_form(draft))

    async def _reopen(
        self, interaction: discord.Interaction[Any], lookup: Awaitable[FormDraft | None]
    ) -> None:
        try:
            draft = await _quick(lookup)
        except TimeoutError:
            await interaction.response.send_message(render.error_text(SLOW), ephemeral=True)
            return
        if draft is None:
            return
        await interaction.response.send_modal(build_form(draft))

    async def on_edit(self, interaction: discord.Interaction[Any], nonce: str) -> None:
        """**Edit again**: reopen the form of ``nonce``, filled in, for the admin who typed it."""
        scope = self._scope(interaction)
        if scope is None or not actor_of(interaction, self.admins).is_admin:
            await interaction.response.send_message(render.error_text(self.admins.refusal), ephemeral=True)
            return

        async def lookup() -> FormDraft | None:
            draft = await self._find(scope[0], scope[1], nonce)
            if draft is None:
                await interaction.response.send_message(GONE, ephemeral=True)
            return draft

        await self._reopen(interaction, lookup())

    async def restore(self, interaction: discord.Interaction[Any]) -> None:
        """``/question restore``: reopen the admin's latest saved form here, or say there is none."""
        scope = self._scope(interaction)
        if scope is None or not actor_of(interaction, self.admins).is_admin:
            await interaction.response.send_message(render.error_text(self.admins.refusal), ephemeral=True)
            return

        async def lookup() -> FormDraft | None:
            draft = await self.repository.latest(scope[0], scope[1], self.clock.now())
            if draft is None:
                await interaction.response.send_message(NO_DRAFT, ephemeral=True)
            return draft

        await self._reopen(interaction, lookup())

    # ------------------------------------------------------------------ a submission
    async def on_submit(self, interaction: discord.Interaction[Any], nonce: str) -> None:
        """A submission of the form ``nonce`` (whenever it arrives): store it, validate, add or explain."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        scope = self._scope(interaction)
        actor = actor_of(interaction, self.admins)
        if scope is None or not actor.is_admin:
            await send_private(interaction, render.error_text(self.admins.refusal))
            return
        tenant, owner = scope
        draft = await self._find(tenant, owner, nonce)
        if draft is None:
            await send_private(interaction, render.error_text(UNKNOWN_FORM))
            return
        inputs = submitted_inputs(interaction.data)
        now = self.clock.now()
        try:
            spec = questions.spec_from_text_form(
                qid=draft.question_id,
                kind=draft.kind,
                topic=draft.topic,
                difficulty=draft.difficulty,
                **inputs,
            )
            dumped = questions.validate_question(spec)
        except questions.RunnerLineError as exc:
            await self._refuse(interaction, draft.submitted(inputs, f"code: {exc}", now))
            return
        except questions.QuestionInvalid as exc:
            errors = "\n".join(questions.runner_hint(exc.lines()))
            await self._refuse(interaction, draft.submitted(inputs, errors, now))
            return
        await self._store(draft.submitted(inputs, None, now))  # kept until the question is really added
        if questions.wants_preview(dumped):  # the runner's preview; its Save discards the drafts
            await self.disputes_ui.preview_draft(interaction, dumped)
            return
        try:
            report = await self.commands.import_questions(actor, [dumped])
        except RankZeroError as exc:
            await self._refuse(interaction, draft.submitted(inputs, str(exc), now))
            return
        await self.discard(tenant, owner, draft.question_id)
        state = "added" if report.added else ("updated" if report.updated else "unchanged")
        await send_private(interaction, f"Question `{safe_text(draft.question_id)}` {state}.")

    async def _refuse(self, interaction: discord.Interaction[Any], draft: FormDraft) -> None:
        """Store the refused submission with its reason; say what to fix, with Edit again."""
        kept = replace(draft, error=truncate(draft.error or "", MAX_ERROR))
        await self._store(kept)
        listed = "\n".join(f"• {line}" for line in (kept.error or "").splitlines() if line.strip())
        text = (
            f"the question was not added:\n{listed}\n"
            f"What you typed is kept for {HOURS} hours: press **Edit again** to fix it in the form, "
            "or reopen it later with `/question restore`."
        )
        await send_private(interaction, render.error_text(text), view=edit_view(kept.nonce))

    async def discard(self, tenant: str, owner: str, question_id: str) -> None:
        """Forget the admin's drafts of an added question (a failure only leaves them to expire)."""
        mine = (tenant, owner, question_id)
        for nonce in [n for n, d in self._memory.items() if (d.tenant, d.owner_id, d.question_id) == mine]:
            del self._memory[nonce]
        try:
            await self.repository.discard(tenant, owner, question_id)
        except Exception:
            log.exception("could not delete the form drafts of %s in %s", question_id, tenant)
