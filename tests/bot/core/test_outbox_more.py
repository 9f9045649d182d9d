"""The posts that used to go straight to the platform go through the outbox too (issue 25 §1, follow-up):
the weekly summary, the post of a challenge `play` opened before its slot, and the admins' notice of a
question a dispute flagged. A refused post is retried and told to the admins, not lost with its claim.
Also the fence of a post in several parts, and a console `close` run again printing what it never printed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from click.testing import CliRunner

from bot.core import parts
from bot.core.dispute_service import DisputeService
from bot.core.outbox import OutboxTiming
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.core.verdicts import RunnerHealth, RunSpec, RunVerdict
from tests.conftest import ADMIN, CHANNEL, actor, make_spec
from tests.fakes import FakePlatform, FrozenClock
from tests.shipped import shipped_specs
from tests.verdicts import cpu_health, printed_verdict

TIMING = OutboxTiming(lease_s=60, retry_base_s=30, retry_max_s=600, give_up_s=3 * 3600)
UTC = dt.UTC


class Refusing(FakePlatform):
    """Refuses the kinds of post named in ``refuse`` as a platform outage would."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse: set[str] = set()
        #: Each results post in parts: the parts sent, in order (see ``post_results``).
        self.parts: list[int | str] = []
        #: The split a results post is sent as (a test changes it between tries, as live standings can).
        self.split: list[int | str] = [0, 1, 2]
        self.during_part: dict[int, Any] = {}

    def _check(self, kind: str) -> None:
        if kind in self.refuse:
            raise ConnectionResetError(f"the platform dropped the {kind} post")

    async def post_challenge(self, *args: Any) -> str | None:
        self._check("challenge")
        return await super().post_challenge(*args)

    async def post_results(self, *args: Any) -> None:
        # Three messages, as Discord sends a results post over one embed's limits.
        async def send(part: int | str) -> None:
            index = self.split.index(part)
            if index in self.during_part:
                await self.during_part.pop(index)()
            self.parts.append(part)

        await parts.send_parts(list(self.split), send)
        await super().post_results(*args)

    async def post_weekly_summary(self, *args: Any) -> None:
        self._check("summary")
        await super().post_weekly_summary(*args)

    async def post_admin_notice(self, *args: Any) -> None:
        self._check("notice")
        await super().post_admin_notice(*args)


@pytest.fixture
def platform() -> FakePlatform:
    return Refusing()


@pytest.fixture
def schedules(service: QuizService, clock: FrozenClock, platform: Refusing) -> ScheduleService:
    service.outbox.timing = TIMING
    return ScheduleService(service._uow, clock, service, platform)


async def test_a_refused_weekly_summary_is_retried_and_told_not_lost(
    service: QuizService, schedules: ScheduleService, platform: Refusing, clock: FrozenClock
) -> None:
    clock.current = dt.datetime(2026, 11, 21, 10, 0, tzinfo=UTC)  # Saturday of ISO week 47
    challenge, _ = await service.open_challenge(CHANNEL)
    problem = challenge.problems[0]
    await service.start_problem(actor("alice"), problem.id)
    await service.answer(actor("alice"), problem.id, problem.question.correct_letter or "A")
    await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", weekly_summary="mon")
    pk = (await schedules.schedules())[0].channel_pk
    clock.current = dt.datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # Monday, the summary's slot
    platform.refuse.add("summary")
    card = await schedules.weekly_summary(pk)
    assert card is not None and platform.summaries == []
    [(_, told)] = platform.delivery_notices
    assert told.kind == "summary" and told.challenge_id is None and told.retry_at is not None
    assert "the weekly summary (Weekly summary · 2026-W47)" in told.text()
    assert await schedules.weekly_summary(pk) is None  # claimed: the job does not post it again...
    clock.advance(TIMING.retry_base_s)
    await service.outbox.drain()
    assert platform.summaries == [] and len(platform.delivery_notices) == 1  # same cause: told once
    platform.refuse.clear()
    clock.advance(TIMING.retry_max_s)
    await service.outbox.drain()  # ...the outbox does, once the platform takes it
    [(channel, board)] = platform.summaries
    assert channel == CHANNEL and board.title.endswith("2026-W47")
    assert [r.display_name for r in board.rows] == ["Alice"]
    clock.advance(TIMING.retry_max_s)
    await service.outbox.drain()
    assert len(platform.summaries) == 1


