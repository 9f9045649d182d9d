"""A real ``rankzero-runner serve`` subprocess on a free loopback port, for the bot's dispute tests.

tests/conftest.py's session fixture ``runner`` is the one most tests share (every job gets a fresh bubblewrap
sandbox anyway, so sharing the server only shares its warm pool and saves the start-ups); a test that needs
other ``serve`` options starts its own with :func:`runner_server`.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.net import free_port


@dataclass(frozen=True)
class RunnerServer:
    """Where the test runner listens and its bearer token."""

    url: str
    token: str
    pid: int = 0
    """The ``serve`` process (for a test that stops this runner itself)."""


@contextmanager
def runner_server(pool: str = "1:1", args: Sequence[str] = ()) -> Iterator[RunnerServer]:
    """Start the runner (``args``: more ``serve`` options), wait for /v1/health, yield it, stop it."""
    exe = Path(sys.executable).parent / "rankzero-runner"
    if not exe.exists():
        pytest.fail("rankzero-runner is not installed next to this Python: pip install -e '.[runner]'")
    port, token = free_port(), secrets.token_urlsafe(16)
    proc = subprocess.Popen(
        [str(exe), "serve", "--port", str(port), "--pool", pool, "--log-level", "WARNING", *args],
        env={**os.environ, "RANKZERO_RUNNER_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.fail(f"rankzero-runner serve exited with {proc.returncode}: {err[-2000:]}")
            try:
                if (
                    httpx.get(f"{url}/v1/health", headers={"Authorization": f"Bearer {token}"}).status_code
                    == 200
                ):
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("rankzero-runner serve did not answer within 90 s")
            time.sleep(0.2)
        yield RunnerServer(url, token, proc.pid)
    finally:
        # A test may have stopped it already: terminate() on an exited process does nothing.
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
