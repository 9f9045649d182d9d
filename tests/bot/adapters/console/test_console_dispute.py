"""The D key of ``rankzero play``: after a problem is over, D disputes it and the verdict is printed.

The runner is a fake here (its contract is tested in test_runner_contract.py and the real flow in
test_disputes_e2e.py); this checks the console's key handling and rendering over a real database.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from bot.adapters.console.play import ConsoleGame, KeyReader
from bot.core.dispute_service import DisputeService
from bot.core.errors import RateLimitedError, RunnerUnavailableError
from bot.core.service import QuizService
from bot.core.verdicts import RunnerHealth, RunSpec, RunVerdict
from bot.storage.db import make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, CHANNEL, actor, make_spec
from tests.fakes import FakePlatform, FrozenClock
from tests.verdicts import cpu_health, printed_verdict


class FakeRunner:
    """Answers every run with what the snippet 'printed' and records the specs it was asked to run."""

    def __init__(self, stdout: str) -> None:
        self.stdout = stdout
        self.specs: list[RunSpec] = []

    async def health(self) -> RunnerHealth:
        return cpu_health()

    async def run(self, spec: RunSpec) -> RunVerdict:
        self.specs.append(spec)
        return printed_verdict(spec, self.stdout)


async def test_d_disputes_the_problem_just_over(
    db_url: str, clock: FrozenClock, platform: FakePlatform
) -> None:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, platform, problems_per_challenge=1)
    spec = make_spec(
        "console-dispute",
        "advanced",
        "DDP",
        kind="predict_output",
        code="print('x')\n",
        runner={"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False},
    )
    await quiz.admin_import(ADMIN, [spec])
    runner = FakeRunner("console-dispute choice 2\n")
    disputes = DisputeService(lambda: SqlUnitOfWork(factory), clock, runner, platform)
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False)
    keys = KeyReader(io.StringIO("a\nd\n"))  # answer A (official, correct), then dispute
    game = ConsoleGame(quiz, clock, actor("tess"), CHANNEL, console, keys, disputes)
    try:
        assert await game.run() == 0
    finally:
        await engine.dispose()
    text = out.getvalue()
    assert "D to dispute it on the runner" in text
    assert [s.code for s in runner.specs] == ["print('x')\n"]
    assert "C: matches the output" in text
    assert "choice C matches, but the official answer is A" in text
    assert "flagged for the admins" in text
    assert [n.question_id for n in platform.admin_notices] == ["console-dispute"]


class DownRunner(FakeRunner):
    """A runner that cannot be reached."""

    async def run(self, spec: RunSpec) -> RunVerdict:
        raise RunnerUnavailableError("the runner at http://127.0.0.1:9 is unreachable")


async def test_rate_limit_is_per_player_and_counts_only_runs_that_happened(
    db_url: str, clock: FrozenClock, platform: FakePlatform
) -> None:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, platform, problems_per_challenge=1)
    spec = make_spec("rate-limited", "advanced", "DDP", kind="predict_output", code="print(1)\n", runner={})
    await quiz.admin_import(ADMIN, [spec])
    challenge, _ = await quiz.open_challenge(CHANNEL)
    pid = challenge.problems[0].id
    alice = actor("alice")
    await quiz.start_problem(alice, pid)
    await quiz.answer(alice, pid, "A")

    def disputes(runner: FakeRunner) -> DisputeService:
        return DisputeService(lambda: SqlUnitOfWork(factory), clock, runner, platform, runs_per_hour=1)

    try:
        with pytest.raises(RunnerUnavailableError):
            await disputes(DownRunner("")).dispute(alice, pid)
        up = disputes(FakeRunner("rate-limited choice 0\n"))
        assert (await up.dispute(alice, pid)).verification == "confirmed"  # the failed run did not count
        with pytest.raises(RateLimitedError):
            await up.dispute(alice, pid)
        await quiz.close_challenge(challenge.id)
        assert (await up.dispute(actor("bob"), pid)).verification == "confirmed"  # bob has his own budget
        clock.advance(3601)
        assert (await up.dispute(alice, pid)).verification == "confirmed"
    finally:
        await engine.dispose()
