"""Grade a free-text "explain" answer by the concepts it covers. Pure, deterministic, no models.

Each concept of an explain prompt lists keywords (single words, phrases, or code like ``model.to`` and
``cuda:0``). An answer covers a concept when at least one keyword occurs in it, affirmatively.

Why this matcher, and not embeddings or an LLM: answers are short (a paragraph), the bank's authors
already enumerate the wording a correct answer uses, and graders must be deterministic, explainable
("matched: 'scatters'") and fast enough to run inside a chat interaction (microseconds, no network). What
keyword matching gets wrong is handled by normalising both sides the same way:

1. **Tokens with word boundaries.** Text is lower-cased and split into word tokens, so ``gather`` never
   matches inside "together" and ``split`` not inside "splitter". Code punctuation inside a word is kept as
   its own token (``model.to(device)`` → ``model . to``, ``cuda:0`` → ``cuda : 0``), so code keywords
   match code in answers, including inside longer calls (``torch.cuda.is_available()``). Possessives drop
   ("model's" → "model"); hyphens and slashes count as spaces ("all-reduce" = "all reduce"; a
   multi-word keyword also matches its closed-up form, "allreduce").
2. **Light stemming.** A small suffix stripper (plural -s/-es/-ies, -ed, -ing, -ly, final -e, doubled
   final consonants, British -ise/-isation → -ize/-ization) maps "splits", "splitting", "split" to one
   stem and "copies"/"copied" to "copy". It is deliberately conservative (no Porter step 2-5), so
   unrelated words do not collide; keywords go through the same function, so they always match
   themselves.
3. **Aliases.** A short table of domain synonyms ("device" = "gpu", "chop"/"partition" = "split",
   "piece" = "chunk", "backprop", "sync", "grad") is applied to both sides, for wordings the bank's
   keyword lists do not spell out.
4. **Phrases.** A multi-word keyword matches only as consecutive tokens ("in parallel", "main gpu").
5. **Negation.** An occurrence preceded, within the same clause and at most 3 tokens back, by a negator
   (not, no, never, without, n't...) does not count: "it does not copy the model" does not cover
   "the model is replicated". A keyword that itself begins with a negator ("does not scale", "without
   changing") is matched as written.

Unknown concepts are reported as missed, so a player sees exactly what to add.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

#: Words that negate what follows them in the same clause.
NEGATORS = frozenset({"not", "no", "never", "without", "neither", "nor", "cannot", "none", "nothing"})
#: How many tokens back a negator still applies.
NEGATION_WINDOW = 3

_CLAUSE_SPLIT = re.compile(r"[;,!?\n]|\.(?![a-z0-9_])|\bbut\b|\bwhereas\b|\bwhile\b")
_TOKEN = re.compile(r"[a-z0-9_]+|(?<=[a-z0-9_])[.:](?=[a-z0-9_])")
_CONTRACTION = re.compile(r"([a-z])n['’]t\b")
_POSSESSIVE = re.compile(r"['’]s\b")
_DOUBLE = re.compile(r"([bdfgklmnprt])\1$")

#: Domain aliases, applied to answers and keywords alike (so either spelling matches the other). Kept
#: short and specific: a generic word here ("part", "share") would cover concepts by accident.
ALIASES: dict[str, str] = {
    "device": "gpu",
    "gpus": "gpu",  # the stemmer keeps "-us" endings (bus, status), so plural GPUs are listed here
    "cpus": "cpu",
    "chop": "split",
    "partition": "split",
    "piece": "chunk",
    "backprop": "backpropagation",
    "sync": "synchronize",
    "grad": "gradient",
}


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A conservative English stem: enough to unify inflections of the same word."""
    if len(word) <= 3 or not word.isalpha():
        return word
    w = word
    w = re.sub(r"isation$", "ization", w)
    w = re.sub(r"is(e|es|ed|ing)$", r"iz\1", w)
    if w.endswith(("ies", "ied")) and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ily") and len(w) > 5:
        w = w[:-3] + "y"
    elif w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            w = _DOUBLE.sub(r"\1", w)
            break
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


