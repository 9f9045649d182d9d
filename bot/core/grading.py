"""Grade a free-text "explain" answer by the concepts it covers. Pure, deterministic, no models.

Each concept of an explain prompt lists ``keywords`` (full weight), optional ``weak`` keywords (half
weight) and optional ``misconceptions``. An answer covers a concept when the keywords it states
affirmatively weigh at least 1, and it asserts none of the concept's misconceptions. It *passes* when it
covers at least 60% of the concepts (rounded up), asserts no misconception, and explains rather than
lists keywords.

Why this matcher, and not embeddings or an LLM: answers are short (a paragraph), the bank's authors
already enumerate the wording a correct answer uses and the false claims players make, and grades must
be deterministic, explainable ("matched: 'scatters'", "you wrote that ...") and fast enough to run inside
a chat interaction (microseconds, no network). What keyword matching gets wrong is handled this way:

1. **Tokens with word boundaries.** Text is lower-cased and split into word tokens, so ``gather`` never
   matches inside "together". Code punctuation inside a word is its own token (``model.to(device)`` →
   ``model . to``), so code keywords match code in answers. Hyphens and slashes count as spaces
   ("all-reduce" = "all reduce"; a multi-word keyword also matches its closed-up form, "allreduce").
2. **A real stemmer.** The Snowball English stemmer (``snowballstemmer``) maps inflections to one stem
   ("splits", "splitting" → "split"); British ``-ise`` spellings are mapped to ``-ize`` first, and a short
   alias table joins domain synonyms ("device" = "gpu", "backprop", "grads").
3. **Typo tolerance.** An answer word of 6+ letters that is not in the prompt's vocabulary is corrected
   to a vocabulary word with the same first letter within one edit (two for 9+ letters), using
   rapidfuzz's optimal-string-alignment distance ("gradeints" → "gradients", "paralel" → "parallel").
4. **Keyword forms.** A plain keyword is a phrase of consecutive tokens. ``"a|b + c"`` means one of
   ``a`` or ``b``, and ``c``, anywhere in the same clause, for wordings whose order varies
   ("labels|inputs + to the gpu").
5. **Weights.** A match made only of common words (:data:`GENERIC`: "available", "labels", "data",
   "model", "gpu", ..., and stop words) counts half, judged by the words that matched, not the keyword
   ("its ... tensor" of ``"twice|its + tensor"``), and all such matches together weigh at most half: a
   concept always needs a specific word (a phrase of 3+ words, "at the same time", is an idiom and
   counts as specific). The concept's ``weak`` keywords count half. Every distinct keyword counts once.
   :func:`keyword_problems` (run by the bank's validation) refuses keywords that break this.
6. **Negation.** A keyword preceded within its clause by a negator (not, no, never, without, n't) at
   most 3 tokens back does not count ("it does not copy the model"), unless the sentence says what
   would happen otherwise ("without set_epoch every epoch would repeat"). A keyword that itself begins
   with a negator ("does not scale") is matched as written. A clause that calls what it says a myth
   ("linear scaling is a myth") earns nothing.
7. **Misconceptions.** A pattern (same ``a|b + c`` form) found in a clause with no negator in it
   (other than one the pattern spells, unless that one is itself negated: "not incompatible") and no
   disclaimer ("myth", "wrong", "mistake") asserts the misconception: the concept fails and the claim
   is named back with its correction. "You must synchronize the gradients yourself" asserts it; "you do
   not need to synchronize the gradients yourself" does not, nor does "a common mistake is to think you
   must...", nor a short "if" clause (a condition supposes; the clause after it asserts). A
   misconception with a ``subject`` is asserted only in a sentence about that subject.
8. **Contrasts.** From "unlike", "instead of", "rather than", "compared with", "naive" ... to the end of
   the clause (and a "which"/"where" clause right after), the words describe the other thing: they
   assert no misconception and earn no keyword ("unlike reduce, where only the root gets the sum").
9. **Keyword salad.** An answer of several words where almost none are the glue of prose (articles,
   prepositions, auxiliaries: :data:`GLUE_WORDS`), such as "scatter replicate gather gradients", is a
   list, not an explanation: it covers nothing. Code (``x = f(y)``) and labelled notes (``pro: ...
   con: ...``) are exempt.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import snowballstemmer
from rapidfuzz import process
from rapidfuzz.distance import OSA, Levenshtein

#: Words that negate what follows them in the same clause.
NEGATORS = frozenset({"not", "no", "never", "without", "neither", "nor", "cannot", "none", "nothing"})
#: Words that mark a clause as reporting a false claim rather than asserting it.
DISCLAIMERS = frozenset(
    {
        "myth",
        "misconception",
        "mistake",
        "mistaken",
        "wrong",
        "wrongly",
        "false",
        "falsely",
        "incorrect",
        "incorrectly",
        "contrary",
        "misbelief",
    }
)
#: Words that, stated of a claim in the same clause, make the clause report it as false: its keywords
#: earn nothing ("linear scaling is a myth" does not earn "linear scaling"). Narrower than
#: :data:`DISCLAIMERS`, since "wrong" or "mistake" also describe real failures ("in the wrong order").
FALSE_CLAIM_WORDS = frozenset({"myth", "misconception", "misbelief", "mistaken", "falsely", "wrongly"})
#: Phrases that open a contrast: the rest of the clause describes the other thing ("unlike reduce,
#: where only the root gets the sum"), so it asserts nothing about the subject and earns no keyword.
CONTRAST_MARKERS = (
    "unlike",
    "instead of",
    "rather than",
    "as opposed to",
    "in contrast to",
    "in contrast with",
    "compared to",
    "compared with",
    "versus",
    "vs",
    "naive",
    "naively",
)
#: A clause opening with one of these, right after a contrast, still describes the contrasted thing
#: ("unlike torch.distributed.launch, which passed --local-rank, ...").
RELATIVE_WORDS = frozenset({"which", "where", "who", "whose", "whom"})
#: With one of these in the sentence, "without X" states what X prevents ("without set_epoch every epoch
#: would repeat the same order"): X is affirmed, not negated.
COUNTERFACTUAL_WORDS = frozenset({"would", "otherwise", "else"})
#: A plain keyword phrase of this many words or more is specific even if each word is common.
IDIOM_MIN_WORDS = 3
#: An "if" clause of at most this many words, followed by another clause, is a condition (asserts nothing).
CONDITION_MAX_WORDS = 8
#: How many tokens back a negator still applies to a keyword.
NEGATION_WINDOW = 3
#: Share of the concepts an answer must cover to pass (rounded up).
PASS_SHARE = 0.6
#: Weight of a weak or generic keyword; a concept needs a total weight of 1.
WEAK_WEIGHT = 0.5

#: Words too common in answers about multi-GPU training to earn a concept alone (they count half).
_GENERIC_TEXT = """
    available availability label labels target targets data dataset model models network gpu gpus
    device devices cuda torch pytorch tensor tensors input inputs output outputs batch batches train
    training use used using run runs running work works make makes fast faster speed slow time code
    thing things way step steps need needs get gets set value values number numbers memory result
    results sample samples loss process processes each every all same different one two many more
    less
