"""``rankzero serve`` as a real process in front of a frozen PostgreSQL (issue 25, section 2).

The database freezes (tests/frozen_proxy.py: bytes accepted, nothing answered) while serve runs; SIGTERM
must still end the process, with exit status 1 and a line naming the work it abandoned. The wait on the
process is only a hang guard, not an assertion on how fast it stops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.bot.test_serve_process import RANKZERO, ROOT, _schedule_now
from tests.frozen_proxy import frozen_proxy
from tests.net import free_port

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

#: Hang guards (a regression), generous for a loaded 2-core machine.
START_GUARD_S = 120
EXIT_GUARD_S = 60


def _health(port: int) -> tuple[int, dict[str, Any]] | None:
    try:
        # /healthz bounds its own database check (5 s): a longer client timeout always gets its answer.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def _until(proc: subprocess.Popen[bytes], port: int, wanted: Any, log: Path) -> dict[str, Any]:
    end = time.monotonic() + START_GUARD_S
    while time.monotonic() < end:
        assert proc.poll() is None, log.read_text()[-3000:]
        if (answer := _health(port)) is not None and wanted(*answer):
            return answer[1]
        time.sleep(0.3)
    raise AssertionError(f"/healthz never showed the expected state: {_health(port)}")


def test_sigterm_ends_serve_on_a_frozen_database_naming_the_abandoned_work(
    pg_database: str, tmp_path: Path
) -> None:
    _schedule_now(pg_database)
    log = tmp_path / "serve.log"
    port = free_port()
    with frozen_proxy(pg_database) as proxy:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
        env |= {
            "RANKZERO_DATABASE_URL": proxy.url(pg_database),
            "RANKZERO_RECORD_FILE": str(tmp_path / "posts.jsonl"),
            "RANKZERO_HEALTH_PORT": str(port),
            "RANKZERO_SCHEDULE_SYNC_S": "0.5",
            # Nothing ends the frozen sync by itself here (no statement bound, a long job deadline): only
            # the shutdown's bound can.
            "RANKZERO_DB_STATEMENT_TIMEOUT_S": "3600",
            "RANKZERO_JOB_DEADLINE_S": "3600",
            "RANKZERO_SHUTDOWN_TIMEOUT_S": "6",
        }
        with log.open("wb") as sink:
            proc = subprocess.Popen([*RANKZERO, "serve"], cwd=ROOT, env=env, stdout=sink, stderr=sink)
        try:
            _until(proc, port, lambda status, body: status == 200 and body["ok"], log)
            proxy.freeze()
            # The sync (every 0.5 s) is now waiting on the silent server; /healthz still answers, 503.
            body = _until(
                proc, port, lambda status, body: status == 503 and "sync" in body["scheduler"]["running"], log
            )
            assert body["database"]["ok"] is False and "no answer within" in body["database"]["error"]

            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=EXIT_GUARD_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    shown = log.read_text(errors="replace")
    assert code == 1, shown[-3000:]
    assert "abandoned: scheduled sync" in shown, shown[-3000:]
    assert "error: stopped within 6 s (RANKZERO_SHUTDOWN_TIMEOUT_S) by abandoning: scheduled sync" in shown
    assert "Traceback" not in shown, shown[-3000:]
