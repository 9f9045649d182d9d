"""Experiences (issue 27 §1): what a player must reason about is counted and rotated, not question ids.

A family declares its ``concept`` and the ``reasoning`` parameters that change what a player thinks about;
each combination of their values is one experience, and near-duplicates anywhere in the bank share a
concept. The daily picker keeps an experience away for 120 days while fresh ones exist and mixes styles.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from bot.core import scoring
from bot.core.models import QuestionCandidate
from bot.core.service import QuizService
from questions.families import TemplateError, assemble, computed_answer, expand, load_family_text
from questions.loader import LoadedQuestion
from questions.reading import BankValidationError
from questions.schema import QuestionSpec
from questions.stats import bank_stats, replay_weekdays
from tests.conftest import ADMIN, CHANNEL, make_spec

RANKZERO = str(Path(sys.executable).parent / "rankzero")
LEVELS = ("intermediate", "advanced", "expert")
DAY = dt.date(2027, 1, 4)  # a Monday

FAMILIES = """
families:
  - id: fam-reduce-op
    concept: allreduce-op
    reasoning: [op]
    kind: conceptual
    topic: Collectives
    difficulty: advanced
    params:
      op: [sum, avg, max]
      n: [2, 4]
    prompt: "{{ n }} ranks all-reduce with {{ op }}: what do they hold?"
    answer: "the {{ op }} over {{ n }} ranks"
    distractors:
      - text: "rank 0's value only"
      - text: "nothing"
    hint: think about the op
  - id: fam-global-batch
    concept: global-batch-product
    kind: metrics
    topic: Scaling & batch size
    difficulty: intermediate
    params:
      b: [8, 16]
      ws: [2, 4, 8]
    prompt: "Batch {{ b }} per rank on {{ ws }} ranks: the global batch?"
    value: "b * ws"
    distractors:
      - text: "{{ b }}"
      - text: "{{ b + ws }}"
    hint: multiply
"""


def _family_specs() -> list[QuestionSpec]:
    out = []
    for fam in load_family_text(FAMILIES, "f.yaml"):
        for inst in expand(fam.spec):
            out.append(QuestionSpec.model_validate(assemble(inst, computed_answer(inst)).spec))
    return out


def test_a_family_counts_one_experience_per_reasoning_combination() -> None:
    specs = _family_specs()
    keys = Counter(s.experience_key for s in specs)
    # op changes the reasoning (3 experiences of 2 instances); the batch family varies numbers only.
    assert keys == {
        "allreduce-op/op=sum": 2,
        "allreduce-op/op=avg": 2,
        "allreduce-op/op=max": 2,
        "global-batch-product": 6,
    }
    styles = {s.id.split("/")[0]: s.style for s in specs}
    assert styles == {"fam-reduce-op": "conceptual", "fam-global-batch": scoring.ARITHMETIC}


def test_a_family_refuses_an_unknown_reasoning_parameter() -> None:
    bad = FAMILIES.replace("reasoning: [op]", "reasoning: [opp]")
    with pytest.raises(Exception, match="opp"):
        load_family_text(bad, "f.yaml")


REGIME_FAMILY = """
families:
  - id: fam-lr-regime
    concept: lr-warmup-decay
    reasoning: [regime]
    kind: hyperparameter
    topic: Scaling & batch size
    difficulty: advanced
    params:
      step: [100, 900, 2000, 8000]
      warmup: [1000, 4000]
    let:
      regime: "'warmup' if step < warmup else 'decay'"
    prompt: "Step {{ step }} of a schedule with {{ warmup }} warmup steps: which phase?"
    answer: "{{ regime }}"
    distractors:
      - text: "{{ 'decay' if regime == 'warmup' else 'warmup' }}"
      - text: "constant"
    hint: compare the step with the warmup