"""
GENERIC = frozenset(_GENERIC_TEXT.split())
#: English function words; an answer with almost none of them is a list of keywords, not prose.
_FUNCTION_WORDS_TEXT = """
    a an the and or but so then than that this these those it its they them their there here is are
    was were be been being has have had do does did to of in on at by for from with into onto over
    under per each every all any some no not never if when while which who what where why how as
    because since until after before during between across through about up down out off own only
    also just still too very can could will would should must may might need needs i you we he she
    our your my his her us me one get gets got make makes made go goes same other others back again
    once both
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())
#: The glue of English prose (articles, prepositions, auxiliaries, pronouns, conjunctions): an answer with
#: almost none of it lists keywords instead of relating them. Quantifiers ("every", "same") are not glue.
_GLUE_WORDS_TEXT = """
    a an the and or but so then than that this these those it its they them their there is are was
    were be been being has have had do does did to of in on at by for from with into onto over under
    per via if when while which who what where how as because since after before during between
    across through about can could will would should must may might i you we he she our your my his
    her us me not also just only still very too
"""
GLUE_WORDS = frozenset(_GLUE_WORDS_TEXT.split())
#: Below this share of glue words, an answer of :data:`SALAD_MIN_WORDS` words or more is a salad.
SALAD_GLUE_SHARE = 0.1
SALAD_MIN_WORDS = 4

_CLAUSE_SPLIT = re.compile(
    r"[;,!?\n]|[.:](?![a-z0-9_])|\b(?:but|whereas|while|so|because|since|otherwise|although|though|"
    r"unless)\b"
)
_TOKEN = re.compile(r"[a-z0-9_]+|(?<=[a-z0-9_])[.:](?=[a-z0-9_])")
_ITEM = re.compile(r"\S+")
_CODE = re.compile(r"[A-Za-z_]\w*\([^)]*\)|\s=\s|\w=\w")
_CONTRACTION = re.compile(r"([a-z])n['’]t\b")
_BARE_CONTRACTION = re.compile(r"\b(do|does|did|is|are|was|were|has|have|had|could|would|should)nt\b")
_POSSESSIVE = re.compile(r"['’]s\b")
_BRITISH = re.compile(r"\b([a-z]{4,})is(e|es|ed|ing|ation|ations)\b")
_GROUPS = re.compile(r"\s\+\s")
_FREE_OF = re.compile(r"\bfree of\b")
#: Where a sentence ends: a claim's subject is looked for in its own sentence.
_SENTENCE_SPLIT = re.compile(r"[;!?\n]|[.:](?![a-z0-9_])")
#: "pro: ... con: ...": an answer of labelled notes relates each item to its role, so it is not a salad.
_NOTE_LABEL = re.compile(r"(?:^|[.;\n])\s*[a-z][a-z0-9 _/()'-]{0,30}:\s", re.MULTILINE)
#: Notes need at least this many labels ("pro:", "con:") to count as notes rather than a salad.
NOTE_MIN_LABELS = 2

_STEMMER = snowballstemmer.stemmer("english")

