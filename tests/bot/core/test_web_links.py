"""The web page's signed links (issue 30 §3): a link opens the one channel it names until it expires; any
change to it (tenant, channel, expiry, signature), another server's secret or a malformed token is refused.
"""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest

from bot.core.errors import ConfigurationError
from bot.core.models import ChannelRef
from bot.core.web_links import MAX_TOKEN, PATH_PREFIX, LinkRefusedError, WebLinks
from tests.conftest import CHANNEL, START
from tests.fakes import FrozenClock

SECRET = "s" * 40
WEEK = dt.timedelta(days=7)


def _links(clock: FrozenClock, secret: str = SECRET) -> WebLinks:
    return WebLinks(secret, "https://rz.example.org/", WEEK, clock)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_link_opens_its_channel_until_it_expires() -> None:
    clock = FrozenClock(START)
    links = _links(clock)
    url, expires = links.link(CHANNEL)
    assert url.startswith("https://rz.example.org" + PATH_PREFIX)
    assert expires == START + WEEK
    token = url.rsplit("/", 1)[1]
    # URL-safe as is: no character a path would have to escape.
    assert all(c.isalnum() or c in "-_." for c in token), token
    target = links.check(token)
    assert (target.platform, target.workspace_id, target.channel_id) == ("test", "ws1", "general")
    assert target.channel().tenant == CHANNEL.tenant
    clock.current = START + WEEK - dt.timedelta(seconds=1)
    links.check(token)
    clock.current = START + WEEK
    with pytest.raises(LinkRefusedError) as refused:
        links.check(token)
    assert refused.value.expired


def test_changed_fields_signatures_and_secrets_are_refused() -> None:
    clock = FrozenClock(START)
    links = _links(clock)
    token, _ = links.token(CHANNEL)
    head, sig = token.split(".")
    fields = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    forged = [
        [fields[0], "ws2", fields[2], fields[3]],  # another tenant, same signature
        [fields[0], fields[1], "random", fields[3]],  # another channel
        [fields[0], fields[1], fields[2], fields[3] + 86400 * 365],  # a later expiry
    ]
    for changed in forged:
        body = json.dumps(changed, separators=(",", ":")).encode()
        with pytest.raises(LinkRefusedError) as refused:
            links.check(f"{_b64(body)}.{sig}")
        assert not refused.value.expired
    flipped = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]
    bad = [f"{head}.{flipped}", head, f"{head}.{sig}.x", "", "%%%.%%%", "é.é", "a" * (MAX_TOKEN + 1)]
    for token_ in bad:
        with pytest.raises(LinkRefusedError):
            links.check(token_)
    # The same link under another server's secret is not one of its links.
    with pytest.raises(LinkRefusedError):
        _links(clock, "t" * 40).check(token)


def test_a_signed_body_of_another_shape_is_refused() -> None:
    links = _links(FrozenClock(START))
    for fields in (["test", "ws1", "general"], ["test", "", "general", 10**12], "x", ["a", "b", "c", "d"]):
        body = json.dumps(fields).encode()
        token = f"{_b64(body)}.{_b64(links._sign(body))}"
        with pytest.raises(LinkRefusedError):
            links.check(token)


def test_a_short_secret_or_a_relative_base_url_is_refused() -> None:
    clock = FrozenClock(START)
    with pytest.raises(ConfigurationError, match="32"):
        WebLinks("short", "https://rz.example.org", WEEK, clock)
    with pytest.raises(ConfigurationError, match="RANKZERO_PUBLIC_URL"):
        WebLinks(SECRET, "rz.example.org", WEEK, clock)


def test_links_of_two_channels_differ_and_each_opens_its_own() -> None:
    links = _links(FrozenClock(START))
    other = ChannelRef("test", "ws2", "general", "general")
    mine, theirs = links.token(CHANNEL)[0], links.token(other)[0]
    assert mine != theirs
    assert links.check(theirs).workspace_id == "ws2"
    assert links.check(mine).workspace_id == "ws1"
