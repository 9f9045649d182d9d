"""``rankzero schedule set|show|pause`` on the console channel, through the real CLI and database."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from bot.cli import main


def _cli(db: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--db", db, "schedule", *args])
    return result.exit_code, result.output


def test_schedule_set_show_pause_and_refuse_bad_values(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}"
    code, out = _cli(db, "show")
    assert code == 0 and "no schedule" in out
    code, out = _cli(
        db, "set", "--time", "09:00", "--tz", "Europe/Berlin", "--days", "mon-fri", "--reminder", "30m"
    )
    assert code == 0, out
    assert "09:00 Europe/Berlin on mon,tue,wed,thu,fri" in out and "30 min before closing" in out
    assert "next post   " in out and "CET" in out

    for bad, message in (
        (["--time", "25:00"], "'25:00' is not a time of day"),
        (["--tz", "Moon/Base"], "unknown timezone 'Moon/Base'"),
        (["--problems", "0"], "problems per challenge is 0"),
    ):
        code, out = _cli(db, "set", *bad)
        # A bad option value is a usage error (exit 2), whether Click or the schedule's own check finds it.
        assert code == 2 and message in out, out
    code, out = _cli(db, "show")
    assert "09:00 Europe/Berlin on mon,tue,wed,thu,fri" in out, (
        "a refused change leaves the schedule as it was"
    )

    code, out = _cli(db, "pause")
    assert code == 0 and "paused" in out
    code, out = _cli(db, "show")
    assert "(PAUSED)" in out and "next post   " not in out
    code, out = _cli(db, "pause", "--resume")
    assert code == 0 and "next post   " in _cli(db, "show")[1]


def test_the_team_report_is_set_with_the_weekly_summary_and_shown(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}"
    code, out = _cli(db, "set", "--time", "09:00", "--team-report", "on")
    assert code == 2 and "posted with the weekly summary" in out, out
    code, out = _cli(db, "set", "--time", "09:00", "--weekly-summary", "mon", "--team-report", "on")
    assert code == 0 and "team report on" in out, out
    code, out = _cli(db, "set", "--team-report", "maybe")
    assert code == 2 and "'maybe' is not one of 'on', 'off'" in out, out
    code, out = _cli(db, "set", "--team-report", "off")
    assert code == 0 and "team report off" in out and "weekly      mon" in out, out
