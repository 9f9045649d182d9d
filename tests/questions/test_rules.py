"""Property tests: no distractor rule ever produces the correct output (issue 14).

Each rule is called directly (not through ``apply_rule``, whose own guard would hide a faulty rule) on
answers built the way the runner prints them, over hypothesis-generated world sizes, ops and values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from questions.families import evaluate, render
from questions.rules import (
    RULES,
    Answer,
    RuleContext,
    RuleError,
    apply_rule,
    normalise,
    reduce_values,
    rule,
)

OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG"]
small = st.integers(min_value=-6, max_value=9)
floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


def ctx_for(answer: Answer, params: Mapping[str, Any]) -> RuleContext:
    return RuleContext(answer, params, evaluate, render)


def never_the_answer(name: str, ctx: RuleContext, args: Mapping[str, Any]) -> None:
    out = RULES[name].fn(ctx, args)
    assert out is None or normalise(out) != normalise(ctx.answer.text), (name, args, out)


@st.composite
def collectives(draw: st.DrawFn) -> tuple[Answer, dict[str, Any], str]:
    world = draw(st.integers(min_value=2, max_value=8))
    op = draw(st.sampled_from(OPS))
    vals = draw(st.lists(small, min_size=world, max_size=world))
    result = reduce_values(op, vals)
    fmt = draw(st.sampled_from([None, "g", ".2f"]))
    probe = Answer(text="", number_format=fmt)
    text = probe.render_ranks([(r, result) for r in range(world)])
    return Answer.from_output(text, fmt), {"vals": vals, "world_size": world, "op": op}, op


@settings(max_examples=300, deadline=None)
@given(collectives(), st.sampled_from(OPS), small, st.integers(min_value=0, max_value=7))
def test_per_rank_rules_never_give_the_real_output(
    case: tuple[Answer, dict[str, Any], str], other_op: str, k: int, source: int
) -> None:
    answer, params, _op = case
    ctx = ctx_for(answer, params)
    never_the_answer("no_reduction", ctx, {"before": "vals[rank]"})
    never_the_answer("not_in_place", ctx, {"before": "vals[rank]"})
    never_the_answer("wrong_op", ctx, {"before": "vals[rank]", "op": other_op})
    never_the_answer("rank0_only", ctx, {"before": "vals[rank]"})
    never_the_answer("only_rank0_prints", ctx, {})
    never_the_answer("same_on_all_ranks", ctx, {"source": source})
    never_the_answer("per_rank", ctx, {"value": f"vals[rank] * {k}"})
    never_the_answer("scale", ctx, {"factor": "world_size"})
    never_the_answer("scale", ctx, {"factor": "1 / world_size"})
    never_the_answer("offset", ctx, {"delta": k})


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=6),
    st.lists(st.lists(small, min_size=1, max_size=5), min_size=1, max_size=6),
)
def test_reverse_order_never_gives_the_real_output(world: int, lists: list[list[int]]) -> None:
    text = "\n".join(f"rank {r}: {lists[r % len(lists)]}" for r in range(world))
    never_the_answer("reverse_order", ctx_for(Answer.from_output(text), {}), {})


@settings(max_examples=300, deadline=None)
@given(floats, floats, st.sampled_from([None, ".1f", ".2f", ".3g", "g"]), st.sampled_from(["", " GB", " %"]))
def test_numeric_rules_never_give_the_real_value(
    value: float, other: float, fmt: str | None, unit: str
) -> None:
    answer = Answer.from_value(value, fmt, unit)
    ctx = ctx_for(answer, {"x": other, "world_size": 4})
    never_the_answer("scale", ctx, {"factor": "x"})
    never_the_answer("offset", ctx, {"delta": "x"})
    never_the_answer("formula", ctx, {"expr": "x"})
    never_the_answer("formula", ctx, {"expr": "x * world_size"})


keys = st.lists(
    st.from_regex(r"(module\.)?[a-z]{1,5}(\.[a-z0-9]{1,3}){0,2}", fullmatch=True), min_size=0, max_size=4
)


@settings(max_examples=200, deadline=None)
@given(keys, st.sampled_from(["add", "strip"]))
def test_module_prefix_never_gives_the_real_keys(names: list[str], mode: str) -> None:
    answer = Answer(str(names))
    never_the_answer("module_prefix", ctx_for(answer, {}), {"mode": mode})


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_verdict_rules_never_give_the_real_verdict(where: str) -> None:
    answer = Answer(f"hangs: {where}")
    ctx = ctx_for(answer, {"where": where})
    never_the_answer("hang", ctx, {"where": "{{ where }}"})
    never_the_answer(
        "error", ctx_for(Answer("RuntimeError: boom"), {}), {"type": "RuntimeError", "message": "boom"}
    )


def test_apply_rule_refuses_a_rule_that_returns_the_answer() -> None:
    @rule("test-echo", "a broken rule for this test")
    def echo(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
        return ctx.answer.text

    try:
        with pytest.raises(RuleError, match="produced the correct answer"):
            apply_rule("test-echo", ctx_for(Answer("rank 0: 1"), {}), {})
    finally:
        del RULES["test-echo"]


def test_unknown_rule_and_wrong_answer_shape_are_clear_errors() -> None:
    with pytest.raises(RuleError, match="no distractor rule named 'nope'"):
        apply_rule("nope", ctx_for(Answer("1"), {}), {})
    with pytest.raises(RuleError, match="rank R: value"):
        apply_rule("no_reduction", ctx_for(Answer("hello"), {}), {"before": "1"})
