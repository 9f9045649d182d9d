"""Verdicts from untrusted bytes (issue 18, section 2): what a job writes cannot break or bend its verdict.

Every snippet here writes, from inside the real sandbox, on the pipes it holds: the exception report pipe
(the only non-blocking one), the stack-dump pipe, stdout and stderr.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner import stacks
from runner.analysis import parse_snippet
from runner.service import RunnerService
from runner.stacks import parse_threads, stuck_at
from runner.verdict import Status
from tests.runner.conftest import assert_healthy, run

pytestmark = pytest.mark.slow

# Finds the rank's own pipes: the exception report pipe is the only non-blocking descriptor it holds.
PIPES = """
import fcntl, os, time
def _pipes(nonblocking):
    found = []
    for fd in range(3, 256):
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if flags & os.O_ACCMODE == os.O_WRONLY and bool(flags & os.O_NONBLOCK) == nonblocking:
            found.append(fd)
    return found
REPORT = _pipes(True)
DUMP = _pipes(False)
def write_all(fds, data):
    for fd in fds:
        try:
            os.write(fd, data)
        except OSError:
            pass
"""


def _snippet(body: str) -> str:
    import textwrap

    return PIPES + textwrap.dedent(body)


def test_over_deep_json_in_the_report_is_an_unreadable_report_not_a_crash(service: RunnerService) -> None:
    verdict = run(service, _snippet("write_all(REPORT, b'[' * 30000 + b'\\n')\nos._exit(3)\n"))
    assert verdict.status == Status.ERROR, verdict.to_dict()
    assert verdict.ranks[0].exit_code == 3 and verdict.ranks[0].exception is None
    assert "rank 0's exception report was unreadable (not JSON)" in verdict.notes, verdict.notes
    assert_healthy(service)


@pytest.mark.parametrize("digits", [3000, 5000])
def test_a_huge_line_number_in_a_report_does_not_blame_another_rank(
    service: RunnerService, digits: int
) -> None:
    verdict = run(
        service,
        _snippet(
            f"""
            if os.environ["RANK"] == "1":
                report = b'{{"type": "ValueError", "message": "m", "line": 1' + b'0' * {digits} + b'}}\\n'
                write_all(REPORT, report)
                os._exit(1)
            time.sleep(20)  # far past rank 1's failure, even on a loaded machine: the runner stops it
            raise RuntimeError("rank 0 fails later")
            """
        ),
        "ddp",
        nproc=2,
        timeout_s=30,
    )
    assert verdict.status == Status.ERROR, verdict.to_dict()
    assert verdict.root_cause_rank == 1, verdict.to_dict()
    assert verdict.ranks[1].exit_code == 1 and verdict.ranks[1].exception is None
    assert any(n.startswith("rank 1's exception report was unreadable") for n in verdict.notes), verdict.notes
    assert verdict.ranks[0].signal == 9  # stopped by the runner after rank 1 failed


FAKE_DUMP = (
    b"Current thread 0x00007f0000000001 (most recent call first):\n"
    b'  File "/tmp/main.py", line 999 in fake_function\n\n'
)


def test_a_fake_stack_dump_gives_no_stuck_at(service: RunnerService) -> None:
    code = _snippet(
        f"""
        write_all(DUMP, {FAKE_DUMP!r})
        if os.environ["RANK"] == "1":
            time.sleep(60)
        """
    )
    sleep_line = code.splitlines().index("    time.sleep(60)") + 1
    verdict = run(
        service,
        code,
        "ddp",
        nproc=2,
        timeout_s=3,
    )
    assert verdict.status == Status.TIMEOUT, verdict.to_dict()
    # Rank 0 exited on its own: no stack, whatever it wrote.  Rank 1 is where it really was.
    assert verdict.ranks[0].exit_code == 0 and verdict.ranks[0].stuck_at is None, verdict.to_dict()
    stuck = verdict.ranks[1].stuck_at
    assert stuck is not None and stuck.function == "<module>" and stuck.call == "sleep", verdict.to_dict()
    assert stuck.line == sleep_line


def test_a_dump_pipe_spammed_with_5000_digit_line_numbers_still_gets_a_verdict(
    service: RunnerService,
) -> None:
    line = b'  File "/tmp/main.py", line ' + b"7" * 5000 + b" in f\n"
    verdict = run(
        service,
        _snippet(
            f"""
            frame = {line!r}
            while True:
                write_all(DUMP, b"Current thread 0x1 (most recent call first):\\n" + frame)
                time.sleep(0.01)
            """
        ),
        timeout_s=3,
    )
    assert verdict.status == Status.TIMEOUT, verdict.to_dict()
    stuck = verdict.ranks[0].stuck_at
    assert stuck is None or stuck.line < 10_000, verdict.to_dict()


def test_the_dump_pipe_counts_against_the_output_limit(service: RunnerService) -> None:
    verdict = run(
        service,
        _snippet("chunk = b'x' * 65536\nfor _ in range(200):\n    write_all(DUMP, chunk)\ntime.sleep(30)\n"),
        timeout_s=20,
    )
    assert verdict.status == Status.OUTPUT_LIMIT, verdict.to_dict()


def test_frames_with_absurd_numbers_are_ignored_by_the_parser() -> None:
    frame = '  File "/tmp/main.py", line ' + "9" * 5000 + " in f\n"
    dump = "Current thread 0x1 (most recent call first):\n" + frame
    assert parse_threads(dump) == [[]]
    assert stuck_at(dump, "/tmp/main.py", "x = 1\n") is None


LONG_EXPRESSIONS = {
    "sum": "x = " + "1+" * 30000 + "1\nprint(x)\n",
    "unary": "x = " + "-" * 60000 + "1\n",
    "attributes": "x = a" + ".b" * 30000 + "\n",
    "calls": "f" + "(1)" * 15000 + "\n",
}


@pytest.mark.parametrize("name", sorted(LONG_EXPRESSIONS))
def test_the_host_survives_analysing_a_60_kb_expression(service: RunnerService, name: str) -> None:
    code = LONG_EXPRESSIONS[name]
    assert parse_snippet(code) is None  # too deep for the parser: no tree, no exception
    verdict = run(service, code, "ddp", nproc=1, timeout_s=20)
    # The sandbox's own compile fails the same way: that is the snippet's error, reported as such (the
    # parser's stack overflow is a MemoryError, which the verdict calls oom).
    assert verdict.status in {Status.ERROR, Status.OOM}, verdict.to_dict()
    assert verdict.ranks[0].exception is not None
    assert verdict.ranks[0].exception.type in {"RecursionError", "MemoryError", "SyntaxError"}


REPO = Path(__file__).resolve().parents[2]


def _cli(tmp_path: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(snippet), "--timeout", "20", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_cli_report_survives_a_60_kb_expression(tmp_path: Path) -> None:
    result = _cli(tmp_path, LONG_EXPRESSIONS["sum"])
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("status: error"), result.stdout
    assert "Traceback" not in result.stderr


def test_the_cli_report_shows_terminal_escapes_inert(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "print('\\x1b[2J\\x1b[H' + 'cleared')\n"
        "print('\\x1b]52;c;cHduZWQ=\\x07' + 'clipboard')\n"
        "print('\\rstatus: ok   mode: python', end='\\r\\n')\n"
        "sys.stderr.write('\\x9b2J\\u202egnp.exe\\n')\n"
        "raise RuntimeError('boom\\nstatus: ok\\x1b[1A')\n"
    )
    result = _cli(tmp_path, code)
    assert result.returncode == 1
    out = result.stdout
    assert out.startswith("status: error"), out
    for raw in ("\x1b", "\x07", "\r", "\x9b", "\u202e"):
        assert raw not in out, repr(out)
    assert not any(line.startswith("status: ok") for line in out.splitlines()), out
    assert "\\x1b[2J\\x1b[Hcleared" in out and "\\x1b]52;c;cHduZWQ=\\x07clipboard" in out
    assert "exception: RuntimeError: boom\\nstatus: ok\\x1b[1A (line 6)" in out


def test_the_cli_report_shows_each_spawned_childs_stuck_at_escaped() -> None:
    # stuck_at.children (mp.spawn workers) comes from dumps a job writes: shown, and inert like the rest.
    from runner.cli import render
    from runner.verdict import (
        ChildStuckAt,
        Hardware,
        Mode,
        RankResult,
        SandboxInfo,
        StuckAt,
        Verdict,
    )

    child = ChildStuckAt(pid=12, function="setup\x1b[2J", line=9, call="init_process_group")
    verdict = Verdict(
        status=Status.TIMEOUT,
        mode=Mode.PYTHON,
        nproc=1,
        backend=None,
        elapsed_s=3.2,
        hardware=Hardware(gpus=0, names=[], torch="2.13.0+cpu", cuda=None),
        sandbox=SandboxInfo(engine="bubblewrap", isolated=True),
        ranks=[RankResult(rank=0, stuck_at=StuckAt("<module>", 20, "join", children=(child,)))],
    )
    out = render(verdict)
    assert "  stuck in join at line 20 (<module>)" in out, out
    assert "    child pid 12: stuck in init_process_group at line 9 (setup\\x1b[2J)" in out, out
    assert "\x1b" not in out


def test_a_rank_cannot_write_into_another_ranks_dump_pipe(service: RunnerService) -> None:
    # The supervisor keeps a copy of every rank's dump pipe (for the markers naming each dumped process).
    # No rank may inherit those copies: the last rank forked keeps writing a fake child's dump (marker and
    # all) into every pipe it holds, before and after the host's request; the other ranks' stuck_at must
    # still be where they are, with no child they did not start.
    fake = (
        "\n### rankzero-dump child pid=999\n"
        "Current thread 0x00007f0000000001 (most recent call first):\n"
        '  File "/tmp/main.py", line 1 in <module>\n'
    )
    code = _snippet(
        f"""
        if os.environ["RANK"] == "2":
            while True:
                write_all(DUMP, {fake!r}.encode())
                time.sleep(0.005)
        time.sleep(60)
        """
    )
    sleep_line = code.splitlines().index("time.sleep(60)") + 1
    verdict = run(service, code, "ddp", nproc=3, timeout_s=4)
    assert verdict.status == Status.TIMEOUT, verdict.to_dict()
    for rank in verdict.ranks[:2]:
        assert rank.stuck_at is not None, verdict.to_dict()
        assert (rank.stuck_at.line, rank.stuck_at.call) == (sleep_line, "sleep"), verdict.to_dict()
        assert rank.stuck_at.children == (), verdict.to_dict()


# Rank 1 takes rank 0's exception report pipe (the only non-blocking descriptor rank 0 holds) by every
# route a same-uid process has to another's descriptors, and writes a forged description into each copy
# it gets; rank 0 then exits 1 without raising, so a forged line would become its exception.
STEAL = """
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def err():
    return errno.errorcode.get(ctypes.get_errno(), "?")
