"""Load and validate YAML bank files, reporting every problem as ``file:line: field: message``.

Validation is all-or-nothing: callers get either every question of every file, or a
:class:`BankValidationError` listing every error found (nothing is partially returned).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from questions.families import load_family_text
from questions.reading import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    BankError,
    BankValidationError,
    Loc,
    iter_yaml_files,
    parse_yaml_with_lines,
    read_bank_file,
    repeated_ids,
    too_large_error,
)
from questions.schema import BankFile, QuestionSpec

# Re-exported: callers import the bank's error types and readers from the loader, as before the split.
__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "BankError",
    "BankValidationError",
    "LoadedQuestion",
    "default_bank_dir",
    "iter_yaml_files",
    "load_paths",
    "parse_yaml_with_lines",
    "read_bank_file",
    "repeated_ids",
    "validate_text",
    "validate_text_async",
]
_QUOTED = re.compile(r"'([a-z_]+)'")

#: How to fix the most common pydantic error types, appended to the message.
_FIX_HINTS: dict[str, str] = {
    "missing": "add this field",
    "extra_forbidden": "remove it or check its spelling (see questions/README.md for the field list)",
    "string_type": "write text here; quote values that YAML would read as numbers or booleans",
    "literal_error": "use one of the listed values",
    "bool_parsing": "use true or false",
    "int_parsing": "use a whole number",
    "list_type": "write a YAML list ('- item' per line)",
    "string_too_short": "write some text here; it may not be empty",
    "string_too_long": "shorten it to the limit above",
}

#: Pydantic error types for a number or length outside its bounds.
_RANGE_ERRORS = frozenset(
    {"greater_than_equal", "less_than_equal", "greater_than", "less_than", "too_short", "too_long"}
)
#: How to pick a valid value for the bounded fields, appended to their range errors.
_RANGE_HINTS: dict[str, str] = {
    "gpus": "use 0 to run on CPU with gloo, or 1 to 8: the fewest GPUs that reproduce the output",
    "nproc": "use 1 for modes python and dp, or the number of ranks (2 to 8) for mode ddp",
    "time_limit_s": "use a number of seconds from 10 to 3600; the default is 120",
    "attempts": "use 1 to 5 attempts; the default is 2",
}


def default_bank_dir() -> Path:
    """The bank shipped with RankZero (``questions/bank``)."""
    return Path(__file__).resolve().parent / "bank"


@dataclass(frozen=True)
class LoadedQuestion:
    """A validated question and where it was written."""

    spec: QuestionSpec
    file: str
    line: int

    def import_spec(self) -> dict[str, Any]:
        """The spec as the bank stores and imports it (JSON values, unset fields left out)."""
        return self.spec.model_dump(mode="json", exclude_none=True)


#: The longest text accepted per field (characters), checked before the schema with file:line errors.
FIELD_CAPS: dict[str, int] = {
    "prompt": 4000,
    "code": 10_000,
    "explanation": 8000,
    "model_answer": 4000,
    "text": 2000,
    "feedback": 2000,
    "hint": 2000,
    "front": 1000,
    "back": 4000,
}
#: The longest text accepted in any other field.
DEFAULT_FIELD_CAP = 10_000


#: The most errors reported for one file; a last line says how many more there are.
MAX_ERRORS_PER_FILE = 50


def _long_fields(data: Any, lines: dict[Loc, int], file: str) -> tuple[Any, dict[Loc, BankError]]:
    """Every string longer than its field's cap, located, and the data with each one cut to its cap.

    Checked before the schema sees the data; the schema then checks the cut copy, so that a field over
    its limit does not hide the file's other errors (and no error is invented by the length: a long
    field's other errors are left out, see :func:`validate_text`).
    """
    errors: dict[Loc, BankError] = {}

    def walk(value: Any, loc: Loc) -> Any:
        if isinstance(value, dict):
            return {key: walk(item, (*loc, str(key))) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, (*loc, i)) for i, item in enumerate(value)]
        if isinstance(value, str):
            names = [part for part in loc if isinstance(part, str)]
            cap = FIELD_CAPS.get(names[-1] if names else "", DEFAULT_FIELD_CAP)
            if len(value) > cap:
                errors[loc] = BankError(
                    file,
                    _line_for(loc, lines),
                    _field_name(loc, data),
                    f"{len(value)} characters, over the limit of {cap}; shorten it",
                )
                return value[:cap]
        return value

    return walk(data, ()), errors


def _line_for(loc: Loc, lines: dict[Loc, int]) -> int:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return 1


def _field_name(loc: Loc, data: Any) -> str:
    """Render a pydantic location as a readable field path: ``ddp-foo.choices[1].correct``."""
    parts: list[str] = []
    rest = list(loc)
    if len(rest) >= 2 and rest[0] == "questions" and isinstance(rest[1], int):
        idx = rest[1]
        qid = None
        if (
            isinstance(data, dict)
            and isinstance(data.get("questions"), list)
            and idx < len(data["questions"])
        ):
            item = data["questions"][idx]
            qid = item.get("id") if isinstance(item, dict) else None
        parts.append(f"questions[{idx}]" + (f" ({qid})" if qid else ""))
        rest = rest[2:]
    for item in rest:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(file)"


def _refine_loc(loc: Loc, msg: str, lines: dict[Loc, int]) -> Loc:
    """Point a whole-question error at the field it is about (the first quoted field name present)."""
    if len(loc) != 2 or loc[0] != "questions":
        return loc
    for name in _QUOTED.findall(msg):
        if (*loc, name) in lines:
            return (*loc, name)
    return loc


def _message(err: dict[str, Any]) -> str:
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    kind = str(err["type"])
    hint = _FIX_HINTS.get(kind)
    if kind in _RANGE_ERRORS:
        names = [part for part in err.get("loc", ()) if isinstance(part, str)]
        hint = _RANGE_HINTS.get(names[-1] if names else "", "change it to a value within these bounds")
    return f"{msg} ({hint})" if hint else msg


def validate_text(text: str, file: str) -> list[LoadedQuestion]:
    """Validate one file's text; raise BankValidationError naming file, line and field.

    CPU-bound (up to MAX_FILE_BYTES of YAML): async callers use :func:`validate_text_async`.
    """
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_FILE_BYTES:
        raise BankValidationError([too_large_error(file, size)])
    data, lines = parse_yaml_with_lines(text, file)
    if isinstance(data, dict) and "families" in data and "questions" not in data:
        # A family file (questions/families): checked here, its questions come from bank/generated.
        load_family_text(text, file)
        return []
    if not isinstance(data, dict) or "questions" not in data:
        raise BankValidationError(
            [BankError(file, 1, "questions", "a bank file is a mapping with a 'questions:' list at the top")]
        )
    checked, long_fields = _long_fields(data, lines, file)
    errors = list(long_fields.values())
    try:
        bank = BankFile.model_validate(checked)
    except ValidationError as exc:
        errors += _schema_errors(exc, data, lines, file, skip=set(long_fields))
    if errors:
        raise BankValidationError(_bounded(sorted(errors, key=lambda e: e.line), file))
    return [
        LoadedQuestion(spec, file, lines.get(("questions", i), 1)) for i, spec in enumerate(bank.questions)
    ]


def _schema_errors(
    exc: ValidationError, data: Any, lines: dict[Loc, int], file: str, *, skip: set[Loc]
) -> list[BankError]:
    """The schema's errors, located; one per line of a multi-line message (a question's kind checks
    report all their problems at once). Errors about a field in ``skip`` (already reported as too long,
    and checked cut to its cap) are left out: they would be about the cut, not the author's text.
    """
    errors = []
    for err in exc.errors():
        for line in str(err["msg"]).splitlines() or [""]:
            loc = _refine_loc(tuple(err["loc"]), line, lines)
            if loc in skip:
                continue
            message = _message({**err, "msg": line})
            errors.append(BankError(file, _line_for(loc, lines), _field_name(loc, data), message))
    return errors


def _bounded(errors: list[BankError], file: str) -> list[BankError]:
    """At most MAX_ERRORS_PER_FILE errors, and a last one saying how many more there are."""
    if len(errors) <= MAX_ERRORS_PER_FILE:
        return errors
    more = len(errors) - MAX_ERRORS_PER_FILE
    last = errors[MAX_ERRORS_PER_FILE - 1].line
    return [
        *errors[:MAX_ERRORS_PER_FILE],
        BankError(
            file,
            last,
            "(file)",
            f"{more} more error(s) after this line, not listed; fix the ones above and validate again",
        ),
    ]


async def validate_text_async(text: str, file: str) -> list[LoadedQuestion]:
    """:func:`validate_text` in a worker thread, so an event loop (a chat adapter) keeps serving."""
    return await asyncio.to_thread(validate_text, text, file)


def load_paths(paths: Iterable[str | Path]) -> list[LoadedQuestion]:
    """Load every question under ``paths``; raise one BankValidationError listing all problems.

    Ids must be unique across everything loaded together.
    """
    errors: list[BankError] = []
    loaded: list[LoadedQuestion] = []
    for path in iter_yaml_files(paths):
        try:
            loaded.extend(validate_text(read_bank_file(path), str(path)))
        except BankValidationError as exc:
            errors.extend(exc.errors)
    for q, first in repeated_ids(loaded):
        errors.append(
            BankError(
                q.file,
                q.line,
                f"id ({q.spec.id})",
                f"duplicate id: already used at {first.file}:{first.line}; ids must be unique across "
                "the bank, so pick a new slug",
            )
        )
    if errors:
        raise BankValidationError(errors)
    return loaded
