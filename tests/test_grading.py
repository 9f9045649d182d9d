"""Concept grading of explain answers: paraphrases that must count, and answers that must not."""

from __future__ import annotations

from typing import Any

import pytest

from bot.bootstrap import shipped_bank_specs
from bot.core.grading import grade_explanation, stem, tokenize

EXPLAIN = {s["id"]: s for s in shipped_bank_specs() if s["kind"] == "explain"}


def _grade(qid: str, answer: str) -> tuple[int, int, tuple[str, ...]]:
    g = grade_explanation(answer, EXPLAIN[qid]["concepts"])
    return g.covered, g.total, g.missed


def test_the_bank_has_explain_prompts_and_every_model_answer_covers_all_its_concepts() -> None:
    assert len(EXPLAIN) >= 4
    for qid, spec in EXPLAIN.items():
        covered, total, missed = _grade(qid, spec["model_answer"])
        assert covered == total, f"{qid}: its model answer misses {missed}"


# (question, paraphrased answer, concepts that must be covered, concepts that must be missed) by index
PARAPHRASES: list[tuple[str, str, set[int], set[int]]] = [
    (
        "s003-explain-how-dp-helps",
        "DataParallel chops the batch into pieces, one per card, and puts a duplicate of the network on each "
        "GPU. They all run simultaneously, then the results get concatenated back on cuda:0, and backprop "
        "sums the grads into the original weights.",
        {0, 1, 2, 3, 4},
        set(),
    ),
    (
        "s003-explain-how-dp-helps",
        "Each GPU gets a replica of the network and the mini-batch is scattered along dim 0.",
        {0, 1},
        {2, 3, 4},
    ),
    (
        "s004-explain-how-dp-works",
        "The wrapper divides the inputs, replicates the module onto every device, the devices process their "
        "slices concurrently, and the outputs are gathered on the output device.",
        {0, 1, 2, 3},
        set(),
    ),
    (
        "s004-explain-dp-pros-cons",
        "Pro: it's a single line of code. Con: GPU 0 becomes a bottleneck and it doesn't scale past one box.",
        {0, 1},
        set(),
    ),
    (
        "s004-explain-dp-pros-cons",
        "Its upside is simplicity; its downside is the GIL, since it's all threads in one Python process.",
        {0, 1},
        set(),
    ),
    (
        "s003-explain-prepare-model-data",
        "Call torch.cuda.is_available(), then model.cuda(), wrap it in nn.DataParallel, and in the loop move "
        "inputs.to(device) and the targets too.",
        {0, 1, 2, 3},
        set(),
    ),
    (
        "s003-explain-prepare-model-data",
        "Put the network on the GPU and wrap it with DistributedDataParallel.",
        {2},
        {0, 3},
    ),
]


@pytest.mark.parametrize(("qid", "answer", "hits", "misses"), PARAPHRASES)
def test_paraphrased_answers(qid: str, answer: str, hits: set[int], misses: set[int]) -> None:
    grade = grade_explanation(answer, EXPLAIN[qid]["concepts"])
    covered = {i for i, c in enumerate(grade.concepts) if c.covered}
    assert hits <= covered, [c for c in grade.concepts]
    assert not (misses & covered), [c for c in grade.concepts]


def test_off_topic_and_empty_answers_cover_nothing() -> None:
    for qid in EXPLAIN:
        assert _grade(qid, "I think it is about making training faster somehow.")[0] == 0
        assert _grade(qid, "")[0] == 0


def test_negated_mentions_do_not_count() -> None:
    qid = "s004-explain-how-dp-works"
    assert _grade(qid, "It doesn't split anything and never copies the model.")[0] == 0
    assert _grade(qid, "It does not split the batch, but it copies the model to each GPU.")[0] == 1
    pros = "s004-explain-dp-pros-cons"
    assert _grade(pros, "It is not easy to use.")[0] == 0
    # A keyword that is itself negative ("does not scale") still counts.
    covered, _, missed = _grade(pros, "The catch: it does not scale.")
    assert covered == 1 and missed == ("Advantage: easy to use, little code change",)


def test_word_boundaries_and_stems() -> None:
    concepts: list[dict[str, Any]] = [
        {"name": "gather", "keywords": ["gather"]},
        {"name": "split", "keywords": ["split"]},
        {"name": "all-reduce", "keywords": ["all-reduce"]},
        {"name": "phrase", "keywords": ["main gpu"]},
        {"name": "code", "keywords": ["model.to"]},
    ]
    g = grade_explanation("Together the splitter's GPU main thread reads mymodel.top", concepts)
    assert g.covered == 0, g.concepts
    g = grade_explanation(
        "Outputs are gathered after splitting; an allreduce on the main GPUs; then self.model.to(rank)",
        concepts,
    )
    assert g.covered == 5, g.concepts
    assert {stem(w) for w in ("split", "splits", "splitting")} == {"split"}
    assert stem("copies") == stem("copied") == "copy"
    assert stem("synchronised") == stem("synchronized") == stem("synchronizes")
    assert tokenize("model.to(device)") == [["model", ".", "to", "gpu"]]
