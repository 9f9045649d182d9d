"""Fixtures for the runner: one real, bubblewrap-sandboxed service shared by the whole session.

Every job gets a fresh sandbox anyway, so sharing the service only shares the warm pool (and saves the
torch imports a per-test service would repeat).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner import hardware
from runner.config import RunnerConfig
from runner.sandbox import _python_roots, bubblewrap_path
from runner.service import RunnerService, RunRequest
from runner.verdict import Mode, Status, Verdict

# Small enough that memory bombs fail fast, big enough for torch plus a gloo process group.
TEST_MEMORY_MB = 2048

# The runner reports what torch sees; tests of CPU-only behaviour (0 GPUs, DataParallel pass-through,
# "needs CUDA") cannot hold on a runner with GPUs, and the GPU tests cannot run without one.
RUNNER_GPUS = hardware.probe().gpus
cpu_only = pytest.mark.skipif(RUNNER_GPUS > 0, reason="checks CPU-only behaviour; this runner has CUDA GPUs")
needs_cuda = pytest.mark.skipif(RUNNER_GPUS == 0, reason="needs a CUDA GPU (torch.cuda.is_available())")


@pytest.fixture(scope="session")
def service() -> Iterator[RunnerService]:
    if bubblewrap_path() is None:
        pytest.fail("bubblewrap is required for the runner tests (apt-get install bubblewrap)")
    svc = RunnerService(RunnerConfig(memory_mb=TEST_MEMORY_MB, pool={1: 1, 2: 1}, max_concurrent_jobs=4))
    svc.start()
    yield svc
    svc.close()


def run(svc: RunnerService, code: str, mode: str = "python", **kwargs: Any) -> Verdict:
    """Run a (dedented) snippet and return the verdict."""
    return svc.run(RunRequest(code=textwrap.dedent(code), mode=Mode(mode), **kwargs))


def assert_healthy(svc: RunnerService) -> None:
    """The runner still serves an ordinary job, with a clean sandbox."""
    verdict = run(svc, "import os, torch\nprint(torch.ones(2).sum().item(), sorted(os.listdir('/tmp')))\n")
    assert verdict.status == Status.OK, verdict.to_dict()
    assert verdict.ranks[0].stdout == f"2.0 {sorted(['main.py', *_binds_in_tmp()])}\n"


def _binds_in_tmp() -> set[str]:
    """Top names under /tmp that the runner itself binds read-only (its interpreter, when a checkout and
    its venv live under /tmp); anything else in a job's /tmp would have leaked from another job."""
    return {Path(root).parts[2] for root in _python_roots() if Path(root).parts[1:2] == ("tmp",)}
