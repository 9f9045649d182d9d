"""Ranks differ as separate interpreters do, where a snippet can see it: the string hash seed.

Under torchrun every rank is a new interpreter with a random string hash seed, so a set of parameter names
iterates in a different order on each rank; ranks forked from one warm supervisor share its seed.  A
snippet that builds sets or calls ``hash()`` therefore gets ranks (and ``mp.spawn`` workers) that are
fresh interpreters; one that does not keeps the warm, forked ranks.
"""

from __future__ import annotations

import ast

import pytest

from runner.analysis import observes_string_hashes
from runner.service import FRESH_NOTE, RunnerService
from runner.verdict import Status
from tests.runner.conftest import run

DDP_HASHES = """
import os
import torch.distributed as dist
rank = int(os.environ["RANK"])
with open(f"/tmp/rank{rank}.pid", "w") as fh:
    fh.write(str(os.getpid()))
dist.barrier()
with open(f"/tmp/rank{1 - rank}.pid") as fh:
    sibling = int(fh.read())
try:
    os.listdir(f"/proc/{sibling}/fd")
    reach = "open"
except PermissionError:
    reach = "closed"
print(rank, hash("layer1.weight"), reach)
"""


def test_ranks_of_a_snippet_that_hashes_have_seeds_of_their_own(service: RunnerService) -> None:
    verdict = run(service, DDP_HASHES, mode="ddp", nproc=2, init_process_group=True, timeout_s=120)
    assert verdict.status == Status.OK, verdict.to_dict()
    lines = [r.stdout.split() for r in verdict.ranks]
    assert [line[0] for line in lines] == ["0", "1"]
    assert lines[0][1] != lines[1][1], "both ranks hashed a string alike: they share one hash seed"
    # A fresh rank is as closed to its siblings as a forked one: no reading another rank's pipes.
    assert [line[2] for line in lines] == ["closed", "closed"]
    assert FRESH_NOTE in verdict.notes


SPAWN_HASHES = """
import torch.multiprocessing as mp

def work(i):
    print(f"worker {i} {hash('layer1.weight')}\\n", end="", flush=True)

if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
"""


def test_spawned_workers_of_a_snippet_that_hashes_have_seeds_of_their_own(service: RunnerService) -> None:
    verdict = run(service, SPAWN_HASHES, timeout_s=120)
    assert verdict.status == Status.OK, verdict.to_dict()
    hashes = {line.split()[1]: line.split()[2] for line in verdict.ranks[0].stdout.splitlines()}
    assert sorted(hashes) == ["0", "1"]
    assert hashes["0"] != hashes["1"]
    assert FRESH_NOTE in verdict.notes


def test_ranks_of_a_snippet_without_sets_stay_warm(service: RunnerService) -> None:
    code = "import os\nprint(os.environ['RANK'], [n for n in ('a', 'b')])\n"
    verdict = run(service, code, mode="ddp", nproc=2, timeout_s=120)
    assert verdict.status == Status.OK, verdict.to_dict()
    assert FRESH_NOTE not in verdict.notes


@pytest.mark.parametrize(
    ("code", "observes"),
    [
        ("names = {n for n, _ in model.named_parameters()}", True),
        ("s = {'a', 'b'}", True),
        ("s = set(sd)", True),
        ("s = frozenset(sd)", True),
        ("print(hash('x'))", True),
        ("missing = model.state_dict().keys() - loaded.keys()", True),
        ("both = a.keys() & b.keys()", True),
        ("u = a.union(b)", True),
        ("d = {'a': 1}\nfor k in d:\n    print(k)", False),
        ("x = [1, 2] + [3]\ny = 3 - 1", False),
        ("def f(:", False),  # does not parse: fails alike everywhere
    ],
)
def test_which_snippets_observe_string_hashes(code: str, observes: bool) -> None:
    try:
        tree: ast.Module | None = ast.parse(code)
    except SyntaxError:
        tree = None
    assert observes_string_hashes(tree) is observes
