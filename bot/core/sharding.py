"""Discord sharding: which ``rankzero serve`` process owns which guild's channels.

Discord assigns each guild to one gateway shard by ``shard_id = (guild_id >> 22) % num_shards`` (Discord
API docs, Topics > Gateway > Sharding); direct messages go to shard 0 only. A process started with a set of
shard ids connects those shards, receives only their guilds' events and interactions, and its scheduler
posts only to their guilds' channels. Channels that are not sharded (Slack, console, file) are served by
the process holding shard 0, so exactly one process posts to them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bot.core.models import ChannelRef

#: The platform whose channels are split by shard; every other platform belongs to shard 0's process.
SHARDED_PLATFORM = "discord"
#: Discord's limit on shards per bot is far below this; it only bounds a typo.
MAX_SHARDS = 100_000
#: At most this much of a malformed value is echoed in its error.
SHOWN = 60


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
        """True for the process that serves Slack, console and file channels (and Discord DMs): shard 0's."""
        return 0 in self.ids

    def owns_guild(self, guild_id: int) -> bool:
        """True when ``guild_id`` is on one of this process's shards."""
        return shard_of(guild_id, self.count) in self.ids

    def owns(self, channel: ChannelRef) -> bool:
        """True when this process posts to ``channel`` (its guild's shard, else shard 0's process)."""
        if channel.platform == SHARDED_PLATFORM and channel.workspace_id.isdigit():
            return self.owns_guild(int(channel.workspace_id))
        return self.owns_unsharded


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
