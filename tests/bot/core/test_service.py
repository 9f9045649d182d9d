"""The engine's use cases on real databases (SQLite and PostgreSQL), with a frozen clock."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from bot.core.cards import TopicStat
from bot.core.errors import (
    ChallengeClosedError,
    InvalidAnswerError,
    NotAdminError,
    NotStartedError,
    ProblemOverError,
    RankZeroError,
    TimeUpError,
)
from bot.core.models import Challenge, ChannelRef
from bot.core.ports import TransientConflictError
from bot.core.service import QuizService
from bot.core.vocabulary import Difficulty
from bot.storage.db import make_engine
from bot.storage.repositories.plays import SqlPlayRepository
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.bootstrap import open_env
from tests.conftest import ADMIN, CHANNEL, actor, make_spec, test_bank
from tests.fakes import FakePlatform, FrozenClock


async def _today(service: QuizService) -> Challenge:
    challenge, _ = await service.open_challenge(CHANNEL)
    return challenge


async def test_daily_challenge_has_five_ramped_mixed_problems(service: QuizService) -> None:
    challenge = await _today(service)
    assert len(challenge.problems) == 5
    levels = [p.question.difficulty for p in challenge.problems]
    assert levels == ["intermediate", "intermediate", "advanced", "advanced", "expert"]
    assert [Difficulty(x).rank for x in levels] == sorted(Difficulty(x).rank for x in levels)
    topics = [p.question.topic for p in challenge.problems]
    assert len(set(topics)) == 5, topics


async def test_challenge_is_unique_per_channel_and_day_even_concurrently(
    service: QuizService, platform: FakePlatform
) -> None:
    cards = await asyncio.gather(*(service.post_daily(CHANNEL) for _ in range(8)))
    assert len({c.challenge_id for c in cards}) == 1
    assert len(platform.posts) == 1, "a retried job or second instance must not post twice"
    other = ChannelRef("test", "ws1", "random")
    second, created = await service.open_challenge(other)
    assert created and second.id != cards[0].challenge_id


async def test_no_question_repeats_in_a_channel_until_bank_exhausted(service: QuizService) -> None:
    seen: list[str] = []
    for offset in range(3):  # 3 days x 5 problems = 15 of the 18 questions
        ch, _ = await service.open_challenge(CHANNEL, dt.date(2026, 11, 21) + dt.timedelta(days=offset))
        seen += [p.question.id for p in ch.problems]
    assert len(seen) == len(set(seen)) == 15
    ch, _ = await service.open_challenge(CHANNEL, dt.date(2026, 11, 24))
    fourth = [p.question.id for p in ch.problems]
    unused = {s["id"] for s in test_bank()} - set(seen)
    assert unused <= set(fourth), "the 3 never-used questions come before any repeat"


async def test_answer_right_and_wrong_with_attempts_and_reveal(
    service: QuizService, clock: FrozenClock
) -> None:
    ch = await _today(service)
    alice, p1, p2 = actor("alice"), ch.problems[0], ch.problems[1]
    card = await service.start_problem(alice, p1.id)
    assert card.attempts_left == 2 and card.deadline == clock.now() + dt.timedelta(seconds=120)
    clock.advance(30)
    fb = await service.answer(alice, p1.id, "b")
    assert not fb.correct and fb.attempts_left == 1 and not fb.over and fb.reveal is None
    fb = await service.answer(alice, p1.id, "A")
    assert fb.correct and fb.over and fb.outcome == "correct"
    assert fb.reveal is not None and fb.reveal.correct_letter == "A" and fb.reveal.explanation
    # Second attempt: half of (base 100 + speed bonus 20*90/120=15).
    assert fb.points == round(0.5 * (100 + 15))
    with pytest.raises(ProblemOverError):
        await service.answer(alice, p1.id, "A")
    await service.start_problem(alice, p2.id)
    await service.answer(alice, p2.id, "C")
    fb = await service.answer(alice, p2.id, "D")
    assert fb.over and not fb.correct and fb.outcome == "wrong" and fb.points == 0
    assert fb.reveal is not None and fb.reveal.correct_letter == "A"
    with pytest.raises(ProblemOverError):
        await service.answer(alice, p2.id, "A")


async def test_invalid_letter_and_not_started(service: QuizService) -> None:
    ch = await _today(service)
    with pytest.raises(NotStartedError):
        await service.answer(actor("bob"), ch.problems[0].id, "A")
    await service.start_problem(actor("bob"), ch.problems[0].id)
    with pytest.raises(InvalidAnswerError, match="pick one of A, B, C, D"):
        await service.answer(actor("bob"), ch.problems[0].id, "F")


async def test_time_up_is_judged_by_the_stored_deadline(service: QuizService, clock: FrozenClock) -> None:
    ch = await _today(service)
    p = ch.problems[0]
    bob = actor("bob")
    await service.start_problem(bob, p.id)
    restarted = await service.start_problem(bob, p.id)  # re-opening never resets the timer
    assert restarted.deadline == clock.now() + dt.timedelta(seconds=120)
    clock.advance(119.9)
    with pytest.raises(ProblemOverError, match="not up yet"):
        await service.time_up(bob, p.id)
    clock.advance(0.2)  # no timer fired: only the stored deadline decides
    with pytest.raises(TimeUpError, match="time is up"):
        await service.answer(bob, p.id, "A")
    with pytest.raises(TimeUpError):
        await service.answer(bob, p.id, "A")
    fb = await service.time_up(bob, p.id)
    assert fb.over and fb.outcome == "timeout" and fb.reveal is not None and fb.points == 0
    with pytest.raises(TimeUpError):
        await service.hint(bob, ch.problems[0].id)


async def test_hint_costs_points(service: QuizService, clock: FrozenClock) -> None:
    ch = await _today(service)
    p = ch.problems[0]  # intermediate: base 100, hint cost 25
    carol = actor("carol")
    await service.start_problem(carol, p.id)
    h = await service.hint(carol, p.id)
    assert h.hint == f"hint for {p.question.id}" and h.cost == 25
    assert (await service.view_problem(carol, p.id)).hint == h.hint
    fb = await service.answer(carol, p.id, "A")  # instant: 100 + 20 bonus - 25
    assert fb.points == 95


async def test_fifty_concurrent_clicks_make_at_most_two_attempts(service: QuizService) -> None:
    ch = await _today(service)
    p = ch.problems[0]
    dave = actor("dave")
    await service.start_problem(dave, p.id)
    results = await asyncio.gather(
        *(service.answer(dave, p.id, "B" if i % 2 else "C") for i in range(50)), return_exceptions=True
    )
    leaked = [r for r in results if isinstance(r, BaseException) and not isinstance(r, RankZeroError)]
    assert not leaked, leaked[:3]
    ok = [r for r in results if not isinstance(r, BaseException)]
    assert 1 <= len(ok) <= 2
    card = await service.view_problem(dave, p.id)
    assert card.attempts_left == 0 and card.over
    assert len(card.wrong_letters) == 2


async def test_redelivered_click_with_same_idempotency_key_is_a_no_op(service: QuizService) -> None:
    ch = await _today(service)
    p = ch.problems[0]
    erin = actor("erin")
    await service.start_problem(erin, p.id)
    first = await service.answer(erin, p.id, "B", idempotency_key="interaction-1")
    again = await asyncio.gather(
        *(service.answer(erin, p.id, "B", idempotency_key="interaction-1") for _ in range(10))
    )
    assert not first.duplicate and all(a.duplicate for a in again)
    assert all(a.attempts_left == 1 for a in again)
    fb = await service.answer(erin, p.id, "A", idempotency_key="interaction-2")
    assert fb.correct


async def _play_all(
    service: QuizService, who: str, letters: str, clock: FrozenClock, step: float = 5
) -> None:
    ch = await _today(service)
    a = actor(who)
    for problem, letter in zip(ch.problems, letters, strict=True):
        await service.start_problem(a, problem.id)
        clock.advance(step)
        await service.answer(a, problem.id, letter)
        if letter != "A":
            # A second, different wrong letter (the same one again is refused and costs nothing).
            await service.answer(a, problem.id, "C" if letter == "B" else "B")


async def test_perfect_challenge_earns_badges_and_streak(service: QuizService, clock: FrozenClock) -> None:
    await _play_all(service, "frank", "AAAAA", clock)
    ch = await _today(service)
    summary = await service.summary(actor("frank"), ch.id)
    assert summary.correct == 5 and summary.finished == 5
    codes = {b.code for b in summary.badges}
    assert {"multi-gpu-master", "no-hints-needed", "lightning"} <= codes
    assert summary.streak == 1
    await _play_all(service, "gina", "ABAAA", clock)
    g = await service.summary(actor("gina"), ch.id)
    assert g.correct == 4 and not g.badges


async def test_seven_day_streak_badge(service: QuizService, clock: FrozenClock) -> None:
    h = actor("hugo")
    for day in range(7):
        ch, _ = await service.open_challenge(CHANNEL, dt.date(2026, 11, 21) + dt.timedelta(days=day))
        for p in ch.problems:
            await service.start_problem(h, p.id)
            await service.answer(h, p.id, "B")
            await service.answer(h, p.id, "C")  # completed (all wrong) still counts for the streak
        clock.advance(86400)
    stats = await service.stats(h.player, CHANNEL)
    assert stats.challenges_completed == 7 and stats.longest_streak == 7
    assert any(b.code == "streak-7" for b, _ in stats.badges)
    assert not any(b.code == "multi-gpu-master" for b, _ in stats.badges)


async def _solve_after(
    service: QuizService, who: str, problem_id: int, clock: FrozenClock, secs: float
) -> int:
    a = actor(who)
    await service.start_problem(a, problem_id)
    clock.advance(secs)
    fb = await service.answer(a, problem_id, "A")
    assert fb.correct
    return fb.points


async def test_leaderboard_top_ten_own_rank_and_ties_by_time(
    service: QuizService, clock: FrozenClock
) -> None:
    ch = await _today(service)
    p = ch.problems[0]  # intermediate, 120 s: anything answered within 3 s earns 100 + 20 = 120 points
    # P00..P09 are created in this order but answer ever faster (3.0 s down to 0.75 s), all on 120 points:
    # ranking by answer time must reverse the creation (and primary-key) order.
    for i in range(10):
        assert await _solve_after(service, f"p{i:02d}", p.id, clock, 3.0 - 0.25 * i) == 120
    # Outside the top 10, again on equal points (115): Tortoise first and slower, Hare later and faster,
    # Twin last with exactly Tortoise's time (then the earlier-created player goes first).
    assert await _solve_after(service, "tortoise", p.id, clock, 31) == 115
    assert await _solve_after(service, "hare", p.id, clock, 28) == 115
    assert await _solve_after(service, "twin", p.id, clock, 31) == 115
    board = await service.leaderboard(CHANNEL, player=actor("hare").player)
    assert len(board.rows) == 10 and board.total_players == 13
    assert [r.display_name for r in board.rows] == [f"P{i:02d}" for i in reversed(range(10))]
    assert [r.rank for r in board.rows] == list(range(1, 11))
    assert [r.answer_ms for r in board.rows] == [750 + 250 * i for i in range(10)]
    assert board.me is not None and (board.me.display_name, board.me.rank) == ("Hare", 11)
    assert board.me.points == 115 and board.me.answer_ms == 28_000
    tortoise = (await service.leaderboard(CHANNEL, player=actor("tortoise").player)).me
    twin = (await service.leaderboard(CHANNEL, player=actor("twin").player)).me
    assert tortoise is not None and (tortoise.rank, tortoise.answer_ms) == (12, 31_000)
    assert twin is not None and (twin.rank, twin.answer_ms) == (13, 31_000)
    inside = (await service.leaderboard(CHANNEL, player=actor("p09").player)).me
    assert inside is not None and inside.rank == 1 and inside.display_name == "P09"
    today = await service.leaderboard(CHANNEL, period="today")
    week = await service.leaderboard(CHANNEL, period="week")
    assert today.total_players == week.total_players == 13
    assert [r.display_name for r in today.rows[:2]] == ["P09", "P08"]
    ws = await service.leaderboard(ChannelRef("test", "ws1", "another"), scope="workspace")
    assert ws.total_players == 13, "workspace scope includes every channel of the workspace"
    other_ws = await service.leaderboard(ChannelRef("test", "ws2", "general"), scope="workspace")
    assert other_ws.total_players == 0
    tomorrow = clock.now() + dt.timedelta(days=1)
    clock.current = tomorrow
    assert (await service.leaderboard(CHANNEL, period="today")).total_players == 0


async def test_close_is_idempotent_and_results_count_choices(
    service: QuizService, clock: FrozenClock, platform: FakePlatform
) -> None:
    await service.post_daily(CHANNEL)
    ch = await _today(service)
    p = ch.problems[0]
    for name, letters in {"ann": "A", "ben": "BA", "cat": "BC"}.items():
        a = actor(name)
        await service.start_problem(a, p.id)
        for letter in letters:
            await service.answer(a, p.id, letter)
    await service.start_problem(actor("dan"), ch.problems[1].id)  # never answers
    cards = await asyncio.gather(*(service.close_challenge(ch.id) for _ in range(5)))
    results = [c for c in cards if c is not None]
    assert len(results) == 1 and len(platform.results) == 1
    assert platform.results[0][2] == f"msg-{ch.id}"
    r = results[0]
    first = r.problems[0]
    assert first.correct_letter == "A" and first.distribution == {"A": 2, "B": 0, "C": 1, "D": 0}
    assert first.players == 3 and first.solved == 2
    assert r.problems[1].players == 1 and r.problems[1].solved == 0
    assert [w.display_name for w in r.winners] == ["Ann"]
    with pytest.raises(ChallengeClosedError):
        await service.start_problem(actor("eve"), p.id)
    with pytest.raises(TimeUpError):
        await service.answer(actor("dan"), ch.problems[1].id, "A")


#: Exactly one day's worth (2 intermediate, 2 advanced, 1 expert), so every question is in the challenge;
#: kinds and topics are mixed so that per-kind and per-topic counts differ.
MIXED_BANK = [
    make_spec("mix-int-concept", "intermediate", "DDP", kind="conceptual"),
    make_spec("mix-int-debug", "intermediate", "Collectives", kind="debug"),
    make_spec("mix-adv-predict", "advanced", "DDP", kind="predict_output"),
    make_spec("mix-adv-debug", "advanced", "FSDP", kind="debug"),
    make_spec("mix-exp-metrics", "expert", "Collectives", kind="metrics"),
]


@pytest.fixture
async def mixed_service(
    db_url: str, clock: FrozenClock, platform: FakePlatform
) -> AsyncIterator[QuizService]:
    """A service whose bank mixes kinds and topics (the shared test bank is all 'conceptual')."""
    async with open_env(db_url, clock, platform, bank=MIXED_BANK) as env:
        yield env.quiz


def _accuracy(stats: tuple[TopicStat, ...]) -> dict[str, tuple[int, int]]:
    return {t.name: (t.answered, t.correct) for t in stats}


async def test_stats_accuracy_by_topic_and_kind(mixed_service: QuizService, clock: FrozenClock) -> None:
    service = mixed_service
    ch = await _today(service)
    by_id = {p.question.id: p.id for p in ch.problems}
    assert set(by_id) == {s["id"] for s in MIXED_BANK}
    ivy, zed = actor("ivy"), actor("zed")
    # Ivy: right first time, right on the second try, wrong twice, timed out; the last one is in progress.
    plays = {"mix-int-concept": "A", "mix-int-debug": "BA", "mix-adv-predict": "BC"}
    for qid, letters in plays.items():
        await service.start_problem(ivy, by_id[qid])
        for letter in letters:
            await service.answer(ivy, by_id[qid], letter)
    await service.start_problem(ivy, by_id["mix-adv-debug"])
    clock.advance(121)
    assert (await service.time_up(ivy, by_id["mix-adv-debug"])).outcome == "timeout"
    await service.start_problem(ivy, by_id["mix-exp-metrics"])
    # Zed's answers must not leak into Ivy's numbers.
    for pid in by_id.values():
        await service.start_problem(zed, pid)
        await service.answer(zed, pid, "A")

    stats = await service.stats(ivy.player, CHANNEL)
    assert (stats.problems, stats.correct) == (4, 2), "an unfinished problem is not counted yet"
    assert _accuracy(stats.by_topic) == {"Collectives": (1, 1), "DDP": (2, 1), "FSDP": (1, 0)}
    assert _accuracy(stats.by_kind) == {"conceptual": (1, 1), "debug": (2, 1), "predict_output": (1, 0)}
    assert {t.name: t.accuracy for t in stats.by_kind}["debug"] == 0.5

    await service.answer(ivy, by_id["mix-exp-metrics"], "A")
    stats = await service.stats(ivy.player, CHANNEL)
    assert (stats.problems, stats.correct) == (5, 3)
    assert _accuracy(stats.by_topic) == {"Collectives": (2, 2), "DDP": (2, 1), "FSDP": (1, 0)}
    assert _accuracy(stats.by_kind) == {
        "conceptual": (1, 1),
        "debug": (2, 1),
        "metrics": (1, 1),
        "predict_output": (1, 0),
    }
    z = await service.stats(zed.player, CHANNEL)
    assert (z.problems, z.correct) == (5, 5)
    assert _accuracy(z.by_kind)["debug"] == (2, 2) and _accuracy(z.by_topic)["DDP"] == (2, 2)


async def test_admin_actions_need_an_admin(service: QuizService) -> None:
    with pytest.raises(NotAdminError):
        await service.admin_retire(actor("mallory"), "int-0")
    with pytest.raises(NotAdminError):
        await service.admin_import(actor("mallory"), [make_spec("evil-1", "expert", "x")])
    await service.admin_retire(ADMIN, "int-0")
    assert "int-0" not in {q.id for q in await service.list_questions()}
    assert "int-0" in {q.id for q in await service.list_questions(include_retired=True)}


async def test_editing_a_question_keeps_history_on_the_old_version(service: QuizService) -> None:
    ch = await _today(service)
    p = ch.problems[0]
    qid = p.question.id
    await service.start_problem(actor("jo"), p.id)
    await service.answer(actor("jo"), p.id, "A")
    edited = next(s for s in test_bank() if s["id"] == qid)
    edited["choices"][0]["correct"], edited["choices"][1]["correct"] = False, True
    edited["prompt"] = "Edited prompt?"
    report = await service.admin_import(ADMIN, [edited])
    assert report.updated == (qid,)
    again = await service.admin_import(ADMIN, [edited])
    assert again.unchanged == (qid,)
    listed = {q.id: q.version for q in await service.list_questions()}
    assert listed[qid] == 2
    old = (await service.get_challenge(ch.id)).problems[0].question
    assert old.version == 1 and old.prompt == f"Question {qid}?" and old.correct_letter == "A"
    exported = {s["id"]: s for s in await service.export_questions()}
    assert exported[qid]["prompt"] == "Edited prompt?"


async def test_streak_uses_the_channel_timezone(service: QuizService, clock: FrozenClock) -> None:
    # 23:30 UTC on Nov 21 is already Nov 22 in Tokyo.
    tokyo = ChannelRef("test", "ws1", "tokyo", timezone="Asia/Tokyo")
    clock.current = dt.datetime(2026, 11, 21, 23, 30, tzinfo=dt.UTC)
    ch, _ = await service.open_challenge(tokyo)
    assert ch.day == dt.date(2026, 11, 22)


async def test_quitting_mid_problem_times_it_out_and_completes_later(
    service: QuizService, clock: FrozenClock
) -> None:
    ch = await _today(service)
    kim = actor("kim")
    for p in ch.problems[:-1]:
        await service.start_problem(kim, p.id)
        await service.answer(kim, p.id, "A")
    await service.start_problem(kim, ch.problems[-1].id)  # then quits without answering
    clock.advance(121)
    assert await service.next_problem(kim, ch.id) is None
    summary = await service.summary(kim, ch.id)
    assert summary.finished == 5 and summary.correct == 4 and summary.streak == 1


async def test_close_records_a_completion_missed_by_a_concurrent_finish(
    service: QuizService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a player's last two problems ending at once can each see the other still running;
    closing the challenge then records the completion (and its badge) that neither answer recorded."""
    ch = await _today(service)
    lee = actor("lee")
    for p in ch.problems[:-1]:
        await service.start_problem(lee, p.id)
        await service.answer(lee, p.id, "A")
    await service.start_problem(lee, ch.problems[-1].id)

    async def missed(*_args: Any, **_kwargs: Any) -> list[str]:
        return []  # what the losing side of the race does: sees 4 of 5 over, records nothing

    with monkeypatch.context() as m:
        m.setattr(service, "_after_finish", missed)
        await service.answer(lee, ch.problems[-1].id, "A")
    before = await service.summary(lee, ch.id)
    assert before.finished == 5 and before.streak == 0, "the race left no completion"
    results = await service.close_challenge(ch.id)
    assert results is not None
    after = await service.summary(lee, ch.id)
    assert after.correct == 5 and after.streak == 1
    assert "Multi-GPU Master" in [b.name for b in after.badges]


