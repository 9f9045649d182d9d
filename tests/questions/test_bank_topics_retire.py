"""Issue 14: one list of top-level topics, enforced by the schema; retiring a question from a bank file."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from bot.core.service import QuizService
from questions.loader import BankValidationError, validate_text
from questions.schema import MULTIPLE_CHOICE_KINDS, TOPICS
from tests.conftest import ADMIN, CHANNEL, actor, test_bank
from tests.shipped import shipped_questions

GOOD = """\
questions:
  - id: good-one
    kind: conceptual
    topic: DDP
    difficulty: advanced
    prompt: Why?
    choices:
      - text: "yes"
      - text: "no"
        correct: true
"""


def _errors(text: str) -> list[str]:
    with pytest.raises(BankValidationError) as info:
        validate_text(text, "bank.yaml")
    return [str(e) for e in info.value.errors]


def test_topic_must_be_one_of_the_taxonomy() -> None:
    [err] = _errors(GOOD.replace("topic: DDP", "topic: DDP internals"))
    assert err.startswith("bank.yaml:4: questions[0] (good-one).topic:")
    assert "'DDP internals' is not a topic" in err and "'FSDP & ZeRO'" in err and "tags" in err
    assert len(TOPICS) == len(set(TOPICS)) == 14
    for topic in TOPICS:
        validate_text(GOOD.replace("topic: DDP", f"topic: {topic!r}"), "ok.yaml")


def test_replaced_by_is_only_for_retired_questions() -> None:
    text = GOOD.replace("difficulty: advanced", "difficulty: advanced\n    replaced_by: other-one")
    assert any("'replaced_by' is only for retired questions" in e for e in _errors(text))
    [q] = validate_text(text.replace("replaced_by:", "retired: true\n    replaced_by:"), "ok.yaml")
    assert q.spec.retired and q.spec.replaced_by == "other-one"


def test_shipped_bank_uses_the_taxonomy_and_retires_into_active_questions() -> None:
    specs = {q.spec.id: q.spec for q in shipped_questions()}
    assert {s.topic for s in specs.values()} <= set(TOPICS)
    for s in specs.values():
        if s.replaced_by is not None:
            target = specs.get(s.replaced_by)
            assert target is not None and not target.retired, f"{s.id} -> {s.replaced_by}"
    # DataParallel no longer fills the bank (20 questions, 9 of them multiple choice, before issue 14).
    # The picker sees a family's instances as one question, so count families once.
    active = [s for s in specs.values() if not s.retired]
    base = [s for s in active if "/" not in s.id]
    assert Counter(s.topic for s in base)["DataParallel"] <= 10
    assert sum(s.topic == "DataParallel" and s.kind in MULTIPLE_CHOICE_KINDS for s in base) <= 5
    units = {s.id.split("/")[0]: s for s in active if s.kind in MULTIPLE_CHOICE_KINDS}
    dp_units = sum(s.topic == "DataParallel" for s in units.values())
    assert dp_units / len(units) <= 0.05, f"{dp_units} of {len(units)} daily questions are DataParallel"


async def test_a_retired_flag_in_a_bank_file_retires_on_import_and_keeps_history(
    service: QuizService,
) -> None:
    ch, _ = await service.open_challenge(CHANNEL)
    asked = ch.problems[0].question
    await service.start_problem(actor("jo"), ch.problems[0].id)
    spec = next(s for s in test_bank() if s["id"] == asked.id)
    # Unchanged content plus the flag: a new version, and the question leaves the rotation.
    await service.admin_import(ADMIN, [{**spec, "retired": True}])
    assert asked.id not in {q.id for q in await service.list_questions()}
    assert asked.id in {q.id for q in await service.list_questions(include_retired=True)}
    again = (await service.get_challenge(ch.id)).problems[0].question
    assert (again.version_id, again.version) == (asked.version_id, asked.version)
    # A question that arrives already retired is stored but never picked.
    fresh = {**spec, "id": "never-served", "retired": True}
    report = await service.admin_import(ADMIN, [fresh])
    assert report.added == ("never-served",)
    assert "never-served" not in {q.id for q in await service.list_questions()}
    for offset in range(1, 5):
        later, _ = await service.open_challenge(CHANNEL, dt.date(2026, 12, 1) + dt.timedelta(days=offset))
        assert {asked.id, "never-served"}.isdisjoint(p.question.id for p in later.problems)
