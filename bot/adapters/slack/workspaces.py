"""Which Slack workspace a channel belongs to, Enterprise Grid included, as one ``ChannelRef.workspace_id``.

Everything RankZero keeps per channel (schedules, challenges, leaderboards) is keyed by
``(platform, workspace_id, channel_id)``, and in OAuth mode the scheduler finds the bot token to post with
from ``workspace_id`` alone. So the key carries what slack_sdk's installation store needs to find that
token (``enterprise_id``, ``team_id``, ``is_enterprise_install``):

- a workspace outside Enterprise Grid: its team id, ``T0123`` (the same key as single-token mode);
- a workspace of a Grid org where the app is installed per workspace: ``E0456/T0123``;
- an org-wide install on Grid: the enterprise id alone, ``E0456`` (its channels are unique in the org and
  are seen from several workspaces; the install has no single team).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workspace:
    """Where an install lives: a team, a team in a Grid org, or a whole Grid org."""

    enterprise_id: str | None
    team_id: str | None
    is_enterprise_install: bool = False

    @property
    def key(self) -> str:
        """The ``ChannelRef.workspace_id`` of this workspace's channels."""
        if self.is_enterprise_install and self.enterprise_id:
            return self.enterprise_id
        if self.enterprise_id and self.team_id:
            return f"{self.enterprise_id}/{self.team_id}"
        return self.team_id or self.enterprise_id or ""

    @classmethod
    def from_key(cls, key: str) -> Workspace:
        """The inverse of :attr:`key`."""
        if "/" in key:
            enterprise, team = key.split("/", 1)
            return cls(enterprise or None, team or None)
        if key.startswith("E"):
            return cls(key, None, is_enterprise_install=True)
        return cls(None, key or None)

    def __str__(self) -> str:
        return self.key
