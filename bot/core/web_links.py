"""Signed, expiring, read-only links to a channel's web page (issue 30 §3).

A link names one channel of one tenant and the time it stops working; an HMAC-SHA256 under the server's
secret (``RANKZERO_WEB_SECRET``) covers the three, so whoever holds the link reads that channel's page
until then and nothing else: changing the tenant, the channel or the expiry breaks the signature. Nothing
is stored: a link cannot be revoked before it expires except by changing the secret (which ends every
link at once). The token is URL-safe base64 (no padding) of the fields and of the signature, joined by a
dot, so it sits in a URL path as is.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import json
from dataclasses import dataclass

from bot.core.errors import ConfigurationError, RankZeroError
from bot.core.models import ChannelRef
from bot.core.ports import Clock

#: Bound on a token's length (a real one is ~150 characters): longer input is refused before decoding.
MAX_TOKEN = 600
#: The shortest server secret accepted: 32 characters (``rankzero secrets new-key`` makes 44).
MIN_SECRET = 32
#: Bound on each identifier a link carries (Discord and Slack ids are far shorter).
MAX_ID = 140
#: What the HMAC covers before the fields: a version, so a future format cannot be confused with this one.
_DOMAIN = b"rankzero-web-link-v1\n"
#: Where a link points, under the public base URL.
PATH_PREFIX = "/web/"
#: What a refusal tells the reader to do.
ASK_AGAIN = "Ask for a new link with /rankzero web (Slack) or /web (Discord) in the channel."


class LinkRefusedError(RankZeroError):
    """A link that does not open the page: ``expired`` is True for a genuine link past its time (410),
    False for a forged, altered or malformed one (403).
    """

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class LinkTarget:
    """What a valid link opens: one channel of one tenant, until ``expires_at``."""

    platform: str
    workspace_id: str
    channel_id: str
    expires_at: dt.datetime

    def channel(self, timezone: str = "UTC") -> ChannelRef:
        """The channel, as the adapters name it (``timezone``: the bot's default, as theirs)."""
        return ChannelRef(self.platform, self.workspace_id, self.channel_id, None, timezone)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not ASCII")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class WebLinks:
    """Makes and checks the page links of one server secret (see the module doc)."""

    def __init__(self, secret: str, base_url: str, lifetime: dt.timedelta, clock: Clock) -> None:
        if len(secret) < MIN_SECRET:
            raise ConfigurationError(
                f"RANKZERO_WEB_SECRET is shorter than {MIN_SECRET} characters: generate one with "
                "`rankzero secrets new-key`"
            )
        if not base_url.startswith(("https://", "http://")):
            raise ConfigurationError(
                "RANKZERO_PUBLIC_URL must be the page's public base URL, e.g. https://rankzero.example.org"
            )
        # A key of its own (not the secret as typed): the secret may be shared with nothing else, still
        # the HMAC key is bound to this use.
        self._key = hmac.new(secret.encode(), b"rankzero web links", hashlib.sha256).digest()
        self.base_url = base_url.rstrip("/")
        self.lifetime = lifetime
        self._clock = clock

    def _sign(self, body: bytes) -> bytes:
        return hmac.new(self._key, _DOMAIN + body, hashlib.sha256).digest()

    def token(self, channel: ChannelRef) -> tuple[str, dt.datetime]:
        """A token for ``channel`` and when it expires (now + the lifetime, whole seconds)."""
        expires = int((self._clock.now() + self.lifetime).timestamp())
        fields = [channel.platform, channel.workspace_id, channel.channel_id, expires]
        body = json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode()
        token = f"{_b64(body)}.{_b64(self._sign(body))}"
        return token, dt.datetime.fromtimestamp(expires, dt.UTC)

    def link(self, channel: ChannelRef) -> tuple[str, dt.datetime]:
        """The page's URL for ``channel`` and when it expires."""
        token, expires = self.token(channel)
        return f"{self.base_url}{PATH_PREFIX}{token}", expires

    def check(self, token: str) -> LinkTarget:
        """What ``token`` opens; LinkRefusedError when it is not one of ours (or altered) or expired.

        The signature is compared in constant time before anything in the body is believed.
        """
        if len(token) > MAX_TOKEN or token.count(".") != 1:
            raise LinkRefusedError("this link is not a RankZero page link")
        head, sig = token.split(".")
        try:
            body, given = _unb64(head), _unb64(sig)
        except (ValueError, binascii.Error):
            raise LinkRefusedError("this link is damaged (cut or altered)") from None
        if not hmac.compare_digest(given, self._sign(body)):
            raise LinkRefusedError("this link was altered, or was made by another server")
        platform, workspace, channel, expires = _fields(body)
        expires_at = dt.datetime.fromtimestamp(expires, dt.UTC)
        if self._clock.now() >= expires_at:
            raise LinkRefusedError("this link has expired", expired=True)
        return LinkTarget(platform, workspace, channel, expires_at)


def _fields(body: bytes) -> tuple[str, str, str, int]:
    """The signed fields; a signed body of another shape (another version's) is refused all the same."""
    try:
        fields = json.loads(body)
    except ValueError:
        fields = None
    if (
        isinstance(fields, list)
        and len(fields) == 4
        and all(isinstance(f, str) and 0 < len(f) <= MAX_ID for f in fields[:3])
        and isinstance(fields[3], int)
        and 0 < fields[3] < 2**40
    ):
        return fields[0], fields[1], fields[2], fields[3]
    raise LinkRefusedError("this link is not a RankZero page link")
