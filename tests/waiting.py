"""Polling with a hang guard that is no wall-clock bound (issue 29).

A test that waits for something the code under test does in the background (a server answering, a pool
refilling) polls a bounded number of times: the guard turns a hang into a failure with a message, and it
stretches with the machine's load (each poll's condition runs slower, too) instead of failing under it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_until(condition: Callable[[], object], what: str, *, polls: int = 600, every_s: float = 0.1) -> None:
    """Poll ``condition`` until it is truthy; fail with ``what`` (what never happened) after ``polls`` tries.

    ``polls * every_s`` seconds of sleeps is the guard: generous, for a hang, not a speed target.
    """
    for _ in range(polls):
        if condition():
            return
        time.sleep(every_s)
    if not condition():
        pytest.fail(f"{what} (after {polls} polls {every_s:g} s apart)")
