"""The shipped bank (questions/bank), loaded and validated once per test session.

Loading it validates about 1,950 questions: about 3 s of CPU each time. Tests that only read it (practice
prompts, rendering every question, the explain prompts) share one load; the tests of loading itself
(tests/questions/test_questions.py, ``questions validate``) and of the serve-time sync still load it afresh.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from bot.bootstrap import import_specs
from questions.loader import LoadedQuestion, default_bank_dir, load_paths


@functools.cache
def _questions() -> tuple[LoadedQuestion, ...]:
    return tuple(load_paths([default_bank_dir()]))


@functools.cache
def _specs() -> tuple[dict[str, Any], ...]:
    # shipped_bank_specs() of the one load, not a second load of the bank.
    return tuple(import_specs(_questions()))


def shipped_questions() -> list[LoadedQuestion]:
    """``load_paths([default_bank_dir()])``, loaded once (the questions are frozen; the list is new)."""
    return list(_questions())


def shipped_specs() -> list[dict[str, Any]]:
    """``shipped_bank_specs()``, loaded once; a deep copy each call, so a test may change what it gets."""
    return copy.deepcopy(list(_specs()))
