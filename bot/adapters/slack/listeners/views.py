"""Modal submissions: the admin "question add" form, validated with the YAML bank's own schema.

Validation errors go back on the fields (``response_action: errors``, keyed by block id = spec field), so
the admin fixes them in place; a valid question is imported and the modal closes.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.adapters.slack import blocks as bk
from bot.adapters.slack.context import SlackContext
from bot.core.errors import RankZeroError
from questions.schema import QuestionSpec


def spec_from_form(values: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec dict of the form's values, and field errors found before the schema runs."""
    errors: dict[str, str] = {}
    spec: dict[str, Any] = {k: v.strip() for k, v in values.items() if k not in ("choices", "code")}
    if "code" in values:
        spec["code"] = values["code"]
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


def schema_errors(exc: ValidationError) -> dict[str, str]:
    """Pydantic errors keyed by the form field they belong to (model-level ones land on ``choices``)."""
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = err.get("loc") or ()
        field = str(loc[0]) if loc and str(loc[0]) in bk.QUESTION_FIELDS else "choices"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        out.setdefault(field, msg[:150])
    return out


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach the modal submission listeners."""

    @app.view(bk.QUESTION_CALLBACK)
    async def question_add(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        spec, errors = spec_from_form(bk.question_values(view.get("state") or {}))
        if not errors:
            try:
                QuestionSpec.model_validate(spec)
            except ValidationError as exc:
                errors = schema_errors(exc)
        if errors:
            await ack(response_action="errors", errors=errors)
            return
        actor = await ctx.actor(body["user"])
        try:
            await ctx.services.quiz.admin_import(
                actor, [QuestionSpec.model_validate(spec).model_dump(mode="json", exclude_none=True)]
            )
        except RankZeroError as exc:
            await ack(response_action="errors", errors={"id": str(exc)[:150]})
            return
        await ack()

    @app.view(bk.PLAY_CALLBACK)
    async def play_closed(ack: AsyncAck) -> None:
        # The problem modal has no submit button; acknowledge anything that arrives for it.
        await ack()
