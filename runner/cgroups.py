"""Per-sandbox memory, process and CPU cgroups, where the host lets the runner create them.

The rlimits set inside the sandbox always apply; a cgroup adds a limit on the whole sandbox's resident
memory (tmpfs included) and process count, and tells an out-of-memory kill apart from any other SIGKILL.
Where the cpu controller is available too, each sandbox also gets an equal CPU weight and a quota of at
most one core per rank: a job that starts hundreds of spinners, each in a session of its own, competes as
one cgroup, not as hundreds of sessions.  While several sandboxes compete (running jobs, and the warm
pool's warm-ups, each counted as one), none may hold more than its fair share of the cores (CpuShares):
a job alone gets its whole quota, a hostile job next to others only its share.  The CPU time a job used
and the time its threads waited for a CPU are read from here to judge its deadline fairly
(runner/executor.py).
cgroup v2 is used when the runner's own cgroup can delegate the memory and pids controllers, else the v1
memory, pids, cpu and cpuacct hierarchies; when neither is writable the runner goes on with rlimits alone.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
MIN_QUOTA_US = 1_000
"""The kernel refuses a CFS quota below 1 ms."""
MIN_FAIR_CORES = 1.0
"""A competing sandbox's quota is never cut below one core: one thread of every job runs at full speed
when the host has the cores (the weights share them out when it does not)."""
MIN_CUT_CORES = 0.25
"""Next to the reserved warm-up (CpuShares), a sandbox's quota is never cut below a quarter of a core."""
V1_SHARES = 1024
V2_WEIGHT = 100
"""A sandbox's CPU weight: every job has the same (cgroup v1 ``cpu.shares``, v2 ``cpu.weight``)."""


