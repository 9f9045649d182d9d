"""Driving one job inside one sandbox: send it, collect every rank's output and exit, enforce the deadline."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import selectors
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.cgroups import JobCgroup
from runner.sandbox import Sandbox

log = logging.getLogger(__name__)

# After the deadline: how long the ranks get to write their stack dumps, then how long we keep draining
# pipes after the kill.  Together with the kill itself they keep the verdict within timeout + 3 s.
DUMP_GRACE_S = 1.0
DRAIN_GRACE_S = 0.5
# The deadline moves by the time a job waited for a CPU behind others, by at most its own timeout and at
# most MAX_EXTENSION_S: a job holds its slot for at most twice its timeout whatever happens.
MAX_EXTENSION_S = 60.0
# Waits shorter than this (an interpreter's start on a busy host) do not move the deadline.
MIN_CREDIT_S = 0.5
WAIT_SAMPLE_S = 0.25
MAX_THREADS_SAMPLED = 1024
# After a fail-fast "kill", how long the supervisor gets to stop its ranks before the sandbox is killed.
STOP_GRACE_S = 1.0
DUMP_CAP = 64 * 1024
DRAIN_MAX_BYTES = 1 << 20
# Once every rank has exited, a daemonised grandchild may still hold a pipe open: stop waiting for EOF.
LINGER_S = 0.3


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
    quota (waiting on itself is the job's own doing), and never more than the CPU it was entitled to and
    did not get (elapsed time less its CPU time divided by its quota): a job that had its whole quota was
    kept waiting only by its own threads.  A job that sleeps or blocks in a collective waits for nothing:
    its clock is the wall clock.
    """

    def __init__(self, cgroup: JobCgroup) -> None:
        self.cgroup = cgroup
        # The supervisor's threads existed before the job (importing torch in the pool): their earlier
        # waits are not the job's.
        self.base = {tid: delay for tid in cgroup.threads() if (delay := _run_delay(tid)) is not None}
        self.base_throttled = cgroup.throttled_s()
        self.base_cpu = cgroup.cpu_usage_s()
        self.worst: dict[int, float] = {}

    def waited_s(self, elapsed_s: float) -> float:
        """Seconds the job waited for a CPU behind other work, ``elapsed_s`` into the job."""
        for tid in self.cgroup.threads()[:MAX_THREADS_SAMPLED]:
            delay = _run_delay(tid)
            if delay is not None:
                self.worst[tid] = max(self.worst.get(tid, 0.0), delay - self.base.get(tid, 0.0))
        own_quota = self.cgroup.throttled_s() - self.base_throttled
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
    request: whatever the snippet wrote there itself is counted, then dropped.
    """
    nproc = int(job["nproc"])
    ranks = [
        RankRaw(r, StreamCapture(cap), StreamCapture(cap), StreamCapture(DUMP_CAP)) for r in range(nproc)
    ]
    raw = JobRaw(ranks=ranks, elapsed_s=0.0)
    sel = selectors.DefaultSelector()
    streams: dict[int, StreamCapture] = {}
    dump_owner: dict[int, RankRaw] = {}
    for rank, pipes in zip(ranks, sandbox.ranks, strict=False):
        for fd, capture in ((pipes.out, rank.stdout), (pipes.err, rank.stderr), (pipes.dump, rank.dump)):
            streams[fd] = capture
            sel.register(fd, selectors.EVENT_READ, capture)
        dump_owner[pipes.dump] = rank
    sel.register(sandbox.status, selectors.EVENT_READ, None)
    status_open = True

    waits = CpuWait(sandbox.cgroup) if sandbox.cgroup is not None and sandbox.cgroup.cpus > 0 else None
    if sandbox.cgroup is not None and sandbox.cgroup.memory_note:
        raw.memory_note = sandbox.cgroup.memory_note
    start = time.monotonic()
    deadline = start + timeout_s
    credit = 0.0  # how far the deadline moved for time spent waiting for a CPU behind other work
    sampled_at = 0.0
    try:
        os.write(sandbox.control, (json.dumps(job) + "\n").encode())
    except OSError:
        raw.supervisor_lost = True

    exits = 0
    all_exited_at: float | None = None
    dump_sent_at: float | None = None  # the deadline's dump
    stop_sent_at: float | None = None  # the fail-fast dump, after which the supervisor kills the ranks
    kill_sent = False
    killed_at: float | None = None
    output_total = 0
    dumping: set[int] = set()  # ranks whose dump pipe is read as a stack dump

    def command(word: str) -> None:
        with contextlib.suppress(OSError):
            os.write(sandbox.control, word.encode() + b"\n")

    def request_dump() -> None:
        nonlocal output_total
        live = [r for r in ranks if not r.exited]
        for rank, pipes in zip(ranks, sandbox.ranks, strict=False):
            if not rank.dump.eof:
                # Bytes already there were written by the snippet, not by faulthandler: counted, dropped.
                output_total += _drain(pipes.dump)
        dumping.clear()
        dumping.update(r.rank for r in live)
        command("dump")

    def handle(event: dict[str, Any]) -> None:
        nonlocal exits, all_exited_at, stop_sent_at
        kind = event.get("event")
        rank_index = event.get("rank")
        if not isinstance(rank_index, int) or isinstance(rank_index, bool) or not 0 <= rank_index < nproc:
            return
        rank = ranks[rank_index]
        if kind == "exit" and not rank.exited:
            rank.exited = True
            rank.exit_code = _bounded_int(event.get("exit_code"), 0, 255)
            rank.signal = _bounded_int(event.get("signal"), 1, 128)
            rank.exit_order = exits
            exits += 1
            if exits == nproc:
                all_exited_at = time.monotonic()
            rank.exception = _exception_of(event.get("exception"))
            problem = event.get("report_problem")
            if isinstance(problem, str):
                rank.report_problem = problem[:200]
            failed = rank.signal is not None or rank.exit_code != 0
            if failed and exits < nproc and stop_sent_at is None and dump_sent_at is None:
                # Fail fast: the others would wait for a collective timeout.  Dump them, then stop them.
                raw.stopped_after_rank = rank.rank
                stop_sent_at = time.monotonic()
                request_dump()

    while True:
        now = time.monotonic()
        if (
            waits is not None
            and dump_sent_at is None
            and now >= deadline + credit
            and now - sampled_at > WAIT_SAMPLE_S
        ):
            # Only once the wall deadline is near: a starved job is not blamed for its neighbours.
            waited = waits.waited_s(now - start)
            credit = min(waited, timeout_s, MAX_EXTENSION_S) if waited >= MIN_CREDIT_S else 0.0
            sampled_at = now
        open_streams = [c for c in streams.values() if not c.eof]
        if killed_at is not None:
            if not open_streams or now - killed_at > DRAIN_GRACE_S:
                break
        elif all_exited_at is not None and (not open_streams or now - all_exited_at > LINGER_S):
            break
        elif (not status_open or raw.supervisor_lost) and all_exited_at is None:
            # The supervisor is gone without reporting every rank: nothing more will come.
            raw.supervisor_lost = True
            sandbox.kill()
            killed_at = now
        elif output_total > flood:
            raw.flooded = True
            sandbox.kill()
            killed_at = now
        elif now >= deadline + credit and dump_sent_at is None:
            raw.timed_out = True
            dump_sent_at = now
            if stop_sent_at is None:  # else the fail-fast dump is under way: its stacks must not be drained
                request_dump()
        elif dump_sent_at is not None and now - dump_sent_at > DUMP_GRACE_S:
            sandbox.kill()
            killed_at = now
        elif stop_sent_at is not None and not kill_sent and now - stop_sent_at > DUMP_GRACE_S:
            kill_sent = True
            command("kill")
        elif kill_sent and stop_sent_at is not None and now - stop_sent_at > DUMP_GRACE_S + STOP_GRACE_S:
            sandbox.kill()  # the supervisor did not stop its ranks: the sandbox goes
            killed_at = now

        for key, _ in sel.select(timeout=0.05):
            fd = int(key.fd)
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if key.data is None:
                if chunk:
                    sandbox.status_buffer.extend(chunk)
                    for event in sandbox.pop_events():
                        if event.get("event") == "dumped":
                            # Stacks are written: stop now rather than after the whole grace.
                            if dump_sent_at is not None:
                                dump_sent_at = min(dump_sent_at, now - DUMP_GRACE_S)
                            elif stop_sent_at is not None and not kill_sent:
                                stop_sent_at = min(stop_sent_at, now - DUMP_GRACE_S)
                        handle(event)
                else:
                    status_open = False
                    sel.unregister(fd)
                continue
            stream: StreamCapture = key.data
            if chunk:
                output_total += len(chunk)
                owner = dump_owner.get(fd)
                if owner is None or owner.rank in dumping:
                    stream.add(chunk)
            else:
                stream.eof = True
                sel.unregister(fd)
    sel.close()
    raw.elapsed_s = time.monotonic() - start
    if waits is not None:
        raw.cpu_s = waits.cpu_s()
        raw.waited_s = credit
    raw.oom_killed = sandbox.cgroup is not None and sandbox.cgroup.oom_killed()
    if raw.stopped_after_rank is not None:
        for rank in ranks:
            if rank.rank != raw.stopped_after_rank and rank.signal == 9:
                rank.stopped_by_runner = True
    for rank in ranks:
        rank.dumped = rank.rank in dumping and (rank.stopped_by_runner or not rank.exited)
    return raw


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
