"""200 players press Start on Slack's daily post in the same second (issue 25 §3).

Usage: python benchmarks/slack_rush.py [--players 200] [--per-minute 100] [--burst 20] [--runs 1]

Signed HTTP requests into the real Bolt app (HTTP mode, one process, SQLite) against the strict fake of
Slack (tests/slack_fake.py: Tier 4 views.* and users.info at 100 a minute per workspace with a burst of 50,
trigger_ids good for 3 s, response_urls good 5 times within 30 minutes). ``--per-minute``/``--burst`` are
the adapter's own budget (RANKZERO_SLACK_TIER4_PER_MINUTE / _BURST). Prints, per run: problems shown (and
where: modal or private message), players told to press again, players told "something went wrong", calls
Slack answered 429, clicks acknowledged after 3 s, clocks started before the problem was on screen, and
the time from click to problem (p50, p95, max). The fake, the senders and the app share one machine and
one event loop, so the times include Slack's side too; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from bot.storage.db import upgrade
from tests.slack_rush import run_rush


def main() -> None:
    """Run the rush ``--runs`` times and print one line of figures per run."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--players", type=int, default=200)
    parser.add_argument("--per-minute", type=float, default=100)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.db"
        upgrade(f"sqlite+aiosqlite:///{template}")
        for run in range(1, args.runs + 1):
            db = Path(tmp) / f"run{run}.db"
            shutil.copy(template, db)
            figures = asyncio.run(run_rush(args.players, db, per_minute=args.per_minute, burst=args.burst))
            load = os.getloadavg()[0]
            print(
                f"run {run}: shown {figures.shown}/{figures.players} "
                f"(modal {figures.in_modals}, message {figures.in_messages}) · "
                f"press again {figures.press_again} · errors {figures.errors} · "
                f"rate-limited {figures.rate_limited} · late acks {figures.late_acks} · "
                f"clocks before shown {figures.clocks_started_before_shown} · "
                f"click->problem p50 {figures.p50_s} s, p95 {figures.p95_s} s, max {figures.max_s} s · "
                f"load average {load:.1f} on {os.cpu_count()} CPUs"
            )


if __name__ == "__main__":
    main()
