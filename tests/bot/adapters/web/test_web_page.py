"""The read-only web page (issue 30 §3) through aiohttp's test client, on a database holding two tenants:
a link shows its channel's leaderboards and last week's team report and nothing of the other tenant;
altered, foreign and expired links are refused with a page saying what to do; hostile names are escaped;
every answer carries the security headers; only GET and HEAD are served.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import AsyncIterator, Mapping

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.adapters.web.server import MAX_TARGET, SECURITY_HEADERS, WebPageServer
from bot.core.models import Actor, ChannelRef, PlayerRef, Problem
from bot.core.service import QuizService
from bot.core.tenancy import TenantAllowList
from bot.core.web_links import PATH_PREFIX, WebLinks
from tests.conftest import CHANNEL
from tests.fakes import FrozenClock

UTC = dt.UTC
OTHER = ChannelRef("test", "ws2", "general", "general")
#: A Saturday of ISO week 47, then the Wednesday of week 48 (the page's "last week" is then week 47).
WEEK_47 = dt.datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
WEEK_48 = dt.datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
HOSTILE = '<script>alert("pwned")</script>\u202eevil" onload=x & <b>'
Client = TestClient[web.Request, web.Application]
SECRET = "a-web-secret-of-at-least-thirty-two-characters"


def who(user: str, name: str, channel: ChannelRef) -> Actor:
    """A player of ``channel``'s tenant with the display name ``name``."""
    return Actor(PlayerRef("test", user, name), tenant=channel.tenant)


async def solve(quiz: QuizService, player: Actor, problem: Problem, right: bool = True) -> None:
    good = problem.question.correct_letter or "A"
    bad = next(c.letter for c in problem.question.choices if c.letter != good)
    await quiz.start_problem(player, problem.id)
    await quiz.answer(player, problem.id, good if right else bad)


async def seed(quiz: QuizService, clock: FrozenClock) -> None:
    """Week 47 and week 48 in CHANNEL (tenant ws1, with a hostile name), week 48 in OTHER (tenant ws2)."""
    clock.current = WEEK_47
    last, _ = await quiz.open_challenge(CHANNEL, problems=3)
    for i, p in enumerate(last.problems):
        await solve(quiz, who("alice", "Alice Anders", CHANNEL), p, True)
        await solve(quiz, who("mallory", HOSTILE, CHANNEL), p, i == 0)
    clock.current = WEEK_48
    this, _ = await quiz.open_challenge(CHANNEL, problems=2)
    for p in this.problems:
        await solve(quiz, who("bob", "Bob Builder", CHANNEL), p, True)
    other, _ = await quiz.open_challenge(OTHER, problems=3)
    for p in other.problems:
        await solve(quiz, who("zed", "Zed Of Tenant Two", OTHER), p, True)


@pytest.fixture
def links(clock: FrozenClock) -> WebLinks:
    return WebLinks(SECRET, "https://rz.example.org", dt.timedelta(days=7), clock)


@pytest.fixture
async def client(service: QuizService, links: WebLinks) -> AsyncIterator[Client]:
    server = WebPageServer(links, service, allowed=TenantAllowList(["test:ws1", "test:ws2"]))
    async with TestClient(TestServer(server.app())) as test_client:
        yield test_client


def path_of(links: WebLinks, channel: ChannelRef) -> str:
    url, _ = links.link(channel)
    return url.removeprefix(links.base_url)


def assert_guarded(headers: Mapping[str, str]) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers[name] == value, name
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "unsafe-inline" not in csp


