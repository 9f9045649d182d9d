"""Issue 24, section 3: the embedded database is its owner's alone: the data folder 0700, the database
and the WAL/SHM files SQLite creates beside it 0600, under the usual umask 022.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.storage.db import make_engine, upgrade_async


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The umask most systems give a user (what made the files world-readable)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


async def _write(url: str) -> None:
    engine = make_engine(url)
    try:
        async with engine.begin() as conn:  # the first write creates the WAL and SHM files
            await conn.execute(sa.text("CREATE TABLE IF NOT EXISTS probe (x INTEGER)"))
            await conn.execute(sa.text("INSERT INTO probe VALUES (1)"))
            folder = Path(url.removeprefix("sqlite+aiosqlite:///")).parent
            files = {p.name: mode(p) for p in folder.iterdir() if not p.name.endswith(".migrate.lock")}
            assert files == {"rz.db": 0o600, "rz.db-wal": 0o600, "rz.db-shm": 0o600}, files
    finally:
        await engine.dispose()


@pytest.mark.usefixtures("umask_022")
async def test_a_new_database_is_private(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    url = f"sqlite+aiosqlite:///{folder / 'rz.db'}"
    await _write(url)  # through the engine alone (the first command on a fresh machine migrates first)
    assert mode(folder) == 0o700
    folder2 = tmp_path / "migrated"
    url2 = f"sqlite+aiosqlite:///{folder2 / 'rz.db'}"
    await upgrade_async(url2)  # `rankzero db upgrade` creates the file
    assert mode(folder2) == 0o700 and mode(folder2 / "rz.db") == 0o600


@pytest.mark.usefixtures("umask_022")
async def test_files_an_older_version_left_readable_are_narrowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default data folder ($XDG_DATA_HOME/rankzero) and its database, as an older version made them.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    folder = tmp_path / "rankzero"
    folder.mkdir(mode=0o755)
    (folder / "rz.db").touch(mode=0o644)
    (folder / "rz.db").chmod(0o644)
    await _write(f"sqlite+aiosqlite:///{folder / 'rz.db'}")
    assert mode(folder) == 0o700


@pytest.mark.usefixtures("umask_022")
async def test_a_folder_the_user_chose_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    await _write(f"sqlite+aiosqlite:///{shared / 'rz.db'}")
    assert mode(shared) == 0o755  # not ours to narrow; the files in it are still 0600
