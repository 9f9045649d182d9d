"""Reading bank and family files safely: size and UTF-8 checks, a YAML loader that refuses aliases and deep
nesting and remembers every value's line, and the ``file:line: field: message`` error type.

Both question files (questions/loader.py) and family files (questions/families.py) are read through
here, so the two share one set of limits and neither imports the other's reader.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

Loc = tuple[str | int, ...]


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


#: The largest bank file accepted (bytes): a bank file of ~100 questions is 30 KiB.
MAX_FILE_BYTES = 512 * 1024
#: How deep YAML may nest (a bank file needs 5 levels); deeper input is refused, not recursed into.
MAX_DEPTH = 20


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


def too_large_error(file: str, size: int) -> BankError:
    """The error for a file over MAX_FILE_BYTES."""
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
        raise BankValidationError([too_large_error(str(path), size)])
    # The size a path reports is not a bound: a device (/dev/zero) or a pipe reports 0 and never ends.
    # Read one byte past the limit at most.
    with path.open("rb") as f:
        raw = f.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise BankValidationError(
            [
                BankError(
                    str(path),
                    1,
                    "(file)",
                    f"more than {MAX_FILE_BYTES} bytes (the limit per bank file) and not a regular file of "
                    "known size; give a bank file's path",
                )
            ]
        )
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
