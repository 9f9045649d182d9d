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


class SnippetCalls:
    """The outermost call written on each snippet line, for one verdict: the snippet is parsed once.

    A timed-out job may have dozens of processes stuck in C calls (``sleep``, a lock), whose dumps name
    only a snippet line; the call is then read from the snippet's syntax tree.  Parsing the (up to 64 KiB,
    hostile) snippet once per process cost seconds of host CPU per verdict: here it is parsed at most once,
    the calls are listed once, and each distinct line is looked up once (at most one lookup per dumped
    process, each linear in the number of calls).
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._spans: list[tuple[int, int, str | None]] | None = None
        self._by_line: dict[int, str | None] = {}

    def _calls(self) -> list[tuple[int, int, str | None]]:
        if self._spans is None:
            tree = parse_snippet(self.source)
            spans = []
            # ast.walk is breadth-first: the first span around a line is the outermost call there.
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.Call):
                    spans.append((node.lineno, node.end_lineno or node.lineno, _call_name(node)))
            self._spans = spans
        return self._spans

    def on_line(self, line: int) -> str | None:
        """Name of the outermost call written on ``line`` (for calls into C, e.g. sleep), or None."""
        if line not in self._by_line:
            self._by_line[line] = next(
                (name for first, last, name in self._calls() if first <= line <= last), None
            )
        return self._by_line[line]


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def stuck_at(dump: str, snippet_path: str, source: str | SnippetCalls) -> StuckAt | None:
    """Diagnose one rank's dump: the innermost snippet frame and the library call below it.

    ``source`` is the snippet's text, or the verdict's :class:`SnippetCalls` (shared by all its dumps).
    """
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
        calls = source if isinstance(source, SnippetCalls) else SnippetCalls(source)
        call = calls.on_line(user_frame.line)
    return StuckAt(function=user_frame.function, line=user_frame.line, call=call)
