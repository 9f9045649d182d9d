"""A small pool of warm, single-use sandboxes per rank count, refilled in the background.

Each sandbox has torch imported and serves exactly one job, then dies with everything the job left behind;
warming ahead of time only moves the import out of the request's critical path.  Python, dp and 1-rank
ddp jobs all need the same shape (one rank), so the pool is keyed by rank count.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from runner.sandbox import Sandbox, SandboxLauncher

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0


class WarmPool:
    """Keeps ``targets[nproc]`` ready sandboxes for each rank count."""

    def __init__(self, launcher: SandboxLauncher, targets: dict[int, int]) -> None:
        self.launcher = launcher
        self.targets = {n: c for n, c in targets.items() if c > 0}
        self._ready: dict[int, deque[Sandbox]] = {n: deque() for n in self.targets}
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.served_warm = 0
        self.served_cold = 0
        self.served_light = 0

    def start(self) -> None:
        """Start refilling in the background."""
        if self._thread is None and self.targets:
            self._thread = threading.Thread(target=self._refill_forever, name="rankzero-pool", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop refilling and kill every warm sandbox."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=READY_TIMEOUT_S)
        with self._cond:
            leftovers = [s for q in self._ready.values() for s in q]
            for queue in self._ready.values():
                queue.clear()
        for sandbox in leftovers:
            self._discard(sandbox)

    def acquire(self, nproc: int, needs_torch: bool = True) -> Sandbox:
        """A ready sandbox for ``nproc`` ranks: a warm one if available, else one started now.

        A snippet that never mentions torch gets a fresh sandbox that skips the import (a cold start of a
        plain interpreter is about as fast as a warm one) and leaves the warm ones to torch jobs.
        """
        if not needs_torch:
            with self._cond:
                self.served_light += 1
            return self._cold(nproc, preload=False)
        with self._cond:
            queue = self._ready.get(nproc)
            while queue:
                sandbox = queue.popleft()
                self._cond.notify_all()
                if sandbox.alive():
                    self.served_warm += 1
                    return sandbox
                self._discard(sandbox)
            self.served_cold += 1
        return self._cold(nproc, preload=True)

    def _cold(self, nproc: int, preload: bool) -> Sandbox:
        sandbox = self.launcher.spawn(nproc, preload=preload)
        if not sandbox.wait_ready(READY_TIMEOUT_S):
            detail = sandbox.diagnostics()
            self._discard(sandbox)
            raise RuntimeError(f"sandbox failed to start: {detail or 'no output'}")
        return sandbox

    def release(self, sandbox: Sandbox) -> None:
        """Destroy a used sandbox (they are never reused)."""
        self._discard(sandbox)

    def state(self) -> dict[str, Any]:
        """Pool figures for /v1/health."""
        with self._cond:
            return {
                "targets": {str(n): c for n, c in self.targets.items()},
                "ready": {str(n): len(q) for n, q in self._ready.items()},
                "served_warm": self.served_warm,
                "served_cold": self.served_cold,
                "served_light": self.served_light,
            }

    def wait_full(self, timeout_s: float) -> bool:
        """Block until every target is met (tests and benchmarks use this to start from a known state)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while any(len(self._ready[n]) < c for n, c in self.targets.items()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _discard(self, sandbox: Sandbox) -> None:
        sandbox.close()
        self.launcher.uids.release(sandbox.uid)

    def _refill_forever(self) -> None:
        failures = 0
        while True:
            with self._cond:
                while not self._stopping and not self._missing():
                    self._cond.wait(1.0)
                    self._drop_dead()
                if self._stopping:
                    return
                nproc = self._missing()[0]
            # One sandbox at a time: warming is CPU-heavy and must not starve the jobs being served.
            sandbox = self.launcher.spawn(nproc)
            if sandbox.wait_ready(READY_TIMEOUT_S):
                failures = 0
                with self._cond:
                    self._ready[nproc].append(sandbox)
                    self._cond.notify_all()
            else:
                failures += 1
                log.error("warm sandbox failed to start: %s", sandbox.diagnostics())
                self._discard(sandbox)
                time.sleep(min(30.0, 2.0**failures))

    def _missing(self) -> list[int]:
        return [n for n, c in self.targets.items() if len(self._ready[n]) < c]

    def _drop_dead(self) -> None:
        for queue in self._ready.values():
            for sandbox in [s for s in queue if not s.alive()]:
                queue.remove(sandbox)
                self._discard(sandbox)
