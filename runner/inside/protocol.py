"""What the supervisor and the host say to each other: the status events, the exception reports of ranks.

The host (runner/executor.py, runner/service.py) mirrors these names and markers; it trusts the status pipe
(only the supervisor writes there) and checks every report line (a rank's snippet may write anything).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

# Names of the files and markers shared with the host side (runner/executor.py mirrors them).
SNIPPET_NAME = "main.py"
# The host's line on the control pipe, before the job, when a job that needs no compiler stack (no DDP
# model, FSDP, DTensor, torch.compile) waits for this sandbox while it warms: the rest of the warm-up is
# skipped (runner/sandbox.py writes it).
HINT_LIGHT = b'{"hint": "light"}\n'
EXCEPTION_MARKER = "exception"


EVENT_MAX_BYTES = 4000  # below PIPE_BUF: the supervisor's threads' writes never interleave


def emit(fd: int, event: dict[str, Any]) -> None:
    """Write one JSON event line; lines stay below PIPE_BUF so concurrent writers never interleave.

    A long exception message is shortened until the line fits: a cut line would not parse, and the host
    would lose the whole event (a rank's exit with it).
    """
    data = (json.dumps(event, ensure_ascii=False) + "\n").encode()
    exception = event.get(EXCEPTION_MARKER)
    while len(data) > EVENT_MAX_BYTES and isinstance(exception, dict) and exception.get("message"):
        message = str(exception["message"])
        exception["message"] = message[: len(message) * 3 // 4 - 1]
        data = (json.dumps(event, ensure_ascii=False) + "\n").encode()
    if len(data) > EVENT_MAX_BYTES and isinstance(exception, dict):
        # Every field is bounded, so this cannot happen; if it did, the exit must still arrive whole.
        event[EXCEPTION_MARKER] = None
        event["report_problem"] = "too long"
        data = (json.dumps(event, ensure_ascii=False) + "\n").encode()
    if len(data) <= EVENT_MAX_BYTES:
        with contextlib.suppress(OSError):
            os.write(fd, data)


REPORT_MAX_READ = 1 << 20  # the most a pipe can hold (fs.pipe-max-size); more is never read
REPORT_LINE_MAX = 32 * 1024  # a real description: 200 + 1500 characters, at most 12 bytes each as JSON
REPORT_TYPE_MAX = 200
REPORT_MESSAGE_MAX = 1500
LINE_NUMBER_MAX = 10_000_000


def parse_report(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """Check one exception description written by a rank: ``(description, None)`` or ``(None, why)``."""
    if len(line) > REPORT_LINE_MAX:
        return None, f"over {REPORT_LINE_MAX} bytes"
    try:
        found = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser recurses
        return None, "not JSON"
    if not isinstance(found, dict):
        return None, "not a JSON object"
    kind, message, number = found.get("type"), found.get("message", ""), found.get("line")
    if not isinstance(kind, str) or not 0 < len(kind) <= REPORT_TYPE_MAX:
        return None, "no valid exception type"
    if not isinstance(message, str):
        return None, "message is not text"
    if number is not None and (
        not isinstance(number, int) or isinstance(number, bool) or not 0 < number <= LINE_NUMBER_MAX
    ):
        return None, "line is not a line number"
    return {
        "type": _text(kind, REPORT_TYPE_MAX),
        "message": _text(message, REPORT_MESSAGE_MAX),
        "line": number,
    }, None


def _text(value: object, limit: int) -> str:
    # Lone surrogates (a snippet can raise with "\ud800") become visible escapes: the verdict is UTF-8 JSON.
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")[:limit]
