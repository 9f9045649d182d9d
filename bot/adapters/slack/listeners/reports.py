"""The team report's "Explanation" buttons (issue 30): ``rz:miss:<problem id>``, answered privately.

Anyone in the channel may press one; the answer goes to them alone (an ephemeral message through the
click's response_url). The id is matched strictly (digits only) and the service answers only for a problem
of the clicking workspace's own closed challenges: problem ids are sequential, and a click payload names
whatever id its sender likes.
"""

from __future__ import annotations

import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures
from bot.adapters.slack import report_blocks as rb
from bot.adapters.slack.context import SlackContext
from bot.core.errors import RankZeroError

#: An explanation button's action id: ``rz:miss:`` and a problem id (at most 18 ASCII digits: ``\d`` would
#: take any Unicode digit, such as '١٢٣'). Matched whole (fullmatch: ``$`` lets a trailing newline in).
MISS_ACTION = re.compile(r"rz:miss:([0-9]{1,18})")


def register(app: AsyncApp, ctx: SlackContext) -> None:
    """Attach the explanation buttons' listener."""

    @app.action(re.compile(r"^rz:miss:[0-9]{1,18}\Z"))
    async def explanation(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        hit = MISS_ACTION.fullmatch(str(body["actions"][0]["action_id"]))
        assert hit is not None  # the listener matched it
        respond = failures.Responder(ctx.client, body)
        actor = await ctx.player_actor(body)
        try:
            shown = await ctx.commands.missed_explanation(actor, int(hit[1]))
        except RankZeroError as exc:
            text = f":warning: {bk.esc(str(exc))}"
            await respond(
                text=text, blocks=[bk.section(text)], response_type="ephemeral", replace_original=False
            )
            return
        await respond(
            text=f"Explanation of {bk.esc(shown.question_id)}",
            blocks=rb.explanation_blocks(shown),
            response_type="ephemeral",
            replace_original=False,
        )
