"""The question-bank schema: one pydantic model per YAML question, shared by every importer.

The same model validates YAML files, questions added from chat (Discord/Slack modals) and the JSON
Schema in ``questions/schema.json`` (regenerate with ``rankzero questions schema``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.core.grading import keyword_problems, model_answer_problems
from bot.core.scoring import MAX_EXPERIENCE, experience_of, style_of

# The fixed lists are the core's vocabulary (defined once), re-exported because the bank's modules and
# tests name them through the schema.
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS as MULTIPLE_CHOICE_KINDS
from bot.core.vocabulary import RUNNABLE_KINDS as RUNNABLE_KINDS
from bot.core.vocabulary import Difficulty as Difficulty
from bot.core.vocabulary import Kind as Kind
from questions.answer_key import rendered
from questions.display import display_problems, invisible_problems

#: The top-level topics (the single list; /work/coord/TAXONOMY.md in issue 14). Sub-topics go in ``tags``.
TOPICS: tuple[str, ...] = (
    "Multi-GPU basics",
    "DataParallel",
    "DDP",
    "Collectives",
    "NCCL & debugging",
    "Data loading",
    "Launch & elastic",
    "Scaling & batch size",
    "Mixed precision",
    "Checkpointing",
    "FSDP & ZeRO",
    "Tensor & pipeline parallelism",
    "DeviceMesh & DTensor",
    "torch.compile",
)
LETTERS = "ABCDEF"
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{2,63}$")
#: A family instance: ``family-id/param=value,...`` (written by ``rankzero questions build``).
INSTANCE_ID_RE = re.compile(
    r"^[a-z0-9][a-z0-9-]{2,39}/[a-z0-9_]+=[A-Za-z0-9_.:+-]+(?:,[a-z0-9_]+=[A-Za-z0-9_.:+-]+)*$"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False, frozen=True)


class ChoiceSpec(_Strict):
    """One answer option; letters A, B, C... follow list order."""

    text: Annotated[str, Field(min_length=1, max_length=2000)]
    correct: bool = False
    feedback: str | None = None


class RunnerSpec(_Strict):
    """How the runner must execute a question's code to settle a dispute."""

    mode: Literal["python", "dp", "ddp"] = "python"
    nproc: Annotated[int, Field(ge=1, le=8)] = 1
    gpus: Annotated[int, Field(ge=0, le=8, description="Minimum GPUs needed to reproduce faithfully")] = 0
    init_process_group: bool = False

    @model_validator(mode="after")
    def _nproc_matches_mode(self) -> RunnerSpec:
        if self.mode != "ddp" and self.nproc != 1:
            raise ValueError(
                f"nproc must be 1 for mode {self.mode!r}; only mode 'ddp' launches several ranks"
            )
        return self


_KEYWORD_GROUPS = re.compile(r"\s\+\s")


def _keyword_error(keyword: str) -> str | None:
    """Why a keyword or pattern (``"a|b + c"``: a or b, and c, in one clause) is malformed, or None."""
    for group in _KEYWORD_GROUPS.split(keyword):
        for alt in group.split("|"):
            if not any(ch.isalnum() for ch in alt):
                return (
                    f"{keyword!r} has an empty part {alt.strip()!r}: write 'a|b + c' "
                    "(one of a or b, and c, in the same clause) with a word on each side of '|' and '+'"
                )
    return None


def _check_keywords(values: list[str]) -> list[str]:
    for value in values:
        if (error := _keyword_error(value)) is not None:
            raise ValueError(error)
    return values


Keyword = Annotated[str, Field(min_length=1, max_length=300)]


