"""Matching a verdict against choices (bot/core/disputes.py): pure functions, no runner needed."""

from __future__ import annotations

from typing import Any

from bot.core.dispute_service import question_from_spec, rescore
from bot.core.disputes import explain_hang, gpu_shortfall, match_verdict, normalise
from bot.core.models import Attempt, PlaySession
from bot.core.repositories import QuestionPlay
from bot.core.verdicts import (
    RankException,
    RankOutcome,
    RunnerHealth,
    RunSpec,
    RunVerdict,
    StuckAt,
)
from tests.conftest import CHANNEL, START
from tests.verdicts import CPU


def rank(n: int, stdout: str = "", **kw: Any) -> RankOutcome:
    base: dict[str, Any] = dict(
        rank=n,
        exit_code=0,
        signal=None,
        stdout=stdout,
        stderr="",
        truncated=False,
        exception=None,
        stuck_at=None,
    )
    base.update(kw)
    return RankOutcome(**base)


def verdict(
    status: str, *ranks: RankOutcome, root: int | None = None, notes: tuple[str, ...] = ()
) -> RunVerdict:
    return RunVerdict(status, "ddp", len(ranks), "gloo", 0.5, CPU, True, root, notes, ranks)


def question(*choices: str, correct: int = 0, kind: str = "predict_output", code: str = "print(1)") -> Any:
    return question_from_spec(
        {
            "id": "q-test",
            "kind": kind,
            "topic": "DDP",
            "difficulty": "advanced",
            "prompt": "What is printed?",
            "code": code,
            "runner": {"mode": "ddp", "nproc": 2},
            "choices": [{"text": t, "correct": i == correct} for i, t in enumerate(choices)],
        }
    )


def test_normalise_collapses_whitespace_and_blank_lines() -> None:
    assert normalise("  rank 0:   1.0 \n\n rank 1:\t2.0  \n") == "rank 0: 1.0\nrank 1: 2.0"


def test_multi_rank_output_is_joined_in_rank_order() -> None:
    q = question("rank 0: 3.0\nrank 1: 3.0", "rank 0: 1.0\nrank 1: 2.0", correct=0)
    v = verdict("ok", rank(0, "rank 0:  3.0\n"), rank(1, "rank 1: 3.0\n"))
    m = match_verdict(q, v)
    assert (m.matched_letter, m.verification) == ("A", "confirmed")
    assert m.choices[1].reason == "line 1 differs: 'rank 0: 1.0' vs 'rank 0: 3.0'"


def test_wrong_official_answer_is_contradicted() -> None:
    q = question("1.5", "3.0", correct=1)
    m = match_verdict(q, verdict("ok", rank(0, "1.5\n"), rank(1)))
    assert (m.matched_letter, m.official_letter, m.verification) == ("A", "B", "contradicted")
    assert m.agrees is False
    assert "choice A matches, but the official answer is B" in m.explanation


def test_placeholders_match_any_number() -> None:
    q = question("loss=some_value step=3", "loss=some_value step=4")
    m = match_verdict(q, verdict("ok", rank(0, "loss=0.6931 step=3\n")))
    assert m.matched_letter == "A"
    assert "placeholders" in m.choices[0].reason
    assert not m.choices[1].matches


def test_device_suffix_difference_is_a_mismatch_shown_explicitly() -> None:
    q = question(
        "tensor([[3.5000, 3.5000]], grad_fn=<AddmmBackward0>)",
        "tensor([[3.5000, 3.5000]], device='cuda:0', grad_fn=<AddmmBackward0>)",
        correct=1,
    )
    m = match_verdict(q, verdict("ok", rank(0, "tensor([[3.5000, 3.5000]], grad_fn=<AddmmBackward0>)\n")))
    assert (m.matched_letter, m.verification) == ("A", "contradicted")
    assert m.choices[1].reason == (
        "differs only by the device suffix: the choice shows device='cuda:0', the output has no device suffix"
    )


def test_exception_matches_the_choice_naming_it() -> None:
    q = question("tensor([1.])", "RuntimeError: Expected all tensors to be on the same device", correct=1)
    exc = RankException("RuntimeError", "Expected all tensors to be on the same device, but found cuda:0", 7)
    v = verdict("error", rank(0, exit_code=1, exception=exc), root=0)
    m = match_verdict(q, v)
    assert (m.matched_letter, m.verification) == ("B", "confirmed")
    assert m.observed.startswith("rank 0 raised RuntimeError: Expected all tensors")
    other = RankException("ValueError", "Expected all tensors", 7)
    m2 = match_verdict(q, verdict("error", rank(0, exit_code=1, exception=other), root=0))
    assert m2.matched_letter is None and m2.verification == "contradicted"
    assert m2.choices[1].reason == "names RuntimeError, the run raised ValueError"


