"""Which tenant an admin acts for, decided once: the services scope every bank change and every lookup
by id with it, so that no tenant's admin reaches another tenant's rows (issue 24).
"""

from __future__ import annotations

from bot.core.errors import NotAdminError
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
