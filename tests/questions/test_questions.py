"""The bank format: validation errors name file, line and field; import is all or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from questions.loader import BankValidationError, default_bank_dir, load_paths, validate_text
from questions.schema import MULTIPLE_CHOICE_KINDS, json_schema
from tests.cli import Ran, rankzero

GOOD = """\
questions:
  - id: good-one
    kind: conceptual
    topic: DDP
    difficulty: advanced
    prompt: Why?
    choices:
      - text: "yes"
      - text: "no"
        correct: true
"""


def _errors(text: str, name: str = "bank.yaml") -> list[str]:
    with pytest.raises(BankValidationError) as info:
        validate_text(text, name)
    return [str(e) for e in info.value.errors]


def test_good_file_loads_with_defaults() -> None:
    [q] = validate_text(GOOD, "g.yaml")
    assert q.spec.time_limit_s == 120 and q.spec.attempts == 2 and q.spec.correct_letter == "B"
    assert q.line == 2


def test_errors_name_file_line_and_field() -> None:
    text = GOOD.replace("difficulty: advanced", "difficulty: hard").replace(
        '      - text: "yes"\n', '      - text: "yes"\n        corect: true\n'
    )
    errs = _errors(text)
    assert any(
        e.startswith("bank.yaml:5: questions[0] (good-one).difficulty:") and "'expert'" in e for e in errs
    )
    assert any(
        e.startswith("bank.yaml:9: questions[0] (good-one).choices[0].corect:") and "spelling" in e
        for e in errs
    )


def test_kind_rules_are_checked() -> None:
    two_correct = GOOD.replace('      - text: "yes"\n', '      - text: "yes"\n        correct: true\n')
    assert any(
        ":7: questions[0] (good-one).choices:" in e and "mark exactly one" in e for e in _errors(two_correct)
    )
    one_choice = GOOD.replace('      - text: "yes"\n', "")
    assert any("2 to 6" in e for e in _errors(one_choice))
    po = GOOD.replace("kind: conceptual", "kind: predict_output").replace(
        "prompt: Why?", "prompt: Why?\n    code: print(1)"
    )
    assert any("runner" in e for e in _errors(po))
    assert any(
        "not valid YAML" in e and e.startswith("bank.yaml:") for e in _errors("questions:\n  - id: [\n")
    )


def test_debug_with_code_needs_a_runner_block() -> None:
    debug = GOOD.replace("kind: conceptual", "kind: debug")
    [q] = validate_text(debug, "d.yaml")  # no code: nothing to run, so no runner block needed
    assert q.spec.runner is None
    with_code = debug.replace("prompt: Why?", "prompt: Why?\n    code: print(1)")
    [err] = _errors(with_code)
    assert err.startswith("bank.yaml:2: questions[0] (good-one): debug questions with code need a 'runner'")
    assert "questions/README.md" in err
    runner = "\n    runner: {mode: ddp, nproc: 2, gpus: 0, init_process_group: true}"
    [q] = validate_text(with_code.replace("code: print(1)", "code: print(1)" + runner), "d.yaml")
    assert q.spec.runner is not None and q.spec.runner.nproc == 2 and q.spec.runner.init_process_group


def test_out_of_range_runner_values_say_how_to_fix() -> None:
    po = GOOD.replace("kind: conceptual", "kind: predict_output").replace(
        "prompt: Why?", "prompt: Why?\n    code: print(1)\n    runner: {mode: ddp, nproc: 9, gpus: -1}"
    )
    errs = _errors(po)
    gpus = next(e for e in errs if ".runner.gpus:" in e)
    assert gpus.startswith("bank.yaml:8: questions[0] (good-one).runner.gpus: Input should be greater")
    assert "use 0 to run on CPU with gloo, or 1 to 8" in gpus
    nproc = next(e for e in errs if ".runner.nproc:" in e)
    assert "the number of ranks (2 to 8) for mode ddp" in nproc
    slow = _errors(GOOD.replace("prompt: Why?", "prompt: Why?\n    time_limit_s: 5"))
    assert any(".time_limit_s:" in e and "from 10 to 3600" in e for e in slow)


def test_duplicate_ids_across_files_name_both(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    (tmp_path / "b.yaml").write_text(GOOD)
    with pytest.raises(BankValidationError) as info:
        load_paths([tmp_path])
    [err] = info.value.errors
    assert "b.yaml:2" in str(err) and "a.yaml:2" in str(err) and "duplicate id" in str(err)


def test_shipped_bank_is_valid_and_complete() -> None:
    loaded = load_paths([default_bank_dir()])
    specs = [q.spec for q in loaded]
    by_source = [s for s in specs if s.source and s.source.startswith("seed")]
    originals = [s for s in specs if not (s.source and s.source.startswith("seed"))]
    kinds: list[str] = [s.kind for s in by_source]  # Kind members are their strings
    assert kinds.count("flashcard") >= 10 and kinds.count("explain") >= 4
    assert sum(k in MULTIPLE_CHOICE_KINDS for k in kinds) >= 25, "3 challenges x 5 + 2 quizzes x 5"
    assert len([s for s in originals if s.kind in MULTIPLE_CHOICE_KINDS]) >= 45
    for s in specs:
        if s.kind in ("predict_output", "debug") and s.code:
            assert s.runner is not None, s.id
    assert sum(1 for s in specs if s.kind == "debug" and s.runner is not None) >= 6
    for level in ("intermediate", "advanced", "expert"):
        assert sum(1 for s in specs if s.difficulty == level and s.kind in MULTIPLE_CHOICE_KINDS) >= 10


def test_schema_json_is_current() -> None:
    import json

    on_disk = json.loads((Path(__file__).resolve().parents[2] / "questions" / "schema.json").read_text())
    assert on_disk == json_schema(), "run `rankzero questions schema` to regenerate questions/schema.json"


def _cli(*args: str, db: str) -> Ran:
    return rankzero("--db", db, *args)


def test_cli_validate_import_export_retire(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("good-one", "other-one").replace("topic: DDP", "topic: ''"))
    r = _cli("questions", "validate", str(good), str(bad), db=db)
    assert r.returncode == 1 and f"{bad}:4: questions[0] (other-one).topic:" in r.stderr
    # validate imports nothing, so it does not talk about importing.
    assert r.stderr.endswith("1 error(s); fix them and validate again\n") and "imported" not in r.stderr
    assert "(write some text here; it may not be empty)" in r.stderr
    # All or nothing: the good file is not imported when another file fails.
    r = _cli("questions", "import", str(good), str(bad), db=db)
    assert r.returncode == 1 and "nothing imported" in r.stderr
    r = _cli("questions", "list", db=db)
    assert r.returncode == 0 and "good-one" not in r.stdout
    r = _cli("questions", "import", str(good), db=db)
    assert r.returncode == 0 and "1 new" in r.stdout, r.stderr
    r = _cli("questions", "import", str(good), db=db)
    assert "1 unchanged" in r.stdout
    good.write_text(GOOD.replace("Why?", "Why, exactly?"))
    assert "1 updated" in _cli("questions", "import", str(good), db=db).stdout
    assert "v2" in _cli("questions", "list", db=db).stdout
    out = tmp_path / "export.yaml"
    assert _cli("questions", "export", "--out", str(out), db=db).returncode == 0
    [q] = load_paths([out])
    assert q.spec.prompt == "Why, exactly?"
    assert _cli("questions", "retire", "good-one", db=db).returncode == 0
    assert "good-one" not in _cli("questions", "list", db=db).stdout
    r = _cli("questions", "retire", "nope", db=db)
    assert r.returncode == 1 and "no question with id 'nope'" in r.stderr


def test_cli_validates_the_shipped_bank() -> None:
    r = rankzero("questions", "validate", str(default_bank_dir()))
    assert r.returncode == 0 and r.stdout.startswith("ok:"), r.stderr
