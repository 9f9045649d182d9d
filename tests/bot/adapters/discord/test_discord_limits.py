"""The largest cards RankZero renders, sent by discord.py's real client to the strict fake: Discord must
accept every one (a message refused for a limit is a message nobody sees).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterator

import discord
import pytest

from bot.adapters.discord import dispute_render, render
from bot.adapters.discord.platform import DiscordPlatform
from bot.adapters.discord.sanitize import plain
from bot.core.cards import (
    BadgeAward,
    ChallengeCard,
    Feedback,
    HintCard,
    LeaderboardCard,
    ProblemCard,
    ProblemResult,
    ProblemSummary,
    ResultsCard,
    Reveal,
    StatsCard,
    StreakLine,
    TopicStat,
)
from bot.core.dispute_service import DisputeCard, question_from_spec
from bot.core.disputes import match_verdict
from bot.core.models import Choice, StandingRow
from bot.core.verdicts import RankException, RankOutcome, RunSpec, RunVerdict
from bot.core.vocabulary import Period, Scope
from tests.bot.adapters.discord.test_discord_disputes import HANG_SPEC
from tests.discord_env import CHANNEL
from tests.discord_fake import CHANNEL_ID, FakeDiscord, no_unexpected_rejections
from tests.verdicts import CPU

NOW = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)
LONG_NAME = "Ünïcødé @everyone " + "n" * 14  # 32 characters, Discord's longest display name
BADGE = BadgeAward("first", "First blood " + "b" * 20, "🩸", "the first correct answer " + "d" * 80)


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    no_unexpected_rejections(request)


@pytest.fixture
async def platform(fake: FakeDiscord) -> AsyncIterator[DiscordPlatform]:
    client = discord.Client(intents=discord.Intents(guilds=True))
    await client.login("test-token")
    fake.channel_limit = (100, 5.0)  # many posts in one test: the bucket is another test's subject
    yield DiscordPlatform(client)
    await client.close()


async def test_results_of_41_finishers_are_accepted(fake: FakeDiscord, platform: DiscordPlatform) -> None:
    rows = tuple(StandingRow(i + 1, i, f"{LONG_NAME}{i}", 500 - i, 5, 1000) for i in range(41))
    card = ResultsCard(
        1,
        "Daily multi-GPU challenge " + "t" * 300,
        NOW.date(),
        tuple(
            ProblemResult(
                p, f"q{p}", "DistributedDataParallel " * 8, "C", dict.fromkeys("ABCDEFGHIJ", 41), 41, 3
            )
            for p in range(1, 11)
        ),
        rows,
        tuple((r.display_name, BADGE) for r in rows for _ in range(3)),
        41,
        notes=tuple("Answer corrected: " + "x" * 900 for _ in range(5)),
        streaks=tuple(StreakLine(r.display_name, 100 + r.rank, True) for r in rows[:10]),
    )
    await platform.post_results(CHANNEL, card, None)
    sent = fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")
    assert sent[0].body["embeds"][0]["title"].startswith("Results")
    # Over one embed's 6000 characters, the results go on in further messages: nothing is cut.
    shown = "\n".join(
        str(f["value"]) for call in sent for embed in call.body["embeds"] for f in embed.get("fields", [])
    )
    assert "truncated" not in shown
    assert all(f"{r.rank}. {plain(r.display_name)} · {r.points}" in shown for r in rows)


async def test_a_tie_of_300_winners_is_posted_whole(fake: FakeDiscord, platform: DiscordPlatform) -> None:
    """A large tie is over one embed's 6000 characters: the results go on in further messages, every
    winner's name whole (it was cut at the field's 1024 characters, issue 25).
    """
    rows = tuple(StandingRow(1, i, f"Player number {i:04d} of the tie", 500, 5, 100) for i in range(300))
    card = ResultsCard(1, "Daily multi-GPU challenge", NOW.date(), (), rows, (), 300)
    await platform.post_results(CHANNEL, card, None)
    sent = fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")
    assert len(sent) > 1
    shown = "\n".join(
        str(f["value"]) for call in sent for embed in call.body["embeds"] for f in embed.get("fields", [])
    )
    assert "truncated" not in shown
    assert all(f"Player number {i:04d} of the tie" in shown for i in range(300))


async def test_verdict_of_eight_noisy_ranks_is_accepted(fake: FakeDiscord, platform: DiscordPlatform) -> None:
    spec = {**HANG_SPEC, "runner": {"mode": "ddp", "nproc": 8, "gpus": 0, "init_process_group": True}}
    question = question_from_spec(spec, version=1)
    noisy = ("@here ```py\n" + "x" * 200 + "\n") * 20
    died = RankException("RuntimeError", "NCCL error: " + "unhandled system error " * 13, 4)
    ranks = tuple(RankOutcome(r, 1, None, noisy, "e" * 3000, True, died, None) for r in range(8))
    verdict = RunVerdict("ok", "ddp", 8, "gloo", 2.0, CPU, True, 3, ("output cut " * 50,) * 5, ranks)
    run = RunSpec.from_question(spec["code"], spec["runner"])
    card = DisputeCard(
        question.id,
        1,
        question.prompt,
        run,
        False,
        question.choices,
        verdict,
        match_verdict(question, verdict),
    )
    target = platform.client.get_partial_messageable(CHANNEL_ID)
    await target.send(embed=dispute_render.verdict_embed(card))
    await target.send(embed=dispute_render.verdict_embed(card, preview=True))


async def test_the_biggest_problem_post_leaderboard_and_stats_are_accepted(
    fake: FakeDiscord, platform: DiscordPlatform
) -> None:
    from bot.adapters.discord.practice_render import fit_message

    target = platform.client.get_partial_messageable(CHANNEL_ID)
    problems = tuple(ProblemSummary(p, p, "debug", "FSDP " * 60, "expert") for p in range(1, 11))
    await platform.post_challenge(CHANNEL, ChallengeCard(7, "T" * 400, NOW.date(), "open", NOW, problems))
    choices = tuple((letter, "choice " * 150) for letter in "ABCDEFGHIJ")
    problem = ProblemCard(
        7,
        2,
        1,
        10,
        "debug",
        "FSDP " * 60,
        "expert",
        "p" * 5000,
        "c" * 5000,
        choices,
        2,
        2,
        NOW,
        NOW,
        True,
        None,
    )
    reveal = Reveal(
        "C", "because " * 600, tuple(Choice("ABCDEFGHIJ"[i], "x" * 900, i == 2) for i in range(10))
    )
    feedback = Feedback(2, "wrong", "B", False, 0, 0, True, reveal, message="m" * 3000)
    hint = HintCard(2, "h" * 3000, 5)
    for fb, hn in ((None, None), (feedback, None), (None, hint), (feedback, hint)):
        await target.send(embed=render.problem_embed(problem, fb, hn), view=render.problem_view(problem, fb))
    rows = tuple(StandingRow(i + 1, i, LONG_NAME, 10**9, 1, 1000) for i in range(200))
    me = StandingRow(999, 999, LONG_NAME, 1, 1, 1000)
    await platform.post_weekly_summary(
        CHANNEL, LeaderboardCard(Scope.CHANNEL, Period.WEEK, "W" * 300, rows, me, 1000)
    )
    stats = StatsCard(
        LONG_NAME,
        10**6,
        10**4,
        10**4,
        999,
        99,
        99,
        tuple((BADGE, 9) for _ in range(60)),
        tuple(TopicStat("topic " * 50, 9, 9) for _ in range(40)),
    )
    second = render.stats_embed(stats)
    await target.send(embeds=fit_message([render.stats_embed(stats), second]))
