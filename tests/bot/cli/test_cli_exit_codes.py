"""Exit codes: 2 for a usage error (a bad option, a path that does not exist, a setting that cannot work,
a runner request beyond the runner's limits), 1 when the command ran and found a problem (errors in a
bank file, a contradicted answer, a refused dispute), whichever command finds it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from bot.cli import main
from questions.families import TemplateError, expand, load_family_text
from questions.reading import BankValidationError

ROOT = Path(__file__).resolve().parents[3]
QUESTION = {
    "id": "prints-one",
    "kind": "predict_output",
    "topic": "DDP",
    "difficulty": "beginner",
    "prompt": "What is printed?",
    "code": "print(1)\n",
    "runner": {"mode": "python", "nproc": 1, "gpus": 0},
    "choices": [{"text": "1", "correct": True}, {"text": "2"}],
}
BAD_URL = "http://a:8765,runner-b:8765"


def _bank(tmp_path: Path, **changes: object) -> Path:
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump({"questions": [{**QUESTION, **changes}]}))
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["questions", "preview", "{bank}"],
        ["questions", "verify", "{bank}"],
        ["dispute", "today:1", "--player", "ann"],
        ["play", "--player", "ann"],
    ],
    ids=["preview", "verify", "dispute", "play"],
)
def test_a_bad_runner_setting_is_a_usage_error_in_every_command(tmp_path: Path, command: list[str]) -> None:
    bank = _bank(tmp_path)
    args = [a.format(bank=bank) for a in command]
    result = CliRunner().invoke(
        main,
        ["--db", f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}", *args],
        env={"RANKZERO_RUNNER_URL": BAD_URL, "XDG_DATA_HOME": str(tmp_path)},
    )
    assert result.exit_code == 2, result.output
    assert "RANKZERO_RUNNER_URL entry 2 'runner-b:8765' is not an http(s) URL with a host" in result.output


@pytest.mark.parametrize("command", ["validate", "import", "verify", "preview", "stats"])
def test_a_path_that_does_not_exist_is_a_usage_error(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "nope.yaml"
    result = CliRunner().invoke(
        main, ["--db", f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}", "questions", command, str(missing)]
    )
    assert result.exit_code == 2, result.output
    assert "does not exist" in result.output


@pytest.mark.parametrize(
    ("runner", "why"),
    [
        ({"mode": "python", "nproc": 3, "gpus": 0}, "nproc must be 1 for mode 'python'"),
        ({"mode": "ddp", "nproc": 9, "gpus": 0}, "less than or equal to 8"),
        ({"mode": "mpi"}, "Input should be 'python', 'dp' or 'ddp'"),
    ],
)
def test_a_bad_runner_block_is_a_bank_error_like_any_other(
    tmp_path: Path, runner: dict[str, object], why: str
) -> None:
    """Content the command checked, reported with file:line and exit 1 like every bank error."""
    bank = _bank(tmp_path, runner=runner)
    result = CliRunner().invoke(main, ["questions", "validate", str(bank)])
    assert result.exit_code == 1, result.output
    assert f"{bank}:" in result.output and ".runner" in result.output and why in result.output


FAMILY = """families:
  - id: fam-allreduce-sum
    kind: predict_output
    topic: Collectives
    difficulty: intermediate
    params:
      world_size: [2, 4]
    runner: {runner}
    prompt: "{{{{ world_size }}}} ranks: what does rank 0 print?"
    code: |
      import torch.distributed as dist
      print(dist.get_world_size())
    distractors:
      - text: "1"
    hint: all ranks see the same world
"""


@pytest.mark.parametrize(
    ("runner", "why"),
    [
        ("{mode: python, nproc: world_size}", "is an expression, but mode 'python' runs one process"),
        ("{mode: ddp, nproc: 0}", "nproc 0 is out of range: use 1 to 8 ranks"),
        ("{mode: dp, nproc: 2}", "nproc must be 1 for mode 'dp'"),
    ],
)
def test_a_bad_runner_block_in_a_family_is_refused_when_the_file_is_loaded(runner: str, why: str) -> None:
    with pytest.raises(BankValidationError) as info:
        load_family_text(FAMILY.format(runner=runner), "fam.yaml")
    [error] = info.value.errors
    assert str(error).startswith("fam.yaml:8: ") and why in str(error)


@pytest.mark.parametrize(
    ("nproc", "why"), [("world_size * 4", "gives 16 here"), ("\"'two'\"", "gives 'two' here")]
)
def test_a_family_nproc_expression_out_of_range_is_an_instance_error_not_a_crash(
    nproc: str, why: str
) -> None:
    [family] = load_family_text(FAMILY.format(runner=f"{{mode: ddp, nproc: {nproc}}}"), "fam.yaml")
    with pytest.raises(TemplateError, match="whole number of ranks from 1 to 8") as info:
        expand(family.spec)
    assert why in str(info.value)


def test_the_runner_cli_exits_2_when_it_rejects_the_settings(tmp_path: Path) -> None:
    snippet = tmp_path / "one.py"
    snippet.write_text("print(1)\n")
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(snippet), "--mode", "ddp", "--nproc", "20"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("status: rejected") and "nproc must be between 1 and 8" in done.stdout
