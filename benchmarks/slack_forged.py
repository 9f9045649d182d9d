"""What a forged request to /slack/events costs the bot's one event loop, before and after issue 24.

Usage: python benchmarks/slack_forged.py [--runs 20]

Two servers over the same Bolt app (RankZero's error handler installed), on loopback:
  * before: the old handler (Bolt's aiohttp adapter builds the request, which parses the body, then
    dispatches; Bolt checks the signature after parsing, aiohttp caps bodies at 1 MiB);
  * after:  ``SlackHttpServer`` (headers, size and HMAC checked on the raw bytes first).
Each gets ``--runs`` unsigned requests of each shape: 600 KB of nested JSON and 600 KB of flat JSON
(both over the new cap), and 200 KB of nested JSON (under it). Logging is at INFO, as in ``rankzero serve``,
written to /dev/null. Prints per shape and server: the status answered, the median and max wall time of
a request, and the longest the event loop was blocked (a 1 ms heartbeat's worst lateness), which is what
every other user of the process (Discord, the scheduler, clicks) waits.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.slack import failures
from bot.adapters.slack.app import EVENTS_PATH, SlackHttpServer
from bot.adapters.slack.verify import SlackRequestVerifier

SECRET = "benchmark-signing-secret"
T = TypeVar("T")


def nested(depth: int) -> bytes:
    return ('{"a":' * depth + "1" + "}" * depth).encode()


def wide(count: int) -> bytes:
    return ("[" + ",".join('{"a":[1,2]}' for _ in range(count)) + "]").encode()


SHAPES = {
    "600 KB nested": nested(100_000),
    "600 KB wide": wide(50_000),
    "200 KB nested": nested(33_000),
}


async def serve_before(app: AsyncApp) -> tuple[web.AppRunner, str]:
    """The handler as it was: parse first (Bolt's adapter), verify inside Bolt."""

    async def handle(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    web_app = web.Application()
    web_app.add_routes([web.post(EVENTS_PATH, handle)])
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}{EVENTS_PATH}"


class ServerLoop:
    """The servers' event loop, in its own thread (as in ``rankzero serve``, the client is elsewhere), with
    a 1 ms heartbeat that records how late it wakes: how long the loop was blocked.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.worst = 0.0
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    async def heartbeat(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            self.worst = max(self.worst, time.perf_counter() - before - 0.001)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


async def build_servers() -> tuple[list[Callable[[], Awaitable[None]]], dict[str, str]]:
    app = AsyncApp(client=AsyncWebClient(token="xoxb-unused"), signing_secret=SECRET)
    failures.install(app, app.client)
    before_runner, before_url = await serve_before(app)
    after = SlackHttpServer(app, "127.0.0.1", 0, verifier=SlackRequestVerifier(SECRET))
    await after.start()
    after_url = f"http://127.0.0.1:{after.port}{EVENTS_PATH}"
    return [before_runner.cleanup, after.stop], {"before": before_url, "after": after_url}


def measure(server: ServerLoop, url: str, body: bytes, runs: int) -> tuple[set[int], list[float], float]:
    """Statuses, per-request wall times and the server loop's worst lateness while sending ``body``."""
    statuses: set[int] = set()
    took: list[float] = []
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": str(int(time.time())),
        "X-Slack-Signature": "v0=" + "0" * 64,
    }
    time.sleep(0.5)  # let the previous shape's leftovers (garbage collection, logging) finish first
    server.worst = 0.0
    with httpx.Client(timeout=30) as http:
        for _ in range(runs):
            started = time.perf_counter()
            r = http.post(url, content=body, headers=headers)
            took.append(time.perf_counter() - started)
            statuses.add(r.status_code)
    return statuses, took, server.worst


def main(runs: int) -> None:
    server = ServerLoop()
    beat = asyncio.run_coroutine_threadsafe(server.heartbeat(), server.loop)
    stops, servers = server.run(build_servers())
    print(f"{runs} unsigned requests per shape and server (loopback; times in ms)")
    print(f"{'shape':<15} {'server':<7} {'status':<10} {'median':>8} {'max':>8} {'loop blocked':>13}")
    results: dict[tuple[str, str], float] = {}
    for shape, body in SHAPES.items():
        for name, url in servers.items():
            statuses, took, worst = measure(server, url, body, runs)
            med = statistics.median(took) * 1000
            results[(shape, name)] = med
            status = ",".join(map(str, sorted(statuses)))
            print(
                f"{shape:<15} {name:<7} {status:<10} {med:8.1f} {max(took) * 1000:8.1f} {worst * 1000:13.1f}"
            )
    for shape in SHAPES:
        ratio = results[(shape, "before")] / results[(shape, "after")]
        print(f"{shape}: before / after (median) = {ratio:.1f}x")
    beat.cancel()
    for stop in stops:
        server.run(stop())
    server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    # Logging as `rankzero serve` does (INFO), into the void: formatting the old path's traceback per
    # request is part of its cost, printing it is not.
    logging.basicConfig(level=logging.INFO, stream=open(os.devnull, "w"))  # noqa: SIM115
    main(parser.parse_args().runs)
