"""Concept grading of explain answers: paraphrases that must count, and answers that must not."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from bot.core.grading import grade_explanation, is_salad, stem, tokenize
from questions.schema import TOPICS, ConceptSpec
from tests.shipped import shipped_specs

EXPLAIN = {s["id"]: s for s in shipped_specs() if s["kind"] == "explain"}


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
        {0, 1, 2},
        set(),
    ),
    (
        "s003-explain-prepare-model-data",
        "Put the network on the GPU and wrap it with DistributedDataParallel.",
        {1},
        {2, 3},
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
    assert stem("copies") == stem("copied")
    assert tokenize("synchronised") == tokenize("synchronized") == tokenize("synchronizes")
    assert tokenize("model.to(device)") == [["model", ".", "to", "gpu"]]


# ---------------------------------------------------------------------- issue 17: what fooled the grader
DP = "s003-explain-how-dp-helps"
PREP = "s003-explain-prepare-model-data"


def test_a_stated_misconception_fails_its_concept_and_is_named_back() -> None:
    answer = (
        "It splits the batch across the GPUs and copies the model to each one, the GPUs run in parallel and "
        "the outputs are gathered on GPU 0. You must synchronize the gradients yourself after backward."
    )
    grade = grade_explanation(answer, EXPLAIN[DP]["concepts"])
    assert not grade.passed and grade.covered == 4
    [wrong] = grade.misconceptions
    assert wrong.misconception == "the gradients must be synchronised between the GPUs by hand"
    assert wrong.correction and "sums every replica's gradients" in wrong.correction
    assert not wrong.covered and wrong.name in grade.missed


@pytest.mark.parametrize(
    "denial",
    [
        "You do not need to synchronize the gradients yourself.",
        "You don't have to average the gradients by hand.",
        "There is no need to all-reduce the gradients manually.",
        "A common mistake is to think you must synchronize the gradients yourself.",
    ],
)
def test_a_denied_or_disclaimed_misconception_is_not_asserted(denial: str) -> None:
    answer = (
        "It scatters the batch over the GPUs, replicates the model on each, runs them in parallel and "
        "gathers the outputs on cuda:0; backward sums the gradients into the original model. " + denial
    )
    grade = grade_explanation(answer, EXPLAIN[DP]["concepts"])
    assert grade.misconceptions == () and grade.passed, grade.concepts


def test_generic_words_alone_earn_no_concept() -> None:
    off_topic = (
        "The dataset needs labels, and you should check that a validation split is available before you "
        "start training so you can measure accuracy on the data."
    )
    assert _grade(PREP, off_topic)[0] == 0
    # Two distinct weak keywords together do count (half each), but not when both are common words
    # alone: a specific word must match too (issue 28).
    concepts = [{"name": "n", "keywords": ["labels.to"], "weak": ["labels", "each batch", "non_blocking"]}]
    assert grade_explanation("the labels of each batch", concepts).covered == 0
    assert grade_explanation("the labels, non_blocking", concepts).covered == 1
    assert grade_explanation("the labels", concepts).covered == 0


def test_plain_words_and_typos_count() -> None:
    plain = (
        "DataParallel cuts each batch into pieces, one per GPU, and puts a copy of the model on every GPU. "
        "All the GPUs then work on their piece at the same time. The results come back to the first GPU and "
        "the gradients from every copy are added up into the original model."
    )
    assert _grade(DP, plain)[0] == 5
    typos = (
        "It splits the batch and makes a replcia on each GPU; they run in paralel, outputs gatherd on cuda:0."
    )
    assert _grade(DP, typos)[0] == 4
    # A five-letter word is corrected only by a swap of neighbours: "state" is not a typo of "stage".
    concepts = [{"name": "stage", "keywords": ["stage"]}, {"name": "shard", "keywords": ["shard"]}]
    assert [c.covered for c in grade_explanation("the optimizer state; shrad it", concepts).concepts] == [
        False,
        True,
    ]


def test_a_keyword_salad_covers_nothing_but_code_is_not_a_salad() -> None:
    salad = "scatter replicate parallel gather gradients cuda:0 backward"
    grade = grade_explanation(salad, EXPLAIN[DP]["concepts"])
    assert is_salad(salad) and grade.covered == 0 and grade.note and "lists keywords" in grade.note
    code = "n = torch.cuda.device_count(); model = model.to('cuda:0'); model = nn.DataParallel(model)"
    assert not is_salad(code)


def test_combined_keywords_need_every_part_in_one_clause() -> None:
    concepts = [{"name": "move the batch", "keywords": ["move|send + batch|labels + gpu"]}]
    assert grade_explanation("Send every batch to the GPU.", concepts).covered == 1
    assert grade_explanation("Send the model to the GPU. Each batch is small.", concepts).covered == 0
    assert grade_explanation("Never send the batch to the GPU.", concepts).covered == 0


def test_every_top_level_topic_has_an_active_explain_prompt() -> None:
    active = {s["topic"] for s in EXPLAIN.values() if not s.get("retired")}
    assert set(TOPICS) <= active, sorted(set(TOPICS) - active)


def test_malformed_keywords_and_misconceptions_are_refused_with_the_fix() -> None:
    with pytest.raises(ValidationError, match="empty part"):
        ConceptSpec(name="n", keywords=["scatter| + gpu"])
    with pytest.raises(ValidationError, match="correction"):
        ConceptSpec.model_validate(
            {"name": "n", "keywords": ["k"], "misconceptions": [{"claim": "c", "patterns": ["p"]}]}
        )


# ---------------------------------------------------------------------- the answer tables
DATA = Path(__file__).resolve().parents[2] / "data"
#: Answers of the tuned table that the grader still grades unlike the human, with why (keep it honest:
#: the test fails when one of these is fixed or a new one appears).
KNOWN_DISAGREEMENTS = {
    ("s004-explain-dp-pros-cons", 8),  # "eazy": a 4-letter typo is below the typo corrector's reach
    ("explain-ddp-replicas-in-sync", 17),  # a comma list with "per" reads as prose (glue share 0.1)
}


def _table(name: str) -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = yaml.safe_load((DATA / name).read_text())
    return data


def _verdicts(table: dict[str, list[dict[str, Any]]]) -> list[tuple[str, int, bool, bool]]:
    return [
        (qid, n, grade_explanation(a["t"], EXPLAIN[qid]["concepts"]).passed, bool(a["pass"]))
        for qid, answers in table.items()
        for n, a in enumerate(answers)
    ]


def test_the_table_has_at_least_20_answers_of_every_kind_per_active_prompt() -> None:
    table = _table("explain_answers.yaml")
    active = {qid for qid, s in EXPLAIN.items() if not s.get("retired")}
    assert set(table) == active
    for qid, answers in table.items():
        assert len(answers) >= 20, qid
        kinds = {a["k"] for a in answers}
        assert {"plain", "jargon", "misconception", "off_topic", "empty", "salad", "partial"} <= kinds, qid
        assert all(set(a["c"]) <= set(range(len(EXPLAIN[qid]["concepts"]))) for a in answers), qid


def test_each_answer_of_the_table_gets_the_human_verdict() -> None:
    wrong = {(qid, n) for qid, n, got, want in _verdicts(_table("explain_answers.yaml")) if got != want}
    assert wrong == KNOWN_DISAGREEMENTS


@pytest.mark.parametrize(
    "name", ["explain_answers.yaml", "explain_holdout.yaml", "explain_tuning.yaml", "explain_heldout.yaml"]
)
def test_precision_and_recall_on_correct_and_wrong_answers(name: str) -> None:
    verdicts = _verdicts(_table(name))
    tp = sum(got and want for *_, got, want in verdicts)
    fp = sum(got and not want for *_, got, want in verdicts)
    fn = sum(want and not got for *_, got, want in verdicts)
    tn = sum(not got and not want for *_, got, want in verdicts)
    figures = {
        "pass precision": tp / (tp + fp),
        "pass recall": tp / (tp + fn),
        "fail precision": tn / (tn + fn),
        "fail recall": tn / (tn + fp),
    }
    assert all(v >= 0.9 for v in figures.values()), figures
    assert not math.isnan(sum(figures.values()))
