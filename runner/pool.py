"""A pool of warm, single-use sandboxes, each able to run any rank count up to its capacity.

A sandbox's supervisor imports torch (and what snippets use next) once, then forks as many ranks as the job
asks for, up to the capacity it was started with: a zygote per job.  The default pool keeps sandboxes of
the runner's largest rank count, so every shape, from a plain python job to an 8-rank DDP job, is served
warm.  Each sandbox serves exactly one job, then dies with everything the job left behind; warming ahead of
time only moves the imports out of the request's critical path.

A job that finds no ready sandbox takes the one being warmed, if any (it is further along than a new one
would be), else starts one that imports torch only.
A sandbox a job has taken is that job's from then on: the job waits for it, and the refill starts the next
one at once instead of waiting too, so a run of requests back to back finds every other sandbox (nearly)
ready rather than each one waiting for a whole warm-up of its own.  The pool still warms one sandbox of its
own at a time; in a burst, the one a job took warms beside it (two warm-ups at once, as when a job starts a
cold sandbox while the pool refills).  A claimed sandbox that fails counts as a refill failure (back-off,
``/v1/health``).
While it warms, a sandbox a job waits for (claimed, or a cold start) is favoured for the CPU, with a
reserved share, over the refill's next one and the running jobs (runner/cgroups.py CpuShares);
``state()`` counts the claims and the time jobs waited for warm-ups.
The refill thread never dies: a failure (a sandbox that does not start, descriptors or memory running out)
is retried with exponential back-off and shown in ``/v1/health``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runner.sandbox import SandboxLauncher
from runner.sandbox_process import Sandbox

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
HANDOVER_POLL_S = 0.1
"""How often the refill looks for a claim on the sandbox it is warming."""


@dataclass
class _Warming:
    sandbox: Sandbox
    capacity: int
    started: float
    claimed: bool = False
    """A job has taken it; the refill hands it over and moves on."""
    handed_over: bool = False
    """The refill no longer reads its status pipe: the job that claimed it waits for it itself."""
    result: bool | None = None
    """Set by the refill when it saw the warm-up end before any claim was handed over."""


class WarmPool:
    """Keeps ``targets[capacity]`` ready sandboxes of each capacity (the most ranks one can fork)."""

    def __init__(self, launcher: SandboxLauncher, targets: dict[int, int]) -> None:
        self.launcher = launcher
        self.targets = {n: c for n, c in sorted(targets.items()) if c > 0}
        self._ready: dict[int, deque[Sandbox]] = {n: deque() for n in self.targets}
        self._warming: list[_Warming] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.served_warm = 0
        self.warmed = 0  # sandboxes that finished their warm-up, claimed or not (readiness: one is enough)
        self.served_cold = 0
        self.served_light = 0
        self.served_claimed = 0
        """Jobs that found no ready sandbox and took the one being warmed (counted in ``served_warm`` too)."""
        self.waited_s = 0.0
        """Seconds jobs spent waiting for a warm-up (a claimed sandbox's, or a cold start's), all together."""
        self.failures = 0
        """Consecutive refill failures (0 once a sandbox warmed up again)."""
        self.last_error: str | None = None
        self.last_error_at: str | None = None
        self._retry_at: float | None = None

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

    def capacity_for(self, nproc: int) -> int | None:
        """The smallest pooled capacity that fits ``nproc`` ranks, or None if no pooled one does."""
        return next((n for n in self.targets if n >= nproc), None)

    def acquire(self, nproc: int, needs_torch: bool = True, light: bool = False) -> Sandbox:
        """A ready sandbox for ``nproc`` ranks: a warm one if available, else the one being warmed, else new.

        A snippet that never mentions torch gets a fresh sandbox that skips the import (a cold start of a
        plain interpreter is about as fast as a warm one) and leaves the warm ones to torch jobs.  ``light``
        (the snippet needs no compiler stack): a sandbox being warmed that this job takes is told to skip
        the rest of its warm-up.
        """
        if not needs_torch:
            with self._cond:
                self.served_light += 1
            return self._cold(nproc, preload=False)
        claimed: _Warming | None = None
        asked = time.monotonic()
        with self._cond:
            for capacity in (n for n in self.targets if n >= nproc):
                queue = self._ready[capacity]
                while queue:
                    sandbox = queue.popleft()
                    self._cond.notify_all()
                    if sandbox.alive():
                        self.served_warm += 1
                        return sandbox
                    self._discard(sandbox)
            claimed = next((w for w in self._warming if not w.claimed and w.capacity >= nproc), None)
            if claimed is not None:
                claimed.claimed = True
                # The job waits for this warm-up now: it is favoured for the CPU, with a reserved share,
                # over the refill's next one (CpuShares).
                self.launcher.awaited(claimed.sandbox)
                if light:
                    claimed.sandbox.hint_light()
                self._cond.notify_all()  # the refill: hand it over and start the next one
                while claimed.result is None and not claimed.handed_over:
                    self._cond.wait(1.0)
        if claimed is not None:
            if self._await_claimed(claimed, asked):
                return claimed.sandbox
            self._discard(claimed.sandbox)
        with self._cond:
            self.served_cold += 1
        return self._cold(nproc, preload="torch")

    def _await_claimed(self, claimed: _Warming, asked: float) -> bool:
        """Wait for the warm-up a job claimed (reading its status pipe if the refill handed it over), count
        the wait and the outcome; True when the sandbox is ready.
        """
        ready = claimed.result
        if ready is None:  # handed over: this job reads its status pipe from now on
            left = claimed.started + READY_TIMEOUT_S - time.monotonic()
            try:
                ready = claimed.sandbox.wait_ready(max(left, 0.0))
            except BaseException:
                self._discard(claimed.sandbox)
                raise
            # It was the pool's warm-up: its outcome is the refill's too (back-off, /v1/health).
            if ready:
                self._refill_worked()
            else:
                self._record_failure(
                    f"a warm sandbox did not start: {claimed.sandbox.diagnostics() or 'no output'}"
                )
        with self._cond:
            self.waited_s += time.monotonic() - asked
            if ready:
                self.served_warm += 1
                self.served_claimed += 1
        return bool(ready)

    def _cold(self, nproc: int, preload: bool | str) -> Sandbox:
        asked = time.monotonic()
        sandbox = self.launcher.spawn(nproc, preload=preload)
        # A job waits for this warm-up: it is favoured for the CPU, with a reserved share (CpuShares).
        self.launcher.awaited(sandbox)
        try:
            ready = sandbox.wait_ready(READY_TIMEOUT_S)
        finally:
            with self._cond:
                self.waited_s += time.monotonic() - asked
        if not ready:
            detail = sandbox.diagnostics()
            self._discard(sandbox)
            raise RuntimeError(f"sandbox failed to start: {detail or 'no output'}")
        return sandbox

    def release(self, sandbox: Sandbox) -> None:
        """Destroy a used sandbox (they are never reused)."""
        self._discard(sandbox)

    def state(self) -> dict[str, Any]:
        """Pool figures for /v1/health: per capacity, what is ready and warming; the refill's last error."""
        with self._cond:
            retry_in = None
            if self._retry_at is not None:
                retry_in = round(max(0.0, self._retry_at - time.monotonic()), 1)
            return {
                "targets": {str(n): c for n, c in self.targets.items()},
                "ready": {str(n): len(q) for n, q in self._ready.items()},
                "warming": {str(n): sum(w.capacity == n for w in self._warming) for n in self.targets},
                "served_warm": self.served_warm,
                "served_cold": self.served_cold,
                "served_light": self.served_light,
                "served_claimed": self.served_claimed,
                "waited_s": round(self.waited_s, 3),
                "refill": {
                    "ok": self.failures == 0,
                    "consecutive_failures": self.failures,
                    "last_error": self.last_error,
                    "last_error_at": self.last_error_at,
                    "retry_in_s": retry_in,
                },
            }

    def readiness(self) -> tuple[bool, str]:
        """Whether a job sent now is served as the pool promises, and why not (``GET /readyz``).

        Ready once one sandbox warmed up (the sandbox itself works on this host) and while the refill is
        not failing; a pool emptied by a burst stays ready (jobs then take the sandbox being warmed).  A
        runner without a pool is ready from the start.
        """
        with self._cond:
            if not self.targets:
                return True, "no warm pool: every job starts its own sandbox"
            if self.failures:
                return False, f"the warm pool cannot refill ({self.failures} failures in a row)"
            if self.warmed == 0:
                return False, "the first warm sandbox is not ready yet"
            return True, "the warm pool refills"

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
        try:
            sandbox.close()
        finally:
            self.launcher.uids.release(sandbox.uid)

    def _refill_forever(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._missing():
                    self._cond.wait(1.0)
                    self._drop_dead()
                # A failure seen by a job that had claimed the sandbox set a retry time without pausing
                # this thread: wait for it as after a failure of its own.
                while not self._stopping and self._retry_at is not None and time.monotonic() < self._retry_at:
                    self._cond.wait(self._retry_at - time.monotonic())
                if self._stopping:
                    return
                capacity = self._missing()[0]
            # One sandbox at a time: warming is CPU-heavy and must not starve the jobs being served.
            try:
                self._warm_one(capacity)
            except Exception as exc:
                self._failed(f"{type(exc).__name__}: {exc}")

    def _warm_one(self, capacity: int) -> None:
        sandbox = self.launcher.spawn(capacity)
        entry = _Warming(sandbox, capacity, time.monotonic())
        with self._cond:
            self._warming.append(entry)
        ok = False
        detail = ""
        try:
            # In slices, so that a claim is noticed within one: the job that claimed the sandbox then
            # waits for it, and this thread goes on to the next (see the module docstring).
            deadline = entry.started + READY_TIMEOUT_S
            while not ok and not sandbox.exited and (left := deadline - time.monotonic()) > 0:
                with self._cond:
                    if entry.claimed:
                        entry.handed_over = True
                        self._warming.remove(entry)
                        self._cond.notify_all()
                        return
                ok = sandbox.wait_ready(min(left, HANDOVER_POLL_S))
        finally:
            with self._cond:
                if not entry.handed_over:
                    self._warming.remove(entry)
                    entry.result = ok
                    if ok:
                        self._refill_worked()
                        if not entry.claimed:
                            # Idle until a job takes it: the CPU goes to those that compete for it.
                            self.launcher.rest(sandbox)
                            self._ready[capacity].append(sandbox)
                    self._cond.notify_all()
            if not ok and not entry.claimed:
                detail = sandbox.diagnostics()
                self._discard(sandbox)
        if not ok:
            self._failed(f"a warm sandbox did not start: {detail or 'no output'}")

    def _refill_worked(self) -> None:
        """A warm-up succeeded: the refill is healthy again (called with or without the lock held)."""
        with self._cond:
            self.warmed += 1
            self.failures = 0
            self._retry_at = None

    def _record_failure(self, message: str) -> float:
        """Count a failed warm-up, for /v1/health and the back-off; returns when to try again."""
        with self._cond:
            self.failures += 1
            self.last_error = message[:2000]
            self.last_error_at = datetime.now(UTC).isoformat(timespec="seconds")
            delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2.0 ** (self.failures - 1))
            self._retry_at = time.monotonic() + delay
            log.error(
                "warm pool refill failed (%d in a row, retry in %.0f s): %s", self.failures, delay, message
            )
            return self._retry_at

    def _failed(self, message: str) -> None:
        """Record a refill failure and wait (interruptibly) before the next try."""
        deadline = self._record_failure(message)
        with self._cond:
            while not self._stopping and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())

    def _missing(self) -> list[int]:
        return [n for n, c in self.targets.items() if len(self._ready[n]) < c]

    def _drop_dead(self) -> None:
        for queue in self._ready.values():
            for sandbox in [s for s in queue if not s.alive()]:
                queue.remove(sandbox)
                self._discard(sandbox)
