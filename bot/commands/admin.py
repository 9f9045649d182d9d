"""Who is a RankZero admin, decided once for every platform.

The adapter reports what the platform says about the user (:class:`PlatformRights`: Discord's Manage
Server / Administrator and the member's roles; Slack's workspace admin/owner flag) and the policy decides,
adding the admins configured by id (``RANKZERO_ADMINS``) and by role (``RANKZERO_DISCORD_ADMIN_ROLES``).
The core services enforce the decision again (NotAdminError); the layer refuses early, with one message
per platform saying how to become an admin.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.core.errors import NotAdminError
from bot.core.models import Actor, PlayerRef, Tenant


@dataclass(frozen=True)
class PlatformRights:
    """What the platform reports about one user, nothing decided yet."""

    #: The platform's own admin right: Discord Manage Server or Administrator, a Slack workspace
    #: admin or owner.
    manages_workspace: bool = False
    #: The user's role ids where the platform has roles (Discord), as strings.
    role_ids: frozenset[str] = field(default_factory=frozenset)


class AdminPolicy:
    """Decides who is an admin: the platform's admin right, a configured user id, or a configured role."""

    def __init__(
        self,
        *,
        refusal: str,
        admin_users: Iterable[str] = (),
        admin_roles: Iterable[str | int] = (),
    ) -> None:
        #: What a non-admin is told (how to become one on this platform).
        self.refusal = refusal
        self.admin_users = frozenset(str(u) for u in admin_users)
        self.admin_roles = frozenset(str(r) for r in admin_roles)

    def is_admin(self, user_id: str, rights: PlatformRights) -> bool:
        """Whether ``user_id`` with ``rights`` may run admin commands."""
        return (
            rights.manages_workspace
            or str(user_id) in self.admin_users
            or bool(rights.role_ids & self.admin_roles)
        )

    def actor(self, player: PlayerRef, rights: PlatformRights, tenant: Tenant | None = None) -> Actor:
        """The Actor the services get for ``player`` acting in ``tenant`` (the server or workspace the
        command ran in: an admin's changes stay there). Admins are tenant admins, never the operator.
        """
        return Actor(player, self.is_admin(player.user_id, rights), tenant)

    def require(self, actor: Actor) -> None:
        """Refuse a non-admin with this platform's refusal (a NotAdminError the adapter shows as is)."""
        if not actor.is_admin:
            raise NotAdminError(self.refusal)
