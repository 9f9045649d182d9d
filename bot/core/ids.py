"""Component ids shared by every adapter: ``rz:<action>:<arg>[:<arg>...]``.

Buttons survive restarts because everything they need is in their id; the service re-reads the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "rz"
#: ``practice`` ids carry a verb first: ``rz:practice:<verb>:<args>`` (quiz, next, reveal, grade, explain).
#: ``miss``: the team report's "Explanation" button of one most-missed problem, ``rz:miss:<problem id>``.
ACTIONS = frozenset({"start", "answer", "hint", "next", "dispute", "practice", "miss"})


@dataclass(frozen=True)
class ComponentId:
    """A decoded component id."""

    action: str
    args: tuple[str, ...]


def encode(action: str, *args: object) -> str:
    """Build a component id; arguments must not contain ':'."""
    if action not in ACTIONS:
        raise ValueError(f"unknown component action {action!r}")
    parts = [str(a) for a in args]
    if any(":" in p for p in parts):
        raise ValueError("component id arguments cannot contain ':'")
    return ":".join([PREFIX, action, *parts])


def decode(raw: str) -> ComponentId | None:
    """Parse an id made by :func:`encode`; None for anything else (another app's components)."""
    parts = raw.split(":")
    if len(parts) < 2 or parts[0] != PREFIX or parts[1] not in ACTIONS:
        return None
    return ComponentId(parts[1], tuple(parts[2:]))
