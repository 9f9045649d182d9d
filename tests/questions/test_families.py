"""Question families: sandboxed templates, expansion, assembly, formulas against known values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from questions import formulas
from questions.families import (
    FamilySpec,
    InstanceError,
    TemplateError,
    assemble,
    computed_answer,
    evaluate,
    expand,
    load_families,
    load_family_text,
    render,
)
from questions.loader import BankValidationError
from questions.rules import Answer
from questions.schema import QuestionSpec


def family(**over: Any) -> FamilySpec:
    base: dict[str, Any] = {
        "id": "fam-test",
        "kind": "metrics",
        "topic": "Scaling & batch size",
        "difficulty": "intermediate",
        "params": {"per_gpu": [8, 16], "world_size": [2, 4, 8]},
        "prompt": "Per-GPU batch {{ per_gpu }} on {{ world_size }} GPUs: global batch?",
        "hint": "Multiply per-GPU batch by the ranks.",
        "value": "effective_batch(per_gpu, world_size)",
        "distractors": [
            {"rule": "scale", "factor": "1 / world_size", "feedback": "That is the per-GPU batch."},
            {"rule": "formula", "expr": "per_gpu * world_size * 2"},
            {"rule": "offset", "delta": "world_size"},
        ],
    }
    base.update(over)
    return FamilySpec.model_validate(base)


# ------------------------------------------------------------------------------ formulas: known values
# ZeRO paper (Rajbhandari et al. 2020), Figure 1: 7.5B parameters, 64 GPUs, K = 12 (mixed-precision Adam).
ZERO_TABLE = [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)]


@pytest.mark.parametrize(("stage", "gb"), ZERO_TABLE)
def test_zero_memory_matches_the_paper(stage: int, gb: float) -> None:
    assert formulas.zero_memory_gb(7.5, stage, 64) == pytest.approx(gb, abs=0.05)


@pytest.mark.parametrize(
    ("fn", "args", "want"),
    [
        (formulas.ring_allreduce_bytes, (1000.0, 4), 1500.0),  # 2 (n-1)/n x size
        (formulas.ring_allreduce_bytes, (1.0, 2), 1.0),
        (formulas.ring_allgather_bytes, (800.0, 8), 700.0),
        (formulas.pipeline_bubble_fraction, (4, 4), 3 / 7),  # GPipe: (p-1)/(m+p-1)
        (formulas.pipeline_bubble_fraction, (8, 32), 7 / 39),
        (formulas.interleaved_bubble_fraction, (4, 4, 1), 3 / 7),  # one chunk = plain 1F1B
        (formulas.interleaved_bubble_fraction, (4, 8, 2), 1.5 / 9.5),
        (formulas.scaling_efficiency, (100.0, 16.0, 8), 0.78125),
        (formulas.speedup, (100.0, 30.0), 10 / 3),
        (formulas.effective_batch, (32, 8, 4), 1024),
        (formulas.linear_scaled_lr, (0.1, 256, 8192), 3.2),  # Goyal et al. 2017: 0.1 x k for kn=8k
        (formulas.sqrt_scaled_lr, (1e-3, 256, 1024), 2e-3),
        (formulas.samples_per_rank, (10, 4), 3),  # DistributedSampler pads 10 -> 12
        (formulas.samples_per_rank, (10, 4, True), 2),
        (formulas.steps_per_epoch, (1000, 8, 32), 4),
        (formulas.amdahl_speedup, (0.95, 8), 1 / (0.05 + 0.95 / 8)),
        (formulas.weak_scaling_efficiency, (100.0, 720.0, 8), 0.9),
        # PaLM 540B (Chowdhery et al. 2022, table 3): 238.3K tokens/s on 6144 TPU v4 chips (275 TFLOP/s)
        # is 46.2 % MFU counting attention; the 6N term alone is 45.7 %.
        (formulas.model_flops_utilization, (540e9, 238.3e3, 6144, 275.0), 0.457),
        (formulas.accumulation_steps, (1024, 16, 8), 8),
        (formulas.checkpoint_gb, (7.0, 2, False), 14.0),
        # Korthikanti et al. 2022, table 2 terms for GPT-3 175B (s=2048, h=12288, a=96, b=1): 34sbh + 5as^2b
        (
            formulas.activation_bytes_per_layer,
            (2048, 1, 12288, 96),
            2048 * 12288 * (34 + 5 * 96 * 2048 / 12288),
        ),
        (formulas.activation_bytes_per_layer, (2048, 1, 12288, 96, 8, True), 2048 * 12288 / 8 * (34 + 80)),
        (formulas.activation_bytes_per_layer, (2048, 1, 12288, 96, 8), 2048 * 12288 * (10 + 3 + 10)),
        (formulas.allreduce_seconds, (10.0, 8, 100.0), 0.175),
        (formulas.checkpoint_gb, (7.0, 4, True), 84.0),
    ],
)
def test_formulas_against_known_values(fn: Any, args: tuple[Any, ...], want: float) -> None:
    assert fn(*args) == pytest.approx(want, rel=1e-3)


@pytest.mark.parametrize(("n", "parts"), [(7, 3), (10, 4), (5, 4), (8, 2), (1, 3), (13, 5)])
def test_chunk_sizes_match_torch_chunk(n: int, parts: int) -> None:
    torch = pytest.importorskip("torch")
    assert formulas.chunk_sizes(n, parts) == [len(c) for c in torch.arange(n).chunk(parts)]


def test_zero_stage_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="stage"):
        formulas.zero_memory_bytes(1e9, 4, 8)


# -------------------------------------------------------------------------------- sandboxed templates
@pytest.mark.parametrize(
    "expr",
    [
        "().__class__.__bases__[0].__subclasses__()",
        "''.__class__.__mro__",
        "lipsum.__globals__",
        "range.__init__.__globals__",
    ],
)
def test_expressions_cannot_reach_python_internals(expr: str) -> None:
    with pytest.raises(TemplateError):
        evaluate(expr, {})


def test_a_misspelt_name_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(TemplateError, match="world_sise"):
        render("{{ world_sise }}", {"world_size": 2})


def test_constraints_filter_instances_and_ids_are_stable() -> None:
    fam = family(constraints="per_gpu * world_size <= 64")
    ids = [i.id for i in expand(fam)]
    assert ids == [
        "fam-test/per_gpu=8,world_size=2",
        "fam-test/per_gpu=8,world_size=4",
        "fam-test/per_gpu=8,world_size=8",
        "fam-test/per_gpu=16,world_size=2",
        "fam-test/per_gpu=16,world_size=4",
    ]
    for iid in ids:
        QuestionSpec.model_validate(
            {
                "id": iid,
                "kind": "flashcard",
                "topic": "Collectives",
                "difficulty": "beginner",
                "front": "f",
                "back": "b",
            }
        )


def test_ranges_and_let_values() -> None:
    fam = family(
        params={"world_size": {"range": [2, 9, 2]}},
        let={"per_gpu": "64 // world_size"},
        value="effective_batch(per_gpu, world_size)",
    )
    insts = expand(fam)
    assert [i.params["world_size"] for i in insts] == [2, 4, 6, 8]
    assert [i.context["per_gpu"] for i in insts] == [32, 16, 10, 8]


def test_every_instance_has_exactly_one_correct_choice_and_no_distractor_equals_it() -> None:
    for inst in expand(family()):
        spec = assemble(inst, computed_answer(inst)).spec
        q = QuestionSpec.model_validate(spec)
        assert q.choices is not None
        correct = [c.text for c in q.choices if c.correct]
        per_gpu, world_size = inst.params["per_gpu"], inst.params["world_size"]
        assert isinstance(per_gpu, int | float) and isinstance(world_size, int | float)
        assert correct == [str(per_gpu * world_size)]
        assert len({c.text for c in q.choices}) == len(q.choices)


def test_a_rule_that_would_repeat_the_answer_is_dropped_and_too_few_choices_fail() -> None:
    # With world_size 1 the "off by world size" rule predicts the truth: it must not become a choice.
    fam = family(params={"per_gpu": [8], "world_size": [1]}, min_choices=4)
    (inst,) = expand(fam)
    with pytest.raises(InstanceError, match="only 3 distinct choices"):
        assemble(inst, computed_answer(inst))
    ok = assemble(inst, computed_answer(inst)) if False else None  # noqa: F841 - documented below
    fam3 = family(params={"per_gpu": [8], "world_size": [1]})
    (inst3,) = expand(fam3)
    spec = assemble(inst3, computed_answer(inst3))
    assert any("scale" in d for d in spec.dropped)
    assert [c["text"] for c in spec.spec["choices"] if c.get("correct")] == ["8"]


def test_correct_letter_varies_between_instances_but_not_between_builds() -> None:
    insts = expand(family())
    letters = []
    for inst in insts:
        a = assemble(inst, computed_answer(inst)).spec
        b = assemble(inst, computed_answer(inst)).spec
        assert a == b
        letters.append(next(i for i, c in enumerate(a["choices"]) if c.get("correct")))
    assert len(set(letters)) > 1


def test_family_file_errors_name_file_line_and_field() -> None:
    text = yaml.safe_dump(
        {
            "families": [
                {**family().model_dump(mode="json", exclude_none=True), "distractors": [{"rule": "nope"}]}
            ]
        }
    )
    with pytest.raises(BankValidationError) as exc:
        load_family_text(text, "fam.yaml")
    err = exc.value.errors[0]
    assert err.file == "fam.yaml" and err.line > 1 and "no distractor rule named 'nope'" in err.message


def test_predict_output_family_needs_a_runner() -> None:
    with pytest.raises(ValueError, match="runner"):
        family(kind="predict_output", code="print(1)", value=None, answer=None)


def test_rank_lines_render_back_as_python_prints_them() -> None:
    # A rule that re-renders a value must print it exactly as the snippet did, or the distractor gives
    # itself away (a list of strings loses its quotes).
    for line in ("['module.weight', 'module.bias']", "[1, 2.5]", "(3,)", "[[2, 6], [2]]", "7", "2.5"):
        a = Answer.from_output(f"rank 0: {line}\nrank 1: {line}\n")
        assert a.ranks is not None
        assert a.render_ranks(a.ranks) == f"rank 0: {line}\nrank 1: {line}"


def test_rank_output_answers_parse() -> None:
    a = Answer.from_output("rank 0: 3\nrank 1: [1.5, 2.0]\n", "g")
    assert a.ranks == ((0, 3), (1, [1.5, 2.0]))
    assert math.isclose(formulas.pipeline_bubble_fraction(2, 1), 0.5)


def test_validating_the_questions_folder_checks_family_files_too(tmp_path: Path) -> None:
    from questions.loader import load_paths

    (tmp_path / "families").mkdir()
    good = {"families": [family().model_dump(mode="json", exclude_none=True)]}
    (tmp_path / "families" / "f.yaml").write_text(yaml.safe_dump(good))
    (tmp_path / "bank.yaml").write_text(yaml.safe_dump({"questions": []}))
    assert load_paths([tmp_path]) == []  # a family file is valid and holds no questions itself
    bad = {"families": [{**family().model_dump(mode="json", exclude_none=True), "kind": "flashcard"}]}
    (tmp_path / "families" / "f.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(BankValidationError) as exc:
        load_paths([tmp_path])
    assert "families are multiple choice" in str(exc.value)


def test_a_family_file_that_is_not_utf8_is_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b'families:\n  - id: fam-x\n    prompt: "caf\xe9"\n')
    with pytest.raises(BankValidationError) as caught:
        load_families([bad])
    assert [e.line for e in caught.value.errors] == [3] and "not UTF-8" in str(caught.value.errors[0])


def test_a_family_id_used_twice_names_both_places(tmp_path: Path) -> None:
    good = yaml.safe_dump({"families": [family().model_dump(mode="json", exclude_none=True)]})
    (tmp_path / "again.yaml").write_text(good)
    (tmp_path / "ok.yaml").write_text(good)
    with pytest.raises(BankValidationError) as caught:
        load_families([tmp_path])
    [error] = caught.value.errors  # files load in name order: again.yaml is the first
    assert error.file.endswith("ok.yaml")
    assert f"duplicate family id (first at {tmp_path}/again.yaml:" in str(error)
