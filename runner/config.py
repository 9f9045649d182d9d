"""Runner settings: limits per job and pool sizes. Built once in the CLI and passed down."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_CODE_BYTES = 64 * 1024


DEFAULT_MAX_NPROC = 8
WARM_SPAWN_MODES = ("auto", "on", "off")


def _default_pool() -> dict[int, int]:
    # Two warm sandboxes that can each fork up to max_nproc ranks: every shape (python, dp, ddp with 1..8
    # ranks) is served warm.  Each holds an imported torch and its distributed stack (~500 MB); on a
    # 2-core machine more would only compete with the jobs for the CPU while they refill.
    return {DEFAULT_MAX_NPROC: 2}


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
    max_nproc: int = DEFAULT_MAX_NPROC
    default_timeout_s: float = 30.0
    max_timeout_s: float = 300.0
    max_concurrent_jobs: int = 4
    uid_base: int = 200_000
    uid_count: int = 10_000
    pool: dict[int, int] = field(default_factory=_default_pool)
    """Warm sandboxes to keep, by capacity (the most ranks one can fork): {8: 2} serves 1..8 ranks."""
    warm_spawn: str = "auto"
    """Serve processes a snippet starts with a fresh interpreter (mp.spawn, forkserver) from a fork of its
    warm rank (runner/inside/zygote.py SpawnZygote) instead of a new interpreter: ``on`` for every snippet,
    ``auto`` (the default) unless the snippet both builds a DistributedDataParallel model and makes
    subgroups of its own (new_group, a device mesh), ``off`` never.  A DDP model freed after its group
    was destroyed hits a torch 2.13 deadlock far more often in a warm worker than in a fresh one; the
    ranks keep such groups referenced, which avoids it, except for subgroups destroyed implicitly
    (README, "Warm pool")."""
    share_gpus: bool = False
    """Let concurrent jobs use the same GPUs (each job's devices counted from 0).  By default every job
    that uses GPUs gets devices no other running job has, or waits until enough are free."""
    unsafe_no_sandbox: bool = False
    """Run without bubblewrap (verdicts then say isolated: false). Never the default."""
    test_advertise_gpus: int | None = None
    """TESTING ONLY: report this many GPUs in ``/v1/health`` instead of the real count, so that a bot's
    routing between runners can be tested on a machine without GPUs. Jobs still run on the real hardware
    (an NCCL job the runner cannot really run is refused as ``unsupported``), and every verdict says so.
    ``serve --test-advertise-gpus`` accepts it on a loopback address only."""

    def __post_init__(self) -> None:
        """Refuse a warm_spawn setting that is not one of WARM_SPAWN_MODES (True/False mean on/off)."""
        if isinstance(self.warm_spawn, bool):  # the setting was a flag before it had an "auto"
            object.__setattr__(self, "warm_spawn", "on" if self.warm_spawn else "off")
        if self.warm_spawn not in WARM_SPAWN_MODES:
            modes = ", ".join(WARM_SPAWN_MODES)
            raise ValueError(f"warm_spawn must be one of {modes}, not {self.warm_spawn!r}")
