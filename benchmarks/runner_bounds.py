"""Timings the tests used to bound, measured and printed instead (issue 29: no wall-clock bound in tests).

Usage: python benchmarks/runner_bounds.py [--runs 3]

Each figure is the median (and the worst) of ``--runs`` runs on an in-process, bubblewrap-sandboxed
runner with a full warm pool, as tests/runner's session service has:

  * fail-fast lag: from the moment the failing rank prints its last line to the verdict's return, for a
    2-rank DDP job whose other rank sleeps (the runner kills it; the issue's target is under 2 s);
  * deadline overshoot: the verdict's wall time less the job's 4 s deadline, for a 2-rank job stuck in a
    collective (target: under 3 s, less any CPU wait the runner credits);
  * CPU-limit stop: wall time of four hashing threads against a 2 s CPU-time limit (RLIMIT_CPU);
  * fork bomb: wall time of the fork-bomb snippet of tests/runner/test_isolation.py to its verdict;
  * shard parse: ``parse_shards`` over the largest shard count (the duplicate check was once quadratic).

The load average is printed with the figures: on a shared machine they mean little without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import textwrap
import time
from collections.abc import Callable

from bot.core.sharding import MAX_SHARDS, parse_shards
from runner.config import RunnerConfig
from runner.service import RunnerService, RunRequest
from runner.verdict import Mode, Status

MEMORY_MB = 2048

FAIL_FAST = """
import os, time
if os.environ["RANK"] == "1":
    time.sleep(0.5)
    print(repr(time.time()), flush=True)
    raise ValueError("rank one is broken")
time.sleep(120)
"""
STUCK = """
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    time.sleep(300)
dist.all_reduce(torch.ones(1))
"""
BURNER = """
import hashlib, threading
block = b"x" * (8 << 20)
def burn():
    while True:
        hashlib.sha256(block).digest()
threads = [threading.Thread(target=burn) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""
FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


def _run(svc: RunnerService, code: str, **kwargs: object) -> tuple[float, object]:
    started = time.monotonic()
    verdict = svc.run(RunRequest(code=textwrap.dedent(code), **kwargs))  # type: ignore[arg-type]
    return time.monotonic() - started, verdict


def fail_fast_lag(svc: RunnerService) -> float:
    svc.pool.wait_full(180)
    verdict = svc.run(RunRequest(code=FAIL_FAST, mode=Mode.DDP, nproc=2, timeout_s=100))
    answered = time.time()
    assert verdict.status == Status.ERROR, verdict.to_dict()
    return answered - float(verdict.ranks[1].stdout)


def deadline_overshoot(svc: RunnerService) -> float:
    svc.pool.wait_full(180)
    took, _ = _run(svc, STUCK, mode=Mode.DDP, nproc=2, timeout_s=4)
    return took - 4


def cpu_limit_stop(_: RunnerService) -> float:
    limited = RunnerService(RunnerConfig(memory_mb=MEMORY_MB, pool={}, cpu_time_s=2))
    try:
        return _run(limited, BURNER, timeout_s=30)[0]
    finally:
        limited.close()


def fork_bomb(svc: RunnerService) -> float:
    return _run(svc, FORK_BOMB, timeout_s=5)[0]


def shard_parse(_: RunnerService) -> float:
    text = ",".join(map(str, range(MAX_SHARDS))) + f"/{MAX_SHARDS}"
    started = time.perf_counter()
    parse_shards(text)
    return time.perf_counter() - started


FIGURES: dict[str, Callable[[RunnerService], float]] = {
    "fail-fast lag (s)": fail_fast_lag,
    "deadline overshoot over 4 s (s)": deadline_overshoot,
    "CPU-limit stop, 2 s of CPU (s)": cpu_limit_stop,
    "fork bomb to verdict, 5 s deadline (s)": fork_bomb,
    f"parse_shards, {MAX_SHARDS} ids (s)": shard_parse,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    svc = RunnerService(RunnerConfig(memory_mb=MEMORY_MB, pool={1: 1, 2: 1}, max_concurrent_jobs=4))
    svc.start()
    try:
        for name, measure in FIGURES.items():
            runs = [measure(svc) for _ in range(args.runs)]
            print(f"{name:45} median {statistics.median(runs):7.2f}   worst {max(runs):7.2f}")
    finally:
        svc.close()
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