async def test_a_link_shows_its_channel_and_nothing_of_another_tenant(
    service: QuizService, clock: FrozenClock, links: WebLinks, client: Client
) -> None:
    await seed(service, clock)
    response = await client.get(path_of(links, CHANNEL))
    page = await response.text()
    assert response.status == 200, page
    assert response.content_type == "text/html"
    assert_guarded(response.headers)
    week = await service.leaderboard(CHANNEL, period="week")
    ever = await service.leaderboard(CHANNEL, period="all")
    assert [r.display_name for r in week.rows] == ["Bob Builder"]
    assert {r.display_name for r in ever.rows} == {"Alice Anders", "Bob Builder", HOSTILE}
    for row in (*week.rows, *ever.rows):
        assert f'<td class="n">{row.points}</td>' in page
    assert "Alice Anders" in page and "Bob Builder" in page
    assert "Team report · week of 2026-11-16" in page  # week 47, the last complete one
    assert re.search(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]{200,}" alt="[^"]+', page)
    # Nothing of tenant ws2: neither its player nor its points leak into ws1's page. The inline PNG's base64
    # is left out of the search: random bytes can spell any short name.
    assert "Zed" not in without_images(page)
    response = await client.get(path_of(links, OTHER))
    theirs = without_images(await response.text())
    assert response.status == 200
    assert "Zed Of Tenant Two" in theirs
    assert "Alice" not in theirs and "Bob" not in theirs and "alert" not in theirs


def without_images(page: str) -> str:
    """The page without its inline images' data (base64 can hold any short text by chance)."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]*", "data:image/png;base64,", page)


async def test_hostile_names_are_escaped(
    service: QuizService, clock: FrozenClock, links: WebLinks, client: Client
) -> None:
    await seed(service, clock)
    page = await (await client.get(path_of(links, CHANNEL))).text()
    assert "<script" not in page and "<b>" not in page and 'evil" onload' not in page
    escaped = "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;\u202eevil&quot; onload=x &amp; &lt;b&gt;"
    # Isolated from the text around it, so the right-to-left override cannot reorder the row.
    assert f"<bdi>{escaped}</bdi>" in page


async def test_altered_foreign_and_expired_links_are_refused(
    service: QuizService, clock: FrozenClock, links: WebLinks, client: Client
) -> None:
    await seed(service, clock)
    good = path_of(links, CHANNEL)
    head, sig = good.removeprefix(PATH_PREFIX).split(".")
    theirs_head = path_of(links, OTHER).removeprefix(PATH_PREFIX).split(".")[0]
    foreign = WebLinks("another-server-secret-of-32-chars-or-more", links.base_url, links.lifetime, clock)
    refused = {
        PATH_PREFIX + f"{head}.{sig[::-1]}": 403,  # altered signature
        PATH_PREFIX + f"{theirs_head}.{sig}": 403,  # another tenant's fields under this signature
        path_of(foreign, CHANNEL): 403,  # another server's link
        PATH_PREFIX + "not-a-link": 403,
    }
    for path, status in refused.items():
        response = await client.get(path)
        text = await response.text()
        assert response.status == status, (path, text)
        assert_guarded(response.headers)
        assert "/rankzero web" in text and "Alice" not in text
    clock.current += links.lifetime
    response = await client.get(good)
    assert response.status == 410
    assert "expired" in await response.text()
    assert_guarded(response.headers)


async def test_a_tenant_no_longer_served_is_refused(
    service: QuizService, clock: FrozenClock, links: WebLinks
) -> None:
    await seed(service, clock)
    server = WebPageServer(links, service, allowed=TenantAllowList(["test:ws2"]))
    async with TestClient(TestServer(server.app())) as test_client:
        response = await test_client.get(path_of(links, CHANNEL))
        assert response.status == 403
        assert "Alice" not in await response.text()
        assert (await test_client.get(path_of(links, OTHER))).status == 200


async def test_only_get_and_head_within_bounds(service: QuizService, links: WebLinks, client: Client) -> None:
    path = path_of(links, CHANNEL)
    head = await client.head(path)
    assert head.status == 200
    assert_guarded(head.headers)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        response = await client.request(method, path, data=b"x")
        assert response.status == 405, method
        assert response.headers["Allow"] == "GET, HEAD"
        assert_guarded(response.headers)
    long = await client.get(path + "?q=" + "x" * MAX_TARGET)
    assert long.status == 414
    assert_guarded(long.headers)
    missing = await client.get("/elsewhere")
    assert missing.status == 404
    assert_guarded(missing.headers)


async def test_an_empty_channel_says_so(links: WebLinks, client: Client) -> None:
    page = await (await client.get(path_of(links, ChannelRef("test", "ws1", "quiet")))).text()
    assert "Nobody has scored yet" in page and "No first attempts" in page and "<img" not in page


async def test_a_failure_while_drawing_is_a_plain_500_with_the_headers(
    service: QuizService, links: WebLinks, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(service, "last_week_report", broken)
    response = await client.get(path_of(links, CHANNEL))
    text = await response.text()
    assert response.status == 500
    assert_guarded(response.headers)
    assert "secret internals" not in text and "Traceback" not in text and "reload" in text
