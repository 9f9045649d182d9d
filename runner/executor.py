"""Driving one job inside one sandbox: send it, collect every rank's output and exit, enforce the deadline."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import time
from dataclasses import dataclass, field
from typing import Any

from runner.sandbox import Sandbox

log = logging.getLogger(__name__)

# After the deadline: how long the ranks get to write their stack dumps, then how long we keep draining
# pipes after the kill.  Together with the kill itself they keep the verdict within timeout + 3 s.
DUMP_GRACE_S = 1.0
DRAIN_GRACE_S = 0.5
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
    stopped_by_runner: bool = False


@dataclass
class JobRaw:
    """The raw outcome of a job, before it is judged into a verdict."""

    ranks: list[RankRaw]
    elapsed_s: float
    timed_out: bool = False
    flooded: bool = False
    supervisor_lost: bool = False
    oom_killed: bool = False
    stopped_after_rank: int | None = None


def run_job(sandbox: Sandbox, job: dict[str, Any], timeout_s: float, cap: int, flood: int) -> JobRaw:
    """Run ``job`` in a ready sandbox and gather the raw results. Never raises for anything the job does.

    The status pipe is written by the sandbox's supervisor only (runner/bootstrap.py closes it in every
    rank and keeps the ranks off /proc/1/fd), so its events, exit codes included, are trusted here.
    """
    nproc = int(job["nproc"])
    ranks = [
        RankRaw(r, StreamCapture(cap), StreamCapture(cap), StreamCapture(64 * 1024)) for r in range(nproc)
    ]
    raw = JobRaw(ranks=ranks, elapsed_s=0.0)
    sel = selectors.DefaultSelector()
    streams: dict[int, StreamCapture] = {}
    for rank, pipes in zip(ranks, sandbox.ranks, strict=False):
        for fd, capture in ((pipes.out, rank.stdout), (pipes.err, rank.stderr), (pipes.dump, rank.dump)):
            streams[fd] = capture
            sel.register(fd, selectors.EVENT_READ, capture)
    sel.register(sandbox.status, selectors.EVENT_READ, None)
    status_open = True

    start = time.monotonic()
    deadline = start + timeout_s
    try:
        os.write(sandbox.control, (json.dumps(job) + "\n").encode())
    except OSError:
        raw.supervisor_lost = True

    exits = 0
    all_exited_at: float | None = None
    dump_sent_at: float | None = None
    killed_at: float | None = None
    output_total = 0

    def handle(event: dict[str, Any]) -> None:
        nonlocal exits, all_exited_at
        kind = event.get("event")
        rank_index = event.get("rank")
        if kind == "stopping":
            after = event.get("after_rank")
            raw.stopped_after_rank = after if isinstance(after, int) else None
            return
        if not isinstance(rank_index, int) or not 0 <= rank_index < nproc:
            return
        rank = ranks[rank_index]
        if kind == "exit" and not rank.exited:
            rank.exited = True
            rank.exit_code = _int_or_none(event.get("exit_code"))
            rank.signal = _int_or_none(event.get("signal"))
            rank.exit_order = exits
            exits += 1
            if exits == nproc:
                all_exited_at = time.monotonic()
            exception = event.get("exception")
            if isinstance(exception, dict):
                rank.exception = {
                    "type": str(exception.get("type", "Exception")),
                    "message": str(exception.get("message", "")),
                    "line": _int_or_none(exception.get("line")),
                }

    while True:
        now = time.monotonic()
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
        elif now >= deadline and dump_sent_at is None:
            raw.timed_out = True
            dump_sent_at = now
            with contextlib.suppress(OSError):
                os.write(sandbox.control, b"dump\n")
        elif dump_sent_at is not None and now - dump_sent_at > DUMP_GRACE_S:
            sandbox.kill()
            killed_at = now
        elif output_total > flood:
            raw.flooded = True
            sandbox.kill()
            killed_at = now

        wait = 0.05
        for key, _ in sel.select(timeout=wait):
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
                            dump_sent_at = min(dump_sent_at or now, now - DUMP_GRACE_S)
                        handle(event)
                else:
                    status_open = False
                    sel.unregister(fd)
                continue
            stream: StreamCapture = key.data
            if chunk:
                stream.add(chunk)
                if _dump_of(ranks, stream) is None:
                    output_total += len(chunk)
            else:
                stream.eof = True
                sel.unregister(fd)
    sel.close()
    raw.elapsed_s = time.monotonic() - start
    raw.oom_killed = sandbox.cgroup is not None and sandbox.cgroup.oom_killed()
    if raw.stopped_after_rank is not None:
        for rank in ranks:
            if rank.rank != raw.stopped_after_rank and rank.signal == 9:
                rank.stopped_by_runner = True
    return raw


def _dump_of(ranks: list[RankRaw], capture: StreamCapture) -> StreamCapture | None:
    for rank in ranks:
        if rank.dump is capture:
            return capture
    return None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
