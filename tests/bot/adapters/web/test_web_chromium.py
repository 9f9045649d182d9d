"""The web page in a real browser (issue 30 §3): headless Chromium loads a signed link from the real
server on a free port and takes a screenshot, whose path the test prints (``-s`` shows it; CI keeps the
output). Skipped, with the reason, only where no Chromium binary is installed (``make browser``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from bot.adapters.web.server import WebPageServer
from bot.core.service import QuizService
from bot.core.tenancy import TenantAllowList
from bot.core.web_links import WebLinks
from tests.bot.adapters.web.test_web_page import SECRET, seed
from tests.conftest import CHANNEL
from tests.fakes import FrozenClock

pytestmark = pytest.mark.slow

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
WIDTH, HEIGHT = 1000, 1400
#: A hang guard for the browser (not a bound on its speed: nothing asserts how long it took).
BROWSER_GIVE_UP_S = 180


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (which must come first), checking its CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    assert struct.unpack(">I", data[29:33])[0] == zlib.crc32(data[12:29])
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


async def screenshot(url: str, out: Path) -> str:
    """Run headless Chromium on ``url``, writing ``out``; its combined output (for a failure's message)."""
    assert CHROMIUM is not None, "no chromium binary on PATH under CI: `make browser` installs it"
    process = await asyncio.create_subprocess_exec(
        CHROMIUM,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={out.parent / 'profile'}",
        f"--screenshot={out}",
        f"--window-size={WIDTH},{HEIGHT}",
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(BROWSER_GIVE_UP_S):
            said, _ = await process.communicate()
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    return said.decode(errors="replace")[-2000:]


# Under CI the browser is installed (`.ci/run` calls `make browser`): a missing one fails there instead of
# skipping, as the PostgreSQL tests do.
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="no chromium binary on PATH: `make browser` installs it",
)
async def test_chromium_renders_the_page(service: QuizService, clock: FrozenClock, tmp_path: Path) -> None:
    await seed(service, clock)
    server = WebPageServer(
        WebLinks(SECRET, "http://127.0.0.1", dt.timedelta(days=7), clock),
        service,
        port=0,
        allowed=TenantAllowList(["test:ws1"]),
    )
    await server.start()
    try:
        path = server.links.link(CHANNEL)[0].removeprefix(server.links.base_url)
        shot = tmp_path / "page.png"
        said = await screenshot(f"http://127.0.0.1:{server.port}{path}", shot)
    finally:
        await server.stop()
    print(f"\nweb page screenshot: {shot}")
    assert shot.is_file(), said
    data = shot.read_bytes()
    assert png_size(data) == (WIDTH, HEIGHT), said
    pixels = np.asarray(image.imread(str(shot)))[..., :3]
    colours = np.unique((pixels * 255).round().astype(np.uint8).reshape(-1, 3), axis=0)
    # Text, tables and the heatmap: far more than the few colours of a blank or error page.
    assert len(colours) > 200, (len(colours), said)
    # The heatmap's cells are saturated colours (a browser's error page is grey on white).
    spread = pixels.max(axis=2) - pixels.min(axis=2)
    assert int((spread > 0.35).sum()) > 5000, said
