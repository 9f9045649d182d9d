"""Charts as Slack files (issue 30): the player's stats chart and the team report's heatmap.

slack_sdk's ``files_upload_v2`` makes Slack's three-step upload (docs.slack.dev): files.getUploadURLExternal
(``filename``, ``length``, ``alt_txt``: the image's description for screen readers, at most 1000 characters,
else ``alt_txt_too_large``), a POST of the bytes to the ``upload_url`` it answers, then
files.completeUploadExternal (``files=[{id, title}]``, ``channel_id`` or ``channels``, ``initial_comment``,
``thread_ts``), which shares the file. Both methods need the ``files:write`` bot scope (``missing_scope``
otherwise); a channel the bot cannot post in answers as chat.postMessage does (``not_in_channel``,
``channel_not_found``...).

Slack has no ephemeral files: a file shared in a channel is seen by everyone there. So a player's chart
goes to the app's DM with them (``channels`` takes user ids: "channel IDs or user IDs where the file will be
shared"), while the figures stay in the private reply where they asked; see :func:`send_stats_chart`.
"""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters import charts
from bot.adapters.chart_drawing import ChartUnavailableError, draw, missing_note
from bot.core.cards import StatsCard

log = logging.getLogger(__name__)

#: Slack's longest image description (files.getUploadURLExternal).
MAX_ALT_TXT = 1000
#: The scope both upload methods need.
FILES_SCOPE = "files:write"


def alt_text(chart: charts.Chart) -> str:
    """The chart's alt text within Slack's 1000 characters (never empty)."""
    alt = chart.alt_text.strip() or "A chart (no description was given)."
    return alt if len(alt) <= MAX_ALT_TXT else alt[: MAX_ALT_TXT - 1] + "…"


async def upload_chart(
    client: AsyncWebClient,
    chart: charts.Chart,
    *,
    channel: str | None = None,
    user: str | None = None,
    comment: str | None = None,
) -> None:
    """Share ``chart`` in ``channel`` (a conversation id) or in the app's DM with ``user``, its alt text
    set. Slack's refusals propagate (SlackApiError; SlackRequestError when the upload URL refuses the bytes).
    """
    await client.files_upload_v2(
        content=chart.png,
        filename=chart.filename,
        title=chart.filename.removesuffix(".png").replace("-", " "),
        alt_txt=alt_text(chart),
        channel=channel,
        channels=[user] if user is not None else None,
        initial_comment=comment,
    )


def refusal_words(exc: SlackApiError) -> str:
    """Why Slack refused an upload, in words a player or admin can act on."""
    error = str(exc.response.get("error"))
    if error == "missing_scope":
        return scope_words(str(exc.response.get("needed") or FILES_SCOPE))
    return f"Slack refused the upload ({error})"


def scope_words(needed: str) -> str:
    """What to do when the app lacks the scope ``needed``, in words an admin can act on."""
    return f"the Slack app lacks the `{needed}` scope: a workspace admin can add it and reinstall the app"


async def send_stats_chart(client: AsyncWebClient, user: str, card: StatsCard) -> str:
    """Draw the player's chart and share it in the app's DM with ``user``; what to tell them, in mrkdwn
    (where the chart is, or why it could not be sent). Never raises for a chart's failure: the figures
    were already given.
    """
    try:
        chart = await draw(charts.player_chart, card)
        await upload_chart(client, chart, user=user, comment="Your RankZero chart :chart_with_upwards_trend:")
    except ChartUnavailableError as exc:
        return missing_note(str(exc))
    except SlackApiError as exc:
        log.warning("stats chart for %s refused by Slack: %s", user, exc.response.get("error"))
        return missing_note(refusal_words(exc))
    except SlackRequestError as exc:  # the upload URL refused the bytes
        log.warning("stats chart for %s: the upload failed: %s", user, exc)
        return missing_note("the upload failed")
    except (aiohttp.ClientError, TimeoutError) as exc:  # slack_sdk passes network failures on as they are
        log.warning("stats chart for %s: Slack could not be reached: %r", user, exc)
        return missing_note("Slack could not be reached for the upload; try again in a moment")
    # Slack shows a file to everyone in the conversation it is shared in: a DM keeps it the player's.
    return ":chart_with_upwards_trend: Your chart is in your messages with RankZero."
