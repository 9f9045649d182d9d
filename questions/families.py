"""Question families: one question written once with parameters; each instance is an ordinary question.

A family file (``questions/families/*.yaml``) holds ``families:``. Each family has ``params`` (named
lists or ranges), Jinja2 templates for ``prompt``, ``code``, ``hint`` and ``explanation``, an optional
``constraints`` expression, and ``distractors``: named rules from :mod:`questions.rules` or templated
choice texts. The answer of a ``predict_output`` instance is what the runner prints
(``rankzero questions build``, :mod:`questions.build`); other kinds compute it with a ``value``
expression (a formula from :mod:`questions.formulas`) or an ``answer`` text template.

Templates and expressions run in Jinja2's ImmutableSandboxedEnvironment with StrictUndefined: no
Python is ever ``eval``-ed, attribute access to internals is refused, and a misspelt name is an error
instead of an empty string. Why Jinja2 and not ``string.Template``: instances need different code paths
(``{% if op == "AVG" %}``), loops over ranks and arithmetic on parameters, which ``string.Template``
cannot express; the sandbox keeps that power safe for question files written by anyone.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from questions import formulas
from questions.reading import (
    BankError,
    BankValidationError,
    parse_yaml_with_lines,
    read_bank_file,
    repeated_ids,
)
from questions.rules import RULES, Answer, RuleContext, RuleError, apply_rule, normalise
from questions.schema import MULTIPLE_CHOICE_KINDS, SLUG_RE, Difficulty, Kind, QuestionSpec

FAMILY_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{2,39}$")
PARAM_NAME = re.compile(r"^[a-z][a-z0-9_]{0,15}$")
PARAM_TEXT = re.compile(r"^[A-Za-z0-9_.:+-]{1,24}$")
MAX_INSTANCES_PER_FAMILY = 64
Scalar = int | float | str | bool


def default_families_dir() -> Path:
    """Where the shipped family files live (``questions/families``)."""
    return Path(__file__).resolve().parent / "families"


def default_generated_dir() -> Path:
    """Where ``build`` writes instances (``questions/bank/generated``), loaded like any bank file."""
    return Path(__file__).resolve().parent / "bank" / "generated"


# ----------------------------------------------------------------------------------------- templating
def _fmt(value: Any, spec: str = "g") -> str:
    return format(value, spec)


def make_environment() -> ImmutableSandboxedEnvironment:
    """The sandboxed Jinja2 environment every template and expression of a family runs in."""
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    env.filters["fmt"] = _fmt
    for unused in ("lipsum", "cycler", "joiner"):  # nothing a question needs; less to reason about
        env.globals.pop(unused, None)
    env.globals.update(formulas.FORMULAS)
    env.globals.update(
        {
            "min": min,
            "max": max,
            "abs": abs,
            "round": round,
            "sum": sum,
            "len": len,
            "list": list,
            "int": int,
            "float": float,
            "sorted": sorted,
            "ceil": math.ceil,
            "floor": math.floor,
            "sqrt": math.sqrt,
            "log2": math.log2,
            "cos": math.cos,
            "pi": math.pi,
        }
    )
    return env


def _each(expr: str, world_size: int) -> list[Any]:
    """``each('rank * rank', 4)`` -> ``[0, 1, 4, 9]``: an expression of ``rank`` (and ``world``) for every
    rank, evaluated in the same sandbox (what a gather collects, for templates and rule arguments).
    """
    if not 1 <= world_size <= 64:
        raise TemplateError(f"each(): world size {world_size} out of 1..64")
    return [
        evaluate(expr, {"rank": r, "world": world_size, "world_size": world_size}) for r in range(world_size)
    ]


ENV = make_environment()
ENV.globals["each"] = _each


class TemplateError(ValueError):
    """A family template or expression failed for one instance."""


# Compiling is most of a render's cost (issue 29: 14,210 compiles of a few hundred distinct sources when
# expanding and checking every shipped family), so each distinct source is compiled once. A compiled
# template keeps no state between renders (each render gets a fresh context) and ENV's globals are
# complete before the first compile; the bound keeps a hostile bank from growing the cache without limit.
# A source that fails to compile raises from here and is not cached.
_COMPILED_CACHE = 4096


@functools.lru_cache(maxsize=_COMPILED_CACHE)
def _expression(expr: str) -> Any:
    return ENV.compile_expression(expr, undefined_to_none=False)


@functools.lru_cache(maxsize=_COMPILED_CACHE)
def _template(template: str) -> jinja2.Template:
    return ENV.from_string(template)


def evaluate(expr: str, context: Mapping[str, Any]) -> Any:
    """Evaluate a sandboxed Jinja2 expression (``batch % world_size == 0``)."""
    try:
        value = _expression(expr)(**context)
    except jinja2.TemplateError as exc:
        raise TemplateError(f"expression {expr!r}: {exc}") from None
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise TemplateError(f"expression {expr!r}: {type(exc).__name__}: {exc}") from None
    if isinstance(value, jinja2.Undefined):
        # The sandbox answers an unsafe attribute or a misspelt name with Undefined: both are errors here.
        raise TemplateError(
            f"expression {expr!r}: undefined (a misspelt name, or an attribute the sandbox refuses)"
        )
    return value


def render(template: str, context: Mapping[str, Any]) -> str:
    """Render a sandboxed Jinja2 template."""
    try:
        return _template(template).render(**context)
    except jinja2.TemplateError as exc:
        raise TemplateError(f"template: {exc}") from None
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise TemplateError(f"template: {type(exc).__name__}: {exc}") from None


_LIST_ITEM = re.compile(r"^\s*(?:[-*+] |\d+[.)] |\|)")


def reflow(text: str) -> str:
    """Join the hard-wrapped lines of each paragraph: Discord and Slack turn every newline into a break.

    Code fences, list items, table rows and indented lines keep their own lines; blank lines stay.
    """
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append(line)
            continue
        joinable = (
            not fenced
            and out
            and line.strip()
            and out[-1].strip()
            and not out[-1].lstrip().startswith("```")
            and not _LIST_ITEM.match(line)
            and not line.startswith(("    ", "\t"))
        )
        if joinable:
            out[-1] = out[-1].rstrip() + " " + line.strip()
        else:
            out.append(line.rstrip())
    return "\n".join(out)


# ------------------------------------------------------------------------------------------- the spec
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RangeSpec(_Strict):
    """``{range: [start, stop]}`` or ``[start, stop, step]``: Python's range, stop excluded."""

    range: Annotated[list[int], Field(min_length=2, max_length=3)]

    def values(self) -> list[int]:
        """The integers of the range."""
        return list(range(*self.range))


