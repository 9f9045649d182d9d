"""Reading a snippet's source on the host, with limits: the source is the user's, hence hostile.

``ast.parse`` recurses once per nesting level: a 60 KB arithmetic expression (``1+1+...``), a long
attribute chain or 60,000 unary minus signs raise RecursionError or MemoryError out of the parser, and a
large enough source costs time.  Everything the host learns from a snippet's text goes through
``parse_snippet``, which bounds the size and turns every such failure into "no tree", so that the host
only loses an optional note, never the verdict.
"""

from __future__ import annotations

import ast

from runner.config import MAX_CODE_BYTES


def parse_snippet(source: str) -> ast.Module | None:
    """The snippet's syntax tree, or None when it is too large, too deep or not valid Python."""
    if len(source) > MAX_CODE_BYTES:
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # ValueError: NUL bytes; RecursionError/MemoryError: nesting deeper than the parser's stack.
        return None
