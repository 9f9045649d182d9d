"""Per-sandbox memory and process cgroups, where the host lets the runner create them.

The rlimits set inside the sandbox always apply; a cgroup adds a limit on the whole sandbox's resident
memory (tmpfs included) and process count, and tells an out-of-memory kill apart from any other SIGKILL.
cgroup v2 is used when the runner's own cgroup can delegate the memory and pids controllers, else the v1
memory and pids hierarchies; when neither is writable the runner goes on with rlimits alone.
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


def _own_path(controller: str, table: str) -> str | None:
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

    def add(self, pid: int) -> None:
        """Move ``pid`` (and so its future children) into the cgroup."""
        for folder in self.dirs:
            (folder / "cgroup.procs").write_text(str(pid))

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
        self.bases: list[Path] = []
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
        own = _own_path("", table)
        if own is None or not (ROOT / "cgroup.controllers").exists():
            return False
        parent = ROOT / own.lstrip("/")
        base = parent / self.prefix
        try:
            controllers = (parent / "cgroup.controllers").read_text().split()
            if not {"memory", "pids"} <= set(controllers):
                return False
            base.mkdir(exist_ok=True)
            # Fails (EBUSY) when the parent holds processes: v2 forbids controllers on such an inner node.
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
            (base / "cgroup.subtree_control").write_text("+memory +pids")
        except OSError as exc:
            log.debug("cgroup v2 not usable: %s", exc)
            with contextlib.suppress(OSError):
                base.rmdir()
            return False
        self.version, self.bases = 2, [base]
        return True

    def _try_v1(self, table: str) -> bool:
        bases = []
        for controller in ("memory", "pids"):
            own = _own_path(controller, table)
            if own is None or not (ROOT / controller).is_dir():
                continue
            base = ROOT / controller / own.lstrip("/") / self.prefix
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
        return True

    def create(self, name: str, memory_bytes: int, max_pids: int) -> JobCgroup | None:
        """A cgroup for one sandbox, or None if it cannot be made (the job then runs on rlimits only)."""
        if not self.available:
            return None
        self._sweep()
        dirs = []
        try:
            for base in self.bases:
                folder = base / name
                folder.mkdir(exist_ok=True)
                dirs.append(folder)
                if self.version == 2:
                    (folder / "memory.max").write_text(str(memory_bytes))
                    if (folder / "memory.swap.max").exists():
                        (folder / "memory.swap.max").write_text("0")
                    (folder / "pids.max").write_text(str(max_pids))
                elif base.relative_to(ROOT).parts[0] == "memory":
                    (folder / "memory.limit_in_bytes").write_text(str(memory_bytes))
                else:
                    (folder / "pids.max").write_text(str(max_pids))
        except OSError as exc:
            log.warning("could not set up the job cgroup %s: %s", name, exc)
            self.discard(JobCgroup(dirs, self.version))
            return None
        return JobCgroup(dirs, self.version)

    def discard(self, cgroup: JobCgroup) -> None:
        """Remove a sandbox's cgroup now, or later if the kernel still holds it."""
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
