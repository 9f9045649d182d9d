"""Per-player FSRS parameters: fsrs's Optimizer fitted to one player's review log.

fsrs's Optimizer needs torch, pandas and tqdm (``pip install 'rankzero[optimizer]'``); without them
RankZero schedules with FSRS's default parameters and :class:`FsrsOptimizer` says what to install. It
lives outside ``bot/core`` only because of that optional, heavy dependency: it is as pure as the
scheduler. It is CPU-bound (torch, a few seconds for a thousand reviews) and its loop is Python code that
holds the GIL, so by default it runs in a child process (the service's worker thread only waits), and the
bot's event loop keeps answering chat interactions within their 3 seconds meanwhile.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from fsrs import ReviewLog

from bot.core.errors import RankZeroError
from bot.core.practice_models import ReviewRecord
from bot.core.srs import RATINGS

INSTALL_HINT = "pip install 'rankzero[optimizer]' (fsrs's optimizer: torch, pandas, tqdm)"


class OptimizerUnavailableError(RankZeroError):
    """fsrs's Optimizer cannot run here: its optional dependencies are not installed."""


def optimizer_available() -> bool:
    """True when fsrs's optimizer dependencies (torch, pandas, tqdm) are installed. Checked without
    importing them: the bot process never loads torch, only the child process that fits parameters does.
    """
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "pandas", "tqdm"))


def fit_parameters(reviews: Sequence[ReviewRecord]) -> tuple[float, ...]:
    """FSRS's 21 parameters fitted to these reviews by fsrs's Optimizer (in this process)."""
    from fsrs import Optimizer  # fsrs loads its optimizer (and torch) only on first use

    logs = [
        ReviewLog(
            card_id=r.card_id,
            rating=RATINGS[r.grade],
            review_datetime=r.reviewed_at.astimezone(dt.UTC),
            review_duration=None,
        )
        for r in reviews
    ]
    return tuple(float(x) for x in Optimizer(logs).compute_optimal_parameters())


class FsrsOptimizer:
    """The :class:`bot.core.practice.ParameterOptimizer` of fsrs (its ``Optimizer``).

    ``in_process``: fit in the calling thread (the CLI, which has nothing else to do); otherwise in a
    fresh child process (``spawn``: no inherited event loop or database connections).
    """

    def __init__(self, *, in_process: bool = False) -> None:
        self._in_process = in_process

    def optimize(self, reviews: Sequence[ReviewRecord]) -> tuple[float, ...]:
        """FSRS's 21 parameters fitted to these reviews (fsrs returns its defaults for too few)."""
        if not optimizer_available():
            raise OptimizerUnavailableError(f"per-player FSRS optimisation is not installed: {INSTALL_HINT}")
        if self._in_process:
            return fit_parameters(reviews)
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            return pool.submit(fit_parameters, list(reviews)).result()
