"""``rankzero questions stats``: how much the bank can serve, and how long before a channel sees a repeat.

``days_without_repeat`` runs the real daily picker (:func:`bot.core.scoring.pick_problems`, with the
family rest rule) over an empty channel history, 5 problems a day, until a day would have to show a
question the channel has already seen.

``experiences`` counts what a player must reason about (concept × the values of a family's reasoning
parameters, :attr:`questions.schema.QuestionSpec.experience_key`), and ``fresh_weekdays`` replays the same
picker on weekdays only (a channel's schedule) until a pick repeats an experience the channel met in the
previous :data:`~bot.core.scoring.EXPERIENCE_REST_DAYS` days; ``style_shares`` is each reasoning style's
share of the picks over :data:`SHARE_WEEKDAYS` simulated weekdays.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from bot.core.models import QuestionCandidate
from bot.core.scoring import EXPERIENCE_REST_DAYS, FAMILY_REST_DAYS, pick_problems
from questions.answer_key import LETTERS, rendered
from questions.crosschecks import CROSS_CHECKS
from questions.families import family_of
from questions.loader import LoadedQuestion, iter_yaml_files
from questions.schema import MULTIPLE_CHOICE_KINDS, QuestionSpec

#: Stop simulating after this many days (a bank that lasts longer is reported as at least this).
MAX_SIMULATED_DAYS = 3650
#: Weekdays over which ``style_shares`` is measured (a year of a weekday schedule).
SHARE_WEEKDAYS = 260
#: Stop the weekday replay after this many weekdays (five years): reported as at least this.
MAX_SIMULATED_WEEKDAYS = 1300
#: Past this share of a kind's questions keyed on their longest choice, "pick the longest" beats knowing:
#: ``questions validate`` warns and ``stats`` reports ``longest_correct_share`` per kind.
LONGEST_CORRECT_LIMIT = 0.30
#: Past this share of a kind's questions keyed on one letter, "always pick that letter" beats chance:
#: ``questions validate`` warns and ``stats`` reports ``correct_position_share`` per kind.
POSITION_LIMIT = 0.40
#: A kind is judged on its letters only from this many multiple-choice questions (fewer swing by chance).
POSITION_MIN_QUESTIONS = 20
#: One bank file's hand-written questions may key one letter in at most this share of them...
FILE_POSITION_LIMIT = 0.50
#: ...once it holds this many hand-written multiple-choice questions.
FILE_POSITION_MIN_QUESTIONS = 12


def replay(
    candidates: Sequence[QuestionCandidate],
    per_day: int = 5,
    start: dt.date = dt.date(2027, 1, 4),
    *,
    weekdays_only: bool = False,
) -> Iterator[tuple[dt.date, list[QuestionCandidate]]]:
    """Serve one channel with the real daily picker from ``start``: yield each day and its picks, then
    record them as asked that day (so the next day's picks see them). With ``weekdays_only``, Saturdays
    and Sundays have no challenge (a channel's schedule). Endless: the caller stops it.

    The one replay both figures read; they cannot share one pass, because the picker's rest rules count
    calendar days: ``days_without_repeat`` serves every day and ``fresh_weekdays`` weekdays only, so the
    two schedules pick differently from the first weekend on.
    """
    state = {c.question_id: c for c in candidates}
    day = start
    while True:
        if weekdays_only and day.weekday() >= 5:
            day += dt.timedelta(days=1)
            continue
        picks = pick_problems(list(state.values()), per_day, random.Random(f"stats:{day.isoformat()}"), day)
        yield day, picks
        for p in picks:
            state[p.question_id] = replace(p, uses=p.uses + 1, last_used=day)
        day += dt.timedelta(days=1)


def days_without_repeat(
    candidates: Sequence[QuestionCandidate], per_day: int = 5, start: dt.date = dt.date(2027, 1, 4)
) -> int:
    """Days the picker fills with ``per_day`` never-seen questions before its first repeat, honouring the
    family rules (one instance of a family per challenge, a family rests 7 days): a day on which the picker
    has to bend either rule also ends the count.
    """
    family_last: dict[str, dt.date] = {}
    days = replay(candidates, per_day, start)
    for served, (day, picks) in enumerate(days):
        if served == MAX_SIMULATED_DAYS:
            break
        families = [p.family for p in picks]
        rested = all((day - family_last[f]).days >= FAMILY_REST_DAYS for f in families if f in family_last)
        repeat = any(p.uses for p in picks)
        if len(picks) < per_day or repeat or len(set(families)) < len(families) or not rested:
            return served
        family_last.update((f, day) for f in families)
    return MAX_SIMULATED_DAYS


@dataclass(frozen=True)
class WeekdayReplay:
    """What replaying the daily picker on weekdays shows."""

    #: Weekdays before a pick repeats an experience met in the previous ``EXPERIENCE_REST_DAYS`` days.
    fresh_weekdays: int
    #: Each style's share of the picks over the first ``share_days`` weekdays (rounded to 3 places).
    style_shares: dict[str, float]
    #: Weekdays the shares cover (fewer when the bank cannot fill them).
    share_days: int


def replay_weekdays(
    candidates: Sequence[QuestionCandidate],
    per_day: int = 5,
    start: dt.date = dt.date(2027, 1, 4),
    share_days: int = SHARE_WEEKDAYS,
    limit: int = MAX_SIMULATED_WEEKDAYS,
) -> WeekdayReplay:
    """Replay the real picker for one channel on weekdays from ``start``: count the weekdays before a pick
    repeats an experience the channel met in the previous ``EXPERIENCE_REST_DAYS`` days (capped at
    ``limit``), and tally the styles of the first ``share_days``; one pass gives both.
    """
    met: dict[str, dt.date] = {}
    styles: Counter[str] = Counter()
    fresh: int | None = None
    weekdays = 0
    for day, picks in replay(candidates, per_day, start, weekdays_only=True):
        if weekdays >= limit or (fresh is not None and weekdays >= share_days) or not picks:
            break
        lately = {e for e, d in met.items() if (day - d).days < EXPERIENCE_REST_DAYS}
        if fresh is None and any(p.experience_key in lately for p in picks):
            fresh = weekdays
        if weekdays < share_days:
            styles.update(p.style_key for p in picks)
        met.update((p.experience_key, day) for p in picks)
        weekdays += 1
    total = sum(styles.values())
    shares = {s: round(n / total, 3) for s, n in sorted(styles.items())} if total else {}
    return WeekdayReplay(weekdays if fresh is None else fresh, shares, min(weekdays, share_days))


def verified_ids(bank_paths: Sequence[str | Path]) -> set[str]:
    """Question ids whose answer a build confirmed on the runner (the ``generated:`` run records)."""
    out: set[str] = set()
    for path in iter_yaml_files(bank_paths):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        gen = data.get("generated") if isinstance(data, dict) else None
        if isinstance(gen, dict):
            for qid, rec in (gen.get("instances") or {}).items():
                if isinstance(rec, dict) and rec.get("verified"):
                    out.add(str(qid))
    return out


#: The 2025–26 topics issue 27 §3 asks at least 6 questions of each for, recognised by the APIs, settings and
#: terms a question about them must name (in its prompt, code, choices or tags). A question may count for
#: several topics; the patterns are deliberately specific, so a count undercounts rather than overcounts.
MODERN_TOPICS: dict[str, tuple[str, ...]] = {
    # name: patterns that must all occur
    "pipelining": (
        r"torch\.distributed\.pipelining|PipelineStage|Schedule(GPipe|1F1B|Interleaved1F1B|LoopedBFS|"
        r"InterleavedZeroBubble|ZBV)|zero[- ]bubble|\bpipelining\b",
    ),
    "context-parallel": (r"context[_ -]parallel|ring[- ]attention",),
    "async-tp-symmetric-memory": (r"async[_ -]?tp\b|async tensor parallel|symmetric[_ ]memory|symm_mem",),
    "float8": (r"float8|\bfp8\b|torchao",),
    "activation-checkpointing-fsdp2": (
        r"checkpoint_wrapper|activation checkpoint|torch\.utils\.checkpoint|apply_activation_checkpointing",
        r"fully_shard|FSDP2",
    ),
    "zero-plus-plus-hpz": (r"hpZ|ZeRO\+\+|reshard_after_forward\s*=\s*\d",),
    "fsdp2-prefetch": (r"set_modules_to_(forward|backward)_prefetch|forward prefetch|backward prefetch",),
    "nccl-tuning": (
        r"NCCL_(ALGO|PROTO|NCHANNELS|MIN_NCHANNELS|MAX_NCHANNELS|BUFFSIZE)|\bNVLS\b|CUDA_DEVICE_MAX_CONNECTIONS",
    ),
    "memory-snapshot-allocator": (
        r"_record_memory_history|memory snapshot|_dump_snapshot|expandable_segments",
    ),
    "flight-recorder-stragglers": (
        r"flight[- ]recorder|TORCH_NCCL_TRACE_BUFFER_SIZE|TORCH_NCCL_DUMP_ON_TIMEOUT|straggler",
    ),
    "fault-tolerance": (r"torchft|fault[- ]toleran",),
}
_MODERN = {name: [re.compile(p, re.IGNORECASE) for p in patterns] for name, patterns in MODERN_TOPICS.items()}


def _question_text(spec: QuestionSpec) -> str:
    parts = [spec.prompt, spec.code, *(c.text for c in spec.choices or []), *(spec.tags or [])]
    return "\n".join(p for p in parts if p)


def modern_topic_counts(specs: Sequence[QuestionSpec]) -> dict[str, int]:
    """Per 2025–26 topic (:data:`MODERN_TOPICS`): how many questions (any kind) are about it."""
    texts = [_question_text(s) for s in specs]
    return {
        name: sum(1 for t in texts if all(p.search(t) for p in patterns))
        for name, patterns in _MODERN.items()
    }


def correct_is_longest(spec: QuestionSpec) -> bool:
    """Whether the keyed choice is strictly longer, as a player reads it, than every other choice."""
    choices = spec.choices or []
    lengths = [len(rendered(c.text)) for c in choices]
    keyed = [i for i, c in enumerate(choices) if c.correct]
    if len(keyed) != 1:
        return False  # the answer-key check refuses it; not a length question
    key = keyed[0]
    return all(lengths[key] > n for i, n in enumerate(lengths) if i != key)


def longest_correct_shares(specs: Sequence[QuestionSpec]) -> dict[str, float]:
    """Per multiple-choice kind: the share of its questions whose keyed choice is the longest."""
    total: Counter[str] = Counter()
    longest: Counter[str] = Counter()
    for spec in specs:
        if spec.kind in MULTIPLE_CHOICE_KINDS and spec.choices:
            total[spec.kind] += 1
            longest[spec.kind] += correct_is_longest(spec)
    return {kind: round(longest[kind] / n, 3) for kind, n in sorted(total.items())}


def longest_correct_warnings(specs: Sequence[QuestionSpec]) -> list[str]:
    """One line per kind whose longest-choice share is past :data:`LONGEST_CORRECT_LIMIT`."""
    return [
        f"{kind}: the correct choice is the longest in {share:.0%} of these questions (limit "
        f"{LONGEST_CORRECT_LIMIT:.0%}): a player who picks the longest choice wins; lengthen a distractor "
        f"or shorten the answer"
        for kind, share in longest_correct_shares(specs).items()
        if share > LONGEST_CORRECT_LIMIT
    ]


def correct_letter(spec: QuestionSpec) -> str | None:
    """The letter players see on the keyed choice (choices are shown in spec order: a family instance's
    spec is already its stable shuffle); None unless exactly one choice is keyed.
    """
    keyed = [i for i, c in enumerate(spec.choices or []) if c.correct]
    return LETTERS[keyed[0]] if len(keyed) == 1 and keyed[0] < len(LETTERS) else None


def _letter_counts(specs: Sequence[QuestionSpec]) -> dict[str, Counter[str]]:
    """Per multiple-choice kind: how many of its questions key each letter (every letter a question of
    the kind offers appears, so a letter never keyed counts 0).
    """
    counts: dict[str, Counter[str]] = {}
    for spec in specs:
        if spec.kind not in MULTIPLE_CHOICE_KINDS or not spec.choices:
            continue
        letter = correct_letter(spec)
        if letter is None:
            continue  # the answer-key check refuses it
        kind = counts.setdefault(spec.kind, Counter())
        for offered in LETTERS[: len(spec.choices)]:
            kind[offered] += 0
        kind[letter] += 1
    return counts


def correct_position_shares(specs: Sequence[QuestionSpec]) -> dict[str, dict[str, float]]:
    """Per multiple-choice kind: the share of its questions whose keyed choice is shown as each letter."""
    out: dict[str, dict[str, float]] = {}
    for kind, counts in sorted(_letter_counts(specs).items()):
        total = sum(counts.values())
        out[kind] = {letter: round(n / total, 3) for letter, n in sorted(counts.items())}
    return out


def correct_position_warnings(specs: Sequence[QuestionSpec]) -> list[str]:
    """One line per kind (of at least :data:`POSITION_MIN_QUESTIONS` questions) whose keyed choice sits on
    one letter in more than :data:`POSITION_LIMIT` of its questions.
    """
    lines: list[str] = []
    for kind, counts in sorted(_letter_counts(specs).items()):
        total = sum(counts.values())
        if total < POSITION_MIN_QUESTIONS:
            continue
        for letter, n in sorted(counts.items()):
            if n / total > POSITION_LIMIT:
                lines.append(
                    f"{kind}: the correct choice is {letter} in {n} of {total} questions ({n / total:.0%}, "
                    f"limit {POSITION_LIMIT:.0%}): a player who always answers {letter} wins; move the "
                    f"correct choice of some hand-written {kind} questions to another position (swap whole "
                    "choice entries, text and feedback together)"
                )
    return lines


def file_position_warnings(loaded: Sequence[LoadedQuestion]) -> list[str]:
    """One line per bank file whose hand-written multiple-choice questions (at least
    :data:`FILE_POSITION_MIN_QUESTIONS`) key one letter in more than :data:`FILE_POSITION_LIMIT` of them.

    Family instances are left out: their order is a stable shuffle the author does not choose.
    """
    by_file: dict[str, Counter[str]] = {}
    for q in loaded:
        spec = q.spec
        if spec.retired or "/" in spec.id or spec.kind not in MULTIPLE_CHOICE_KINDS or not spec.choices:
            continue
        letter = correct_letter(spec)
        if letter is not None:
            by_file.setdefault(q.file, Counter())[letter] += 1
    lines: list[str] = []
    for file, counts in sorted(by_file.items()):
        total = sum(counts.values())
        if total < FILE_POSITION_MIN_QUESTIONS:
            continue
        for letter, n in sorted(counts.items()):
            if n / total > FILE_POSITION_LIMIT:
                lines.append(
                    f"{file}: the correct choice is {letter} in {n} of its {total} multiple-choice questions "
                    f"(limit {FILE_POSITION_LIMIT:.0%}): move the correct choice of some of them to another "
                    "letter (swap whole choice entries, text and feedback together; check that no prompt, "
                    "hint, explanation or feedback names a choice by its letter or position)"
                )
    return lines


def bank_stats(loaded: Sequence[LoadedQuestion], verified: set[str]) -> dict[str, Any]:
    """The figures of ``rankzero questions stats --json`` (retired questions, out of rotation, left out)."""
    loaded = [q for q in loaded if not q.spec.retired]
    mc = [q.spec for q in loaded if q.spec.kind in MULTIPLE_CHOICE_KINDS]
    instances = [s for s in mc if "/" in s.id]
    families = {family_of(s.id) for s in instances}
    candidates = [
        QuestionCandidate(i, s.id, s.topic, s.difficulty, s.kind, 0, None, s.experience_key, s.style)
        for i, s in enumerate(mc)
    ]
    replay = replay_weekdays(candidates)
    crossed = {s.id for s in instances if s.id not in verified and family_of(s.id) in CROSS_CHECKS}
    proven = crossed | ({s.id for s in instances} & verified)
    return {
        "questions": len(loaded),
        "multiple_choice": len(mc),
        "families": len(families),
        "instances": len(instances),
        "base_questions": len(mc) - len(instances),
        "verified": len({s.id for s in mc} & verified),
        "computed": sum(1 for s in instances if s.id not in verified),
        # The build refuses an instance its family's independent derivation disagrees with, so every
        # built instance of a family with a cross-check (questions/crosschecks*.py) agreed with it.
        "cross_checked": len(crossed),
        "proven_share": round(len(proven) / len(instances), 3) if instances else 0.0,
        "longest_correct_share": longest_correct_shares(mc),
        "correct_position_share": correct_position_shares(mc),
        "modern_topics": modern_topic_counts([q.spec for q in loaded]),
        "by_kind": dict(sorted(Counter(q.spec.kind for q in loaded).items())),
        "by_topic": dict(sorted(Counter(s.topic for s in mc).items())),
        "by_difficulty": dict(sorted(Counter(s.difficulty for s in mc).items())),
        "family_sizes": dict(sorted(Counter(family_of(s.id) for s in instances).items())),
        "days_without_repeat": days_without_repeat(candidates),
        "experiences": len({s.experience_key for s in mc}),
        "fresh_weekdays": replay.fresh_weekdays,
        "style_shares": replay.style_shares,
        "style_share_weekdays": replay.share_days,
    }
