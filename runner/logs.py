"""The runner's log lines: text (the default) or one JSON object per line (``RANKZERO_LOG_FORMAT=json``).

The keys are the bot's (bot/logs.py; the runner imports nothing from the bot): ``time`` (ISO 8601, UTC),
``level``, ``logger``, ``message``, ``request_id`` (the run request being served, set by runner/api.py for
the request and the job thread it starts) and ``exception``. ``json.dumps`` escapes every control
character, so what a snippet prints, if it ever reached a log message, stays inside one line.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import sys
from typing import Any

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_MESSAGE = 16_000

#: The run request the current task (or job thread: asyncio.to_thread copies the context) serves.
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "rankzero_runner_request", default=None
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        try:
            message = record.getMessage()
        except Exception as exc:  # a bad %-format in a log call must not lose the line
            message = f"{record.msg!r} (unformattable: {type(exc).__name__})"
        line: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": message[:MAX_MESSAGE],
        }
        request = REQUEST_ID.get()
        if request is not None:
            line["request_id"] = request
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)[-MAX_MESSAGE:]
        return json.dumps(line, ensure_ascii=True, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler writing to whatever ``sys.stderr`` is when a line is written, not the stream it was at
    start-up: a CLI run inside another program (a test runner's captured, later closed stream) must not
    leave a handler on a dead stream behind.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        """The current ``sys.stderr``."""
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always sys.stderr (StreamHandler.__init__ and setStream assign it)


def configure(log_format: str, level: int) -> None:
    """Log to stderr in ``log_format`` at ``level`` (ValueError for an unknown format)."""
    if log_format not in FORMATS:
        raise ValueError(
            f"log format {log_format[:40]!r} (--log-format or RANKZERO_LOG_FORMAT) is not one: give text "
            "(readable lines, the default) or json (one JSON object per line)"
        )
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
