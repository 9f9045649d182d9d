"""Driving one job inside one sandbox: send it, collect every rank's output and exit, enforce the deadline."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.cgroups import JobCgroup
from runner.jobwatch import Action, JobWatch
from runner.sandbox_process import Sandbox

log = logging.getLogger(__name__)

MAX_THREADS_SAMPLED = 1024
DUMP_CAP = 64 * 1024
DRAIN_MAX_BYTES = 1 << 20
POLL_S = 0.05


@dataclass
class StreamCapture:
    """Bytes of one stream, capped; counts what was dropped."""

    cap: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0
    eof: bool = False

    def add(self, chunk: bytes) -> None:
        """Keep the chunk while under the cap; count it in any case."""
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data.extend(chunk[:room])

    @property
    def truncated(self) -> bool:
        """True when some output was dropped."""
        return self.total > len(self.data)


@dataclass
class RankRaw:
    """Everything the host learned about one rank."""

    rank: int
    stdout: StreamCapture
    stderr: StreamCapture
    dump: StreamCapture
    exit_code: int | None = None
    signal: int | None = None
    exited: bool = False
    exit_order: int | None = None
    exception: dict[str, Any] | None = None
    report_problem: str | None = None
    stopped_by_runner: bool = False
    dumped: bool = False
    """True when the dump pipe holds a stack dump the host asked for while this rank was running."""


class CpuWait:
    """How long a job was kept from running by other work: the fairness half of its deadline.

    A job's threads are in its CPU cgroup; the kernel counts, per thread, the time it was runnable but
    waiting for a CPU (the second field of ``/proc/<tid>/schedstat``).  The job's wait is the longest such
    wait of any of its threads since the job started, less the time its cgroup was throttled by its own
    quota (waiting on itself is the job's own doing; a quota cut to its fair share while others compete is
    theirs, runner/cgroups.py CpuShares), and never more than the CPU it was entitled to and
    did not get (elapsed time less its CPU time divided by its quota): a job that had its whole quota was
    kept waiting only by its own threads.  A job that sleeps or blocks in a collective waits for nothing:
    its clock is the wall clock.
    """

    def __init__(self, cgroup: JobCgroup) -> None:
        self.cgroup = cgroup
        # The supervisor's threads existed before the job (importing torch in the pool): their earlier
        # waits are not the job's.
        self.base = {tid: delay for tid in cgroup.threads() if (delay := _run_delay(tid)) is not None}
        self.base_throttled = cgroup.own_throttled_s()
        self.base_cpu = cgroup.cpu_usage_s()
        self.worst: dict[int, float] = {}

    def waited_s(self, elapsed_s: float) -> float:
        """Seconds the job waited for a CPU behind other work, ``elapsed_s`` into the job."""
        for tid in self.cgroup.threads()[:MAX_THREADS_SAMPLED]:
            delay = _run_delay(tid)
            if delay is not None:
                self.worst[tid] = max(self.worst.get(tid, 0.0), delay - self.base.get(tid, 0.0))
        own_quota = self.cgroup.own_throttled_s() - self.base_throttled
        waited = max(self.worst.values(), default=0.0) - own_quota
        used = self.cpu_s()
        if used is not None and self.cgroup.cpus > 0:
            waited = min(waited, elapsed_s - used / self.cgroup.cpus)
        return max(0.0, waited)

    def cpu_s(self) -> float | None:
        """CPU seconds the job used (every process and thread of the sandbox)."""
        now = self.cgroup.cpu_usage_s()
        return None if now is None or self.base_cpu is None else max(now - self.base_cpu, 0.0)


def _run_delay(tid: int) -> float | None:
    try:
        fields = Path(f"/proc/{tid}/schedstat").read_text().split()
        return int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class JobRaw:
    """The raw outcome of a job, before it is judged into a verdict."""

    ranks: list[RankRaw]
    elapsed_s: float
    cpu_s: float | None = None
    """CPU time the job used, from its cgroup (None where there is none)."""
    waited_s: float = 0.0
    """Time its threads waited for a CPU behind other work: not counted against its deadline."""
    notes: list[str] = field(default_factory=list)
    timed_out: bool = False
    flooded: bool = False
    supervisor_lost: bool = False
    oom_killed: bool = False
    stopped_after_rank: int | None = None
    memory_note: str | None = None
    """The sandbox's memory limit is below nproc x the per-rank memory (the host's fair share): an
    operator's matter, shown in a verdict only when the job ran out of memory."""