"""


def _specs_of(text: str) -> list[QuestionSpec]:
    out = []
    for fam in load_family_text(text, "f.yaml"):
        for inst in expand(fam.spec):
            out.append(QuestionSpec.model_validate(assemble(inst, computed_answer(inst)).spec))
    return out


def test_reasoning_may_name_a_let_label_for_a_regime_from_a_comparison() -> None:
    # 8 instances, and what a player reasons about is the phase: 2 experiences, whatever the numbers.
    keys = Counter(s.experience_key for s in _specs_of(REGIME_FAMILY))
    assert keys == {"lr-warmup-decay/regime=warmup": 5, "lr-warmup-decay/regime=decay": 3}


def test_reasoning_may_combine_a_parameter_and_a_let_label() -> None:
    text = REGIME_FAMILY.replace("reasoning: [regime]", "reasoning: [warmup, regime]")
    keys = Counter(s.experience_key for s in _specs_of(text))
    assert keys["lr-warmup-decay/warmup=4000,regime=warmup"] == 3
    assert keys["lr-warmup-decay/warmup=1000,regime=decay"] == 2
    assert len(keys) == 4


def test_an_unknown_reasoning_name_says_which_family_which_name_and_how_to_fix() -> None:
    bad = REGIME_FAMILY.replace("reasoning: [regime]", "reasoning: [regim]")
    with pytest.raises(BankValidationError) as err:
        load_family_text(bad, "f.yaml")
    (error,) = err.value.errors
    assert error.file == "f.yaml" and error.line == 3  # the family's line
    assert "family fam-lr-regime" in error.message and "'regim'" in error.message
    assert "parameter (step, warmup)" in error.message and "`let` value (regime)" in error.message
    assert "reasoning: [regime]" in error.message  # the fix, spelt out


def test_a_reasoning_let_value_that_is_a_number_not_a_label_fails_the_family() -> None:
    # A fraction is arithmetic the player does, not a different regime: the family is refused, naming it.
    text = REGIME_FAMILY.replace(
        "regime: \"'warmup' if step < warmup else 'decay'\"", "regime: step / warmup"
    )
    (fam,) = load_family_text(text, "f.yaml")
    with pytest.raises(
        TemplateError, match=r"reasoning value 'regime' is 0\.1 here; a reasoning value is a label"
    ):
        expand(fam.spec)


def test_only_the_build_writes_an_experience_key() -> None:
    with pytest.raises(ValueError, match="concept"):
        QuestionSpec.model_validate({**make_spec("hand-made", "advanced", "DDP"), "experience": "x"})


def test_stats_counts_experiences_and_fresh_weekdays_on_a_known_bank() -> None:
    # 4 experiences from the families, 1 base question sharing the batch concept (a near-duplicate: no new
    # experience), and 20 base questions of 10 concepts (2 each): 4 + 10 = 14 experiences.
    base = [
        make_spec("batch-by-hand", "intermediate", "Scaling & batch size", concept="global-batch-product"),
        *[
            make_spec(f"base-{i}", LEVELS[i % 3], "DDP", concept=f"concept-{i % 10}", kind="debug")
            for i in range(20)
        ],
    ]
    loaded = [LoadedQuestion(s, "f.yaml", 1) for s in _family_specs()]
    loaded += [LoadedQuestion(QuestionSpec.model_validate(s), "b.yaml", 1) for s in base]
    stats = bank_stats(loaded, set())
    assert stats["experiences"] == 14
    # 14 experiences, 5 a day: the first 2 weekdays are new, the 3rd has only 4 unseen: a repeat.
    assert stats["fresh_weekdays"] == 2
    assert stats["style_share_weekdays"] == 260
    assert sum(stats["style_shares"].values()) == pytest.approx(1.0, abs=0.01)


def _bank(concepts: int, per_concept: int, styles: tuple[str, ...]) -> list[QuestionCandidate]:
    """``concepts`` experiences of ``per_concept`` questions each, styles and levels spread evenly."""
    out: list[QuestionCandidate] = []
    for c in range(concepts):
        style = styles[c % len(styles)]
        kind = "metrics" if style == scoring.ARITHMETIC else style
        for i in range(per_concept):
            qid = f"e{c}/n={i}"
            level = LEVELS[(c // len(styles)) % 3]
            out.append(QuestionCandidate(len(out), qid, f"t{c % 7}", level, kind, 0, None, f"x{c}", style))
    return out


def test_fresh_weekdays_skips_weekends_and_counts_until_a_repeat() -> None:
    # 60 experiences: 12 weekdays of 5 new ones, whatever the number of questions behind each.
    bank = _bank(60, 3, ("conceptual", "debug", "predict_output"))
    assert replay_weekdays(bank, share_days=20).fresh_weekdays == 12


def _serve(
    bank: list[QuestionCandidate], days: int
) -> list[tuple[dt.date, list[QuestionCandidate], set[str]]]:
    """Replay the picker for ``days`` days; each day with its picks and the experiences still fresh."""
    state = {c.question_id: c for c in bank}
    met: dict[str, dt.date] = {}
    out = []
    for offset in range(days):
        day = DAY + dt.timedelta(days=offset)
        fresh = {c.experience_key for c in bank} - {
            e for e, d in met.items() if (day - d).days < scoring.EXPERIENCE_REST_DAYS
        }
        picks = scoring.pick_problems(list(state.values()), 5, random.Random(offset), day)
        out.append((day, picks, fresh))
        for p in picks:
            state[p.question_id] = replace(p, uses=p.uses + 1, last_used=day)
            met[p.experience_key] = day
    return out


def test_no_experience_again_within_120_days_while_fresh_ones_exist() -> None:
    styles = ("conceptual", "debug", "predict_output", "model_choice", scoring.ARITHMETIC)
    bank = _bank(140, 4, styles)  # 28 days of fresh experiences, then repeats are unavoidable
    for day, picks, fresh in _serve(bank, 60):
        keys = [p.experience_key for p in picks]
        assert len(set(keys)) == len(keys), f"{day}: one experience twice in a day"
        repeats = [k for k in keys if k not in fresh]
        # A repeat only for a slot that no fresh experience could fill.
        assert len(repeats) <= max(0, len(picks) - len(fresh)), f"{day}: {repeats} while {len(fresh)} fresh"
        if len(fresh) >= 5:
            assert not repeats


def test_a_day_mixes_styles_caps_arithmetic_and_keeps_the_ramp() -> None:
    # Arithmetic is most of the bank (as in the real one), every style exists at every level.
    styles = ("conceptual", "debug", "predict_output", "model_choice", *[scoring.ARITHMETIC] * 6)
    bank = _bank(660, 2, styles)
    firsts: Counter[str] = Counter()
    for day, picks, _fresh in _serve(bank, 40):
        got = Counter(p.style_key for p in picks)
        assert got[scoring.ARITHMETIC] <= scoring.MAX_ARITHMETIC_PER_DAY, f"{day}: {got}"
        assert set(scoring.ROTATION_STYLES) <= set(got), f"{day}: the rotated styles all fit, got {got}"
        assert [p.difficulty for p in picks] == [
            "intermediate",
            "intermediate",
            "advanced",
            "advanced",
            "expert",
        ]
        firsts[min(scoring.ROTATION_STYLES, key=lambda s: scoring._day_rotation(day)[s])] += 1
    assert set(firsts) == set(scoring.ROTATION_STYLES), "each rotated style leads some days"


def test_arithmetic_fills_a_day_only_when_nothing_else_can() -> None:
    bank = _bank(40, 1, (scoring.ARITHMETIC,))
    picks = scoring.pick_problems(bank, 5, random.Random(0), DAY)
    assert len(picks) == 5  # the cap bends rather than leave a challenge short


def test_stats_command_reports_experiences(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    bank.mkdir()
    twins = [make_spec(f"twin-{i}", LEVELS[i % 3], "DDP", concept="sampler-padding") for i in range(3)]
    others = [make_spec(f"other-{i}", LEVELS[i % 3], "DDP") for i in range(7)]
    (bank / "b.yaml").write_text(yaml.safe_dump({"questions": [*twins, *others]}))
    done = subprocess.run(
        [RANKZERO, "questions", "stats", "--json", str(bank)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    # 3 questions of one concept and 7 of their own: 8 experiences, 1 fresh weekday (5 of 8, then 3).
    assert stats["experiences"] == 8 and stats["fresh_weekdays"] == 1
    assert stats["style_shares"] == {"conceptual": 1.0}


async def test_the_service_rotates_concepts_through_the_real_storage(service: QuizService) -> None:
    """Through the real storage: two questions of one concept are never both asked while others are fresh."""
    bank = [
        make_spec("twin-a", "advanced", "DDP", concept="global-batch-product"),
        make_spec("twin-b", "advanced", "DDP", concept="global-batch-product"),
        *[make_spec(f"more-{i}", LEVELS[i % 3], "Scaling & batch size") for i in range(40)],
    ]
    await service.admin_import(ADMIN, bank)
    async with service._uow() as uow:
        channel_pk = await uow.players.ensure_channel(CHANNEL)
        stored = await uow.questions.question_candidates(CHANNEL.tenant, channel_pk, ["conceptual"])
    by_id = {c.question_id: c for c in stored}
    assert by_id["twin-a"].experience == by_id["twin-b"].experience == "global-batch-product"
    assert by_id["more-0"].experience == "more-0" and by_id["more-0"].style == "conceptual"
    asked: list[str] = []
    for offset in range(10):  # 50 picks from 18 + 40 + 1 = 59 experiences: never a repeat
        challenge, _ = await service.open_challenge(CHANNEL, DAY + dt.timedelta(days=offset))
        asked += [p.question.id for p in challenge.problems]
    assert len(asked) == len(set(asked)) == 50
    assert not {"twin-a", "twin-b"} <= set(asked), "one concept asked twice within 120 days"


def test_once_every_experience_repeats_the_arithmetic_cap_beats_the_oldest() -> None:
    # Everything was met lately; the arithmetic experiences longest ago. Without the cap, all 5 would be
    # arithmetic (the oldest first); with it, 2 are and the rest are the newer non-arithmetic ones.
    old, new = DAY - dt.timedelta(days=100), DAY - dt.timedelta(days=10)
    bank = [
        replace(c, uses=1, last_used=old if c.style_key == scoring.ARITHMETIC else new)
        for c in _bank(20, 1, (scoring.ARITHMETIC, scoring.ARITHMETIC, "conceptual", "debug"))
    ]
    for seed in range(10):
        picks = scoring.pick_problems(bank, 5, random.Random(seed), DAY)
        assert sum(1 for p in picks if p.style_key == scoring.ARITHMETIC) == scoring.MAX_ARITHMETIC_PER_DAY
