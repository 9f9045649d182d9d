"""The Slack adapter's start and health: the bot token is checked with auth.test (a refused token is one
line and exit 1 from ``rankzero serve``), and /healthz reports the HTTP listener or the socket.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.adapters.slack.app import build_adapter
from bot.config import Settings
from bot.serve import AdapterStartError, _start_adapter, health_report
from tests.bot.adapters.slack.test_slack_adapter import Harness, _harness
from tests.conftest import test_bank
from tests.slack_fake import SECRET, FakeSlackApi


def settings(api: FakeSlackApi, token: str, db: Path) -> Settings:
    return Settings(
        database_url=f"sqlite+aiosqlite:///{db}",
        slack_bot_token=SecretStr(token),
        slack_signing_secret=SecretStr(SECRET),
        slack_api_url=api.base_url,
        slack_port=0,
    )


async def test_a_refused_bot_token_stops_the_start_with_one_line(tmp_path: Path) -> None:
    api = FakeSlackApi()
    await api.start()
    try:
        adapter = build_adapter(settings(api, "xoxb-revoked", tmp_path / "rz.db"))
        with pytest.raises(AdapterStartError) as refused:
            await _start_adapter(adapter, None)  # type: ignore[arg-type]  # refused before services are used
        line = str(refused.value)
        assert "invalid_auth" in line and "RANKZERO_SLACK_BOT_TOKEN" in line and "\n" not in line
        assert "xoxb-revoked" not in line
        assert adapter.http is not None and not adapter.http.listening
        assert (await adapter.health())["ok"] is False
    finally:
        await api.stop()


async def test_health_reports_the_http_listener(tmp_path: Path, sqlite_template: Path) -> None:
    h: Harness
    async for h in _harness(tmp_path, sqlite_template, test_bank()):
        report = await health_report(h.services.app.engine, h.services.scheduler, [h.adapter])
        assert report["adapters"]["slack"] == {"ok": True, "mode": "http", "state": "listening"}
        await h.adapter.stop()
        report = await health_report(h.services.app.engine, h.services.scheduler, [h.adapter])
        assert report["adapters"]["slack"]["ok"] is False and report["ok"] is False
