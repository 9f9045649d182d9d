"""Named distractor rules: each one turns the real answer into the answer a real misconception predicts.

A family lists its wrong choices as rules with arguments (``- rule: no_reduction`` with
``before: "rank + 1"``); the build applies them to each instance's real output (from the runner) or
computed value (formula families). Every rule returns ``None`` when, for this instance, the
misconception predicts the same text as the truth (e.g. SUM and MAX of equal values): a distractor is
never the correct output. ``tests/questions/test_rules.py`` checks that property with hypothesis.

Add a rule: write ``def my_rule(ctx: RuleContext, args: Mapping[str, Any]) -> str | None``, decorate
it with ``@rule("my_rule", "what misconception it models", exprs=("arg",))`` and document its arguments
in the docstring. ``exprs`` names the arguments that are expressions (evaluated per instance, with
``rank`` bound for per-rank ones); other arguments are Jinja text templates.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

Value = Any  # a Python literal printed by a snippet: a number, a list/tuple of them, a str or a bool
RuleFn = Callable[["RuleContext", Mapping[str, Any]], "str | None"]

_RANK_LINE = re.compile(r"^rank (\d+): (.*)$")


class RuleError(ValueError):
    """A rule was used wrongly (unknown name, missing argument, wrong kind of answer)."""


def parse_value(text: str) -> Value:
    """A printed value as a Python literal when it is one (``3``, ``2.5``, ``[1, 2]``), else the text."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text.strip()


