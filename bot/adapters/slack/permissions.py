"""Can the bot post in a channel? Checked before ``schedule set`` and ``post-now`` (conversations.info), and
said in words an admin can act on when Slack refuses a post (what to invite, which scope to add).
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.core.errors import PostRefusedError

log = logging.getLogger(__name__)

#: How admins add the bot to a channel.
INVITE = "`/invite @RankZero`"


def refusal_text(error: str, channel_id: str, needed: str | None = None) -> str:
    """What to do about Slack's ``error`` for a post in ``channel_id``."""
    # Plain words (the text is escaped where it is shown): the channel's id names it unambiguously.
    where = f"channel {channel_id}"
    if error == "not_in_channel":
        return (
            f"I am not a member of {where}: invite me there with {INVITE} (or give the app the "
            "`chat:write.public` scope), then run the command again."
        )
    if error == "channel_not_found":
        return (
            f"I cannot see {where} (a private channel I am not in, or it does not exist): invite me there "
            f"with {INVITE}, then run the command again."
        )
    if error == "missing_scope":
        scope = f"`{needed}`" if needed else "a needed"
        return (
            f"the Slack app lacks the {scope} scope: add it under OAuth & Permissions, reinstall the app "
            "to the workspace, then run the command again."
        )
    if error in ("token_revoked", "invalid_auth", "account_inactive"):
        return (
            "Slack no longer accepts the app's token for this workspace (the app was uninstalled or its "
            "token revoked): a workspace admin can install it again."
        )
    if error == "is_archived":
        return f"{where} is archived: unarchive it or use another channel."
    if error in ("restricted_action", "restricted_action_read_only_channel"):
        return (
            f"a workspace setting lets only some members post in {where}: ask a Slack admin to allow the app."
        )
    return f"Slack refused to post in {where} ({error})."


def refusal(exc: SlackApiError, channel_id: str) -> PostRefusedError:
    """The PostRefusedError (with what to do) for Slack's refusal of a post."""
    needed = exc.response.get("needed")
    return PostRefusedError(refusal_text(str(exc.response.get("error")), channel_id, needed))


async def ensure_can_post(client: AsyncWebClient, channel_id: str, scopes: frozenset[str]) -> None:
    """Raise PostRefusedError unless the bot can post in ``channel_id``: it is a member, or the channel is
    public and the token has ``chat:write.public`` (``scopes``: the token's, from auth.test).
    """
    try:
        resp = await client.conversations_info(channel=channel_id)
    except SlackApiError as exc:
        raise refusal(exc, channel_id) from exc
    channel = resp.get("channel") or {}
    public_ok = not channel.get("is_private") and "chat:write.public" in scopes
    if not channel.get("is_member") and not public_ok:
        raise PostRefusedError(refusal_text("not_in_channel", channel_id))
