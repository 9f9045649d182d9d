"""How much of the host's memory and TCP buffers the runner's sandboxes may hold (the plan the cgroup
limits of runner/cgroups.py and the sandbox launcher apply): the host keeps its share, and a configuration
that leaves a job less than it needs is refused at start.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from runner.cgroups import ROOT, own_path

TCP_SHARE = 0.5
"""Fraction of the host's TCP pressure threshold (``net.ipv4.tcp_mem``'s middle value) the sandboxes'
TCP buffers may hold together: past the threshold the kernel shrinks every socket's buffers, the runner's
API included, and at its last value every TCP allocation on the host waits."""


def host_tcp_pressure_bytes(path: str = "/proc/sys/net/ipv4/tcp_mem") -> int | None:
    """The host's TCP memory pressure threshold in bytes (``tcp_mem`` counts pages), or None."""
    try:
        return int(Path(path).read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def tcp_bytes_per_sandbox(pressure_bytes: int, sandboxes: int) -> int:
    """Each sandbox's share of TCP_SHARE of the host's pressure threshold, in whole pages (kernel's unit)."""
    page = os.sysconf("SC_PAGE_SIZE")
    return int(pressure_bytes * TCP_SHARE) // max(sandboxes, 1) // page * page


MIB = 1024 * 1024
HOST_SHARE = 0.75
"""Fraction of the host's memory the runner's sandboxes may hold together; the rest is the host's."""
IDLE_SANDBOX_BYTES = 512 * MIB
"""What one idle warm sandbox (an imported torch) is counted for."""
MIN_JOB_BYTES = 1536 * MIB
"""Below this a sandbox cannot import torch and run one rank: a configuration leaving less is refused."""


class MemoryOversubscribedError(ValueError):
    """The configured concurrency cannot fit in the host's memory at all."""


def host_memory_bytes() -> int:
    """The memory the runner may use: the host's total, or its own cgroup's limit when lower."""
    total = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        total = 0
    try:
        table = Path("/proc/self/cgroup").read_text()
    except OSError:
        return total
    candidates = []
    own_v1 = own_path("memory", table)
    if own_v1 is not None:
        candidates.append(ROOT / "memory" / own_v1.lstrip("/") / "memory.limit_in_bytes")
    own_v2 = own_path("", table)
    if own_v2 is not None:
        candidates.append(ROOT / own_v2.lstrip("/") / "memory.max")
    for path in candidates:
        with contextlib.suppress(OSError, ValueError):
            limit = int(path.read_text().strip())
            if 0 < limit < total:
                total = limit
    return total


@dataclass(frozen=True)
class MemoryPlan:
    """How much memory each sandbox's cgroup may hold, from the host's memory and the concurrency.

    Every job may run at the same time as ``max_concurrent - 1`` others, next to the idle warm sandboxes:
    the sum of their limits must fit in HOST_SHARE of the host.  A job whose own need (``nproc`` x the
    per-rank memory, the two tmpfs and the supervisor) is larger gets the fair share instead, and its
    verdict says so.
    """

    host_bytes: int
    share_bytes: int
    max_concurrent: int

    @staticmethod
    def for_host(
        host_bytes: int, max_concurrent: int, idle_sandboxes: int, memory_mb: int, tmp_mb: int
    ) -> MemoryPlan:
        """The plan, or MemoryOversubscribedError when not even a one-rank job fits per slot."""
        usable = int(host_bytes * HOST_SHARE) - idle_sandboxes * IDLE_SANDBOX_BYTES
        share = usable // max(max_concurrent, 1)
        if share < MIN_JOB_BYTES:
            fits = max(usable // MIN_JOB_BYTES, 0)
            raise MemoryOversubscribedError(
                f"{max_concurrent} concurrent jobs do not fit in this host's memory "
                f"({host_bytes / 2**30:.1f} GiB, {HOST_SHARE:.0%} of it for jobs, "
                f"{idle_sandboxes} warm sandboxes): each would get {max(share, 0) // MIB} MiB, and a job "
                f"needs at least {MIN_JOB_BYTES // MIB} MiB; lower --max-concurrent to {fits} or fewer"
            )
        return MemoryPlan(host_bytes=host_bytes, share_bytes=share, max_concurrent=max_concurrent)

    def job_limit(self, nproc: int, memory_mb: int, tmp_mb: int) -> tuple[int, str | None]:
        """``(bytes, note)``: the cgroup limit of a ``nproc``-rank sandbox, and a note when clamped."""
        wanted = (nproc * memory_mb + 2 * tmp_mb + 512) * MIB
        if wanted <= self.share_bytes:
            return wanted, None
        note = (
            f"memory: this job's sandbox may hold {self.share_bytes / 2**30:.1f} GiB, not "
            f"{wanted / 2**30:.1f} GiB ({nproc} x {memory_mb} MiB per rank, tmpfs, supervisor): the host's "
            f"{self.host_bytes / 2**30:.1f} GiB are shared by up to {self.max_concurrent} concurrent jobs"
        )
        return self.share_bytes, note