#: Domain aliases, applied to answers and keywords alike (so either spelling matches the other). Kept
#: short and specific: a generic word here ("part", "share") would cover concepts by accident.
ALIASES: dict[str, str] = {
    "device": "gpu",
    "gpus": "gpu",  # the stemmer keeps "-us" endings (bus, status), so plural GPUs are listed here
    "cpus": "cpu",
    "card": "gpu",
    "chop": "split",
    "partition": "split",
    "piece": "chunk",
    "backprop": "backpropagation",
    "sync": "synchronize",
    "grad": "gradient",
    "replicate": "replica",
    "easily": "easy",
    "microbatch": "micro-batch",
}


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of one lower-case word; words with digits or ``_`` stay as written."""
    if not word.isalpha():
        return word
    return str(_STEMMER.stemWord(word))


def _alias_stems() -> dict[str, str]:
    """Each alias's stem -> the stems of what it stands for (space-separated)."""
    out = {}
    for key, value in ALIASES.items():
        target = " ".join(stem(t) for t in _TOKEN.findall(_normalise(value)))
        out[stem(key)] = target
    return out


def _normalise(text: str) -> str:
    text = text.lower().replace("’", "'")
    text = text.replace("can't", "can not").replace("won't", "will not").replace("cant ", "can not ")
    text = _CONTRACTION.sub(r"\1 not", text)
    text = _BARE_CONTRACTION.sub(r"\1 not", text)
    text = _POSSESSIVE.sub("", text)
    text = _BRITISH.sub(r"\1iz\2", text)
    text = _FREE_OF.sub("without", text)  # "never free of idle time" is a double negation
    return re.sub(r"[-/]", " ", text)


_ALIAS_STEMS = _alias_stems()


def _canonical(token: str) -> list[str]:
    """A raw token's stem, or the stems of its alias ("microbatch" → "micro", "batch")."""
    stemmed = stem(token)
    alias = _ALIAS_STEMS.get(stemmed)
    return alias.split() if alias else [stemmed]


def _tokens(text: str, correct: Callable[[str], str] | None = None) -> list[str]:
    raw = _TOKEN.findall(text)
    if correct is not None:
        raw = [correct(t) for t in raw]
    return [c for t in raw for c in _canonical(t)]


def tokenize(text: str, correct: Callable[[str], str] | None = None) -> list[list[str]]:
    """Clauses of stemmed tokens; ``correct`` first maps each raw word (typo correction)."""
    return [
        tokens for clause in _CLAUSE_SPLIT.split(_normalise(text)) if (tokens := _tokens(clause, correct))
    ]


def keyword_tokens(keyword: str) -> list[str]:
    """A plain keyword (one phrase) as the token sequence it must match."""
    return _tokens(_normalise(keyword))


# ---------------------------------------------------------------------------------------------- keywords
Phrase = tuple[str, ...]
Group = tuple[Phrase, ...]


@lru_cache(maxsize=8192)
def parse_keyword(keyword: str) -> tuple[Group, ...]:
    """``"a|b + c"`` as groups of alternative phrases; a phrase also matches its closed-up form."""
    groups = []
    for group_text in _GROUPS.split(keyword):
        alternatives: list[Phrase] = []
        for alt in group_text.split("|"):
            phrase = tuple(keyword_tokens(alt))
            if not phrase:
                continue
            alternatives.append(phrase)
            if len(phrase) > 1 and all(t.isalnum() for t in phrase):
                closed = _normalise(alt).replace(" ", "")
                alternatives.append(tuple(_tokens(closed)))
        if alternatives:
            groups.append(tuple(dict.fromkeys(alternatives)))
    return tuple(groups)


_GENERIC_STEMS = frozenset(c for w in GENERIC for c in _canonical(w))
_FUNCTION_STEMS = frozenset(c for w in FUNCTION_WORDS for c in _canonical(w))
_NEGATOR_STEMS = frozenset(stem(w) for w in NEGATORS)
_DISCLAIMER_STEMS = frozenset(stem(w) for w in DISCLAIMERS)
_FALSE_CLAIM_STEMS = frozenset(stem(w) for w in FALSE_CLAIM_WORDS)
_COPULA_STEMS = frozenset(stem(w) for w in ("is", "are", "was", "were", "be"))
_MISTAKE = stem("mistake")
_WITHOUT = stem("without")
_RELATIVE_STEMS = frozenset(stem(w) for w in RELATIVE_WORDS)
_COUNTERFACTUAL_STEMS = frozenset(stem(w) for w in COUNTERFACTUAL_WORDS)
_CONDITIONAL_STEMS = frozenset(stem(w) for w in ("if", "suppose", "supposing", "assuming"))
_COMMON_STEMS = _GENERIC_STEMS | _FUNCTION_STEMS
_MARKER_TOKENS = tuple(tuple(keyword_tokens(m)) for m in CONTRAST_MARKERS)


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class ConceptResult:
    """One concept and whether the answer covers it (with the keyword that matched, or the false claim)."""

    name: str
    covered: bool
    #: The player's own words that earned the concept ("gathered", "sync … gradients").
    matched: str | None = None
    #: The misconception the answer asserted for this concept ("gradients must be synchronised by hand").
    misconception: str | None = None
    #: What is true instead ("DDP all-reduces them during backward").
    correction: str | None = None


