"""``rankzero stats --png FILE`` (issue 30): the stats chart written as a PNG, where it went and its alt
text printed; a file that cannot be written is a one-line error and exit 1, not a traceback.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.cli._common import CONSOLE_CHANNEL, console_player
from bot.core.models import Actor
from tests.bootstrap import open_env
from tests.conftest import make_spec
from tests.fakes import FakePlatform, FrozenClock

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (the first chunk, right after the signature)."""
    assert data[:8] == PNG_MAGIC, data[:8]
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture
def db(tmp_path: Path, sqlite_template: Path) -> str:
    target = tmp_path / "rz.db"
    shutil.copy(sqlite_template, target)
    return f"sqlite+aiosqlite:///{target}"


async def _ann_solves_today(db: str) -> None:
    """Ann solves today's one-problem challenge on the console channel (today: the CLI's real clock)."""
    clock = FrozenClock(dt.datetime.now(dt.UTC))
    bank = [make_spec("q-png", "beginner", "DDP", kind="predict_output", correct=0)]
    async with open_env(db, clock, FakePlatform(), bank=bank, problems_per_challenge=1) as env:
        card, _ = await env.quiz.open_challenge(CONSOLE_CHANNEL)
        ann = Actor(console_player("ann"), tenant=CONSOLE_CHANNEL.tenant)
        await env.quiz.start_problem(ann, card.problems[0].id)
        clock.current += dt.timedelta(seconds=5)
        await env.quiz.answer(ann, card.problems[0].id, "A")


def test_stats_png_writes_the_chart_and_prints_where_and_its_alt_text(db: str, tmp_path: Path) -> None:
    asyncio.run(_ann_solves_today(db))
    out = tmp_path / "ann.png"
    result = CliRunner().invoke(main, ["--db", db, "stats", "--player", "ann", "--png", str(out)])
    assert result.exit_code == 0, result.output
    assert png_size(out.read_bytes()) == (900, 640)
    assert f"Chart written to {out}" in result.output
    alt = next(line for line in result.output.splitlines() if line.startswith("Alt text: "))
    assert "Stats of ann" in alt and "points on 1 of 30 days" in alt and "DDP 100% (1/1)" in alt
    assert "Streak: 1 days" in alt


def test_stats_png_of_a_new_player_is_a_picture_too(db: str, tmp_path: Path) -> None:
    out = tmp_path / "new.png"
    result = CliRunner().invoke(main, ["--db", db, "stats", "--player", "newcomer", "--png", str(out)])
    assert result.exit_code == 0, result.output
    assert png_size(out.read_bytes()) == (900, 640)
    assert "none yet" in result.output


def _refused(db: str, target: Path, reason: str) -> None:
    result = CliRunner().invoke(main, ["--db", db, "stats", "--player", "ann", "--png", str(target)])
    assert result.exit_code == 1, result.output
    assert f"error: cannot write the chart to {target}: {reason}" in result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    assert not target.exists()


def test_a_png_path_in_a_missing_folder_is_an_error_not_a_traceback(db: str, tmp_path: Path) -> None:
    _refused(db, tmp_path / "missing" / "s.png", "No such file or directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_png_path_in_a_read_only_folder_is_an_error_not_a_traceback(db: str, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _refused(db, locked / "s.png", "Permission denied")
    finally:
        locked.chmod(0o700)


def test_a_directory_is_refused_as_the_png_path(db: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--db", db, "stats", "--png", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory" in result.output
