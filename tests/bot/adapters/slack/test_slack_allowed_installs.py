"""RANKZERO_ALLOWED_TENANTS in Slack OAuth mode (issue 24): an install from a workspace that is not on the
list is removed again and the installer sees Bolt's failure page; an allowed workspace installs as usual.
Kept apart from tests/bot/adapters/slack/test_slack_oauth.py (its harness is reused), which another change
reworks.
"""

from __future__ import annotations

import pytest

from bot.adapters.slack.workspaces import Workspace
from bot.core.tenancy import TenantAllowList
from tests.bot.adapters.slack.test_slack_oauth import ALPHA, BETA, Harness, oauth

__all__ = ["oauth"]  # the fixture, imported for this module's tests


async def test_an_install_from_a_workspace_not_allowed_is_removed(
    oauth: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    oauth.adapter.ctx.allowed = TenantAllowList([f"slack:{ALPHA}"])
    caplog.set_level("WARNING", logger="bot.adapters.slack.app")
    refused = await oauth.install(BETA)
    assert refused.status_code == 403
    assert await oauth.bot(Workspace(None, BETA)) is None, "no token of the refused workspace is kept"
    assert f"refused the Slack install of workspace {BETA}" in caplog.text
    allowed = await oauth.install(ALPHA)
    assert allowed.status_code == 200
    assert await oauth.bot(Workspace(None, ALPHA)) is not None