@dataclass(frozen=True)
class ExplainGrade:
    """How an explain answer did: each concept's result, in the question's order."""

    concepts: tuple[ConceptResult, ...]
    #: Why the answer as a whole earned nothing (a keyword list), or None.
    note: str | None = None

    @property
    def covered(self) -> int:
        """Concepts covered."""
        return sum(c.covered for c in self.concepts)

    @property
    def total(self) -> int:
        """Concepts asked for."""
        return len(self.concepts)

    @property
    def required(self) -> int:
        """Concepts an answer must cover to pass."""
        return math.ceil(PASS_SHARE * self.total)

    @property
    def missed(self) -> tuple[str, ...]:
        """Names of the concepts the answer did not cover."""
        return tuple(c.name for c in self.concepts if not c.covered)

    @property
    def misconceptions(self) -> tuple[ConceptResult, ...]:
        """The concepts whose misconception the answer asserted."""
        return tuple(c for c in self.concepts if c.misconception)

    @property
    def passed(self) -> bool:
        """Enough concepts, no misconception, and prose rather than a keyword list."""
        return self.note is None and not self.misconceptions and self.covered >= self.required


# ---------------------------------------------------------------------------------------------- matching
_Index = dict[str, list[tuple[int, int]]]


class _Answer:
    """An answer's clauses, indexed by token, with typos corrected toward the prompt's vocabulary.

    Each clause keeps, beside its canonical tokens, the words as the player wrote them, so that a match
    can be quoted back in the player's own words ("gathered", not the stem "gather"), and the sentence
    it belongs to, so that a claim is read with its subject. Words in a contrast ("unlike reduce, where
    only the root gets the sum") are set aside: they describe the other thing, so they neither assert a
    misconception nor earn a keyword.
    """

    def __init__(self, text: str, vocabulary: frozenset[str]) -> None:
        self.clauses: list[list[str]] = []
        self.words: list[list[str]] = []
        #: The sentence of each clause (clauses of one sentence share a number).
        self.sentence: list[int] = []
        for si, sentence in enumerate(_SENTENCE_SPLIT.split(_normalise(text))):
            for clause_text in _CLAUSE_SPLIT.split(sentence):
                tokens: list[str] = []
                words: list[str] = []
                for word in _TOKEN.findall(clause_text):
                    fixed = word if word in vocabulary else _fuzzy(word, vocabulary)
                    for token in _canonical(fixed):
                        tokens.append(token)
                        words.append(word)
                if tokens:
                    self.clauses.append(tokens)
                    self.words.append(words)
                    self.sentence.append(si)
        self.index: _Index = {}
        #: (clause, token) positions of words that state a misconception the answer asserts: they earn
        #: no concept (see :meth:`claim`).
        self.claimed: set[tuple[int, int]] = set()
        #: (clause, token) positions inside a contrast: about the other thing, they count for nothing.
        self.aside: set[tuple[int, int]] = self._contrasts()
        for ci, clause in enumerate(self.clauses):
            for i, token in enumerate(clause):
                self.index.setdefault(token, []).append((ci, i))

    def _contrasts(self) -> set[tuple[int, int]]:
        """Positions from a contrast marker to the end of its clause, and the relative clauses after it."""
        aside: set[tuple[int, int]] = set()
        open_contrast = False
        for ci, clause in enumerate(self.clauses):
            same_sentence = ci > 0 and self.sentence[ci - 1] == self.sentence[ci]
            if open_contrast and same_sentence and clause[0] in _RELATIVE_STEMS:
                aside.update((ci, i) for i in range(len(clause)))
                continue
            start = _marker_start(clause)
            open_contrast = start is not None
            if start is not None:
                aside.update((ci, i) for i in range(start, len(clause)))
        return aside

    def positions(
        self, group: Group, *, unclaimed: bool = False, with_aside: bool = False
    ) -> dict[int, list[tuple[int, int]]]:
        """Where any phrase of ``group`` occurs, per clause: (start, length).

        ``unclaimed``: only occurrences that use no word of a misconception the answer asserts.
        ``with_aside``: also occurrences inside a contrast (by default those are skipped).
        """
        found: dict[int, list[tuple[int, int]]] = {}
        for phrase in group:
            n = len(phrase)
            for ci, i in self.index.get(phrase[0], ()):
                if tuple(self.clauses[ci][i : i + n]) != phrase:
                    continue
                span = range(i, i + n)
                if unclaimed and any((ci, k) in self.claimed for k in span):
                    continue
                if not with_aside and any((ci, k) in self.aside for k in span):
                    continue
                found.setdefault(ci, []).append((i, n))
        return found

    def negated(self, ci: int, start: int) -> bool:
        """Whether a negator stands at most :data:`NEGATION_WINDOW` tokens before ``start``.

        "without X" in a sentence that says what would happen otherwise ("without set_epoch every epoch
        would repeat the same order") states that X is needed: it does not negate X.
        """
        lo = max(0, start - NEGATION_WINDOW)
        negators = [t for t in self.clauses[ci][lo:start] if t in _NEGATOR_STEMS]
        if negators and all(t == _WITHOUT for t in negators) and self._counterfactual(ci):
            return False
        return bool(negators)

    def _counterfactual(self, ci: int) -> bool:
        """Whether the sentence of clause ``ci`` says what would happen otherwise."""
        s = self.sentence[ci]
        return any(
            t in _COUNTERFACTUAL_STEMS
            for cj, clause in enumerate(self.clauses)
            if self.sentence[cj] == s
            for t in clause
        )

    def reports_false(self, ci: int) -> bool:
        """Whether clause ``ci`` calls what it says a myth or a mistake (its keywords earn nothing)."""
        clause = self.clauses[ci]
        if any(t in _FALSE_CLAIM_STEMS for t in clause):
            return True
        # "... is wrong", "... is a mistake", "... is false"
        return any(
            t in _COPULA_STEMS and rest[:1] and (rest[0] in _DISCLAIMER_STEMS or rest[1:2] == [_MISTAKE])
            for i, t in enumerate(clause)
            for rest in [clause[i + 1 : i + 3]]
        )

    def quote(self, ci: int, spans: list[tuple[int, int]]) -> str:
        """The player's own words at ``spans`` of clause ``ci``, joined by an ellipsis."""
        words = self.words[ci]
        return " … ".join(" ".join(dict.fromkeys(words[i : i + n])) for i, n in sorted(spans))

    def affirms(self, groups: tuple[Group, ...]) -> str | None:
        """A concept keyword: every group in one clause, none just after a negator; the words matched."""
        match = self.affirmed(groups)
        return match[0] if match is not None else None

    def affirmed(self, groups: tuple[Group, ...]) -> tuple[str, bool] | None:
        """The words an affirmative match of a keyword quotes, and whether all of them are common words.

        The weight of a match depends on the words that matched, not on the keyword: in
        ``"twice|its + tensor"`` the match "its ... tensor" is made of common words only.
        """
        if not groups:
            return None
        leading_negator = groups[0][0][0] in _NEGATOR_STEMS
        per_group = [self.positions(g, unclaimed=True) for g in groups]
        for ci in sorted(set.intersection(*(set(p) for p in per_group))):
            if self.reports_false(ci):
                continue
            spans = []
            for p in per_group:
                ok = [(i, n) for i, n in p[ci] if leading_negator or not self.negated(ci, i)]
                if not ok:
                    break
                # A specific alternative before a common one ("twice" rather than "its").
                ok.sort(key=lambda span: _all_common(self.clauses[ci][span[0] : span[0] + span[1]]))
                spans.append(ok[0])
            else:
                clause = self.clauses[ci]
                # A plain phrase of IDIOM_MIN_WORDS words or more is an idiom ("at the same time",
                # "one process per gpu"), specific even when each of its words is common.
                idiom = len(spans) == 1 and spans[0][1] >= IDIOM_MIN_WORDS
                common = not idiom and all(_all_common(clause[i : i + n]) for i, n in spans)
                return self.quote(ci, spans), common
        return None

    def asserted(self, groups: tuple[Group, ...]) -> list[tuple[int, list[tuple[int, int]]]]:
        """Where a misconception pattern is asserted: every group in one clause, no negator in it, no
        disclaimer, not inside a contrast. Each such clause with the spans of the pattern's words in it.
        """
        if not groups:
            return []
        per_group = [self.positions(g) for g in groups]
        found = []
        for ci in sorted(set.intersection(*(set(p) for p in per_group))):
            clause = self.clauses[ci]
            if self.condition(ci):
                continue
            # Any negator in the clause, before or after ("fixes nothing"), withdraws the claim, except
            # one the pattern itself spells ("no + extra + communication"); but a negator just before
            # another match of its own group negates that one: "not incompatible", "never free of idle
            # time" (free of = without) are double negations, and withdraw the claim.
            own: set[int] = set()
            for g, p in zip(groups, per_group, strict=True):
                if g[0][0] in _NEGATOR_STEMS:
                    starts = sorted(i for i, _ in p[ci])
                    own.update(i for i in starts if not any(0 < j - i <= 2 for j in starts))
            negated = any(t in _NEGATOR_STEMS and i not in own for i, t in enumerate(clause))
            if not negated and not any(t in _DISCLAIMER_STEMS for t in clause):
                found.append((ci, [span for p in per_group for span in p[ci]]))
        return found

    def condition(self, ci: int) -> bool:
        """Whether clause ``ci`` is the condition of a conditional ("if you do not scale the LR, the
        updates are too small"): it supposes, and the clause after it asserts.
        """
        clause = self.clauses[ci]
        following = ci + 1 < len(self.clauses) and self.sentence[ci + 1] == self.sentence[ci]
        # A long "if" clause holds its own consequence ("if one crashes it restarts and resumes where it
        # left off"), without the comma that would have split it off: that one asserts.
        return following and clause[0] in _CONDITIONAL_STEMS and len(clause) <= CONDITION_MAX_WORDS

    def about(self, ci: int, subject: tuple[Group, ...]) -> bool:
        """Whether clause ``ci`` speaks of ``subject`` (a misconception's ``subject`` keyword).

        Its sentence names the subject outside a contrast; or, when its sentence names it nowhere and
        opens no contrast, the sentence before names it ("Pipeline parallelism ... . It never idles.").
        """
        s = self.sentence[ci]
        mine = [cj for cj, sj in enumerate(self.sentence) if sj == s]
        if self._names(mine, subject, with_aside=False):
            return True
        if self._names(mine, subject, with_aside=True) or any(
            (cj, i) in self.aside for cj in mine for i in range(len(self.clauses[cj]))
        ):
            return False
        before = [cj for cj, sj in enumerate(self.sentence) if sj == s - 1]
        return self._names(before, subject, with_aside=False)

    def _names(self, clauses: list[int], subject: tuple[Group, ...], *, with_aside: bool) -> bool:
        wanted = set(clauses)
        return any(ci in wanted for g in subject for ci in self.positions(g, with_aside=with_aside))

    def asserts(self, groups: tuple[Group, ...]) -> bool:
        """Whether the answer asserts a misconception pattern anywhere (see :meth:`asserted`)."""
        return bool(self.asserted(groups))

    def claim(self, groups: tuple[Group, ...], subject: tuple[Group, ...] = ()) -> str | None:
        """Assert-check a misconception pattern and, where asserted, set its words aside.

        The words that state a false claim ("rank 0 ... broadcasts the weights") are the claim, not an
        explanation of anything: they must not earn another concept's keyword ("broadcast + weight")
        either. Every occurrence of the pattern's words in an asserting clause is claimed. With a
        ``subject``, only clauses about it assert ("no idle time" said of pipeline parallelism, not of
        tensor parallelism). Returns the player's words of the first asserting clause, or None when the
        pattern is not asserted.
        """
        found = [(ci, spans) for ci, spans in self.asserted(groups) if not subject or self.about(ci, subject)]
        for ci, spans in found:
            self.claimed.update((ci, k) for i, n in spans for k in range(i, i + n))
        return self.quote(*found[0]) if found else None


