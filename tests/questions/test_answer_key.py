"""Every answer right: the build refuses a bad answer key, and computed families are derived twice.

Bad families and questions go through the real build (computed families need no runner) and the real
bank loader; the shipped bank must pass the same checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from questions.answer_key import cross_check_problems, key_problems, rendered
from questions.build import build, checked_spec
from questions.crosschecks import CROSS_CHECKS
from questions.families import (
    computed_answer,
    default_families_dir,
    expand,
    load_families,
)
from questions.loader import BankValidationError, validate_text
from tests.shipped import shipped_questions

SAME_RENDERING = """
families:
  - id: fam-demo-dtype
    kind: conceptual
    topic: Mixed precision
    difficulty: intermediate
    params:
      op: [softmax]
    answer: "torch.float16"
    prompt: "Under autocast, what dtype does {{ op }} give?"
    hint: Look at the op lists.
    distractors:
      - text: "torch.float32"
      - text: "`torch.float32`"
      - text: "torch.bfloat16"
"""

# fam-elastic-keep-batch as it once shipped: the per-GPU batch divided out twice.
OLD_ELASTIC = """
families:
  - id: fam-elastic-keep-batch
    kind: hyperparameter
    topic: Launch & elastic
    difficulty: advanced
    params:
      before: [64]
      after: [16]
      per_gpu: [8]
    value: "before * 4 // (after * per_gpu)"
    prompt: "{{ before }} GPUs, 4 accumulation steps, now {{ after }} GPUs: how many steps?"
    hint: Keep the global batch.
    distractors:
      - rule: formula
        expr: "4"
      - rule: formula
        expr: "1"
{extra}
"""


async def _build(tmp_path: Path, text: str) -> list[str]:
    fams = tmp_path / "families"
    fams.mkdir()
    (fams / "demo.yaml").write_text(text)
    report = await build([fams], tmp_path / "generated", None)
    return report.errors


async def test_choices_that_render_the_same_are_refused_with_the_instance_and_the_fix(
    tmp_path: Path,
) -> None:
    errors = await _build(tmp_path, SAME_RENDERING)
    assert len(errors) == 1, errors
    (err,) = errors
    assert "fam-demo-dtype/op=softmax" in err
    assert "render the same text ('torch.float32')" in err
    assert "drop one, or word them so a player can tell them apart" in err
    # Nothing was written for the refused instance.
    assert "fam-demo-dtype" not in (tmp_path / "generated" / "demo.yaml").read_text().split("questions:")[1]


async def test_a_keyed_answer_the_independent_check_does_not_find_among_the_choices_is_refused(
    tmp_path: Path,
) -> None:
    errors = await _build(tmp_path, OLD_ELASTIC.format(extra=""))
    assert len(errors) == 1, errors
    (err,) = errors
    assert "fam-elastic-keep-batch/before=64,after=16,per_gpu=8" in err
    assert "the independent check (add accumulation steps" in err
    assert "gives '16', which is not among the choices ('" in err
    assert "the family keys '2'" in err
    assert "fix the family's value formula" in err


async def test_an_independent_answer_offered_as_a_distractor_is_named(tmp_path: Path) -> None:
    extra = '      - rule: formula\n        expr: "before * 4 // after"'
    errors = await _build(tmp_path, OLD_ELASTIC.format(extra=extra))
    assert len(errors) == 1, errors
    assert "gives '16', which is choice " in errors[0] and ", not the keyed " in errors[0]


def test_only_paired_markup_is_dropped_when_choices_are_compared() -> None:
    assert rendered("`torch.float32`") == rendered("torch.float32") == rendered("**torch.float32**")
    assert rendered("2**3") != rendered("23")  # Python's power, not emphasis
    assert rendered("a * b") != rendered("a b") and rendered("a*b") != rendered("ab")
    assert key_problems([{"text": "2**3", "correct": True}, {"text": "23"}]) == []


def test_a_cross_check_that_cannot_run_is_a_problem_of_its_family_not_a_crash() -> None:
    family_id = next(iter(CROSS_CHECKS))
    choices: list[dict[str, object]] = [{"text": "1", "correct": True}, {"text": "2"}]
    (problem,) = cross_check_problems(family_id, {}, choices, None, "") or ["no problem reported"]
    assert "its cross-check could not run" in problem


def test_key_problems_name_each_fault() -> None:
    ok: list[dict[str, object]] = [{"text": "1", "correct": True}, {"text": "2"}, {"text": "3"}]
    assert key_problems(ok) == []
    assert key_problems(ok, key=0, answer="1") == []

    (out_of_range,) = key_problems(ok, key=3)
    assert "the key index 3 is out of range: there are 3 choices (A-C)" in out_of_range
    assert key_problems(ok, key=-1)[0].startswith("the key index -1 is out of range")

    (none,) = key_problems([{"text": "1"}, {"text": "2"}])
    assert "0 choices are keyed correct (none): mark exactly one" in none
    (two,) = key_problems([{"text": "1", "correct": True}, {"text": "2", "correct": True}])
    assert "2 choices are keyed correct (A, B)" in two
    (disagree,) = key_problems(ok, key=1)
    assert "the key is B but the choices mark A correct" in disagree

    (missing,) = key_problems(ok, answer="16")
    assert "the keyed answer '16' is not among the choices ('1', '2', '3')" in missing
    (elsewhere,) = key_problems(ok, answer="3")
    assert "the answer '3' is choice C, but A ('1') is keyed correct" in elsewhere

    spaced: list[dict[str, object]] = [
        {"text": "rank 0: 1\nrank 1:  1", "correct": True},
        {"text": "rank 0: 1 rank 1: 1"},
    ]
    (same,) = key_problems(spaced)
    assert "choices A and B render the same text ('rank 0: 1 rank 1: 1')" in same
    assert rendered("**`torch.float32`**") == "torch.float32"
    assert rendered("weights_only") == "weights_only"  # identifiers keep their underscores


def test_a_hand_written_question_with_choices_that_render_the_same_is_refused() -> None:
    text = """
