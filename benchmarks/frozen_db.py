"""How ``rankzero serve`` behaves when its PostgreSQL freezes: /healthz latency and SIGTERM-to-exit time.

Usage: python benchmarks/frozen_db.py [--checkout PATH] [--pg URL] [--runs 3] [--give-up 150]

A ``rankzero serve`` (file platform, schedule sync every 0.5 s) of ``--checkout`` (default: this one) runs
against PostgreSQL through tests/frozen_proxy.py. Once healthy, the proxy freezes (bytes accepted, nothing
answered); the script then times one GET /healthz, and SIGTERM until the process has exited. A wait longer
than ``--give-up`` seconds is printed as ``> N s`` (the process is then killed). Run it on an older
checkout (``git archive <commit> | tar -x -C DIR``, plus tests/frozen_proxy.py copied there) for the
before figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("RANKZERO_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _admin(url: str, sql: str) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    conn = await asyncpg.connect(host=u.host, port=u.port or 5432, user=u.username, database=u.database)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _get(port: int, give_up: float) -> float | None:
    """Seconds until /healthz answered (any status), None past ``give_up``."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=give_up):
            pass
    except urllib.error.HTTPError:
        pass  # 503 is an answer
    except (urllib.error.URLError, TimeoutError, ConnectionError):
        return None
    return time.monotonic() - start


def one_run(checkout: Path, pg_url: str, give_up: float) -> tuple[float | None, float | None]:
    """(healthz seconds, SIGTERM-to-exit seconds) for one frozen serve."""
    sys.path.insert(0, str(checkout))
    from sqlalchemy.engine import make_url

    from tests.frozen_proxy import frozen_proxy

    name = f"rz_bench_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(pg_url, f'CREATE DATABASE "{name}"'))
    url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    port = _free_port()
    try:
        with frozen_proxy(url) as proxy, tempfile.TemporaryDirectory() as tmp:
            env |= {
                "PYTHONPATH": str(checkout),
                "RANKZERO_DATABASE_URL": proxy.url(url),
                "RANKZERO_RECORD_FILE": str(Path(tmp) / "posts.jsonl"),
                "RANKZERO_HEALTH_PORT": str(port),
                "RANKZERO_SCHEDULE_SYNC_S": "0.5",
            }
            log = open(Path(tmp) / "serve.log", "wb")  # noqa: SIM115 - closed below
            proc = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", "serve"], cwd=checkout, env=env, stdout=log, stderr=log
            )
            try:
                end = time.monotonic() + 180
                while _get(port, 5) is None or b"running (" not in (Path(tmp) / "serve.log").read_bytes():
                    if time.monotonic() > end or proc.poll() is not None:
                        raise SystemExit(
                            "serve did not start: " + (Path(tmp) / "serve.log").read_text()[-2000:]
                        )
                    time.sleep(0.3)
                proxy.freeze()
                time.sleep(2)  # the sync is waiting on the silent server by now
                health = _get(port, give_up)
                proc.send_signal(signal.SIGTERM)
                start = time.monotonic()
                try:
                    proc.wait(timeout=give_up)
                    stop: float | None = time.monotonic() - start
                except subprocess.TimeoutExpired:
                    stop = None
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                log.close()
    finally:
        asyncio.run(_admin(pg_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return health, stop


def main() -> None:
    """Run and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=ROOT)
    parser.add_argument("--pg", default=PG_URL)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--give-up", type=float, default=150.0)
    args = parser.parse_args()
    healths: list[float | None] = []
    stops: list[float | None] = []
    for _ in range(args.runs):
        health, stop = one_run(args.checkout.resolve(), args.pg, args.give_up)
        healths.append(health)
        stops.append(stop)

    def show(values: list[float | None]) -> str:
        shown = [f"{v:.1f}" if v is not None else f">{args.give_up:g}" for v in values]
        known = [v for v in values if v is not None]
        median = f"median {statistics.median(known):.1f} s" if len(known) == len(values) else "some gave up"
        return f"{', '.join(shown)} s ({median})"

    print(f"checkout {args.checkout}; load {os.getloadavg()[0]:.1f}")
    print(f"/healthz on a frozen database:  {show(healths)}")
    print(f"SIGTERM to exit:                {show(stops)}")


if __name__ == "__main__":
    main()
