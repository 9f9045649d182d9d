"""Every RankZero form (modal) submission is routed by its custom id, never by a View held in memory.

discord.py hands a modal's submission to the View object that opened it, and only while that View lives
(its timeout, and never after a restart or in another process): a late submission finds nothing and what
the user typed is dropped. So no RankZero form keeps a View. Each form's custom id names its kind and its
context, and the client's ``on_interaction`` (app.py) hands every submission to :func:`route_submission`,
which looks the prefix up in :data:`ROUTES` and calls that kind's handler with the key that follows it:

- ``rz:qform:<nonce>``: the "Add a question" form (question_form.py; the nonce names its stored draft);
- ``rz:variant:<problem id>``: ``/dispute variant:True``, a player's own code for a finished problem;
- ``rz:explain:<question version id>``: the answer to an explain prompt (``/explain``'s Answer button).

The custom id comes back from the user's client, so it is hostile: it is parsed strictly (a known prefix,
then a key that fully matches that kind's pattern, 100 characters at most, Discord's limit); anything
else is refused with a clear private message and never reaches a handler; and the handler checks again
what the key names (a problem or prompt of this server, a draft of this admin).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import discord

from bot.adapters.discord.failures import served_here, tell_failure
from bot.commands.deadline import within

log = logging.getLogger(__name__)

#: Discord's longest custom id (docs: Component Reference, "custom_id ... max 100 characters").
MAX_CUSTOM_ID = 100
#: A database id in a custom id: a positive integer of at most 10 ASCII digits, and at most MAX_ROW_ID.
ROW_ID = r"[1-9][0-9]{0,9}"
#: The largest id an INTEGER key holds on both backends; a bigger one is refused here, before PostgreSQL
#: would refuse the query itself ("out of int32 range").
MAX_ROW_ID = 2**31 - 1

FORGED = (
    "⚠️ I do not recognise this form (its id is not one I issued, or it is damaged): nothing was done. "
    "Open it again from its command or button."
)
STARTING = "RankZero is starting, try again in a moment"

#: What a route calls: (the submission, the key of its custom id).
SubmissionHandler = Callable[[discord.Interaction[Any], str], Awaitable[None]]


@dataclass(frozen=True)
class ModalRoute:
    """One kind of form: its custom id prefix, the pattern its key must match whole, and where its handler
    is found on the client (``attribute``, then ``method``), named ``what`` in logs and failures.
    """

    prefix: str
    key: re.Pattern[str]
    attribute: str
    method: str
    what: str
    #: The largest key a numeric route takes (None: the key is not a number).
    largest: int | None = None
    #: Whether the router bounds the handler by the interaction deadline; False for handlers that bound
    #: their own work, so that what the user typed is given back when time runs out.
    bounded: bool = True

    def custom_id(self, key: str) -> str:
        """The custom id of this kind's form for ``key`` (checked against the pattern and Discord's limit)."""
        custom_id = f"{self.prefix}{key}"
        if not self.takes(key) or len(custom_id) > MAX_CUSTOM_ID:
            raise ValueError(f"not a {self.what} key: {key!r}")
        return custom_id

    def form(self, key: str, title: str, inputs: Iterable[discord.ui.TextInput[Any]]) -> discord.ui.Modal:
        """The form of this kind for ``key``: the modal with ``inputs``, stopped before it is sent, so
        discord.py keeps no View for it and every submission is routed here by its custom id (any time, any
        process).
        """
        modal = discord.ui.Modal(title=title, custom_id=self.custom_id(key), timeout=None)
        for text_input in inputs:
            modal.add_item(text_input)
        modal.stop()
        return modal

    def takes(self, key: str) -> bool:
        """Whether ``key`` is one this kind issues (its whole pattern; a number within ``largest``)."""
        if not self.key.fullmatch(key):
            return False
        return self.largest is None or int(key) <= self.largest

    def handler(self, client: Any) -> SubmissionHandler | None:
        """The bound handler on ``client`` (None while the adapter is not attached)."""
        owner = getattr(client, self.attribute, None)
        found: SubmissionHandler | None = getattr(owner, self.method, None) if owner is not None else None
        return found


QUESTION_FORM = ModalRoute(
    "rz:qform:", re.compile(r"[A-Za-z0-9_-]{8,32}"), "rankzero_forms", "on_submit", "question form"
)
VARIANT_FORM = ModalRoute(
    "rz:variant:",
    re.compile(ROW_ID),
    "rankzero_commands",
    "on_variant",
    "variant form",
    largest=MAX_ROW_ID,
    bounded=False,
)
EXPLAIN_FORM = ModalRoute(
    "rz:explain:",
    re.compile(ROW_ID),
    "rankzero_practice",
    "on_explain",
    "explanation form",
    largest=MAX_ROW_ID,
    bounded=False,
)
#: Every form kind, by prefix (no prefix is a prefix of another).
ROUTES: dict[str, ModalRoute] = {r.prefix: r for r in (QUESTION_FORM, VARIANT_FORM, EXPLAIN_FORM)}


def parse_custom_id(custom_id: str) -> tuple[ModalRoute, str] | None:
    """The route and key of one of our forms' custom ids; None for a malformed or unknown one."""
    if len(custom_id) > MAX_CUSTOM_ID:
        return None
    for prefix, route in ROUTES.items():
        if custom_id.startswith(prefix):
            key = custom_id[len(prefix) :]
            return (route, key) if route.takes(key) else None
    return None


