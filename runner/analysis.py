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


# Operations whose result depends on the interpreter's string hash seed: building or iterating a set (its
# order follows the hashes), hash() itself.  dict views combined with set operators make sets too.
_HASH_CALLS = frozenset({"set", "frozenset", "hash"})
_SET_METHODS = frozenset({"union", "intersection", "difference", "symmetric_difference", "__hash__"})
_SET_OPERATORS = (ast.Sub, ast.BitAnd, ast.BitOr, ast.BitXor)
_VIEWS = frozenset({"keys", "items"})


def observes_string_hashes(tree: ast.Module | None) -> bool:
    """Whether a snippet may see the string hash seed, which differs per rank under torchrun.

    Each torchrun worker is a new interpreter with a random seed of its own, so a set of parameter names
    or state-dict keys iterates in a different order on each rank (a classic cause of DDP errors and
    hangs); ranks forked from one warm interpreter all share its seed and would agree.  True when the
    snippet builds a set (literal, comprehension, ``set()``/``frozenset()``, a dict view combined with a
    set operator, a set method) or calls ``hash()``.  A snippet that cannot be parsed says False: it fails
    the same way in any interpreter.
    """
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Set | ast.SetComp):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _HASH_CALLS:
            return True
        if isinstance(node, ast.Attribute) and node.attr in _SET_METHODS:
            return True
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, _SET_OPERATORS)
            and any(_is_view(side) for side in (node.left, node.right))
        ):
            return True
    return False


def _is_view(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _VIEWS
        and not node.args
    )


def source_line(source: str, number: int) -> str | None:
    """Line ``number`` (1-based) of the snippet as a traceback counts lines, or None when out of range."""
    if number < 1:
        return None
    # Split at most `number` times: a line number past the end never costs more than the source's size.
    lines = _SOURCE_LINE_END.split(source, maxsplit=number)
    return lines[number - 1] if number <= len(lines) else None
