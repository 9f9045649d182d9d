"""The verdict: what the runner answers for one job (the JSON contract lives in runner/README.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """Overall outcome of a job, from the most to the least ordinary."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    OOM = "oom"
    OUTPUT_LIMIT = "output_limit"
    UNSUPPORTED = "unsupported"
    REJECTED = "rejected"


class Mode(StrEnum):
    """How the snippet is launched."""

    PYTHON = "python"
    DP = "dp"
    DDP = "ddp"


@dataclass(frozen=True)
class ExceptionInfo:
    """The exception a rank died of; ``line`` is in the snippet, or None if it was raised elsewhere."""

    type: str
    message: str
    line: int | None


@dataclass(frozen=True)
class ChildStuckAt:
    """Where a process the rank started (an ``mp.spawn`` child, a DataLoader worker) was when stopped."""

    pid: int
    function: str
    line: int
    call: str | None


@dataclass(frozen=True)
class StuckAt:
    """Where a rank was when it was stopped: the user function and line, and the call it was blocked in.

    ``children``: the same for each process the rank started that was inside the snippet's code.
    """

    function: str
    line: int
    call: str | None
    children: tuple[ChildStuckAt, ...] = ()


@dataclass
class RankResult:
    """One rank's exit, captured output and diagnosis."""

    rank: int
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    exception: ExceptionInfo | None = None
    stuck_at: StuckAt | None = None


@dataclass(frozen=True)
class Hardware:
    """What the runner executes on."""

    gpus: int
    names: list[str]
    torch: str
    cuda: str | None


@dataclass(frozen=True)
class SandboxInfo:
    """Which sandbox engine ran the job and whether it really isolated it."""

    engine: str
    isolated: bool


@dataclass
class Verdict:
    """The answer to one run request."""

    status: Status
    mode: Mode
    nproc: int
    backend: str | None
    elapsed_s: float
    hardware: Hardware
    sandbox: SandboxInfo
    root_cause_rank: int | None = None
    notes: list[str] = field(default_factory=list)
    ranks: list[RankResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict, keys in contract order."""
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        data["mode"] = self.mode.value
        data["elapsed_s"] = round(self.elapsed_s, 3)
        return data
