"""The longest-choice bias (issue 27 §2): ``questions stats`` reports, per kind, how often the keyed choice is
the longest one as a player reads it, and ``questions validate`` warns past the limit; the proven share
counts runner-verified and cross-checked family instances.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from questions.crosschecks import CROSS_CHECKS
from questions.schema import QuestionSpec
from questions.stats import LONGEST_CORRECT_LIMIT, correct_is_longest, longest_correct_shares
from tests.cli import rankzero
from tests.conftest import make_spec


def _keyed_longest(qid: str, kind: str = "debug") -> dict[str, Any]:
    """A question whose correct choice is the longest (by a clear margin)."""
    spec = make_spec(qid, "advanced", "DDP", kind=kind)
    spec["choices"][0]["text"] = "the keyed answer, spelled out at a length no distractor reaches"
    return spec


def test_the_keyed_choice_counts_as_longest_only_when_strictly_longest_as_read() -> None:
    plain = QuestionSpec.model_validate(make_spec("same-length", "advanced", "DDP"))
    assert not correct_is_longest(plain)  # all four choices read the same length
    assert correct_is_longest(QuestionSpec.model_validate(_keyed_longest("long")))
    tie = make_spec("tie", "advanced", "DDP")
    tie["choices"][0]["text"] = "abcdef"
    tie["choices"][1]["text"] = "ghijkl"
    tie["choices"][2]["text"] = "mn"
    tie["choices"][3]["text"] = "op"
    assert not correct_is_longest(QuestionSpec.model_validate(tie))  # a tie is no give-away
    # Markdown markers are not read: `**x**` is one character long to a player.
    marked = make_spec("marked", "advanced", "DDP")
    marked["choices"][0]["text"] = "**`abc`**"
    for i, text in enumerate(("abcd", "xy", "z"), start=1):
        marked["choices"][i]["text"] = text
    assert not correct_is_longest(QuestionSpec.model_validate(marked))


def test_shares_are_per_kind() -> None:
    specs = [
        *(_keyed_longest(f"dbg-{i}") for i in range(3)),
        *(make_spec(f"dbg-plain-{i}", "advanced", "DDP", kind="debug") for i in range(7)),
        *(make_spec(f"c-{i}", "advanced", "DDP") for i in range(4)),
    ]
    shares = longest_correct_shares([QuestionSpec.model_validate(s) for s in specs])
    assert shares == {"conceptual": 0.0, "debug": 0.3}


def test_validate_warns_past_the_limit_and_stats_reports_it(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    (bank / "generated").mkdir(parents=True)
    leaning = [
        *(_keyed_longest(f"dbg-{i}") for i in range(4)),
        make_spec("dbg-x", "advanced", "DDP", kind="debug"),
    ]
    (bank / "debug.yaml").write_text(yaml.safe_dump({"questions": leaning}))
    # A family with an independent derivation: its instances count as cross-checked unless runner-verified.
    family = next(iter(CROSS_CHECKS))
    inst = [make_spec(f"{family}/n={i}", "advanced", "DDP") for i in range(5)]
    records = {q["id"]: {"hash": "x", "torch": "2.13.0", "status": "ok", "verified": True} for q in inst[:2]}
    others = [make_spec(f"fam-unchecked-zz/n={i}", "advanced", "DDP") for i in range(5)]
    (bank / "generated" / "a.yaml").write_text(
        yaml.safe_dump(
            {"generated": {"source": "a.yaml", "instances": records}, "questions": [*inst, *others]}
        )
    )
    done = rankzero("questions", "validate", str(bank))
    assert done.returncode == 0, done.stderr  # a warning, not an error
    limit = f"{LONGEST_CORRECT_LIMIT:.0%}"
    assert (
        f"debug: the correct choice is the longest in 80% of these questions (limit {limit})" in done.stderr
    )
    assert "conceptual" not in done.stderr
    stats = json.loads(rankzero("questions", "stats", "--json", str(bank)).stdout)
    assert stats["longest_correct_share"] == {"conceptual": 0.0, "debug": 0.8}
    assert stats["verified"] == 2 and stats["cross_checked"] == 3
    assert stats["proven_share"] == 0.5  # (2 verified + 3 cross-checked) of 10 instances
    balanced = [
        *(_keyed_longest(f"dbg-{i}") for i in range(1)),
        *(make_spec(f"d{i}", "advanced", "DDP", kind="debug") for i in range(4)),
    ]
    (bank / "debug.yaml").write_text(yaml.safe_dump({"questions": balanced}))
    assert "warning" not in rankzero("questions", "validate", str(bank)).stderr


def test_the_2025_26_topics_are_counted_by_what_a_question_names() -> None:
    from questions.stats import modern_topic_counts

    specs = [
        make_spec("pp-1", "advanced", "DDP", code="from torch.distributed.pipelining import ScheduleGPipe\n"),
        make_spec(
            "ac-1", "advanced", "DDP", prompt="Activation checkpointing wraps each block before fully_shard."
        ),
        make_spec("ac-only", "advanced", "DDP", prompt="Activation checkpointing with DDP."),  # not FSDP2
        make_spec("ft-1", "advanced", "DDP", tags=["torchft"]),
    ]
    counts = modern_topic_counts([QuestionSpec.model_validate(s) for s in specs])
    assert counts["pipelining"] == 1 and counts["activation-checkpointing-fsdp2"] == 1
    assert counts["fault-tolerance"] == 1 and counts["float8"] == 0
