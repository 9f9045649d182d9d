"""Parsing and validation of what players and admins type, the same on every platform.

Each function takes the words a command was given (a Slack command's text split like a shell line, a
Discord option's value) and returns typed values for one service call, or raises a
:class:`~bot.core.errors.ConfigurationError` saying what is wrong and what to write instead; the adapter
shows the message as is (``command``: how the platform spells the command in usage lines, e.g.
``"/rankzero "``). Choices (scope, period, kind, difficulty) are the core vocabulary's enums.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bot.core.errors import ConfigurationError
from bot.core.vocabulary import Period, Scope, parse_enum

#: ``schedule set`` options and the set_schedule argument each fills (ints where the CLI has ints).
SCHEDULE_OPTIONS: dict[str, tuple[str, type]] = {
    "--time": ("post_time", str),
    "--tz": ("timezone", str),
    "--days": ("days", str),
    "--problems": ("problems", int),
    "--time-limit": ("time_limit_s", int),
    "--attempts": ("attempts", int),
    "--window": ("window", str),
    "--reminder": ("reminder", str),
    "--weekly-summary": ("weekly_summary", str),
    "--team-report": ("team_report", str),
}
#: The set_schedule arguments (what a form or a typed option may fill).
SCHEDULE_FIELDS = frozenset(name for name, _ in SCHEDULE_OPTIONS.values())
#: Other names a platform shows for a leaderboard scope (Discord calls a workspace a server).
SCOPE_ALIASES = {"server": Scope.WORKSPACE, "guild": Scope.WORKSPACE}
#: ``today:3``, ``today 3``, ``today/3``: problem 3 of today's challenge in this channel.
TODAY_PROBLEM = re.compile(r"today\s*[:/ ]?\s*(\d+)", re.IGNORECASE)
#: The longest question id a command takes (the schema's own limit is checked on import).
MAX_ID = 200
#: The largest problem number there can be (problem ids are 32-bit database keys).
MAX_PROBLEM_NUMBER = 2**31 - 1
#: How a command names a problem, said the same way by every platform's refusal.
PROBLEM_FORMS = (
    "today:N (problem N of today's challenge here), the id of a question asked today, or the problem's "
    "number (shown when it ended)"
)


def parse_schedule_options(words: Sequence[str]) -> dict[str, Any]:
    """``--time 09:00 --days mon-fri`` -> set_schedule keyword arguments."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        opt = words[i]
        if opt not in SCHEDULE_OPTIONS:
            raise ConfigurationError(
                f"unknown schedule option {opt!r}: use {', '.join(SCHEDULE_OPTIONS)} (each with a value)"
            )
        if i + 1 >= len(words):
            raise ConfigurationError(
                f"{opt} needs a value, e.g. {opt} {'09:00' if opt == '--time' else '...'}"
            )
        name, kind = SCHEDULE_OPTIONS[opt]
        try:
            out[name] = kind(words[i + 1])
        except ValueError:
            raise ConfigurationError(f"{opt} takes a whole number, not {words[i + 1]!r}") from None
        i += 2
    if not out:
        raise ConfigurationError("schedule set needs at least one option, e.g. --time 09:00")
    return out


