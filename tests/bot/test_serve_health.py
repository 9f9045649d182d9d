"""/healthz over real HTTP on loopback: scheduler state, next runs, database reachability."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import pytest

from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.scheduling import RankZeroScheduler
from bot.serve import HealthServer, health_report
from bot.storage.db import make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, CHANNEL
from tests.fakes import FakePlatform, FrozenClock


async def _get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def test_healthz_reports_jobs_and_database(db_url: str, clock: FrozenClock) -> None:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, FakePlatform())
    schedules = ScheduleService(lambda: SqlUnitOfWork(factory), clock, quiz)
    await schedules.set_schedule(ADMIN, CHANNEL, post_time="23:00", timezone="UTC")
    scheduler = RankZeroScheduler(schedules, clock)
    await scheduler.start()
    server = HealthServer(lambda: health_report(engine, scheduler), 0)
    await server.start()
    unreachable = make_engine("postgresql+asyncpg://postgres@127.0.0.1:1/nowhere")
    down = HealthServer(lambda: health_report(unreachable, scheduler), 0)
    await down.start()
    try:
        status, body = await _get(server.port, "/healthz")
        assert status == 200 and body["ok"] and body["database"] == {"ok": True}
        assert body["scheduler"]["state"] == "running"
        jobs = {j["id"]: j["next_run"] for j in body["scheduler"]["jobs"]}
        assert dt.datetime.fromisoformat(jobs["post:1"]) == dt.datetime(2026, 11, 21, 23, 0, tzinfo=dt.UTC)

        status, body = await _get(down.port, "/healthz")
        assert status == 503 and not body["ok"] and not body["database"]["ok"]
        assert "error" in body["database"]

        status, body = await _get(server.port, "/metrics")
        assert status == 404

        await scheduler.shutdown()
        await asyncio.sleep(0.05)  # APScheduler's shutdown runs on the loop
        status, body = await _get(server.port, "/healthz")
        assert status == 503 and body["scheduler"]["state"] == "stopped"
    finally:
        await server.stop()
        await down.stop()
        await unreachable.dispose()
        await engine.dispose()


async def test_livez_answers_while_readiness_waits_and_any_address_can_be_probed() -> None:
    # Bound as serve binds it first (no report yet: "starting") on every interface, as in a container.
    server = HealthServer(None, 0, "0.0.0.0")
    await server.start()
    try:
        status, body = await _get(server.port, "/livez")
        assert (status, body) == (200, {"ok": True, "alive": True})  # liveness asks nothing of the database
        for path in ("/readyz", "/healthz"):
            status, body = await _get(server.port, path)
            assert status == 503 and body["ok"] is False, path
        server.set_report(_always_ok)
        for path in ("/readyz", "/healthz", "/readyz?verbose=1"):
            assert (await _get(server.port, path))[0] == 200, path
        assert (await _get(server.port, "/live"))[0] == 404
    finally:
        await server.stop()


async def _always_ok() -> dict[str, Any]:
    return {"ok": True}


def test_the_health_host_must_be_an_address(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from bot.config import Settings

    assert Settings(_env_file=None).health_host == "127.0.0.1"  # type: ignore[call-arg]  # pydantic-settings: _env_file is hidden from mypy by the dataclass_transform signature
    assert Settings(_env_file=None, health_host=" 0.0.0.0 ").health_host == "0.0.0.0"  # type: ignore[call-arg]  # pydantic-settings: _env_file is hidden from mypy by the dataclass_transform signature
    with pytest.raises(ValidationError, match="RANKZERO_HEALTH_HOST='localhost' is not an IP address"):
        Settings(_env_file=None, health_host="localhost")  # type: ignore[call-arg]  # pydantic-settings: _env_file is hidden from mypy by the dataclass_transform signature


async def test_a_request_head_is_bounded() -> None:
    """A client that sends header lines without end, or one endless line, gets no answer and no hold."""
    server = HealthServer(_always_ok, 0)
    await server.start()
    try:
        for head in (
            b"GET /healthz HTTP/1.1\r\n" + b"X-Pad: 1\r\n" * 100 + b"\r\n",
            b"GET /healthz HTTP/1.1\r\nX-Long: " + b"x" * 100_000 + b"\r\n\r\n",
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(head)
            await writer.drain()
            try:  # closed unanswered: an end of stream, or a reset when bytes were left unread
                answer = await asyncio.wait_for(reader.read(), timeout=30)
            except ConnectionResetError:
                answer = b""
            assert answer == b""
            writer.close()
        assert (await _get(server.port, "/healthz"))[0] == 200  # and it still serves
    finally:
        await server.stop()


async def test_a_flood_of_probes_shares_one_report_at_a_time() -> None:
    # Each report checks out a database connection: 50 probes at once must not take 50 of them.
    running, most, calls = [0], [0], [0]
    release = asyncio.Event()

    async def report() -> dict[str, Any]:
        calls[0] += 1
        running[0] += 1
        most[0] = max(most[0], running[0])
        await release.wait()
        running[0] -= 1
        return {"ok": True}

    server = HealthServer(report, 0)
    await server.start()
    try:
        probes = [asyncio.create_task(_get(server.port, "/readyz")) for _ in range(50)]
        for _ in range(500):
            if calls[0]:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the rest of the flood arrives while the first report runs
        release.set()
        answers = await asyncio.gather(*probes)
        assert all(status == 200 and body == {"ok": True} for status, body in answers)
        assert most[0] == 1 and calls[0] < 50
        assert await _get(server.port, "/readyz") == (200, {"ok": True})  # a later probe: a fresh report
        assert calls[0] >= 2
    finally:
        await server.stop()