questions:
  - id: demo-dtype
    kind: conceptual
    topic: Mixed precision
    difficulty: intermediate
    prompt: What dtype?
    hint: Op lists.
    choices:
      - text: torch.float16
        correct: true
      - text: "`torch.float32`"
      - text: torch.float32
"""
    with pytest.raises(BankValidationError) as info:
        validate_text(text, "demo.yaml")
    messages = " ".join(str(e) for e in info.value.errors)
    assert "'choices' B and C render the same text ('torch.float32')" in messages


def test_every_cross_check_belongs_to_a_shipped_computed_family() -> None:
    computed = {f.spec.id for f in load_families([default_families_dir()]) if not f.spec.runs}
    assert set(CROSS_CHECKS) <= computed, set(CROSS_CHECKS) - computed


def test_the_shipped_bank_passes_every_answer_key_check() -> None:
    """Every shipped question has a sound key, and every computed instance passes its cross-check."""
    for q in shipped_questions():  # load_paths([default_bank_dir()]), loaded once per session
        if q.spec.choices:
            choices = [c.model_dump() for c in q.spec.choices]
            assert key_problems(choices) == [], q.spec.id
    instances = cross_checked = 0
    for fam in load_families([default_families_dir()]):
        if fam.spec.runs:
            continue
        for inst in expand(fam.spec):
            _spec, crossed = checked_spec(inst, computed_answer(inst))  # raises on a refused key
            instances += 1
            cross_checked += crossed
    assert instances >= 1189
    # Every registered derivation ran on all its family's instances (865 of 1,196 when written).
    assert cross_checked >= 865, cross_checked


def test_every_cross_check_tells_the_answer_from_every_distractor() -> None:
    """Key a wrong choice of each cross-checked instance: the derivation must refuse it (it can fail)."""
    families = {f.spec.id: f.spec for f in load_families([default_families_dir()])}
    refused = 0
    for family_id in CROSS_CHECKS:
        fam = families[family_id]
        for inst in expand(fam):
            spec, _ = checked_spec(inst, computed_answer(inst))
            for wrong in range(len(spec["choices"])):
                if spec["choices"][wrong].get("correct"):
                    continue
                rekeyed = [{"text": c["text"], "correct": i == wrong} for i, c in enumerate(spec["choices"])]
                problems = cross_check_problems(family_id, inst.context, rekeyed, fam.answer_format, fam.unit)
                assert problems, (inst.id, rekeyed)
                assert "the independent check (" in problems[0] and ", which is choice " in problems[0]
                refused += 1
    assert refused > 1000