def test_hang_is_explained_from_stuck_at_and_hard_coded_world_size() -> None:
    code = (
        "import torch.distributed as dist\nworld_size = 2\n"
        "dist.init_process_group('gloo', rank=0, world_size=world_size)\n"
    )
    v = RunVerdict(
        "timeout",
        "python",
        1,
        None,
        5.4,
        CPU,
        True,
        None,
        ("deadline of 5 s reached",),
        (rank(0, exit_code=None, stuck_at=StuckAt("setup", 9, "init_process_group")),),
    )
    assert explain_hang(v, code) == (
        "the snippet hangs: rank 0 stuck in init_process_group at line 9 (in setup); rank 1 never joined "
        "(world_size=2 is hard-coded, but 1 process was launched)"
    )
    q = question("RuntimeError: world_size mismatch", "It hangs in init_process_group", correct=0, code=code)
    m = match_verdict(q, v)
    assert (m.matched_letter, m.verification) == ("B", "contradicted")
    q2 = question("RuntimeError: x", "ok", correct=0, code=code)
    m2 = match_verdict(q2, v)
    assert m2.matched_letter is None and "no choice matches" in m2.explanation
    assert "rank 1 never joined" in m2.explanation


def test_unsupported_and_non_output_kinds_cannot_be_checked() -> None:
    q = question("a", "b")
    m = match_verdict(q, verdict("unsupported", notes=("needs CUDA: this runner has 0 GPUs",)))
    assert m.verification == "cannot_check" and "needs CUDA" in m.explanation
    d = question("because a", "because b", kind="debug")
    assert match_verdict(d, verdict("ok", rank(0, "x"))).verification == "cannot_check"


def test_two_matching_choices_cannot_tell() -> None:
    q = question("x=some_value", "x=1")
    m = match_verdict(q, verdict("ok", rank(0, "x=1")))
    assert m.verification == "cannot_check" and m.matched_letter is None


def test_gpu_shortfall() -> None:
    health = RunnerHealth(CPU, ("python", "dp", "ddp"), ("gloo",), True, 8, 300.0)
    assert gpu_shortfall(RunSpec("x", gpus=0), health) is None
    msg = gpu_shortfall(RunSpec("x", mode="ddp", nproc=2, gpus=2), health)
    assert msg is not None and msg.startswith("cannot reproduce here: needs 2 GPUs, this runner has 0")


def _play(
    attempts: list[tuple[str, int]], outcome: str | None, points: int, hint_at_s: float | None = None
) -> QuestionPlay:
    import datetime as dt

    q = question("a", "b", "c", correct=0)
    s = PlaySession(
        1,
        1,
        1,
        START,
        START + dt.timedelta(seconds=120),
        hint_at_s is not None,
        START + dt.timedelta(seconds=60) if outcome else None,
        outcome,  # type: ignore[arg-type]
        points,
        tuple(
            Attempt(i, letter, letter == "A", START + dt.timedelta(milliseconds=ms), ms)
            for i, (letter, ms) in enumerate(attempts, start=1)
        ),
    )
    hint = START + dt.timedelta(seconds=hint_at_s) if hint_at_s is not None else None
    return QuestionPlay(s, 1, 1, CHANNEL, START.date(), q, hint)


def test_rescore_rules() -> None:
    # Second attempt hits the corrected letter: half points plus the speed bonus at 30 s.
    r = rescore(_play([("C", 10_000), ("B", 30_000)], "wrong", 0), "B", 2)
    assert (r.outcome, r.correct_attempt, r.answer_ms) == ("correct", 2, 30_000)
    assert r.points == round(0.5 * (150 + 0.2 * 150 * 90 / 120))
    # The old answer was right; now nothing matches: wrong, no points.
    assert rescore(_play([("A", 5_000)], "correct", 170), "B", 2).outcome == "wrong"
    # A hint shown before the hit costs points; one shown after does not.
    early = rescore(_play([("B", 30_000)], "correct", 0, hint_at_s=10), "B", 2).points
    late = rescore(_play([("B", 30_000)], "correct", 0, hint_at_s=50), "B", 2).points
    assert late - early == round(0.25 * 150)
    # A timed-out session without the new letter stays timed out.
    assert rescore(_play([("C", 1_000)], "timeout", 0), "B", 2).outcome == "timeout"
