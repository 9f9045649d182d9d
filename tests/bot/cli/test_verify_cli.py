"""``rankzero questions verify`` exit codes, run as a real command against a real runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.runner_server import RunnerServer

RANKZERO = str(Path(sys.executable).parent / "rankzero")


def question(qid: str, code: str, choices: list[str], correct: int, gpus: int = 0) -> dict[str, object]:
    return {
        "id": qid,
        "kind": "predict_output",
        "topic": "Multi-GPU basics",
        "difficulty": "beginner",
        "prompt": "What is printed?",
        "code": code,
        "runner": {"mode": "ddp" if gpus else "python", "nproc": 2 if gpus else 1, "gpus": gpus},
        "choices": [{"text": t, "correct": i == correct} for i, t in enumerate(choices)],
    }


def write_bank(folder: Path, questions: list[dict[str, object]]) -> Path:
    folder.mkdir()
    (folder / "bank.yaml").write_text(yaml.safe_dump({"questions": questions}, sort_keys=False))
    return folder


def verify(path: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    return subprocess.run(
        [RANKZERO, "questions", "verify", str(path)],
        cwd=cwd,
        env={**clean, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_all_correct_exits_0(tmp_path: Path, runner: RunnerServer) -> None:
    bank = write_bank(
        tmp_path / "good",
        [
            question("sum-range", "print(sum(range(5)))\n", ["10", "15", "4"], correct=0),
            question(
                "two-lines", "for i in (1, 2):\n    print(' rank', i)\n", ["rank 1\nrank 2", "rank 2"], 0
            ),
            question("needs-gpus", "print('x')\n", ["x", "y"], correct=0, gpus=2),
        ],
    )
    done = verify(bank, tmp_path, RANKZERO_RUNNER_URL=runner.url, RANKZERO_RUNNER_TOKEN=runner.token)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "confirmed     sum-range" in done.stdout
    assert "confirmed     two-lines" in done.stdout
    assert "cannot check  needs-gpus: cannot reproduce here: needs 2 GPUs" in done.stdout
    assert "3 questions in" in done.stdout and "2 confirmed, 0 contradicted, 1 cannot check" in done.stdout


def test_a_contradiction_exits_1_with_a_local_runner(tmp_path: Path) -> None:
    bank = write_bank(
        tmp_path / "bad",
        [
            question("sum-range", "print(sum(range(5)))\n", ["10", "15"], correct=0),
            question("off-by-one", "print(len(range(1, 10)))\n", ["10", "9"], correct=0),
        ],
    )
    # No RANKZERO_RUNNER_URL: the command starts its own runner on loopback and stops it afterwards.
    done = verify(bank, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "starting a local runner" in done.stdout
    assert (
        "CONTRADICTED  off-by-one: it printed '9': choice B matches, but the official answer is A"
        in done.stdout
    )
    assert "1 confirmed, 1 contradicted, 0 cannot check" in done.stdout


def test_an_unreachable_runner_exits_2(tmp_path: Path) -> None:
    bank = write_bank(tmp_path / "one", [question("sum-range", "print(sum(range(5)))\n", ["10", "15"], 0)])
    done = verify(bank, tmp_path, RANKZERO_RUNNER_URL="http://127.0.0.1:9")
    assert done.returncode == 2
    assert "unreachable" in done.stderr and "RANKZERO_RUNNER_URL" in done.stderr


def test_invalid_bank_file_exits_1_with_its_error(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "bank.yaml").write_text("questions:\n  - id: Bad Id\n    kind: predict_output\n")
    done = verify(folder, tmp_path, RANKZERO_RUNNER_URL="http://127.0.0.1:9")
    assert done.returncode == 1
    assert "bank.yaml:" in done.stderr
