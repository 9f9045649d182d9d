"""Discord sharding (issue 17): the shard setting, guild -> shard ownership, and the fake gateway's routing.

The gateway tests connect discord.py's real AutoShardedClient (and RankZero's adapter) to the fake gateway
(tests/discord_fake.py): each connection gets only its shards' guilds and interactions, and a bad IDENTIFY
is closed with Discord's code. The scheduler's part, with two real ``rankzero serve`` processes, is in
tests/bot/test_serve_shards.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import discord
import pytest
import yarl
from discord.gateway import DiscordWebSocket
from pydantic import SecretStr, ValidationError

from bot.adapters.discord.app import DiscordAdapter
from bot.config import Settings
from bot.core.models import ChannelRef, OpenWindow
from bot.core.schedule import Schedule, ScheduleConfig
from bot.core.sharding import MAX_SHARDS, ShardSet, ordinal_of, parse_shards, shard_of, shard_of_pod
from bot.scheduling import RankZeroScheduler
from tests.discord_fake import (
    CLOSE_AUTHENTICATION_FAILED,
    CLOSE_INVALID_SHARD,
    CLOSE_SHARDING_REQUIRED,
    FakeDiscord,
    Interactions,
    guild_shard,
)
from tests.fakes import FrozenClock

ROOT = Path(__file__).resolve().parents[4]


def guild_on(shard: int, count: int, n: int = 0) -> int:
    """A guild id (a snowflake) that Discord puts on ``shard`` of ``count``."""
    return ((count * (1000 + n) + shard) << 22) | 12345


# ---------------------------------------------------------------------- the setting
@pytest.mark.parametrize(
    ("text", "ids", "count"), [("0/1", (0,), 1), ("1,0/4", (0, 1), 4), (" 3 / 4 ", (3,), 4)]
)
def test_parse_shards(text: str, ids: tuple[int, ...], count: int) -> None:
    assert parse_shards(text) == ShardSet(ids, count)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("2/2", "shard id(s) [2] outside 0..1"),
        ("0,0/2", "shard id(s) [0] given twice"),
        ("0,1", 'write it as "IDS/COUNT"'),
        ("a/2", "whole numbers"),
        ("0/0", "count must be between 1"),
        ("-1/2", "outside 0..1"),
    ],
)
def test_bad_shards_are_refused_with_one_line(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_shards(text)
    assert says in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ValidationError) as settings_error:
        Settings(discord_shards=text, database_url="sqlite+aiosqlite:///:memory:")
    assert "discord_shards" in str(settings_error.value) and says in str(settings_error.value)


def test_a_huge_shard_list_is_parsed_and_echoed_short() -> None:
    """Every id of the largest count parses (the duplicate check was quadratic, about 75 s for 100,000
    ids: benchmarks/runner_bounds.py times it), and a pasted blob is echoed cut, not whole."""
    text = ",".join(map(str, range(MAX_SHARDS))) + f"/{MAX_SHARDS}"
    assert parse_shards(text).count == MAX_SHARDS
    with pytest.raises(ValueError, match="whole numbers") as caught:
        parse_shards("9" * 5000 + "/x")
    assert len(str(caught.value)) < 300


def test_serve_stops_on_bad_shards_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env |= {
        "RANKZERO_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'x.db'}",
        "RANKZERO_DISCORD_TOKEN": "secret-token-value",
        "RANKZERO_DISCORD_SHARDS": "1,2/2",
    }
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: bad RankZero settings: discord_shards (RANKZERO_DISCORD_SHARDS): shards '1,2/2': shard id(s) "
        "[2] outside 0..1 (ids are 0 to count - 1)"
    ]
    assert not (tmp_path / "x.db").exists()


def test_without_the_setting_one_process_serves_every_guild() -> None:
    assert Settings(database_url="sqlite+aiosqlite:///:memory:").discord_shard_set is None
    settings = Settings(discord_shards="1/2", database_url="sqlite+aiosqlite:///:memory:")
    assert settings.discord_shard_set == ShardSet((1,), 2)


def test_a_statefulset_pod_runs_the_shard_of_its_ordinal(monkeypatch: pytest.MonkeyPatch) -> None:
    # deploy/bot.yaml: one shard per pod, the id from the pod's ordinal, the count = the replicas.
    assert ordinal_of("rankzero-bot-0") == 0 and ordinal_of("rankzero-bot-12") == 12
    assert shard_of_pod("rankzero-bot-2", 3) == ShardSet((2,), 3)
    assert shard_of_pod("whatever", 3, index=1) == ShardSet((1,), 3)  # the downward API's pod-index wins
    for bad in ("rankzero-bot", "laptop", "rankzero-bot-01", "rankzero-bot--1", "x" * 500):
        with pytest.raises(ValueError, match="does not end in -<ordinal>") as raised:
            ordinal_of(bad)
        assert len(str(raised.value)) < 300  # a pasted blob is cut
    too_many = r"shard 3 .* outside 0\.\.2: RANKZERO_DISCORD_SHARD_COUNT=3 must equal"
    with pytest.raises(ValueError, match=too_many):
        shard_of_pod("rankzero-bot-3", 3)  # scaled to 4 replicas without changing the count

    monkeypatch.setattr("socket.gethostname", lambda: "rankzero-bot-1")
    memory = "sqlite+aiosqlite:///:memory:"
    assert Settings(discord_shard_count=2, database_url=memory).discord_shard_set == ShardSet((1,), 2)
    pinned = Settings(discord_shard_count=2, discord_shard_index=0, database_url=memory)
    assert pinned.discord_shard_set == ShardSet((0,), 2)
    with pytest.raises(ValidationError, match=r"outside 0\.\.0"):
        Settings(discord_shard_count=1, database_url=memory)
    with pytest.raises(ValidationError, match="both set"):
        Settings(discord_shard_count=2, discord_shards="0/2", database_url=memory)
    monkeypatch.setattr("socket.gethostname", lambda: "laptop")
    with pytest.raises(ValidationError, match="RANKZERO_DISCORD_SHARD_INDEX"):
        Settings(discord_shard_count=2, database_url=memory)


def test_ownership_follows_discords_formula() -> None:
    # Discord's own example (docs: Gateway, "Sharding Formula"): this guild is on shard 1 of 2... computed
    # here by the fake's independent copy of the formula, so the two cannot drift apart unnoticed.
    for count in (1, 2, 3, 16):
        for n in range(20):
            guild = guild_on(n % count, count, n)
            assert shard_of(guild, count) == guild_shard(guild, count) == n % count
    zero, one = ShardSet((0,), 2), ShardSet((1,), 2)
    on_one = ChannelRef("discord", str(guild_on(1, 2)), "5")
    assert one.owns(on_one) and not zero.owns(on_one)
    # Discord DMs: Discord sends them to shard 0 only.
    dm = ChannelRef("discord", "dm", "9")
    assert zero.owns(dm) and not one.owns(dm)
    # Not sharded: Slack, the console and the file platform are served by every process (issue 26: any
    # replica answers Slack; the database's claims make each scheduled post once).
    for unsharded in (ChannelRef("slack", "T1", "C1"), ChannelRef("console", "local", "x")):
        assert zero.owns(unsharded) and one.owns(unsharded)


# ---------------------------------------------------------------------- the scheduler's filter
class _Schedules:
    """What RankZeroScheduler reads from ScheduleService, over a fixed list (no database needed)."""

    def __init__(self, schedules: list[Schedule]) -> None:
        self._schedules = schedules

    async def schedules(self) -> list[Schedule]:
        return self._schedules

    async def open_windows(self) -> list[OpenWindow]:
        return []

    async def end_windowless(self) -> list[int]:
        return []

    def subscribe(self, _: Any) -> None:
        pass


async def test_the_scheduler_makes_jobs_only_for_its_shards_channels() -> None:
    channels = [
        ChannelRef("discord", str(guild_on(0, 2, 1)), "10"),
        ChannelRef("discord", str(guild_on(1, 2, 2)), "11"),
        ChannelRef("slack", "T1", "C1"),
    ]
    now = dt.datetime(2026, 1, 5, 12, tzinfo=dt.UTC)
    config = ScheduleConfig(hour=9, minute=0, timezone="UTC")
    schedules = [Schedule(pk, channel, config, now) for pk, channel in enumerate(channels, 1)]

    jobs = {}
    for shards in (ShardSet((0,), 2), ShardSet((1,), 2)):
        scheduler = RankZeroScheduler(
            _Schedules(schedules),  # type: ignore[arg-type]
            FrozenClock(now),
            platforms=frozenset({"discord", "slack"}),
            owns=shards.owns,
        )
        await scheduler.rebuild()
        jobs[str(shards)] = {j.id for j in scheduler.jobs.jobs()}
    # The Slack channel (pk 3) is scheduled by both processes: its claims in the database post it once.
    assert jobs == {"0/2": {"post:1", "post:3"}, "1/2": {"post:2", "post:3"}}


# ---------------------------------------------------------------------- the fake gateway
@pytest.fixture
async def gateway(fake: FakeDiscord, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """The fake with four guilds, two per shard of 2, and discord.py's gateway URL pointed at it."""
    monkeypatch.setattr(
        DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.root.replace("http", "ws") + "/gateway")
    )
    for n in range(4):
        fake.gateway.add_guild(guild_on(n % 2, 2, n), [700 + n])
    yield fake