class MisconceptionSpec(_Strict):
    """A false claim about a concept: asserting it fails the concept, and the player is told why."""

    claim: Annotated[
        str,
        Field(min_length=1, max_length=200, description="Named back: 'you wrote that <claim>'"),
    ]
    correction: Annotated[str, Field(min_length=1, max_length=300, description="What is true instead")]
    patterns: Annotated[
        list[Keyword],
        Field(
            min_length=1,
            description="Wordings of the claim, as keywords ('a|b + c'); a negated one does not count",
        ),
    ]

    subject: Annotated[
        Keyword | None,
        Field(
            description=(
                "What the claim is about ('pipeline|stage'): a pattern asserts it only in a sentence that "
                "names the subject outside a contrast ('unlike pipeline parallelism, TP has no bubble' "
                "does not), or right after a sentence that does"
            ),
        ),
    ] = None

    @field_validator("patterns")
    @classmethod
    def _patterns_parse(cls, value: list[str]) -> list[str]:
        return _check_keywords(value)

    @field_validator("subject")
    @classmethod
    def _subject_parse(cls, value: str | None) -> str | None:
        return value if value is None else _check_keywords([value])[0]


class ConceptSpec(_Strict):
    """A concept an 'explain' answer should cover, recognised by its keywords (bot/core/grading.py)."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    keywords: Annotated[
        list[Keyword],
        Field(
            min_length=1,
            description="Each earns the concept: a phrase, or 'a|b + c' (a or b, and c, in one clause)",
        ),
    ]
    weak: Annotated[
        list[Keyword],
        Field(description="Supporting keywords that count half: two of them earn the concept, one does not"),
    ] = []
    misconceptions: Annotated[
        list[MisconceptionSpec],
        Field(
            description="False claims: asserting one fails the concept and names it back with the correction"
        ),
    ] = []

    @field_validator("keywords", "weak")
    @classmethod
    def _keywords_parse(cls, value: list[str]) -> list[str]:
        return _check_keywords(value)


class QuestionSpec(_Strict):
    """One question of the bank, as written in YAML."""

    id: Annotated[str, Field(description="Stable slug, unique across the bank: lowercase, digits, '-'")]
    kind: Kind
    topic: Annotated[
        str,
        Field(
            min_length=1,
            max_length=80,
            description="One of the top-level topics (TOPICS); sub-topics go in 'tags'",
            json_schema_extra={"enum": list(TOPICS)},  # editors offer the list
        ),
    ]
    difficulty: Difficulty
    prompt: Annotated[str | None, Field(description="Markdown; required except for flashcards")] = None
    code: str | None = None
    hint: str | None = None
    explanation: str | None = None
    time_limit_s: Annotated[int, Field(ge=10, le=3600)] = 120
    attempts: Annotated[int, Field(ge=1, le=5)] = 2
    tags: list[str] = Field(default_factory=list)
    choices: list[ChoiceSpec] | None = None
    runner: Annotated[
        RunnerSpec | None,
        Field(description="How the runner executes 'code'; required for predict_output and debug with code"),
    ] = None
    front: str | None = None
    back: str | None = None
    concepts: list[ConceptSpec] | None = None
    model_answer: str | None = None
    source: Annotated[str | None, Field(description="Where the question came from, e.g. 'seed 001 #2'")] = (
        None
    )
    concept: Annotated[
        str | None,
        Field(
            description="The concept the question tests (a slug); near-duplicates anywhere in the bank share "
            "it, so the daily pick counts them as one experience"
        ),
    ] = None
    experience: Annotated[
        str | None,
        Field(description="Written by the family build (concept and reasoning parameters); not by hand"),
    ] = None
    arithmetic: Annotated[
        bool | None,
        Field(description="true: answering is mostly arithmetic (the family build sets it for formulas)"),
    ] = None
    retired: Annotated[
        bool | None,
        Field(description="true: no longer picked; importing retires it, past attempts keep their version"),
    ] = None
    replaced_by: Annotated[
        str | None,
        Field(description="For a retired question: the id of the question that now states its fact"),
    ] = None

    @field_validator("id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG_RE.match(value) and not (len(value) <= 64 and INSTANCE_ID_RE.match(value)):
            raise ValueError(
                f"{value!r} is not a slug: use 3-64 lowercase letters, digits and '-', starting with a "
                "letter or digit (e.g. 'ddp-bucket-order')"
            )
        return value

    @field_validator("concept")
    @classmethod
    def _concept_slug(cls, value: str | None) -> str | None:
        if value is not None and not SLUG_RE.match(value):
            raise ValueError(f"concept {value!r}: use a slug (3-64 lowercase letters, digits, '-')")
        return value

    @model_validator(mode="after")
    def _experience_from_a_family(self) -> QuestionSpec:
        # A hand-written question names its concept; only the family build derives an experience key
        # (concept and reasoning parameters), so two authors cannot spell one experience two ways.
        if self.experience is not None and "/" not in self.id:
            raise ValueError("'experience' is derived by the family build: write 'concept' instead")
        if self.experience is not None and len(self.experience) > MAX_EXPERIENCE:
            raise ValueError(f"experience key longer than {MAX_EXPERIENCE} characters")
        return self

    @property
    def experience_key(self) -> str:
        """What a player experiences answering it (see :func:`bot.core.scoring.experience_of`)."""
        return experience_of(self.id, self.concept, self.experience)

    @property
    def style(self) -> str:
        """The kind of reasoning the daily mix rotates (see :func:`bot.core.scoring.style_of`)."""
        return style_of(self.kind, bool(self.arithmetic))

    @field_validator("topic")
    @classmethod
    def _known_topic(cls, value: str) -> str:
        if value not in TOPICS:
            raise ValueError(
                f"{value!r} is not a topic: use one of {', '.join(repr(t) for t in TOPICS)}, "
                "and put finer sub-topics in 'tags'"
            )
        return value

    @field_validator("replaced_by")
    @classmethod
    def _replaced_by_slug(cls, value: str | None) -> str | None:
        if value is not None and not SLUG_RE.match(value):
            raise ValueError(
                f"replaced_by {value!r} is not a question id (a slug such as 'ddp-bucket-order')"
            )
        return value

    @model_validator(mode="after")
    def _fields_for_kind(self) -> QuestionSpec:
        # Every problem of the question at once, one per line (the loader reports each on its own, at
        # its field's line): fixing one must not reveal the next only on the following run.
        problems = self._kind_problems()
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def _kind_problems(self) -> list[str]:
        """What the question's kind requires and this question lacks (or has but must not)."""
        kind = self.kind
        problems: list[str] = []
        if kind in MULTIPLE_CHOICE_KINDS:
            problems += _required(self.prompt, "prompt", kind)
            problems += _choice_problems(self.choices, kind)
        elif self.choices is not None:
            problems.append(f"kind '{kind}' takes no 'choices' (only multiple-choice kinds do)")
        if self.runner is not None:
            if kind not in RUNNABLE_KINDS:
                problems.append(f"'runner' is only for predict_output and debug questions, not '{kind}'")
            elif not self.code:
                problems.append("'runner' needs 'code' to run; add the snippet or drop 'runner'")
        if kind in RUNNABLE_KINDS and self.code and self.runner is None:
            problems.append(
                f"{kind} questions with code need a 'runner' block {{mode, nproc, gpus, init_process_group}} "
                "so a dispute can be settled; add it (questions/README.md says how to choose each value)"
            )
        if self.replaced_by is not None and not self.retired:
            problems.append("'replaced_by' is only for retired questions; add 'retired: true' or remove it")
        # Everything a player sees must fit the platforms whole, and show what it says (questions/display.py).
        problems += invisible_problems(self._shown_texts())
        problems += display_problems(
            prompt=self.prompt,
            code=self.code,
            hint=self.hint,
            explanation=self.explanation,
            choices=[(c.text, c.feedback) for c in self.choices or ()],
            front=self.front,
            back=self.back,
            model_answer=self.model_answer,
        )
        if kind is Kind.FLASHCARD:
            problems += _required(self.front, "front", kind) + _required(self.back, "back", kind)
        if kind is Kind.EXPLAIN:
            problems += _required(self.prompt, "prompt", kind)
            problems += _required(self.model_answer, "model_answer", kind)
            if not self.concepts:
                problems.append("kind 'explain' needs 'concepts': a list of {name, keywords: [...]}")
            else:
                problems += keyword_problems([c.model_dump() for c in self.concepts])
                if self.model_answer and self.model_answer.strip():
                    problems += _model_answer_problems(self.model_answer, self.concepts)
        return problems

    def _shown_texts(self) -> dict[str, str | None]:
        """Every text of the question a player or an admin is shown, by field (choices numbered)."""
        texts: dict[str, str | None] = {
            "topic": self.topic,
            "prompt": self.prompt,
            "code": self.code,
            "hint": self.hint,
            "explanation": self.explanation,
            "front": self.front,
            "back": self.back,
            "model_answer": self.model_answer,
        }
        for i, choice in enumerate(self.choices or ()):
            texts[f"choices[{i}].text"] = choice.text
            texts[f"choices[{i}].feedback"] = choice.feedback
        for i, tag in enumerate(self.tags):
            texts[f"tags[{i}]"] = tag
        return texts

    @property
    def correct_letter(self) -> str | None:
        """The letter of the correct choice, or None for kinds without choices."""
        if not self.choices:
            return None
        return next(LETTERS[i] for i, c in enumerate(self.choices) if c.correct)


