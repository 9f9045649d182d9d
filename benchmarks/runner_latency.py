"""Verdict latency of the runner vs bare torchrun / python vs a warm unsandboxed interpreter.

Usage: python benchmarks/runner_latency.py [--runs 20] [--port 0]

Measures, side by side, over the same two files (a 2-rank gloo DDP toy and a plain torch snippet):
  * runner: wall time of POST /v1/runs through HTTP to a real `rankzero-runner serve` (bubblewrap sandbox,
    warm pool; the benchmark waits for the pool to refill between runs, i.e. steady state at low load);
  * bare:   `torchrun --nproc_per_node=2 ddp.py` and `python plain.py` (cold interpreters, no sandbox);
  * warm:   the same code exec'd in this already-warm interpreter (torch imported), no sandbox; for DDP,
    two ranks forked from it, as the runner's supervisor does.
Prints medians and p95s, and the ratios the issue targets (DDP-2 verdict <= 0.10 x bare torchrun; sandbox
overhead <= +150 ms over the warm unsandboxed exec).
"""

from __future__ import annotations

import argparse
import contextlib
import io
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

DDP_TOY = """\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: {t.item()}")
dist.destroy_process_group()
"""

PLAIN = """\
import torch
x = torch.arange(6.0).view(2, 3)
print(x.sum(dim=0), x.mean().item())
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def measure(runs: int, once: Callable[[], None]) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return times


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(port: int, token: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RANKZERO_RUNNER_TOKEN": token}
    cmd = [sys.executable, "-m", "runner.cli", "serve", "--port", str(port), "--log-level", "WARNING"]
    return subprocess.Popen(cmd, env=env)


def wait_pool_full(http: httpx.Client, timeout_s: float = 120) -> None:
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


def warm_exec_plain() -> None:
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        exec(compile(PLAIN, "plain.py", "exec"), {"__name__": "__main__"})


def warm_fork_ddp(port_base: list[int]) -> None:
    port_base[0] += 1
    pids = []
    for rank in range(2):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.environ.update(
                    RANK=str(rank),
                    WORLD_SIZE="2",
                    LOCAL_RANK=str(rank),
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port_base[0]),
                )
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                exec(compile(DDP_TOY, "ddp.py", "exec"), {"__name__": "__main__"})
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)


def row(name: str, values: list[float]) -> str:
    median_ms = statistics.median(values) * 1000
    return f"  {name:<44} median {median_ms:8.1f} ms   p95 {pct(values, 0.95) * 1000:8.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    runs = args.runs

    import torch
    import torch.distributed

    workdir = Path(tempfile.mkdtemp(prefix="rz-bench-"))
    ddp_file = workdir / "ddp.py"
    plain_file = workdir / "plain.py"
    ddp_file.write_text(DDP_TOY)
    plain_file.write_text(PLAIN)
    torchrun = str(Path(sys.executable).with_name("torchrun"))

    token = secrets.token_hex(16)
    port = free_port()
    server = start_server(port, token)
    results: dict[str, list[float]] = {}
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=120
        ) as http:
            deadline = time.monotonic() + 120
            while True:
                try:
                    http.get("/v1/health")
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

            def via_http(body: dict[str, object]) -> Callable[[], None]:
                def once() -> None:
                    verdict = http.post("/v1/runs", json=body).json()
                    if verdict["status"] != "ok":
                        raise RuntimeError(f"benchmark job failed: {verdict}")

                return once

            http_ddp: list[float] = []
            http_plain: list[float] = []
            for _ in range(runs):
                wait_pool_full(http)
                http_ddp += measure(1, via_http({"code": DDP_TOY, "mode": "ddp", "nproc": 2}))
                wait_pool_full(http)
                http_plain += measure(1, via_http({"code": PLAIN}))
            results["runner HTTP, DDP-2 gloo toy"] = http_ddp
            results["runner HTTP, plain torch snippet"] = http_plain
    finally:
        server.terminate()
        server.wait(timeout=30)

    results["bare torchrun --nproc_per_node=2 ddp.py"] = measure(
        runs,
        lambda: subprocess.run(
            [torchrun, "--nproc_per_node=2", str(ddp_file)], check=True, capture_output=True
        ),
    )
    results["bare python plain.py"] = measure(
        runs, lambda: subprocess.run([sys.executable, str(plain_file)], check=True, capture_output=True)
    )
    ports = [29600]
    results["warm unsandboxed, DDP-2 (2 forks)"] = measure(runs, lambda: warm_fork_ddp(ports))
    results["warm unsandboxed, plain exec"] = measure(runs, warm_exec_plain)

    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"machine: {os.cpu_count()} CPU cores, {platform.machine()}, CPU-only, torch {torch.__version__},")
    print(f"         Python {platform.python_version()}, {runs} runs each")
    for name, values in results.items():
        print(row(name, values))
    ddp_ratio = med["runner HTTP, DDP-2 gloo toy"] / med["bare torchrun --nproc_per_node=2 ddp.py"]
    plain_ratio = med["runner HTTP, plain torch snippet"] / med["bare python plain.py"]
    ddp_overhead = med["runner HTTP, DDP-2 gloo toy"] - med["warm unsandboxed, DDP-2 (2 forks)"]
    plain_overhead = med["runner HTTP, plain torch snippet"] - med["warm unsandboxed, plain exec"]
    print("ratios:")
    print(f"  DDP-2 verdict / bare torchrun:            {ddp_ratio:6.3f}   (target <= 0.10)")
    print(f"  plain verdict / bare python:              {plain_ratio:6.3f}")
    print(f"  DDP-2 sandbox+HTTP overhead over warm:    {ddp_overhead * 1000:+6.0f} ms (target <= +150 ms)")
    print(f"  plain sandbox+HTTP overhead over warm:    {plain_overhead * 1000:+6.0f} ms (target <= +150 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
