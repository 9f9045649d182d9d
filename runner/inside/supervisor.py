"""The sandbox's supervisor: the job's ranks forked and reaped, the host's commands answered; and ``main``."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
import time
import uuid
from typing import Any

from runner.inside.identity import become_rank_user, make_undumpable, setup_identity
from runner.inside.protocol import (
    EXCEPTION_MARKER,
    HINT_LIGHT,
    REPORT_MAX_READ,
    SNIPPET_NAME,
    emit,
    parse_report,
)
from runner.inside.ranks import FRESH_RANK_FLAG, exec_fresh_rank, fresh_rank_main, wait_settled
from runner.inside.snippet import run_rank
from runner.inside.warmup import cuda_runtime_untouched, keep_warm_up_finalizers_at_exit, warm_up

DUMP_MARKER = "### rankzero-dump"  # mirrored in runner/service.py
MAX_DUMPED_CHILDREN = 16


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (in this PID namespace), parents before children."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name is in parentheses and may contain anything: the fields follow the last ")".
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[1].isdigit():
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    queue = [pid]
    while queue and len(found) < 1000:
        children = sorted(parents.get(queue.pop(0), []))
        found += children
        queue += children
    return found


def _handles_sigusr1(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGUSR1 - 1)))
    except (OSError, ValueError, IndexError):
        pass
    return False


def _agent_store(port: int) -> Any:
    """The store torchrun's agent hosts for its workers (``TORCHELASTIC_USE_AGENT_STORE``)."""
    try:
        import torch.distributed as dist

        # torch.distributed.TCPStore is public (documented) but not re-exported for type checkers.
        return dist.TCPStore("localhost", port, is_master=True, wait_for_workers=False, multi_tenant=True)  # type: ignore[attr-defined]
    except Exception as exc:  # the ranks then fail to connect, and the verdict shows it
        print(f"rankzero: could not start the agent store on port {port}: {exc}", file=sys.stderr)
        return None


