"""Architecture rules: bot/core is platform-neutral; bot and runner never import each other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE_BANNED = (
    "discord",
    "slack_bolt",
    "slack_sdk",
    "sqlalchemy",
    "httpx",
    "bot.storage",
    "bot.adapters",
    "rich",
)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _violations(folder: str, banned: tuple[str, ...]) -> list[str]:
    bad = []
    for path in (ROOT / folder).rglob("*.py"):
        for name in _imports(path):
            if any(name == b or name.startswith(b + ".") for b in banned):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


def test_core_imports_no_platform_or_storage() -> None:
    assert _violations("bot/core", CORE_BANNED) == []


def test_bot_and_runner_never_import_each_other() -> None:
    assert _violations("bot", ("runner",)) == []
    assert _violations("runner", ("bot", "questions")) == []


def test_the_command_layer_imports_no_platform_or_storage() -> None:
    # bot/commands sits between the adapters and the core: platform-neutral, storage behind ports.
    banned = (*CORE_BANNED, "aiohttp", "bot.serve", "bot.bootstrap", "bot.cli")
    assert _violations("bot/commands", banned) == []