def schedule_changes(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a form or typed command filled in (None: keep the current value)."""
    unknown = set(options) - SCHEDULE_FIELDS
    if unknown:  # a programming error in an adapter, not user input
        raise ValueError(f"not schedule settings: {sorted(unknown)}")
    return {k: v for k, v in options.items() if v is not None}


def parse_scope(word: str) -> Scope:
    """A leaderboard scope (``channel``, ``workspace``; ``server`` on Discord)."""
    alias = SCOPE_ALIASES.get(word.strip().lower())
    if alias is not None:
        return alias
    try:
        return parse_enum(Scope, word, "leaderboard scope")
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def parse_period(word: str) -> Period:
    """A leaderboard period (``today``, ``week``, ``all``)."""
    try:
        return parse_enum(Period, word, "leaderboard period")
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def parse_leaderboard(words: Sequence[str]) -> tuple[Scope, Period]:
    """``[scope] [period]`` in any order, defaults ``channel`` and ``all``."""
    scope, period = Scope.CHANNEL, Period.ALL
    scopes = {s.value for s in Scope} | set(SCOPE_ALIASES)
    for word in words:
        if word.strip().lower() in scopes:
            scope = parse_scope(word)
        else:
            period = parse_period(word)
    return scope, period


def parse_close_now(words: Sequence[str], *, command: str = "") -> int | None:
    """``close-now [challenge-id]``: the id, or None for the channel's latest open challenge."""
    if len(words) > 1 or (words and not words[0].isdigit()):
        raise ConfigurationError(f"usage: {command}close-now [challenge-id] (default: the latest open one)")
    return int(words[0]) if words else None


def parse_post_now(words: Sequence[str], *, command: str = "") -> None:
    """``post-now`` takes nothing: the channel's schedule decides the window, problems and limits."""
    if words:
        raise ConfigurationError(
            f"usage: {command}post-now (no options: the channel's schedule gives the window, the problem "
            f"count and the limits; change them with {command}schedule set)"
        )


def question_id(word: str) -> str:
    """A question id typed in a command (``retire``, ``preview``, ``correct``)."""
    qid = word.strip()
    if not qid or len(qid) > MAX_ID or any(c.isspace() for c in qid):
        raise ConfigurationError(
            f"{qid[:40]!r} is not a question id: ids are one word (letters, digits, dashes), e.g. ddp-hang"
        )
    return qid


def parse_retire(words: Sequence[str], *, command: str = "") -> str:
    """``question retire <question-id>``."""
    if len(words) != 1:
        raise ConfigurationError(f"usage: {command}question retire <question-id>, e.g. ddp-hang")
    return question_id(words[0])


def parse_correct(words: Sequence[str], *, command: str = "") -> tuple[str, str]:
    """``question correct <question-id> <letter>`` (the letter is checked against the question later)."""
    if len(words) != 2:
        raise ConfigurationError(f"usage: {command}question correct <question-id> <letter>, e.g. ddp-hang B")
    letter = words[1].strip().upper()
    if len(letter) != 1 or not letter.isalpha():
        raise ConfigurationError(f"the answer is one letter (A, B, C...), not {words[1]!r}")
    return question_id(words[0]), letter


def parse_flags(words: Sequence[str], *, command: str = "") -> bool:
    """``question flags [all]``: True for every flag, False for the open ones."""
    if list(words) not in ([], ["all"]):
        raise ConfigurationError(f"usage: {command}question flags [all]")
    return bool(words)


def split_variant(text: str) -> tuple[str, str | None]:
    """``dispute 12 ```code``` `` -> ("dispute 12 ", "code"); text without a fence -> (text, None).

    Slack sends ``&``, ``<`` and ``>`` of a command's text as entities; the code gets them back. A
    leading ``python``/``py`` language tag is dropped.
    """
    head, fence, rest = text.partition("```")
    if not fence:
        return text, None
    body, closing, _ = rest.rpartition("```")
    if not closing:
        raise ConfigurationError("the variant's code block is not closed: end it with ```")
    code = _LANG_TAG.sub("", body.lstrip(" "), count=1)
    code = code.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    if not code.strip():
        raise ConfigurationError("the variant's code block is empty: put the snippet between the ```")
    return head, code


def problem_reference(text: str) -> str | int:
    """A problem as a command names it: its number (an int), ``today:N`` or a question id (a str, resolved
    against today's challenge by :meth:`bot.commands.handlers.Commands.resolve_problem`).

    ConfigurationError, listing the forms, for anything else: empty, several words, over MAX_ID
    characters, a number too long to be one, anything not ASCII (question ids are ASCII slugs; a ``²``
    is a digit to ``str.isdigit`` but no number).
    """
    reference = text.strip()
    plain = reference.isascii() and reference.isprintable() and not any(c.isspace() for c in reference)
    if plain and reference.isdigit() and len(reference) <= 10:
        return int(reference)
    if TODAY_PROBLEM.fullmatch(reference):
        return reference
    if plain and reference and not reference.isdigit() and len(reference) <= MAX_ID:
        return reference
    raise ConfigurationError(f"{reference[:40]!r} names no problem: use {PROBLEM_FORMS}")


def parse_dispute_target(words: Sequence[str], *, command: str = "") -> str:
    """The problem a dispute names: the number shown on the problem, ``today:N`` (problem N of today's
    challenge in the channel) or the id of a question asked today, resolved by
    :meth:`bot.commands.handlers.Commands.resolve_problem`.
    """
    reference = " ".join(words).strip()
    try:
        problem_reference(reference)
    except ConfigurationError:
        raise ConfigurationError(
            f"usage: {command}dispute <problem> ({PROBLEM_FORMS}), optionally followed by a variant of its "
            "code in a ``` block"
        ) from None
    return reference


_LANG_TAG = re.compile(r"\A(?:python3?|py)[ \t]*\n")
