"""Reading a snippet's source on the host, with limits: the source is the user's, hence hostile.

``ast.parse`` recurses once per nesting level: a 60 KB arithmetic expression (``1+1+...``), a long
attribute chain or 60,000 unary minus signs raise RecursionError or MemoryError out of the parser, and a
large enough source costs time.  Everything the host learns from a snippet's text goes through
``parse_snippet``, which bounds the size and turns every such failure into "no tree", so that the host
only loses an optional note, never the verdict.
"""

from __future__ import annotations

import ast
import re

from runner.config import MAX_CODE_BYTES

# Python's tokenizer, hence every traceback and frame line number, ends a line only at \n, \r\n or \r.
# str.splitlines also splits at \f, \v, \x1c-\x1e, \x85, U+2028 and U+2029, which a snippet may hold in a
# comment or a string: mapping a traceback's line number through it names another line.
_SOURCE_LINE_END = re.compile(r"\r\n|\r|\n")


def parse_snippet(source: str) -> ast.Module | None:
    """The snippet's syntax tree, or None when it is too large, too deep or not valid Python."""
    if len(source) > MAX_CODE_BYTES:
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # ValueError: NUL bytes; RecursionError/MemoryError: nesting deeper than the parser's stack.
        return None


def source_line(source: str, number: int) -> str | None:
    """Line ``number`` (1-based) of the snippet as a traceback counts lines, or None when out of range."""
    if number < 1:
        return None
    # Split at most `number` times: a line number past the end never costs more than the source's size.
    lines = _SOURCE_LINE_END.split(source, maxsplit=number)
    return lines[number - 1] if number <= len(lines) else None
