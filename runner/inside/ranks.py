"""Ranks that are fresh interpreters (``--fresh-rank``): the exec from a forked rank, and the new one."""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
import time
from typing import Any

from runner.inside.identity import make_undumpable
from runner.inside.snippet import run_rank

FRESH_RANK_FLAG = "--fresh-rank"
#: The script a fresh rank's interpreter runs: the sandbox's own entry point, wherever it is mounted.
ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")


SETTLE_TIMEOUT_S = 30.0


def wait_settled(settled_r: int, nproc: int) -> None:
    """Wait until every fresh rank said it is non-dumpable, or all of them are gone, or 30 s passed.

    A rank that dies first only costs the wait (the other ranks' end closes the pipe, the host's deadline
    bounds the rest).
    """
    got = 0
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while got < nproc:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([settled_r], [], [], left)[0]:
            break
        chunk = os.read(settled_r, nproc)
        if not chunk:
            break
        got += len(chunk)
    os.close(settled_r)


def exec_fresh_rank(
    job: dict[str, Any],
    rank: int,
    fds: dict[str, int],
    report_fd: int,
    path: str,
    go_fd: int,
    settled_fd: int,
) -> None:
    """Replace this forked rank with a new interpreter that runs ``run_rank`` itself (never returns).

    What differs between separate interpreters and forks of one is what torchrun's workers have and warm
    ranks lack: each its own string hash seed (so iterating a set of parameter names gives a different
    order per rank), its own addresses (``id()``), nothing imported.  The cost is a bare start: the
    snippet imports torch itself, as under torchrun.  The rank's pipes pass through the exec; its
    arguments travel in a memory file (a job's code may be 64 KiB, past what one argument may hold).
    """
    keep = [*fds.values(), report_fd, go_fd, settled_fd]
    payload = {
        "job": job,
        "rank": rank,
        "fds": fds,
        "report_fd": report_fd,
        "path": path,
        "go_fd": go_fd,
        "settled_fd": settled_fd,
    }
    memfd = os.memfd_create("rankzero-rank", 0)  # not CLOEXEC: the new interpreter reads it
    os.write(memfd, json.dumps(payload).encode())
    for fd in keep:
        os.set_inheritable(fd, True)
    flags = ["-s"] if sys.flags.no_user_site else []
    argv = [sys.executable, *flags, ENTRY, FRESH_RANK_FLAG, str(memfd)]
    os.execv(sys.executable, argv)  # noqa: S606 - the rank's own interpreter, no shell involved


def fresh_rank_main(memfd: int) -> int:
    """The new interpreter of ``exec_fresh_rank``: read the rank's arguments and run it."""
    # First of all, as the forked rank was: no sibling may open this rank's pipes through /proc/PID/fd
    # (an exec made the process dumpable again); then tell the supervisor, which lets no rank go before.
    make_undumpable()
    os.lseek(memfd, 0, os.SEEK_SET)
    with os.fdopen(memfd, "rb") as fh:
        args = json.loads(fh.read())
    settled = int(args["settled_fd"])
    with contextlib.suppress(OSError):
        os.write(settled, b"1")
    os.close(settled)
    return run_rank(
        args["job"], int(args["rank"]), args["fds"], int(args["report_fd"]), args["path"], args["go_fd"]
    )
