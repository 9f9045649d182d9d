"""The model-choice families' derivations: they agree with the shipped keys and refuse a scenario whose
numbers no longer support its keyed option."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from questions import crosschecks_choice
from questions.answer_key import cross_check_problems
from questions.build import checked_spec
from questions.families import (
    Instance,
    InstanceError,
    computed_answer,
    default_families_dir,
    expand,
    load_families,
)

CHOICE_FAMILIES = (
    "fam-mc-fsdp-variant",
    "fam-mc-act-checkpoint",
    "fam-mc-parallel-layout",
    "fam-mc-lr-rule",
    "fam-mc-pipeline-schedule",
)


def _instances(family_id: str) -> list[tuple[Instance, dict[str, Any]]]:
    fam = next(f.spec for f in load_families([default_families_dir()]) if f.spec.id == family_id)
    out = []
    for inst in expand(fam):
        spec, crossed = checked_spec(inst, computed_answer(inst))
        assert crossed, inst.id  # the derivation ran and agreed
        out.append((inst, spec))
    return out


@pytest.mark.parametrize("family_id", CHOICE_FAMILIES)
def test_every_case_is_cross_checked(family_id: str) -> None:
    assert _instances(family_id)


def _refusal(family_id: str, case: str) -> str:
    """The build's refusal of ``case`` (checked_spec runs the derivation, as `questions build` does)."""
    fam = next(f.spec for f in load_families([default_families_dir()]) if f.spec.id == family_id)
    inst = next(i for i in expand(fam) if i.params["case"] == case)
    with pytest.raises(InstanceError) as info:
        checked_spec(inst, computed_answer(inst))
    return str(info.value)


def test_a_scenario_that_fits_without_checkpointing_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # If the "partial" job fitted in 80 GB as it is, "a few of the blocks" would be the wrong key.
    cases = dict(crosschecks_choice._CKPT_CASES)
    cases["partial"] = dataclasses.replace(cases["partial"], total_gb=75)
    monkeypatch.setattr(crosschecks_choice, "_CKPT_CASES", cases)
    assert "gives 'no activation checkpointing'" in _refusal("fam-mc-act-checkpoint", "partial")


def test_a_model_that_fits_one_node_sharded_is_refused_as_a_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 30B model on slow links fits HSDP in a node (30 x 16 / 8 = 60 GB): pipeline stages are not the key.
    cases = dict(crosschecks_choice._LAYOUT_CASES)
    cases["pp"] = dataclasses.replace(cases["pp"], params_b=30)
    monkeypatch.setattr(crosschecks_choice, "_LAYOUT_CASES", cases)
    assert "gives 'HSDP: shard within each node" in _refusal("fam-mc-parallel-layout", "pp")


def test_a_wrong_key_is_refused_by_every_choice_derivation() -> None:
    for family_id in CHOICE_FAMILIES:
        for inst, spec in _instances(family_id):
            wrong = next(i for i, c in enumerate(spec["choices"]) if not c.get("correct"))
            rekeyed = [{"text": c["text"], "correct": i == wrong} for i, c in enumerate(spec["choices"])]
            assert cross_check_problems(family_id, inst.context, rekeyed, None, ""), inst.id


def test_the_lr_rule_prints_the_rate_the_option_states() -> None:
    assert crosschecks_choice._lr_text(0.1 * 32) == "3.2"
    assert crosschecks_choice._lr_text(2e-5 * 2) == "4e-5"
