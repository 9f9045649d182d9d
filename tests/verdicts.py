"""Made-up runner answers for tests that stand a scripted runner in for the real one (the dispute, outbox
and console tests): the hardware a CPU runner reports and an ``ok`` verdict whose ranks printed given text.
"""

from __future__ import annotations

from bot.core.verdicts import Hardware, RankOutcome, RunnerHealth, RunSpec, RunVerdict

#: What a CPU-only runner with torch 2.13 reports about its host.
CPU = Hardware(0, (), "2.13.0+cpu", None)


def cpu_health(modes: tuple[str, ...] = ("python", "dp", "ddp")) -> RunnerHealth:
    """A healthy CPU runner serving ``modes`` with gloo (8 slots, 300 s jobs)."""
    return RunnerHealth(CPU, modes, ("gloo",), True, 8, 300.0)


def printed_verdict(
    spec: RunSpec,
    *printed: str,
    backend: str | None = None,
    seconds: float = 0.1,
) -> RunVerdict:
    """An ``ok`` verdict for ``spec`` in which rank r printed ``printed[r]`` (one rank per text)."""
    ranks = tuple(RankOutcome(r, 0, None, text, "", False, None, None) for r, text in enumerate(printed))
    return RunVerdict("ok", spec.mode, len(ranks), backend, seconds, CPU, True, None, (), ranks)
