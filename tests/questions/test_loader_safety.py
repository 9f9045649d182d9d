"""The bank loader against hostile and broken files: alias bombs, deep nesting, huge files and fields,
syntax errors and non-UTF-8 bytes. Every one is a file:line error; none takes the process down.
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import questions.loader as loader
from questions.loader import (
    FIELD_CAPS,
    MAX_FILE_BYTES,
    BankValidationError,
    load_paths,
    validate_text,
    validate_text_async,
)
from tests.cli import rankzero

ROOT = Path(__file__).resolve().parents[2]

#: The "billion laughs": 9 levels of 9 aliases, 9**9 strings once expanded (about 600 bytes here).
BOMB = "questions:\n  - &a0 [lol]\n" + "".join(
    f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)
)

GOOD = """questions:
  - id: ddp-safe-1
    kind: conceptual
    topic: DDP
    difficulty: beginner
    prompt: {prompt}
    hint: think about it
    explanation: because
    choices:
      - text: it does
        correct: true
      - text: it does not
"""


def _errors(text: str, file: str = "bank.yaml") -> list[str]:
    with pytest.raises(BankValidationError) as info:
        validate_text(text, file)
    return [str(e) for e in info.value.errors]


def _limit_memory() -> None:
    # 1.5 GiB of address space: the bomb expanded needs more than that; a correct refusal needs far less.
    limit = 1536 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_an_alias_bomb_is_refused_at_its_first_anchor_in_bounded_memory(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB, encoding="utf-8")
    assert len(BOMB.encode()) < 700
    # In a child process with a memory limit, so that a loader that expands it fails here (MemoryError
    # or the timeout) instead of eating the machine.
    script = (
        "import sys\nfrom questions.loader import BankValidationError, load_paths\n"
        "try:\n    load_paths([sys.argv[1]])\nexcept BankValidationError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(bomb)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{bomb}:2: (yaml): YAML anchors and aliases (&a0) are not allowed" in done.stdout


def test_an_alias_is_refused_where_it_is_written() -> None:
    text = GOOD.format(prompt="same") + "    feedback: *x\n"
    assert _errors(text) == [
        "bank.yaml:13: (yaml): YAML anchors and aliases (*x) are not allowed in bank files; write the value "
        "out in full"
    ]


def test_a_raw_control_byte_is_a_located_error_not_a_crash() -> None:
    text = GOOD.format(prompt="clears \x1b[2J the screen")
    [error] = _errors(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "\x1b" in row)
    assert error.startswith(f"bank.yaml:{line}: (yaml): the control character U+001B is not allowed")


def test_deep_nesting_is_refused_not_recursed_into() -> None:
    errors = _errors("questions: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert len(errors) == 1 and errors[0].startswith("bank.yaml:1: (yaml): nested deeper than")


def test_a_field_over_its_cap_is_named_with_its_line() -> None:
    prompt = "x" * (FIELD_CAPS["prompt"] + 1)
    assert _errors(GOOD.format(prompt=prompt)) == [
        f"bank.yaml:6: questions[0] (ddp-safe-1).prompt: {len(prompt)} characters, over the limit of "
        f"{FIELD_CAPS['prompt']}; shorten it"
    ]
    validate_text(GOOD.format(prompt="x" * FIELD_CAPS["prompt"]), "bank.yaml")  # at the cap: fine


def test_a_ten_megabyte_prompt_is_refused_by_the_file_cap(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(GOOD.format(prompt="x" * 10_000_000), encoding="utf-8")
    with pytest.raises(BankValidationError) as info:
        load_paths([big])
    [error] = info.value.errors
    assert str(error).startswith(f"{big}:1: (file): ") and f"limit of {MAX_FILE_BYTES} bytes" in str(error)
    # The same text handed over directly (a chat upload) is refused the same way.
    assert "bytes per bank file" in _errors(big.read_text(encoding="utf-8"))[0]


def test_an_unterminated_quote_is_reported_where_it_starts() -> None:
    text = GOOD.format(prompt='"never closed')
    [error] = _errors(text)
    assert error.startswith("bank.yaml:6: (yaml): not valid YAML: scanning a quoted scalar that starts here")
    assert "noticed at line 13" in error


def test_non_utf8_bytes_are_reported_at_their_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(GOOD.format(prompt="Caf\xe9 au lait").encode("latin-1"))
    with pytest.raises(BankValidationError) as info:
        load_paths([path])
    [error] = info.value.errors
    assert str(error).startswith(f"{path}:6: (file): not UTF-8 text at column 16 (byte 0xe9")


async def test_validate_text_async_parses_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    real = loader.validate_text

    def recording(text: str, file: str) -> list[loader.LoadedQuestion]:
        threads.append(threading.get_ident())
        return real(text, file)

    monkeypatch.setattr(loader, "validate_text", recording)
    loaded = await validate_text_async(GOOD.format(prompt="fine"), "bank.yaml")
    assert [q.spec.id for q in loaded] == ["ddp-safe-1"]
    assert threads and threads[0] != threading.get_ident(), "parsed in a worker thread"
    await asyncio.sleep(0)


def test_preview_of_a_bad_file_prints_its_errors_not_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bomb.yaml"
    bad.write_text("questions:\n  - &a {id: x}\n  - *a\n")
    done = rankzero("--db", str(tmp_path / "p.db"), "questions", "preview", str(bad))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{bad}:2: (yaml): YAML anchors and aliases" in done.stderr
