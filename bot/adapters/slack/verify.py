"""Nothing from Slack's HTTP endpoint is acted on, or even parsed, before its signature is checked.

``/slack/events`` faces the internet, so everything in a request is hostile until proven otherwise. Bolt
parses the body (JSON, form data) when it builds its request object, before its own signature check, and a
malformed timestamp makes slack_sdk's verifier raise into the app's error handler. So the HTTP server checks
the raw bytes first, in this order, cheapest first:

1. the headers: ``X-Slack-Request-Timestamp`` is 1 to 10 ASCII digits and within :data:`REPLAY_WINDOW_S` of
   now (either way), ``X-Slack-Signature`` is ``v0=`` and 64 lower-case hex digits (401 otherwise, before
   a byte of the body is read);
2. the size: a declared ``Content-Length`` over :data:`MAX_BODY_BYTES` is refused unread, and the body is
   read at most that far (413);
3. the HMAC-SHA256 of ``v0:{timestamp}:{body}`` with the signing secret, compared in constant time (401).

A refusal is one INFO log line (no traceback: forged requests are expected traffic, not our failure).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiohttp import web

log = logging.getLogger(__name__)

#: The largest body accepted (Slack's own payloads are far smaller; a modal submission is a few KiB).
MAX_BODY_BYTES = 256 * 1024
#: How far a request's timestamp may be from our clock, seconds (Slack's documented replay window).
REPLAY_WINDOW_S = 300
#: Where Bolt finds that a request passed these checks (the error handler acts only on such requests).
VERIFIED = "rz_signature_verified"

_TIMESTAMP = re.compile(r"[0-9]{1,10}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


class Refused(Exception):
    """A request that failed a check: the HTTP status to answer (401 or 413) and why (for the log)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class SignedHeaders:
    """The two signing headers, checked for shape and freshness."""

    timestamp: str
    signature: str


def check_headers(headers: Mapping[str, str], now: float) -> SignedHeaders:
    """The signing headers of a request, or :class:`Refused` (401) saying which is missing or malformed."""
    timestamp = headers.get("X-Slack-Request-Timestamp")
    signature = headers.get("X-Slack-Signature")
    if timestamp is None:
        raise Refused(401, "no X-Slack-Request-Timestamp")
    # fullmatch on an ASCII class: no int() of a megabyte of digits, no Unicode digits, no sign or spaces.
    if not _TIMESTAMP.fullmatch(timestamp):
        raise Refused(401, "X-Slack-Request-Timestamp is not a number of seconds")
    if abs(now - int(timestamp)) > REPLAY_WINDOW_S:
        raise Refused(401, f"X-Slack-Request-Timestamp is more than {REPLAY_WINDOW_S} s from now")
    if signature is None:
        raise Refused(401, "no X-Slack-Signature")
    if not _SIGNATURE.fullmatch(signature):
        raise Refused(401, "X-Slack-Signature is not v0= and 64 hex digits")
    return SignedHeaders(timestamp, signature)


def check_signature(secret: bytes, signed: SignedHeaders, body: bytes) -> None:
    """:class:`Refused` (401) unless ``signed.signature`` is the HMAC of ``body`` (constant-time compare)."""
    base = b"v0:" + signed.timestamp.encode("ascii") + b":" + body
    expected = "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signed.signature):
        raise Refused(401, "the signature does not match the body")


#: How long the whole body may take to arrive once the headers passed. Slack sends a few KiB at once; a
#: sender that declares a body and then trickles it (or nothing) would otherwise hold a connection, and
#: the memory of what it sent, for as long as it likes, without a valid signature.
BODY_READ_TIMEOUT_S = 10.0
#: After a refusal the server reads and discards what is left of the body for at most this long, then
#: closes the connection (aiohttp's ``lingering_time``, its default): a client still sending gets to read
#: the 413/408 instead of a connection reset, and a trickling one is cut off after that.
REFUSED_BODY_LINGER_S = 10.0


async def read_capped(request: web.Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, or :class:`Refused`: 413 as soon as it is known to exceed ``limit`` bytes, 408
    when it has not all arrived within :data:`BODY_READ_TIMEOUT_S`.
    """
    declared = request.content_length
    if declared is not None and declared > limit:
        raise Refused(413, f"a body of {declared} bytes (the limit is {limit})")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_READ_TIMEOUT_S):
            while True:
                chunk = await request.content.read(limit + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:  # a chunked body, or one longer than it declared
                    raise Refused(413, f"a body over {limit} bytes")
    except TimeoutError:
        raise Refused(
            408, f"the body did not arrive within {BODY_READ_TIMEOUT_S:g} s ({size} bytes came)"
        ) from None
    return b"".join(chunks)


class SlackRequestVerifier:
    """Checks requests to ``/slack/events`` with one signing secret (see the module doc)."""

    def __init__(self, signing_secret: str, *, clock: Callable[[], float] = time.time) -> None:
        self._secret = signing_secret.encode()
        self._clock = clock

    async def verified_body(self, request: web.Request) -> bytes:
        """The raw body of a request Slack signed, or :class:`Refused`."""
        signed = check_headers(request.headers, self._clock())
        body = await read_capped(request)
        check_signature(self._secret, signed, body)
        return body


def refusal_response(request: web.Request, refused: Refused) -> web.Response:
    """The answer to a refused request, after one INFO line (who sent it, what failed)."""
    log.info(
        "refused a request to %s from %s with %d: %s",
        request.path,
        request.remote,
        refused.status,
        refused.reason,
    )
    # Closing the connection: an unread (oversized) body must not be read as the next request.
    return web.Response(status=refused.status, text="", headers={"Connection": "close"})


#: How many install links one client may ask for a minute (each writes an OAuth state row).
INSTALLS_PER_MINUTE = 10
#: How many clients the limiter remembers; past that the quietest are forgotten (memory stays bounded
#: whatever number of addresses a flood comes from).
MAX_TRACKED_CLIENTS = 10_000


class InstallLimiter:
    """A sliding one-minute window per client address on ``/slack/install``.

    The client is the connection's peer address: behind a reverse proxy that is the proxy's, and the limit
    is then shared by everyone behind it (a flood still cannot write more than this many rows a minute).
    """

    def __init__(
        self,
        per_minute: int = INSTALLS_PER_MINUTE,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_TRACKED_CLIENTS,
    ) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._max_clients = max_clients
        self._seen: dict[str, list[float]] = {}

    def take(self, client: str) -> int:
        """0 when ``client`` may have another install link now, else how many seconds to wait."""
        now = self._clock()
        recent = [t for t in self._seen.pop(client, []) if now - t < 60.0]
        if len(recent) >= self.per_minute:
            self._seen[client] = recent  # re-inserted last: the most recently active survive pruning
            return max(1, int(60.0 - (now - recent[0])) + 1)
        recent.append(now)
        self._seen[client] = recent
        while len(self._seen) > self._max_clients:
            del self._seen[next(iter(self._seen))]  # dicts keep insertion order: the quietest goes
        return 0