#: The most ranks a run may have (the bank schema's and the runner's limit).
MAX_NPROC = 8


class FamilyRunner(_Strict):
    """How the runner executes an instance; ``nproc`` may be an expression such as ``world_size``."""

    mode: Literal["python", "dp", "ddp"] = "python"
    nproc: int | str = 1
    gpus: Annotated[int, Field(ge=0, le=8)] = 0
    init_process_group: bool = False
    timeout_s: Annotated[float, Field(gt=0, le=120)] = 30.0

    @model_validator(mode="after")
    def _nproc_fits(self) -> FamilyRunner:
        # The same rules as a question's runner block (questions/schema.py RunnerSpec), checked when the
        # family file is loaded rather than found by a crash (or a runner's refusal) in the middle of a build.
        if isinstance(self.nproc, str):
            if self.mode != "ddp":
                raise ValueError(
                    f"nproc {self.nproc!r} is an expression, but mode {self.mode!r} runs one process: use "
                    "mode 'ddp' for several ranks, or drop nproc"
                )
        elif self.mode != "ddp" and self.nproc != 1:
            raise ValueError(
                f"nproc must be 1 for mode {self.mode!r}; only mode 'ddp' launches several ranks"
            )
        elif not 1 <= self.nproc <= MAX_NPROC:
            raise ValueError(
                f"nproc {self.nproc} is out of range: use 1 to {MAX_NPROC} ranks, or an expression of the "
                "params"
            )
        return self


