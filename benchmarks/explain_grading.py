"""How well the explain grader agrees with a human on the answer tables in tests/data/.

``explain_answers.yaml`` is the table the grader was tuned on; ``explain_holdout.yaml`` was written after
tuning and never tuned on (issue 17). Issue 28 added ``explain_tuning.yaml`` (tuned on) and
``explain_heldout.yaml`` (written before the issue-28 changes and never tuned on): its figures are the
honest estimate, and the ones the targets apply to (all four >= 0.95, subtly wrong answers >= 90% right).
Each table is reported on its own.

Prints, for the pass/fail verdict, precision and recall of "pass" (on the correct answers) and of
"fail" (on the wrong ones), overall and per prompt and per answer kind, then each disagreement.
Also prints the per-concept agreement with the human's concept labels.

Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/explain_grading.py [--quiet]
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

from bot.bootstrap import shipped_bank_specs
from bot.core.grading import grade_explanation

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
TABLES = {
    "tuned on (issue 17)": DATA / "explain_answers.yaml",
    "held out (issue 17)": DATA / "explain_holdout.yaml",
    "tuned on (issue 28)": DATA / "explain_tuning.yaml",
    "held out (issue 28)": DATA / "explain_heldout.yaml",
}


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def main() -> int:
    quiet = "--quiet" in sys.argv
    prompts = {s["id"]: s for s in shipped_bank_specs() if s["kind"] == "explain"}
    for title, path in TABLES.items():
        print(f"==== {title}: {path.name}")
        report(yaml.safe_load(path.read_text()), prompts, quiet)
        print()
    return 0


def report(table: dict[str, list[dict[str, Any]]], prompts: dict[str, Any], quiet: bool) -> None:
    """Print the figures of one table."""
    counts: Counter[str] = Counter()
    per_prompt: dict[str, Counter[str]] = defaultdict(Counter)
    per_kind: dict[str, Counter[str]] = defaultdict(Counter)
    concept_agree = concept_total = 0
    wrong: list[str] = []
    for qid, answers in table.items():
        concepts = prompts[qid]["concepts"]
        for n, a in enumerate(answers):
            grade = grade_explanation(a["t"], concepts)
            got, want = grade.passed, bool(a["pass"])
            cell = ("t" if got == want else "f") + ("p" if got else "n")
            for c in (counts, per_prompt[qid], per_kind[a["k"]]):
                c[cell] += 1
            covered = {i for i, c in enumerate(grade.concepts) if c.covered}
            human = set(a.get("c") or ())
            concept_total += len(concepts)
            concept_agree += sum((i in covered) == (i in human) for i in range(len(concepts)))
            if got != want:
                why = grade.note or "; ".join(
                    f"{c.name[:40]}: {c.misconception or c.matched}"
                    for c in grade.concepts
                    if c.covered or c.misconception
                )
                wrong.append(
                    f"{qid}#{n} [{a['k']}] human={want} grader={got} ({grade.covered}/{grade.total}) {why}"
                    f"\n    {a['t'][:150]}"
                )

    def line(name: str, c: Counter[str]) -> str:
        tp, fp, fn, tn = c["tp"], c["fp"], c["fn"], c["tn"]
        return (
            f"{name:34} n={tp + fp + fn + tn:3}  pass P={_ratio(tp, tp + fp)} R={_ratio(tp, tp + fn)}"
            f"  fail P={_ratio(tn, tn + fn)} R={_ratio(tn, tn + fp)}"
            f"  agree={_ratio(tp + tn, tp + fp + fn + tn)}"
        )

    print(line("ALL", counts))
    subtle = per_kind.get("subtle", Counter())
    right = subtle["tn"] + subtle["tp"]
    print(f"{'subtly wrong graded right':34} {right}/{subtle.total()} = {_ratio(right, subtle.total())}")
    print(f"{'concept labels agree':34} {_ratio(concept_agree, concept_total)} of {concept_total}")
    print("\nper prompt:")
    for qid, c in per_prompt.items():
        print(line(qid, c))
    print("\nper kind:")
    for kind, c in sorted(per_kind.items()):
        print(line(kind, c))
    if not quiet:
        print(f"\ndisagreements ({len(wrong)}):")
        print("\n".join(wrong))


if __name__ == "__main__":
    raise SystemExit(main())
