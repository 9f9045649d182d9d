"""``rankzero serve`` with Slack configured, as a real process: HTTP mode listens and verifies signatures.

The Web API is the local fake (served from a thread), which accepts the bot token at start (auth.test);
forged and stale requests are refused with 401 by the running process, and SIGTERM stops it cleanly.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bot.test_serve_process import RANKZERO, ROOT
from tests.net import free_port
from tests.slack_fake import SECRET, FakeSlackApi, running_in_thread, sign

pytestmark = pytest.mark.slow


@pytest.fixture
def api_in_thread() -> Iterator[FakeSlackApi]:
    """The fake Web API served from its own event loop in a thread (the test itself is synchronous)."""
    with running_in_thread(FakeSlackApi()) as api:
        yield api


def _post(url: str, body: str, headers: dict[str, str]) -> int:
    req = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_serve_http_mode_refuses_unsigned_requests(tmp_path: Path, api_in_thread: FakeSlackApi) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env.update(
        RANKZERO_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}",
        RANKZERO_SLACK_BOT_TOKEN="xoxb-test",
        RANKZERO_SLACK_API_URL=api_in_thread.base_url,
        RANKZERO_SLACK_SIGNING_SECRET=SECRET,
        RANKZERO_SLACK_PORT=str(port),
        RANKZERO_HEALTH_PORT="0",
    )
    proc = subprocess.Popen([*RANKZERO, "serve"], env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/slack/events"
        body = "command=%2Frankzero&text=post-now&user_id=U1&team_id=T1&channel_id=C1"
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        for _ in range(300):  # a hang guard of 60 s of polls, no speed bound
            try:
                status = _post(url, body, {**form, **sign(body, secret="forged")})
                break
            except (ConnectionError, urllib.error.URLError, TimeoutError, http.client.HTTPException):
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        else:
            pytest.fail("serve did not start listening")
        assert status == 401
        stale = int(time.time()) - 600
        assert _post(url, body, {**form, **sign(body, timestamp=stale)}) == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Slack HTTP mode: listening" in err
    assert "xoxb-test" not in err and SECRET not in err  # secrets are never logged


def test_serve_exits_1_with_one_line_when_slack_refuses_the_token(
    tmp_path: Path, api_in_thread: FakeSlackApi
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env.update(
        RANKZERO_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}",
        RANKZERO_SLACK_BOT_TOKEN="xoxb-revoked-secret",
        RANKZERO_SLACK_SIGNING_SECRET=SECRET,
        RANKZERO_SLACK_API_URL=api_in_thread.base_url,
        RANKZERO_SLACK_PORT=str(free_port()),
        RANKZERO_HEALTH_PORT="0",
    )
    done = subprocess.run(
        [*RANKZERO, "serve"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if "invalid_auth" in ln]
    assert len(errors) == 1 and "RANKZERO_SLACK_BOT_TOKEN" in errors[0], done.stderr
    assert "xoxb-revoked-secret" not in done.stderr
    assert ("auth.test", "invalid_auth") in api_in_thread.refused
