"""Disputes end to end: the service, a real database (SQLite and PostgreSQL) and a real sandboxed runner.

One ``rankzero-runner serve`` subprocess is shared by the module. The questions: a bank seed question
whose official answer is right, a fixture whose official answer the runner contradicts (it hard-codes
world_size=2 but runs as one process, so it hangs in init_process_group instead of raising), and one
that needs 2 GPUs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from bot.core.dispute_service import DisputeService
from bot.core.errors import NotAdminError, RateLimitedError, TooEarlyError
from bot.core.service import QuizService
from bot.runner_client import HttpRunnerClient
from bot.storage.db import make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, CHANNEL, actor
from tests.fakes import FakePlatform, FrozenClock
from tests.runner_server import RunnerServer
from tests.shipped import shipped_specs

HANG_CODE = """\
import os
import torch.distributed as dist


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


rank = 0
world_size = 2
setup(rank, world_size)
print("joined")
"""

HANG_SPEC: dict[str, Any] = {
    "id": "fixture-hardcoded-world-size",
    "kind": "predict_output",
    "topic": "DDP",
    "difficulty": "advanced",
    "prompt": "Started with plain `python train.py` (one process). What happens?",
    "code": HANG_CODE,
    "runner": {"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False},
    "time_limit_s": 120,
    "attempts": 2,
    "choices": [
        {"text": "RuntimeError: world_size (2) does not match the number of processes", "correct": True},
        {"text": "It hangs in init_process_group, waiting for rank 1"},
        {"text": "joined"},
    ],
}

GPU_SPEC: dict[str, Any] = {
    "id": "fixture-needs-two-gpus",
    "kind": "predict_output",
    "topic": "Collectives",
    "difficulty": "expert",
    "prompt": "Two ranks with NCCL on two GPUs. What is printed?",
    "code": "import torch\nimport torch.distributed as dist\nt = torch.ones(1, device='cuda')\n"
    "dist.all_reduce(t)\nprint(t)\n",
    "runner": {"mode": "ddp", "nproc": 2, "gpus": 2, "init_process_group": True},
    "choices": [
        {"text": "tensor([2.], device='cuda:0')\ntensor([2.], device='cuda:1')", "correct": True},
        {"text": "tensor([1.], device='cuda:0')\ntensor([1.], device='cuda:1')"},
    ],
}


def seed_spec() -> dict[str, Any]:
    """The bank's seed 000 #1 (DataParallel output shape), whose official answer is right."""
    return next(dict(s) for s in shipped_specs() if s["id"] == "s000-dp-output-shape")


@dataclass
class Env:
    quiz: QuizService
    disputes: DisputeService
    platform: FakePlatform
    clock: FrozenClock


@pytest.fixture
async def env(
    db_url: str, clock: FrozenClock, platform: FakePlatform, runner: RunnerServer
) -> AsyncIterator[Env]:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, platform, problems_per_challenge=3, seed=1)
    await quiz.admin_import(ADMIN, [seed_spec(), HANG_SPEC, GPU_SPEC])
    async with HttpRunnerClient(runner.url, runner.token) as client:
        disputes = DisputeService(
            lambda: SqlUnitOfWork(factory), clock, client, platform, runs_per_hour=4, run_timeout_s=4
        )
        yield Env(quiz, disputes, platform, clock)
    await engine.dispose()


