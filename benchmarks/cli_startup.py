"""How long ``rankzero --help`` takes, against importing everything the commands use.

Usage: python benchmarks/cli_startup.py [--runs 15]

Each run is a fresh interpreter (as a user's shell starts one):
  * help:     ``python -m bot.cli --help`` (commands import what they need when they run);
  * validate: ``python -m bot.cli questions validate`` (a real command: pydantic and YAML, no database);
  * eager:    ``python -c 'import bot.bootstrap, bot.cli.serve, bot.cli.dispute'`` then the help, i.e. what
    ``--help`` cost when the CLI imported every module up front (the state before issue 16).
Prints median and p90 of each, the ratio help / eager, and whether help meets the 0.5 s target.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.5

COMMANDS: dict[str, list[str]] = {
    "help": [sys.executable, "-m", "bot.cli", "--help"],
    "validate": [sys.executable, "-m", "bot.cli", "questions", "validate"],
    "eager": [
        sys.executable,
        "-c",
        "import bot.bootstrap, bot.cli.serve, bot.cli.dispute, sys; sys.argv = ['rankzero', '--help']; "
        "from bot.cli import main; main()",
    ],
}


def _time(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+system) of one run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    """Run each command ``--runs`` times (after one warm-up for the file cache) and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs each"
    )
    medians: dict[str, float] = {}
    for name, argv in COMMANDS.items():
        _time(argv)  # warm the page cache and the bytecode cache
        runs = [_time(argv) for _ in range(args.runs)]
        walls = sorted(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        medians[name] = statistics.median(walls)
        p90 = walls[min(len(walls) - 1, int(0.9 * len(walls)))]
        print(
            f"{name:9} wall median {medians[name]:.3f} s  p90 {p90:.3f} s  min {walls[0]:.3f} s   "
            f"CPU median {cpu:.3f} s"
        )
    print(f"help / eager (wall medians): {medians['help'] / medians['eager']:.2f}x")
    verdict = "meets" if medians["help"] <= TARGET_S else "MISSES"
    print(f"rankzero --help wall median {medians['help']:.3f} s {verdict} the {TARGET_S} s target")
    print("(on a loaded machine wall time includes waiting for a CPU: compare the CPU figures too)")


if __name__ == "__main__":
    main()