def _walk(components: Any) -> list[Mapping[str, Any]]:
    """Every component of a submission, nested in action rows (type 1) or labels (type 18)."""
    found: list[Mapping[str, Any]] = []
    for component in components if isinstance(components, list) else []:
        if not isinstance(component, Mapping):
            continue
        found.append(component)
        found.extend(_walk(component.get("components")))
        inner = component.get("component")
        if isinstance(inner, Mapping):
            found.extend(_walk([inner]))
    return found


def submitted_values(data: Mapping[str, Any] | None) -> dict[str, str]:
    """The text inputs' values of a submission by custom id (as the client sent them: callers bound them)."""
    return {
        str(c["custom_id"]): str(c.get("value") or "")
        for c in _walk((data or {}).get("components"))
        if "custom_id" in c and isinstance(c.get("value", ""), str | None)
    }


async def route_submission(interaction: discord.Interaction[Any]) -> bool:
    """Handle ``interaction`` if it is a submission of one of our forms (True), from the client's
    ``on_interaction``: with or without a View, in any process, however late.
    """
    if interaction.type is not discord.InteractionType.modal_submit:
        return False
    data: Mapping[str, Any] = interaction.data or {}
    custom_id = str(data.get("custom_id", ""))
    # Every submission is answered here: no form of this bot keeps a View, so one whose id is not ours
    # (a forged or damaged one, a form of an older version of the bot) would otherwise go unanswered.
    if not await served_here(interaction, "form"):
        return True
    parsed = parse_custom_id(custom_id)
    try:
        if parsed is None:
            # Never echoed: it is whatever the client sent. Logged bounded, for the operator.
            log.warning("refused a form with an unknown custom id %r", custom_id[:MAX_CUSTOM_ID])
            await interaction.response.send_message(FORGED, ephemeral=True)
            return True
        route, key = parsed
        handler = route.handler(interaction.client)
        if handler is None:  # started without handlers (should not happen): still answer
            await interaction.response.send_message(STARTING, ephemeral=True)
            return True
        deadline = getattr(interaction.client, "rankzero_deadline_s", None) if route.bounded else None
        await within(deadline, handler(interaction, key))
    except Exception as exc:  # discord.py would only log it: the user must get an answer
        await tell_failure(interaction, exc, parsed[0].what if parsed else "form")
    return True