async def test_a_refused_post_of_a_challenge_play_opened_is_retried(
    service: QuizService, schedules: ScheduleService, platform: Refusing, clock: FrozenClock
) -> None:
    clock.current = dt.datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
    challenge, _ = await service.open_challenge(CHANNEL)  # `rankzero play` before the slot: no window
    assert challenge.closes_at is None
    await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="2h")
    pk = (await schedules.schedules())[0].channel_pk
    clock.current = dt.datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
    platform.refuse.add("challenge")
    outcome = await schedules.post_scheduled(pk)
    assert outcome.status == "posted" and outcome.challenge_id == challenge.id  # adopted: it has its window
    assert platform.posts == []
    assert (await schedules.post_scheduled(pk)).status == "posted"  # the slot's retry posts nothing...
    assert platform.posts == []
    platform.refuse.clear()
    clock.advance(TIMING.retry_base_s)
    await service.outbox.drain()  # ...the outbox posts it
    [(_, card)] = platform.posts
    assert card.challenge_id == challenge.id and card.closes_at == dt.datetime(
        2026, 11, 24, 11, 0, tzinfo=UTC
    )
    assert (await service.get_challenge(challenge.id)).message_ref == f"msg-{challenge.id}"
    clock.advance(TIMING.retry_max_s)
    await service.outbox.drain()
    assert len(platform.posts) == 1


class ContradictingRunner:
    """Every run prints what makes choice C right (the official answer is A)."""

    async def health(self) -> RunnerHealth:
        return cpu_health(("python",))

    async def run(self, spec: RunSpec) -> RunVerdict:
        return printed_verdict(spec, "outbox-dispute choice 2\n")


