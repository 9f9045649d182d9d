"""Issue 24, section 2: nothing that reaches /slack/events is parsed or acted on before its signature is
checked on the raw bytes, and an unverified request never makes the error handler send anything.

Every forged request goes through the real HTTP server into the real Bolt app; each asserts that nothing
was parsed (a spy on Bolt's body parser), that no listener ran and that the strict fake recorded no
outbound call (a response_url post, a views.update). Timing figures are in benchmarks/slack_forged.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import slack_bolt.request.async_request as bolt_request
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.request.internals import parse_body as bolt_parse_body

from bot.adapters.slack import verify
from bot.adapters.slack.verify import (
    MAX_BODY_BYTES,
    REPLAY_WINDOW_S,
    InstallLimiter,
    Refused,
    check_headers,
)
from tests.bot.adapters.slack.test_slack_adapter import OWNER, Harness
from tests.slack_fake import SECRET, TEAM, sign


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every body Bolt parses (its request object parses on construction, before its signature check)."""
    seen: list[str] = []
    original = bolt_parse_body  # the function async_request imports under that name

    def spy(body: str, content_type: str | None) -> dict[str, Any]:
        seen.append(body[:80])
        return original(body, content_type)

    monkeypatch.setattr(bolt_request, "parse_body", spy)
    yield seen


def command_body(slack: Harness, text: str = "post-now") -> str:
    """A /rankzero command whose response_url is the fake's (a post there would be recorded)."""
    form = {
        "team_id": TEAM,
        "channel_id": "C1",
        "user_id": OWNER,
        "command": "/rankzero",
        "text": text,
        "response_url": slack.api.response_url("forged"),
        "trigger_id": "trigger-forged",
    }
    return urllib.parse.urlencode(form)


def click_body() -> str:
    """A button click inside a view the sender names (the error handler would views.update it)."""
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": OWNER},
        "view": {"id": "VVICTIM", "type": "modal"},
        "actions": [{"action_id": "rz:hint:1", "value": "x", "action_ts": "1.0"}],
        "trigger_id": "trigger-forged",
    }
    return urllib.parse.urlencode({"payload": json.dumps(payload)})


def fresh() -> str:
    return str(int(time.time()))


def mac(body: str, ts: str, secret: str = SECRET) -> str:
    return "v0=" + hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()


#: name -> the signing headers a forger sends for ``body``.
FORGERIES: dict[str, Callable[[str], dict[str, str]]] = {
    "no headers": lambda body: {},
    "no timestamp": lambda body: {"X-Slack-Signature": mac(body, fresh())},
    "non-numeric timestamp": lambda body: {"X-Slack-Request-Timestamp": "now", "X-Slack-Signature": "v0=x"},
    "exponent timestamp": lambda body: {
        "X-Slack-Request-Timestamp": "1.7e9",
        "X-Slack-Signature": mac(body, "1.7e9"),
    },
    "unicode digits": lambda body: {
        "X-Slack-Request-Timestamp": "١٧٦٤٢٣٠٠٠٠",
        "X-Slack-Signature": mac(body, "١٧٦٤٢٣٠٠٠٠"),
    },
    "negative timestamp": lambda body: {
        "X-Slack-Request-Timestamp": "-5",
        "X-Slack-Signature": mac(body, "-5"),
    },
    "huge timestamp": lambda body: {
        "X-Slack-Request-Timestamp": "9" * 4000,
        "X-Slack-Signature": "v0=" + "0" * 64,
    },
    "stale timestamp": lambda body: sign(body, timestamp=int(time.time()) - REPLAY_WINDOW_S - 60),
    "future timestamp": lambda body: sign(body, timestamp=int(time.time()) + REPLAY_WINDOW_S + 60),
    "no signature": lambda body: {"X-Slack-Request-Timestamp": fresh()},
    "wrong secret": lambda body: sign(body, secret="not-the-secret"),
    "malformed signature": lambda body: {"X-Slack-Request-Timestamp": fresh(), "X-Slack-Signature": "v1=abc"},
    "signature of another body": lambda body: sign(body + "&text=help"),
}


async def assert_nothing_happened(slack: Harness, parsed: list[str]) -> None:
    """Nothing parsed, nothing sent: no response_url post, no views.update, no other Web API call."""
    # A reply the old error handler would send is a task started after the answer: give it its turn.
    await asyncio.sleep(0.2)
    assert parsed == []
    assert slack.api.calls == []
    assert slack.api.refused == []


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
@pytest.mark.parametrize("kind", ["command", "click"])
async def test_forged_requests_are_refused_before_parsing(
    slack: Harness, parsed: list[str], forgery: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    body = command_body(slack) if kind == "command" else click_body()
    # As bytes: a forger sends any octets (UTF-8 digits included), not only what httpx would encode.
    signing = {name.encode(): value.encode() for name, value in FORGERIES[forgery](body).items()}
    headers = {b"Content-Type": b"application/x-www-form-urlencoded", **signing}
    with caplog.at_level(logging.INFO):
        r = await slack.send.http.post(slack.send.url, content=body.encode(), headers=headers)
    assert r.status_code == 401, r.text
    await assert_nothing_happened(slack, parsed)
    # One line at INFO, no traceback, nothing at WARNING or above.
    refusals = [rec for rec in caplog.records if "refused a request to /slack/events" in rec.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.INFO
    assert not any(rec.exc_info for rec in caplog.records)
    assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING]


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


async def test_deeply_nested_unsigned_body_is_never_parsed(slack: Harness, parsed: list[str]) -> None:
    # About 200 KB of nesting either way (under the size cap): refused on the signature alone.
    form = urllib.parse.urlencode({"payload": nested(15_000)})
    assert len(form) < MAX_BODY_BYTES
    for content_type, body in (
        ("application/x-www-form-urlencoded", form),
        ("application/json", nested(40_000)),
    ):
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": fresh(),
            "X-Slack-Signature": mac(body, fresh(), "forger"),
        }
        r = await slack.send.http.post(slack.send.url, content=body.encode(), headers=headers)
        assert r.status_code == 401
    await assert_nothing_happened(slack, parsed)