def _write_quota(folder: Path, cpus: float) -> None:
    """Write a CFS quota of ``cpus`` cores into ``folder`` (v2's cpu.max or v1's cpu.cfs_quota_us, whichever
    the folder has: a v1 memory or pids folder has neither).
    """
    quota = max(int(cpus * CPU_PERIOD_US), MIN_QUOTA_US)
    if (folder / "cpu.max").exists():
        (folder / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
    elif (folder / "cpu.cfs_quota_us").exists():
        (folder / "cpu.cfs_quota_us").write_text(str(quota))


def own_path(controller: str, table: str) -> str | None:
    """The runner's cgroup path for ``controller`` ("" = the v2 unified line) from /proc/self/cgroup."""
    for line in table.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controller == "" and parts[0] == "0" and controllers == "":
            return path
        if controller and controller in controllers.split(","):
            return path
    return None


@dataclass
class JobCgroup:
    """The cgroup directories of one sandbox (one per hierarchy in v1, one in v2)."""

    dirs: list[Path]
    version: int
    memory_note: str | None = None
    """Set when the memory limit is the job's fair share of the host, below what its ranks asked for."""
    cpus: float = 0.0
    """The CPU the sandbox is entitled to, in cores (0: none): its quota while it runs alone."""
    quota_cpus: float = 0.0
    """The CPU quota in force now, in cores: ``cpus``, or less while others compete (CpuShares)."""
    capped_throttled: float = 0.0
    """Seconds the sandbox was throttled while its quota was cut below ``cpus`` for others (ended spells)."""
    capped_since: float | None = None
    """``throttled_s()`` when the current cut began (None: not cut now)."""
    weight: int = 1
    """The CPU weight in force now, in jobs' weights (1: a job's; more for the warm-up CpuShares favours)."""

    def add(self, pid: int) -> None:
        """Move ``pid`` (and so its future children) into the cgroup."""
        for folder in self.dirs:
            (folder / "cgroup.procs").write_text(str(pid))

    def _controller(self, name: str) -> Path | None:
        for folder in self.dirs:
            if self.version == 2 or folder.relative_to(ROOT).parts[0] == name:
                return folder
        return None

    def resize(self, memory_bytes: int, cpus: float) -> bool:
        """Set the memory limit and CPU quota for the job a warm sandbox was handed; False if refused.

        A warm sandbox is started for its capacity (the most ranks it can fork), before its job's rank
        count is known; its limits are those of the job that arrives.  The memory limit only ever holds the
        idle supervisor (about 0.5 GB) when lowered, which every limit a job can get is above.
        """
        try:
            for folder in self.dirs:
                controller = "" if self.version == 2 else folder.relative_to(ROOT).parts[0]
                if self.version == 2:
                    (folder / "memory.max").write_text(str(memory_bytes))
                elif controller == "memory":
                    (folder / "memory.limit_in_bytes").write_text(str(memory_bytes))
                if cpus > 0:
                    _write_quota(folder, cpus)
        except OSError as exc:
            log.warning("could not resize the job cgroup %s: %s", self.dirs, exc)
            return False
        self._end_cut()
        self.cpus = cpus
        if cpus > 0:
            self.quota_cpus = cpus
        return True

    def set_quota(self, cpus: float) -> bool:
        """Write a CPU quota of ``cpus`` cores without changing what the sandbox is entitled to."""
        try:
            for folder in self.dirs:
                _write_quota(folder, cpus)
        except OSError as exc:
            # The sandbox is being removed (its folder is gone): nothing left to limit.
            log.debug("could not set the CPU quota of %s: %s", self.dirs, exc)
            return False
        self._end_cut()
        if cpus < self.cpus:
            self.capped_since = self.throttled_s()
        self.quota_cpus = cpus
        return True

    def set_weight(self, jobs: int) -> bool:
        """Write a CPU weight of ``jobs`` times a job's (v1 ``cpu.shares``, v2 ``cpu.weight``)."""
        folder = self._controller("cpu")
        try:
            if folder is not None and (folder / "cpu.shares").exists():
                (folder / "cpu.shares").write_text(str(min(V1_SHARES * jobs, 262_144)))
            elif folder is not None and (folder / "cpu.weight").exists():
                (folder / "cpu.weight").write_text(str(min(V2_WEIGHT * jobs, 10_000)))
        except OSError as exc:
            log.debug("could not set the CPU weight of %s: %s", self.dirs, exc)
            return False
        self.weight = jobs
        return True

    def _end_cut(self) -> None:
        if self.capped_since is not None:
            self.capped_throttled += max(self.throttled_s() - self.capped_since, 0.0)
            self.capped_since = None

    def own_throttled_s(self) -> float:
        """Time the sandbox was stopped by the quota it is entitled to: its own doing, not its neighbours'.

        Throttling while CpuShares cut its quota to its share for others counts as waiting behind them.
        """
        now = self.throttled_s()
        cut = self.capped_throttled
        if self.capped_since is not None:
            cut += max(now - self.capped_since, 0.0)
        return max(now - cut, 0.0)

    def memory_limit(self) -> int | None:
        """The memory limit now in force, in bytes (None where it cannot be read)."""
        for folder in self.dirs:
            for name in ("memory.max", "memory.limit_in_bytes"):
                with contextlib.suppress(OSError, ValueError):
                    return int((folder / name).read_text().strip())
        return None

    def cpu_usage_s(self) -> float | None:
        """CPU time used by every process of the sandbox so far, or None where not measured."""
        try:
            if self.version == 2:
                for line in (self.dirs[0] / "cpu.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
                return None
            for folder in (self._controller("cpuacct"), self._controller("cpu")):
                if folder is not None and (folder / "cpuacct.usage").exists():
                    return int((folder / "cpuacct.usage").read_text()) / 1e9
            return None
        except (OSError, ValueError, IndexError):
            return None

    def throttled_s(self) -> float:
        """Time the sandbox spent stopped by its own CPU quota (its threads waited on itself, not others)."""
        folder = self._controller("cpu")
        key, scale = ("throttled_usec", 1e6) if self.version == 2 else ("throttled_time", 1e9)
        if folder is None:
            return 0.0
        try:
            for line in (folder / "cpu.stat").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value) / scale
        except (OSError, ValueError):
            pass
        return 0.0

    def threads(self) -> list[int]:
        """Host thread ids of every thread in the sandbox (for their run-queue delay)."""
        folder = self._controller("cpu") or self._controller("pids") or (self.dirs[0] if self.dirs else None)
        if folder is None:
            return []
        name = "cgroup.threads" if self.version == 2 else "tasks"
        try:
            return [int(t) for t in (folder / name).read_text().split()]
        except (OSError, ValueError):
            return []

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this cgroup for memory."""
        for folder in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    text = (folder / name).read_text()
                except OSError:
                    continue
                for line in text.splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                        return True
        return False

    def remove(self) -> list[Path]:
        """Delete the cgroup directories; returns those the kernel still reports busy."""
        busy = []
        for folder in self.dirs:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                busy.append(folder)
        return busy


class CpuShares:
    """Caps every competing sandbox at its fair share of the cores while more than one competes, and favours
    one warm-up over the others.

    Equal weights alone do not keep a job with dozens of busy threads from slowing a neighbour: the
    neighbour's threads get their share of CPU time, but each wake-up waits behind the busy job's
    threads on every core, and a warm-up (a single thread importing torch) that a waiting job needs
    gets a third of the host next to a hostile job and a second warm-up.  A quota is a hard cap: with a
    hostile job held to its share, the other cores stay free for the others' wake-ups and warm-ups.

    Competing: a sandbox warming up (the pool's refill, or one a job started cold) and a sandbox running a
    job, each counted once however many threads it has; a warm sandbox waiting idle in the pool is not.
    Each competing sandbox's quota is ``min(its own, max(cores / competing, MIN_FAIR_CORES))``: alone, a job
    keeps its whole quota (at most one core per rank); the caps are recomputed whenever one starts or stops
    competing.

    Warm-ups: where those caps add up to more than the host's cores (more sandboxes compete than there are
    cores), they do not keep a warm-up's single thread from waiting behind the jobs' threads, and a
    request that found the pool empty waits for that warm-up.  So the warm-up a request waits for (a pool
    sandbox it claimed while it warmed, or its cold start; the oldest such one, if several) is favoured:

    * its CPU weight is that of all the other competing sandboxes together, so however many threads they
      run it gets at least half of what the runner's sandboxes get;
    * it holds a **reserved share**: its quota is its fair share (at most half the host) and every other
      competing sandbox shares what is left, never under MIN_CUT_CORES, so the others' quotas together
      leave the reserved cores free.

    The refill's warm-up, while no request waits for it, is one sandbox like the others (its fair share):
    every verdict taken from the pool starts a refill that competes with that verdict, so favouring the
    refill would slow each verdict next to a busy neighbour to speed up only the next request's, and a
    quota cut for it would be lost to the host whenever the job it was cut from sleeps.
    """

    def __init__(self, cores: int) -> None:
        self.cores = max(cores, 1)
        self._lock = threading.Lock()
        # Insertion order is start order: the oldest warm-up is the first one found.
        self._competing: dict[int, JobCgroup] = {}
        self._warming: set[int] = set()
        self._awaited: set[int] = set()
        self._reserved: int | None = None

    def fair_cores(self, competing: int) -> float:
        """The most cores one sandbox may hold while ``competing`` sandboxes compete."""
        return max(self.cores / max(competing, 1), MIN_FAIR_CORES)

    def quota_for(self, own_cpus: float, competing: int) -> float:
        """The quota, in cores, of a sandbox entitled to ``own_cpus`` next to ``competing - 1`` others."""
        return min(own_cpus, self.fair_cores(competing))

    def reserved_cores(self, own_cpus: float, competing: int) -> float:
        """The reserved warm-up's quota next to ``competing - 1`` others.

        Its fair share, and at most half the host: the others keep the rest.
        """
        return min(own_cpus, self.fair_cores(competing), self.cores / 2)

    def rest_quota(self, own_cpus: float, reserved: float, competing: int) -> float:
        """The quota of a sandbox other than the reserved warm-up: an equal part of the cores left over."""
        left = (self.cores - reserved) / max(competing - 1, 1)
        return min(own_cpus, max(left, MIN_CUT_CORES), self.fair_cores(competing))

    @property
    def competing(self) -> int:
        """How many sandboxes compete for the CPU now."""
        with self._lock:
            return len(self._competing)

    def reserved(self) -> JobCgroup | None:
        """The warm-up favoured now (None: no request waits for a warm-up, or it competes alone)."""
        with self._lock:
            return None if self._reserved is None else self._competing.get(self._reserved)

    def compete(self, cgroup: JobCgroup, warming: bool = False) -> None:
        """``cgroup`` competes from now on: a warm-up (``warming``) or a job; every cap is recomputed."""
        if cgroup.cpus <= 0:
            return
        with self._lock:
            key = id(cgroup)
            self._competing[key] = cgroup
            if warming:
                self._warming.add(key)
            else:
                self._warming.discard(key)
                self._awaited.discard(key)
            self._apply()

    def await_warm_up(self, cgroup: JobCgroup) -> None:
        """A request waits for this warm-up from now on: it is favoured (the oldest such one)."""
        with self._lock:
            key = id(cgroup)
            if key in self._warming and key not in self._awaited:
                self._awaited.add(key)
                self._apply()

    def rest(self, cgroup: JobCgroup) -> None:
        """``cgroup`` stopped competing (warmed and idle in the pool, or removed); caps are recomputed."""
        with self._lock:
            key = id(cgroup)
            self._warming.discard(key)
            self._awaited.discard(key)
            if self._competing.pop(key, None) is not None:
                if cgroup.weight != 1:
                    cgroup.set_weight(1)  # idle in the pool: a job's weight again once it runs one
                self._apply()

    def _apply(self) -> None:
        count = len(self._competing)
        # The oldest warm-up a request waits for; none while it competes alone.
        holder = next((k for k in self._competing if k in self._awaited), None) if count > 1 else None
        self._reserved = holder
        reserve = 0.0
        if holder is not None:
            reserve = self.reserved_cores(self._competing[holder].cpus, count)
        for key, cgroup in self._competing.items():
            if not reserve:
                quota = self.quota_for(cgroup.cpus, count)
            elif key == holder:
                quota = reserve
            else:
                quota = self.rest_quota(cgroup.cpus, reserve, count)
            if quota != cgroup.quota_cpus:
                cgroup.set_quota(quota)
            weight = count - 1 if key == holder else 1
            if weight != cgroup.weight:
                cgroup.set_weight(weight)


class CgroupManager:
    """Creates job cgroups under the runner's own cgroup; ``available`` is False where that is refused."""

    _instances = itertools.count(1)

    def __init__(self, prefix: str = "rankzero") -> None:
        # One folder per manager: two services in one process (tests do that) must not share sandbox-<n>.
        serial = next(self._instances)
        self.prefix = f"{prefix}-{os.getpid()}" + (f"-{serial}" if serial > 1 else "")
        # A cgroup whose last task has just died can stay busy for a moment: removal is retried later
        # instead of making the verdict wait for it.
        self._busy: list[Path] = []
        self._lock = threading.Lock()
        self.version = 0
        self.cpu = False
        self.bases: list[Path] = []
        self.tcp_uncharged_logged = False
        self.shares = CpuShares(os.cpu_count() or 1)
        try:
            table = Path("/proc/self/cgroup").read_text()
        except OSError:
            return
        if self._try_v2(table) or self._try_v1(table):
            log.info("job cgroups: v%d under %s", self.version, ", ".join(map(str, self.bases)))
        else:
            log.info("job cgroups unavailable here: memory and processes are limited by rlimits only")

    @property
    def available(self) -> bool:
        """True when job cgroups can be created."""
        return self.version != 0

    def _try_v2(self, table: str) -> bool:
        own = own_path("", table)
        if own is None or not (ROOT / "cgroup.controllers").exists():
            return False
        parent = ROOT / own.lstrip("/")
        base = parent / self.prefix
        try:
            controllers = (parent / "cgroup.controllers").read_text().split()
            if not {"memory", "pids"} <= set(controllers):
                return False
            wanted = "+memory +pids" + (" +cpu" if "cpu" in controllers else "")
            base.mkdir(exist_ok=True)
            # Fails (EBUSY) when the parent holds processes: v2 forbids controllers on such an inner node.
            (parent / "cgroup.subtree_control").write_text(wanted)
            (base / "cgroup.subtree_control").write_text(wanted)
            self.cpu = "cpu" in controllers
        except OSError as exc:
            log.debug("cgroup v2 not usable: %s", exc)
            with contextlib.suppress(OSError):
                base.rmdir()
            return False
        self.version, self.bases = 2, [base]
        return True

    def _try_v1(self, table: str) -> bool:
        bases: list[Path] = []
        for controller in ("memory", "pids", "cpu", "cpuacct"):
            own = own_path(controller, table)
            if own is None or not (ROOT / controller).is_dir():
                continue
            base = ROOT / controller / own.lstrip("/") / self.prefix
            if any(b.resolve() == base.resolve() for b in bases):
                continue  # cpu and cpuacct mounted together (cpu,cpuacct): one folder serves both
            try:
                base.mkdir(exist_ok=True)
            except OSError as exc:
                log.debug("cgroup v1 %s not usable: %s", controller, exc)
                continue
            bases.append(base)
        if not any(b.relative_to(ROOT).parts[0] == "memory" for b in bases):
            for base in bases:
                with contextlib.suppress(OSError):
                    base.rmdir()
            return False
        self.version, self.bases = 1, bases
        self.cpu = any(b.relative_to(ROOT).parts[0] == "cpu" for b in bases)
        return True

    def create(
        self, name: str, memory_bytes: int, max_pids: int, cpus: float = 0.0, tcp_bytes: int = 0
    ) -> JobCgroup | None:
        """A cgroup for one sandbox, or None if it cannot be made (the job then runs on rlimits only).

        ``cpus`` > 0 caps the sandbox at that many cores (CFS quota); every sandbox has the same weight.
        ``tcp_bytes`` > 0 caps the socket buffers of the sandbox's TCP connections (loopback ones too).
        cgroup v2 charges them to ``memory.current`` by itself; cgroup v1 charges them to no cgroup until
        ``memory.kmem.tcp.limit_in_bytes`` is written, so it is written here, before any process joins
        (only sockets created after that are charged).  A v1 kernel without that file (no kmem
        accounting) leaves them uncharged: logged once.
        """
        if not self.available:
            return None
        self._sweep()
        dirs = []
        try:
            for base in self.bases:
                folder = base / name
                folder.mkdir(exist_ok=True)
                dirs.append(folder)
                controller = base.relative_to(ROOT).parts[0]
                if self.version == 2:
                    (folder / "memory.max").write_text(str(memory_bytes))
                    if (folder / "memory.swap.max").exists():
                        (folder / "memory.swap.max").write_text("0")
                    (folder / "pids.max").write_text(str(max_pids))
                    if self.cpu:
                        (folder / "cpu.weight").write_text(str(V2_WEIGHT))
                        if cpus > 0:
                            _write_quota(folder, cpus)
                elif controller == "memory":
                    (folder / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    if tcp_bytes > 0:
                        self._limit_tcp_v1(folder, tcp_bytes)
                elif controller == "pids":
                    (folder / "pids.max").write_text(str(max_pids))
                elif controller == "cpu":
                    (folder / "cpu.shares").write_text(str(V1_SHARES))
                    if cpus > 0:
                        (folder / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
                        _write_quota(folder, cpus)
        except OSError as exc:
            log.warning("could not set up the job cgroup %s: %s", name, exc)
            self.discard(JobCgroup(dirs, self.version))
            return None
        cgroup = JobCgroup(dirs, self.version, cpus=cpus if self.cpu else 0.0)
        cgroup.quota_cpus = cgroup.cpus
        # It is created for a sandbox that starts now: its warm-up competes from the start.
        self.shares.compete(cgroup, warming=True)
        return cgroup

    def _limit_tcp_v1(self, folder: Path, tcp_bytes: int) -> None:
        tcp = folder / "memory.kmem.tcp.limit_in_bytes"
        if tcp.exists():
            tcp.write_text(str(tcp_bytes))
        elif not self.tcp_uncharged_logged:
            self.tcp_uncharged_logged = True
            log.warning(
                "cgroup v1 without memory.kmem.tcp.limit_in_bytes: the jobs' TCP buffers are charged to "
                "no cgroup (use cgroup v2, or a kernel with v1 kmem accounting)"
            )

    def tcp_limit(self, cgroup: JobCgroup) -> int | None:
        """The TCP buffer limit of a v1 sandbox cgroup in bytes (None: v2, or not set)."""
        for folder in cgroup.dirs:
            with contextlib.suppress(OSError, ValueError):
                return int((folder / "memory.kmem.tcp.limit_in_bytes").read_text().strip())
        return None

    def discard(self, cgroup: JobCgroup) -> None:
        """Remove a sandbox's cgroup now, or later if the kernel still holds it."""
        self.shares.rest(cgroup)
        busy = cgroup.remove()
        with self._lock:
            self._busy += busy

    def _sweep(self) -> None:
        with self._lock:
            pending, self._busy = self._busy, []
        still = JobCgroup(pending, self.version).remove()
        with self._lock:
            self._busy += still

    def close(self) -> None:
        """Remove every cgroup folder of this runner (retrying briefly for ones still busy)."""
        folders = [c for b in self.bases if b.is_dir() for c in b.iterdir() if c.is_dir()]
        with self._lock:
            self._busy = sorted(set(self._busy) | set(folders))
        deadline = time.monotonic() + 3.0
        while self._busy and time.monotonic() < deadline:
            self._sweep()
            if self._busy:
                time.sleep(0.05)
        for base in self.bases:
            with contextlib.suppress(OSError):
                base.rmdir()