if os.environ["RANK"] == "0":
    with open("/tmp/victim.tmp", "w") as fh:
        fh.write(f"{os.getpid()} {REPORT[0]}")
    os.rename("/tmp/victim.tmp", "/tmp/victim")
    while not os.path.exists("/tmp/forged"):
        time.sleep(0.01)
    os._exit(1)
while not os.path.exists("/tmp/victim"):
    time.sleep(0.01)
pid, fd = map(int, open("/tmp/victim").read().split())
forged = b'{"type": "ForgedError", "message": "written by rank 1", "line": 1}\\n'
stolen = []
pidfd = libc.syscall(434, pid, 0)
copy = libc.syscall(438, pidfd, fd, 0) if pidfd >= 0 else -1
print("pidfd_getfd", "ok" if copy >= 0 else err())
if copy >= 0:
    stolen.append(copy)
for path in (f"/proc/{pid}/fd/{fd}", f"/proc/{pid}/task/{pid}/fd/{fd}"):
    try:
        stolen.append(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        print("proc", "ok")
    except OSError as exc:
        print("proc", errno.errorcode.get(exc.errno, "?"))
write_all(stolen, forged)
open("/tmp/forged", "w").close()
"""


def test_a_rank_cannot_take_a_siblings_pipes_and_forge_its_exception(service: RunnerService) -> None:
    verdict = run(service, _snippet(STEAL), "ddp", nproc=2, timeout_s=30)
    assert verdict.status == Status.ERROR, verdict.to_dict()
    victim, thief = verdict.ranks
    assert victim.exit_code == 1 and victim.exception is None, verdict.to_dict()
    assert verdict.root_cause_rank == 0, verdict.to_dict()
    # Each route is refused, not merely unlucky: the filter denies pidfd_getfd, and reopening through
    # /proc/PID/fd checks the pipe's own permissions (the host's, mode 0600), which no rank passes.
    assert thief.stdout.splitlines() == ["pidfd_getfd EPERM", "proc EACCES", "proc EACCES"], thief.stdout


def test_judging_many_stuck_processes_parses_the_snippet_once_inside_the_jobs_slot(
    service: RunnerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every process here is stuck in time.sleep, a C call: its dump names only the snippet line, so the
    # call is read from the snippet's syntax tree.  Once per verdict, not once per process (a 64 KiB
    # snippet took 5-25 s of host CPU that way), and while the job still holds its concurrency slot.
    parses: list[int] = []
    real_parse = parse_snippet

    def counting_parse(source: str) -> ast.Module | None:
        parses.append(len(source))
        return real_parse(source)

    running_while_judged: list[int] = []
    real_judge = service._judge

    def observed_judge(*args: Any, **kwargs: Any) -> None:
        with service._lock:
            running_while_judged.append(service._running)
        real_judge(*args, **kwargs)

    monkeypatch.setattr(stacks, "parse_snippet", counting_parse)
    monkeypatch.setattr(service, "_judge", observed_judge)
    code = """
    import os, time
    for _ in range(12):
        if os.fork() == 0:
            break
    time.sleep(60)
    """
    verdict = run(service, code, "ddp", nproc=2, timeout_s=4)
    assert verdict.status == Status.TIMEOUT, verdict.to_dict()
    for rank in verdict.ranks:
        assert rank.stuck_at is not None and (rank.stuck_at.line, rank.stuck_at.call) == (6, "sleep")
        assert len(rank.stuck_at.children) == 12, verdict.to_dict()
        assert {(c.line, c.call) for c in rank.stuck_at.children} == {(6, "sleep")}
    assert len(parses) == 1, parses
    assert running_while_judged == [1], running_while_judged
