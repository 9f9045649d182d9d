"""Reading faulthandler stack dumps: where a stopped rank's user code was, and what it was blocked in."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from runner.analysis import parse_snippet
from runner.verdict import StuckAt

# The dump pipe is written by the job: everything here is bounded (a 5000-digit line number once made
# int() raise in the host).  faulthandler itself writes at most 100 frames, names cut at 500 characters.
DUMP_MAX_CHARS = 64 * 1024
_FRAME = re.compile(r'^\s*File "(?P<file>.{0,4096})", line (?P<line>\d{1,7}) in (?P<func>\S{1,500})$')
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]{1,16}")

# Frames that only forward a call (decorators, nn.Module plumbing); the interesting name is below them.
_FORWARDERS = frozenset(
    {"wrapper", "inner", "_fn", "decorate_context", "_wrapped_call_impl", "_call_impl", "__call__"}
)


@dataclass(frozen=True)
class Frame:
    """One frame of a dump, most recent first."""

    file: str
    line: int
    function: str


def parse_threads(dump: str) -> list[list[Frame]]:
    """Split a faulthandler dump into threads, each a list of frames (most recent call first)."""
    threads: list[list[Frame]] = []
    for raw in dump[:DUMP_MAX_CHARS].splitlines():
        if _THREAD.match(raw):
            threads.append([])
            continue
        match = _FRAME.match(raw)
        if match and threads:
            threads[-1].append(Frame(match["file"], int(match["line"]), match["func"]))
    return threads


def returned_from_spawn_target(dump: str) -> bool:
    """Whether a thread of this (child's) dump is in ``mp.spawn``'s wrapper with the target already returned.

    ``torch.multiprocessing.spawn._wrap`` calls the worker function; a thread whose innermost frame is
    ``_wrap`` itself is no longer in the function: it is freeing the function's objects (or its frame).
    A process stuck there for the whole deadline is stuck in a destructor, not in the snippet's code.
    """
    for frames in parse_threads(dump):
        if (
            len(frames) > 1
            and frames[0].function == "_wrap"
            and frames[0].file.endswith("torch/multiprocessing/spawn.py")
            and frames[1].file.endswith("multiprocessing/process.py")  # called by Process.run
        ):
            return True
    return False


def _call_on_line(source: str, line: int) -> str | None:
    """Name of the outermost call written on ``line`` of the snippet (for calls into C, e.g. sleep)."""
    tree = parse_snippet(source)
    if tree is None:
        return None
    best: ast.Call | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or node.lineno):
            # ast.walk is breadth-first: the first match is the outermost call around that line.
            best = node
            break
    if best is None:
        return None
    func = best.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def stuck_at(dump: str, snippet_path: str, source: str) -> StuckAt | None:
    """Diagnose one rank's dump: the innermost snippet frame and the library call below it."""
    candidates = []
    for frames in parse_threads(dump):
        user = [i for i, frame in enumerate(frames) if frame.file == snippet_path]
        if user:
            candidates.append((frames, user[0]))
    if not candidates:
        return None
    # The main thread is the one that runs the module body; prefer it over helper threads.
    candidates.sort(key=lambda c: not any(f.function == "<module>" for f in c[0]))
    frames, index = candidates[0]
    user_frame = frames[index]
    call = None
    for frame in reversed(frames[:index]):
        if frame.function not in _FORWARDERS and not frame.function.startswith("<"):
            call = frame.function
            break
    if call is None:
        call = _call_on_line(source, user_frame.line)
    return StuckAt(function=user_frame.function, line=user_frame.line, call=call)
