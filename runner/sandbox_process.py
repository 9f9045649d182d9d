"""A started sandbox as the host holds it: its process, pipes, status events, log, and how it is killed.

runner/sandbox.py starts sandboxes (SandboxLauncher); runner/pool.py keeps them warm; runner/executor.py
drives one job through one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.cgroups import (
    CgroupManager,
    JobCgroup,
)
from runner.inside.protocol import HINT_LIGHT

log = logging.getLogger(__name__)

STATUS_LINE_MAX = 64 * 1024


# What the host keeps of a sandbox's own stderr (bubblewrap's errors, the supervisor's and torch's agent
# store's warnings).  The job can make the store log a warning per connection it resets: kept whole, that
# grew an unlinked temporary file by ~1 GB in a 300 s job.
SANDBOX_LOG_KEEP_BYTES = 64 * 1024


class SandboxLog:
    """A sandbox's stderr, read through a pipe by a host thread that keeps its start and counts the rest.

    Only ``SANDBOX_LOG_KEEP_BYTES`` are ever stored (in memory); whatever follows is read and dropped, and
    its size is reported with the kept text.  The thread ends when every process holding the write end
    (bubblewrap, the supervisor) has exited.
    """

    def __init__(self, keep_bytes: int = SANDBOX_LOG_KEEP_BYTES) -> None:
        self.keep_bytes = keep_bytes
        self.kept = bytearray()
        self.dropped = 0
        self._lock = threading.Lock()
        self._read_fd, self.write_fd = os.pipe()
        self._thread = threading.Thread(target=self._drain, name="sandbox-log", daemon=True)

    def started(self) -> None:
        """The sandbox holds the write end now: close the host's copy (so EOF comes) and start draining."""
        os.close(self.write_fd)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self._read_fd, 65536)
                except InterruptedError:
                    continue
                if not chunk:
                    return
                with self._lock:
                    room = max(self.keep_bytes - len(self.kept), 0)
                    self.kept += chunk[:room]
                    self.dropped += max(len(chunk) - room, 0)
        except OSError:
            return
        finally:
            os.close(self._read_fd)

    def text(self, limit: int = 4000) -> str:
        """The start of what was kept (decoded, at most ``limit`` bytes), and how much was dropped."""
        with self._lock:
            head = bytes(self.kept[:limit]).decode(errors="replace").strip()
            dropped = self.dropped
        return f"{head} [{dropped} more bytes dropped]" if dropped else head

    def close(self, wait_s: float = 1.0) -> None:
        """Wait a little for the drain to see EOF (the sandbox is dead by now); never blocks longer."""
        if self._thread.is_alive():
            self._thread.join(wait_s)
        if self.dropped:
            log.info("sandbox stderr: kept %d bytes, dropped %d", len(self.kept), self.dropped)


@dataclass
class RankPipes:
    """Host-side read ends of one rank's pipes."""

    out: int
    err: int
    dump: int


@dataclass
class Sandbox:
    """One started (maybe not yet ready) single-use sandbox."""

    proc: subprocess.Popen[bytes]
    nproc: int
    control: int
    status: int
    ranks: list[RankPipes]
    engine: str
    isolated: bool
    uid: int | None
    workdir: str
    log: SandboxLog
    host_workdir: str | None = None
    cgroup: JobCgroup | None = None
    cgroups: CgroupManager | None = None
    status_buffer: bytearray = field(default_factory=bytearray)
    ready: bool = False
    exited: bool = False
    """Its supervisor closed the status pipe before it was ready: it will never be."""
    created: float = field(default_factory=time.monotonic)
    _closed: bool = False

    def read_events(self, block_s: float | None) -> tuple[list[dict[str, Any]], bool]:
        """Read whatever status events are available (waiting at most block_s); returns (events, eof)."""
        eof = False
        # poll, not select: descriptor numbers can exceed select's limit on a busy runner.
        poller = select.poll()
        poller.register(self.status, select.POLLIN)
        timeout_ms = None if block_s is None else int(block_s * 1000)
        if poller.poll(timeout_ms):
            chunk = os.read(self.status, 65536)
            if chunk:
                self.status_buffer.extend(chunk)
            else:
                eof = True
        return self.pop_events(), eof

    def pop_events(self) -> list[dict[str, Any]]:
        """Complete JSON lines buffered so far; garbage lines are ignored, never fatal.

        Only the supervisor writes here, and its lines are short; a line over STATUS_LINE_MAX (or a buffer
        that long without a newline) is dropped unparsed all the same.
        """
        events: list[dict[str, Any]] = []
        while b"\n" in self.status_buffer:
            line, _, rest = bytes(self.status_buffer).partition(b"\n")
            self.status_buffer[:] = rest
            if len(line) > STATUS_LINE_MAX:
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict):
                events.append(event)
        if len(self.status_buffer) > STATUS_LINE_MAX:
            self.status_buffer.clear()
        return events

    def wait_ready(self, timeout_s: float) -> bool:
        """Block until the supervisor has imported torch and reported ready, at most ``timeout_s``.

        False when the time ran out or the sandbox exited first (``exited`` tells which). One thread at a
        time may wait: the status pipe is read here.
        """
        deadline = time.monotonic() + timeout_s
        while not self.ready:
            left = deadline - time.monotonic()
            if left <= 0 or self.exited:
                return False
            events, eof = self.read_events(min(left, 0.5))
            if any(e.get("event") == "ready" for e in events):
                self.ready = True
            elif eof:
                self.exited = True
                log.warning("sandbox exited before it was ready: %s", self.diagnostics())
                return False
        return True

    def alive(self) -> bool:
        """True while the sandbox process has not exited."""
        return self.proc.poll() is None

    def diagnostics(self) -> str:
        """The sandbox's own stderr (bubblewrap errors, supervisor warnings), for logs."""
        return self.log.text()

    def hint_light(self) -> None:
        """Tell a sandbox still warming that the job waiting for it needs no compiler stack.

        Its supervisor then skips the rest of the warm-up (runner/inside/supervisor.py, HINT_LIGHT): a
        job that would only wait for imports it never uses (about 2 of the 4-5 s a warm-up takes here)
        starts sooner.
        """
        with contextlib.suppress(OSError):
            os.write(self.control, HINT_LIGHT)

    def kill(self) -> None:
        """Kill every process of the sandbox and wait until they are gone; safe to call more than once."""
        if self.isolated:
            # Kill the namespace's PID 1 and let bwrap reap it: PID 1's exit completes only after the
            # kernel has killed and reaped every other process of the namespace, so once bwrap returns,
            # nothing of the job is left (daemons included).  Killing bwrap first would return earlier.
            for child in child_pids(self.proc.pid):
                _kill(child)
            try:
                self.proc.wait(timeout=5)
                return
            except subprocess.TimeoutExpired:
                log.warning("sandbox %s did not stop with its PID 1; killing bwrap", self.proc.pid)
            _kill(self.proc.pid)
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.error("sandbox process %s did not die", self.proc.pid)

    def close(self) -> None:
        """Kill the sandbox and release its pipes and files."""
        if self._closed:
            return
        self._closed = True
        self.kill()
        for fd in [self.control, self.status, *(f for r in self.ranks for f in (r.out, r.err, r.dump))]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.log.close()
        if self.cgroup is not None and self.cgroups is not None:
            self.cgroups.discard(self.cgroup)
        if self.host_workdir:
            shutil.rmtree(self.host_workdir, ignore_errors=True)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def child_pids(pid: int) -> list[int]:
    """The pids of the direct children of ``pid`` (from /proc; none when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]
