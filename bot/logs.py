"""Log lines as text (the default, for a terminal) or as JSON (``RANKZERO_LOG_FORMAT=json``, for a collector).

A JSON line is one object with ``time`` (ISO 8601, UTC), ``level``, ``logger`` and ``message``, then
``tenant``, ``channel`` and ``request_id`` when the line was written while handling an interaction or
running a job that set them (:func:`log_context`: the chat adapters at an interaction's entry, the
scheduler at a job's), and ``exception`` with the traceback when there is one. ``json.dumps`` escapes
every control character, newlines included, so a message carrying text from a chat user or a snippet
stays one line that parses: nothing a user types can forge a second log record.

The context lives in a ContextVar: it follows the task that set it and the tasks that task starts, and
never leaks into another interaction's lines.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import sys
from typing import Any

#: The formats RANKZERO_LOG_FORMAT accepts (bot/config.py validates it).
FORMATS = ("text", "json")
#: The text format (what ``rankzero`` always printed).
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
#: At most this many characters of one context value (they come from chat payloads).
MAX_CONTEXT = 200
#: At most this many characters of one message in a JSON line (a runaway message stays a bounded line).
MAX_MESSAGE = 16_000

_CONTEXT: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("rankzero_log", default=None)
_KEYS = ("tenant", "channel", "request_id")


def log_context(
    *, tenant: str | None = None, channel: str | None = None, request_id: str | None = None
) -> None:
    """Name the tenant, channel and request (an interaction id, a job id) of what the current task logs
    from now on; a value left None keeps what was set before.
    """
    current = dict(_CONTEXT.get() or {})
    for key, value in (("tenant", tenant), ("channel", channel), ("request_id", request_id)):
        if value is not None:
            current[key] = str(value)[:MAX_CONTEXT]
    _CONTEXT.set(current)


def current_context() -> dict[str, str]:
    """What :func:`log_context` set for the current task (a copy)."""
    return dict(_CONTEXT.get() or {})


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module doc for the keys)."""

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
        context = _CONTEXT.get() or {}
        for key in _KEYS:
            if key in context:
                line[key] = context[key]
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)[-MAX_MESSAGE:]
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)[-MAX_MESSAGE:]
        # ensure_ascii: every control character (and any lone surrogate) becomes an escape.
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


def configure(log_format: str, level: int | None = None) -> None:
    """Write the root logger's lines in ``log_format`` ("text" or "json"); ``level`` if given.

    Replaces the formatter of the handlers ``logging.basicConfig`` installed (adds one on stderr when
    there is none), so it can be called once the settings are known.
    """
    if log_format not in FORMATS:
        raise ValueError(f"log format {log_format!r} is not one of {', '.join(FORMATS)}")
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(StderrHandler())
    formatter = JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    for handler in root.handlers:
        handler.setFormatter(formatter)
    if level is not None:
        root.setLevel(level)