_ALIAS_STEMS = {stem(k): stem(v) for k, v in ALIASES.items()}


def _canonical(token: str) -> str:
    stemmed = stem(token)
    return _ALIAS_STEMS.get(stemmed, stemmed)


def _normalise(text: str) -> str:
    text = text.lower().replace("’", "'")
    text = text.replace("can't", "can not").replace("won't", "will not")
    text = _CONTRACTION.sub(r"\1 not", text)
    text = _POSSESSIVE.sub("", text)
    return re.sub(r"[-/]", " ", text)


def tokenize(text: str) -> list[list[str]]:
    """Clauses of stemmed tokens."""
    clauses = _CLAUSE_SPLIT.split(_normalise(text))
    out = []
    for clause in clauses:
        tokens = [_canonical(t) for t in _TOKEN.findall(clause)]
        if tokens:
            out.append(tokens)
    return out


def keyword_tokens(keyword: str) -> list[str]:
    """A keyword as the token sequence it must match."""
    return [_canonical(t) for t in _TOKEN.findall(_normalise(keyword))]


@dataclass(frozen=True)
class ConceptResult:
    """One concept and whether the answer covers it (with the keyword that matched)."""

    name: str
    covered: bool
    matched: str | None = None


@dataclass(frozen=True)
class ExplainGrade:
    """How an explain answer did: each concept's result, in the question's order."""

    concepts: tuple[ConceptResult, ...]

    @property
    def covered(self) -> int:
        """Concepts covered."""
        return sum(c.covered for c in self.concepts)

    @property
    def total(self) -> int:
        """Concepts asked for."""
        return len(self.concepts)

    @property
    def missed(self) -> tuple[str, ...]:
        """Names of the concepts the answer did not cover."""
        return tuple(c.name for c in self.concepts if not c.covered)


def _negated(clause: list[str], start: int) -> bool:
    return any(t in NEGATORS for t in clause[max(0, start - NEGATION_WINDOW) : start])


@lru_cache(maxsize=4096)
def _needles(keyword: str) -> tuple[tuple[str, ...], ...]:
    """A keyword's token sequences: as written and, for a multi-word keyword, closed up ("allreduce")."""
    needle = tuple(keyword_tokens(keyword))
    if not needle:
        return ()
    alternatives = [needle]
    if len(needle) > 1 and all(t.isalnum() for t in needle):
        alternatives.append((_canonical("".join(_TOKEN.findall(_normalise(keyword)))),))
    return tuple(alternatives)


_Index = dict[str, list[tuple[list[str], int]]]


def _index(clauses: list[list[str]]) -> _Index:
    """Where each token occurs: token -> [(clause, position)], so a keyword is looked up, not scanned."""
    index: _Index = {}
    for clause in clauses:
        for i, token in enumerate(clause):
            index.setdefault(token, []).append((clause, i))
    return index


def _find(index: _Index, keyword: str) -> bool:
    alternatives = _needles(keyword)
    if not alternatives:
        return False
    check_negation = alternatives[0][0] not in NEGATORS
    for alt in alternatives:
        n = len(alt)
        for clause, i in index.get(alt[0], ()):
            if tuple(clause[i : i + n]) == alt and not (check_negation and _negated(clause, i)):
                return True
    return False


def grade_explanation(answer: str, concepts: Sequence[dict[str, Any]]) -> ExplainGrade:
    """Which of ``concepts`` (``[{name, keywords: [...]}]``, as in the bank) the answer covers."""
    index = _index(tokenize(answer))
    results = []
    for concept in concepts:
        matched = next((str(k) for k in concept.get("keywords") or () if _find(index, str(k))), None)
        results.append(ConceptResult(str(concept["name"]), matched is not None, matched))
    return ExplainGrade(tuple(results))
