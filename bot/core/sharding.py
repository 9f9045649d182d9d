"""Discord sharding: which ``rankzero serve`` process owns which guild's channels.

Discord assigns each guild to one gateway shard by ``shard_id = (guild_id >> 22) % num_shards`` (Discord
API docs, Topics > Gateway > Sharding); direct messages go to shard 0 only. A process started with a set of
shard ids connects those shards, receives only their guilds' events and interactions, and its scheduler
posts only to their guilds' channels. Channels that are not sharded (Slack, console, file) are served by
every process: Slack delivers its HTTP requests to whichever replica its load balancer picks, and every
scheduled post, reminder, close and summary is claimed in the database first, so however many processes
schedule a Slack channel, each slot is posted once. Discord DMs stay with shard 0's process (Discord
delivers them there only).

In a Kubernetes StatefulSet each pod runs one shard: its id is the pod's ordinal (``rankzero-bot-2`` runs
shard 2), the count is the replica count (:func:`shard_of_pod`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from bot.core.models import ChannelRef

#: The platform whose channels are split by shard; every other platform is served by every process.
SHARDED_PLATFORM = "discord"
#: Discord's limit on shards per bot is far below this; it only bounds a typo.
MAX_SHARDS = 100_000
#: At most this much of a malformed value is echoed in its error.
SHOWN = 60
#: A StatefulSet pod's name (and hostname): ``<statefulset name>-<ordinal>``.
_ORDINAL = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?-(0|[1-9][0-9]{0,5})$")


def shard_of(guild_id: int, shard_count: int) -> int:
    """The shard Discord delivers ``guild_id``'s events on."""
    return (guild_id >> 22) % shard_count


@dataclass(frozen=True)
class ShardSet:
    """The shards one process connects: ``ids`` out of ``count`` (Discord's ``shard_ids``/``shard_count``)."""

    ids: tuple[int, ...]
    count: int

    def __str__(self) -> str:
        return f"{','.join(map(str, self.ids))}/{self.count}"

    @property
    def owns_unsharded(self) -> bool:
        """True for the process that holds shard 0, the one Discord delivers direct messages to."""
        return 0 in self.ids

    def owns_guild(self, guild_id: int) -> bool:
        """True when ``guild_id`` is on one of this process's shards."""
        return shard_of(guild_id, self.count) in self.ids

    def owns(self, channel: ChannelRef) -> bool:
        """True when this process posts to ``channel``: a Discord server's channel on one of its shards, a
        Discord DM channel with shard 0, and any other platform's channel (Slack, console, file) always.

        Several processes then schedule the same Slack channel; the database's claims (one challenge per
        channel and day, closing ``WHERE status='open'``, one reminder and summary claim row) let one of
        them act on each slot.
        """
        if channel.platform == SHARDED_PLATFORM:
            if channel.workspace_id.isdigit():
                return self.owns_guild(int(channel.workspace_id))
            return self.owns_unsharded
        return True


def parse_shards(text: str) -> ShardSet:
    """``"0,1/4"`` (shard ids 0 and 1 of 4 shards) -> ShardSet; ValueError with a one-line reason."""
    example = 'write it as "IDS/COUNT", e.g. "0,1/4" for shards 0 and 1 of 4'
    ids_text, slash, count_text = text.strip().partition("/")
    # A pasted blob must not become a screenful of error: the value is echoed cut to SHOWN characters.
    text = text if len(text) <= SHOWN else text[:SHOWN] + "…"
    if not slash or not ids_text.strip() or not count_text.strip():
        raise ValueError(f"shards {text!r}: {example}")
    try:
        count = int(count_text)
        ids = [int(part) for part in ids_text.split(",")]
    except ValueError:
        raise ValueError(f"shards {text!r}: ids and count must be whole numbers; {example}") from None
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"shards {text!r}: the shard count must be between 1 and {MAX_SHARDS}")
    outside = sorted({i for i in ids if not 0 <= i < count})
    if outside:
        raise ValueError(
            f"shards {text!r}: shard id(s) {outside} outside 0..{count - 1} (ids are 0 to count - 1)"
        )
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)  # linear: ids may be many
    if duplicates:
        raise ValueError(f"shards {text!r}: shard id(s) {duplicates} given twice")
    return ShardSet(tuple(sorted(ids)), count)


def ordinal_of(pod_name: str) -> int:
    """The ordinal of a StatefulSet pod from its name or hostname (``rankzero-bot-2`` -> 2); ValueError
    with a one-line reason when the name does not end in ``-<number>``.
    """
    shown = pod_name if len(pod_name) <= SHOWN else pod_name[:SHOWN] + "…"
    found = _ORDINAL.match(pod_name.strip().lower())
    if found is None:
        raise ValueError(
            f"the pod name {shown!r} does not end in -<ordinal> (a StatefulSet pod's does, e.g. "
            "rankzero-bot-2): set RANKZERO_DISCORD_SHARD_INDEX, or RANKZERO_DISCORD_SHARDS=IDS/COUNT"
        )
    return int(found.group(2))


def shard_of_pod(pod_name: str, count: int, index: int | None = None) -> ShardSet:
    """The one shard a StatefulSet pod runs: ``index`` when given (the downward API's pod-index label),
    else the ordinal in ``pod_name``, out of ``count`` (the replica count); ValueError when the id is
    outside ``0..count - 1`` (more replicas than the configured count) or the name has no ordinal.
    """
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"the shard count {count} must be between 1 and {MAX_SHARDS}")
    shard = ordinal_of(pod_name) if index is None else index
    if not 0 <= shard < count:
        raise ValueError(
            f"shard {shard} (pod {pod_name[:SHOWN]!r}) is outside 0..{count - 1}: "
            f"RANKZERO_DISCORD_SHARD_COUNT={count} must equal the StatefulSet's replicas"
        )
    return ShardSet((shard,), count)
