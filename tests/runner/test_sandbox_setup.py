"""Sandbox setup without running jobs: per-rank rlimits under a lower inherited hard limit, the /sys
binds of a GPU runner (checked in a real bubblewrap sandbox, on any host), the once-per-process probe."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner import hardware
from runner.config import RunnerConfig
from runner.inside.identity import clamp_limits
from runner.sandbox import ENTRY, GPU_SYS_PATHS, SandboxLauncher, _host_env
from runner.verdict import Hardware

INF = resource.RLIM_INFINITY


@pytest.mark.parametrize(
    ("soft", "hard", "inherited", "expected"),
    [
        # No inherited ceiling, or one above the request: the request stands.
        (10, 11, INF, (10, 11)),
        (10, 11, 60, (10, 11)),
        (10, 11, 11, (10, 11)),
        # CPU under a lower ceiling: hard clamped to it, soft one second below it (SIGXCPU, not SIGKILL).
        (10, 11, 10, (9, 10)),
        (10, 11, 5, (4, 5)),
        (10, 11, 1, (0, 1)),
        (10, 11, 0, (0, 0)),
        # Memory / file size (soft == hard): both clamped to the ceiling, never raised above it.
        (2 << 30, 2 << 30, 1 << 30, (1 << 30, 1 << 30)),
        (2 << 30, 2 << 30, 4 << 30, (2 << 30, 2 << 30)),
    ],
)
def test_clamp_limits(soft: int, hard: int, inherited: int, expected: tuple[int, int]) -> None:
    assert clamp_limits(soft, hard, inherited) == expected


def test_set_limit_applies_under_a_lower_inherited_hard_limit() -> None:
    """The real setrlimit calls, in a child (lowering a hard limit cannot be undone in this process)."""
    code = textwrap.dedent(
        f"""
        import importlib.util, json, resource
        resource.setrlimit(resource.RLIMIT_CPU, (5, 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 19, 1 << 20))
        # Loaded from the folder the sandbox runs it from (runner/inside stands alone).
        import sys
        sys.path.insert(0, {str(ENTRY.parent.parent.parent)!r})
        from runner.inside.identity import set_limit
        set_limit(resource.RLIMIT_CPU, 10, 11)
        set_limit(resource.RLIMIT_FSIZE, 8 << 20)
        limits = [resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_FSIZE)]
        print(json.dumps(limits))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    cpu, fsize = json.loads(out.stdout)
    # Unclamped, setrlimit refused both requests and left the inherited (5, 5) and (512 KiB, 1 MiB) in place.
    assert cpu == [4, 5]
    assert fsize == [1 << 20, 1 << 20]


# Run inside the sandbox as an unprivileged uid (as jobs are), so that the binds' parents must be traversable.
SYS_PROBE = """
import json, os
if os.getuid() == 0:  # root runner: drop to a nobody uid, as the supervisor drops to the job's uid
    os.setgid(65534); os.setuid(65534)
pci = sorted(os.listdir("/sys/bus/pci/devices"))
seen = {
    "sys": sorted(os.listdir("/sys")),
    "pci": len(pci),
    "numa": open(f"/sys/bus/pci/devices/{pci[0]}/numa_node").read().strip() if pci else None,
    "class_net_lo": os.path.exists("/sys/class/net/lo/"),
    "nodes": os.path.isdir("/sys/devices/system/node") or os.path.isdir("/sys/devices/system/cpu"),
}
try:
    open("/sys/bus/pci/rescan", "w").write("1")
    seen["writable"] = True
except OSError:
    seen["writable"] = False
print(json.dumps(seen))
"""


def test_gpu_runner_binds_only_the_topology_parts_of_sys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mounts a GPU runner gives a job, in a real sandbox: /sys/bus/pci, /sys/devices and /sys/class
    are readable, nothing else of /sys is there, and none of it is writable."""
    launcher = SandboxLauncher(RunnerConfig())
    try:
        if launcher.bwrap is None:
            pytest.fail("bubblewrap is required for the runner tests (apt-get install bubblewrap)")
        # The one stand-in: this host may have no GPU, and the mounts are what is under test.
        monkeypatch.setattr(hardware, "probe", lambda: Hardware(1, ["stand-in"], "x", None))
        argv = [launcher.bwrap, *launcher._namespace_args(), *launcher._mount_args(), "--"]
        argv += [sys.executable, "-c", SYS_PROBE]
        result = subprocess.run(
            argv, capture_output=True, text=True, env=_host_env(), timeout=60, check=False
        )
    finally:
        if launcher.cgroups is not None:
            launcher.cgroups.close()
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["sys"] == sorted({path.split("/")[2] for path in GPU_SYS_PATHS if os.path.exists(path)})
    host_pci = sorted(os.listdir("/sys/bus/pci/devices"))
    assert seen["pci"] == len(host_pci)
    if host_pci:
        assert seen["numa"] == (Path("/sys/bus/pci/devices") / host_pci[0] / "numa_node").read_text().strip()
    # /sys/class entries are links into /sys/devices: they resolve only because that is bound too.
    assert seen["class_net_lo"] is os.path.exists("/sys/class/net/lo/")
    assert seen["nodes"]
    assert seen["writable"] is False


def test_hardware_is_probed_once_per_process() -> None:
    """Every sandbox launch asks for the hardware: torch must be probed once, not per launch."""
    first = hardware.probe()
    before = hardware.probe.cache_info()
    launcher = SandboxLauncher(RunnerConfig())
    try:
        for _ in range(3):
            launcher._mount_args()
    finally:
        if launcher.cgroups is not None:
            launcher.cgroups.close()
    after = hardware.probe.cache_info()
    assert hardware.probe() is first
    assert after.misses == before.misses
    assert after.hits >= before.hits + 3
