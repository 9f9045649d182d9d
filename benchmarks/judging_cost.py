"""Host CPU spent judging one timed-out verdict whose processes are all stuck in a C call.

Builds a 64 KiB snippet (the largest the runner accepts) and a faulthandler dump per process (8 ranks,
each with 16 dumped children, as many as the supervisor dumps) that names only a snippet line, then times
``stuck_at`` over every dump: once with one SnippetCalls shared by the verdict (what the runner does),
once with the snippet's text per dump (a parse per process, what it did before issue 23).

    python benchmarks/judging_cost.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from runner.stacks import SnippetCalls, stuck_at

PROCESSES = 8 * (1 + 16)


def snippet() -> str:
    """About 64 KiB of ordinary statements, then the line every process is stuck on."""
    body = "".join(f"x{i} = max(min({i}, 3), abs(-{i}))\n" for i in range(1800))
    return body + "import time\ntime.sleep(60)\n"


def dump(line: int) -> str:
    return (
        "Current thread 0x00007f0000000001 (most recent call first):\n"
        f'  File "/tmp/main.py", line {line} in <module>\n'
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    source = snippet()
    line = source.count("\n")
    dumps = [dump(line)] * PROCESSES
    print(f"snippet {len(source.encode())} bytes, {PROCESSES} dumped processes stuck on line {line}")
    for label, shared in (("one parse per verdict", True), ("one parse per process", False)):
        times = []
        for _ in range(args.repeat):
            start = time.process_time()
            calls = SnippetCalls(source)
            for text in dumps:
                found = stuck_at(text, "/tmp/main.py", calls if shared else source)
                assert found is not None and found.call == "sleep"
            times.append(time.process_time() - start)
        print(f"  {label:24s} CPU {min(times):7.3f} s (best of {args.repeat})")


if __name__ == "__main__":
    main()
