"""A loopback TCP proxy that can freeze: the database stops answering without refusing anything.

``freeze()`` is the fault issue 25 found: the proxy keeps every connection open and keeps accepting new
ones, but forwards nothing in either direction, so a client waits on a socket that is alive and silent
(a hung server, a network that drops packets) instead of getting a refused or reset connection.
``thaw()`` forwards again: bytes held meanwhile are delivered, and new connections reach the server.

It runs its own event loop in a thread, so it keeps working while a test's loop is busy, and serves
in-process tests and ``rankzero serve`` subprocesses alike.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import make_url


class FrozenProxy:
    """Forwards 127.0.0.1:<port> to ``target`` until frozen; see the module doc."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="frozen-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        #: Connections accepted while frozen (they reach the server only after a thaw).
        self.held_connections = 0

    def start(self) -> None:
        """Listen on a free loopback port (``port``) and forward."""
        self._thread.start()
        self._call(self._start())

    def freeze(self) -> None:
        """Stop forwarding: connections stay open and new ones are accepted, nothing goes through."""
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def thaw(self) -> None:
        """Forward again (what was held is delivered)."""
        self._loop.call_soon_threadsafe(self._flowing.set)

    def stop(self) -> None:
        """Close every connection and the listener, then the proxy's loop."""
        self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def url(self, database_url: str) -> str:
        """``database_url`` pointed at this proxy."""
        return (
            make_url(database_url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)
        )

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)  # type: ignore[arg-type]

    async def _start(self) -> None:
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        self._flowing.set()
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()
        # The copy tasks of connections held open: ended here, not left pending when the loop stops.
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        if not self._flowing.is_set():
            self.held_connections += 1
            await self._flowing.wait()  # accepted, but the server is not reached until a thaw
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.add(up_writer)
        await asyncio.gather(self._copy(reader, up_writer), self._copy(up_reader, writer))

    async def _copy(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                await self._flowing.wait()  # frozen: hold the bytes, send nothing, close nothing
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            dst.transport.abort()


@contextmanager
def frozen_proxy(database_url: str) -> Iterator[FrozenProxy]:
    """A started :class:`FrozenProxy` in front of ``database_url``'s server, stopped afterwards."""
    url = make_url(database_url)
    proxy = FrozenProxy(url.host or "127.0.0.1", url.port or 5432)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