def _instance_nproc(runner: FamilyRunner, context: Mapping[str, Any]) -> int:
    """The ranks of one instance: ``nproc`` itself, or its expression evaluated with the params."""
    if isinstance(runner.nproc, int):
        return runner.nproc
    value = evaluate(runner.nproc, context)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NPROC:
        raise TemplateError(
            f"runner nproc {runner.nproc!r} gives {value!r} here; it must be a whole number of ranks from 1 "
            f'to {MAX_NPROC} (constrain the params, e.g. constraints: "world_size <= {MAX_NPROC}")'
        )
    return value


class DistractorSpec(BaseModel):
    """A wrong choice: ``rule`` (a name from questions.rules, its arguments as extra keys) or ``text``
    (a template). ``when`` (an expression) limits it to some instances; ``feedback`` is a template.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    rule: str | None = None
    text: str | None = None
    feedback: str | None = None
    when: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> DistractorSpec:
        if (self.rule is None) == (self.text is None):
            raise ValueError("a distractor has exactly one of 'rule' (a named rule) or 'text' (a template)")
        if self.rule is not None and self.rule not in RULES:
            raise ValueError(f"no distractor rule named {self.rule!r}; known: {', '.join(sorted(RULES))}")
        if self.text is not None and self.model_extra:
            raise ValueError(f"a 'text' distractor takes no rule arguments ({', '.join(self.model_extra)})")
        return self

    @property
    def args(self) -> dict[str, Any]:
        """The rule's arguments."""
        return dict(self.model_extra or {})