async def test_dispute_flow_against_a_real_runner(env: Env) -> None:
    challenge, _ = await env.quiz.open_challenge(CHANNEL)
    problem = {p.question.id: p.id for p in challenge.problems}
    assert set(problem) == {"s000-dp-output-shape", HANG_SPEC["id"], GPU_SPEC["id"]}
    alice = actor("alice")

    # Not over yet: no dispute.
    await env.quiz.start_problem(alice, problem[HANG_SPEC["id"]])
    with pytest.raises(TooEarlyError, match="once it is over for you"):
        await env.disputes.dispute(alice, problem[HANG_SPEC["id"]])

    # (b) the official answer (a RuntimeError) is contradicted: the snippet hangs.
    await env.quiz.answer(alice, problem[HANG_SPEC["id"]], "A")
    card = await env.disputes.dispute(alice, problem[HANG_SPEC["id"]])
    assert card.verdict is not None and card.verdict.status == "timeout"
    assert card.match is not None
    assert (card.match.matched_letter, card.match.official_letter, card.verification) == (
        "B",
        "A",
        "contradicted",
    )
    assert "rank 0 stuck in init_process_group at line 8 (in setup)" in card.match.explanation
    assert "rank 1 never joined" in card.match.explanation
    assert card.flagged and card.dispute_id is not None
    assert [n.question_id for n in env.platform.admin_notices] == [HANG_SPEC["id"]]
    notice = env.platform.admin_notices[0]
    assert (notice.official_letter, notice.matched_letter, notice.raised_by) == ("A", "B", "Alice")
    flags = await env.disputes.flags(ADMIN)
    assert [(f.question_id, f.status) for f in flags] == [(HANG_SPEC["id"], "open")]
    with pytest.raises(NotAdminError):
        await env.disputes.flags(alice)

    # (a) a seed question whose official answer the runner confirms.
    await env.quiz.start_problem(alice, problem["s000-dp-output-shape"])
    await env.quiz.answer(alice, problem["s000-dp-output-shape"], "B")
    await env.quiz.answer(alice, problem["s000-dp-output-shape"], "C")
    card = await env.disputes.dispute(alice, problem["s000-dp-output-shape"])
    assert card.verdict is not None and card.verdict.status == "ok"
    assert card.verdict.ranks[0].stdout == "torch.Size([16, 5])\n"
    assert card.verdict.hardware.gpus == 0 and card.verdict.sandboxed
    assert card.match is not None and card.match.matched_letter == "A" and card.verification == "confirmed"
    assert not card.flagged and len(env.platform.admin_notices) == 1

    # (c) a question that needs GPUs is not run on a CPU runner.
    await env.quiz.start_problem(alice, problem[GPU_SPEC["id"]])
    env.clock.advance(121)
    card = await env.disputes.dispute(alice, problem[GPU_SPEC["id"]])
    assert card.verdict is None and card.verification == "cannot_check"
    assert card.cannot_reproduce is not None
    assert card.cannot_reproduce.startswith("cannot reproduce here: needs 2 GPUs, this runner has 0")
    assert card.dispute_id is None, "nothing ran: no dispute is kept and the hour's runs are untouched"

    # A variant ("what if world_size=1?") runs under the same settings; it never flags the question.
    variant = HANG_CODE.replace("world_size = 2", "world_size = 1")
    card = await env.disputes.dispute(alice, problem[HANG_SPEC["id"]], variant)
    assert card.variant and card.verdict is not None and card.verdict.status == "ok"
    assert card.match is not None and card.match.matched_letter == "C"
    assert not card.flagged and len(env.platform.admin_notices) == 1

    # Three runs so far (the GPU question ran nothing); a fourth, then the fifth is refused (counted in
    # SQL), and allowed again an hour later.
    card = await env.disputes.dispute(alice, problem["s000-dp-output-shape"])
    assert card.verification == "confirmed"
    with pytest.raises(RateLimitedError, match="4 runner runs for this hour"):
        await env.disputes.dispute(alice, problem[HANG_SPEC["id"]])
    env.clock.advance(3601)

    # The admin fixes the answer: the flag is resolved and alice's points go.
    before = await env.quiz.stats(alice.player)
    fix = await env.disputes.correct_answer(ADMIN, HANG_SPEC["id"], "B")
    assert (fix.old_letter, fix.new_letter, fix.to_version, fix.flags_resolved) == ("A", "B", 2, 1)
    after = await env.quiz.stats(alice.player)
    assert after.points == before.points + fix.points_delta < before.points
    assert [f.status for f in await env.disputes.flags(ADMIN, None)] == ["resolved"]
    # The question's own code now agrees with its official answer.
    card = await env.disputes.dispute(alice, problem[HANG_SPEC["id"]])
    assert card.verification == "confirmed" and card.question_version == 2 and not card.flagged
