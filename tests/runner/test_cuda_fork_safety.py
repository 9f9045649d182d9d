"""The rule that keeps warm sandboxes usable on GPUs: nothing that forks ranks touches the CUDA runtime.

A process that asked the CUDA runtime anything (``torch.cuda.is_available()`` calls ``cudaGetDeviceCount``)
arms torch's fork poisoning: every rank forked from it fails its first CUDA call with "Cannot re-initialize
CUDA in forked subprocess".  Our CI has no GPU, so these tests check the rule where it is made, on CPU:

* the supervisor's whole life before it forks a rank (warm-up and job start, run for real by the
  supervisor's ``main`` with a real job) calls no ``torch.cuda`` function except fork-safe ones: a check of
  how torch was built, or a device query made while NVML answers it;
* the guard that makes those queries fork-safe never reaches the runtime's device count, with NVML or
  without it, on a simulated CUDA build (the functions torch would call there are replaced by recorders).

``tests/runner/test_gpu.py`` checks the same on a real GPU (warm CUDA, DataParallel and NCCL jobs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from runner.inside import warmup

ROOT = Path(__file__).resolve().parents[2]

# Queries that never start the CUDA runtime: how torch was built, and the NVML-based device count.
ALWAYS_SAFE = {"_is_compiled", "_nvml_based_avail"}
SAFE_WITH_NVML = {"is_available", "device_count", "_device_count_nvml", "_raw_device_count_nvml"}

DRIVER = textwrap.dedent(
    """
    import functools, inspect, json, os, sys, tempfile
    sys.path.insert(0, sys.argv[1])
    import torch, torch.cuda

    SUPERVISOR = os.getpid()
    calls = []

    def recorded(name, fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if os.getpid() == SUPERVISOR:  # a rank's own calls are the snippet's business
                nvml = os.environ.get(warmup.NVML_CHECK) == "1"
                calls.append({"name": name, "nvml": nvml})
            return fn(*args, **kwargs)
        return call

    for name, obj in list(vars(torch.cuda).items()):
        if inspect.isfunction(obj):
            setattr(torch.cuda, name, recorded(name, obj))

    from runner.inside import supervisor, warmup

    workdir = tempfile.mkdtemp()
    control_r, control_w = os.pipe()
    status_r, status_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    dump_r, dump_w = os.pipe()
    spec = {"control_fd": control_r, "status_fd": status_w, "workdir": workdir, "preload": "full",
            "gpus": 0, "ranks": [{"out": out_w, "err": err_w, "dump": dump_w}]}
    code = (
        "import os, torch\\n"
        "print(torch.cuda.is_available(), os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK'))\\n"
    )
    job = {"code": code, "mode": "python", "nproc": 1, "backend": "gloo", "warm_spawn": "auto",
           "env": {"PATH": os.environ["PATH"], "HOME": workdir}, "limits": {}}
    os.write(control_w, (json.dumps(job) + "\\n").encode())
    rc = supervisor.main(["__main__.py", json.dumps(spec)])
    for fd in (status_w, control_w):
        os.close(fd)
    out = b""
    while chunk := os.read(out_r, 65536):
        out += chunk
    err = b""
    while chunk := os.read(err_r, 65536):
        err += chunk
    print(json.dumps({"rc": rc, "calls": calls, "stdout": out.decode(), "stderr": err.decode()}))
    """
)


def test_the_supervisor_asks_cuda_nothing_that_poisons_its_forks(tmp_path: Path) -> None:
    """Warm-up and job start, for real: every torch.cuda call the supervisor makes is fork-safe."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if k != warmup.NVML_CHECK}
    done = subprocess.run(
        [sys.executable, str(driver), str(ROOT)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rc"] == 0
    # The job ran in a rank forked after the warm-up, and its environment is the job's own: the guard's
    # variable is gone again (a snippet sees what it would see under torchrun).
    assert result["stdout"] == "False None\n", result["stderr"]
    names = {call["name"] for call in result["calls"]}
    assert "is_available" in names  # the warm-up's compiler stack does ask (torch._dynamo.reset)
    unsafe = [
        call
        for call in result["calls"]
        if call["name"] not in ALWAYS_SAFE and not (call["name"] in SAFE_WITH_NVML and call["nvml"])
    ]
    assert unsafe == [], f"the supervisor made CUDA queries that poison its forks: {unsafe}"


@pytest.fixture
def cuda_build(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch as a CUDA build would behave, with the runtime's device count replaced by a recorder."""
    asked: list[str] = []

    def runtime_count() -> int:
        asked.append("cudaGetDeviceCount")
        return 1

    monkeypatch.setattr(torch.cuda, "_is_compiled", lambda: True)
    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", runtime_count, raising=False)
    monkeypatch.delenv(warmup.NVML_CHECK, raising=False)
    return asked


@pytest.mark.parametrize("nvml_devices", [1, -1], ids=["nvml", "no-nvml"])
def test_the_guard_answers_device_queries_without_the_runtime(
    cuda_build: list[str], monkeypatch: pytest.MonkeyPatch, nvml_devices: int
) -> None:
    # -1 is what torch's NVML count returns when NVML cannot be loaded: torch then falls back to the runtime.
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: nvml_devices)
    assert torch.cuda.is_available() is True
    assert cuda_build == ["cudaGetDeviceCount"], "without the guard, is_available() asks the runtime"
    cuda_build.clear()
    original = torch._C._cuda_getDeviceCount

    with warmup.cuda_runtime_untouched(gpus=2):
        assert torch.cuda.is_available() is True
        assert torch.cuda.device_count() == (1 if nvml_devices > 0 else 2)
    assert cuda_build == []
    # Restored for the snippet: its own queries reach torch's real functions, its environment is its own.
    assert torch._C._cuda_getDeviceCount is original
    assert warmup.NVML_CHECK not in os.environ


def test_the_guard_keeps_an_operators_setting(cuda_build: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(warmup.NVML_CHECK, "0")
    with warmup.cuda_runtime_untouched(gpus=0):
        assert os.environ[warmup.NVML_CHECK] == "1"
    assert os.environ[warmup.NVML_CHECK] == "0"