class Supervisor:
    """Forks the ranks of one job and reports on them."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.control_fd = int(spec["control_fd"])
        self.status_fd = int(spec["status_fd"])
        self.rank_fds: list[dict[str, int]] = spec["ranks"]
        self.workdir = str(spec.get("workdir", "/tmp"))  # noqa: S108 - the sandbox's private tmpfs
        self.pids: dict[int, int] = {}
        self.reports: dict[int, int] = {}  # rank -> read end of its exception report pipe
        self.lock = threading.Lock()
        self.live: set[int] = set()  # rank pids not reaped yet
        # rank -> the supervisor's own copy of the rank's dump pipe, for the markers that tell the host
        # which process each stack dump comes from; closed when the rank is reaped.
        self.dump_fds: dict[int, int] = {}
        self.store: Any = None  # the agent store of a ddp job (kept alive until the supervisor exits)
        self.pending = b""  # what the control pipe held before wait_job (the host's hint, maybe the job)

    def hinted_light(self) -> bool:
        """Whether the host said, while this sandbox warmed, that its waiting job needs no compiler stack."""
        if not self.pending.startswith(HINT_LIGHT):
            readable, _, _ = select.select([self.control_fd], [], [], 0)
            if readable:
                self.pending += os.read(self.control_fd, 1 << 20)
        return self.pending.startswith(HINT_LIGHT)

    def wait_job(self) -> dict[str, Any] | None:
        """Block until the host sends the job (one JSON line); None if the host went away.

        The host's light hint may come first, read or not by ``hinted_light`` (it can arrive after the
        warm-up's last look): it is never taken for the job.
        """
        buf = self.pending
        while True:
            buf = buf.removeprefix(HINT_LIGHT)
            if b"\n" in buf:
                break
            chunk = os.read(self.control_fd, 1 << 20)
            if not chunk:
                return None
            buf += chunk
        line, _, rest = buf.partition(b"\n")
        del rest  # the host sends exactly one job per sandbox
        job: dict[str, Any] = json.loads(line)
        return job

    def start(self, job: dict[str, Any]) -> None:
        """Write the snippet and fork one process per rank."""
        path = os.path.join(self.workdir, SNIPPET_NAME)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(job["code"])
        os.chdir(self.workdir)
        sys.stdout.flush()
        sys.stderr.flush()
        nproc = int(job["nproc"])
        ddp = job["mode"] == "ddp"
        # Ranks forked from this one interpreter share its string hash seed; torchrun's are separate
        # interpreters with one each.  A snippet that can see the difference (the host decides: it builds
        # sets or hashes) gets ranks that are fresh interpreters (see exec_fresh_rank).
        fresh = ddp and nproc > 1 and bool(job.get("fresh_interpreters"))
        if ddp:
            job["run_id"] = str(uuid.uuid4())
        report_pipes = [os.pipe() for _ in range(nproc)]
        go_r, go_w = os.pipe() if ddp else (-1, -1)
        # Fresh ranks say on this pipe when they are non-dumpable again (an exec makes a process dumpable):
        # no rank is let go before every sibling's pipes are out of its reach through /proc.
        settled_r, settled_w = os.pipe() if fresh else (-1, -1)
        all_fds = {fd for fds in self.rank_fds for fd in fds.values()}
        all_fds |= {fd for pair in report_pipes for fd in pair}
        all_fds |= {fd for fd in (settled_r, settled_w) if fd >= 0}
        for rank in range(nproc):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    go = (go_r, go_w)
                    code = self._rank_child(
                        job, rank, path, report_pipes[rank][1], all_fds, go, settled_w, fresh
                    )
                finally:
                    os._exit(code)
            self.pids[pid] = rank
            with self.lock:
                self.live.add(pid)
        # Copied only once every rank is forked: a copy made earlier would be inherited by the ranks forked
        # after it, and one rank could then write into another's dump pipe.  Nothing is reaped before
        # start() returns, so every rank still has its pipe here.
        for rank in range(nproc):
            self.dump_fds[rank] = os.dup(self.rank_fds[rank]["dump"])
        # The supervisor keeps no rank output pipe open: the host sees EOF once the ranks (and their
        # children) exit.  Its dump copies are closed as each rank is reaped.
        for fd in {fd for fds in self.rank_fds for fd in fds.values()}:
            os.close(fd)
        if fresh:
            os.close(settled_w)
            wait_settled(settled_r, nproc)
        if ddp:
            os.close(go_r)
            self.store = _agent_store(int(job.get("master_port", 29500)))
            os.close(go_w)  # the ranks start now
        for rank, (report_r, report_w) in enumerate(report_pipes):
            os.close(report_w)
            os.set_blocking(report_r, False)
            self.reports[rank] = report_r
        emit(self.status_fd, {"event": "started", "pids": {str(r): p for p, r in self.pids.items()}})

    def _rank_child(
        self,
        job: dict[str, Any],
        rank: int,
        path: str,
        report_w: int,
        all_fds: set[int],
        go: tuple[int, int],
        settled_w: int,
        fresh: bool,
    ) -> int:
        """In a rank just forked: keep its own pipes only, leave the supervisor's uid, run; its exit code."""
        ddp = job["mode"] == "ddp"
        go_r, go_w = go
        mine = self.rank_fds[rank]
        for fd in all_fds - {*mine.values(), report_w, settled_w}:
            os.close(fd)
        # The status and control pipes are the supervisor's alone (see the package docstring).
        os.close(self.control_fd)
        os.close(self.status_fd)
        if ddp:
            os.close(go_w)
        os.set_blocking(report_w, False)
        # Every rank, whatever the count the job asked of this sandbox, leaves the
        # supervisor's uid before it runs a line of the snippet.
        if isinstance(self.spec.get("userns"), dict):
            become_rank_user()
        if fresh:
            with contextlib.suppress(OSError):  # cannot exec: the rank runs warm, as before
                exec_fresh_rank(job, rank, mine, report_w, path, go_r, settled_w)
            with contextlib.suppress(OSError):
                os.write(settled_w, b"1")
            os.close(settled_w)
        return run_rank(job, rank, mine, report_w, path, go_r if ddp else None)

    def reap_forever(self) -> None:
        """Reap ranks and any orphan that was reparented to us (we may be PID 1)."""
        live = set(self.pids)
        while live:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid not in live:
                continue
            live.discard(pid)
            rank = self.pids[pid]
            with self.lock:
                dump_fd = self.dump_fds.pop(rank, None)
            if dump_fd is not None:
                os.close(dump_fd)
            exit_code = os.waitstatus_to_exitcode(status)
            event: dict[str, Any] = {
                "event": "exit",
                "rank": rank,
                "exit_code": None,
                "signal": None,
                EXCEPTION_MARKER: None,
            }
            if exit_code < 0:
                event["signal"] = -exit_code
            else:
                event["exit_code"] = exit_code
            if exit_code > 0:
                # Only a rank that really failed gets an exception; what it reported cannot change that.
                event[EXCEPTION_MARKER], problem = self.read_report(rank)
                if problem:
                    event["report_problem"] = problem
            with self.lock:
                self.live.discard(pid)
            # The host decides what follows a failure (dump the others' stacks, then "kill"): it alone
            # knows which dump-pipe bytes came after its own request.
            emit(self.status_fd, event)
        emit(self.status_fd, {"event": "done"})

    def read_report(self, rank: int) -> tuple[dict[str, Any] | None, str | None]:
        """``(description, problem)``: the last exception description in ``rank``'s report pipe, checked.

        The rank writes its description right before it exits, so it is already in the pipe when waitpid
        returns.  The snippet holds the write end too and may have written anything there first (deep
        JSON, a 5000-digit line number, megabytes): only the last line counts, it is parsed only when
        short, and every field is checked.  Nothing in it can raise here; an unusable report gives
        ``(None, why)``, which the verdict shows as an unreadable report.
        """
        fd = self.reports.pop(rank, None)
        if fd is None:
            return None, None
        data = b""
        with contextlib.suppress(OSError):  # EAGAIN: nothing (more) to read
            while len(data) < REPORT_MAX_READ:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        os.close(fd)
        lines = data.splitlines()
        if not lines:
            return None, None
        return parse_report(lines[-1])

    def dump(self, pids: set[int]) -> None:
        """Ask ranks, and the processes they started, to write their Python stacks to their dump pipes.

        Each dump is preceded by a marker line naming the process (``DUMP_MARKER``), and the processes of
        one rank are signalled one after the other, so that their dumps do not interleave.  Only processes
        that handle SIGUSR1 are signalled (the ranks, and the children the runner taught to dump): for any
        other the signal's default action would kill it.
        """
        groups = []
        for pid in pids:
            rank = self.pids.get(pid)
            if rank is not None:
                groups.append((rank, [pid, *_descendants(pid)[:MAX_DUMPED_CHILDREN]]))
        for wave in range(max((len(g) for _, g in groups), default=0)):
            for rank, members in groups:
                if wave >= len(members) or not _handles_sigusr1(members[wave]):
                    continue
                with self.lock:
                    fd = self.dump_fds.get(rank)
                if fd is None:
                    continue
                role = "rank" if wave == 0 else "child"
                with contextlib.suppress(OSError):
                    os.write(fd, f"\n{DUMP_MARKER} {role} pid={members[wave]}\n".encode())
                with contextlib.suppress(ProcessLookupError):
                    os.kill(members[wave], signal.SIGUSR1)
            if wave + 1 < max(len(g) for _, g in groups):
                time.sleep(0.03)
        # faulthandler writes from inside the signal handler; give it a moment before anything is killed.
        time.sleep(0.3)

    def serve_commands(self) -> None:
        """Answer the host's commands until the control pipe closes."""
        while True:
            data = os.read(self.control_fd, 4096)
            if not data:
                return
            for word in data.decode(errors="replace").split():
                with self.lock:
                    live = set(self.live)
                if word == "dump":
                    # Only ranks still running: a rank that exited has no stack, whatever its pipe holds.
                    self.dump(live)
                    emit(self.status_fd, {"event": "dumped"})
                elif word == "kill":
                    for pid in live:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """Entry point of the sandbox: ``__main__.py SPEC_JSON`` (or ``__main__.py --fresh-rank FD``)."""
    if len(argv) == 3 and argv[1] == FRESH_RANK_FLAG:
        code = 1
        try:
            code = fresh_rank_main(int(argv[2]))
        finally:
            os._exit(code)  # as a forked rank leaves (its exit hooks ran in run_rank)
    spec: dict[str, Any] = json.loads(argv[1])
    # As PID 1 a default SIGINT disposition is simply ignored; Python's KeyboardInterrupt handler is not.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    setup_identity(spec)
    make_undumpable()
    sup = Supervisor(spec)
    preload = spec.get("preload", "full")
    if preload:
        import torch  # noqa: F401 - the guard below replaces one of its functions while the warm-up runs

        with cuda_runtime_untouched(int(spec.get("gpus", 0))):
            whole = warm_up("full" if preload is True else str(preload), sup.hinted_light)
        if whole:
            # Only after a whole warm-up: a sandbox cut short (or started for a waiting job) has its job
            # waiting now, and torch's own few finalizers cost its ranks less than the 0.1 s scan.
            keep_warm_up_finalizers_at_exit()
    emit(sup.status_fd, {"event": "ready", "pid": os.getpid()})
    job = sup.wait_job()
    if job is None:
        return 0
    job["nproc"] = min(int(job["nproc"]), len(sup.rank_fds))
    sup.start(job)
    threading.Thread(target=sup.serve_commands, daemon=True).start()
    sup.reap_forever()
    return 0