async def _connected(client: discord.AutoShardedClient) -> asyncio.Task[None]:
    await client.login("token")
    runner = asyncio.create_task(client.connect(reconnect=False))
    await asyncio.wait_for(client.wait_until_ready(), 20)
    return runner


async def _closed(client: discord.Client, runner: asyncio.Task[None]) -> None:
    await client.close()
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


async def test_each_shard_gets_only_its_guilds_and_interactions(gateway: FakeDiscord) -> None:
    adapters = [DiscordAdapter("token", shards=ShardSet((shard,), 2)) for shard in (0, 1)]
    runners = [await _connected(a.client) for a in adapters]  # type: ignore[arg-type]
    try:
        assert sorted(gateway.gateway.identified) == [(0, 2), (1, 2)]
        for shard, adapter in enumerate(adapters):
            expected = {g for g in gateway.gateway.guilds if guild_shard(g, 2) == shard}
            assert {g.id for g in adapter.client.guilds} == expected and len(expected) == 2
            health = adapter.health()
            assert health["ok"] and health["guilds"] == 2 and health["shards"] == f"{shard}/2"

        # An interaction from a guild on shard 1 reaches only shard 1's process.
        guild = next(g for g in gateway.gateway.guilds if guild_shard(g, 2) == 1)
        payload = Interactions(gateway)._base(3, 111, "alice", 0, [], 701)
        payload |= {"guild_id": str(guild), "data": {"custom_id": "not-ours", "component_type": 2}}
        payload["channel"]["guild_id"] = str(guild)
        zero, one = (asyncio.ensure_future(a.client.wait_for("interaction")) for a in adapters)
        await asyncio.sleep(0)
        assert await gateway.gateway.dispatch_to_guild(guild, "INTERACTION_CREATE", payload) == 1
        heard = await asyncio.wait_for(one, 20)
        assert isinstance(heard, discord.Interaction) and heard.guild_id == guild
        # Shard 1's process has it: a copy sent on shard 0's connection too would have come with it.
        done, _ = await asyncio.wait({zero}, timeout=0.5)
        zero.cancel()
        assert not done, "shard 0's process never hears of shard 1's guild"
    finally:
        for adapter, runner in zip(adapters, runners, strict=True):
            await _closed(adapter.client, runner)
    gateway.take_rejections()  # the unknown button may be answered or not: not this test's subject