class FamilySpec(_Strict):
    """One family as written in YAML."""

    id: str
    kind: Kind
    topic: Annotated[str, Field(min_length=1, max_length=80)]
    difficulty: Difficulty
    tags: list[str] = Field(default_factory=list)
    params: dict[str, list[Scalar] | RangeSpec]
    constraints: str | None = None
    let: dict[str, str] = Field(default_factory=dict)
    prompt: str
    code: str | None = None
    runner: FamilyRunner | None = None
    expect: Literal["output", "hang", "error"] = "output"
    answer: str | None = None
    value: str | None = None
    answer_format: str | None = None
    unit: str = ""
    number_format: str | None = None
    distractors: Annotated[list[DistractorSpec], Field(min_length=1)]
    correct_feedback: str | None = None
    hint: Annotated[str, Field(min_length=1, description="Every bank question has a hint (H in play)")]
    explanation: str | None = None
    min_choices: Annotated[int, Field(ge=2, le=6)] = 3
    max_choices: Annotated[int, Field(ge=2, le=6)] = 4
    time_limit_s: Annotated[int, Field(ge=10, le=3600)] = 120
    attempts: Annotated[int, Field(ge=1, le=5)] = 2
    source: str | None = None
    #: The concept the family tests (a slug shared with near-duplicates elsewhere in the bank); the family
    #: id when not given.
    concept: str | None = None
    #: The parameters or ``let`` values whose values change what a player must reason about (an op, a
    #: placement, a flag, a regime, a code path); the others only change numbers. A regime that comes from
    #: a comparison is a ``let`` label (``regime: "'warmup' if step < warmup else 'decay'"``) named here.
    #: Each combination of their values is one experience; none declared: the whole family is one.
    reasoning: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not FAMILY_SLUG.match(value):
            raise ValueError(
                f"{value!r} is not a family id: 3-40 lowercase letters, digits and '-' (instance ids add "
                "'/param=value,...' and must stay within 64 characters)"
            )
        return value

    @field_validator("params")
    @classmethod
    def _params(cls, value: dict[str, list[Scalar] | RangeSpec]) -> dict[str, list[Scalar] | RangeSpec]:
        if not value:
            raise ValueError("a family needs at least one parameter")
        for name, spec in value.items():
            if not PARAM_NAME.match(name):
                raise ValueError(f"parameter name {name!r}: use 1-16 lowercase letters, digits, '_'")
            values = spec.values() if isinstance(spec, RangeSpec) else spec
            if not values:
                raise ValueError(f"parameter {name!r} has no values")
            for v in values:
                if not PARAM_TEXT.match(param_text(v)):
                    raise ValueError(f"parameter {name!r} value {v!r}: use short letters/digits/._:+-")
        return value

    @model_validator(mode="after")
    def _answer_source(self) -> FamilySpec:
        if self.kind not in MULTIPLE_CHOICE_KINDS:
            raise ValueError(f"families are multiple choice; kind '{self.kind}' is not")
        runs = self.kind is Kind.PREDICT_OUTPUT and self.code is not None
        if runs:
            if self.runner is None:
                raise ValueError("a predict_output family with code needs a 'runner' block")
            if self.value is not None:
                raise ValueError("a predict_output family's answer is what the runner prints: drop 'value'")
            if self.expect != "output" and self.answer is None:
                raise ValueError(f"expect: {self.expect} needs 'answer': the verdict text, e.g. 'hangs: ...'")
        else:
            if (self.answer is None) == (self.value is None):
                raise ValueError(
                    "a family that is not run needs exactly one of 'value' (a formula) or 'answer'"
                )
            if self.expect != "output":
                raise ValueError("'expect' is only for predict_output families with code")
        if self.min_choices > self.max_choices:
            raise ValueError("min_choices is larger than max_choices")
        unknown = [name for name in self.reasoning if name not in self.params and name not in self.let]
        if unknown:
            lets = ", ".join(self.let) or "none"
            names = ", ".join(repr(n) for n in unknown)
            raise ValueError(
                f"family {self.id}: reasoning names {names}, which is neither a "
                f"parameter ({', '.join(self.params)}) nor a `let` value ({lets}): fix the spelling, or "
                "compute the regime under `let` as a label and name that (e.g. `let: {regime: \"'warmup' "
                "if step < warmup else 'decay'\"}` and `reasoning: [regime]`)"
            )
        if len(set(self.reasoning)) != len(self.reasoning):
            raise ValueError(f"family {self.id}: reasoning names a value twice")
        if self.concept is not None and not SLUG_RE.match(self.concept):
            raise ValueError(f"concept {self.concept!r}: use a slug (3-64 lowercase letters, digits, '-')")
        return self

    def experience(self, context: Mapping[str, Any]) -> str:
        """The experience of an instance: the concept and the values of the reasoning parameters and
        ``let`` labels (``context``: the instance's params and ``let`` values).
        """
        concept = self.concept or self.id
        if not self.reasoning:
            return concept
        return concept + "/" + ",".join(f"{n}={self._reasoning_text(n, context[n])}" for n in self.reasoning)

    def _reasoning_text(self, name: str, value: Any) -> str:
        """A reasoning value as it appears in the experience key. A parameter is checked when the file
        loads; a ``let`` value is only known per instance, so it is checked here: it must be a label (a
        short string, a flag or a whole number), because a fraction or a list is a number the player
        computes, not a different thing to reason about.
        """
        if isinstance(value, (str, bool, int)) and PARAM_TEXT.match(param_text(value)):
            return param_text(value)
        raise TemplateError(
            f"reasoning value {name!r} is {value!r} here; a reasoning value is a label (a string of at most "
            "24 letters, digits or ._:+-, a true/false flag or a whole number): make its `let` expression "
            "give one (e.g. \"'fits' if need <= mem else 'does-not-fit'\"), or leave it out of reasoning"
        )

    @property
    def runs(self) -> bool:
        """Whether instances are run on the runner (predict_output with code)."""
        return self.kind is Kind.PREDICT_OUTPUT and self.code is not None


class FamilyFile(_Strict):
    """The top level of a family file."""

    families: list[FamilySpec]


