"""Bank validation that reports everything wrong at once, and explain prompts whose model answer its own
grader would refuse; with the grader rule that the words of a stated misconception earn no concept.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.commands.questions import QuestionInvalid, validate_question
from bot.core.grading import grade_explanation, model_answer_problems
from questions.loader import FIELD_CAPS, MAX_ERRORS_PER_FILE, BankValidationError, validate_text
from tests.cli import rankzero
from tests.shipped import shipped_specs

#: An explain prompt in the bank's own form; the tests swap in a model answer.
EXPLAIN = """questions:
  - id: explain-dp-basics
    kind: explain
    topic: DataParallel
    difficulty: beginner
    prompt: How does DataParallel use several GPUs?
    hint: Where does the batch go?
    concepts:
      - name: The batch is split across the GPUs
        keywords: ["split|scatter + batch"]
      - name: The model is copied to every GPU
        keywords: ["copy|replicate + model"]
      - name: Gradients are summed into the original model
        keywords: ["sum|add + gradient"]
        misconceptions:
          - claim: the gradients must be synchronised by hand
            correction: backward sums every replica's gradients into the original model
            patterns: ["manually|yourself + gradient"]
    model_answer: {answer}
"""
GOOD_ANSWER = (
    "It splits the batch across the GPUs, copies the model to each of them, and backward sums the "
    "gradients into the original model."
)


def _errors(text: str, file: str = "bank.yaml") -> list[str]:
    with pytest.raises(BankValidationError) as info:
        validate_text(text, file)
    return [str(e) for e in info.value.errors]


# ------------------------------------------------------------------ 1. the model answer is graded
def test_a_model_answer_that_earns_every_concept_is_accepted() -> None:
    [q] = validate_text(EXPLAIN.format(answer=GOOD_ANSWER), "bank.yaml")
    assert q.spec.id == "explain-dp-basics"


def test_a_model_answer_that_misses_a_concept_is_refused_with_the_concept_and_the_fix() -> None:
    answer = "It splits the batch across the GPUs and copies the model to each of them."
    [error] = _errors(EXPLAIN.format(answer=answer))
    # file:line of model_answer, the question id, the concept by index and name, and how to fix it.
    assert error.startswith("bank.yaml:19: questions[0] (explain-dp-basics).model_answer: ")
    assert "concepts[2] ('Gradients are summed into the original model') is not covered" in error
    assert "'sum|add + gradient'" in error and "add the model answer's own wording" in error


def test_a_model_answer_that_states_its_own_misconception_is_refused_with_the_claim() -> None:
    answer = GOOD_ANSWER + " You must also synchronize the gradients yourself."
    [error] = _errors(EXPLAIN.format(answer=answer))
    assert "(explain-dp-basics).model_answer: " in error
    assert "concepts[2] ('Gradients are summed into the original model')" in error
    assert "asserts its misconception 'the gradients must be synchronised by hand'" in error
    assert "pattern 'manually|yourself + gradient' matches" in error and "reword that clause" in error


def test_a_model_answer_under_the_pass_share_or_a_keyword_list_is_refused() -> None:
    # 2 of 3 concepts would pass a player (60%), but the exemplar must cover them all.
    errors = _errors(EXPLAIN.format(answer="It copies the model to every GPU."))
    assert len(errors) == 2 and all("model_answer" in e for e in errors)
    [salad] = _errors(EXPLAIN.format(answer="split batch, replicate model, sum gradients"))
    assert "keyword list" in salad and "write the model answer in sentences" in salad


def test_a_prompt_added_from_chat_is_graded_the_same_way() -> None:
    spec = yaml.safe_load(EXPLAIN.format(answer="It copies the model to every GPU."))["questions"][0]
    with pytest.raises(QuestionInvalid) as info:
        validate_question(spec)
    assert any("concepts[0] ('The batch is split across the GPUs')" in line for line in info.value.lines())


def test_every_shipped_explain_prompt_earns_full_marks_from_its_own_model_answer() -> None:
    explain = [s for s in shipped_specs() if s["kind"] == "explain"]
    assert len(explain) >= 14
    for spec in explain:
        assert model_answer_problems(spec["model_answer"], spec["concepts"]) == [], spec["id"]


def test_the_cli_refuses_the_file_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "explain.yaml"
    bad.write_text(EXPLAIN.format(answer="It copies the model to every GPU."))
    done = rankzero("questions", "validate", str(bad))
    assert done.returncode == 1, done.stderr
    assert f"{bad}:19: questions[0] (explain-dp-basics).model_answer: " in done.stderr
    assert "2 error(s); fix them and validate again" in done.stderr


# ------------------------------------------------------------------ 2. every error of a file, bounded
MC = """  - id: {qid}
    kind: conceptual
    topic: {topic}
    difficulty: beginner
    prompt: {prompt}
    choices:
      - text: it does
        correct: {first}
      - text: it does
        correct: true
