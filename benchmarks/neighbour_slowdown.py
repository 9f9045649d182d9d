"""How much one hostile job slows a benign verdict next to it (issue 23, section 4): target 2x quiet.

Usage: python benchmarks/neighbour_slowdown.py [--runs 4] [--hostile idle,fork-storm,cpu-hog] [--hold 40]
                                               [--against REV] [--pairs 1]

One in-process RunnerService with the defaults (pool 8:2, 4 concurrent jobs, bubblewrap, cgroups). The
benign job is a 2-rank DDP all-reduce (mode ddp). First ``--runs`` quiet verdicts, each once the pool is
full; then, for each hostile kind, the hostile job is started (deadline ``--hold`` seconds) and, 3 s
later, benign verdicts two ways while it runs:

  * spaced: ``--runs`` verdicts, each once the pool is full again (the neighbour's own effect on a
    verdict: its CPU, its forks);
  * back to back: ``--runs`` verdicts, each as soon as the previous came back, so later ones find the
    pool (two sandboxes, one held by the neighbour) empty and wait for a warm-up, which the neighbour
    competes with.  The pool's counters say how many took a sandbox still warming (``claimed``) and how
    long requests waited for warm-ups (``waited``).

Hostile kinds:

  * idle:       not hostile, the baseline: a job that imports torch (so it takes a warm sandbox, as the
    cpu-hog does) and sleeps.  Back to back, the benign verdicts then wait for the pool's refill with no
    hostile work at all: what is left of the slowdown beyond this is the hostile job's doing;
  * fork-storm: one process that forks children that fork in turn, up to the sandbox's process limit,
    each spinning on the CPU (mode python, so it gets every core a job may have);
  * cpu-hog:    8 ranks (mode ddp), each spinning 4 threads.

Prints the quiet median, and per hostile kind and pattern the median and worst benign time, their ratio
to the quiet median and, back to back, the median's ratio to the idle neighbour's, with the load average.

``--against REV`` runs the same measurement on the code of git revision REV (extracted into a temporary
folder, run in a subprocess with that folder first on the path) and on this checkout, one after the
other (``--pairs`` times, alternating), and prints them side by side.  With the defaults, one pair takes
about 5 minutes on a quiet 2-core machine.  The machine's other work counts: say what else ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from runner.config import RunnerConfig
from runner.service import RunnerService, RunRequest
from runner.verdict import Mode, Status

BENIGN = """
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
print(t.tolist())
dist.destroy_process_group()
"""

FORK_STORM = """
import os, time
def spin():
    while True:
        try:
            if os.fork() == 0:
                continue  # the child forks on too
        except OSError:
            pass  # the process limit: spin instead
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            pass
spin()
"""

CPU_HOG = """
import threading
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
spin()
"""

IDLE = """
import time
import torch
time.sleep(3600)
"""

HOSTILE = {
    "idle": RunRequest(code=IDLE, mode=Mode.PYTHON),
    "fork-storm": RunRequest(code=FORK_STORM, mode=Mode.PYTHON),
    "cpu-hog": RunRequest(code=CPU_HOG, mode=Mode.DDP, nproc=8),
}
ROOT = Path(__file__).resolve().parent.parent


def wait_pool_full(service: RunnerService, limit_s: float = 120.0) -> None:
    """Until every pooled capacity has its target of ready sandboxes."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        state = service.pool.state()
        if all(state["ready"][n] >= t for n, t in state["targets"].items()):
            return
        time.sleep(0.2)


def benign(service: RunnerService) -> float:
    """Seconds for one benign verdict (asserts it is ok)."""
    start = time.monotonic()
    verdict = service.run(RunRequest(code=BENIGN, mode=Mode.DDP, nproc=2, timeout_s=120))
    elapsed = time.monotonic() - start
    if verdict.status != Status.OK:
        raise SystemExit(f"benign verdict not ok: {verdict.to_dict()}")
    return elapsed


def _counters(service: RunnerService) -> tuple[int, float] | None:
    """The pool's claimed count and total warm-up wait (None on code that does not count them)."""
    state = service.pool.state()
    if "served_claimed" not in state:
        return None
    return int(state["served_claimed"]), float(state["waited_s"])