def render_value(value: Value, number_format: str | None = None) -> str:
    """Print a value the way the snippets do: ``format(x, number_format)`` for floats when given, else
    Python's own ``str`` (``3.0``, ``[1, 2]``); ints always as ``str``.
    """
    if isinstance(value, (bool, str)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format(value, number_format) if number_format else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_render_item(v, number_format) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(_render_item(v, number_format) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return str(value)


def _render_item(value: Value, number_format: str | None) -> str:
    # Inside a container Python prints strings with quotes: ['module.weight'], not [module.weight].
    return repr(value) if isinstance(value, str) else render_value(value, number_format)


def normalise(text: str) -> str:
    """Whitespace-normalised text (the same comparison the dispute matcher uses)."""
    lines = (" ".join(line.split()) for line in text.strip().splitlines())
    return "\n".join(line for line in lines if line)


@dataclass(frozen=True)
class Answer:
    """The real answer of an instance, in the shapes rules work on.

    ``ranks``: the parsed ``rank R: value`` lines when every output line is one; ``value``: the number of
    a formula answer; ``render`` prints a value the way the answer prints it.
    """

    text: str
    ranks: tuple[tuple[int, Value], ...] | None = None
    value: float | None = None
    number_format: str | None = None
    unit: str = ""

    @classmethod
    def from_output(cls, text: str, number_format: str | None = None) -> Answer:
        """An answer from a snippet's stdout (rank lines parsed when the output is made of them)."""
        lines = [line for line in text.strip().splitlines() if line.strip()]
        parsed = [_RANK_LINE.match(line.strip()) for line in lines]
        ranks = None
        value = None
        if lines and all(parsed):
            ranks = tuple((int(m.group(1)), parse_value(m.group(2))) for m in parsed if m)
        elif len(lines) == 1:
            # A single printed number: numeric rules (scale, offset) work on it like on a formula value.
            single = parse_value(lines[0])
            if isinstance(single, (int, float)) and not isinstance(single, bool):
                value = single
        return cls(text.strip(), ranks, value, number_format)

    @classmethod
    def from_value(cls, value: float, number_format: str | None, unit: str = "") -> Answer:
        """An answer computed by a formula."""
        return cls(render_value(value, number_format) + unit, None, value, number_format, unit)

    def render(self, value: Value) -> str:
        """Print ``value`` as this answer prints its values."""
        return render_value(value, self.number_format)

    def render_ranks(self, values: Sequence[tuple[int, Value]]) -> str:
        """``rank R: value`` lines."""
        return "\n".join(f"rank {r}: {self.render(v)}" for r, v in values)

    def render_scalar(self, value: float) -> str:
        """A formula value with the answer's format and unit."""
        return render_value(value, self.number_format) + self.unit


@dataclass(frozen=True)
class RuleContext:
    """What a rule sees: the real answer, the instance's parameters and an expression evaluator."""

    answer: Answer
    params: Mapping[str, Any]
    evaluate: Callable[[str, Mapping[str, Any]], Any]
    render_text: Callable[[str, Mapping[str, Any]], str]

    def expr(self, args: Mapping[str, Any], name: str, **extra: Any) -> Any:
        """Evaluate the expression argument ``name`` (numbers and lists pass through)."""
        if name not in args:
            raise RuleError(f"this rule needs the argument {name!r}")
        raw = args[name]
        if not isinstance(raw, str):
            return raw
        return self.evaluate(raw, {**self.params, **extra})

    def text(self, args: Mapping[str, Any], name: str) -> str:
        """Render the text-template argument ``name``."""
        if name not in args:
            raise RuleError(f"this rule needs the argument {name!r}")
        return self.render_text(str(args[name]), dict(self.params))

    def ranks(self) -> tuple[tuple[int, Value], ...]:
        """The answer's rank lines, or a RuleError for answers that are not made of them."""
        if self.answer.ranks is None:
            raise RuleError("this rule needs an output made of 'rank R: value' lines")
        return self.answer.ranks


@dataclass(frozen=True)
class Rule:
    """A registered rule: its function, the misconception it models and its expression arguments."""

    name: str
    teaches: str
    fn: RuleFn
    exprs: tuple[str, ...]


RULES: dict[str, Rule] = {}


def rule(name: str, teaches: str, *, exprs: tuple[str, ...] = ()) -> Callable[[RuleFn], RuleFn]:
    """Register a distractor rule under ``name``."""

    def register(fn: RuleFn) -> RuleFn:
        if name in RULES:
            raise RuntimeError(f"rule {name!r} registered twice")
        RULES[name] = Rule(name, teaches, fn, exprs)
        return fn

    return register


def apply_rule(name: str, ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Apply a registered rule; ``None`` when it predicts nothing different from the truth here.

    A rule returning the correct text is a bug in the rule, not a distractor: it raises RuleError.
    """
    try:
        found = RULES[name]
    except KeyError:
        raise RuleError(f"no distractor rule named {name!r}; known: {', '.join(sorted(RULES))}") from None
    text = found.fn(ctx, args)
    if text is not None and normalise(text) == normalise(ctx.answer.text):
        raise RuleError(f"rule {name!r} produced the correct answer {text!r}; it must return None instead")
    return text


def _differs(ctx: RuleContext, text: str) -> str | None:
    return None if normalise(text) == normalise(ctx.answer.text) else text


def _numeric(value: Value, fn: Callable[[float], float]) -> Value:
    """Apply ``fn`` to every number of a value, keeping ints int when the result is whole."""
    if isinstance(value, bool):
        raise RuleError("a boolean is not a number this rule can change")
    if isinstance(value, int):
        out = fn(value)
        return int(out) if float(out).is_integer() else out
    if isinstance(value, float):
        return float(fn(value))
    if isinstance(value, list):
        return [_numeric(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(_numeric(v, fn) for v in value)
    raise RuleError(f"{value!r} is not a number this rule can change")


def _map_answer(ctx: RuleContext, fn: Callable[[float], float]) -> str | None:
    if ctx.answer.value is not None:
        new = _numeric(ctx.answer.value, fn)
        if math.isclose(new, ctx.answer.value, rel_tol=1e-12, abs_tol=0.0):
            return None
        return _differs(ctx, ctx.answer.render_scalar(new))
    ranks = ctx.ranks()
    return _differs(ctx, ctx.answer.render_ranks([(r, _numeric(v, fn)) for r, v in ranks]))


_OPS: dict[str, Callable[[Sequence[float]], float]] = {
    "SUM": lambda xs: reduce(operator.add, xs),
    "PRODUCT": lambda xs: reduce(operator.mul, xs),
    "MIN": min,
    "MAX": max,
    "AVG": lambda xs: reduce(operator.add, xs) / len(xs),
}


def reduce_values(op: str, values: Sequence[Value]) -> Value:
    """What ``dist.all_reduce(op=op)`` leaves on every rank, element-wise for lists."""
    try:
        fn = _OPS[op.upper()]
    except KeyError:
        raise RuleError(f"unknown reduction {op!r}; use one of {', '.join(_OPS)}") from None
    first = values[0]
    if isinstance(first, (list, tuple)):
        return type(first)(reduce_values(op, [v[i] for v in values]) for i in range(len(first)))
    out = fn(values)
    if all(isinstance(v, int) for v in values) and op.upper() != "AVG":
        return int(out)
    return float(out)


# ---------------------------------------------------------------------------------------- per-rank rules
@rule(
    "no_reduction",
    "forgets that the collective changed the tensor: each rank keeps its own value",
    exprs=("before",),
)
def no_reduction(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Every rank prints its value before the collective. ``before``: that value, with ``rank`` bound."""
    values = [(r, ctx.expr(args, "before", rank=r)) for r, _ in ctx.ranks()]
    return _differs(ctx, ctx.answer.render_ranks(values))


@rule(
    "not_in_place",
    "thinks the collective returns its result instead of writing it into the tensor (or the reverse)",
    exprs=("before",),
)
def not_in_place(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """The printed tensor keeps its value before the call. ``before``: that value, ``rank`` bound."""
    return no_reduction(ctx, args)


@rule("wrong_op", "confuses the reduction: the result of another op", exprs=("before",))
def wrong_op(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Every rank prints ``op`` (SUM, AVG, MAX, MIN, PRODUCT; a template) over the ``before`` values."""
    op = ctx.text(args, "op")
    ranks = ctx.ranks()
    before = [ctx.expr(args, "before", rank=r) for r, _ in ranks]
    result = reduce_values(op, before)
    return _differs(ctx, ctx.answer.render_ranks([(r, result) for r, _ in ranks]))


@rule("rank0_only", "thinks only rank 0 receives the result (a reduce, not an all-reduce)", exprs=("before",))
def rank0_only(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Rank 0 prints the real value; every other rank its ``before`` value."""
    ranks = ctx.ranks()
    values = [(r, v if r == 0 else ctx.expr(args, "before", rank=r)) for r, v in ranks]
    return _differs(ctx, ctx.answer.render_ranks(values))


@rule("only_rank0_prints", "thinks the other ranks print nothing (or that output is from rank 0 only)")
def only_rank0_prints(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Only the rank-0 line of the real output."""
    ranks = ctx.ranks()
    if len(ranks) < 2:
        return None
    return _differs(ctx, ctx.answer.render_ranks(ranks[:1]))


@rule("same_on_all_ranks", "thinks every rank ends up with the same value (e.g. rank 0's)", exprs=("source",))
def same_on_all_ranks(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Every rank prints the value rank ``source`` (default 0) really printed."""
    ranks = ctx.ranks()
    source = ctx.expr(args, "source") if "source" in args else 0
    value = dict(ranks).get(source)
    if value is None:
        return None
    return _differs(ctx, ctx.answer.render_ranks([(r, value) for r, _ in ranks]))


@rule("per_rank", "predicts another per-rank value (a templated misconception)", exprs=("value",))
def per_rank(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Rank r prints ``value`` evaluated with ``rank`` bound (for misconceptions with no named rule)."""
    values = [(r, ctx.expr(args, "value", rank=r)) for r, _ in ctx.ranks()]
    return _differs(ctx, ctx.answer.render_ranks(values))


@rule("reverse_order", "expects the gathered list in the opposite rank order")
def reverse_order(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Every list value reversed."""
    values = []
    for r, v in ctx.ranks():
        if not isinstance(v, (list, tuple)):
            raise RuleError("reverse_order needs list values")
        values.append((r, type(v)(reversed(v))))
    return _differs(ctx, ctx.answer.render_ranks(values))


# ------------------------------------------------------------------------------------ numeric rules
@rule(
    "scale",
    "is off by a factor, typically the world size (a sum taken for a mean, or the reverse)",
    exprs=("factor",),
)
def scale(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Every number multiplied by ``factor`` (e.g. ``world_size`` or ``1 / world_size``)."""
    factor = float(ctx.expr(args, "factor"))
    if factor == 1.0:
        return None
    return _map_answer(ctx, lambda x: x * factor)


@rule("offset", "is off by a constant (off by one, one rank or one step)", exprs=("delta",))
def offset(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """Every number plus ``delta``."""
    delta = float(ctx.expr(args, "delta"))
    if delta == 0.0:
        return None
    return _map_answer(ctx, lambda x: x + delta)


@rule("formula", "uses a wrong formula (named in the family's feedback)", exprs=("expr",))
def formula(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """A formula answer computed by the wrong expression ``expr``."""
    if ctx.answer.value is None:
        raise RuleError("the formula rule needs a family whose answer is a 'value' expression")
    raw = ctx.expr(args, "expr")
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise RuleError(f"formula expr gave {raw!r}, not a number")
    new: float = float(raw)
    if math.isclose(new, ctx.answer.value, rel_tol=1e-12, abs_tol=0.0):
        return None
    # An integer answer (a batch size, a step count) keeps integer distractors: "64", never "64.0".
    shown = int(new) if isinstance(ctx.answer.value, int) and new.is_integer() else new
    return _differs(ctx, ctx.answer.render_scalar(shown))


# ------------------------------------------------------------------------------------ text rules
_QUOTED_KEY = re.compile(r"'([A-Za-z_][\w.]*)'")


@rule("module_prefix", "forgets that DataParallel/DDP register the model as `module`, prefixing every key")
def module_prefix(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """``mode: add`` prefixes every quoted key with ``module.``; ``mode: strip`` removes the prefix."""
    mode = ctx.text(args, "mode") if "mode" in args else "add"
    if mode == "add":
        text = _QUOTED_KEY.sub(lambda m: f"'module.{m.group(1)}'", ctx.answer.text)
    elif mode == "strip":
        text = ctx.answer.text.replace("module.", "")
    else:
        raise RuleError("module_prefix takes mode: add or mode: strip")
    return _differs(ctx, text)


@rule("hang", "expects a deadlock where the collectives actually match up")
def hang(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """``hangs: <where>``; ``where`` is a template such as ``rank 1 stuck in all_reduce``."""
    return _differs(ctx, f"hangs: {ctx.text(args, 'where')}")


@rule("error", "expects an exception where the code actually runs (or another exception)")
def error(ctx: RuleContext, args: Mapping[str, Any]) -> str | None:
    """``<type>: <message>`` (both templates), e.g. ``RuntimeError: ...``."""
    return _differs(ctx, f"{ctx.text(args, 'type')}: {ctx.text(args, 'message')}")
