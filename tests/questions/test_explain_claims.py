"""Explain grading that reads what is said (issue 28): claims scoped to their clause and subject.

One representative answer per class the issue names; each was graded wrongly before issue 28 (contrast,
subject, stop-word keywords, disclaimers, the wrapper's state_dict, terse notes, the prepare rubric,
double negation, conditionals), and the validate check that refuses keywords common words can earn.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from bot.core.grading import ExplainGrade, grade_explanation, is_salad, keyword_problems
from questions.schema import QuestionSpec
from tests.shipped import shipped_specs

EXPLAIN = {s["id"]: s for s in shipped_specs() if s["kind"] == "explain"}


def _grade(qid: str, answer: str) -> ExplainGrade:
    return grade_explanation(answer, EXPLAIN[qid]["concepts"])


def _covered(grade: ExplainGrade) -> set[int]:
    return {i for i, c in enumerate(grade.concepts) if c.covered}


# ------------------------------------------------------------------ contrast and subject
def test_a_contrast_describes_the_other_thing_and_asserts_nothing() -> None:
    grade = _grade(
        "explain-ring-allreduce",
        "Unlike a reduce, where only the root gets the sum, all-reduce leaves the summed result on every "
        "rank. The ring does a reduce-scatter then an all-gather, each rank passing chunks to its "
        "neighbour, so each rank sends 2(N-1)/N times the data; in the naive scheme traffic grows with N, "
        "in the ring it stays constant.",
    )
    assert grade.passed and grade.misconceptions == (), grade.concepts
    # The same words said of all-reduce itself are the misconception.
    wrong = _grade(
        "explain-ring-allreduce",
        "All-reduce sums the tensors and the result ends up only on rank 0. The ring does a reduce-scatter "
        "and then an all-gather, so each rank sends about 2(N-1)/N of the data.",
    )
    assert not wrong.passed and [c.name for c in wrong.misconceptions] == [wrong.concepts[0].name]


def test_instead_of_and_a_relative_clause_after_unlike_are_set_aside() -> None:
    grade = _grade(
        "explain-torchrun-launch",
        "Unlike torch.distributed.launch, which passed --local-rank as an argument, torchrun starts 4 worker "
        "processes and sets LOCAL_RANK in the environment; the script calls init_process_group and "
        "set_device(local_rank).",
    )
    assert grade.passed and grade.misconceptions == (), grade.concepts
    sampler = _grade(
        "explain-distributed-sampler",
        "Instead of shuffle=True on the DataLoader, pass a DistributedSampler, which gives each rank a "
        "disjoint shard of the indices, and call sampler.set_epoch(epoch) at the start of every epoch.",
    )
    assert sampler.passed and sampler.misconceptions == (), sampler.concepts


def test_a_claim_is_read_with_its_subject() -> None:
    # "no bubble" said of tensor parallelism is right; said of pipeline stages it is the misconception.
    right = _grade(
        "explain-tp-vs-pp",
        "Unlike pipeline parallelism, tensor parallelism has no bubble: it splits the weight matrices inside "
        "each layer and communicates in every layer, which needs NVLink. Pipeline parallelism cuts the model "
        "into stages of layers and sends activations on, and micro-batches shrink its idle bubble.",
    )
    assert right.passed and right.misconceptions == (), right.concepts
    wrong = _grade(
        "explain-tp-vs-pp",
        "Tensor parallelism splits the weight matrices inside each layer and all-reduces in every layer over "
        "NVLink. Pipeline parallelism splits the model into stages of layers, and with micro-batches every "
        "stage is busy all the time, with no idle time.",
    )
    assert not wrong.passed and wrong.misconceptions, wrong.concepts


# ------------------------------------------------------------------ keywords that say nothing
def test_its_alone_does_not_earn_the_bandwidth_concept() -> None:
    grade = _grade(
        "explain-ring-allreduce",
        "Every GPU ends with the same result. In the ring, chunks go around to the neighbour in a "
        "reduce-scatter and an all-gather phase, and each GPU sends its whole tensor to every other GPU.",
    )
    assert 2 not in _covered(grade) and not grade.passed, grade.concepts


def test_common_words_alone_never_earn_a_concept() -> None:
    concepts: list[dict[str, Any]] = [
        {"name": "same result", "keywords": ["each|every + gpu + get + same", "gpu + same + data"]}
    ]
    assert not grade_explanation("Each GPU gets the same data.", concepts).concepts[0].covered
    assert keyword_problems(concepts) == []


def test_validate_refuses_a_lone_stop_word_alternative() -> None:
    concepts = [{"name": "n", "keywords": ["twice the|its + tensor"]}]
    (problem,) = keyword_problems(concepts)
    assert "'its'" in problem and "twice + the|its + tensor" in problem
    spec = dict(EXPLAIN["explain-ring-allreduce"])
    spec["concepts"] = [dict(c) for c in spec["concepts"]]
    spec["concepts"][2]["keywords"] = ["twice the|its + data|tensor"]
    with pytest.raises(ValidationError, match="only stop words"):
        QuestionSpec.model_validate(spec)


def test_the_bank_has_no_keyword_that_common_words_earn() -> None:
    for qid, spec in EXPLAIN.items():
        assert keyword_problems(spec["concepts"]) == [], qid


# ------------------------------------------------------------------ disclaimers and the wrapper
def test_a_disclaimer_cancels_the_keyword_in_its_clause() -> None:
    grade = _grade(
        "explain-scale-batch-and-lr",
        "The global batch is 256. Do not scale the LR, linear scaling is a myth; keep the learning rate as "
        "it was.",
    )
    assert 1 not in _covered(grade) and not grade.passed, grade.concepts
    assert any("learning rate" in (c.misconception or "") for c in grade.concepts)


def test_the_ddp_wrappers_state_dict_does_not_earn_model_module_state_dict() -> None:
    grade = _grade(
        "explain-ddp-checkpoint",
        "Save from rank 0 with ddp_model.state_dict() and the epoch, and load it with map_location onto "
        "each rank's GPU.",
    )
    assert 1 not in _covered(grade) and not grade.passed, grade.concepts
    right = _grade(
        "explain-ddp-checkpoint",
        "Only rank 0 saves, then a barrier. Save model.module.state_dict() plus the optimizer state_dict. "
        "When loading, use map_location so each rank loads onto its own GPU.",
    )
    assert right.passed, right.concepts


# ------------------------------------------------------------------ terse notes, negation, conditionals
def test_terse_notes_are_not_a_keyword_salad() -> None:
    notes = "pro: one line to wrap, no launcher. con: GPU 0 bottleneck, GIL."
    assert not is_salad(notes)
    assert _grade("s004-explain-dp-pros-cons", notes).passed
    assert is_salad("ring reduce-scatter all-gather neighbours constant bandwidth")


def test_a_double_negation_withdraws_the_claim() -> None:
    grade = _grade(
        "explain-tp-vs-pp",
        "Tensor parallelism does not split the batch: it splits each layer's weight matrices and "
        "communicates inside every layer, so it needs NVLink. Pipeline parallelism puts groups of layers on "
        "different GPUs as stages; it is never free of idle time, the bubble, which micro-batches shrink.",
    )
    assert grade.passed and grade.misconceptions == (), grade.concepts


def test_a_condition_supposes_and_without_would_affirms() -> None:
    lr = _grade(
        "explain-scale-batch-and-lr",
        "The effective batch is 8 x 32 = 256 and an epoch has eight times fewer steps. If you do not scale "
        "the learning rate, each step is too timid: multiply it by 8 with a warmup.",
    )
    assert lr.passed and lr.misconceptions == (), lr.concepts
    sampler = _grade(
        "explain-distributed-sampler",
        "Wrap the dataset in a DistributedSampler so each rank reads its own shard, and without "
        "sampler.set_epoch(epoch) every epoch would repeat the same order.",
    )
    assert {0, 1} <= _covered(sampler), sampler.concepts


# ------------------------------------------------------------------ the prepare rubric
def test_a_full_torchrun_ddp_answer_passes_the_prepare_prompt() -> None:
    concepts = EXPLAIN["s003-explain-prepare-model-data"]["concepts"]
    assert not any("available" in c["name"].lower() for c in concepts)
    assert any("DistributedSampler" in c["name"] for c in concepts)
    grade = _grade(
        "s003-explain-prepare-model-data",
        "Launch one process per GPU with torchrun, call init_process_group and set_device(local_rank), move "
        "the model to the GPU and wrap it in DistributedDataParallel, use a DistributedSampler in the "
        "DataLoader, and move every batch to the GPU in the loop.",
    )
    assert grade.passed and grade.covered == grade.total, grade.concepts
    wrong = _grade(
        "s003-explain-prepare-model-data",
        "Move the model to the GPU, wrap it in DDP and use a DistributedSampler; the batches can stay on "
        "the CPU because DDP handles the inputs.",
    )
    assert not wrong.passed and wrong.misconceptions, wrong.concepts
