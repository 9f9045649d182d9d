"""Runner settings: limits per job and pool sizes. Built once in the CLI and passed down."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_CODE_BYTES = 64 * 1024


def _default_pool() -> dict[int, int]:
    # One warm 1-rank sandbox (serves python, dp and 1-rank ddp) and one warm 2-rank sandbox: each holds
    # an imported torch (~300 MB), and on a 2-core machine more would only compete with the jobs.
    return {1: 1, 2: 1}


@dataclass(frozen=True)
class RunnerConfig:
    """Everything that bounds a job; the defaults suit a small CPU-only runner."""

    memory_mb: int = 4096
    """Address-space limit per rank process (RLIMIT_AS)."""
    max_processes: int = 512
    """Processes and threads per sandbox (RLIMIT_NPROC on the sandbox's private uid)."""
    cpu_time_s: int | None = None
    """CPU seconds per process, all its threads together (RLIMIT_CPU); None = 2 x the job's timeout + 5."""
    file_size_mb: int = 64
    """Largest file a job may write (RLIMIT_FSIZE)."""
    tmp_mb: int = 256
    """Size of the private /tmp and of the private /dev/shm (each)."""
    output_cap_bytes: int = 64 * 1024
    """Captured bytes per rank and stream; the rest is dropped and the rank marked truncated."""
    flood_bytes: int = 8 * 1024 * 1024
    """Total output of a job after which it is stopped with status output_limit."""
    max_nproc: int = 8
    default_timeout_s: float = 30.0
    max_timeout_s: float = 300.0
    max_concurrent_jobs: int = 4
    uid_base: int = 200_000
    uid_count: int = 10_000
    pool: dict[int, int] = field(default_factory=_default_pool)
    unsafe_no_sandbox: bool = False
    """Run without bubblewrap (verdicts then say isolated: false). Never the default."""
