"""Matching a runner verdict against a question's choices (pure functions, no I/O).

The rules, in the order they apply:

* the output is every rank's stdout joined in rank order, compared line by line with whitespace
  normalised (runs of spaces collapsed, blank lines and trailing spaces ignored);
* ``some_value``-style placeholders in a choice match any number;
* device suffixes (``device='cuda:0'``) must agree; a choice that differs only by one is a mismatch whose
  explanation names the suffix on each side;
* a rank that died of an exception matches a choice naming the error (``RuntimeError: msg...``: same
  type, and the choice's message is a prefix of the real one);
* a timeout matches a choice that says the snippet hangs, and is explained from ``stuck_at``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bot.core.models import Choice, Question
from bot.core.verdicts import RunnerHealth, RunSpec, RunVerdict
from bot.core.vocabulary import Kind

Verification = Literal["confirmed", "contradicted", "cannot_check"]

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_PLACEHOLDER = re.compile(r"<?\bsome_[A-Za-z0-9_]+\b>?")
_DEVICE = re.compile(r",?\s*device='([a-z]+(?::\d+)?)'")
_ERROR_CHOICE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Interrupt|Exit))\b:?\s*(.*)$", re.S
)
_HANG_WORDS = re.compile(
    r"\b(hangs?|hanging|deadlocks?|never (?:returns|finishes|completes)|blocks forever)\b", re.I
)
_WORLD_SIZE = re.compile(r"\bworld_size\s*=\s*(\d+)")
#: Calls that wait for every rank to arrive: a rank stuck here is waiting for ranks that never came.
_RENDEZVOUS = {"init_process_group", "barrier", "rendezvous", "monitored_barrier", "new_group"}
_SIGNALS = {6: "SIGABRT (abort)", 9: "SIGKILL", 11: "SIGSEGV (segmentation fault)", 15: "SIGTERM"}


def normalise(text: str) -> str:
    """Whitespace-normalised text: each line stripped with inner runs collapsed, blank lines dropped."""
    lines = (" ".join(line.split()) for line in text.strip().splitlines())
    return "\n".join(line for line in lines if line)


def _pattern(choice_text: str, *, whole: bool = True) -> re.Pattern[str]:
    """A regex for a normalised choice where ``some_value``-style placeholders match any number.

    ``whole=False`` matches a prefix (an error message the choice only begins).
    """
    parts = _PLACEHOLDER.split(choice_text)
    body = f"(?:{_NUMBER})".join(re.escape(p) for p in parts)
    return re.compile(body + (r"\Z" if whole else ""))


def _devices(text: str) -> list[str]:
    return _DEVICE.findall(text)


def _describe_devices(devices: list[str]) -> str:
    return ", ".join(f"device='{d}'" for d in sorted(set(devices))) if devices else "no device suffix"


@dataclass(frozen=True)
class ChoiceMatch:
    """Whether one choice matches what the runner showed, and why (not)."""

    letter: str
    matches: bool
    reason: str


@dataclass(frozen=True)
class MatchResult:
    """Which choice the real run matches, and whether that agrees with the official answer."""

    observed: str
    matched_letter: str | None
    official_letter: str | None
    verification: Verification
    explanation: str
    choices: tuple[ChoiceMatch, ...]

    @property
    def agrees(self) -> bool | None:
        """True when the run confirms the official answer, False when it contradicts it, else None."""
        return {"confirmed": True, "contradicted": False}.get(self.verification)


@dataclass(frozen=True)
class AdminNotice:
    """A message for the admin channel: a question whose official answer the runner contradicts."""

    question_id: str
    question_version: int
    official_letter: str | None
    matched_letter: str | None
    explanation: str
    flag_id: int
    raised_by: str


def gpu_shortfall(spec: RunSpec, health: RunnerHealth) -> str | None:
    """'cannot reproduce here: needs N GPUs ...' when the runner has fewer GPUs than the question needs.

    For a fleet, ``health`` describes its largest runner: the text then says that no runner has enough.
    """
    if spec.gpus > health.hardware.gpus:
        has = health.hardware.gpus
        who = (
            f"this runner has {has}"
            if health.fleet_size <= 1
            else f"none of the {health.fleet_size} runners has more than {has}"
        )
        return (
            f"cannot reproduce here: needs {spec.gpus} GPU{'s' if spec.gpus != 1 else ''}, "
            f"{who} ({health.hardware.describe()}); a CPU result would be misleading"
        )
    return None


def explain_hang(verdict: RunVerdict, code: str | None = None) -> str:
    """'the snippet hangs: rank 0 stuck in init_process_group at line 9; rank 1 never joined'."""
    stuck = []
    waiting_for_peers = False
    for r in verdict.ranks:
        if r.stuck_at is None:
            stuck.append(f"rank {r.rank} stopped (no stack)")
            continue
        call = r.stuck_at.call or "an unknown call"
        where = f"line {r.stuck_at.line}"
        if r.stuck_at.function not in ("<module>", ""):
            where += f" (in {r.stuck_at.function})"
        stuck.append(f"rank {r.rank} stuck in {call} at {where}")
        waiting_for_peers |= (r.stuck_at.call or "") in _RENDEZVOUS
    text = "the snippet hangs: " + "; ".join(stuck or ["no rank reported where it was"])
    launched = len(verdict.ranks)
    hard_coded = [int(n) for n in _WORLD_SIZE.findall(code or "")]
    expected = max(hard_coded, default=0)
    if waiting_for_peers and expected > launched:
        missing = [str(i) for i in range(launched, expected)]
        who = f"rank {missing[0]}" if len(missing) == 1 else f"ranks {', '.join(missing)}"
        text += (
            f"; {who} never joined (world_size={expected} is hard-coded, "
            f"but {launched} process{'es were' if launched != 1 else ' was'} launched)"
        )
    elif waiting_for_peers and launched == 1:
        text += "; no other rank was launched to join it"
    return text


def describe_outcome(verdict: RunVerdict, code: str | None = None) -> str:
    """One sentence on what the run did (for the explanation and for admins)."""
    status = verdict.status
    if status == "ok":
        out = normalise(verdict.stdout)
        return f"it printed {out!r}" if out else "it printed nothing"
    if status == "timeout":
        return explain_hang(verdict, code)
    cause = verdict.root_cause
    if status in ("error", "oom") and cause is not None and cause.exception is not None:
        exc = cause.exception
        at = f" at line {exc.line}" if exc.line is not None else ""
        return f"rank {cause.rank} raised {exc.type}: {exc.message}{at}"
    if status == "crashed" and cause is not None and cause.signal is not None:
        return f"rank {cause.rank} was killed by {_SIGNALS.get(cause.signal, f'signal {cause.signal}')}"
    if cause is not None and cause.exit_code not in (None, 0):
        return f"rank {cause.rank} exited with status {cause.exit_code}"
    notes = "; ".join(verdict.notes)
    return f"the runner answered {status}" + (f" ({notes})" if notes else "")


def _match_output(choice: Choice, observed: str) -> ChoiceMatch:
    text = normalise(choice.text)
    if _pattern(text).match(observed):
        placeholder = " (its placeholders match any number)" if _PLACEHOLDER.search(text) else ""
        return ChoiceMatch(choice.letter, True, "matches the output" + placeholder)
    want, got = _devices(text), _devices(observed)
    if want != got and _pattern(_DEVICE.sub("", text)).match(_DEVICE.sub("", observed)):
        return ChoiceMatch(
            choice.letter,
            False,
            f"differs only by the device suffix: the choice shows {_describe_devices(want)}, "
            f"the output has {_describe_devices(got)}",
        )
    if "\n" in text or "\n" in observed:
        w, g = text.splitlines(), observed.splitlines()
        for i, (a, b) in enumerate(zip(w, g, strict=False), start=1):
            if not _pattern(a).match(b):
                return ChoiceMatch(choice.letter, False, f"line {i} differs: {a!r} vs {b!r}")
        return ChoiceMatch(choice.letter, False, f"{len(w)} line(s) in the choice, {len(g)} in the output")
    return ChoiceMatch(choice.letter, False, f"{text!r} is not the output")


def _match_error(choice: Choice, verdict: RunVerdict) -> ChoiceMatch:
    cause = verdict.root_cause
    exc = cause.exception if cause is not None else None
    named = _ERROR_CHOICE.match(normalise(choice.text))
    if exc is None:
        return ChoiceMatch(choice.letter, False, "the run did not end in an exception")
    if named is None:
        return ChoiceMatch(choice.letter, False, f"names no error, but the run raised {exc.type}")
    want_type, want_msg = named.group(1), named.group(2).strip()
    real_type = exc.type.rsplit(".", 1)[-1]
    if want_type != real_type:
        return ChoiceMatch(choice.letter, False, f"names {want_type}, the run raised {real_type}")
    real_msg = normalise(exc.message)
    if want_msg and not _pattern(want_msg, whole=False).match(real_msg):
        return ChoiceMatch(choice.letter, False, f"same error type, but the message starts {real_msg[:80]!r}")
    return ChoiceMatch(choice.letter, True, f"names the exception the run raised ({real_type})")


def _match_hang(choice: Choice) -> ChoiceMatch:
    if _HANG_WORDS.search(choice.text):
        return ChoiceMatch(choice.letter, True, "says the snippet hangs, and it does")
    return ChoiceMatch(choice.letter, False, "expects the snippet to finish, but it hangs")


def match_verdict(question: Question, verdict: RunVerdict, code: str | None = None) -> MatchResult:
    """Match a verdict against each choice of ``question`` and compare with the official answer.

    ``code`` is the snippet that ran (defaults to the question's; a player's variant otherwise).
    """
    code = code if code is not None else question.code
    official = question.correct_letter
    observed = describe_outcome(verdict, code)
    if question.kind != Kind.PREDICT_OUTPUT:
        return MatchResult(
            observed,
            None,
            official,
            "cannot_check",
            f"{observed}. The choices of a {question.kind} question are explanations, not outputs: "
            "compare them with the verdict yourself.",
            (),
        )
    if verdict.status in ("unsupported", "rejected", "oom", "output_limit"):
        notes = "; ".join(verdict.notes) or verdict.status
        return MatchResult(
            observed, None, official, "cannot_check", f"the runner could not settle it: {notes}", ()
        )
    if verdict.status == "ok":
        out = normalise(verdict.stdout)
        matches = tuple(_match_output(c, out) for c in question.choices)
    elif verdict.status == "timeout":
        matches = tuple(_match_hang(c) for c in question.choices)
    elif verdict.status == "error":
        matches = tuple(_match_error(c, verdict) for c in question.choices)
    else:
        matches = tuple(
            ChoiceMatch(c.letter, False, f"the run {verdict.status}: {observed}") for c in question.choices
        )
    hits = [m.letter for m in matches if m.matches]
    matched = hits[0] if len(hits) == 1 else None
    if len(hits) > 1:
        return MatchResult(
            observed,
            None,
            official,
            "cannot_check",
            f"{observed}; choices {', '.join(hits)} all match it, so the run cannot tell them apart",
            matches,
        )
    if matched is None:
        near = [m.reason for m in matches if "device suffix" in m.reason]
        why = f"{observed}; no choice matches" + (f" (choice {near[0]})" if near else "")
        return MatchResult(observed, None, official, "contradicted", why, matches)
    if matched == official:
        text = f"{observed}: choice {matched} matches, as the official answer says"
        return MatchResult(observed, matched, official, "confirmed", text, matches)
    text = f"{observed}: choice {matched} matches, but the official answer is {official}"
    return MatchResult(observed, matched, official, "contradicted", text, matches)