def _marker_start(clause: list[str]) -> int | None:
    """Where the first contrast marker of a clause starts, or None."""
    for i in range(len(clause)):
        for marker in _MARKER_TOKENS:
            if tuple(clause[i : i + len(marker)]) == marker:
                return i
    return None


def _all_stop(tokens: Sequence[str]) -> bool:
    """Whether every token is a stop word (:data:`FUNCTION_WORDS`)."""
    return all(t in _FUNCTION_STEMS for t in tokens)


def _all_common(tokens: Sequence[str]) -> bool:
    """Whether every token is a stop word or a word too common in these answers to mean anything alone."""
    return all(t in _COMMON_STEMS for t in tokens)


def _fuzzy(word: str, vocabulary: frozenset[str]) -> str:
    """``word``, or the vocabulary word it is a typo of: same first letter, one edit (two from 9
    letters); a 5-letter word only by swapping two neighbours ("modle"), since one substitution there
    turns real words into each other ("state"/"stage").
    """
    if (
        len(word) < 5
        or word[0].isdigit()
        or word in FUNCTION_WORDS
        or stem(word) in _vocabulary_stems(vocabulary)
    ):
        return word  # a known word, or another inflection of one ("scaled" for "scale"): not a typo
    cutoff = 2 if len(word) >= 9 else 1
    # Sorted, so that a tie between two candidates is broken the same way in every process.
    candidates = sorted(w for w in vocabulary if w[0] == word[0] and abs(len(w) - len(word)) <= cutoff)
    best = process.extractOne(word, candidates, scorer=OSA.distance, score_cutoff=cutoff)
    if best is None:
        return word
    if len(word) == 5 and Levenshtein.distance(word, str(best[0])) < 2:
        return word
    return str(best[0])