"""


def test_a_field_over_its_limit_does_not_hide_the_other_errors_of_the_file() -> None:
    long = "x" * (FIELD_CAPS["prompt"] + 1)
    text = "questions:\n" + MC.format(qid="q-long", topic="DDP", prompt=long, first="false")
    text += MC.format(qid="q-topic", topic="Nope", prompt="Why?", first="false")
    text += MC.format(qid="q-choices", topic="DDP", prompt="Why?", first="true")
    errors = _errors(text)
    assert errors[0] == (
        f"bank.yaml:6: questions[0] (q-long).prompt: {len(long)} characters, over the limit of "
        f"{FIELD_CAPS['prompt']}; shorten it"
    )
    assert any(
        e.startswith("bank.yaml:14: questions[1] (q-topic).topic: 'Nope' is not a topic") for e in errors
    )
    # Both choice problems of the third question, each on its own line with its fix.
    choices = [e for e in errors if e.startswith("bank.yaml:27: questions[2] (q-choices).choices:")]
    assert len(choices) == 2, errors
    assert "mark exactly one as correct" in choices[0] and "render the same text" in choices[1]
    # The long prompt's own question is checked too (its cut copy): its repeated choice is reported.
    assert any("questions[0] (q-long).choices: 'choices' A and B render the same" in e for e in errors)
    assert len(errors) == 5, errors


def test_a_long_field_adds_no_error_about_its_cut_text() -> None:
    answer = GOOD_ANSWER + " " + "And so on. " * 500
    assert len(answer) > FIELD_CAPS["model_answer"]
    text = EXPLAIN.format(answer=answer).replace("topic: DataParallel", "topic: Nope")
    errors = _errors(text)
    assert len(errors) == 2, errors
    assert "(explain-dp-basics).topic: 'Nope' is not a topic" in errors[0]
    assert "(explain-dp-basics).model_answer: " in errors[1] and "over the limit" in errors[1]


def test_the_errors_of_one_file_are_bounded_and_the_rest_counted() -> None:
    text = "questions:\n" + "".join(
        MC.format(qid=f"q-{i:03}", topic="Nope", prompt="Why?", first="false") for i in range(100)
    )
    errors = _errors(text)
    assert len(errors) == MAX_ERRORS_PER_FILE + 1
    assert errors[-1].endswith(
        "(file): 50 more error(s) after this line, not listed; fix the ones above and validate again"
    )


# ------------------------------------------------------------------ 3. a stated claim earns nothing
DDP = next(s for s in shipped_specs() if s["id"] == "explain-ddp-replicas-in-sync")


def test_the_words_of_a_stated_misconception_earn_no_other_concept() -> None:
    answer = (
        "DDP all-reduces the gradients during backward. Then rank 0 runs the optimizer step and "
        "broadcasts the new weights to the other processes."
    )
    start, grads, step = grade_explanation(answer, DDP["concepts"]).concepts
    # "broadcasts ... weights" is a keyword of the first concept, but here it states the third one's
    # misconception (rank 0 updates and broadcasts every step): it earns nothing.
    assert not start.covered and start.matched is None
    assert grads.covered and step.misconception and not step.covered


def test_the_claimed_words_are_set_aside_whatever_the_order_of_the_concepts() -> None:
    answer = "You must all-reduce the gradients yourself after backward, and every rank updates the same way."
    forward = grade_explanation(answer, DDP["concepts"])
    backward = grade_explanation(answer, list(reversed(DDP["concepts"])))
    assert [c.covered for c in forward.concepts] == [c.covered for c in reversed(backward.concepts)]
    assert forward.concepts[1].misconception and not forward.concepts[1].covered


def test_the_same_words_outside_the_claim_still_count() -> None:
    answer = (
        "At the start rank 0 broadcasts its weights to every process. Rank 0 then runs the optimizer "
        "step and broadcasts the new weights to the others."
    )
    start, _, step = grade_explanation(answer, DDP["concepts"]).concepts
    assert start.covered and step.misconception
