"""bot/ and runner/ use third-party packages through their public names only (issue 13).

An AST scan of every module: it fails on

* ``from <third-party> import _x`` and imports of a private module (``import pkg._impl``,
  ``from pkg._internal import x``);
* ``<third-party name>._x``: an attribute starting with ``_`` read from a name bound to a third-party
  module or object (``aiosqlite._x``, ``Job._modify``);
* a class deriving from a third-party class that overrides, calls or reads one of its base's private
  names (``def _process_jobs`` in an ``AsyncIOScheduler`` subclass, ``self._conn`` in an
  ``aiosqlite.Connection`` one). The base is imported and its source read, so an instance attribute the
  base sets in ``__init__`` counts too;
* ``obj._x`` on any object, where ``_x`` is private to a third-party class the module imports and the
  module does not define ``_x`` itself (``conn._execute(...)`` beside ``import aiosqlite``).

Dunder names (``__init__``, ``__name__``) are public. Standard-library modules are out of scope (their
underscore names such as ``os._exit`` are documented API or a separate review).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import linecache
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("bot", "runner")
FIRST_PARTY = {"bot", "runner", "questions", "migrations", "tests", "benchmarks"}


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def third_party(module: str) -> bool:
    top = module.split(".")[0]
    return bool(top) and top not in FIRST_PARTY and top not in sys.stdlib_module_names


def bindings(tree: ast.Module) -> dict[str, str]:
    """Local name -> the third-party dotted path it is bound to, from the module's imports."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if third_party(alias.name):
                    local = alias.asname or alias.name.split(".")[0]
                    bound[local] = alias.name if alias.asname else local
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and third_party(node.module)
        ):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything else (calls, subscripts)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def resolve(path: str) -> object | None:
    """Import ``pkg.mod.Attr`` (the longest importable module prefix, then attributes)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


@functools.cache
def _class_starts(filename: str) -> dict[str, int]:
    """Where each class of a source file starts (its first decorator, as ``inspect.findsource`` has it),
    by qualified name, 0-based: one parse per file instead of ``inspect.getsource``'s one per class."""
    starts: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                first = child.decorator_list[0].lineno if child.decorator_list else child.lineno
                starts.setdefault(name, first - 1)
                visit(child, f"{name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, f"{prefix}{child.name}.<locals>.")
            else:
                visit(child, prefix)

    visit(ast.parse("".join(linecache.getlines(filename))), "")
    return starts


def class_source(cls: type) -> str:
    """``inspect.getsource(cls)``, with each module parsed once (issue 29: re-parsing the same big
    third-party modules for each class was most of this test's 11 s)."""
    filename = inspect.getsourcefile(cls)
    if filename is None:
        raise OSError(f"no source file for {cls!r}")
    lines = linecache.getlines(filename, vars(sys.modules[cls.__module__]))
    start = _class_starts(filename).get(cls.__qualname__)
    if start is None:
        raise OSError(f"could not find class definition of {cls.__qualname__}")
    return "".join(inspect.getblock(lines[start:]))


@functools.cache
def base_private_names(base: type) -> frozenset[str]:
    """Private names a third-party class (and its third-party ancestors) defines or sets on self.

    Cached per class: ``inspect.getsource`` parses the class's whole module, and the same few classes
    (discord.py's, SQLAlchemy's) are bases or imports of many scanned modules.
    """
    names: set[str] = set()
    for cls in base.__mro__:
        if cls is object or not third_party(cls.__module__):
            continue
        names.update(n for n in vars(cls) if is_private(n))
        try:
            source = class_source(cls)
        except (OSError, TypeError):
            continue
        names.update(n for n in re.findall(r"self\.(_\w+)", source) if is_private(n))
    return frozenset(names)


def violations(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(ROOT)
    bound = bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if third_party(alias.name) and any(is_private(p) for p in alias.name.split(".")):
                    yield f"{where}:{node.lineno}: import {alias.name} (a private module)"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not third_party(node.module):
                continue
            if any(is_private(p) for p in node.module.split(".")):
                yield f"{where}:{node.lineno}: from {node.module} import ... (a private module)"
            for alias in node.names:
                if is_private(alias.name):
                    yield f"{where}:{node.lineno}: from {node.module} import {alias.name}"
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            chain = dotted(node.value)
            if chain and chain[0] in bound:
                yield f"{where}:{node.lineno}: {'.'.join(chain)}.{node.attr} (a third-party private name)"
        elif isinstance(node, ast.ClassDef):
            yield from subclass_violations(node, bound, where)
    yield from instance_violations(tree, bound, where)


def third_party_classes(bound: dict[str, str]) -> list[type]:
    """The third-party classes a module imports (by name) and can therefore hold instances of."""
    classes = []
    for path in bound.values():
        obj = resolve(path)
        if isinstance(obj, type) and third_party(obj.__module__):
            classes.append(obj)
    return classes


def own_private_names(tree: ast.Module) -> set[str]:
    """Private names the module defines itself: methods, and attributes it assigns on self/cls."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and is_private(node.name):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and is_private(node.attr):
            names.add(node.attr)
    return names


def subclass_violations(node: ast.ClassDef, bound: dict[str, str], where: Path) -> Iterator[str]:
    for base_expr in node.bases:
        chain = dotted(base_expr)
        if not chain or chain[0] not in bound:
            continue
        base = resolve(".".join([bound[chain[0]], *chain[1:]]))
        if not isinstance(base, type):
            continue
        private = base_private_names(base)
        for inner in ast.walk(node):
            name = None
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                name = inner.name
            elif (
                isinstance(inner, ast.Attribute)
                and isinstance(inner.value, ast.Name)
                and inner.value.id in {"self", "cls", "super"}
            ):
                name = inner.attr
            if name is not None and name in private:
                yield (
                    f"{where}:{getattr(inner, 'lineno', node.lineno)}: {node.name} uses "
                    f"{base.__module__}.{base.__qualname__}'s private {name}"
                )


def instance_violations(tree: ast.Module, bound: dict[str, str], where: Path) -> Iterator[str]:
    """``obj._x`` where ``_x`` is private to a third-party class the module imports and not one of ours.

    Instances are not typed statically, so this goes by name: a private name of a third-party class the
    module imports or subclasses (``conn._conn`` beside a subclass of ``aiosqlite.Connection``) that the
    module does not define itself.
    """
    private: dict[str, str] = {}
    bases = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base_expr in node.bases:
                chain = dotted(base_expr)
                if chain and chain[0] in bound:
                    base = resolve(".".join([bound[chain[0]], *chain[1:]]))
                    if isinstance(base, type):
                        bases.append(base)
    for cls in [*third_party_classes(bound), *bases]:
        for name in base_private_names(cls):
            private.setdefault(name, f"{cls.__module__}.{cls.__qualname__}")
    ours = own_private_names(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in private
            and node.attr not in ours
            and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
        ):
            yield f"{where}:{node.lineno}: .{node.attr} (private to {private[node.attr]})"


def scanned_files() -> list[Path]:
    return sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py"))


def test_no_third_party_private_names() -> None:
    found = [v for path in scanned_files() for v in violations(path)]
    assert found == [], "third-party private names used (use the public API):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from aiosqlite import _x\n", "from aiosqlite import _x"),
        ("from sqlalchemy.engine._row_cy import x\n", "a private module"),
        ("import pydantic._internal\n", "a private module"),
        ("import aiosqlite\nc = aiosqlite._thread\n", "aiosqlite._thread"),
        ("from apscheduler.job import Job\nJob._modify\n", "Job._modify"),
        (
            "from apscheduler.schedulers.asyncio import AsyncIOScheduler\n"
            "class S(AsyncIOScheduler):\n    def _process_jobs(self):\n        return None\n",
            "private _process_jobs",
        ),
        (
            "import aiosqlite\nclass C(aiosqlite.Connection):\n    def f(self):\n        return self._conn\n",
            "private _conn",
        ),
        (
            "import aiosqlite\nclass C(aiosqlite.Connection):\n    pass\n"
            "async def f(conn: C):\n    return await conn._execute(print)\n",
            "._execute",
        ),
        (
            "from apscheduler.job import Job\ndef f(job: Job):\n    return job._get_run_times(0)\n",
            "_get_run_times",
        ),
    ],
)
def test_the_scan_catches(
    tmp_path: Path, source: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan is not vacuous: each pattern it must catch, planted in a module, is reported."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    planted = tmp_path / "m.py"
    planted.write_text(source)
    found = list(violations(planted))
    assert any(expected in v for v in found), found


def test_the_scan_allows_public_and_own_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    planted = tmp_path / "m.py"
    planted.write_text(
        "import os\nimport aiosqlite\nfrom bot.core import _x\nos._exit\naiosqlite.__name__\n"
        "class C(aiosqlite.Connection):\n    def _mine(self):\n        return self._own_thing\n"
    )
    assert list(violations(planted)) == []
