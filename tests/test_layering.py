"""Architecture rules, as import-linter contracts (.importlinter): bot/core is platform-neutral, storage sits
below the adapters, the layers import downwards only, bot.core has no cycles, and bot and runner never
import each other. import-linter follows indirect imports (core -> x -> httpx), which a per-file scan missed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_import_contracts_are_kept() -> None:
    result = lint_imports(ROOT / ".importlinter")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "0 broken" in result.stdout, result.stdout


def test_a_broken_contract_fails(tmp_path: Path) -> None:
    """The check can fail: a contract the code breaks today (storage does use SQLAlchemy) is reported."""
    config = tmp_path / "broken.ini"
    config.write_text(
        "[importlinter]\nroot_packages =\n    bot\ninclude_external_packages = True\n\n"
        "[importlinter:contract:planted]\nname = planted\ntype = forbidden\n"
        "source_modules =\n    bot.storage\nforbidden_modules =\n    sqlalchemy\n"
    )
    result = lint_imports(config)
    assert result.returncode != 0
    assert "planted BROKEN" in result.stdout and "bot.storage" in result.stdout, result.stdout