def run_job(sandbox: Sandbox, job: dict[str, Any], timeout_s: float, cap: int, flood: int) -> JobRaw:
    """Run ``job`` in a ready sandbox and gather the raw results. Never raises for anything the job does.

    The status pipe is written by the sandbox's supervisor only (runner/inside/supervisor.py closes it in
    every rank and keeps the ranks off /proc/1/fd), so its events are trusted; their fields are still checked.
    Every other byte comes from the job and counts against ``flood``: stdout, stderr and the stack-dump
    pipes.  A dump pipe is read as a stack dump only for ranks alive when the host asked for the dump (at
    the deadline, or when another rank failed), and only for what arrived after it was drained for that
    request: whatever the snippet wrote there itself is counted, then dropped.  When to dump, stop, kill
    and finish is :class:`~runner.jobwatch.JobWatch`'s to say.
    """
    nproc = int(job["nproc"])
    ranks = [
        RankRaw(r, StreamCapture(cap), StreamCapture(cap), StreamCapture(DUMP_CAP)) for r in range(nproc)
    ]
    raw = JobRaw(ranks=ranks, elapsed_s=0.0)
    pipes = _JobPipes(sandbox, ranks)
    waits = CpuWait(sandbox.cgroup) if sandbox.cgroup is not None and sandbox.cgroup.cpus > 0 else None
    if sandbox.cgroup is not None and sandbox.cgroup.memory_note:
        raw.memory_note = sandbox.cgroup.memory_note
    watch = JobWatch(timeout_s, nproc, time.monotonic(), waits.waited_s if waits is not None else None)
    try:
        os.write(sandbox.control, (json.dumps(job) + "\n").encode())
    except OSError:
        watch.supervisor_lost = True

    def on_event(event: dict[str, Any], now: float) -> None:
        if event.get("event") == "dumped":
            watch.dumped(now)
        if _record_exit(ranks, event, watch):
            pipes.request_dump()

    while True:
        now = time.monotonic()
        action = watch.step(
            now, streams_open=pipes.streams_open(), status_open=pipes.status_open, flooded=pipes.total > flood
        )
        if action == Action.FINISH:
            break
        if action == Action.KILL_SANDBOX:
            sandbox.kill()
        elif action == Action.DUMP:
            pipes.request_dump()
        elif action == Action.KILL_RANKS:
            pipes.command("kill")
        pipes.read(POLL_S, now, on_event)
    pipes.close()
    _finish(raw, watch, waits, sandbox, pipes.dumping)
    return raw


def _record_exit(ranks: list[RankRaw], event: dict[str, Any], watch: JobWatch) -> bool:
    """Record a rank's ``exit`` event (checked); True when the other ranks must dump to fail fast."""
    index = event.get("rank")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(ranks):
        return False
    rank = ranks[index]
    if event.get("event") != "exit" or rank.exited:
        return False
    rank.exited = True
    rank.exit_code = _bounded_int(event.get("exit_code"), 0, 255)
    rank.signal = _bounded_int(event.get("signal"), 1, 128)
    rank.exception = _exception_of(event.get("exception"))
    problem = event.get("report_problem")
    if isinstance(problem, str):
        rank.report_problem = problem[:200]
    failed = rank.signal is not None or rank.exit_code != 0
    rank.exit_order, fail_fast = watch.rank_exited(rank.rank, failed, time.monotonic())
    return fail_fast


def _finish(raw: JobRaw, watch: JobWatch, waits: CpuWait | None, sandbox: Sandbox, dumping: set[int]) -> None:
    """Copy the watch's outcome and the sandbox's accounting into ``raw``; mark stopped and dumped ranks."""
    raw.elapsed_s = time.monotonic() - watch.start
    raw.timed_out, raw.flooded, raw.supervisor_lost = watch.timed_out, watch.flooded, watch.supervisor_lost
    raw.stopped_after_rank = watch.stopped_after_rank
    if waits is not None:
        raw.cpu_s = waits.cpu_s()
        raw.waited_s = watch.credit
    raw.oom_killed = sandbox.cgroup is not None and sandbox.cgroup.oom_killed()
    if raw.stopped_after_rank is not None:
        for rank in raw.ranks:
            if rank.rank != raw.stopped_after_rank and rank.signal == 9:
                rank.stopped_by_runner = True
    for rank in raw.ranks:
        rank.dumped = rank.rank in dumping and (rank.stopped_by_runner or not rank.exited)


