"""Starting the chat adapters in ``rankzero serve``: a failure is one clear error, a stop signal always wins.

The adapters here are small real objects with the Adapter shape; what is tested is serve's own start
sequence (bot.serve._start_adapters), which has no platform code in it.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from bot.adapters.registry import Adapter
from bot.serve import AdapterStartError, _start_adapters
from bot.services import Services


class _Adapter:
    """Records start/stop; ``start`` fails, hangs (a platform that keeps retrying) or returns."""

    def __init__(self, name: str, behaviour: str = "ok") -> None:
        self.name = name
        self.platform: Any = None
        self.behaviour = behaviour
        self.events: list[str] = []

    async def start(self, services: Services) -> None:
        self.events.append("start")
        if self.behaviour == "fail":
            raise ConnectionError("Cannot connect to host chat.example:443")
        if self.behaviour == "hang":
            await asyncio.Event().wait()

    async def stop(self) -> None:
        self.events.append("stop")


SERVICES = cast(Services, object())


async def test_adapters_start_in_order() -> None:
    a, b = _Adapter("slack"), _Adapter("file")
    started: list[Adapter] = []
    assert await _start_adapters([a, b], SERVICES, started, asyncio.Event()) is True
    assert started == [a, b] and a.events == b.events == ["start"]


async def test_a_failing_adapter_is_stopped_and_named_in_one_error() -> None:
    ok, bad, never = _Adapter("file"), _Adapter("discord", "fail"), _Adapter("slack")
    started: list[Adapter] = []
    with pytest.raises(AdapterStartError, match=r"the discord adapter could not start \(ConnectionError: "):
        await _start_adapters([ok, bad, never], SERVICES, started, asyncio.Event())
    assert started == [ok], "serve's cleanup stops only the adapters that started"
    assert bad.events == ["start", "stop"], "what the failed start opened is closed"
    assert never.events == []


async def test_stop_signal_while_an_adapter_keeps_connecting_ends_the_start() -> None:
    ok, hanging = _Adapter("file"), _Adapter("slack", "hang")
    started: list[Adapter] = []
    stop = asyncio.Event()
    task = asyncio.create_task(_start_adapters([ok, hanging], SERVICES, started, stop))
    await asyncio.sleep(0.05)
    assert not task.done() and hanging.events == ["start"]
    stop.set()  # what SIGTERM does
    assert await asyncio.wait_for(task, timeout=5) is False
    assert started == [ok] and hanging.events == ["start", "stop"]
