"""A rush on Slack: N players press Start on the daily post in the same second, through signed HTTP
requests into the real Bolt app, against the strict fake's model of Slack's limits (rate tiers, 3-second
trigger_ids, response_urls good 5 times within 30 minutes). Shared by
tests/bot/adapters/slack/test_slack_rush.py (which asserts the counts) and benchmarks/slack_rush.py (which
prints the figures and times).

A player's problem counts as *shown* when Slack accepted a view update or a private message with it for
them; *press again* when they were told their click expired; *errors* when they were told "something went
wrong" or "busy". The clock check compares each stored ``started_at`` with when the problem was shown.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from sqlalchemy import text

from bot.adapters.slack import failures
from bot.adapters.slack.app import EVENTS_PATH, build_adapter
from bot.bootstrap import build_services
from bot.config import Settings
from tests.conftest import ADMIN, test_bank
from tests.slack_fake import SECRET, FakeSlackApi, SlackSender

OWNER = "UOWNER"
#: What the first problem's view or message says.
MARKER = "Problem 1 of"


@dataclass(frozen=True)
class RushFigures:
    """What a rush came to (times in seconds, from each click to its problem on screen)."""

    players: int
    shown: int
    press_again: int
    errors: int
    rate_limited: int
    in_modals: int
    in_messages: int
    late_acks: int
    clocks_started_before_shown: int
    clocks_started: int
    p50_s: float
    p95_s: float
    max_s: float

    def as_json(self) -> str:
        """One line of JSON."""
        return json.dumps(asdict(self))


def _said(call_args: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in call_args.items() if not k.startswith("_")}, ensure_ascii=False)


async def run_rush(
    players: int,
    db_path: Path,
    *,
    per_minute: float = 100,
    burst: int = 20,
    wait_s: float = 90.0,
) -> RushFigures:
    """Post a challenge, let ``players`` press Start at once, wait until each has an outcome (or
    ``wait_s``), and count. ``db_path``: a migrated SQLite file (changed). ``per_minute``/``burst``: the
    adapter's Tier 4 budget (RANKZERO_SLACK_TIER4_*).
    """
    api = FakeSlackApi(users={OWNER: {"is_owner": True, "profile": {"display_name": "Olga"}}})
    await api.start()
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{db_path}",
        slack_bot_token=SecretStr("xoxb-test"),
        slack_signing_secret=SecretStr(SECRET),
        slack_port=0,
        health_port=0,
        slack_tier4_per_minute=per_minute,
        slack_tier4_burst=burst,
    )
    adapter = build_adapter(settings, base_url=api.base_url)
    services = await build_services(settings, [adapter], migrate=False)  # the real clock
    try:
        await services.quiz.admin_import(ADMIN, test_bank())
        await adapter.start(services)
        assert adapter.http is not None
        url = f"http://127.0.0.1:{adapter.http.port}{EVENTS_PATH}"
        limits = httpx.Limits(max_connections=players + 10, max_keepalive_connections=players + 10)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            send = SlackSender(url, api, http)
            await send.command(OWNER, "post-now")
            post = (await api.wait_for("chat.postMessage"))[0]
            start = next(
                e["action_id"] for b in post.args["blocks"] if b["type"] == "actions" for e in b["elements"]
            )
            users = [f"URUSH{i:03d}" for i in range(players)]
            clicked: dict[str, float] = {}

            async def press(user: str) -> None:
                clicked[user] = time.time()
                await send.click(user, start)

            await asyncio.gather(*(press(u) for u in users))
            outcome = await _outcomes(api, users, wait_s)
            started = await _clock_starts(services.app.engine, users)
        shown = outcome["shown"]
        waits = sorted(shown[u][0] - clicked[u] for u in shown)
        before = sum(1 for u, at in started.items() if u in shown and at < shown[u][0])
        return RushFigures(
            players=players,
            shown=len(shown),
            press_again=len(outcome["press_again"]),
            errors=len(outcome["errors"]),
            rate_limited=api.ratelimited,
            in_modals=sum(1 for _, how in shown.values() if how == "modal"),
            in_messages=sum(1 for _, how in shown.values() if how == "message"),
            late_acks=len(send.late),
            clocks_started_before_shown=before + sum(1 for u in started if u not in shown),
            clocks_started=len(started),
            p50_s=round(statistics.median(waits), 2) if waits else float("nan"),
            p95_s=round(waits[max(0, int(len(waits) * 0.95) - 1)], 2) if waits else float("nan"),
            max_s=round(waits[-1], 2) if waits else float("nan"),
        )
    finally:
        await adapter.stop()
        await services.app.close()
        await api.stop()


async def _outcomes(api: FakeSlackApi, users: list[str], wait_s: float) -> dict[str, Any]:
    """Per user: when (and how) their problem was first shown, or whether they were told to press again
    or that something went wrong; waits until every user has one outcome or ``wait_s`` passed.
    """
    deadline = time.monotonic() + wait_s
    shown: dict[str, tuple[float, str]] = {}
    press_again: set[str] = set()
    errors: set[str] = set()
    seen = 0
    while True:
        calls = api.calls[seen:]
        seen += len(calls)
        for call in calls:
            user = call.args.get("_user")
            if call.method not in ("views.update", "response") or user is None:
                continue
            said = _said(call.args)
            if MARKER in said and user not in shown:
                shown[user] = (call.at, "modal" if call.method == "views.update" else "message")
            if failures.EXPIRED in said:
                press_again.add(user)
            if failures.INTERNAL in said or failures.BUSY in said:
                errors.add(user)
        done = set(shown) | press_again | errors
        if len(done) >= len(users) or time.monotonic() > deadline:
            return {"shown": shown, "press_again": press_again, "errors": errors}
        await asyncio.sleep(0.1)


async def _clock_starts(engine: Any, users: list[str]) -> dict[str, float]:
    """user id -> when their first problem's clock started (epoch seconds), for those with one; waits a
    moment for the starts that follow the last shows.
    """
    await asyncio.sleep(1.0)
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT p.user_id, MIN(s.started_at) FROM play_sessions s "
                    "JOIN players p ON p.id = s.player_pk WHERE p.platform = 'slack' GROUP BY p.user_id"
                )
            )
        ).all()
    out: dict[str, float] = {}
    for user_id, started_at in rows:
        if user_id not in users:
            continue
        at = started_at if isinstance(started_at, dt.datetime) else dt.datetime.fromisoformat(str(started_at))
        if at.tzinfo is None:
            at = at.replace(tzinfo=dt.UTC)
        out[str(user_id)] = at.timestamp()
    return out
