"""``rankzero questions build`` on a real runner: incremental, verdict-checked, torch changes reported."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from bot.runner_client import HttpRunnerClient
from questions.build import build, read_records
from questions.loader import load_paths
from tests.runner_server import RunnerServer

FAMILIES = """
families:
  - id: fam-sum
    kind: predict_output
    topic: Collectives
    difficulty: beginner
    params:
      n: [4, 5]
    runner: {mode: python}
    prompt: "What does this print for n = {{ n }}?"
    hint: range(n) stops before n.
    code: |
      print(sum(range({{ n }})))
    distractors:
      - rule: offset
        delta: "n"
        feedback: range stops before n.
      - rule: scale
        factor: 2
  - id: fam-barrier-hang
    kind: predict_output
    topic: Collectives
    difficulty: advanced
    params:
      who: [1]
    runner: {mode: ddp, nproc: 2, init_process_group: true, timeout_s: 6}
    expect: hang
    answer: "hangs: rank {{ who }} waits in barrier while the other rank is still busy"
    prompt: "Two ranks. What happens?"
    hint: Who is still busy?
    code: |
      import time
      import torch.distributed as dist
      if dist.get_rank() == {{ who }}:
          dist.barrier()
      else:
          time.sleep(60)  # a long rank-0 checkpoint save
      print("done")
    distractors:
      - text: "done\\ndone"
      - text: "done"
  - id: fam-unexpected-hang
    kind: predict_output
    topic: Collectives
    difficulty: advanced
    params:
      k: [1]
    runner: {mode: python, timeout_s: 3}
    prompt: "What is printed?"
    hint: How long does it sleep?
    code: |
      import time
      time.sleep(30)
      print({{ k }})
    distractors:
      - text: "2"
      - text: "3"
"""


@pytest.fixture
async def client(runner: RunnerServer) -> AsyncIterator[HttpRunnerClient]:
    async with HttpRunnerClient(runner.url, runner.token) as c:
        yield c


async def test_build_is_incremental_and_proven(tmp_path: Path, client: HttpRunnerClient) -> None:
    fams = tmp_path / "families"
    fams.mkdir()
    src = fams / "demo.yaml"
    src.write_text(FAMILIES)
    out = tmp_path / "generated"

    first = await build([fams], out, client)
    assert first.ran == 4 and first.written == 3, first
    assert (
        len(first.errors) == 1
        and "fam-unexpected-hang/k=1" in first.errors[0]
        and "timeout" in first.errors[0]
    )
    loaded = {q.spec.id: q.spec for q in load_paths([out])}
    assert set(loaded) == {"fam-sum/n=4", "fam-sum/n=5", "fam-barrier-hang/who=1"}
    sum4 = loaded["fam-sum/n=4"]
    assert sum4.choices is not None
    assert [c.text for c in sum4.choices if c.correct] == ["6"]
    assert sorted(c.text for c in sum4.choices) == ["10", "12", "6"]
    hang = loaded["fam-barrier-hang/who=1"]
    assert hang.choices is not None and next(c.text for c in hang.choices if c.correct).startswith("hangs")
    assert all(r["verified"] for r in read_records(out / "demo.yaml").values())
    assert "fam-unexpected-hang/k=1" not in read_records(out / "demo.yaml"), "a failed run is run again"

    # Nothing changed: nothing runs, nothing is rewritten, and --check agrees.
    again = await build([fams], out, client)
    assert (again.ran, again.reused, again.files) == (1, 3, []), again  # only the failing instance re-runs
    check = await build([fams], out, client, check=True)
    assert check.out_of_date == []

    # One instance's code changes: only it runs; --check first reports the stale file.
    src.write_text(
        FAMILIES.replace(
            "print(sum(range({{ n }})))",
            "print(sum(range({{ n }} + 1)))" if False else "print(sum(range({{ n }})) + ({{ n }} == 5))",
        )
    )
    stale = await build([fams], out, client, check=True)
    assert stale.out_of_date == [str(out / "demo.yaml")]
    third = await build([fams], out, client)
    assert third.ran == 3 and third.reused == 1, third  # n=4 and n=5 render new code; the hang is reused
    assert third.torch_changes == []


async def test_a_torch_version_change_that_changes_an_answer_is_reported(
    tmp_path: Path, client: HttpRunnerClient
) -> None:
    fams = tmp_path / "families"
    fams.mkdir()
    (fams / "demo.yaml").write_text(FAMILIES)
    out = tmp_path / "generated"
    await build([fams], out, client)
    path = out / "demo.yaml"
    data = yaml.safe_load(path.read_text())
    records = data["generated"]["instances"]
    # As if the file had been built under an older torch that printed something else for n=4, and the
    # same thing for n=5.
    records["fam-sum/n=4"]["torch"] = "2.4.0"
    records["fam-sum/n=4"]["ranks"][0]["stdout"] = "7\n"
    records["fam-sum/n=5"]["torch"] = "2.4.0"
    path.write_text(yaml.safe_dump(data, sort_keys=False))

    report = await build([fams], out, client)
    assert report.ran == 3  # both old-torch records and the failing instance
    assert len(report.torch_changes) == 1, report.torch_changes
    assert report.torch_changes[0].startswith("fam-sum/n=4: torch 2.4.0 -> ")
    assert "'7' -> ok '6'" in report.torch_changes[0]


async def test_a_run_whose_assembly_fails_is_kept_and_not_run_again(
    tmp_path: Path, client: HttpRunnerClient
) -> None:
    fams = tmp_path / "families"
    fams.mkdir()
    # offset by 0 and scale by 1 predict the answer itself: too few choices, though the run is fine.
    broken = FAMILIES.replace('delta: "n"', 'delta: "0"').replace("factor: 2", "factor: 1")
    (fams / "demo.yaml").write_text(broken)
    out = tmp_path / "generated"
    first = await build([fams], out, client)
    assert any("fam-sum/n=4" in e and "distinct choices" in e for e in first.errors), first.errors
    kept = read_records(out / "demo.yaml")["fam-sum/n=4"]
    assert kept["verified"] is False and kept["status"] == "ok"
    (fams / "demo.yaml").write_text(FAMILIES)  # the family is fixed: no new run for fam-sum
    second = await build([fams], out, client)
    assert "fam-sum/n=4" in {q.spec.id for q in load_paths([out])}
    assert second.ran == 1  # only the unexpected hang, whose failed run was not kept
