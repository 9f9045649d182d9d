"""``rankzero serve`` and the web page (issue 30 §3): with RANKZERO_WEB_SECRET and RANKZERO_PUBLIC_URL the
services carry a link signer and serve binds the page's port; without either, the page is off (no signer,
no port); a taken port stops serve with one clear line.
"""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.serve import WebPortError, open_web
from tests.bootstrap import build_test_services, settings_for
from tests.conftest import CHANNEL
from tests.fakes import FrozenClock
from tests.net import free_port

SECRET = SecretStr("a-web-secret-of-at-least-thirty-two-characters")


async def test_the_page_is_served_when_configured(db: str, clock: FrozenClock) -> None:
    port = free_port()
    web: dict[str, Any] = {"web_secret": SECRET, "public_url": "https://rz.example.org/", "web_port": port}
    services = await build_test_services(db, [], clock=clock, **web)
    try:
        assert services.web_links is not None
        assert services.web_links.base_url == "https://rz.example.org"
        page = await open_web(settings_for(db, **web), services)
        assert page is not None
        try:
            url, _ = services.web_links.link(CHANNEL)
            path = url.removeprefix(services.web_links.base_url)
            async with httpx.AsyncClient() as http:
                response = await http.get(f"http://127.0.0.1:{port}{path}")
                forged = await http.get(f"http://127.0.0.1:{port}{path[:-3]}AAA")
            assert response.status_code == 200 and "All time" in response.text
            assert forged.status_code == 403
        finally:
            await page.stop()
    finally:
        await services.app.close()


@pytest.mark.parametrize("missing", ["web_secret", "public_url"])
async def test_without_a_secret_or_a_url_the_page_is_off(db: str, clock: FrozenClock, missing: str) -> None:
    web: dict[str, Any] = {"web_secret": SECRET, "public_url": "https://rz.example.org"}
    del web[missing]
    services = await build_test_services(db, [], clock=clock, **web)
    try:
        assert services.web_links is None
        assert await open_web(settings_for(db, **web), services) is None
    finally:
        await services.app.close()


async def test_a_taken_port_is_one_clear_error(db: str, clock: FrozenClock) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        web: dict[str, Any] = {"web_secret": SECRET, "public_url": "https://rz.example.org", "web_port": port}
        services = await build_test_services(db, [], clock=clock, **web)
        try:
            with pytest.raises(WebPortError, match="RANKZERO_WEB_PORT"):
                await open_web(settings_for(db, **web), services)
        finally:
            await services.app.close()
