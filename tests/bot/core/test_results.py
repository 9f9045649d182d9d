"""The results post: the day's streaks (from completions) and the hint to the leaderboard, on every platform.

The card is built by the service on both databases; the renderers are checked at their own boundary
(a rich console, a discord.Embed's dict, Slack Block Kit JSON).
"""

from __future__ import annotations

import datetime as dt
import io
import json

from rich.console import Console

from bot.adapters.console import render as console_render
from bot.adapters.discord.render import results_embeds
from bot.adapters.slack.blocks import results_blocks
from bot.core.cards import ResultsCard, StreakLine
from bot.core.models import Actor, Challenge
from bot.core.service import QuizService
from tests.conftest import CHANNEL, actor
from tests.fakes import FakePlatform, FrozenClock

DAY0 = dt.date(2026, 11, 15)


async def _finish(service: QuizService, who: Actor, challenge: Challenge) -> None:
    """Answer every problem (right on the first try)."""
    for p in challenge.problems:
        await service.start_problem(who, p.id)
        await service.answer(who, p.id, p.question.correct_letter or "A")


async def test_results_list_the_days_finishers_streaks_and_milestones(
    service: QuizService, clock: FrozenClock, platform: FakePlatform
) -> None:
    alice, bob, carol = actor("alice"), actor("bob"), actor("carol")
    clock.current = dt.datetime(2026, 11, 15, 9, 0, tzinfo=dt.UTC)
    for n in range(7):
        challenge, _ = await service.open_challenge(CHANNEL, DAY0 + dt.timedelta(days=n))
        await _finish(service, alice, challenge)  # every day: 7 on the last day
        if n in (0, 1, 2, 5, 6):
            await _finish(service, bob, challenge)  # missed days 4 and 5: 2 on the last day
        if n == 6:
            # Carol plays the last day without finishing it: a player of the day, but on no streak.
            first = challenge.problems[0]
            await service.start_problem(carol, first.id)
            await service.answer(carol, first.id, first.question.correct_letter or "A")
        if n == 5:
            day6 = await service.close_challenge(challenge.id)
            assert day6 is not None
            # Day 6: Alice 6 (no milestone); Bob 1 (no line: a streak starts at 2).
            assert day6.streaks == (StreakLine("Alice", 6, False),)
        elif n < 6:
            await service.close_challenge(challenge.id)
        clock.advance(86400)

    card = await service.close_challenge(challenge.id)
    assert card is not None and card.players == 3
    assert card.streaks == (StreakLine("Alice", 7, True), StreakLine("Bob", 2, False))
    assert platform.results[-1][1] == card, "the posted card carries the streaks"
    assert any(name == "Alice" and b.code == "streak-7" for name, b in card.badges)


async def test_results_without_finishers_have_no_streaks(service: QuizService) -> None:
    challenge, _ = await service.open_challenge(CHANNEL)
    card = await service.close_challenge(challenge.id)
    assert card is not None and card.streaks == ()


# ---------------------------------------------------------------------- renderers
def _card(streaks: tuple[StreakLine, ...]) -> ResultsCard:
    return ResultsCard(
        challenge_id=1,
        title="Daily · 2026-11-21",
        day=dt.date(2026, 11, 21),
        problems=(),
        winners=(),
        badges=(),
        players=2,
        streaks=streaks,
    )


#: A hostile display name: markdown, a Discord mass ping and a Slack special mention.
HOSTILE = "*bob* @everyone <!channel>"
STREAKS = (StreakLine("Alice", 30, True), StreakLine(HOSTILE, 3, False))


def test_console_results_show_streaks_and_the_leaderboard_command() -> None:
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(console_render.results(_card(STREAKS)))
    text = out.getvalue()
    assert "🎉 Alice · 30-day streak · milestone!" in text
    assert f"🔥 {HOSTILE} · 3-day streak" in text
    assert "rankzero leaderboard" in text


def test_discord_results_embed_shows_streaks_and_slash_leaderboard() -> None:
    embed = results_embeds(_card(STREAKS))[0].to_dict()
    fields = {f["name"]: f["value"] for f in embed.get("fields", [])}
    lines = fields["Streaks"].split("\n")
    assert lines[0] == "🎉 Alice · 30 days · **milestone!**"
    # Display names are plain text: markdown escaped, no mass ping.
    assert lines[1] == "🔥 \\*bob\\* @\u200beveryone <!channel> · 3 days"
    assert embed["footer"]["text"] == "See the standings with /leaderboard"
    assert "Streaks" not in {f["name"] for f in results_embeds(_card(()))[0].to_dict().get("fields", [])}


def test_slack_results_blocks_show_streaks_and_rankzero_leaderboard() -> None:
    blocks = results_blocks(_card(STREAKS))
    text = json.dumps(blocks, ensure_ascii=False)
    assert ":tada: Alice · 30-day streak · *milestone!*" in text
    assert ":fire: *bob* @everyone &lt;!channel&gt; · 3-day streak" in text, "no special mention"
    assert blocks[-1]["type"] == "context"
    assert "`/rankzero leaderboard`" in blocks[-1]["elements"][0]["text"]
    assert "Streaks" not in json.dumps(results_blocks(_card(())))