@lru_cache(maxsize=256)
def _vocabulary_stems(vocabulary: frozenset[str]) -> frozenset[str]:
    return frozenset(stem(w) for w in vocabulary)


@lru_cache(maxsize=256)
def _vocabulary(keywords: tuple[str, ...]) -> frozenset[str]:
    """The raw (unstemmed) words of a prompt's keywords that typos are corrected toward."""
    return frozenset(
        w
        for k in keywords
        for w in _TOKEN.findall(_normalise(k.replace("|", " ").replace("+", " ")))
        if len(w) >= 5 and not w[0].isdigit()
    )


def glue_share(text: str) -> float:
    """The share of glue words among an answer's whitespace-separated items (code counts as content)."""
    items = [i for i in _ITEM.findall(_normalise(text)) if any(ch.isalnum() for ch in i)]
    if not items:
        return 0.0
    return sum(i.strip(".,;:!?()'\"") in GLUE_WORDS for i in items) / len(items)


def is_salad(text: str) -> bool:
    """A list of keywords rather than an explanation: several items, almost no function words.

    Code (an assignment or a call, ``x = f(y)``) is exempt: a terse code answer is still an answer. So are
    labelled notes (``pro: ... con: ...``): each label says what its items are.
    """
    if _CODE.search(text) or len(_ITEM.findall(text)) < SALAD_MIN_WORDS:
        return False
    if len(_NOTE_LABEL.findall(text.lower())) >= NOTE_MIN_LABELS:
        return False  # labelled notes ("pro: one line. con: GPU 0 bottleneck") relate each item to a role
    return glue_share(text) < SALAD_GLUE_SHARE


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _misconceptions(concept: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    value = concept.get("misconceptions") or ()
    return [m for m in value if isinstance(m, Mapping)]


def _claims(answer: _Answer, concept: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first misconception of ``concept`` the answer asserts (its words are set aside), or None."""
    first = None
    for wrong in _misconceptions(concept):
        subject = parse_keyword(str(wrong.get("subject") or ""))
        # Every pattern is checked, not only up to the first hit: each asserted one claims its words.
        hits = [answer.claim(parse_keyword(p), subject) for p in _strings(wrong.get("patterns"))]
        if first is None and any(h is not None for h in hits):
            first = wrong
    return first


def _grade_concept(
    answer: _Answer, concept: Mapping[str, Any], wrong: Mapping[str, Any] | None
) -> ConceptResult:
    name = str(concept["name"])
    if wrong is not None:
        return ConceptResult(
            name, False, misconception=str(wrong.get("claim") or ""), correction=wrong.get("correction")
        )
    score = common = 0.0
    best: tuple[float, str] | None = None
    for keyword, weight in _weighted_keywords(concept):
        match = answer.affirmed(parse_keyword(keyword))
        if match is None:
            continue
        quoted, all_common = match
        if all_common:
            # Common words alone ("its ... tensor", "each gpu ... same") never earn a concept: together
            # they weigh at most one weak keyword, so a specific word must match too.
            weight = min(weight, WEAK_WEIGHT, WEAK_WEIGHT - common)
            common += weight
        score += weight
        if best is None or weight > best[0]:
            best = (weight, quoted)
    if score >= 1.0 and best is not None:
        return ConceptResult(name, True, best[1])
    return ConceptResult(name, False)


def _weighted_keywords(concept: Mapping[str, Any]) -> list[tuple[str, float]]:
    weighted = [(k, 1.0) for k in _strings(concept.get("keywords"))]
    return weighted + [(k, WEAK_WEIGHT) for k in _strings(concept.get("weak"))]


def _parse(answer: str, concepts: Sequence[Mapping[str, Any]]) -> _Answer:
    keywords = [
        k
        for c in concepts
        for k in (
            _strings(c.get("keywords"))
            + _strings(c.get("weak"))
            + [p for m in _misconceptions(c) for p in _strings(m.get("patterns"))]
        )
    ]
    return _Answer(answer, _vocabulary(tuple(keywords)))


def grade_explanation(answer: str, concepts: Sequence[Mapping[str, Any]]) -> ExplainGrade:
    """Grade ``answer`` against ``concepts``: ``[{name, keywords, weak?, misconceptions?}]``, as in a bank."""
    parsed = _parse(answer, concepts)
    # Misconceptions first, for every concept: the words of an asserted claim earn no concept, whichever
    # concept the claim belongs to and whatever the order of the concepts.
    wrongs = [_claims(parsed, c) for c in concepts]
    results = tuple(_grade_concept(parsed, c, w) for c, w in zip(concepts, wrongs, strict=True))
    if is_salad(answer) and any(r.covered for r in results):
        note = "your answer lists keywords; explain in sentences how they fit together"
        results = tuple(ConceptResult(r.name, False, None, r.misconception, r.correction) for r in results)
        return ExplainGrade(results, note)
    return ExplainGrade(results)


def model_answer_problems(model_answer: str, concepts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why a prompt's own model answer would not earn full marks from its concepts; empty when it would.

    The model answer is the exemplar players are shown after grading, so it must cover *every* concept
    (not just the pass share), assert none of the prompt's misconceptions and be prose, not a keyword
    list. Each problem names the concept (``concepts[i]`` and its name) and says how to fix it.
    """
    parsed = _parse(model_answer, concepts)
    problems: list[str] = []
    wrongs = [_claims(parsed, c) for c in concepts]
    for i, (concept, wrong) in enumerate(zip(concepts, wrongs, strict=True)):
        where = f"concepts[{i}] ({str(concept.get('name'))!r})"
        if wrong is not None:
            problems.append(f"{where}: {_asserted_message(parsed, wrong)}")
            continue
        result = _grade_concept(parsed, concept, None)
        if not result.covered:
            problems.append(f"{where} is not covered: {_uncovered_message(parsed, concept)}")
    if is_salad(model_answer):
        problems.append(
            f"it reads as a keyword list ({glue_share(model_answer):.0%} glue words such as 'the', 'is', "
            "'so'), which the grader refuses: write the model answer in sentences"
        )
    return problems


def _asserted_message(answer: _Answer, wrong: Mapping[str, Any]) -> str:
    """The misconception a model answer asserts, the words that assert it, and how to fix it."""
    for pattern in _strings(wrong.get("patterns")):
        found = answer.asserted(parse_keyword(pattern))
        if found:
            words = answer.quote(*found[0])
            return (
                f"the model answer asserts its misconception {str(wrong.get('claim'))!r} (pattern "
                f"{pattern!r} matches {words!r}); reword that clause (a negation in it, or calling it a "
                "myth or mistake, withdraws the claim) or make the pattern narrower"
            )
    return f"the model answer asserts its misconception {str(wrong.get('claim'))!r}"  # pragma: no cover


def _uncovered_message(answer: _Answer, concept: Mapping[str, Any]) -> str:
    """Why a concept earns less than 1 from a model answer, and how to fix it."""
    half = [k for k, w in _weighted_keywords(concept) if answer.affirms(parse_keyword(k)) is not None]
    keywords = _strings(concept.get("keywords"))
    example = ", ".join(repr(k) for k in keywords[:3])
    fix = (
        f"state one of its keywords affirmatively in the model answer (e.g. {example}; a 'not' up to "
        f"{NEGATION_WINDOW} words before a keyword cancels it), or add the model answer's own wording "
        "to the concept's 'keywords'"
    )
    if half:
        shown = ", ".join(repr(k) for k in half[:3])
        return f"only half-weight keywords match ({shown}), which weigh less than 1; {fix}"
    return f"the model answer matches none of its keywords; {fix}"


#: How many wordings of one keyword the common-words check tries (a keyword's alternatives multiply).
MAX_COMMON_WORDINGS = 64


def keyword_problems(concepts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why a prompt's keywords could be earned by words that say nothing; empty when they cannot.

    Two checks, each problem naming the concept and the keyword and saying how to fix it:

    * '|' binds tighter than a space, so in ``"twice the|its + tensor"`` the alternative ``its`` stands
      alone: a one-stop-word alternative beside a phrase that starts or ends with a stop word is refused.
    * An answer written only from the common-word wordings of a concept's keywords and weak keywords
      ("its … tensor. each gpu … same.") is graded as a player's answer is: it must not earn the concept.
      Idioms of :data:`IDIOM_MIN_WORDS` words or more ("at the same time") are specific, as in grading.
    """
    problems = []
    for i, concept in enumerate(concepts):
        where = f"concepts[{i}] ({str(concept.get('name'))!r})"
        fields = [("keywords", k) for k in _strings(concept.get("keywords"))]
        fields += [("weak", k) for k in _strings(concept.get("weak"))]
        for m, wrong in enumerate(_misconceptions(concept)):
            fields += [(f"misconceptions[{m}].patterns", p) for p in _strings(wrong.get("patterns"))]
        for field, keyword in fields:
            if (alone := _stop_word_alternative(keyword)) is not None:
                problems.append(
                    f"{where}.{field}: in {keyword!r} the alternative {alone!r} is only stop words, so it "
                    "matches on its own ('|' binds tighter than a space); put the shared word in its own "
                    "group ('twice + the|its + tensor') or drop the alternative"
                )
        keywords = _strings(concept.get("keywords")) + _strings(concept.get("weak"))
        wordings = [w for k in keywords for w in _common_wordings(k)]
        if wordings:
            answer = ". ".join(wordings) + "."
            parsed = _parse(answer, [concept])
            if _grade_concept(parsed, concept, None).covered:
                problems.append(
                    f"{where} is earned by common words alone ({answer[:120]!r}); make its keywords need a "
                    "specific word (a term, an API name), or move the common ones to 'weak'"
                )
    return problems


def _alternatives(keyword: str) -> list[list[str]]:
    """The raw alternatives of each group of a keyword (``"a|b + c"`` → ``[["a", "b"], ["c"]]``)."""
    return [[a.strip() for a in g.split("|") if a.strip()] for g in _GROUPS.split(keyword)]


def _stop_word_alternative(keyword: str) -> str | None:
    """A one-stop-word alternative beside a phrase that ends with a stop word, or None.

    ``"twice the|its"`` reads as "twice (the|its)" but means "twice the" or "its": a phrase left hanging
    on a stop word shows the author meant the space to bind tighter than '|'.
    """
    for group in _alternatives(keyword):
        phrases = [keyword_tokens(a) for a in group]
        alone = [a for a, t in zip(group, phrases, strict=True) if len(t) == 1 and t[0] in _FUNCTION_STEMS]
        hanging = [t for t in phrases if len(t) > 1 and t[-1] in _FUNCTION_STEMS and not _all_stop(t)]
        if alone and hanging:
            return alone[0]
    return None


def _common_wordings(keyword: str) -> list[str]:
    """Wordings of ``keyword`` made only of common words (one alternative per group), a bounded few."""
    groups = [[a for a in g if _all_common(keyword_tokens(a))] for g in _alternatives(keyword)]
    if not groups or not all(groups):
        return []
    if len(groups) == 1:
        # An idiom of IDIOM_MIN_WORDS words or more ("at the same time") is specific, as in grading.
        groups = [[a for a in groups[0] if len(keyword_tokens(a)) < IDIOM_MIN_WORDS]]
        if not groups[0]:
            return []
    wordings = [""]
    for group in groups:
        wordings = [f"{w} {a}".strip() for w in wordings for a in group][:MAX_COMMON_WORDINGS]
    return wordings
