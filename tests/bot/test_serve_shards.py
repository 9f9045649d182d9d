"""Discord sharding with two real ``rankzero serve`` processes (issue 17), against the fake's gateway and API.

Process A runs shard 0 of 2, process B shard 1 of 2 (RANKZERO_DISCORD_SHARDS), on one PostgreSQL database.
Six guilds, three per shard, each have a channel scheduled at the same minute: every channel gets its
challenge exactly once, from the process of its guild's shard (each process's log and /healthz jobs say
which channels it serves). Then B is killed (SIGKILL, the pid this test started): channels scheduled next
on B's shard stay unposted -- there is no failover between shards, as with Discord sharding itself: the
operator restarts the process -- while A still posts its own.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bot.core.models import ChannelRef
from bot.core.ports import SystemClock
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.storage.db import make_engine
from bot.storage.models import Base
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN
from tests.discord_fake import MANAGE_GUILD, FakeDiscord, Interactions, guild_shard
from tests.net import free_port

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
RANKZERO = [sys.executable, "-m", "bot.cli"]
SHARDS = 2
#: "post for channel 3: posted (on time)" -- not "(already posted)", which another process's claim gives.
POSTED = re.compile(r"post for channel (\d+): posted \((?!already)")


def guild_on(shard: int, n: int) -> int:
    """A guild snowflake that Discord puts on ``shard`` of SHARDS."""
    return ((SHARDS * (2000 + n) + shard) << 22) | 777


class Shard:
    """One ``rankzero serve`` process connecting one shard of the fake Discord."""

    def __init__(self, shard: int, db_url: str, fake: FakeDiscord, tmp: Path) -> None:
        self.shard = shard
        self.port = free_port()
        self.log = tmp / f"serve-{shard}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
        env |= {
            "RANKZERO_DATABASE_URL": db_url,
            "RANKZERO_DATA_DIR": str(tmp / f"data-{shard}"),
            "RANKZERO_HEALTH_PORT": str(self.port),
            "RANKZERO_SCHEDULE_SYNC_S": "0.5",
            "RANKZERO_DISCORD_TOKEN": "fake-token",
            "RANKZERO_DISCORD_API_URL": fake.base,
            "RANKZERO_DISCORD_GATEWAY_URL": fake.root.replace("http://", "ws://") + "/gateway",
            "RANKZERO_DISCORD_SHARDS": f"{shard}/{SHARDS}",
        }
        self._sink = self.log.open("ab")
        self.proc = subprocess.Popen(
            [*RANKZERO, "serve"], cwd=ROOT, env=env, stdout=self._sink, stderr=subprocess.STDOUT
        )

    def _health(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as resp:
                return json.loads(resp.read())  # type: ignore[no-any-return]
        except urllib.error.HTTPError as exc:  # 503 while starting: the body says why
            return json.loads(exc.read())  # type: ignore[no-any-return]
        except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException):
            return None

    async def health(self) -> dict[str, Any] | None:
        # In a thread: the fake Discord serves from this test's event loop, which must keep running.
        return await asyncio.to_thread(self._health)

    async def wait_healthy(self, timeout: float = 90) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end:
            assert self.proc.poll() is None, f"serve exited with {self.proc.returncode}: {self.output()}"
            report = await self.health()
            if report is not None and report.get("ok"):
                return report
            await asyncio.sleep(0.3)
        raise AssertionError(f"shard {self.shard}'s serve never became healthy: {self.output()}")

    def posted(self) -> list[int]:
        """Channel pks this process posted a challenge to (its log)."""
        return [int(pk) for pk in POSTED.findall(self.output())]

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)  # this test's own child, by its pid
        self.proc.wait(timeout=30)
        self._sink.close()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self._sink.close()
        return code


@pytest.fixture
async def database(pg_database: str) -> AsyncIterator[Any]:
    """The session's PostgreSQL database, emptied (other tests' rows would add channels)."""
    engine = make_engine(pg_database)
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    async with engine.begin() as conn:
        await conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    yield engine
    await engine.dispose()


async def _schedule(engine: Any, channels: dict[int, int], at: dt.datetime) -> dict[int, int]:
    """Schedule each channel (id -> its guild) daily at ``at``'s minute; return channel id -> channel pk."""
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), SystemClock())
    service = ScheduleService(lambda: SqlUnitOfWork(factory), SystemClock(), quiz)
    for channel_id, guild_id in channels.items():
        ref = ChannelRef("discord", str(guild_id), str(channel_id), "general")
        await service.set_schedule(
            ADMIN, ref, post_time=f"{at:%H:%M}", timezone="UTC", days="daily", window="30m"
        )
    return {
        int(s.channel.channel_id): s.channel_pk
        for s in await service.schedules()
        if int(s.channel.channel_id) in channels
    }


