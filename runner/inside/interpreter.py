"""How a forked process starts and ends as a new interpreter would: fresh seeds, exit codes, exit hooks."""

from __future__ import annotations

import contextlib
import sys
import threading


def reseed() -> None:
    """Seed torch's and numpy's default generators afresh, as a new interpreter does.

    A forked process shares its parent's generator states; Python's ``random`` reseeds itself after a
    fork, torch and numpy do not.  Under torchrun every worker is a new interpreter with a seed of its own
    (torch picks a non-deterministic one), so ranks and spawned processes forked from a warm supervisor
    must not all draw the same "random" numbers.  Only the CPU generator: CUDA's are seeded when CUDA
    starts, after the fork.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        with contextlib.suppress(Exception):
            numpy.random.seed()


def system_exit_code(stop: SystemExit) -> int:
    """The exit code the interpreter gives a ``SystemExit`` (its message printed, as Python prints it)."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code & 0xFF
    print(stop.code, file=sys.stderr)
    return 1


def run_exit_hooks() -> None:
    """Run the interpreter's shutdown steps (thread joins, atexit) in a process leaving by ``os._exit``."""
    # A forked rank leaves through os._exit (the supervisor's own shutdown must not run twice), so the
    # normal interpreter shutdown steps a snippet may rely on are run here by hand.
    import atexit

    shutdown = getattr(threading, "_shutdown", None)
    try:
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()
    except BaseException:  # noqa: S110 - a failing exit hook must not hide the snippet's result
        pass