# ------------------------------------------------------------------------------------------ instances
def param_text(value: Scalar) -> str:
    """A parameter value as it appears in an instance id."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Instance:
    """One instance of a family before its answer is known: rendered code, prompt and run settings."""

    family: FamilySpec
    params: dict[str, Scalar]
    context: dict[str, Any]
    id: str
    prompt: str
    code: str | None
    runner: dict[str, Any] | None
    timeout_s: float
    file: str = ""
    line: int = 0

    @property
    def run_hash(self) -> str:
        """What decides whether the runner must run again: code, params and launch settings."""
        blob = json.dumps(
            {"code": self.code, "params": self.params, "runner": self.runner, "expect": self.family.expect},
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _param_values(spec: list[Scalar] | RangeSpec) -> list[Scalar]:
    return list(spec.values()) if isinstance(spec, RangeSpec) else list(spec)


def expand(family: FamilySpec, file: str = "", line: int = 0) -> list[Instance]:
    """Every instance of a family: the product of its params that satisfies ``constraints``."""
    names = list(family.params)
    out: list[Instance] = []
    for combo in itertools.product(*(_param_values(family.params[n]) for n in names)):
        params = dict(zip(names, combo, strict=True))
        context: dict[str, Any] = dict(params)
        # `let` values first, so constraints can use them (e.g. `params_b * nbytes > mem`).
        for name, expr in family.let.items():
            context[name] = evaluate(expr, context)
        if family.constraints and not evaluate(family.constraints, context):
            continue
        iid = f"{family.id}/" + ",".join(f"{n}={param_text(v)}" for n, v in params.items())
        if len(iid) > 64:
            raise TemplateError(f"instance id {iid!r} is longer than 64 characters: shorten names")
        runner = None
        timeout = 30.0
        if family.runner is not None:
            r = family.runner
            nproc = _instance_nproc(r, context)
            runner = {
                "mode": r.mode,
                "nproc": nproc,
                "gpus": r.gpus,
                "init_process_group": r.init_process_group,
            }
            timeout = r.timeout_s
        family.experience(context)  # a reasoning `let` value that is not a label fails the family here
        code = render(family.code, context) if family.code is not None else None
        prompt = render(family.prompt, context)
        out.append(Instance(family, params, context, iid, prompt, code, runner, timeout, file, line))
    if len(out) > MAX_INSTANCES_PER_FAMILY:
        raise TemplateError(
            f"{len(out)} instances; a family may have at most {MAX_INSTANCES_PER_FAMILY} "
            "(split it or constrain it)"
        )
    if not out:
        raise TemplateError("no instance satisfies the constraints")
    return out


@dataclass
class Assembled:
    """An instance turned into a question spec, and the distractors the build dropped (with why)."""

    spec: dict[str, Any]
    dropped: list[str] = field(default_factory=list)


class InstanceError(ValueError):
    """An instance cannot become a valid question (too few distinct choices, a template error...)."""


def computed_answer(inst: Instance) -> Answer:
    """The answer of an instance that is not run: its ``value`` formula or ``answer`` template."""
    fam = inst.family
    if fam.value is not None:
        value = evaluate(fam.value, inst.context)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise InstanceError(f"value {fam.value!r} gave {value!r}, not a number")
        return Answer.from_value(value, fam.answer_format, fam.unit)
    assert fam.answer is not None  # checked by FamilySpec
    return Answer(render(fam.answer, inst.context).strip())


def verdict_answer(inst: Instance) -> Answer:
    """The answer of a hang/error family: its ``answer`` template (the build checks the verdict)."""
    assert inst.family.answer is not None
    return Answer(render(inst.family.answer, inst.context).strip())


def assemble(inst: Instance, answer: Answer) -> Assembled:
    """The instance as an ordinary question spec: the real answer plus distractors, shuffled stably."""
    fam = inst.family
    ctx = {**inst.context, "answer": answer.text}
    rule_ctx = RuleContext(answer, inst.context, evaluate, render)
    correct = {"text": answer.text, "correct": True}
    if fam.correct_feedback:
        correct["feedback"] = render(fam.correct_feedback, ctx).strip()
    choices: list[dict[str, Any]] = [correct]
    seen = {normalise(answer.text)}
    dropped: list[str] = []
    for i, d in enumerate(fam.distractors):
        label = d.rule or f"text #{i}"
        if d.when is not None and not evaluate(d.when, inst.context):
            continue
        try:
            text = apply_rule(d.rule, rule_ctx, d.args) if d.rule else render(d.text or "", ctx).strip()
        except RuleError as exc:
            raise InstanceError(f"distractor {label}: {exc}") from None
        if text is None or normalise(text) in seen or not text.strip():
            dropped.append(f"{label}: same as the answer or another choice here")
            continue
        seen.add(normalise(text))
        choice: dict[str, Any] = {"text": text}
        feedback = d.feedback or (RULES[d.rule].teaches.capitalize() + "." if d.rule else None)
        if feedback:
            choice["feedback"] = reflow(render(feedback, ctx).strip())
        choices.append(choice)
        if len(choices) == fam.max_choices:
            break
    if len(choices) < fam.min_choices:
        raise InstanceError(
            f"only {len(choices)} distinct choices (min_choices {fam.min_choices}); "
            f"dropped: {'; '.join(dropped)}"
        )
    # Stable shuffle: the correct letter varies between instances but never between builds.
    random.Random(hashlib.sha256(inst.id.encode()).hexdigest()).shuffle(choices)
    spec: dict[str, Any] = {
        "id": inst.id,
        # Plain strings: the generated file is YAML, and its safe dumper knows no enums.
        "kind": fam.kind.value,
        "topic": fam.topic,
        "difficulty": fam.difficulty.value,
        "prompt": reflow(inst.prompt.strip()) + "\n",
    }
    if inst.code is not None:
        spec["code"] = inst.code.rstrip() + "\n"
    if inst.runner is not None:
        spec["runner"] = inst.runner
    spec["choices"] = choices
    spec["hint"] = reflow(render(fam.hint, ctx).strip())
    if fam.explanation:
        spec["explanation"] = reflow(render(fam.explanation, ctx).strip()) + "\n"
    spec["time_limit_s"] = fam.time_limit_s
    spec["attempts"] = fam.attempts
    spec["tags"] = [*fam.tags, "family"]
    spec["source"] = f"family {fam.id}"
    spec["concept"] = fam.concept or fam.id
    spec["experience"] = fam.experience(inst.context)
    if fam.value is not None:
        spec["arithmetic"] = True
    try:
        QuestionSpec.model_validate(spec)
    except ValidationError as exc:
        raise InstanceError(f"not a valid question: {exc.errors()[0]['msg']}") from None
    return Assembled(spec, dropped)


# --------------------------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class LoadedFamily:
    """A validated family and where it was written."""

    spec: FamilySpec
    file: str
    line: int


def load_family_text(text: str, file: str) -> list[LoadedFamily]:
    """Validate one family file; BankValidationError with file:line: field: message otherwise."""
    data, lines = parse_yaml_with_lines(text, file)
    if not isinstance(data, dict) or "families" not in data:
        raise BankValidationError([BankError(file, 1, "families", "a family file has a 'families:' list")])
    try:
        parsed = FamilyFile.model_validate(data)
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = 1
            for cut in range(len(loc), -1, -1):
                if loc[:cut] in lines:
                    line = lines[loc[:cut]]
                    break
            where = ".".join(str(p) for p in loc) or "(file)"
            errors.append(BankError(file, line, where, str(err["msg"]).removeprefix("Value error, ")))
        raise BankValidationError(errors) from None
    return [LoadedFamily(f, file, lines.get(("families", i), 1)) for i, f in enumerate(parsed.families)]


def family_files(paths: Iterable[str | Path]) -> list[Path]:
    """Family YAML files under ``paths`` (files or folders), sorted."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(x for x in p.rglob("*") if x.suffix in {".yaml", ".yml"} and x.is_file()))
        elif p.exists():
            out.append(p)
        else:
            raise BankValidationError([BankError(str(p), 0, "(path)", "no such file or directory")])
    return out


def load_families(paths: Sequence[str | Path]) -> list[LoadedFamily]:
    """Every family under ``paths``; family ids must be unique."""
    errors: list[BankError] = []
    loaded: list[LoadedFamily] = []
    for path in family_files(paths):
        try:
            # The bank's own reader: the same size cap and UTF-8 errors with a line as question files.
            loaded.extend(load_family_text(read_bank_file(path), str(path)))
        except BankValidationError as exc:
            errors.extend(exc.errors)
    for fam, first in repeated_ids(loaded):
        where = f"duplicate family id (first at {first.file}:{first.line})"
        errors.append(BankError(fam.file, fam.line, f"id ({fam.spec.id})", where))
    if errors:
        raise BankValidationError(errors)
    return loaded


def family_of(question_id: str) -> str:
    """The family of a question id: the part before '/' for instances, the id itself otherwise."""
    return question_id.split("/", 1)[0]