async def test_oversized_bodies_are_refused_with_413(slack: Harness, parsed: list[str]) -> None:
    big = "payload=" + "x" * (MAX_BODY_BYTES + 1)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    # Forged (well-formed headers, so the size is what refuses it), then even correctly signed.
    forged = {**form, "X-Slack-Request-Timestamp": fresh(), "X-Slack-Signature": "v0=" + "0" * 64}
    for headers in (forged, {**form, **sign(big)}):
        r = await slack.send.http.post(slack.send.url, content=big.encode(), headers=headers)
        assert r.status_code == 413

    # No Content-Length (chunked): refused once the cap is passed while reading.
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(MAX_BODY_BYTES // 4096 + 2):
            yield b"x" * 4096

    r = await slack.send.http.post(slack.send.url, content=chunks(), headers=forged)
    assert r.status_code == 413
    await assert_nothing_happened(slack, parsed)

    # Exactly at the cap, signed: served.
    body = command_body(slack, "help")
    body += "&pad=" + "x" * (MAX_BODY_BYTES - len(body) - len("&pad="))
    assert len(body.encode()) == MAX_BODY_BYTES
    r = await slack.send.post(body, "application/x-www-form-urlencoded")
    assert r.status_code == 200
    await slack.api.wait_for("response")


async def test_error_handler_sends_nothing_for_an_unverified_request(slack: Harness) -> None:
    # Straight into the Bolt app (as another transport would): slack_sdk's verifier raises on a
    # non-numeric timestamp and the failure reaches RankZero's error handler, which must not "tell" the
    # response_url or view the unverified body names.
    assert slack.adapter.bolt is not None
    for body in (command_body(slack), click_body()):
        request = AsyncBoltRequest(
            body=body,
            headers={
                "content-type": "application/x-www-form-urlencoded",
                "x-slack-request-timestamp": "not-a-number",
                "x-slack-signature": "v0=" + "0" * 64,
            },
        )
        resp = await slack.adapter.bolt.async_dispatch(request)
        assert resp.status == 401
    await asyncio.sleep(0.2)
    assert slack.api.calls == [] and slack.api.refused == []


def test_header_checks_say_what_is_wrong() -> None:
    now = 1_764_230_000.0
    sig = "v0=" + "a" * 64
    ok = check_headers(
        {"X-Slack-Request-Timestamp": str(int(now) - REPLAY_WINDOW_S), "X-Slack-Signature": sig}, now
    )
    assert ok.signature == sig
    cases = {
        "no X-Slack-Request-Timestamp": {"X-Slack-Signature": sig},
        "not a number": {"X-Slack-Request-Timestamp": " 17", "X-Slack-Signature": sig},
        "more than 300 s": {
            "X-Slack-Request-Timestamp": str(int(now) + REPLAY_WINDOW_S + 1),
            "X-Slack-Signature": sig,
        },
        "no X-Slack-Signature": {"X-Slack-Request-Timestamp": str(int(now))},
        "64 hex digits": {"X-Slack-Request-Timestamp": str(int(now)), "X-Slack-Signature": sig.upper()},
    }
    for words, headers in cases.items():
        with pytest.raises(Refused, match=words) as caught:
            check_headers(headers, now)
        assert caught.value.status == 401


def test_install_limiter_is_per_client_and_bounded() -> None:
    now = [0.0]
    limiter = InstallLimiter(3, clock=lambda: now[0], max_clients=100)
    assert [limiter.take("a") for _ in range(3)] == [0, 0, 0]
    assert limiter.take("a") > 0  # a's fourth within the minute
    assert limiter.take("b") == 0  # another client is not affected
    now[0] = 61.0
    assert limiter.take("a") == 0  # the window slid
    for n in range(1000):  # a flood from many addresses: memory stays bounded
        limiter.take(f"10.0.{n // 256}.{n % 256}")
    assert len(limiter._seen) <= 100


@pytest.fixture
def short_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server started after this (``slack`` listed after it) closes a refused connection after 0.2 s
    of reading what is left of its body, instead of 10 s: the test reads each answer to the end.
    """
    monkeypatch.setattr(verify, "REFUSED_BODY_LINGER_S", 0.2)


async def test_a_body_that_never_arrives_is_refused_with_408(
    short_linger: None, slack: Harness, parsed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Well-formed headers, then a declared body that trickles in: the connection is not held for good."""
    monkeypatch.setattr(verify, "BODY_READ_TIMEOUT_S", 0.5)
    url = urllib.parse.urlsplit(slack.send.url)
    holds = []
    for _ in range(5):
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        writer.write(
            (
                f"POST {url.path} HTTP/1.1\r\nHost: {url.hostname}\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 200000\r\n"
                f"X-Slack-Request-Timestamp: {fresh()}\r\nX-Slack-Signature: v0={'0' * 64}\r\n\r\n"
                "payload=xx"
            ).encode()
        )
        await writer.drain()
        holds.append((reader, writer))
    for reader, writer in holds:
        # A hang guard, not a speed bound: without the read timeout the server never answers.
        answer = await asyncio.wait_for(reader.read(), timeout=60)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
        writer.close()
    await assert_nothing_happened(slack, parsed)
