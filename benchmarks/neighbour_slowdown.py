"""How much one hostile job slows a benign verdict next to it (issue 23, section 4): target 2x quiet.

Usage: python benchmarks/neighbour_slowdown.py [--runs 6] [--hostile fork-storm,cpu-hog] [--hold 90]

One in-process RunnerService with the defaults (pool 8:2, 4 concurrent jobs, bubblewrap, cgroups). The
benign job is a 2-rank DDP all-reduce (mode ddp). First ``--runs`` quiet verdicts, each once the pool is
full; then, for each hostile kind, the hostile job is started (deadline ``--hold`` seconds) and, 3 s
later, ``--runs`` benign verdicts are asked one after the other, each as soon as the previous came back
(so later ones wait for the pool's refill, which the hostile job competes with).  Hostile kinds:

  * idle:       not hostile, the baseline: a job that imports torch (so it takes a warm sandbox, as the
    cpu-hog does) and sleeps.  The benign verdicts back to back then wait for the pool's refill with no
    hostile work at all: what is left of the slowdown beyond this is the hostile job's doing;
  * fork-storm: one process that forks children that fork in turn, up to the sandbox's process limit,
    each spinning on the CPU (mode python, so it gets every core a job may have);
  * cpu-hog:    8 ranks (mode ddp), each spinning 4 threads.

Prints the quiet median, and per hostile kind the median and worst benign time and their ratio to the
quiet median, with the load average.  The machine's other work counts: say what else ran.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

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


def next_to(service: RunnerService, kind: str, runs: int, hold: float) -> tuple[list[float], str, bool]:
    """Benign verdict times while a hostile job of ``kind`` runs; its status; whether it outlasted them."""
    asked = HOSTILE[kind]
    hostile = RunRequest(code=asked.code, mode=asked.mode, nproc=asked.nproc, timeout_s=hold)
    result: dict[str, str] = {}

    def run_hostile() -> None:
        result["status"] = service.run(hostile).status.value

    thread = threading.Thread(target=run_hostile, daemon=True)
    thread.start()
    time.sleep(3.0)
    times = [benign(service) for _ in range(runs)]
    lasted = thread.is_alive()
    thread.join()
    return times, result.get("status", "?"), lasted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--hostile", default=",".join(HOSTILE))
    parser.add_argument("--hold", type=float, default=90.0)
    args = parser.parse_args()
    service = RunnerService(RunnerConfig())
    service.start()
    try:
        print(f"load average at start: {os.getloadavg()}")
        quiet = []
        for _ in range(args.runs):
            wait_pool_full(service)
            quiet.append(benign(service))
        base = statistics.median(quiet)
        print(f"quiet: median {base:.3f}s, runs {', '.join(f'{t:.2f}' for t in quiet)}")
        for kind in args.hostile.split(","):
            wait_pool_full(service)
            times, status, lasted = next_to(service, kind, args.runs, args.hold)
            median = statistics.median(times)
            runs = ", ".join(f"{t:.2f}" for t in times)
            print(
                f"{kind:10s}: median {median:.3f}s ({median / base:.2f} x quiet), worst {max(times):.3f}s "
                f"({max(times) / base:.2f} x), runs {runs}; hostile {status}"
                + ("" if lasted else " (ended before the last benign run)")
            )
        print(f"load average at end: {os.getloadavg()}")
    finally:
        service.close()


if __name__ == "__main__":
    main()