async def test_a_refused_admin_notice_of_a_dispute_is_retried_once_per_flag(
    service: QuizService, platform: Refusing, clock: FrozenClock
) -> None:
    quiz = QuizService(service._uow, clock, platform, problems_per_challenge=1, outbox=TIMING)
    spec = make_spec(
        "outbox-dispute",
        "advanced",
        "DDP",
        kind="predict_output",
        code="print('x')\n",
        runner={"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False},
    )
    await quiz.admin_import(ADMIN, [spec])
    disputes = DisputeService(service._uow, clock, ContradictingRunner(), platform, outbox=quiz.outbox)
    challenge, _ = await quiz.open_challenge(CHANNEL)
    problem = challenge.problems[0]
    assert problem.question.id == "outbox-dispute"
    await quiz.start_problem(actor("tess"), problem.id)
    await quiz.answer(actor("tess"), problem.id, "A")
    platform.refuse.add("notice")
    card = await disputes.dispute(actor("tess"), problem.id)
    assert card.flagged and platform.admin_notices == []  # the verdict stands; the notice is queued
    [(_, told)] = platform.delivery_notices
    assert told.kind == "notice" and "admin notice of a flagged question" in told.text()
    platform.refuse.clear()
    clock.advance(TIMING.retry_base_s)
    await quiz.outbox.drain()
    [notice] = platform.admin_notices
    assert notice.question_id == "outbox-dispute" and notice.matched_letter == "C"
    assert notice.raised_by == "Tess"
    clock.advance(3600)  # a second dispute of the same question: the flag exists, no second notice
    await quiz.start_problem(actor("uma"), problem.id)
    await quiz.answer(actor("uma"), problem.id, "A")
    await disputes.dispute(actor("uma"), problem.id)
    await quiz.outbox.drain()
    assert len(platform.admin_notices) == 1


async def _results_failing_at_part(
    service: QuizService, platform: Refusing, clock: FrozenClock, index: int
) -> int:
    service.outbox.timing = TIMING
    card = await service.post_daily(CHANNEL, closes_at=clock.now() + dt.timedelta(hours=1))

    async def fail() -> None:
        raise ConnectionResetError("the platform dropped message 2 of 3")

    platform.during_part[index] = fail
    results = await service.close_challenge(card.challenge_id)
    assert results is not None and results.not_posted is not None
    return card.challenge_id


async def test_a_retry_of_a_post_in_parts_sends_only_the_parts_not_accepted(
    service: QuizService, platform: Refusing, clock: FrozenClock
) -> None:
    challenge_id = await _results_failing_at_part(service, platform, clock, 1)
    assert platform.parts == [0]
    async with service._uow() as uow:
        row = await uow.outbox.find(challenge_id, "results")
    assert row is not None and row.parts_sent == 1 and row.status == "pending"
    clock.advance(TIMING.retry_base_s)
    await service.outbox.drain()
    assert platform.parts == [0, 1, 2]  # message 1 once, messages 2 and 3 at the retry
    assert len(platform.results) == 1


async def test_a_post_split_differently_at_the_retry_is_sent_whole_again(
    service: QuizService, platform: Refusing, clock: FrozenClock
) -> None:
    # Results are rendered from live standings: a renamed player can change how they split. Skipping "the
    # first message" of the new split would drop the names it now holds; the whole new split is sent.
    challenge_id = await _results_failing_at_part(service, platform, clock, 1)
    assert platform.parts == [0]
    platform.split = ["a", "b"]
    clock.advance(TIMING.retry_base_s)
    await service.outbox.drain()
    assert platform.parts == [0, "a", "b"]
    async with service._uow() as uow:
        row = await uow.outbox.find(challenge_id, "results")
    assert row is not None and row.status == "sent" and row.parts_sent == 2


async def test_a_sender_taken_over_mid_parts_stops_and_records_nothing(
    service: QuizService, platform: Refusing, clock: FrozenClock
) -> None:
    service.outbox.timing = TIMING
    card = await service.post_daily(CHANNEL, closes_at=clock.now() + dt.timedelta(hours=1))
    taken: list[int] = []

    async def lease_runs_out() -> None:
        # This sender stalls past its lease while sending message 2; another sender claims the row.
        clock.advance(TIMING.lease_s + 1)
        async with service._uow() as uow:
            row = await uow.outbox.find(card.challenge_id, "results")
            assert row is not None
            other = await uow.outbox.claim(row.id, clock.now(), clock.now() + dt.timedelta(seconds=60))
            assert other is not None
            taken.append(other.attempts)

    platform.during_part[1] = lease_runs_out
    results = await service.close_challenge(card.challenge_id)
    assert results is not None and results.not_posted is None  # "busy": the other sender has it
    assert platform.parts == [0, 1] and platform.results == []  # stopped before message 3
    async with service._uow() as uow:
        row = await uow.outbox.find(card.challenge_id, "results")
        assert row is not None and row.parts_sent == 1 and row.attempts == taken[0]  # the fence held
        assert not await uow.outbox.mark_parts(row.id, 2, attempt=row.attempts - 1)
    assert platform.delivery_notices == []


def test_a_console_close_run_again_prints_the_results_it_could_not_print(tmp_path: Any) -> None:
    import asyncio

    from bot.bootstrap import build_app
    from bot.cli import CONSOLE_CHANNEL, main
    from bot.cli._common import operator
    from bot.config import Settings

    url = f"sqlite+aiosqlite:///{tmp_path / 'console.db'}"

    class BrokenTerminal(FakePlatform):
        async def post_results(self, *args: Any) -> None:
            raise BrokenPipeError("the terminal went away")

    async def close_with_a_broken_terminal() -> None:
        app = await build_app(Settings(database_url=url), platform=BrokenTerminal())
        try:
            await app.service.admin_import(operator(), shipped_specs())  # as `rankzero play` seeds it
            challenge, _ = await app.service.open_challenge(CONSOLE_CHANNEL)
            card = await app.service.close_challenge(challenge.id)
            assert card is not None and card.not_posted is not None
        finally:
            await app.close()

    asyncio.run(close_with_a_broken_terminal())
    again = CliRunner().invoke(main, ["--db", url, "close"])
    assert again.exit_code == 0, again.output
    assert "Results ·" in again.output and "Already closed" not in again.output
    third = CliRunner().invoke(main, ["--db", url, "close"])
    assert third.exit_code == 0, third.output
    assert "Already closed." in third.output and "Results ·" not in third.output  # printed once


async def test_the_router_tells_only_the_admins_of_the_platform_a_flag_arose_on() -> None:
    from bot.bootstrap import PlatformRouter
    from bot.core.disputes import AdminNotice
    from bot.core.models import ChannelRef

    discord, slack = FakePlatform(), FakePlatform()
    router = PlatformRouter({"discord": discord, "slack": slack})
    notice = AdminNotice("q", 1, "A", "C", "prints 2", 7, "Tess")
    await router.post_admin_notice(notice, ChannelRef("slack", "T1", "C1", "general"))
    assert slack.admin_notices == [notice] and discord.admin_notices == []  # another team's admins: not told
    await router.post_admin_notice(notice)  # no channel (an operator's notice): every platform
    assert len(slack.admin_notices) == 2 and discord.admin_notices == [notice]
