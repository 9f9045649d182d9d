"""No silent failures on Slack: retries on 429 for every Web API call, and one Bolt error handler that
answers every interaction whatever failed (a database error, a transient conflict, an HTTP error on a
follow-up, a bug) and logs the cause.

Only a verified request is answered this way (its signature checked on the raw bytes, or Socket Mode):
the payload names the response_url and view to tell, so an unverified one gets a bare 401 and nothing is
sent anywhere.

Where the answer goes depends on what failed and whether Bolt already acknowledged:
- not acknowledged yet: the error handler's own HTTP answer (a modal submission gets
  ``response_action: update`` to a modal saying what happened; anything else a plain 200);
- a slash command or a button on a message: an ephemeral reply through the payload's response_url;
- a button inside a modal, or a submission answered already: the modal is updated to say it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook import WebhookResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.adapters.slack import blocks as bk
from bot.adapters.slack.observe import CountingRateLimitHandler
from bot.adapters.slack.verify import VERIFIED
from bot.core.errors import RankZeroError
from bot.core.ports import TransientConflictError

log = logging.getLogger(__name__)

#: How often one call is retried after a 429 (each waits the Retry-After Slack sent, plus jitter). A rush
#: of 50 players shares one views.update budget, so a call may queue behind many others.
RATE_LIMIT_RETRIES = 30
#: Retries after a 500/503 from Slack, and after a connection error.
SERVER_ERROR_RETRIES = 2
CONNECTION_RETRIES = 2

#: What the user reads when something failed that is not their doing.
INTERNAL = "Something went wrong on our side (it is logged for the admins): please try again in a moment."
BUSY = "The bot was busy with many players at once: please try again."
EXPIRED = "Slack took too long to hand us your click and the window to open it closed: please press again."
#: Where a listener that opened a modal for this payload leaves its view id (the answer goes there).
OPENED_VIEW = "_rz_opened_view_id"
#: How long the handler waits before returning after a failure that followed the ack (see on_error).
ACK_POLL_GRACE_S = 0.05
#: Replies still being sent (kept referenced so they are not garbage-collected mid-flight).
_PENDING: set[asyncio.Task[bool]] = set()


def add_retries(client: AsyncWebClient) -> AsyncWebClient:
    """Give ``client`` slack_sdk's public retry handlers (429 after Retry-After, 500/503, connection
    errors), once; returns the client.
    """
    # A client that has slack_sdk's own 429 handler keeps it (its retries are then not counted).
    kinds = {
        CountingRateLimitHandler if type(h) is AsyncRateLimitErrorRetryHandler else type(h)
        for h in client.retry_handlers
    }
    wanted = [
        # slack_sdk's 429 handler, counting its retries (observe.py; the metrics are given at start).
        CountingRateLimitHandler(max_retry_count=RATE_LIMIT_RETRIES),
        AsyncServerErrorRetryHandler(max_retry_count=SERVER_ERROR_RETRIES),
        AsyncConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
    ]
    client.retry_handlers.extend(h for h in wanted if type(h) not in kinds)
    return client


def user_text(error: BaseException) -> str:
    """What to tell the user about ``error``: the service's own words, or a short generic sentence."""
    if isinstance(error, RankZeroError):
        return str(error)
    if isinstance(error, TransientConflictError):
        return BUSY
    if isinstance(error, SlackApiError) and error.response.get("error") in (
        "expired_trigger_id",
        "exchanged_trigger_id",
    ):
        return EXPIRED
    return INTERNAL


def _kind(body: dict[str, Any]) -> str:
    if body.get("command"):
        return f"command {body.get('command')} {str(body.get('text') or '')[:40]!r}"
    if body.get("type") == "block_actions":
        return f"button {((body.get('actions') or [{}])[0]).get('action_id')}"
    if body.get("type") in ("view_submission", "view_closed"):
        return f"{body['type']} {(body.get('view') or {}).get('callback_id')}"
    if body.get("event"):
        return f"event {body['event'].get('type')}"
    return str(body.get("type") or "request")


async def tell(client: AsyncWebClient, body: dict[str, Any], text: str) -> bool:
    """Show ``text`` to whoever sent ``body`` (see the module doc); False when nothing could be shown."""
    view_id = body.get(OPENED_VIEW) or (body.get("view") or {}).get("id")
    try:
        if view_id and (OPENED_VIEW in body or body.get("type") in ("block_actions", "view_submission")):
            await client.views_update(view_id=str(view_id), view=bk.message_view(text))
            return True
        url = body.get("response_url") or (body.get("response_urls") or [{}])[0].get("response_url")
        if url:
            webhook = AsyncWebhookClient(str(url), session=client.session)  # the shared connection pool
            resp = await webhook.send(text=text, response_type="ephemeral", replace_original=False)
            return resp.status_code == 200
    except (SlackApiError, OSError) as exc:
        log.warning("could not tell the user about a failure: %s", exc)
    return False


