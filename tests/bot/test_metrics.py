"""The bot's Prometheus metrics, scraped over real HTTP from the health server after real work: posts made
and refused, answers, scheduler lag, the database pool; Discord's acknowledgements and 429s through
discord.py against the local fake of its API.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.adapters.discord.app import DiscordAdapter
from bot.bootstrap import build_services
from bot.config import Settings
from bot.core.models import ChannelRef
from bot.core.service import QuizService
from bot.logs import current_context
from bot.metrics import BotMetrics, MeteredPlatform, route_template
from bot.serve import HealthServer
from bot.storage.db import make_engine
from tests.bootstrap import build_test_services
from tests.conftest import ADMIN, CHANNEL, actor, test_bank
from tests.discord_fake import CHANNEL_ID, GUILD_ID, FakeDiscord, Interactions
from tests.fakes import FakePlatform, FrozenClock

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(port: int) -> tuple[str, Samples]:
    """GET /metrics over a real socket: the Content-Type and every sample by (name, labels)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split()[1] == b"200", head
    content_type = next(
        line.split(b":", 1)[1].strip().decode()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-type:")
    )
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return content_type, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


class _Adapter:
    """The Adapter shape over the recording FakePlatform (what serve wires is under test, not a chat API)."""

    def __init__(self, name: str, platform: Any) -> None:
        self.name = name
        self.platform = platform

    async def start(self, services: Any) -> None:
        pass

    async def stop(self) -> None:
        pass


async def test_counters_move_after_posts_answers_and_a_scheduled_job(db_url: str, clock: FrozenClock) -> None:
    settings = Settings(database_url=db_url, allowed_tenants=["test:ws1"], db_pool_size=3, db_pool_overflow=2)
    metrics = BotMetrics()
    health = HealthServer(None, 0, metrics=metrics)
    await health.start()
    platform = FakePlatform()
    services = await build_services(
        settings, [_Adapter("test", platform)], clock=clock, migrate=False, metrics=metrics
    )
    try:
        _, before = await scrape(health.port)
        assert value(before, "rankzero_answers_total", platform="test", result="correct") == 0
        # Before any work the families are there, with the pool's bound (SQLite: one connection).
        assert ("rankzero_db_pool_connections_in_use", frozenset()) in before
        pool_max = 1 if db_url.startswith("sqlite") else 5
        assert value(before, "rankzero_db_pool_connections_max") == pool_max

        await services.quiz.admin_import(ADMIN, test_bank())
        card = await services.quiz.post_daily(CHANNEL)
        # A channel of a tenant the allow-list does not serve: nothing is posted, the refusal counted.
        await services.quiz.post_daily(ChannelRef("test", "ws2", "elsewhere", "elsewhere"))
        alice, bob = actor("alice"), actor("bob")
        problem = card.problems[0].problem_id
        for player, letter in ((alice, "A"), (bob, "B")):
            await services.quiz.start_problem(player, problem)
            await services.quiz.answer(
                player, problem, letter, idempotency_key=f"key-{player.player.user_id}"
            )
        # A redelivered answer (same key) changes nothing and is not counted again.
        await services.quiz.answer(alice, problem, "A", idempotency_key="key-alice")

        # A scheduled post that starts 3 s after its slot (the clock is frozen: the lag is exact).
        other = ChannelRef("test", "ws1", "daily", "daily")
        await services.schedules.set_schedule(ADMIN, other, post_time="09:30", timezone="UTC")
        await services.scheduler.start()
        clock.current = dt.datetime(2026, 11, 21, 9, 30, 3, tzinfo=dt.UTC)
        await services.scheduler.tick()

        content_type, after = await scrape(health.port)
        assert content_type.startswith("text/plain; version=0.0.4")
        assert value(after, "rankzero_answers_total", platform="test", result="correct") == 1
        assert value(after, "rankzero_answers_total", platform="test", result="wrong") == 1
        assert value(after, "rankzero_posts_total", platform="test", kind="challenge") == 2
        assert value(after, "rankzero_posts_refused_total", platform="test", reason="tenant_not_allowed") == 1
        assert len(platform.posts) == 2
        assert value(after, "rankzero_scheduler_lag_seconds_count", job="post") == 1
        assert value(after, "rankzero_scheduler_lag_seconds_sum", job="post") == pytest.approx(3.0)
        assert value(after, "rankzero_scheduler_lag_seconds_bucket", job="post", le="2.5") == 0
        assert value(after, "rankzero_scheduler_lag_seconds_bucket", job="post", le="5.0") == 1
        assert value(after, "rankzero_db_pool_connections_in_use") == 0  # every connection returned
    finally:
        await services.scheduler.shutdown()
        await services.app.close()
        await health.stop()