def next_to(service: RunnerService, kind: str, runs: int, hold: float) -> dict[str, Any]:
    """Benign verdict times, spaced and back to back, while a hostile job of ``kind`` runs."""
    asked = HOSTILE[kind]
    hostile = RunRequest(code=asked.code, mode=asked.mode, nproc=asked.nproc, timeout_s=hold)
    result: dict[str, str] = {}

    def run_hostile() -> None:
        result["status"] = service.run(hostile).status.value

    thread = threading.Thread(target=run_hostile, daemon=True)
    thread.start()
    time.sleep(3.0)
    spaced = []
    for _ in range(runs):
        wait_pool_full(service)
        spaced.append(benign(service))
    wait_pool_full(service)
    counted = _counters(service)
    back_to_back = [benign(service) for _ in range(runs)]
    counted_after = _counters(service)
    lasted = thread.is_alive()
    thread.join()
    return {
        "spaced": spaced,
        "back_to_back": back_to_back,
        "claimed": None if counted is None or counted_after is None else counted_after[0] - counted[0],
        "waited_s": None if counted is None or counted_after is None else counted_after[1] - counted[1],
        "hostile": result.get("status", "?"),
        "outlasted": lasted,
    }


def measure(runs: int, kinds: list[str], hold: float) -> dict[str, Any]:
    """One service, the quiet verdicts, then each neighbour kind: every figure, in seconds."""
    service = RunnerService(RunnerConfig())
    service.start()
    try:
        out: dict[str, Any] = {"load_start": os.getloadavg()[0]}
        quiet = []
        for _ in range(runs):
            wait_pool_full(service)
            quiet.append(benign(service))
        out["quiet"] = quiet
        for kind in kinds:
            wait_pool_full(service)
            out[kind] = next_to(service, kind, runs, hold)
        out["load_end"] = os.getloadavg()[0]
        return out
    finally:
        service.close()


def report(figures: dict[str, Any], kinds: list[str]) -> list[str]:
    """Lines for one measurement: the quiet median, then per kind and pattern the ratios."""
    base = statistics.median(figures["quiet"])
    lines = [
        f"  load average {figures['load_start']:.1f} at the start, {figures['load_end']:.1f} at the end",
        f"  quiet       : median {base:.3f}s, runs {', '.join(f'{t:.2f}' for t in figures['quiet'])}",
    ]
    idle_b2b = statistics.median(figures["idle"]["back_to_back"]) if "idle" in figures else None
    for kind in kinds:
        row = figures[kind]
        for pattern in ("spaced", "back_to_back"):
            times = row[pattern]
            median, worst = statistics.median(times), max(times)
            each = ", ".join(f"{t:.2f}" for t in times)
            line = (
                f"  {kind:10s} {pattern.replace('_', ' '):12s}: median {median:.3f}s ({median / base:.2f} x "
                f"quiet), worst {worst:.3f}s ({worst / base:.2f} x), runs {each}"
            )
            if pattern == "back_to_back":
                if idle_b2b:
                    line += f"; {median / idle_b2b:.2f} x the idle neighbour's"
                if row["claimed"] is not None:
                    line += f"; claimed {row['claimed']}, waited {row['waited_s']:.2f}s"
            lines.append(line)
        lines.append(
            f"  {kind:10s} hostile {row['hostile']}"
            + ("" if row["outlasted"] else " (ended before the last benign run: raise --hold)")
        )
    return lines


def _run_side(source: Path, args: argparse.Namespace) -> dict[str, Any]:
    """This script, on the code under ``source``, in a subprocess: its figures."""
    env = dict(os.environ, PYTHONPATH=str(source))
    argv = [sys.executable, str(Path(__file__).resolve()), "--json", "--runs", str(args.runs)]
    argv += ["--hostile", args.hostile, "--hold", str(args.hold)]
    done = subprocess.run(argv, env=env, cwd=source, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run on {source} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def compare(args: argparse.Namespace, kinds: list[str]) -> None:
    """Before (``--against``) and after (this checkout), alternating, side by side."""
    with tempfile.TemporaryDirectory(prefix="neighbour-before-") as folder:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.against], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        sides = {f"before ({args.against})": Path(folder), "after (this checkout)": ROOT}
        for pair in range(1, args.pairs + 1):
            for name, source in sides.items():
                started = time.monotonic()
                figures = _run_side(source, args)
                print(f"pair {pair}, {name}, {time.monotonic() - started:.0f} s:")
                print("\n".join(report(figures, kinds)), flush=True)


def main() -> None:
    """Parse the options; measure this checkout, or compare it with ``--against``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--hostile", default=",".join(HOSTILE))
    parser.add_argument("--hold", type=float, default=40.0)
    parser.add_argument("--against", help="a git revision to measure first, on its own code")
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    kinds = args.hostile.split(",")
    if args.against:
        compare(args, kinds)
        return
    figures = measure(args.runs, kinds, args.hold)
    if args.json:
        print(json.dumps(figures))
    else:
        print("\n".join(report(figures, kinds)))


if __name__ == "__main__":
    main()