#: How many of a model answer's problems one error lists (a prompt has a handful of concepts).
MAX_MODEL_ANSWER_PROBLEMS = 8


def _model_answer_problems(model_answer: str, concepts: list[ConceptSpec]) -> list[str]:
    """Refuse an explain prompt whose model answer its own grader would not give full marks.

    Graded exactly as a player's answer is (bot/core/grading.py): every concept covered, none of the
    prompt's misconceptions asserted, prose rather than a keyword list. One problem per line, bounded.
    """
    problems = model_answer_problems(model_answer, [c.model_dump() for c in concepts])
    shown = problems[:MAX_MODEL_ANSWER_PROBLEMS]
    if len(problems) > len(shown):
        shown.append(f"and {len(problems) - len(shown)} more")
    return [
        f"'model_answer' would not earn full marks from its own concepts (graded as a player's answer is): "
        f"{problem}"
        for problem in shown
    ]


def _choice_problems(choices: list[ChoiceSpec] | None, kind: Kind) -> list[str]:
    """What is wrong with a multiple-choice question's choices."""
    if not choices:
        return [f"kind '{kind}' needs 'choices': a list of 2 to 6 {{text, correct}} items"]
    problems = []
    if not 2 <= len(choices) <= 6:
        problems.append(f"'choices' has {len(choices)} items; a question needs 2 to 6")
    n_correct = sum(c.correct for c in choices)
    if n_correct != 1:
        problems.append(f"'choices' has {n_correct} items with correct: true; mark exactly one as correct")
    # Compared as a player reads them: `x` and x, or two spaces and one, look the same in chat.
    seen: dict[str, int] = {}
    for i, choice in enumerate(choices):
        shown = rendered(choice.text)
        if shown in seen:
            problems.append(
                f"'choices' {LETTERS[seen[shown]]} and {LETTERS[i]} render the same text ({shown!r}) once "
                "whitespace and Markdown markers are normalised: drop one, or word them so a player can tell "
                "them apart"
            )
        else:
            seen.setdefault(shown, i)
    return problems


def _required(value: str | None, name: str, kind: Kind) -> list[str]:
    """The problem of a required text field left out or blank (empty when it is there)."""
    if value is None or not value.strip():
        return [f"kind '{kind}' needs a non-empty '{name}'"]
    return []


class Collection(_Strict):
    """Optional file-level metadata: a named set of questions (e.g. a seed challenge and its badge)."""

    id: str
    title: str
    badge: str | None = None
    description: str | None = None


class BankFile(_Strict):
    """The top level of one YAML file under questions/."""

    collection: Collection | None = None
    questions: list[QuestionSpec]
    generated: Annotated[
        dict[str, Any] | None,
        Field(description="Build records of a generated file (rankzero questions build); never edit by hand"),
    ] = None


def json_schema() -> dict[str, object]:
    """The JSON Schema of a bank file (editors use it for completion and inline errors)."""
    schema = BankFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "RankZero question bank file"
    return schema
