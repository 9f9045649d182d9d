"""Log lines as JSON on request (RANKZERO_LOG_FORMAT=json): one valid object a line whatever the message
holds, with the tenant, channel and request of the task that wrote it; text stays the default.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.logs import JsonFormatter, current_context, log_context

RANKZERO = Path(sys.executable).parent / "rankzero"
HOSTILE = 'line one\nline two\r\x1b[2J\x00\u2028"}{"level": "CRITICAL"\ud800 end'


def _record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("bot.test", logging.WARNING, __file__, 1, message, args, None)


def test_hostile_text_stays_one_valid_json_line() -> None:
    line = JsonFormatter().format(_record("player said %s", HOSTILE))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\x00" not in line
    assert "\u2028" not in line  # a line separator to some readers: escaped too
    parsed = json.loads(line)
    assert parsed["level"] == "WARNING" and parsed["logger"] == "bot.test"
    assert parsed["message"].startswith("player said line one\nline two\r\x1b[2J\x00\u2028")
    assert set(parsed) == {"time", "level", "logger", "message"}, "no forged keys"
    assert parsed["time"].endswith("+00:00")


def test_an_exception_and_a_broken_format_still_make_one_line() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = _record("failed")
        record.exc_info = sys.exc_info()
    parsed = json.loads(JsonFormatter().format(record))
    assert "ValueError: bad\nvalue" in parsed["exception"]
    broken = json.loads(JsonFormatter().format(_record("%d players", "many")))
    assert "unformattable" in broken["message"]


async def test_each_task_logs_its_own_tenant_channel_and_request() -> None:
    formatter = JsonFormatter()
    seen: dict[str, dict[str, str]] = {}

    async def interaction(name: str) -> None:
        log_context(tenant=f"discord:{name}", channel=f"c-{name}", request_id=f"discord:{name}")
        await asyncio.sleep(0)  # the other task runs in between: its context must not leak here
        seen[name] = json.loads(formatter.format(_record("clicked")))

    await asyncio.gather(interaction("1"), interaction("2"))
    for name in ("1", "2"):
        line = seen[name]
        assert (line["tenant"], line["channel"], line["request_id"]) == (
            f"discord:{name}",
            f"c-{name}",
            f"discord:{name}",
        )
    assert current_context() == {}, "the test's own task saw none of it"
    assert "tenant" not in json.loads(formatter.format(_record("outside")))


def _rankzero(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    if not RANKZERO.exists():
        pytest.fail("rankzero is not installed next to this Python: pip install -e .")
    environ = {
        **os.environ,
        "RANKZERO_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}",
        "RANKZERO_CONFIG": "",
        "HOME": str(tmp_path),
        **env,
    }
    return subprocess.run(
        [str(RANKZERO), *args], env=environ, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def test_the_cli_writes_json_lines_when_asked_and_text_by_default(tmp_path: Path) -> None:
    as_json = _rankzero(tmp_path, "-v", "leaderboard", RANKZERO_LOG_FORMAT="json")
    assert as_json.returncode == 0, as_json.stderr
    lines = [line for line in as_json.stderr.splitlines() if line.strip()]
    assert lines, "-v logs the migration at least"
    for line in lines:
        parsed = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(parsed)
    as_text = _rankzero(tmp_path, "-v", "leaderboard")
    assert as_text.returncode == 0
    assert any(line.startswith("INFO ") for line in as_text.stderr.splitlines())


def test_an_unknown_log_format_stops_at_start_with_what_to_write(tmp_path: Path) -> None:
    result = _rankzero(tmp_path, "leaderboard", RANKZERO_LOG_FORMAT="xml")
    assert result.returncode == 2
    assert "RANKZERO_LOG_FORMAT" in result.stderr and "text" in result.stderr and "json" in result.stderr
    assert "Traceback" not in result.stderr


async def test_a_slack_request_names_its_workspace_channel_and_trigger_and_drops_odd_ids() -> None:
    from bot.adapters.slack.observe import enter_request

    async def handle(body: dict[str, object], tenant: str) -> dict[str, str]:
        enter_request(body, tenant)
        return current_context()

    click: dict[str, object] = {
        "type": "block_actions",
        "channel": {"id": "C123"},
        "trigger_id": "111.222.abc",
    }
    assert await asyncio.create_task(handle(click, "E1/T1")) == {
        "tenant": "slack:E1/T1",
        "channel": "C123",
        "request_id": "slack:111.222.abc",
    }
    hostile: dict[str, object] = {"channel_id": 'C1\n{"level": "CRITICAL"}', "trigger_id": "x" * 500}
    assert await asyncio.create_task(handle(hostile, "T1")) == {"tenant": "slack:T1"}