async def test_the_pool_gauge_counts_a_connection_held_open(db: str) -> None:
    metrics = BotMetrics()
    engine = make_engine(db)
    metrics.watch_pool(lambda: engine.sync_engine.pool.checkedout(), 1)  # type: ignore[attr-defined]
    health = HealthServer(None, 0, metrics=metrics)
    await health.start()
    try:
        async with engine.connect():
            _, held = await scrape(health.port)
        _, released = await scrape(health.port)
        assert value(held, "rankzero_db_pool_connections_in_use") == 1
        assert value(released, "rankzero_db_pool_connections_in_use") == 0
    finally:
        await health.stop()
        await engine.dispose()


class _Refusing(FakePlatform):
    async def post_challenge(self, channel: ChannelRef, card: Any) -> str | None:
        raise ConnectionError("the platform did not answer")


async def test_a_post_the_platform_fails_is_counted_as_refused(
    service: QuizService, clock: FrozenClock
) -> None:
    metrics = BotMetrics()
    metered = MeteredPlatform(_Refusing(), "test", metrics)
    with pytest.raises(ConnectionError):
        await metered.post_challenge(CHANNEL, object())  # type: ignore[arg-type]
    assert metrics.posts_refused.labels("test", "platform_error")._value.get() == 1
    assert metrics.posts.labels("test", "challenge")._value.get() == 0


def test_each_metrics_object_has_its_own_registry() -> None:
    first, second = BotMetrics(), BotMetrics()  # no "Duplicated timeseries" error: not the global registry
    first.answer_recorded("test", True)
    assert b'rankzero_answers_total{platform="test",result="correct"} 1.0' in first.render()
    assert b"rankzero_answers_total{" not in second.render()


def test_route_templates_keep_ids_and_tokens_out_of_labels() -> None:
    token = "aW50ZXJhY3Rpb246MTIzNDU2Nzg5MDpUT0tFTg"
    assert route_template("post", f"/api/v10/interactions/123456789/{token}/callback") == (
        "POST /interactions/:id/:token/callback"
    )
    assert route_template("POST", "/api/v10/channels/42/messages?wait=true") == "POST /channels/:id/messages"
    assert (
        route_template("PATCH", "/webhooks/1/abc/messages/@original")
        == "PATCH /webhooks/:id/:token/messages/@original"
    )
    assert "\n" not in route_template("GET", "/x\n# HELP fake 1")


