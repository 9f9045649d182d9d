"""What runs inside the sandbox (runner/inside/) stands alone: bound there without the rest of the runner, it
imports nothing else of it, statically (the import-linter contract, checked here over every module so that a
new runner module is covered too) or when it runs (imported from a copy that holds nothing else).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from runner.sandbox import INSIDE
from runner.service import RunnerService
from runner.verdict import Status
from tests.runner.conftest import run

ROOT = Path(__file__).resolve().parents[2]


def _runner_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name == "runner" or name.startswith("runner.")}


def test_no_module_inside_imports_the_rest_of_the_runner() -> None:
    modules = sorted(INSIDE.glob("*.py"))
    assert len(modules) >= 8
    outside = {
        f"{path.name}: {name}"
        for path in modules
        for name in _runner_imports(path)
        if not name.startswith("runner.inside")
    }
    assert outside == set()


def test_the_package_runs_from_a_copy_holding_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "runner").mkdir()
    shutil.copy(ROOT / "runner" / "__init__.py", tmp_path / "runner" / "__init__.py")
    shutil.copytree(INSIDE, tmp_path / "runner" / "inside", ignore=shutil.ignore_patterns("__pycache__"))
    names = sorted(path.stem for path in INSIDE.glob("*.py") if path.stem != "__main__")
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        + "".join(f"import runner.inside.{name}\n" for name in names if name != "__init__")
        + "import runner\n"
        f"assert runner.__file__.startswith({str(tmp_path)!r}), runner.__file__\n"
        "print(sorted(m for m in sys.modules if m.startswith('runner')))\n"
    )
    out = subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(ast.literal_eval(out.stdout.strip()))
    assert loaded == {"runner", "runner.inside", *(f"runner.inside.{n}" for n in names if n != "__init__")}


def test_a_snippet_sees_main_as_python_main_py_gives_it(service: RunnerService) -> None:
    """Run from modules of runner/inside (not from one script run as ``__main__``), a rank still gives the
    snippet what ``python main.py`` would: ``__name__``, ``__file__``, the builtins module, its own folder
    first on the path, and none of the runner's modules importable by a plain name.
    """
    code = (
        "import importlib.util, sys\n"
        "print(__name__, __file__, type(__builtins__).__name__, sys.path[0])\n"
        "print([n for n in ('protocol', 'supervisor', 'snippet', 'zygote') if importlib.util.find_spec(n)])\n"
    )
    verdict = run(service, code)
    assert verdict.status == Status.OK, verdict.to_dict()
    first, second = verdict.ranks[0].stdout.splitlines()
    assert first == "__main__ /tmp/main.py module /tmp"
    assert second == "[]"
