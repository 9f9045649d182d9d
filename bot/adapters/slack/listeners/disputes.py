"""Disputes and admin questions on Slack: the runner preview before saving, ``dispute`` with a variant,
``question correct`` and ``question flags``.

The preview. A ``predict_output`` question with code is not imported on submit: the form's submission
answers with ``response_action: push`` of a preview modal holding the runner's real verdict, whose Save
imports the draft and closes the stack (``clear``) and whose Cancel pops back to the untouched form
(nothing imported). Slack wants the submission answered within 3 s and a run may take longer (up to the
runner timeout), so the run starts at once and gets :data:`PREVIEW_WAIT_S`; when it is slower, a
"Running…" modal is pushed instead and replaced (``views.update`` by its ``external_id``) when the verdict
arrives. The draft travels in the modal's ``private_metadata`` when it fits Slack's 3000 characters, else
it stays in this process under a random key (dropped on Save, Cancel or after an hour).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
import weakref
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError

from bot.adapters.drafts import DraftStore
from bot.adapters.slack import blocks as bk
from bot.adapters.slack import dispute_blocks as dbk
from bot.adapters.slack import failures
from bot.adapters.slack.context import SlackContext
from bot.commands import questions
from bot.commands.parsing import parse_correct, parse_dispute_target, parse_flags, split_variant
from bot.core.dispute_service import DisputeCard
from bot.core.errors import ConfigurationError, NotAdminError, RankZeroError
from bot.core.models import Actor, ChannelRef

log = logging.getLogger(__name__)

#: How long the form's submission waits for the runner before pushing a "Running…" modal instead
#: (Bolt gives a listener 3 s to ack, counted from the request's arrival).
PREVIEW_WAIT_S = 2.0
#: Slack's limit on ``private_metadata``.
MAX_METADATA = 3000
#: Tries (and the pause between them) to update the "Running…" modal: Slack may still be opening it.
UPDATE_TRIES = 3
UPDATE_PAUSE_S = 0.5

#: Why a non-admin's submission is refused (on the form's id field).
ADMINS_ONLY = "only admins can add questions: ask a workspace admin (or one listed in RANKZERO_ADMINS)"


# ---------------------------------------------------------------------- drafts
_STORES: weakref.WeakKeyDictionary[SlackContext, DraftStore] = weakref.WeakKeyDictionary()


def drafts(ctx: SlackContext) -> DraftStore:
    """The draft store of one running adapter: in the database once the services are bound."""
    store = _STORES.get(ctx)
    if store is None:
        repository = ctx.services.drafts if ctx.bound else None
        store = _STORES[ctx] = DraftStore(repository=repository)
    return store


def encode_draft(store: DraftStore, spec: dict[str, Any]) -> str:
    """``d:<json>`` when the draft fits the metadata, else ``k:<key>`` of the server-side copy."""
    inline = "d:" + json.dumps(spec, separators=(",", ":"), ensure_ascii=False)
    return inline if len(inline) <= MAX_METADATA else "k:" + store.put(spec)


async def decode_draft(store: DraftStore, metadata: str) -> dict[str, Any] | None:
    """The draft a preview modal carries (None when its stored copy is gone: saved, cancelled, expired)."""
    if metadata.startswith("d:"):
        try:
            spec = json.loads(metadata[2:])
        except ValueError:
            return None
        return spec if isinstance(spec, dict) else None
    if metadata.startswith("k:"):
        draft = await store.fetch(metadata[2:])  # also after a restart, or from another process
        return draft.spec if draft is not None else None
    return None


# ---------------------------------------------------------------------- the preview
async def begin_preview(
    ack: AsyncAck,
    ctx: SlackContext,
    user: dict[str, Any],
    spec: dict[str, Any],
    started: float,
    body: dict[str, Any] | None = None,
) -> None:
    """Answer a valid predict_output draft's submission with the runner preview (see the module doc).

    The user lookup (admin or not) runs inside the timed part: a slow users.info must not make the answer
    late. A non-admin answered in time gets the refusal on the form's id field.
    """
    metadata = encode_draft(drafts(ctx), spec)
    external_id = f"rzq-{secrets.token_hex(10)}"
    question_id = str(spec.get("id", "?"))

    async def admin_preview() -> DisputeCard:
        actor = await ctx.actor(user, body=body)  # the body's workspace: the preview counts against it
        if not actor.is_admin:
            raise NotAdminError(ADMINS_ONLY)
        if ctx.commands.disputes is None:
            raise ConfigurationError("no runner is configured on this bot (RANKZERO_RUNNER_URL)")
        return await ctx.commands.disputes.preview_question(actor, spec)

    run = asyncio.create_task(admin_preview())
    wait = max(0.0, PREVIEW_WAIT_S - (time.monotonic() - started))
    done, _ = await asyncio.wait({run}, timeout=wait)
    if run in done:
        if isinstance(run.exception(), NotAdminError):
            if metadata.startswith("k:"):
                drafts(ctx).drop(metadata[2:])
            await ack(response_action="errors", errors={"id": ADMINS_ONLY})
            return
        await ack(response_action="push", view=_result_view(run, question_id, metadata, external_id))
        return
    await ack(response_action="push", view=dbk.running_view(question_id, metadata, external_id))
    await asyncio.wait({run})
    await _update_by_external_id(ctx, external_id, _result_view(run, question_id, metadata, external_id))


def _result_view(
    run: asyncio.Task[DisputeCard], question_id: str, metadata: str, external_id: str
) -> dict[str, Any]:
    exc = run.exception()
    if exc is None:
        return dbk.preview_view(run.result(), metadata, external_id)
    if not isinstance(exc, RankZeroError):
        log.error("runner preview of %s failed", question_id, exc_info=exc)
        why = f"internal error ({type(exc).__name__})"
        return dbk.preview_error_view(question_id, why, metadata, external_id)
    return dbk.preview_error_view(question_id, str(exc), metadata, external_id)


async def _update_by_external_id(ctx: SlackContext, external_id: str, view: dict[str, Any]) -> None:
    for attempt in range(UPDATE_TRIES):
        try:
            await ctx.client.views_update(external_id=external_id, view=view)
            return
        except SlackApiError as exc:
            # not_found right after the push: Slack may not have opened it yet. Later: the admin cancelled.
            log.info("views.update of preview %s failed: %s", external_id, exc.response.get("error"))
            if attempt + 1 < UPDATE_TRIES:
                await asyncio.sleep(UPDATE_PAUSE_S)


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach the preview modal's Save and Cancel."""

    @app.view(dbk.PREVIEW_CALLBACK)
    async def save(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        started = time.monotonic()
        store = drafts(ctx)
        metadata = str(view.get("private_metadata") or "")
        spec = await decode_draft(store, metadata)
        if spec is None:
            await ack(
                response_action="update",
                view=bk.message_view(
                    "This draft has expired or is gone (saved, cancelled, or older than an hour):"
                    " submit the form again."
                ),
            )
            return
        question_id = str(spec.get("id", "?"))

        async def save_draft() -> failures.Submitted:
            actor = await ctx.actor(body["user"], body=body)
            try:
                valid = questions.validate_question(spec)
                await ctx.commands.import_questions(actor, [valid])
            except (RankZeroError, questions.QuestionInvalid) as exc:
                return failures.Submitted(
                    {"response_action": "update", "view": bk.message_view(f"Not saved: {exc}")}
                )
            if metadata.startswith("k:"):
                store.drop(metadata[2:])
            # In time: close the preview and the form under it; later: say it on the preview.
            done = bk.message_view(f"Saved question {question_id}.")
            return failures.Submitted({"response_action": "clear"}, late_view=done)

        await failures.answer_submission(
            ack,
            ctx.client,
            str(view.get("id")),
            save_draft(),
            working=bk.message_view(f"Working… saving question {question_id}."),
            started=started,
        )

    @app.view_closed(dbk.PREVIEW_CALLBACK)
    async def cancel(ack: AsyncAck, view: dict[str, Any]) -> None:
        await ack()
        metadata = str(view.get("private_metadata") or "")
        if metadata.startswith("k:"):
            drafts(ctx).drop(metadata[2:])


# ---------------------------------------------------------------------- slash subcommands
async def dispute(
    ctx: SlackContext, actor: Actor, channel: ChannelRef, args: list[str], text: str
) -> list[bk.Block]:
    """``/rankzero dispute <problem> [```variant```]``: run it on the runner and render the verdict.

    ``<problem>`` is the number shown on the problem, ``today:N`` or a question id of today's challenge.
    """
    _, code = split_variant(text)
    reference = parse_dispute_target(args, command="/rankzero ")
    return dbk.dispute_blocks(await ctx.commands.dispute(actor, channel, reference, code))


async def question_correct(ctx: SlackContext, actor: Actor, args: list[str]) -> list[bk.Block]:
    """``question correct <id> <letter>``: fix the official answer and re-score past attempts."""
    question_id, letter = parse_correct(args, command="/rankzero ")
    return dbk.correction_blocks(await ctx.commands.correct(actor, question_id, letter))


async def question_flags(ctx: SlackContext, actor: Actor, args: list[str]) -> list[bk.Block]:
    """``question flags [all]``: questions a dispute contradicted (open ones, or all with ``all``)."""
    flags = await ctx.commands.flags(actor, everything=parse_flags(args, command="/rankzero "))
    return dbk.flags_blocks(flags)