class Responder:
    """Bolt's ``respond`` (a message to the payload's response_url) over the process's shared HTTP session
    (Bolt's own opens a session, and a connection, per reply).
    """

    def __init__(self, client: AsyncWebClient, body: dict[str, Any]) -> None:
        self._client = client
        self._url = str(body.get("response_url") or "")

    async def __call__(self, **message: Any) -> WebhookResponse:
        """Send ``message`` (text, blocks, response_type...) to the response_url."""
        if not self._url:
            raise ValueError("this payload has no response_url to answer")
        return await AsyncWebhookClient(self._url, session=self._client.session).send(**message)


def verified(request: AsyncBoltRequest) -> bool:
    """True for a request whose signature our HTTP server checked (bot/adapters/slack/verify.py), or one
    that came over Socket Mode's websocket (opened with the app token: Slack's own channel).
    """
    return request.mode == "socket_mode" or request.context.get(VERIFIED) is True


def install(app: Any, client: AsyncWebClient | Callable[[], AsyncWebClient]) -> None:
    """Register the error handler on a Bolt AsyncApp; ``client`` tells the user (or gives the current
    request's client, in OAuth mode its workspace's).
    """
    client_of: Callable[[], AsyncWebClient] = client if callable(client) else (lambda: client)

    async def on_error(
        error: Exception, body: dict[str, Any], request: AsyncBoltRequest, response: BoltResponse | None
    ) -> BoltResponse | None:
        if not verified(request):
            # Whoever sent it chose the response_url and view id in it: telling "the user" would post to
            # a URL of their choice or touch a view with our token. One line, no traceback, no answer.
            log.info("Slack: an unverified request failed (%s); nothing is sent", type(error).__name__)
            return BoltResponse(status=401, body="")
        text = user_text(error)
        if isinstance(error, RankZeroError):
            log.info("Slack %s refused: %s", _kind(body), error)
        else:
            log.error("Slack %s failed", _kind(body), exc_info=error)
        if response is not None and body.get("type") == "view_submission":
            # Not acknowledged yet: the answer itself replaces the form with what happened.
            view = json.dumps({"response_action": "update", "view": bk.message_view(text)})
            return BoltResponse(status=200, body=view, headers={"content-type": "application/json"})
        if response is not None:
            # Acknowledge now (Slack shows its own error after 3 s) and tell through the payload meanwhile.
            task = asyncio.create_task(tell(client_of(), body, text))
            _PENDING.add(task)
            task.add_done_callback(_PENDING.discard)
            return BoltResponse(status=200, body="")
        await tell(client_of(), body, text)
        # Bolt's async runner stores this handler's (absent) response as the ack once it returns; if its
        # 10 ms poll has not picked up the ack sent before the failure by then, the request is answered
        # 404 after 3 s. Returning a little later lets the poll see the real ack first.
        await asyncio.sleep(ACK_POLL_GRACE_S)
        return None

    # Registered by a call, not as a decorator: Bolt's app is typed Any here, and mypy --strict would call
    # the decorated handler untyped.
    app.error(on_error)


# ---------------------------------------------------------------------- modal submissions within 3 s
#: How long a submission waits for its work before answering "Working…" instead (Slack's limit is 3 s,
#: counted from the click, network included).
ACK_BUDGET_S = 2.0


@dataclass(frozen=True)
class Submitted:
    """What a submission's work decided: the ack to send when it finished in time, and the view to show
    (views.update) when it finished after the "Working…" answer (None: the ack's own view).
    """

    ack: dict[str, Any]
    late_view: dict[str, Any] | None = None


async def answer_submission(
    ack: Any,
    client: AsyncWebClient,
    view_id: str,
    work: Awaitable[Submitted],
    *,
    working: dict[str, Any],
    started: float,
) -> None:
    """Ack a view_submission within Slack's 3 s whatever ``work`` takes: its own answer when it is done
    within :data:`ACK_BUDGET_S` of ``started`` (field errors stay on the form), else ``response_action:
    update`` to ``working`` at once and ``views.update`` with the outcome when the work ends. A failure
    after that is raised for the error handler, which updates the same modal.
    """
    task: asyncio.Task[Submitted] = asyncio.ensure_future(work)
    wait = max(0.0, ACK_BUDGET_S - (time.monotonic() - started))
    done, _ = await asyncio.wait({task}, timeout=wait)
    if task in done:
        await ack(**task.result().ack)  # a failure in time is raised here, before any ack
        return
    await ack(response_action="update", view=working)
    outcome = await task
    view = outcome.late_view or outcome.ack.get("view")
    if view is not None:
        await client.views_update(view_id=view_id, view=view)
