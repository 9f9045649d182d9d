"""Verdict latency of the runner against bare torchrun / python, for every shape, spaced and back to back.

Usage: python benchmarks/runner_latency.py [--runs 5] [--burst 8] [--shapes 1,2,4,8,spawn,spawn-ar,sets-2]
                                          [--warm-spawn auto|on|off] [--timeout 120] [--cold]

The snippets are written like the question bank's and PyTorch's tutorials:

  * ddp-N:      a model wrapped in DistributedDataParallel (whose constructor imports torch's compiler
                stack on first use), one SGD step on random data, then the process group is destroyed, as
                N ranks: ``POST /v1/runs`` mode ddp, nproc N, against ``torchrun --nproc_per_node=N ddp.py``;
  * spawn-2:    the "Getting Started with DDP" layout: one process that ``mp.spawn``s two workers which set
                up their own process group and train the same DDP model, as mode python, against
                ``python spawn.py``;
  * spawn-ar-2: the same layout without a DDP model (each worker all-reduces a tensor), against
                ``python spawn-ar.py``;
  * sets-N:     ddp-N's step plus a set of parameter names: its ranks are fresh interpreters (each with
                its own string hash seed, as torchrun's), the cost of that rule (runner/README.md).

On a GPU host (issue 23; benchmarks/gpu_check.sh runs them), ``--shapes nccl-1,dp,cuda``:

  * nccl-1:     one rank bound to its GPU, NCCL process group, a DDP step on the GPU: mode ddp, nproc 1,
                against ``torchrun --nproc_per_node=1 nccl.py``;
  * dp:         ``nn.DataParallel`` over every GPU, one training step: mode dp, against ``python dp.py``;
  * cuda:       a 2048 x 2048 matmul on the GPU, synchronised: mode python, against ``python cuda.py``.

``--cold`` adds a column: the same requests to a second runner with an empty pool (``--pool 8:0``), so that
every job starts its sandbox and imports torch itself; it says what the warm pool saves.

The runner is a real ``rankzero-runner serve`` (bubblewrap sandboxes, default warm pool) on loopback.
"spaced" waits for the pool to be full before each request (the steady state at a low request rate);
"back to back" sends ``--burst`` requests one after the other, each as soon as the previous verdict came,
without waiting for the pool (results time brings disputes together).  The bare runs are cold
interpreters without a sandbox; pool state does not apply to them, so one median serves both ratios.
``--warm-spawn`` is passed to the runner: with the default, ``auto``, the workers of both spawn shapes are
forks of the warm rank (a DDP model over subgroups of its own would get fresh interpreters); see
runner/README.md, "Warm pool", for why.
The load average is printed at the start and the end: on a shared machine the figures mean little
without it.
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

DDP_STEP = """\
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Linear(10, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
loss = nn.MSELoss()(model(torch.randn(20, 10)), torch.randn(20, 5))
loss.backward()
optimizer.step()
print(f"rank {rank}: loss {loss.item():.4f}")
dist.destroy_process_group()
"""

SPAWN = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def demo_basic(rank, world_size):
    setup(rank, world_size)
    model = DDP(nn.Linear(10, 5))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    nn.MSELoss()(model(torch.randn(20, 10)), torch.randn(20, 5)).backward()
    optimizer.step()
    print(f"rank {rank} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(demo_basic, args=(2,), nprocs=2, join=True)
"""

# ddp-N's step on a snippet that builds a set of parameter names (its iteration order follows each
# interpreter's string hash seed): the runner gives its ranks fresh interpreters, as torchrun's are.
DDP_SETS = DDP_STEP.replace(
    "loss.backward()\n", "loss.backward()\nnames = {n for n, _ in model.named_parameters()}\n"
)

# The same layout without a DDP model: each worker all-reduces a tensor over gloo and prints the sum.
SPAWN_ALL_REDUCE = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12356"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    print(f"rank {rank}: {t.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
"""


NCCL_STEP = """\
import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)
model = DDP(nn.Linear(10, 5).cuda(), device_ids=[local_rank])
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
loss = nn.MSELoss()(model(torch.randn(20, 10).cuda()), torch.randn(20, 5).cuda())
loss.backward()
optimizer.step()
print(f"rank {dist.get_rank()}: loss {loss.item():.4f}")
dist.destroy_process_group()
"""

DP_STEP = """\
import torch
import torch.nn as nn

model = nn.DataParallel(nn.Linear(10, 5).cuda())
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
loss = nn.MSELoss()(model(torch.randn(64, 10).cuda()), torch.randn(64, 5).cuda())
loss.backward()
optimizer.step()
print(f"{torch.cuda.device_count()} GPUs: loss {loss.item():.4f}")
"""

CUDA_MATMUL = """\
import torch

x = torch.randn(2048, 2048, device="cuda")
y = x @ x
torch.cuda.synchronize()
print(y.shape, y.device)
"""

# shape -> (script, mode, the bare launch: "torchrun" or "python")
GPU_SHAPES = {
    "nccl-1": (NCCL_STEP, "ddp", "torchrun"),
    "dp": (DP_STEP, "dp", "python"),
    "cuda": (CUDA_MATMUL, "python", "python"),
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def timed(once: Callable[[], None], label: str) -> float:
    """Time one run and say so on stderr at once: a run cut off by a time limit still shows its progress."""
    start = time.perf_counter()
    once()
    took = time.perf_counter() - start
    print(f"[latency] {label}: {took:.2f}s", file=sys.stderr, flush=True)
    return took


def wait_pool_full(http: httpx.Client, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pool = http.get("/v1/health").json()["pool"]
            if all(pool["ready"].get(n, 0) >= c for n, c in pool["targets"].items()):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the runner's pool did not fill")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="spaced requests and bare runs per shape")
    parser.add_argument("--burst", type=int, default=8, help="back-to-back requests per shape")
    parser.add_argument("--shapes", default="1,2,4,8,spawn,spawn-ar")
    parser.add_argument(
        "--timeout", type=float, default=120, help="the runner's deadline per request, seconds"
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a verdict is not ok or a bare run fails"
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="also time every shape on a second runner with an empty pool (each job starts cold)",
    )
    parser.add_argument(
        "--warm-spawn",
        default="auto",
        choices=("auto", "on", "off"),
        help="the runner's --warm-spawn setting (auto: mp.spawn workers forked from the warm rank unless "
        "the snippet builds a DDP model)",
    )
    args = parser.parse_args()
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    # The figures only mean something next to how busy the machine was: printed at the start and the end.
    load_at_start = os.getloadavg()

    import torch

    workdir = Path(tempfile.mkdtemp(prefix="rz-bench-"))
    (workdir / "ddp.py").write_text(DDP_STEP)
    scripts = {"spawn": SPAWN, "spawn-ar": SPAWN_ALL_REDUCE}
    for shape, script in scripts.items():
        (workdir / f"{shape}.py").write_text(script)
    # Not cuda.py: torch probes for a module named "cuda" when imported, and would import the script.
    for shape, (script, _, _) in GPU_SHAPES.items():
        (workdir / f"gpu_{shape}.py".replace("-", "_")).write_text(script)
    # A Python without a torchrun script next to it (torch installed elsewhere) runs the same module.
    torchrun_script = Path(sys.executable).with_name("torchrun")
    torchrun = (
        [str(torchrun_script)]
        if torchrun_script.exists()
        else [sys.executable, "-m", "torch.distributed.run"]
    )
    (workdir / "sets.py").write_text(DDP_SETS)
    bare_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "LANG": "C.UTF-8"}

    failures: list[str] = []

    def body(shape: str) -> dict[str, object]:
        if shape in GPU_SHAPES:
            script, mode, _ = GPU_SHAPES[shape]
            return {"code": script, "mode": mode, "nproc": 1, "timeout_s": args.timeout}
        if shape in scripts:
            return {"code": scripts[shape], "mode": "python", "timeout_s": args.timeout}
        if shape.startswith("sets-"):
            return {"code": DDP_SETS, "mode": "ddp", "nproc": int(shape[5:]), "timeout_s": args.timeout}
        return {"code": DDP_STEP, "mode": "ddp", "nproc": int(shape), "timeout_s": args.timeout}

    def bare(shape: str) -> Callable[[], None]:
        gpu_script = str(workdir / f"gpu_{shape}.py".replace("-", "_"))
        if shape in GPU_SHAPES and GPU_SHAPES[shape][2] == "torchrun":
            argv = [*torchrun, "--nproc_per_node=1", gpu_script]
        elif shape in GPU_SHAPES:
            argv = [sys.executable, gpu_script]
        elif shape in scripts:
            argv = [sys.executable, str(workdir / f"{shape}.py")]
        elif shape.startswith("sets-"):
            argv = [*torchrun, f"--nproc_per_node={shape[5:]}", str(workdir / "sets.py")]
        else:
            argv = [*torchrun, f"--nproc_per_node={shape}", str(workdir / "ddp.py")]

        def once() -> None:
            result = subprocess.run(argv, check=False, capture_output=True, env=bare_env, cwd=workdir)
            if result.returncode != 0:
                tail = result.stderr.decode(errors="replace").strip().splitlines()[-1:]
                failures.append(f"bare {shape}: exit {result.returncode} {tail}")

        return once

    def serve_and_time(pool: str | None) -> tuple[str, dict[str, list[float]], dict[str, list[float]]]:
        """Start a real ``serve`` (with ``--pool`` when given); time every shape spaced, then back to back."""
        kind = "warm" if pool is None else "cold"
        token = secrets.token_hex(16)
        port = free_port()
        argv = [sys.executable, "-m", "runner.cli", "serve", "--port", str(port), "--log-level", "WARNING"]
        argv += ["--warm-spawn", args.warm_spawn, *(["--pool", pool] if pool is not None else [])]
        server = subprocess.Popen(argv, env={**os.environ, "RANKZERO_RUNNER_TOKEN": token})
        spaced: dict[str, list[float]] = {}
        burst: dict[str, list[float]] = {}
        try:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=300
            ) as http:
                deadline = time.monotonic() + 180
                while True:
                    try:
                        targets = str(http.get("/v1/health").json()["pool"]["targets"])
                        break
                    except httpx.HTTPError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.2)

                def via_http(shape: str) -> Callable[[], None]:
                    def once() -> None:
                        verdict = http.post("/v1/runs", json=body(shape)).json()
                        if verdict.get("status") != "ok":
                            # Counted and shown, not fatal: gloo's teardown in mp.spawn workers can abort
                            # ("terminate called without an active exception") on a loaded host, bare too.
                            failures.append(f"{shape}: {verdict.get('status')} {verdict.get('notes')}")

                    return once

                for shape in shapes:
                    spaced[shape] = []
                    for _ in range(args.runs):
                        wait_pool_full(http)
                        spaced[shape].append(timed(via_http(shape), f"{kind} {shape} spaced"))
                    if pool is None:  # the cold runner only needs its spaced figure
                        wait_pool_full(http)
                        label = f"{kind} {shape} back to back"
                        burst[shape] = [timed(via_http(shape), label) for _ in range(args.burst)]
        finally:
            server.terminate()
            server.wait(timeout=60)
        return targets, spaced, burst

    pool_targets, spaced, burst = serve_and_time(None)
    # An empty pool: every job starts its sandbox and imports torch itself.
    cold = serve_and_time("8:0")[1] if args.cold else {}

    bare_times = {shape: [timed(bare(shape), f"bare {shape}") for _ in range(args.runs)] for shape in shapes}

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = sorted({torch.cuda.get_device_name(i) for i in range(gpus)})
    devices = f"{gpus} GPU(s) {', '.join(names)}, CUDA {torch.version.cuda}" if gpus else "CPU-only"
    print(
        f"machine: {os.cpu_count()} CPU cores, {platform.machine()}, {devices}, torch {torch.__version__}, "
        f"Python {platform.python_version()}"
    )
    start_load = " / ".join(f"{v:.1f}" for v in load_at_start)
    end_load = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"load average (1 / 5 / 15 min): {start_load} at the start, {end_load} at the end")
    print(
        f"pool {pool_targets}; warm spawn {args.warm_spawn}; "
        f"per shape {args.runs} spaced, {args.burst} back-to-back requests"
    )
    cold_header = f"   {'cold median':>11} {'ratio':>7}" if cold else ""
    print(
        f"  {'shape':<10} {'bare median':>12} {'spaced median':>14} {'ratio':>7}   "
        f"{'b2b median':>11} {'ratio':>7}   {'b2b max':>8}{cold_header}"
    )
    for shape in shapes:
        bare_median = statistics.median(bare_times[shape])
        spaced_median = statistics.median(spaced[shape])
        burst_median = statistics.median(burst[shape])
        name = {"spawn": "spawn-2", "spawn-ar": "spawn-ar-2"}.get(
            shape, shape if shape in GPU_SHAPES or shape.startswith("sets-") else f"ddp-{shape}"
        )
        cold_cells = ""
        if cold:
            cold_median = statistics.median(cold[shape])
            cold_cells = f"   {cold_median * 1000:9.0f}ms {cold_median / bare_median:7.3f}"
        print(
            f"  {name:<10} {bare_median * 1000:10.0f}ms {spaced_median * 1000:12.0f}ms "
            f"{spaced_median / bare_median:7.3f}   {burst_median * 1000:9.0f}ms "
            f"{burst_median / bare_median:7.3f}   {max(burst[shape]) * 1000:6.0f}ms{cold_cells}"
        )
    if any(shape in GPU_SHAPES for shape in shapes):
        print("targets (issue 23): nccl-1 spaced <= 0.10, back to back <= 0.3; dp and cuda served warm")
    if any(shape not in GPU_SHAPES for shape in shapes):
        print("targets: spaced <= 0.10 for every nproc, <= 0.05 for 2 ranks; back to back <= 0.5")
    print(f"runs that failed (runner verdict not ok, or bare exit != 0): {len(failures)}")
    for failure in failures:
        print(f"  {failure[:300]}")
    return 1 if failures and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