class _ImportCrash(RuntimeError):
    """Raised by the sabotaged flush below, standing in for a crash or a database error mid-import."""


async def test_import_is_all_or_nothing_when_the_database_write_fails_midway(
    db_url: str, clock: FrozenClock, platform: FakePlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    service = QuizService(lambda: SqlUnitOfWork(factory), clock, platform, seed=1)

    async def counts() -> tuple[int, int]:
        async with engine.connect() as conn:
            questions = await conn.scalar(text("SELECT count(*) FROM questions"))
            versions = await conn.scalar(text("SELECT count(*) FROM question_versions"))
        return int(questions or 0), int(versions or 0)

    try:
        kept = make_spec("kept-1", "advanced", "DDP")
        assert (await service.admin_import(ADMIN, [kept])).added == ("kept-1",)
        edited = {**kept, "prompt": "Edited?"}
        batch = [make_spec("new-1", "expert", "FSDP"), edited, make_spec("new-2", "expert", "FSDP")]

        real_flush = AsyncSession.flush
        seen_mid_import: list[int] = []

        async def flush_then_crash(self: AsyncSession, objects: Any = None) -> None:
            await real_flush(self, objects)
            # The first question and its version are now written in the open transaction; fail on the
            # second one, after it too has reached the database.
            written = await self.scalar(text("SELECT count(*) FROM question_versions"))
            seen_mid_import.append(int(written or 0))
            if len(seen_mid_import) == 2:
                raise _ImportCrash("disk full")

        monkeypatch.setattr(AsyncSession, "flush", flush_then_crash)
        with pytest.raises(_ImportCrash):
            await service.admin_import(ADMIN, batch)
        monkeypatch.undo()
        assert seen_mid_import == [2, 3], "new-1 and kept-1 v2 were written before the failure"
        assert await counts() == (1, 1), "the failed import left nothing behind"
        listed = {q.id: q.version for q in await service.list_questions()}
        assert listed == {"kept-1": 1}
        # The same import goes through once nothing fails.
        report = await service.admin_import(ADMIN, batch)
        assert report.added == ("new-1", "new-2") and report.updated == ("kept-1",)
        assert await counts() == (3, 4)
    finally:
        await engine.dispose()


async def test_close_is_retried_when_the_database_aborts_it_for_a_deadlock(
    service: QuizService, platform: FakePlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL closing can deadlock with a group-committed batch of answers; the aborted close left
    nothing behind, so it runs again (the PostgreSQL error's translation is tested in test_record_answer)."""
    ch = await _today(service)
    await service.start_problem(actor("ann"), ch.problems[0].id)
    real = SqlPlayRepository.expire_sessions
    calls = 0

    async def aborted_once(
        self: SqlPlayRepository, challenge_id: int, now: dt.datetime
    ) -> list[tuple[int, int]]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TransientConflictError("deadlock detected (simulated)")
        return await real(self, challenge_id, now)

    monkeypatch.setattr(SqlPlayRepository, "expire_sessions", aborted_once)
    card = await service.close_challenge(ch.id)
    assert card is not None and calls == 2
    assert len(platform.results) == 1
    assert card.problems[0].players == 1
