"""What the Slack adapter reports: rate-limit retries to the metrics, and each request's log context.

The acknowledgement latency is timed by the HTTP server (bot/adapters/slack/app.py, ``_handle_event``):
Bolt answers the HTTP request as soon as the listener acknowledges, so the time from the request's arrival
to Bolt's response is the acknowledgement's (Socket Mode, for development, is not timed).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.logs import log_context

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.metrics import BotMetrics

PLATFORM = "slack"
_METHOD = re.compile(r"/api/([A-Za-z][A-Za-z0-9_.]{0,60})$")
_ID = re.compile(r"[A-Za-z0-9_.:/-]{1,100}")  # "/": a Grid team's key, E.../T...


def web_api_method(url: str) -> str:
    """The Web API method a URL calls (``chat.postMessage``), or ``other`` (a response_url, a webhook)."""
    found = _METHOD.search(url.split("?")[0])
    return found[1] if found else "other"


class CountingRateLimitHandler(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 handler (waits Retry-After, then retries), counting each retry by Web API method."""

    #: Set when the adapter starts (None before: nothing is counted).
    metrics: BotMetrics | None = None

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        """Count the retry, then wait as slack_sdk does."""
        if self.metrics is not None and response is not None:
            self.metrics.rate_limited(PLATFORM, web_api_method(request.url))
        await super().prepare_for_next_attempt_async(
            state=state, request=request, response=response, error=error
        )


def count_rate_limits(client: AsyncWebClient, metrics: BotMetrics | None) -> None:
    """Report the 429 retries of ``client`` (and of every client sharing its handlers) to ``metrics``."""
    for handler in client.retry_handlers:
        if isinstance(handler, CountingRateLimitHandler):
            handler.metrics = metrics


def _ident(value: Any) -> str | None:
    """An id from a payload, when it looks like one (anything else is left out of the logs)."""
    text = str(value) if isinstance(value, str | int) else ""
    return text if _ID.fullmatch(text) else None


def enter_request(body: dict[str, Any], tenant: str | None) -> None:
    """Name the request's tenant, channel and id in the log lines of its handling (bot/logs.py)."""
    channel = body.get("channel_id") or (body.get("channel") or {}).get("id")
    event = body.get("event")
    if channel is None and isinstance(event, dict):
        channel = event.get("channel") if isinstance(event.get("channel"), str) else None
    request = body.get("event_id") or body.get("trigger_id")
    log_context(
        tenant=f"{PLATFORM}:{tenant}" if tenant and _ident(tenant) else None,
        channel=_ident(channel),
        request_id=f"{PLATFORM}:{ident}" if (ident := _ident(request)) else None,
    )
