"""What a chart costs to render (issue 30: target ≤ 300 ms a chart on this machine, off the event loop).

Usage: python benchmarks/chart_render.py [--runs 20] [--example docs/stats-chart.png]

  * cold:   the first player chart of the process (matplotlib's import, its font cache, the Agg canvas);
  * player: ``player_chart`` of a realistic card (30 days of points, 15 topics of which 12 drawn, a streak);
  * team:   ``team_heatmap`` of a realistic week (12 topics x 4 difficulties, a few cells empty);
  * loop:   an asyncio heartbeat ticking every 10 ms while 8 charts are asked for at once: through
    ``render()`` (the charts' one worker thread), through ``asyncio.to_thread`` 4 at a time, and drawn on
    the loop itself; the longest gap between ticks is how long the loop could not answer anyone.

Prints median and p95 of each in ms (wall time, and the render thread's CPU time: steadier on a shared
machine), the ratio of the wall p95 to the target, and the loop's longest stall both ways.
``--example PATH`` also writes the player chart of the realistic card there (the README's picture).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.adapters.charts import Chart, player_chart, render, team_heatmap
from bot.core.cards import DayPoints, HeatCell, StatsCard, TeamReportCard, TopicStat

TARGET_MS = 300.0
TODAY = dt.date(2026, 11, 27)
TOPICS = (
    "ddp",
    "fsdp",
    "nccl",
    "collectives",
    "gradient-accumulation",
    "mixed-precision",
    "torchrun",
    "checkpointing",
    "pipeline-parallel",
    "tensor-parallel",
    "zero",
    "data-loading",
    "profiling",
    "elastic",
    "rpc",
)


def realistic_player(seed: int = 7) -> StatsCard:
    """A regular player's card: plays most weekdays, 15 topics answered."""
    rng = random.Random(seed)
    days = [TODAY - dt.timedelta(days=n) for n in range(29, -1, -1)]
    played = [d for d in days if d.weekday() < 5 and rng.random() < 0.8] + [TODAY - dt.timedelta(days=33)]
    daily = tuple(DayPoints(d, rng.randint(40, 180) if d in played else 0) for d in days)
    topics = []
    for name in TOPICS:
        answered = rng.randint(2, 30)
        topics.append(TopicStat(name, answered, rng.randint(0, answered)))
    return StatsCard(
        display_name="Ada Lovelace",
        points=sum(d.points for d in daily) + 2400,
        problems=sum(t.answered for t in topics),
        correct=sum(t.correct for t in topics),
        challenges_completed=len(played) + 20,
        streak=4,
        longest_streak=11,
        badges=(),
        by_topic=tuple(topics),
        daily_points=daily,
        played_days=tuple(sorted(d for d in played if d >= TODAY - dt.timedelta(days=34))),
        today=TODAY,
    )


def realistic_week(seed: int = 7) -> TeamReportCard:
    """A team's week: 12 topics at 4 difficulties, one cell in five without first attempts."""
    rng = random.Random(seed)
    cells = []
    for topic in TOPICS[:12]:
        for difficulty in ("beginner", "intermediate", "advanced", "expert"):
            if rng.random() < 0.2:
                continue
            attempts = rng.randint(1, 25)
            cells.append(HeatCell(topic, difficulty, attempts, rng.randint(0, attempts)))
    return TeamReportCard("#distributed-training", TODAY - dt.timedelta(days=4), tuple(cells), (), ())


def _times(draw: Callable[[], Chart], runs: int) -> tuple[list[float], list[float]]:
    """(wall ms, this thread's CPU ms) of each render: on a shared machine the CPU time is the steadier."""
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.thread_time()
        draw()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
    return wall, cpu


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def _max_stall(how: str, card: StatsCard, charts: int) -> tuple[float, float]:
    """(longest gap between 10 ms heartbeats in ms, wall time in ms) while ``charts`` charts render."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append((now - last) * 1000 - 10)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.05)
    start = time.perf_counter()
    if how == "on the loop":
        for _ in range(charts):
            player_chart(card)
            await asyncio.sleep(0)
    elif how == "render":
        await asyncio.gather(*(render(player_chart, card) for _ in range(charts)))
    else:  # asyncio.to_thread, 4 at a time: what render() did first
        sem = asyncio.Semaphore(4)

        async def one() -> None:
            async with sem:
                await asyncio.to_thread(player_chart, card)

        await asyncio.gather(*(one() for _ in range(charts)))
    wall = (time.perf_counter() - start) * 1000
    done.set()
    await beat
    return max(gaps), wall


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--example", type=Path, default=None, help="write the realistic player chart here")
    args = parser.parse_args()
    card, week = realistic_player(), realistic_week()
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    start = time.perf_counter()
    example = player_chart(card)
    print(f"cold   first player chart {(time.perf_counter() - start) * 1000:7.1f} ms (import + font cache)")
    draws: list[tuple[str, Callable[[], Chart]]] = [
        ("player", lambda: player_chart(card)),
        ("team", lambda: team_heatmap(week)),
    ]
    for name, draw in draws:
        wall, cpu = _times(draw, args.runs)
        med, p95 = statistics.median(wall), _p95(wall)
        size = len(draw().png)
        verdict = "meets" if p95 <= TARGET_MS else "MISSES"
        print(
            f"{name:6} wall median {med:6.1f} ms p95 {p95:6.1f} ms;"
            f" CPU median {statistics.median(cpu):6.1f} ms p95 {_p95(cpu):6.1f} ms"
            f" ({args.runs} renders, PNG {size / 1024:.0f} KiB);"
            f" wall p95/target {p95 / TARGET_MS:.2f}: {verdict} the {TARGET_MS:.0f} ms target"
        )
    for how in ("render", "to_thread x4", "on the loop"):
        stall, total = asyncio.run(_max_stall(how, card, 8))
        print(
            f"loop   8 charts at once, {how:12}: longest heartbeat stall {stall:6.1f} ms,"
            f" {total:5.0f} ms in all"
        )
    if args.example is not None:
        args.example.write_bytes(example.png)
        print(f"example written to {args.example} ({len(example.png) / 1024:.0f} KiB)")
        print(f"alt text: {example.alt_text}")


if __name__ == "__main__":
    main()
