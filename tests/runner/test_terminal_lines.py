"""What a python-mode job prints comes out as in a terminal: whole lines, also from concurrent workers.

``print(a, b, c)`` is several writes; unbuffered, two ``mp.spawn`` workers printing at the same moment
splice each other's pieces mid-line (``'Rank  1  has data  Rank  0  has data  tensor(1.)tensor(1.)'``),
which a terminal never shows: there stdout and stderr are line-buffered.  ddp ranks stay unbuffered, as
torchrun starts its workers with ``-u``.
"""

from __future__ import annotations

import re

import pytest

from runner.service import RunnerService
from runner.verdict import Status
from tests.runner.conftest import run

WORKERS = 4
LINES = 150

# Every worker waits for the same instant, then prints many lines of several pieces each.
CONCURRENT_PRINTS = f"""
import time
import torch.multiprocessing as mp

def work(i, start):
    time.sleep(max(0.0, start - time.time()))
    for n in range({LINES}):
        print("Rank", i, "has data", n, "end")

if __name__ == "__main__":
    mp.spawn(work, args=(time.time() + 2.0,), nprocs={WORKERS}, start_method="{{method}}")
"""

WHOLE_LINE = re.compile(r"Rank (\d) has data (\d+) end")


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_concurrent_workers_print_whole_lines(service: RunnerService, method: str) -> None:
    verdict = run(service, CONCURRENT_PRINTS.replace("{method}", method), timeout_s=120)
    assert verdict.status == Status.OK, verdict.to_dict()
    lines = verdict.ranks[0].stdout.splitlines()
    spliced = [line for line in lines if not WHOLE_LINE.fullmatch(line)]
    assert spliced == [], f"{len(spliced)} spliced lines, e.g. {spliced[:3]}"
    assert len(lines) == WORKERS * LINES


def test_streams_are_line_buffered_in_python_mode_and_unbuffered_in_ddp(service: RunnerService) -> None:
    # Neither mode's snippet sees the supervisor's PYTHONUNBUFFERED: torchrun's workers get -u instead.
    code = (
        "import os, sys\n"
        "print(sys.stdout.line_buffering, sys.stderr.line_buffering, sys.stdout.write_through,"
        " 'PYTHONUNBUFFERED' in os.environ)\n"
    )
    python = run(service, code)
    assert python.ranks[0].stdout == "True True False False\n", python.to_dict()
    ddp = run(service, code, mode="ddp", nproc=1)
    assert ddp.ranks[0].stdout == "False False True False\n", ddp.to_dict()
