"""``/rankzero web`` (Slack) and ``/web`` (Discord): a private, expiring link to the channel's read-only
web page (its leaderboards and last week's team report; bot/adapters/web).

Any member may ask, for the channel they ask in: the page shows what that channel already sees. The
adapter answers privately (the link is a bearer credential until it expires).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from bot.core.errors import ConfigurationError
from bot.core.models import ChannelRef
from bot.core.web_links import WebLinks

#: What the command says on a bot where the page is off.
WEB_OFF = (
    "the web page is off on this bot: its operator turns it on by setting RANKZERO_WEB_SECRET (at least "
    "32 random characters, e.g. from `rankzero secrets new-key`) and RANKZERO_PUBLIC_URL (the https "
    "address that reaches `rankzero serve`'s web port, RANKZERO_WEB_PORT)"
)


@dataclass(frozen=True)
class WebLink:
    """A page link for one channel and when it stops working."""

    url: str
    expires_at: dt.datetime

    def text(self, url_form: str = "{url}") -> str:
        """The private reply, the same words on every platform; ``url_form`` sets the URL in the platform's
        markup (Discord's ``<{url}>`` shows no preview, so Discord never fetches the page).
        """
        when = self.expires_at.strftime("%Y-%m-%d %H:%M UTC")
        return (
            f"This channel's leaderboard and team report, read-only: {url_form.format(url=self.url)}\n"
            f"The link works until {when}; anyone you give it to can read this channel's page until then."
        )


def web_link(links: WebLinks | None, channel: ChannelRef) -> WebLink:
    """The link to ``channel``'s page; ConfigurationError saying how to turn it on when it is off."""
    if links is None:
        raise ConfigurationError(WEB_OFF)
    url, expires = links.link(channel)
    return WebLink(url, expires)
