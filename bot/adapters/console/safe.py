r"""Terminal safety: control characters in text a user or a job controls are shown, never obeyed.

Question text, player names and runner output reach the terminal. An ESC in them would be a command to
the terminal (``ESC [2J`` clears the screen, ``ESC ]0;...`` sets the window title, OSC 52 writes the
clipboard), so every console renderer passes its cards through :func:`clean` first: each control
character becomes a visible escape (``\x1b``), newlines and tabs stay.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

#: C0 controls but tab and newline, DEL, and the C1 controls (0x9b is a one-byte CSI on some terminals).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

P = ParamSpec("P")
R = TypeVar("R")


def visible(text: str) -> str:
    r"""``text`` with every control character (but newline and tab) written as ``\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clean(value: Any) -> Any:
    """``value`` with :func:`visible` applied to every string inside it (dataclasses, tuples, lists, dicts).

    Values without a string to change are returned as they are (the same object).
    """
    if isinstance(value, str):
        return visible(value) if _CONTROL.search(value) else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for field in dataclasses.fields(value):
            if not field.init:
                continue
            old = getattr(value, field.name)
            new = clean(old)
            if new is not old:
                changes[field.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    if type(value) in (tuple, list):
        items = [clean(item) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return type(value)(items)
        return value
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    return value


def safe(render: Callable[P, R]) -> Callable[P, R]:
    """Decorate a renderer: its arguments are :func:`clean` before it sees them."""

    @functools.wraps(render)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return render(*(clean(a) for a in args), **{k: clean(v) for k, v in kwargs.items()})

    return wrapper
