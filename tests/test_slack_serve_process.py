"""``rankzero serve`` with Slack configured, as a real process: HTTP mode listens and verifies signatures.

The Web API is not reachable here, so only what happens before any outgoing call is checked: forged and
stale requests are refused with 401 by the running process, and SIGTERM stops it cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.slack_fake import SECRET, sign
from tests.test_serve_process import RANKZERO, ROOT, _free_port

pytestmark = pytest.mark.slow


def _post(url: str, body: str, headers: dict[str, str]) -> int:
    req = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_serve_http_mode_refuses_unsigned_requests(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env.update(
        RANKZERO_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}",
        RANKZERO_SLACK_BOT_TOKEN="xoxb-not-used",
        RANKZERO_SLACK_SIGNING_SECRET=SECRET,
        RANKZERO_SLACK_PORT=str(port),
        RANKZERO_HEALTH_PORT="0",
    )
    proc = subprocess.Popen([*RANKZERO, "serve"], env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/slack/events"
        body = "command=%2Frankzero&text=post-now&user_id=U1&team_id=T1&channel_id=C1"
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        deadline = time.monotonic() + 60
        while True:
            try:
                status = _post(url, body, {**form, **sign(body, secret="forged")})
                break
            except (ConnectionError, urllib.error.URLError):
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "serve did not start listening"
                time.sleep(0.2)
        assert status == 401
        stale = int(time.time()) - 600
        assert _post(url, body, {**form, **sign(body, timestamp=stale)}) == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Slack HTTP mode: listening" in err
    assert "xoxb-not-used" not in err and SECRET not in err  # secrets are never logged
