"""`make images-smoke`: start each image's own entrypoint from its mounted root and talk to it over HTTP.

`podman run` fails on hosts with a hybrid cgroup layout (this project's machines), so the images are
started the way a container runtime would, without one: ``podman image mount`` gives the image's root,
and bubblewrap runs the image's entrypoint and command in it, with the image's environment, user and
working directory, a fresh /proc, /dev and tmpfs /tmp (and /run), read-only root. The whole check runs
in a network namespace of its own with only a loopback interface (deploy/smoke.sh puts it there), so
the servers, which listen on 0.0.0.0 as in a container, are reachable from this script and nothing else.

- bot (localhost/rankzero-bot:latest): no torch, pip or dev tools inside; runs as uid 10001 without
  capabilities on a read-only root; with the file platform and SQLite in its volume it answers /livez,
  then /readyz once migrated and its adapter and scheduler run; SIGTERM stops it with status 0.
- CPU runner (localhost/rankzero-runner:cpu): root with every capability (a privileged container),
  read-only root; answers /livez without a token, /v1/health with it (bubblewrap sandbox, isolated),
  and returns an ok verdict for a 2-rank DistributedDataParallel training step over gloo.
- CUDA runner (localhost/rankzero-runner:cuda, when built): torch is the CUDA build, bubblewrap and
  libseccomp are there (no GPU here to run it).

Usage: deploy/smoke.sh [bot] [runner-cpu] [runner-cuda]   (default: each image that exists)
Prints one line per check and a closing "N passed, N failed" line; exits 1 when a check failed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PODMAN = os.environ.get("PODMAN", "podman")
IMAGES = {
    "bot": "localhost/rankzero-bot:latest",
    "runner-cpu": "localhost/rankzero-runner:cpu",
    "runner-cuda": "localhost/rankzero-runner:cuda",
}
SITE = "opt/venv/lib/python3.11/site-packages"

# What a bank dispute runs: a model wrapped in DDP and one training step, two ranks over gloo.
DDP_TRAINING_STEP = """
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Linear(10, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
loss = nn.MSELoss()(model(torch.randn(20, 10)), torch.randn(20, 5))
loss.backward()
optimizer.step()
print(f"rank {rank}: {dist.get_world_size()} ranks, step done")
"""

results: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> bool:
    """Record and print one check."""
    results.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def image_exists(ref: str) -> bool:
    """Whether podman has the image."""
    return subprocess.run([PODMAN, "image", "exists", ref], check=False).returncode == 0


def image_config(ref: str) -> dict[str, Any]:
    """The image's run configuration: Env, Entrypoint, Cmd, User, WorkingDir."""
    out = subprocess.run(
        [PODMAN, "image", "inspect", "--format", "{{json .Config}}", ref],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    config: dict[str, Any] = json.loads(out)
    return config


@contextmanager
def mounted(ref: str) -> Iterator[Path]:
    """The image's root filesystem, mounted (read-only) while the block runs."""
    path = subprocess.run(
        [PODMAN, "image", "mount", ref], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        yield Path(path)
    finally:
        subprocess.run([PODMAN, "image", "unmount", ref], check=False, capture_output=True)


def bwrap_argv(
    root: Path,
    config: dict[str, Any],
    *,
    extra_env: dict[str, str],
    args: list[str],
    mounts: list[str],
    privileged: bool,
) -> list[str]:
    """Bubblewrap running the image's entrypoint + command (+ ``args``) as the image would."""
    argv = ["bwrap", "--ro-bind", str(root), "/", "--proc", "/proc", "--tmpfs", "/tmp"]  # noqa: S108 - its own tmpfs
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--clearenv"]
    for item in config.get("Env") or []:
        key, _, value = item.partition("=")
        argv += ["--setenv", key, value]
    for key, value in extra_env.items():
        argv += ["--setenv", key, value]
    if privileged:
        # A privileged container: root with every capability, the host's devices and /sys.
        argv += ["--dev-bind", "/dev", "/dev", "--ro-bind", "/sys", "/sys", "--tmpfs", "/run"]
        argv += ["--cap-add", "ALL"]
    else:
        user = config.get("User") or "0"
        uid, _, gid = user.partition(":")
        if not uid.isdigit() or (gid and not gid.isdigit()):
            raise SystemExit(f"smoke: the image's user {user!r} is not numeric")
        argv += ["--dev", "/dev", "--unshare-user", "--uid", uid, "--gid", gid or uid]
    argv += mounts
    argv += ["--chdir", config.get("WorkingDir") or "/"]
    return [*argv, *(config.get("Entrypoint") or []), *(config.get("Cmd") or []), *args]


def http(
    url: str, *, token: str | None = None, body: dict[str, Any] | None = None, timeout: float = 10
) -> tuple[int, Any]:
    """GET (or POST ``body`` as JSON) and return (status, parsed JSON or text)."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310 - loopback only
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError) as exc:  # refused, reset, timed out: no answer
        return 0, f"no answer: {exc}"
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def wait_for(
    what: str, probe: Callable[[], tuple[int, Any]], proc: subprocess.Popen[bytes], limit_s: float
) -> tuple[int, Any]:
    """Poll ``probe`` until it answers 200, the process exits or ``limit_s`` passes."""
    deadline = time.monotonic() + limit_s
    last: tuple[int, Any] = (0, "no answer")
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return 0, f"the process exited with {proc.returncode} before {what} answered 200"
        try:
            last = probe()
            if last[0] == 200:
                return last
        except (OSError, urllib.error.URLError) as exc:
            last = (0, str(exc))
        time.sleep(0.5)
    return last


def entrypoint_pid(bwrap_pid: int) -> int | None:
    """The image's process under bubblewrap (bwrap forwards no signal: a runtime signals the process)."""
    queue = [bwrap_pid]
    while queue:
        pid = queue.pop(0)
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap":
                return pid
            for task in Path(f"/proc/{pid}/task").iterdir():
                queue += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return None


def stop(proc: subprocess.Popen[bytes], limit_s: float = 30) -> int | None:
    """SIGTERM to the image's process, as a runtime stops a container; then bwrap's exit status (the
    process's), or None if it had to be killed.
    """
    if proc.poll() is not None:
        return proc.returncode
    pid = entrypoint_pid(proc.pid)
    if pid is None:
        proc.send_signal(signal.SIGTERM)
    else:
        os.kill(pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file."""
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def smoke_bot(ref: str, work: Path) -> None:
    """The bot image's checks (the module's docstring lists them)."""
    config = image_config(ref)
    check(
        "bot: runs as a non-root numeric user",
        (config.get("User") or "0").split(":")[0] not in ("0", "root"),
        config.get("User", ""),
    )
    check(
        "bot: health listens on all interfaces", "RANKZERO_HEALTH_HOST=0.0.0.0" in (config.get("Env") or [])
    )
    with mounted(ref) as root:
        present = [
            name
            for name in ("torch", "pip", "pytest", "mypy", "ruff", "setuptools")
            if (root / SITE / name).exists()
        ]
        check("bot: no torch, pip or dev tools", not present, f"found {present}" if present else "")
        data = work / "bot-data"
        data.mkdir()
        log = work / "bot.log"
        argv = bwrap_argv(
            root,
            config,
            extra_env={"RANKZERO_RECORD_FILE": "/var/lib/rankzero/posts.jsonl"},
            args=[],
            mounts=["--bind", str(data), "/var/lib/rankzero"],
            privileged=False,
        )
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            started = time.monotonic()
            status, body = wait_for("/livez", lambda: http("http://127.0.0.1:8787/livez"), proc, 120)
            check(
                "bot: /livez answers 200",
                status == 200,
                f"{status} {body} after {time.monotonic() - started:.1f} s",
            )
            status, body = wait_for("/readyz", lambda: http("http://127.0.0.1:8787/readyz"), proc, 180)
            check(
                "bot: /readyz answers 200 (migrated, adapter and scheduler up)",
                status == 200,
                f"{status} after {time.monotonic() - started:.1f} s",
            )
            if status != 200:
                print(json.dumps(body, indent=1)[:3000] if not isinstance(body, str) else body[:3000])
            check(
                "bot: its SQLite database is in the volume",
                (data / ".local/share/rankzero/rankzero.db").exists(),
            )
        finally:
            code = stop(proc)
        check("bot: SIGTERM stops it with status 0", code == 0, f"status {code}")
        if not all(ok for name, ok, _ in results if name.startswith("bot")):
            print(tail(log))


def smoke_runner_cpu(ref: str, work: Path) -> None:
    """The CPU runner image's checks."""
    config = image_config(ref)
    token = secrets.token_urlsafe(24)
    with mounted(ref) as root:
        present = [name for name in ("pip", "pytest", "mypy", "ruff") if (root / SITE / name).exists()]
        check("runner-cpu: no pip or dev tools", not present, f"found {present}" if present else "")
        check(
            "runner-cpu: bubblewrap and libseccomp are installed",
            (root / "usr/bin/bwrap").exists() and any((root / "usr/lib").rglob("libseccomp.so.2")),
        )
        torch_dirs = sorted((root / SITE).glob("torch-*.dist-info"))
        check(
            "runner-cpu: torch is the CPU build",
            any("+cpu" in p.name for p in torch_dirs),
            ", ".join(p.name for p in torch_dirs),
        )
        log = work / "runner-cpu.log"
        argv = bwrap_argv(
            root,
            config,
            extra_env={"RANKZERO_RUNNER_TOKEN": token},
            args=["--pool", "2:1", "--max-concurrent", "1", "--memory-mb", "2048"],
            mounts=[],
            privileged=True,
        )
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            started = time.monotonic()
            url = "http://127.0.0.1:8765"
            status, body = wait_for("/livez", lambda: http(f"{url}/livez"), proc, 120)
            check(
                "runner-cpu: /livez answers 200 without a token",
                status == 200,
                f"{status} after {time.monotonic() - started:.1f} s",
            )
            status, body = http(f"{url}/v1/health")
            check("runner-cpu: /v1/health refuses a request without the token", status == 401, str(status))
            status, body = wait_for("/v1/health", lambda: http(f"{url}/v1/health", token=token), proc, 60)
            sandbox = body.get("sandbox", {}) if isinstance(body, dict) else {}
            check(
                "runner-cpu: /v1/health answers with a bubblewrap sandbox",
                status == 200 and sandbox.get("engine") == "bubblewrap" and sandbox.get("isolated") is True,
                f"{status} sandbox={json.dumps(sandbox)}",
            )
            status, body = wait_for("/readyz", lambda: http(f"{url}/readyz"), proc, 240)
            check(
                "runner-cpu: /readyz answers 200 (a warm sandbox worked)",
                status == 200,
                f"{status} {body} after {time.monotonic() - started:.1f} s",
            )
            job = {
                "code": DDP_TRAINING_STEP,
                "mode": "ddp",
                "nproc": 2,
                "backend": "gloo",
                "timeout_s": 120,
                "init_process_group": True,
            }
            run_started = time.monotonic()
            status, verdict = http(f"{url}/v1/runs", token=token, body=job, timeout=200)
            stdout = (
                [rank.get("stdout") for rank in verdict.get("ranks", [])] if isinstance(verdict, dict) else []
            )
            expected = [f"rank {r}: 2 ranks, step done\n" for r in range(2)]
            check(
                "runner-cpu: a 2-rank DDP training step's verdict is ok",
                status == 200
                and isinstance(verdict, dict)
                and verdict.get("status") == "ok"
                and stdout == expected,
                f"{status} status={verdict.get('status') if isinstance(verdict, dict) else verdict!r}"
                f" in {time.monotonic() - run_started:.1f} s",
            )
            if not (isinstance(verdict, dict) and verdict.get("status") == "ok"):
                print(
                    json.dumps(verdict, indent=1)[:4000] if not isinstance(verdict, str) else verdict[:4000]
                )
        finally:
            code = stop(proc, 70)
        check("runner-cpu: SIGTERM stops it", code is not None, f"status {code}")
        if not all(ok for name, ok, _ in results if name.startswith("runner-cpu")):
            print(tail(log))


def smoke_runner_cuda(ref: str, work: Path) -> None:
    """The CUDA runner image's checks (no GPU here: what it carries, and that it starts)."""
    config = image_config(ref)
    with mounted(ref) as root:
        torch_dirs = sorted((root / SITE).glob("torch-*.dist-info"))
        check(
            "runner-cuda: torch is the CUDA build",
            bool(torch_dirs) and not any("+cpu" in p.name for p in torch_dirs),
            ", ".join(p.name for p in torch_dirs),
        )
        check("runner-cuda: the CUDA libraries are installed", any((root / SITE / "nvidia").glob("*")))
        check(
            "runner-cuda: bubblewrap and libseccomp are installed",
            (root / "usr/bin/bwrap").exists() and any((root / "usr/lib").rglob("libseccomp.so.2")),
        )
        argv = bwrap_argv(root, config, extra_env={}, args=["--help"], mounts=[], privileged=True)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        check(
            "runner-cuda: its entrypoint starts (serve --help)",
            done.returncode == 0 and "--pool" in done.stdout,
            done.stderr[-500:],
        )


def main(argv: list[str]) -> int:
    """Check the named images (default: each one built); 1 when a check failed."""
    if shutil.which("bwrap") is None:
        print("smoke: bubblewrap not found (apt-get install bubblewrap)", file=sys.stderr)
        return 2
    wanted = argv or [name for name, ref in IMAGES.items() if image_exists(ref)]
    unknown = [name for name in wanted if name not in IMAGES]
    if unknown:
        print(f"smoke: unknown image {unknown} (bot, runner-cpu, runner-cuda)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rankzero-smoke-") as tmp:
        work = Path(tmp)
        for name in wanted:
            ref = IMAGES[name]
            if not check(
                f"{name}: image {ref} exists",
                image_exists(ref),
                "" if image_exists(ref) else "run `make images`",
            ):
                continue
            {"bot": smoke_bot, "runner-cpu": smoke_runner_cpu, "runner-cuda": smoke_runner_cuda}[name](
                ref, work
            )
    failed = sum(1 for _, ok, _ in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
