"""Load and validate YAML bank files, reporting every problem as ``file:line: field: message``.

Validation is all-or-nothing: callers get either every question of every file, or a
:class:`BankValidationError` listing every error found (nothing is partially returned).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml
from pydantic import ValidationError

from questions.schema import BankFile, QuestionSpec

Loc = tuple[str | int, ...]
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
class BankError:
    """One problem found in a bank file, located precisely enough to fix."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class BankValidationError(Exception):
    """Raised when any file of a load has an error; carries all of them."""

    def __init__(self, errors: list[BankError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


@dataclass(frozen=True)
class LoadedQuestion:
    """A validated question and where it was written."""

    spec: QuestionSpec
    file: str
    line: int


#: The largest bank file accepted (bytes): a bank file of ~100 questions is 30 KiB.
MAX_FILE_BYTES = 512 * 1024
#: How deep YAML may nest (a bank file needs 5 levels); deeper input is refused, not recursed into.
MAX_DEPTH = 20
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


class _RefusedYaml(yaml.YAMLError):
    """YAML this loader refuses on purpose (aliases, nesting), with the line where it starts."""

    def __init__(self, message: str, mark: yaml.Mark) -> None:
        super().__init__(message)
        self.problem = message
        self.problem_mark = mark


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers the line of every mapping value and sequence item.

    Anchors and aliases are refused: an alias is a reference, and a few hundred bytes of nested aliases
    ("billion laughs") expand into gigabytes. Bank files never need them.
    """

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        """Compose as PyYAML does, refusing aliases, anchors and nesting deeper than MAX_DEPTH."""
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            sign = "*" if isinstance(event, yaml.AliasEvent) else "&"
            raise _RefusedYaml(
                f"YAML anchors and aliases ({sign}{event.anchor}) are not allowed in bank files; write the "
                "value out in full",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _RefusedYaml(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _to_python(node: yaml.Node, loc: Loc, lines: dict[Loc, int], loader: _LineLoader) -> Any:
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            # A key's line is where the key is written: that is where the author looks.
            out[key] = _to_python(value_node, (*loc, str(key)), lines, loader)
            lines[(*loc, str(key))] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*loc, i), lines, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def parse_yaml_with_lines(text: str, file: str) -> tuple[Any, dict[Loc, int]]:
    """Parse YAML text, returning the data and a map from location path to 1-based line."""
    try:
        # The reader checks every character as the loader is made: a raw control byte fails here already.
        loader = _LineLoader(text)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, max(0, exc.position)) + 1
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        why = f"the control character U+{code:04X} is not allowed in YAML; remove it or write it as an escape"
        raise BankValidationError([BankError(file, line, "(yaml)", why)]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        lines: dict[Loc, int] = {}
        return _to_python(node, (), lines, loader), lines
    except yaml.YAMLError as exc:
        raise BankValidationError([_yaml_error(exc, file)]) from None
    finally:
        loader.dispose()


def _yaml_error(exc: yaml.YAMLError, file: str) -> BankError:
    """Where the author must look: a scalar that never ends is reported where it starts."""
    if isinstance(exc, _RefusedYaml):
        return BankError(file, exc.problem_mark.line + 1, "(yaml)", str(exc.problem))
    problem_mark = getattr(exc, "problem_mark", None)
    context_mark = getattr(exc, "context_mark", None)
    context = getattr(exc, "context", None) or ""
    problem = getattr(exc, "problem", None) or str(exc)
    mark = problem_mark
    if context.startswith("while scanning") and context_mark is not None:
        # "while scanning a quoted scalar ... found unexpected end of stream": the scanner noticed at the
        # end of the file, but the mistake is the quote that was opened here.
        mark = context_mark
        where = f" (noticed at line {problem_mark.line + 1})" if problem_mark is not None else ""
        problem = f"{context[len('while ') :]} that starts here: {problem}{where}"
    line = mark.line + 1 if mark is not None else 1
    return BankError(file, line, "(yaml)", f"not valid YAML: {problem}; check indentation and quoting")


def _long_fields(data: Any, lines: dict[Loc, int], file: str) -> list[BankError]:
    """Every string longer than its field's cap, located (checked before the schema sees the data)."""
    errors: list[BankError] = []

    def walk(value: Any, loc: Loc) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*loc, str(key)))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, (*loc, i))
        elif isinstance(value, str):
            names = [part for part in loc if isinstance(part, str)]
            cap = FIELD_CAPS.get(names[-1] if names else "", DEFAULT_FIELD_CAP)
            if len(value) > cap:
                errors.append(
                    BankError(
                        file,
                        _line_for(loc, lines),
                        _field_name(loc, data),
                        f"{len(value)} characters, over the limit of {cap}; shorten it",
                    )
                )

    walk(data, ())
    return errors


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
        raise BankValidationError([_too_large(file, size)])
    data, lines = parse_yaml_with_lines(text, file)
    if isinstance(data, dict) and "families" in data and "questions" not in data:
        # A family file (questions/families): checked here, its questions come from bank/generated.
        from questions.families import load_family_text  # imported here: families builds on this module

        load_family_text(text, file)
        return []
    if not isinstance(data, dict) or "questions" not in data:
        raise BankValidationError(
            [BankError(file, 1, "questions", "a bank file is a mapping with a 'questions:' list at the top")]
        )
    if long_fields := _long_fields(data, lines, file):
        raise BankValidationError(long_fields)
    try:
        bank = BankFile.model_validate(data)
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            loc: Loc = tuple(err["loc"])
            loc = _refine_loc(loc, str(err["msg"]), lines)
            errors.append(BankError(file, _line_for(loc, lines), _field_name(loc, data), _message(dict(err))))
        raise BankValidationError(errors) from None
    return [
        LoadedQuestion(spec, file, lines.get(("questions", i), 1)) for i, spec in enumerate(bank.questions)
    ]


async def validate_text_async(text: str, file: str) -> list[LoadedQuestion]:
    """:func:`validate_text` in a worker thread, so an event loop (a chat adapter) keeps serving."""
    return await asyncio.to_thread(validate_text, text, file)


def _too_large(file: str, size: int) -> BankError:
    return BankError(
        file,
        1,
        "(file)",
        f"{size} bytes, over the limit of {MAX_FILE_BYTES} bytes per bank file; split it into several files",
    )


def read_bank_file(path: Path) -> str:
    """A bank file's text: BankValidationError when it is too large or not UTF-8 (with the line)."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise BankValidationError([_too_large(str(path), size)])
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise BankValidationError(
            [
                BankError(
                    str(path),
                    line,
                    "(file)",
                    f"not UTF-8 text at column {column} (byte {raw[exc.start]:#04x}: {exc.reason}); save the "
                    "file as UTF-8",
                )
            ]
        ) from None


def iter_yaml_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Expand files and directories (recursively) into the YAML files they hold, sorted."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file())
        elif path.exists():
            yield path
        else:
            raise BankValidationError([BankError(str(path), 0, "(path)", "no such file or directory")])


class _Located(Protocol):
    """Something loaded from a file at a line, with an id (a question or a family)."""

    @property
    def spec(self) -> Any: ...

    @property
    def file(self) -> str: ...

    @property
    def line(self) -> int: ...


L = TypeVar("L", bound=_Located)


def repeated_ids(loaded: Iterable[L]) -> list[tuple[L, L]]:
    """Each entry whose ``spec.id`` was already loaded, paired with the first one of that id."""
    seen: dict[str, L] = {}
    return [(item, first) for item in loaded if (first := seen.setdefault(item.spec.id, item)) is not item]


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
