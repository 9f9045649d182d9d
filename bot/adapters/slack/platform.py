"""SlackPlatform: the ChatPlatform port over Slack's Web API (slack_sdk's AsyncWebClient).

A message reference is ``"<channel id>:<ts>"`` so the daily post can be edited (closed) and the results
posted in its thread. Posts longer than 50 blocks are split into several messages.

In OAuth mode each post uses the bot token of the channel's workspace, found in slack_sdk's installation
store from ``ChannelRef.workspace_id`` (bot/adapters/slack/workspaces.py). A workspace that uninstalled the
app (or revoked its token) has none: the post is refused with a PostRefusedError saying so, and nobody is
told in Slack (the admin channel is one workspace's; another workspace's troubles are not its business).
With token rotation (tokens that expire every 12 hours, and a refresh token), the token is renewed before
the post when it is about to expire, as Bolt renews it for incoming requests.

Each outbox message carries its post's mark as message metadata (event type ``rankzero_post``). A try that
follows an earlier claim of the same post (maybe accepted by Slack, its record lost with a dead process)
first reads the channel's latest messages (conversations.history, or conversations.replies in a thread,
with ``include_all_metadata``; ``channels:history`` / ``groups:history``) and takes this bot's message with
the mark as the post. Residual window: a message Slack has not listed yet when the lookup runs, and a
lookup Slack refuses (no scope, not a member): that post goes ahead and may repeat (see the README).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_sdk.errors import SlackApiError, SlackTokenRotationError
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters import charts
from bot.adapters.chart_drawing import ChartUnavailableError, draw, missing_note
from bot.adapters.notices import NoticeThrottle
from bot.adapters.slack import blocks as bk
from bot.adapters.slack import dispute_blocks as dbk
from bot.adapters.slack import permissions, uploads
from bot.adapters.slack import practice_blocks as pb
from bot.adapters.slack import report_blocks as rb
from bot.adapters.slack.workspaces import Workspace
from bot.core import parts
from bot.core.cards import (
    ChallengeCard,
    DeliveryNotice,
    LeaderboardCard,
    PracticeNudgeCard,
    ReminderCard,
    ResultsCard,
    TeamReportCard,
)
from bot.core.disputes import AdminNotice
from bot.core.errors import PostRefusedError
from bot.core.models import ChannelRef, PlayerRef
from bot.core.parts import send_parts

log = logging.getLogger(__name__)

#: The ChannelRef.platform of Slack channels.
PLATFORM = "slack"
#: chat.update's answer when the daily post was deleted: the results go to the channel, not its thread.
GONE = frozenset({"message_not_found"})
#: A rotating token is renewed when it expires within this many minutes (Bolt's default, for requests).
ROTATE_BEFORE_MIN = 120


#: The metadata event type of an outbox post's messages; its payload's ``post`` is the message's mark.
MARK_EVENT = "rankzero_post"
#: How many of the channel's (or thread's) latest messages an uncertain try looks through: one call of
#: conversations.history (Tier 3; ``limit`` up to 999) asks for all of them, and the cursor is followed only
#: when Slack answers fewer (apps under its reduced limits get 15 a page, one call a minute: the client waits
#: out the 429).
MARK_SCAN = 200
MARK_PAGE = 200
#: Lookups Slack refuses for good: the post goes ahead unchecked (see SlackPlatform._posted_already).
LOOKUP_REFUSED = frozenset({"missing_scope", "not_in_channel", "thread_not_found"})


def _mark_index(message: Any, mark: parts.PostMark, bot_id: object) -> int | None:
    """Which message of ``mark``'s post ``message`` (as Slack lists it: hostile) is; None: none of ours."""
    if not isinstance(message, dict) or not bot_id or message.get("bot_id") != bot_id:
        return None
    metadata = message.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("event_type") != MARK_EVENT:
        return None
    payload = metadata.get("event_payload")
    return mark.index_of(payload.get("post")) if isinstance(payload, dict) else None


