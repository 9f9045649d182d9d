"""The composition root's rules: bot/bootstrap.py wires storage and the runner client; the entry points
(bot/cli/, bot/serve.py) get them from it, and the CLI modules share helpers only through _common.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What only bootstrap (and the packages themselves) may import: storage and the runner client.
CONCRETE = ("bot.storage", "bot.runner_client")
#: ``rankzero db upgrade`` runs the migrations before any service exists: it imports bot.storage.db alone
#: (through bootstrap it would load the services, httpx and pydantic too, ~0.4 s of CPU for nothing).
ALLOWED = {("bot/cli/root.py", "bot.storage.db")}
ENTRY_POINTS = [*sorted((ROOT / "bot" / "cli").glob("*.py")), ROOT / "bot" / "serve.py"]


def _import_froms(path: Path) -> list[ast.ImportFrom]:
    # ast.walk: imports inside functions count too (the CLI imports per command).
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom) and n.module]


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_entry_points_get_storage_and_the_runner_client_from_bootstrap() -> None:
    bad = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in ENTRY_POINTS
        for name in _imported_modules(path)
        if any(name == c or name.startswith(c + ".") for c in CONCRETE)
        and (str(path.relative_to(ROOT)), name) not in ALLOWED
    ]
    assert bad == []
    assert {"bot.storage.uow", "bot.runner_client"} <= _imported_modules(ROOT / "bot" / "bootstrap.py")


def test_no_cli_module_imports_another_modules_private_names() -> None:
    bad = [
        f"{path.relative_to(ROOT)}: from {node.module} import {alias.name}"
        for path in ENTRY_POINTS
        for node in _import_froms(path)
        if (node.module or "").startswith(("bot", "questions"))  # _import_froms kept named modules only
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert bad == []


def test_cli_modules_do_not_import_each_other() -> None:
    # Only _common and errors are shared (and __init__/__main__ expose the root group): no circle.
    shared = {"bot.cli._common", "bot.cli.errors"}
    for path in (ROOT / "bot" / "cli").glob("*.py"):
        if path.stem in ("__init__", "__main__"):
            continue
        others = {
            name
            for name in _imported_modules(path)
            if (name == "bot.cli" or name.startswith("bot.cli.")) and name not in shared
        }
        assert others == set(), f"{path.relative_to(ROOT)} imports {others}"
    assert _imported_modules(ROOT / "bot" / "cli" / "_common.py") & {"bot.cli", "bot.cli.root"} == set()
