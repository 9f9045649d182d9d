"""The runner's answers as domain values: what ran, per rank, and what the runner can do.

These mirror the JSON contract of runner/README.md (the one place it is written); bot/runner_client.py
turns JSON into these values, and the contract test keeps the two in step. The core never sees JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

RunMode = Literal["python", "dp", "ddp"]

#: Verdict statuses of the contract, from the most to the least ordinary.
STATUSES: tuple[str, ...] = (
    "ok",
    "error",
    "timeout",
    "crashed",
    "oom",
    "output_limit",
    "unsupported",
    "rejected",
)


@dataclass(frozen=True)
class RunSpec:
    """What to run: the snippet and how the question's ``runner`` settings say to launch it."""

    code: str
    mode: RunMode = "python"
    nproc: int = 1
    gpus: int = 0
    init_process_group: bool = False
    timeout_s: float = 30.0

    @classmethod
    def from_question(cls, code: str, runner: dict[str, Any] | None, timeout_s: float = 30.0) -> RunSpec:
        """The run a question's ``runner`` block asks for (defaults: one plain Python process)."""
        r = runner or {}
        mode = str(r.get("mode", "python"))
        if mode not in ("python", "dp", "ddp"):
            mode = "python"
        return cls(
            code=code,
            mode=mode,  # type: ignore[arg-type]  # checked against the three modes just above
            nproc=int(r.get("nproc", 1)),
            gpus=int(r.get("gpus", 0)),
            init_process_group=bool(r.get("init_process_group", False)),
            timeout_s=timeout_s,
        )


@dataclass(frozen=True)
class RankException:
    """The exception a rank died of; ``line`` is in the snippet (None when raised elsewhere)."""

    type: str
    message: str
    line: int | None


@dataclass(frozen=True)
class StuckAt:
    """Where a stopped rank was blocked: snippet function and line, and the call (e.g. ``all_reduce``)."""

    function: str
    line: int
    call: str | None


@dataclass(frozen=True)
class RankOutcome:
    """One rank's exit, output and diagnosis."""

    rank: int
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    truncated: bool
    exception: RankException | None
    stuck_at: StuckAt | None

    def ending(self) -> str:
        """How the rank ended, in plain words: its exception, where it was stuck, the signal, or its exit
        status (every renderer shows the same words).
        """
        if self.exception is not None:
            line = f" (line {self.exception.line})" if self.exception.line is not None else ""
            return f"{self.exception.type}: {self.exception.message}{line}"
        if self.stuck_at is not None:
            at = self.stuck_at
            return f"stuck in {at.call or '?'} at line {at.line} ({at.function})"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exit {self.exit_code}"


@dataclass(frozen=True)
class Hardware:
    """What a job ran on (or what a runner has)."""

    gpus: int
    names: tuple[str, ...]
    torch: str
    cuda: str | None

    def describe(self) -> str:
        """'2 × NVIDIA H100 · torch 2.x · CUDA 12.4' or 'CPU only · torch 2.x'."""
        if self.gpus:
            names = ", ".join(sorted(set(self.names))) or "GPU"
            return f"{self.gpus} × {names} · torch {self.torch} · CUDA {self.cuda}"
        return f"CPU only · torch {self.torch}"


@dataclass(frozen=True)
class RunVerdict:
    """The runner's answer to one run: overall status, per-rank outcomes and remarks."""

    status: str
    mode: str
    nproc: int
    backend: str | None
    elapsed_s: float
    hardware: Hardware
    sandboxed: bool
    root_cause_rank: int | None
    notes: tuple[str, ...]
    ranks: tuple[RankOutcome, ...]

    @property
    def stdout(self) -> str:
        """Every rank's stdout joined in rank order (what a reader of the terminal would see)."""
        return "".join(r.stdout for r in self.ranks)

    @property
    def root_cause(self) -> RankOutcome | None:
        """The first rank that failed, if any."""
        if self.root_cause_rank is None:
            return None
        return next((r for r in self.ranks if r.rank == self.root_cause_rank), None)


@dataclass(frozen=True)
class RunnerHealth:
    """What a runner can do: its hardware, modes and limits."""

    hardware: Hardware
    modes: tuple[str, ...]
    backends: tuple[str, ...]
    sandboxed: bool
    max_nproc: int
    max_timeout_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    #: Runners behind this answer: 1 for one runner; a fleet reports its largest runner's hardware.
    fleet_size: int = 1