def split_ref(message_ref: str | None) -> tuple[str, str] | None:
    """(channel, ts) of a message reference made by :meth:`SlackPlatform.post_challenge`."""
    if not message_ref or ":" not in message_ref:
        return None
    channel, ts = message_ref.split(":", 1)
    return channel, ts


class SlackPlatform:
    """Outbound posts to Slack channels."""

    def __init__(self, client: AsyncWebClient, *, admin_channel: str | None = None) -> None:
        self.client = client
        #: Where admin notices go (RANKZERO_SLACK_ADMIN_CHANNEL_ID); None: they are only logged.
        self.admin_channel = admin_channel
        #: Repeats of the same refusal (a retried post) are logged, not told again.
        self.notices = NoticeThrottle()
        #: OAuth mode: where each workspace's bot token is (set when the adapter starts); None: one token.
        self.installations: AsyncInstallationStore | None = None
        #: Where a workspace reinstalls the app (OAuth mode), for the refusal's text.
        self.install_hint = "/slack/install"
        #: OAuth mode with token rotation: renews expiring bot tokens before a post (set at start).
        self.rotator: AsyncTokenRotator | None = None
        self._rotating: dict[str, asyncio.Lock] = {}

    async def client_for(self, channel: ChannelRef) -> AsyncWebClient:
        """The client posting in ``channel``: the one token, or (OAuth mode) its workspace's bot token.

        Raises PostRefusedError when the workspace has no installation (uninstalled, token revoked).
        """
        if self.installations is None:
            return self.client
        ws = Workspace.from_key(channel.workspace_id)
        bot = await self.installations.async_find_bot(
            enterprise_id=ws.enterprise_id, team_id=ws.team_id, is_enterprise_install=ws.is_enterprise_install
        )
        if bot is None or not bot.bot_token:
            raise PostRefusedError(
                f"RankZero is not installed in Slack workspace {ws} (it was uninstalled or its token was "
                f"revoked): a workspace admin can install it again at {self.install_hint}."
            )
        token = await self._fresh_token(ws, bot)
        # A copy of the base client (its base URL and retries) with this workspace's token.
        return AsyncWebClient(
            token=token,
            base_url=self.client.base_url,
            timeout=self.client.timeout,
            retry_handlers=list(self.client.retry_handlers),
            session=self.client.session,  # the process's one connection pool (SlackAdapter._open_session)
        )

    async def _fresh_token(self, ws: Workspace, bot: Bot) -> str:
        """The bot token to post with: with token rotation on (the install came with a refresh token),
        renewed first when it expires within :data:`ROTATE_BEFORE_MIN` minutes, as Bolt does for incoming
        requests, and saved through the installation store (both the install and bot rows: the refresh
        token is spent by its use, so the install row must not keep the old one for Bolt to reuse).
        One rotation at a time per workspace in this process.
        """
        assert bot.bot_token is not None and self.installations is not None
        if self.rotator is None or bot.bot_token_expires_at is None or not bot.bot_refresh_token:
            return bot.bot_token
        async with self._rotating.setdefault(ws.key, asyncio.Lock()):
            # Read again inside the lock: another post may have rotated it meanwhile.
            inst = await self.installations.async_find_installation(
                enterprise_id=ws.enterprise_id,
                team_id=ws.team_id,
                is_enterprise_install=ws.is_enterprise_install,
            )
            try:
                if inst is not None:
                    fresh = await self.rotator.perform_token_rotation(
                        installation=inst, minutes_before_expiration=ROTATE_BEFORE_MIN
                    )
                    if fresh is None:
                        return str(inst.bot_token or bot.bot_token)
                    await self.installations.async_save(fresh)
                    log.info("Slack workspace %s: bot token renewed (token rotation)", ws)
                    return str(fresh.bot_token)
                rotated = await self.rotator.perform_bot_token_rotation(
                    bot=bot, minutes_before_expiration=ROTATE_BEFORE_MIN
                )
                if rotated is None:
                    return bot.bot_token
                await self.installations.async_save_bot(rotated)
                return str(rotated.bot_token)
            except SlackTokenRotationError as exc:
                error = exc.api_error.response.get("error")
                raise PostRefusedError(
                    f"Slack refused to renew RankZero's token in workspace {ws} ({error}): a workspace "
                    f"admin can install it again at {self.install_hint}."
                ) from None

    async def _post(
        self,
        channel: str,
        blocks: list[bk.Block],
        text: str,
        thread_ts: str | None = None,
        *,
        client: AsyncWebClient | None = None,
        marked: bool = False,
    ) -> str | None:
        """Post ``blocks`` (several messages past Slack's block limit); the first message's ts.

        ``marked``: an outbox post (not an admin line about it): each message carries the post's mark
        (:func:`bot.core.parts.current_mark`) as its metadata, and when an earlier try may have been
        accepted (``uncertain``) the messages Slack has already are found by their marks and not posted
        again (their ts stands for them).
        """
        client = client or self.client
        mark = parts.current_mark() if marked else None
        found: dict[int, str] = {}
        if mark is not None and mark.uncertain:
            found = await self._posted_already(client, channel, mark, thread_ts)
        first: str | None = None
        for index, chunk in enumerate(bk.split_message(blocks)):
            if index in found:
                log.warning("Slack: message %s of a post was accepted before; not posted again", index)
                first = first or found[index]
                continue
            kwargs: dict[str, Any] = {"channel": channel, "blocks": chunk, "text": bk.clip(text)}
            if thread_ts:
                kwargs["thread_ts"] = thread_ts
            if mark is not None:
                kwargs["metadata"] = {"event_type": MARK_EVENT, "event_payload": {"post": mark.part(index)}}
            resp = await client.chat_postMessage(**kwargs)
            first = first or str(resp.get("ts"))
        return first

    async def _posted_already(
        self, client: AsyncWebClient, channel: str, mark: parts.PostMark, thread_ts: str | None
    ) -> dict[int, str]:
        """The messages of the post ``mark`` this bot has in ``channel`` (or in the thread ``thread_ts``),
        by index -> ts, among the latest :data:`MARK_SCAN` messages (newest first): a bounded look, since an
        uncertain try follows its predecessor within minutes, once the lease ran out. Only this bot's
        messages count (another app could post any metadata), and only in this channel of this workspace
        (the client holds this workspace's token).

        A lookup Slack refuses for good (no ``channels:history`` / ``groups:history`` scope, a public
        channel the bot posts in through ``chat:write.public`` without being a member) is logged and the
        post goes ahead (at least once, as before marks); any other failure is raised (the outbox retries).
        """
        try:
            me = await client.auth_test()
            bot_id = me.get("bot_id")
            found: dict[int, str] = {}
            cursor: str | None = None
            seen = 0
            while seen < MARK_SCAN:
                args: dict[str, Any] = {
                    "channel": channel,
                    "limit": min(MARK_PAGE, MARK_SCAN - seen),
                    "include_all_metadata": True,
                }
                if cursor:
                    args["cursor"] = cursor
                if thread_ts:
                    resp = await client.conversations_replies(ts=thread_ts, **args)
                else:
                    resp = await client.conversations_history(**args)
                messages = resp.get("messages") or []
                seen += len(messages)
                for message in messages:
                    index = _mark_index(message, mark, bot_id)
                    if index is not None and index not in found:
                        found[index] = str(message.get("ts"))
                cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
                if not messages or not cursor:
                    break
            return found
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error not in LOOKUP_REFUSED:
                raise
            log.warning(
                "Slack: cannot look for an earlier try of a post in %s (%s): posting it (it may repeat); "
                "grant channels:history and groups:history to post each message once",
                channel,
                error,
            )
            return {}

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Post the daily challenge with its Start button; return ``channel:ts``.

        A refusal (not in the channel, a missing scope...) is told to the admin channel and raised as a
        PostRefusedError saying what to grant; the service then removes the unposted challenge.
        """
        client = await self.client_for(channel)
        try:
            ts = await self._post(
                channel.channel_id, bk.challenge_blocks(card), bk.esc(card.title), client=client, marked=True
            )
        except SlackApiError as exc:
            refused = permissions.refusal(exc, channel.channel_id)
            # A refused post is retried until it works; the admins hear of each cause once per period.
            if self.notices.first(f"{channel.channel_id}:{card.day}:{refused}"):
                await self._tell_admins(
                    f":warning: Could not post *{bk.esc(card.title)}*: {bk.esc(str(refused))}"
                )
            else:
                log.warning("still cannot post in %s: %s", channel.channel_id, refused)
            raise refused from exc
        return f"{channel.channel_id}:{ts}" if ts else None

    async def _tell_admins(self, text: str) -> None:
        """A line in the admin channel (logged when there is none, or when it fails too). In OAuth mode it
        is only logged: the admin channel belongs to one workspace, the refusal maybe to another.
        """
        if self.installations is not None:
            log.warning("Slack (OAuth mode): %s", text)
            return
        if not self.admin_channel:
            log.warning("no RANKZERO_SLACK_ADMIN_CHANNEL_ID for: %s", text)
            return
        try:
            await self._post(self.admin_channel, [bk.section(text)], text)
        except SlackApiError as exc:
            log.error("could not post to the admin channel (%s): %s", exc.response.get("error"), text)

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Post the results (in the daily post's thread when there is one) and mark the daily post closed.

        The results come first and do not depend on the edit: a daily post someone deleted
        (``message_not_found``) or cannot be edited any more only costs the "closed" mark, and the results
        are then posted to the channel itself rather than into the thread of a message that is gone. A
        refusal of the results post itself is raised as a PostRefusedError saying what to do (the outbox
        retries it and tells the admins).
        """
        ref = split_ref(message_ref)
        client = await self.client_for(channel)
        thread = ref[1] if ref is not None else None
        if ref is not None and not await self._mark_closed(client, ref, card):
            thread = None  # the daily post is gone: its thread with it
        try:
            await self._post(
                channel.channel_id,
                bk.results_blocks(card),
                f"Results · {bk.esc(card.title)}",
                thread_ts=thread,
                client=client,
                marked=True,
            )
        except SlackApiError as exc:
            raise permissions.refusal(exc, channel.channel_id) from exc

    async def _mark_closed(self, client: AsyncWebClient, ref: tuple[str, str], card: ResultsCard) -> bool:
        """Edit the daily post to its closed form; False when the post no longer exists. Any other
        refusal (an archived channel, the bot removed) is logged and left to the results post, which
        meets the same cause and reports it.
        """
        try:
            await client.chat_update(
                channel=ref[0], ts=ref[1], blocks=bk.closed_blocks(card), text=bk.esc(card.title)
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            log.warning("could not mark the daily post %s:%s closed: %s", ref[0], ref[1], error)
            return error not in GONE
        return True

    async def post_reminder(self, channel: ChannelRef, card: ReminderCard, message_ref: str | None) -> None:
        """Remind the channel before the window closes (a refusal: a PostRefusedError saying what to do)."""
        try:
            await self._post(
                channel.channel_id,
                bk.reminder_blocks(card),
                f"{bk.esc(card.title)} closes soon",
                client=await self.client_for(channel),
                marked=True,
            )
        except SlackApiError as exc:
            raise permissions.refusal(exc, channel.channel_id) from exc

    async def post_delivery_notice(self, channel: ChannelRef, notice: DeliveryNotice) -> None:
        """Tell the admin channel that a post of ``channel`` keeps failing or was given up (the outbox tells
        each cause once; bot/core/outbox.py).
        """
        await self._tell_admins(f":warning: {bk.esc(notice.text())} (channel <#{channel.channel_id}>)")

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        """Post the weekly team report: the heatmap as a file with its alt text, then the movers and the
        most-missed problems with their "Explanation" buttons (two parts, each sent once across the
        outbox's retries). Without the heatmap (it could not be drawn, or the app lacks ``files:write``:
        an install from before issue 30) the report goes out as text saying so, and the admins hear of a
        missing scope. Any other refusal is a PostRefusedError saying what to do, for the outbox.
        """
        client = await self.client_for(channel)
        note: str | None = None
        try:
            heatmap: charts.Chart | None = await draw(charts.team_heatmap, card)
        except ChartUnavailableError as exc:
            heatmap, note = None, bk.esc(missing_note(str(exc)))

        ran: set[str] = set()

        async def send(part: str) -> None:
            nonlocal note
            ran.add(part)
            if part == "heatmap" and heatmap is not None:
                note = note or await self._upload_heatmap(client, channel, heatmap, card)
            elif part == "report":
                if heatmap is not None and "heatmap" not in ran:
                    # An earlier try did the heatmap part; its note (a refused upload) died with that try:
                    # asked again, so the report says the same as it would have then.
                    note = await self._files_note(client)
                await self._post(
                    channel.channel_id,
                    rb.report_blocks(card, note),
                    rb.report_text(card),
                    client=client,
                    marked=True,
                )

        parts = ["heatmap", "report"] if heatmap is not None else ["report"]
        try:
            await send_parts(parts, send, key=lambda part: f"{part}:{card.title}:{card.week_start}")
        except SlackApiError as exc:
            raise permissions.refusal(exc, channel.channel_id) from exc

    async def _files_note(self, client: AsyncWebClient) -> str | None:
        """The report's note when the token lacks ``files:write`` (as a refused upload says), from the scopes
        Slack's auth.test reports (X-OAuth-Scopes); None when it has it or Slack does not say.
        """
        me = await client.auth_test()
        headers = {str(k).lower(): str(v) for k, v in (me.headers or {}).items()}
        if "x-oauth-scopes" not in headers:
            return None
        scopes = {scope.strip() for scope in headers["x-oauth-scopes"].split(",")}
        if uploads.FILES_SCOPE in scopes:
            return None
        return bk.esc(missing_note(uploads.scope_words(uploads.FILES_SCOPE)))

    async def _upload_heatmap(
        self, client: AsyncWebClient, channel: ChannelRef, heatmap: charts.Chart, card: TeamReportCard
    ) -> str | None:
        """Share the heatmap in the channel; a note for the report when it cannot be (None: shared)."""
        try:
            await uploads.upload_chart(
                client, heatmap, channel=channel.channel_id, comment=bk.esc(card.title)
            )
        except SlackApiError as exc:
            if exc.response.get("error") != "missing_scope":
                raise  # the channel refuses the bot: the report would be refused too
            words = uploads.refusal_words(exc)
            if self.notices.first(f"{channel.workspace_id}:files-scope"):
                await self._tell_admins(f":warning: The team report went out without its heatmap: {words}.")
            return bk.esc(missing_note(words))
        return None

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Post the week's leaderboard (a refusal: a PostRefusedError saying what to do, for the outbox's
        notice to the admins).
        """
        try:
            await self._post(
                channel.channel_id,
                bk.leaderboard_blocks(card),
                bk.esc(card.title),
                client=await self.client_for(channel),
                marked=True,
            )
        except SlackApiError as exc:
            raise permissions.refusal(exc, channel.channel_id) from exc

    async def post_admin_notice(self, notice: AdminNotice, channel: ChannelRef | None = None) -> None:
        """Post a notice (an official answer the runner contradicted) to the admin channel, if one is set."""
        if self.installations is not None:
            log.warning("admin notice (OAuth mode: no one workspace's channel to post it in): %s", notice)
            return
        if not self.admin_channel:
            log.warning("admin notice (no RANKZERO_SLACK_ADMIN_CHANNEL_ID set): %s", notice)
            return
        try:
            await self._post(
                self.admin_channel,
                dbk.admin_notice_blocks(notice),
                dbk.admin_notice_text(notice),
                marked=True,
            )
        except SlackApiError as exc:  # said in words for the log (the outbox retries it)
            raise permissions.refusal(exc, self.admin_channel) from exc

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        """DM the player: a user id as channel posts to the app's Messages tab with them (chat:write)."""
        text = pb.nudge_text(card)
        await self._post(player.user_id, [bk.section(text)], text)