class _JobPipes:
    """The host's ends of one job's pipes: every rank's stdout, stderr and dump pipe, status and control."""

    def __init__(self, sandbox: Sandbox, ranks: list[RankRaw]) -> None:
        self.sandbox = sandbox
        self.ranks = ranks
        self.sel = selectors.DefaultSelector()
        self.streams: dict[int, StreamCapture] = {}
        self.dump_owner: dict[int, RankRaw] = {}
        for rank, pipes in zip(ranks, sandbox.ranks, strict=False):
            for fd, capture in ((pipes.out, rank.stdout), (pipes.err, rank.stderr), (pipes.dump, rank.dump)):
                self.streams[fd] = capture
                self.sel.register(fd, selectors.EVENT_READ, capture)
            self.dump_owner[pipes.dump] = rank
        self.sel.register(sandbox.status, selectors.EVENT_READ, None)
        self.status_open = True
        self.total = 0  # every byte the job wrote to its pipes, kept or not: the flood count
        self.dumping: set[int] = set()  # ranks whose dump pipe is read as a stack dump

    def streams_open(self) -> bool:
        """Whether any of the job's streams has not reached EOF yet."""
        return any(not c.eof for c in self.streams.values())

    def command(self, word: str) -> None:
        """Send the supervisor one command (``dump``, ``kill``); a supervisor gone is noticed elsewhere."""
        with contextlib.suppress(OSError):
            os.write(self.sandbox.control, word.encode() + b"\n")

    def request_dump(self) -> None:
        """Ask for the stacks of the ranks still running; what their dump pipes hold now is dropped."""
        live = [r for r in self.ranks if not r.exited]
        for rank, pipes in zip(self.ranks, self.sandbox.ranks, strict=False):
            if not rank.dump.eof:
                # Bytes already there were written by the snippet, not by faulthandler: counted, dropped.
                self.total += _drain(pipes.dump)
        self.dumping.clear()
        self.dumping.update(r.rank for r in live)
        self.command("dump")

    def read(self, timeout: float, now: float, on_event: Callable[[dict[str, Any], float], None]) -> None:
        """Read what is ready within ``timeout``: status events go to ``on_event``, output to its capture."""
        for key, _ in self.sel.select(timeout=timeout):
            fd = int(key.fd)
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if key.data is None:
                if chunk:
                    self.sandbox.status_buffer.extend(chunk)
                    for event in self.sandbox.pop_events():
                        on_event(event, now)
                else:
                    self.status_open = False
                    self.sel.unregister(fd)
                continue
            stream: StreamCapture = key.data
            if chunk:
                self.total += len(chunk)
                owner = self.dump_owner.get(fd)
                if owner is None or owner.rank in self.dumping:
                    stream.add(chunk)
            else:
                stream.eof = True
                self.sel.unregister(fd)

    def close(self) -> None:
        """Close the selector (the pipes themselves belong to the sandbox)."""
        self.sel.close()


def _drain(fd: int) -> int:
    """Read and drop whatever ``fd`` holds now (bounded); returns the byte count."""
    total = 0
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while total < DRAIN_MAX_BYTES and poller.poll(0):
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        total += len(chunk)
    return total


def _bounded_int(value: object, low: int, high: int) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    return None


def _exception_of(value: object) -> dict[str, Any] | None:
    """The supervisor's (already checked) exception description, checked again: shape, types, sizes."""
    if not isinstance(value, dict):
        return None
    kind, message = value.get("type"), value.get("message", "")
    if not isinstance(kind, str) or not isinstance(message, str):
        return None
    return {
        "type": kind[:200],
        "message": message[:1500],
        "line": _bounded_int(value.get("line"), 1, 10_000_000),
    }
