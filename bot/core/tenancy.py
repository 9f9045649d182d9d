"""Which tenant an admin acts for, decided once: the services scope every bank change and every lookup
by id with it, so that no tenant's admin reaches another tenant's rows (issue 24).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from bot.core.errors import ConfigurationError, NotAdminError
from bot.core.models import Actor, Tenant

log = logging.getLogger(__name__)

#: Platforms whose "tenant" is the operator's own machine (the terminal, files): no allow-list applies.
LOCAL_PLATFORMS = frozenset({"console", "file"})

#: What a tenant admin is told when a command would change the operator's shared bank.
SHARED_BANK_REFUSAL = (
    "that question is in the shared bank, which only the bot's operator changes: "
    "retire or correct it for this server/workspace instead"
)


def acting_tenant(actor: Actor) -> Tenant | None:
    """The tenant ``actor`` acts for, or None for the operator (the shared bank and every tenant).

    An admin with no tenant (a Discord DM, where nobody administers anything) is refused: a tenant's
    command must never fall back to acting everywhere.
    """
    if actor.is_operator:
        return None
    if actor.tenant is None:
        raise NotAdminError("run this in a server or workspace channel: it changes that tenant only")
    return actor.tenant


def sees(actor: Actor, tenant: Tenant) -> bool:
    """Whether ``actor`` may see or change an object of ``tenant`` (the operator sees every tenant).

    Callers refuse an object it does not see with the same words as a missing one, so ids of other
    tenants' objects (sequential, printed in posts) tell a stranger nothing.
    """
    return actor.is_operator or actor.tenant == tenant


class TenantAllowList:
    """The operator's list of tenants the bot serves (``RANKZERO_ALLOWED_TENANTS``); empty: every tenant.

    Entries are tenant keys: ``discord:<guild id>``, ``slack:<team id>``, ``slack:<enterprise id>`` (a
    whole Enterprise Grid org: its org-wide install and every team in it) or ``slack:<E...>/<T...>``.
    """

    def __init__(self, keys: Iterable[str] = ()) -> None:
        tenants = []
        for key in keys:
            try:
                tenants.append(Tenant.from_key(key.strip()))
            except ValueError as exc:
                raise ConfigurationError(
                    f"RANKZERO_ALLOWED_TENANTS: {exc}; "
                    "write discord:<guild id> or slack:<team or enterprise id>"
                ) from None
        self._keys = frozenset(t.key for t in tenants)

    @property
    def open(self) -> bool:
        """True when no list is configured (every tenant is served)."""
        return not self._keys

    def allows(self, tenant: Tenant) -> bool:
        """Whether the bot serves ``tenant``: listed, or a team of a listed Grid org."""
        if self.open or tenant.key in self._keys:
            return True
        org, sep, _team = tenant.workspace_id.partition("/")
        return bool(sep) and Tenant(tenant.platform, org).key in self._keys

    def __repr__(self) -> str:
        return f"TenantAllowList({sorted(self._keys)!r})"


class OutboundGate:
    """What the bot posts on its own (scheduled challenges, reminders, results, weekly summaries) goes
    only to tenants the allow-list serves: a workspace or server dropped from it keeps its stored
    schedules (and, on Slack, maybe a token), so refusing its requests alone would not silence the bot
    there. A refused tenant is logged once per process, not at every post.
    """

    def __init__(self, allowed: TenantAllowList | None = None) -> None:
        self._allowed = allowed or TenantAllowList()
        self._told: set[str] = set()

    def permits(self, tenant: Tenant) -> bool:
        """Whether the bot may post to ``tenant`` (logs the first refusal of each tenant)."""
        if tenant.platform in LOCAL_PLATFORMS or self._allowed.allows(tenant):
            return True
        if tenant.key not in self._told:
            self._told.add(tenant.key)
            log.warning(
                "not posting to %s: it is not in RANKZERO_ALLOWED_TENANTS (its schedules stay stored; "
                "nothing is posted there until it is listed again)",
                tenant.key,
            )
        return False
