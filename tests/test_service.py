"""The engine's use cases on real databases (SQLite and PostgreSQL), with a frozen clock."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from bot.core.errors import (
    ChallengeClosedError,
    InvalidAnswerError,
    NotAdminError,
    NotStartedError,
    ProblemOverError,
    RankZeroError,
    TimeUpError,
)
from bot.core.models import DIFFICULTY_ORDER, ChannelRef
from bot.core.service import QuizService
from tests.conftest import ADMIN, CHANNEL, actor, make_spec, test_bank
from tests.fakes import FakePlatform, FrozenClock


async def _today(service: QuizService):
    challenge, _ = await service.open_challenge(CHANNEL)
    return challenge


async def test_daily_challenge_has_five_ramped_mixed_problems(service: QuizService) -> None:
    challenge = await _today(service)
    assert len(challenge.problems) == 5
    levels = [p.question.difficulty for p in challenge.problems]
    assert levels == ["intermediate", "intermediate", "advanced", "advanced", "expert"]
    assert [DIFFICULTY_ORDER[x] for x in levels] == sorted(DIFFICULTY_ORDER[x] for x in levels)
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
            await service.answer(a, problem.id, "B")


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


async def test_leaderboard_top_ten_own_rank_and_ties_by_time(
    service: QuizService, clock: FrozenClock
) -> None:
    ch = await _today(service)
    p = ch.problems[0]
    # 12 players solve problem 1: player i answers after 10+i seconds, so earlier is better.
    for i in range(12):
        a = actor(f"p{i:02d}")
        await service.start_problem(a, p.id)
        clock.advance(10 + i)
        await service.answer(a, p.id, "A")
    # Two players tie on points (same speed bucket) and are ordered by answer time.
    board = await service.leaderboard(CHANNEL, player=actor("p11").player)
    assert len(board.rows) == 10 and board.total_players == 12
    assert [r.display_name for r in board.rows[:3]] == ["P00", "P01", "P02"]
    assert board.me is not None and board.me.rank == 12 and board.me.display_name == "P11"
    pts = [r.points for r in board.rows]
    assert pts == sorted(pts, reverse=True)
    for a, b in zip(board.rows, board.rows[1:], strict=False):
        if a.points == b.points:
            assert a.answer_ms <= b.answer_ms
    today = await service.leaderboard(CHANNEL, period="today")
    week = await service.leaderboard(CHANNEL, period="week")
    assert today.total_players == week.total_players == 12
    ws = await service.leaderboard(ChannelRef("test", "ws1", "another"), scope="workspace")
    assert ws.total_players == 12, "workspace scope includes every channel of the workspace"
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


async def test_stats_accuracy_by_topic_and_kind(service: QuizService, clock: FrozenClock) -> None:
    await _play_all(service, "ivy", "AABAA", clock)
    stats = await service.stats(actor("ivy").player, CHANNEL)
    assert stats.problems == 5 and stats.correct == 4 and stats.points > 0
    assert sum(t.answered for t in stats.by_topic) == 5
    assert {k.name for k in stats.by_kind} == {"conceptual"}


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