async def _paused(engine: Any, expected: set[int]) -> set[int]:
    """The paused schedules' channel pks, once they are ``expected`` (or after 5 s)."""
    factory = session_factory(engine)
    service = ScheduleService(
        lambda: SqlUnitOfWork(factory),
        SystemClock(),
        QuizService(lambda: SqlUnitOfWork(factory), SystemClock()),
    )
    found: set[int] = set()
    for _ in range(50):  # the command's reply may come before its transaction commits: poll
        found = {s.channel_pk for s in await service.schedules() if s.config.paused}
        if found == expected:
            break
        await asyncio.sleep(0.1)
    return found


def _posts(fake: FakeDiscord, channel_id: int) -> int:
    """Challenge posts (embeds with a Start button) Discord accepted in a channel."""
    return sum(
        1
        for r in fake.calls("POST", rf"/channels/{channel_id}/messages")
        if r.body and r.body.get("embeds") and r.body.get("components")
    )


def _post_jobs(report: dict[str, Any]) -> set[int]:
    return {int(j["id"].split(":")[1]) for j in report["scheduler"]["jobs"] if j["id"].startswith("post:")}


async def test_two_shard_processes_post_each_guild_once_and_no_failover(
    fake: FakeDiscord, database: Any, tmp_path: Path
) -> None:
    first = {710 + n: guild_on(n % SHARDS, n) for n in range(6)}  # channel id -> guild, 3 per shard
    for channel_id, guild_id in first.items():
        fake.gateway.add_guild(guild_id, [channel_id])
    pks = await _schedule(database, first, dt.datetime.now(dt.UTC))  # this minute: posted at start
    shard_of_pk = {pks[c]: guild_shard(g, SHARDS) for c, g in first.items()}

    db_url = database.url.render_as_string(hide_password=False)
    a = Shard(0, db_url, fake, tmp_path)
    procs = [a]
    try:
        b = Shard(1, db_url, fake, tmp_path)
        procs.append(b)
        reports = [await a.wait_healthy(), await b.wait_healthy()]
        # Each process connected its own shard and got its three guilds only.
        assert sorted(fake.gateway.identified) == [(0, 2), (1, 2)]
        for shard, report in enumerate(reports):
            discord_health = report["adapters"]["discord"]
            assert discord_health["shards"] == f"{shard}/2" and discord_health["guilds"] == 3, report
            assert _post_jobs(report) == {pk for pk, s in shard_of_pk.items() if s == shard}

        # Every guild's challenge exactly once, by its shard's process.
        await fake.wait_for(lambda: all(_posts(fake, c) for c in first), timeout=60)
        await asyncio.sleep(1.5)  # a duplicate, if any, would have been made by now
        assert {c: _posts(fake, c) for c in first} == dict.fromkeys(first, 1)
        for shard, proc in enumerate((a, b)):
            assert sorted(proc.posted()) == sorted(pk for pk, s in shard_of_pk.items() if s == shard), (
                proc.output()
            )

        # Admin commands: Discord routes each to the process of its guild's shard, which handles it.
        interactions = Interactions(fake)
        paused: set[int] = set()
        for shard in (0, 1):
            channel_id = next(c for c, g in first.items() if guild_shard(g, SHARDS) == shard)
            payload = interactions.command_payload(
                "rankzero schedule pause",
                permissions=MANAGE_GUILD,
                channel_id=channel_id,
                guild_id=first[channel_id],
            )
            assert (
                await fake.gateway.dispatch_to_guild(first[channel_id], "INTERACTION_CREATE", payload)
                == shard
            )
            ack_id = int(payload["id"])
            await fake.wait_for(lambda: ack_id in fake.acknowledged, timeout=15)  # noqa: B023 - awaited here
            paused.add(pks[channel_id])
        assert await _paused(database, paused) == paused

        # B dies. The next minute's schedules: A posts its shard's channel; B's waits for B's restart.
        b.kill()
        now = dt.datetime.now(dt.UTC)
        slot = (now + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
        if (slot - now).total_seconds() < 8:  # too close to be picked up by the sync in time
            slot += dt.timedelta(minutes=1)
        second = {790: guild_on(0, 10), 791: guild_on(1, 11)}
        new_pks = await _schedule(database, second, slot)
        await fake.wait_for(lambda: _posts(fake, 790), timeout=(slot - now).total_seconds() + 45)
        await asyncio.sleep(3)  # past the slot: nobody posts in shard 1's channel
        assert _posts(fake, 790) == 1 and _posts(fake, 791) == 0
        a_report = await a.health()
        assert a_report is not None and new_pks[791] not in _post_jobs(a_report), (
            "A never takes over B's guilds"
        )
        assert sorted(a.posted()) == sorted([*(pk for pk, s in shard_of_pk.items() if s == 0), new_pks[790]])
        assert a.stop() == 0
    finally:
        for proc in procs:
            if proc.proc.poll() is None:
                proc.kill()
    assert "Traceback" not in a.log.read_text(errors="replace")