async def test_discord_acknowledgements_and_rate_limits_are_measured(
    fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    metrics = BotMetrics()
    adapter = DiscordAdapter("test-token", clock=clock)
    services = await build_test_services(db, [adapter], clock=clock, bank=test_bank(), metrics=metrics)
    quiz = services.quiz
    health = HealthServer(None, 0, metrics=metrics)
    await health.start()
    try:
        await adapter.client.login("test-token")
        adapter.attach(services)
        act = Interactions(fake)
        act.join_guild(adapter.client)
        # What the button handler's log lines would carry (bot/logs.py), seen from inside the handler.
        contexts: list[dict[str, str]] = []
        assert adapter.play is not None
        real = adapter.play.on_button

        async def spy(interaction: Any, action: str, args: Any) -> Any:
            contexts.append(current_context())
            return await real(interaction, action, args)

        adapter.play.on_button = spy  # type: ignore[method-assign]
        channel = ChannelRef("discord", str(GUILD_ID), str(CHANNEL_ID), "general")
        # The daily post is answered 429 once: discord.py waits and retries it.
        fake.rate_limit_next("POST", rf"/channels/{CHANNEL_ID}/messages", retry_after=0.05)
        await quiz.post_daily(channel)
        assert [r[0] for r in fake.take_rejections()] == [429]
        post = max(fake.messages)
        start = next(
            c["custom_id"]
            for row in fake.messages[post]["components"]
            for c in row["components"]
            if c["label"] == "Start"
        )
        token = act.click(adapter.client, post, start)
        await fake.wait_for(lambda: fake.calls("PATCH", rf"/webhooks/\d+/{token}/messages/@original"))
        eph = fake.originals[token]
        answer = act.click(
            adapter.client, eph, fake.messages[eph]["components"][0]["components"][0]["custom_id"]
        )
        await fake.wait_for(lambda: fake.calls("PATCH", rf"/webhooks/\d+/{answer}/messages/@original"))

        _, samples = await scrape(health.port)
        method = "POST /channels/:id/messages"
        assert value(samples, "rankzero_rate_limit_retries_total", platform="discord", method=method) == 1
        # Two clicks, each acknowledged once (a deferral), each timed from its arrival.
        assert value(samples, "rankzero_interaction_ack_seconds_count", platform="discord") == 2
        assert value(samples, "rankzero_interaction_ack_seconds_bucket", platform="discord", le="+Inf") == 2
        assert value(samples, "rankzero_answers_total", platform="discord", result="correct") == 1
        assert not any(token in name or any(token in v for _, v in labels) for name, labels in samples)
        assert len(contexts) == 2
        for context in contexts:
            assert context["tenant"] == f"discord:{GUILD_ID}" and context["channel"] == str(CHANNEL_ID)
            assert context["request_id"].startswith("discord:")
        assert contexts[0]["request_id"] != contexts[1]["request_id"]
    finally:
        await health.stop()
        await adapter.stop()
        await services.app.close()


async def test_slack_acknowledgements_and_rate_limits_are_measured(
    tmp_path: Path, sqlite_template: Path
) -> None:
    from tests.bot.adapters.slack.test_slack_adapter import _harness

    async for h in _harness(tmp_path, sqlite_template, test_bank()):
        metrics = h.services.metrics
        assert metrics is not None
        health = HealthServer(None, 0, metrics=metrics)
        await health.start()
        try:
            challenge_id = await h.post_challenge()  # a signed slash command, acknowledged
            # views.update: a burst of one, then one a second: three players' problems cannot all go at once.
            h.api.limits["views.update"] = (1, 1.0)
            players = ["UMETRIC1", "UMETRIC2", "UMETRIC3"]
            clicks = await asyncio.gather(*(h.send.click(p, f"rz:start:{challenge_id}") for p in players))
            assert all(r.status_code == 200 for r in clicks)
            await h.api.wait_for("views.update", len(players), timeout=60)
            _, samples = await scrape(health.port)
            assert value(samples, "rankzero_interaction_ack_seconds_count", platform="slack") == 4
            assert (
                value(samples, "rankzero_rate_limit_retries_total", platform="slack", method="views.update")
                >= 1
            )
            assert value(
                samples, "rankzero_rate_limit_retries_total", platform="slack", method="views.update"
            ) == (sum(1 for m, e in h.api.refused if (m, e) == ("views.update", "ratelimited")))
            assert value(samples, "rankzero_posts_total", platform="slack", kind="challenge") == 1
        finally:
            await health.stop()


@pytest.mark.slow
def test_a_serve_process_counts_its_post_and_logs_json_lines(db: str, tmp_path: Path) -> None:
    import json
    import os
    import signal
    import subprocess
    import time
    import urllib.request

    from tests.bot.test_serve_process import RANKZERO, ROOT, _schedule_now, _wait_for
    from tests.net import free_port

    _schedule_now(db)
    record, log, port = tmp_path / "posts.jsonl", tmp_path / "serve.log", free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env |= {
        "RANKZERO_DATABASE_URL": db,
        "RANKZERO_RECORD_FILE": str(record),
        "RANKZERO_HEALTH_PORT": str(port),
        "RANKZERO_LOG_FORMAT": "json",
    }
    with log.open("wb") as out:
        proc = subprocess.Popen([*RANKZERO, "serve"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for(record, "post", 1)
            posts = 0.0
            for _ in range(300):  # polls: the counter moves right after the post is written
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    page = resp.read().decode()
                samples = {
                    (sample.name, frozenset(sample.labels.items())): sample.value
                    for family in text_string_to_metric_families(page)
                    for sample in family.samples
                }
                posts = value(samples, "rankzero_posts_total", platform="file", kind="challenge")
                if posts:
                    break
                time.sleep(0.1)
            assert posts == 1
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    posted = [line for line in lines if line["message"].startswith("post for channel")]
    assert posted and posted[0]["request_id"] == "job:post:1", posted