@pytest.mark.parametrize(
    ("shard_ids", "count", "min_shards", "token", "code"),
    [
        ([2], 2, 1, "token", CLOSE_INVALID_SHARD),
        ([0], 2, 4, "token", CLOSE_SHARDING_REQUIRED),
        ([0], 2, 1, "another bot's token", CLOSE_AUTHENTICATION_FAILED),
    ],
)
async def test_a_bad_identify_is_closed_as_discord_does(
    gateway: FakeDiscord, shard_ids: list[int], count: int, min_shards: int, token: str, code: int
) -> None:
    gateway.gateway.min_shards = min_shards
    gateway.gateway.token = token
    client = discord.AutoShardedClient(
        intents=discord.Intents(guilds=True), shard_ids=shard_ids, shard_count=count
    )
    await client.login("token")  # the fake's REST API takes any token; its gateway checks it
    with pytest.raises(discord.ConnectionClosed) as closed:
        await asyncio.wait_for(client.connect(reconnect=True), 20)
    assert closed.value.code == code and gateway.gateway.refused == [code]
    assert gateway.gateway.identified == [] and not client.guilds
    await client.close()


async def test_servers_not_in_the_allow_list_are_left_and_logged(
    gateway: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24: with RANKZERO_ALLOWED_TENANTS set, the bot leaves every other server it is in when it
    connects (Leave Guild) and says so in the log; an allowed server is kept.
    """
    guilds = sorted(gateway.gateway.guilds)
    keep = guilds[0]
    settings = Settings(
        discord_token=SecretStr("token"),
        allowed_tenants=[f"discord:{keep}", "slack:T1"],
        database_url="sqlite+aiosqlite:///:memory:",
    )
    adapter = DiscordAdapter("token", sharded=True, allowed=settings.tenant_allow_list)
    caplog.set_level("WARNING", logger="bot.adapters.discord.app")
    runner = await _connected(adapter.client)  # type: ignore[arg-type]
    try:
        deadline = time.monotonic() + 10
        while len(gateway.left_guilds) < len(guilds) - 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert sorted(gateway.left_guilds) == guilds[1:]
        assert list(gateway.gateway.guilds) == [keep]
        logged = "\n".join(r.getMessage() for r in caplog.records)
        for guild in guilds[1:]:
            assert f"leaving Discord server {guild}" in logged and "RANKZERO_ALLOWED_TENANTS" in logged
    finally:
        await _closed(adapter.client, runner)


def test_a_bad_allow_list_entry_is_refused_with_the_setting_named() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(allowed_tenants=["discord:1", "just-a-guild-id"], database_url="sqlite://")
    assert "allowed_tenants" in str(caught.value) and "just-a-guild-id" in str(caught.value)
