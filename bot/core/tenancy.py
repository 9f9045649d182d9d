"""Which tenant an admin acts for, decided once: the services scope every bank change and every lookup
by id with it, so that no tenant's admin reaches another tenant's rows (issue 24).
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.core.errors import ConfigurationError, NotAdminError
from bot.core.models import Actor, Tenant

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
