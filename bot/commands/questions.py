"""Questions typed into a chat form: the runner settings, the spec, and the schema's verdict on it.

Forms differ per platform (Discord's modal has five text inputs, so the runner settings go on the Code
field's first line; Slack's form has a field per setting) but what they produce is one question spec,
checked with the YAML bank's own schema. The runner line, for a form with a single code field::

    runner: MODE [RANKS] [gpus=N] [init]

``MODE`` is ``python``, ``dp`` or ``ddp``; ``RANKS`` the number of ddp ranks (1 otherwise); ``gpus=N`` the
GPUs needed to reproduce it faithfully; ``init`` lets the runner call ``init_process_group`` first. E.g.
``runner: ddp 2 init``. The line is removed from the code. A ``predict_output`` question with code and no
such line runs as one plain Python process (``runner: python``); the schema checks the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from bot.core.dispute_service import needs_preview
from bot.core.vocabulary import Kind
from questions.schema import QuestionSpec

LETTERS = "ABCDEFGHIJ"
RUNNER_SYNTAX = "runner: MODE [RANKS] [gpus=N] [init], e.g. `runner: ddp 2 init` (MODE: python, dp or ddp)"
#: The runner block of a predict_output question with code and no runner settings.
DEFAULT_RUNNER: dict[str, Any] = {"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False}
#: Form fields of the question's ``runner`` block (a form with a field per setting) and the RunnerSpec
#: field each fills.
RUNNER_FIELDS: dict[str, str] = {
    "runner_mode": "mode",
    "runner_nproc": "nproc",
    "runner_gpus": "gpus",
    "runner_init": "init_process_group",
}

_RUNNER_LINE = re.compile(r"\A[ \t]*runner[ \t]*:(?P<rest>[^\n]*)(?:\n|\Z)", re.IGNORECASE)
_GPUS = re.compile(r"gpus?=(\d+)", re.IGNORECASE)
_NPROC = re.compile(r"(?:nproc=)?(\d+)", re.IGNORECASE)


class RunnerLineError(ValueError):
    """The Code field's ``runner:`` line cannot be read."""


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
    """``(runner block or None, code without the runner line)`` from a form's Code field.

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


def runner_from_fields(
    values: Mapping[str, str], kind: str | None, has_code: bool
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The spec's ``runner`` block from a form's runner fields (:data:`RUNNER_FIELDS`), and errors found
    on them. A ``predict_output`` question with code always gets one (defaults: one plain Python process,
    no GPU); any other question only when a runner field was filled (the schema then says whether it may).
    """
    given = {f: values[f] for f in RUNNER_FIELDS if f in values}
    if not given and not (kind == Kind.PREDICT_OUTPUT and has_code):
        return None, {}
    errors: dict[str, str] = {}
    runner: dict[str, Any] = {
        "mode": given.get("runner_mode", "python").strip(),
        "nproc": 1,
        "gpus": 0,
        "init_process_group": bool(given.get("runner_init")),
    }
    for field in ("runner_nproc", "runner_gpus"):
        if field in given:
            try:
                runner[RUNNER_FIELDS[field]] = int(given[field].strip())
            except ValueError:
                errors[field] = f"a whole number, not {given[field].strip()!r}"
    return runner, errors


def runner_error_field(loc: tuple[Any, ...], message: str) -> str | None:
    """The runner form field a schema error belongs to (None: not a runner error)."""
    if loc and loc[0] == "runner":
        sub = str(loc[1]) if len(loc) > 1 else "nproc"  # RunnerSpec's own check is about nproc vs mode
        return next((f for f, name in RUNNER_FIELDS.items() if name == sub), "runner_nproc")
    if not loc and "'runner'" in message:
        return "runner_mode"
    return None


def spec_from_text_form(
    *,
    qid: str,
    kind: str,
    topic: str,
    difficulty: str,
    prompt: str,
    code: str,
    choices: str,
    correct: str,
    notes: str,
) -> dict[str, Any]:
    """The question spec a form of plain text fields describes.

    Choices come one per line (A, B, C...); ``notes`` is the hint, a ``---`` line, then the explanation.
    The code's first line may give the runner settings (``runner: ddp 2 init``); a malformed one raises
    RunnerLineError.
    """
    runner, code = split_runner_line(code, kind)
    # A literal "\n" in a choice is a line break: outputs of several ranks span lines.
    lines = [c.strip().replace("\\n", "\n") for c in choices.splitlines() if c.strip()]
    letter = correct.strip().upper()
    hint, _, explanation = notes.partition("\n---")
    spec: dict[str, Any] = {
        "id": qid.strip(),
        "kind": kind,
        "topic": topic.strip(),
        "difficulty": difficulty,
        "prompt": prompt.strip(),
        "choices": [
            {"text": text, "correct": LETTERS[i] == letter} for i, text in enumerate(lines[: len(LETTERS)])
        ],
    }
    if code.strip():
        spec["code"] = code
    if runner is not None:
        spec["runner"] = runner
    if hint.strip():
        spec["hint"] = hint.strip()
    if explanation.strip():
        spec["explanation"] = explanation.strip()
    return spec


class QuestionInvalid(ValueError):
    """A form's question fails the bank's schema; ``problems`` are ``(location, message)`` pairs."""

    def __init__(self, problems: list[tuple[tuple[Any, ...], str]]) -> None:
        super().__init__(
            "; ".join(f"{'.'.join(map(str, loc)) or 'question'}: {msg}" for loc, msg in problems)
        )
        self.problems = problems

    def lines(self) -> list[str]:
        """``field: message`` for each problem, as an admin can act on them."""
        return [f"{'.'.join(str(p) for p in loc) or 'question'}: {msg}" for loc, msg in self.problems]


def validate_question(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as the bank stores it (schema-checked, defaults filled), or QuestionInvalid."""
    try:
        valid = QuestionSpec.model_validate(dict(spec))
    except ValidationError as exc:
        # A question's kind checks report every problem at once, one per line of the message.
        raise QuestionInvalid(
            [
                (tuple(err.get("loc") or ()), line.removeprefix("Value error, "))
                for err in exc.errors()
                for line in str(err.get("msg", "invalid")).splitlines() or ["invalid"]
            ]
        ) from None
    return valid.model_dump(mode="json", exclude_none=True)


def wants_preview(spec: Mapping[str, Any]) -> bool:
    """Whether a valid question is shown with the runner's real output before it is saved."""
    return needs_preview(dict(spec))
