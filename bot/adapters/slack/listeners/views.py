"""Modal submissions: the admin "question add" form, validated with the YAML bank's own schema.

Validation errors go back on the fields (``response_action: errors``, keyed by block id = spec field), so
the admin fixes them in place; a valid question is imported and the modal closes, except a
``predict_output`` question with code, which first gets the runner's preview (listeners/disputes.py).
"""

from __future__ import annotations

import time
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures
from bot.adapters.slack.context import SlackContext
from bot.adapters.slack.listeners import disputes
from bot.commands import questions
from bot.core.errors import RankZeroError


def spec_from_form(values: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec dict of the form's values, and field errors found before the schema runs."""
    errors: dict[str, str] = {}
    skip = ("choices", "code", *questions.RUNNER_FIELDS)
    spec: dict[str, Any] = {k: v.strip() for k, v in values.items() if k not in skip}
    if "code" in values:
        spec["code"] = values["code"]
    runner, runner_errors = questions.runner_from_fields(values, spec.get("kind"), "code" in values)
    errors.update(runner_errors)
    if runner is not None:
        spec["runner"] = runner
    for field in ("time_limit_s", "attempts"):
        if field in spec:
            try:
                spec[field] = int(spec[field])
            except ValueError:
                errors[field] = f"a whole number, not {spec[field]!r}"
    lines = [ln.strip() for ln in values.get("choices", "").splitlines() if ln.strip()]
    spec["choices"] = [
        {"text": ln[1:].strip(), "correct": True} if ln.startswith("*") else {"text": ln} for ln in lines
    ]
    return spec, errors


def schema_errors(exc: questions.QuestionInvalid) -> dict[str, str]:
    """The schema's problems keyed by the form field they belong to (model-level ones land on ``choices``)."""
    out: dict[str, str] = {}
    for loc, message in exc.problems:
        msg = message.removeprefix("Value error, ")
        field = questions.runner_error_field(loc, msg) or (
            str(loc[0]) if loc and str(loc[0]) in bk.QUESTION_FIELDS else "choices"
        )
        out.setdefault(field, msg[:150])
    return out


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach the modal submission listeners."""

    @app.view(bk.QUESTION_CALLBACK)
    async def question_add(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        started = time.monotonic()
        typed = bk.question_values(view.get("state") or {})
        spec, errors = spec_from_form(typed)
        valid: dict[str, Any] = {}
        if not errors:
            try:
                valid = questions.validate_question(spec)
            except questions.QuestionInvalid as exc:
                errors = schema_errors(exc)
        if errors:
            await ack(response_action="errors", errors=errors)
            return
        if questions.wants_preview(valid):
            await disputes.begin_preview(ack, ctx, body["user"], valid, started, body)
            return
        question_id = str(valid.get("id", "?"))

        async def save() -> failures.Submitted:
            # The user lookup and the import run after the form's answer when they are slow (see
            # failures.answer_submission): Slack gives a submission 3 s.
            actor = await ctx.actor(body["user"], body=body)
            try:
                await ctx.commands.import_questions(actor, [valid])
            except RankZeroError as exc:
                # Late (after "Working…"): the form comes back with what the admin typed, and why.
                return failures.Submitted(
                    {"response_action": "errors", "errors": {"id": str(exc)[:150]}},
                    late_view=bk.question_modal(typed, note=f"Not saved: {exc}"),
                )
            return failures.Submitted({}, late_view=bk.message_view(f"Added question {question_id}."))

        await failures.answer_submission(
            ack,
            ctx.client,
            str(view.get("id")),
            save(),
            working=bk.message_view(f"Working… saving question {question_id}."),
            started=started,
        )

    @app.view(bk.PLAY_CALLBACK)
    async def play_closed(ack: AsyncAck) -> None:
        # The problem modal has no submit button; acknowledge anything that arrives for it.
        await ack()
