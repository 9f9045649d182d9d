"""The runner's JSON log lines (RANKZERO_LOG_FORMAT=json or --log-format json)."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from runner.logs import REQUEST_ID, JsonFormatter

RUNNER = Path(sys.executable).parent / "rankzero-runner"


def test_a_line_is_one_json_object_with_the_request_id() -> None:
    record = logging.LogRecord(
        "runner.api", logging.ERROR, __file__, 1, "refused: %s", ("a\nb\x1b\x00",), None
    )

    def inside_a_request() -> str:
        REQUEST_ID.set("run:abc123")
        return JsonFormatter().format(record)

    line = contextvars.copy_context().run(inside_a_request)
    assert "\n" not in line and "\x1b" not in line and "\x00" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "refused: a\nb\x1b\x00"
    assert parsed["request_id"] == "run:abc123" and parsed["level"] == "ERROR"
    assert "request_id" not in json.loads(JsonFormatter().format(record)), "outside a request: none"


def test_an_unknown_log_format_stops_the_runner_at_start(tmp_path: Path) -> None:
    snippet = tmp_path / "f.py"
    snippet.write_text("print(1)\n")
    env = {**os.environ, "RANKZERO_LOG_FORMAT": "yaml"}
    result = subprocess.run(
        [str(RUNNER), "run", str(snippet)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "RANKZERO_LOG_FORMAT" in result.stderr and "json" in result.stderr
    assert "Traceback" not in result.stderr
