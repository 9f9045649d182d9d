"""CPU and memory between jobs (issue 18, section 1): a neighbour's spinners cannot cost a job its deadline,
a starved job is judged on its own clock, and memory limits add up to what the host has."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runner.config import RunnerConfig
from runner.host_memory import MIB, MemoryOversubscribedError, MemoryPlan, host_memory_bytes
from runner.service import RunnerService, RunRequest
from runner.verdict import Status, Verdict
from tests.runner.conftest import run

pytestmark = pytest.mark.slow

GIB = 1024 * MIB
# About half a second of CPU on the development machine.
WORK = "n = 0\nfor i in range(4_000_000):\n    n += i\nprint('done', n > 0)\n"


def test_hundreds_of_spinners_in_their_own_sessions_do_not_time_out_a_neighbour(
    service: RunnerService,
) -> None:
    results: dict[str, Verdict] = {}
    spinners = """
    import os, time
    for _ in range(200):
        if os.fork() == 0:
            os.setsid()  # each in a session of its own: per-session fairness would favour them
            end = time.time() + 30
            while time.time() < end:
                pass
            os._exit(0)
    time.sleep(30)  # past the latest deadline it may be granted (8 s plus CPU it waited for, <= 16 s)
    """
    hog = threading.Thread(target=lambda: results.setdefault("hog", run(service, spinners, timeout_s=8)))
    hog.start()
    time.sleep(2)
    try:
        results["victim"] = run(service, WORK, timeout_s=4)
    finally:
        hog.join()
    victim = results["victim"]
    assert victim.status == Status.OK, victim.to_dict()
    assert victim.ranks[0].stdout == "done True\n"
    hog_verdict = results["hog"]
    assert hog_verdict.status == Status.TIMEOUT, hog_verdict.to_dict()
    assert any(n.startswith("deadline of 8 s reached on") for n in hog_verdict.notes), hog_verdict.notes


def _host_spinners() -> list[subprocess.Popen[bytes]]:
    # Real starvation by other work on the host: ten spinners per core, each in a session of its own (the
    # scheduler then gives each session as much as the job's whole cgroup), leave a job about a tenth of
    # a core.  They spin until killed.
    count = 10 * (os.cpu_count() or 1)
    spin = [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(spin, start_new_session=True) for _ in range(count)]


def test_a_job_starved_by_other_work_is_judged_on_its_own_clock(service: RunnerService) -> None:
    # A warm (torch) sandbox starts the job at once, so the starvation falls inside the job: 4.5 s of
    # spinners, then 0.3 s of CPU work.  On the wall clock that is a timeout at 4 s.
    assert service.pool.wait_full(120)
    code = "import time, torch\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n"
    spinners = _host_spinners()

    def stop_spinners() -> None:
        for proc in spinners:
            proc.kill()
            proc.wait()

    timer = threading.Timer(4.5, stop_spinners)
    timer.start()
    try:
        verdict = run(service, code + "print('done')\n", timeout_s=4)
    finally:
        timer.cancel()
        stop_spinners()
    assert verdict.status == Status.OK, (verdict.elapsed_s, verdict.notes)
    # It ran past its wall deadline and still got its verdict: the time it waited was not counted.
    assert verdict.elapsed_s > 4, verdict.to_dict()
    waited = [n for n in verdict.notes if n.startswith("the job waited")]
    assert waited and "for a CPU behind other work: its deadline of 4 s was moved" in waited[0], verdict.notes


def test_a_blocked_job_is_judged_on_the_wall_clock(service: RunnerService) -> None:
    verdict = run(service, "import time\ntime.sleep(60)\n", timeout_s=2)
    assert verdict.status == Status.TIMEOUT, verdict.to_dict()
    note = next(n for n in verdict.notes if n.startswith("deadline of 2 s reached"))
    assert "on the wall clock (it waited under 0.5 s for a CPU behind other work), CPU time" in note, note


def test_memory_limits_are_the_hosts_memory_shared_by_the_concurrent_jobs() -> None:
    # The review's case: an 8-rank job's limit was 33 GiB on a 24 GiB host, with 4 jobs at once.
    plan = MemoryPlan.for_host(24 * GIB, max_concurrent=4, idle_sandboxes=3, memory_mb=4096, tmp_mb=256)
    limit, note = plan.job_limit(8, 4096, 256)
    assert limit == (int(24 * GIB * 0.75) - 3 * 512 * MIB) // 4
    assert 4 * limit + 3 * 512 * MIB <= 24 * GIB * 0.75
    assert note is not None and "not 33.0 GiB" in note and "shared by up to 4 concurrent jobs" in note
    assert plan.job_limit(1, 2048, 256) == ((2048 + 512 + 512) * MIB, None)
    with pytest.raises(MemoryOversubscribedError, match="lower --max-concurrent to 11 or fewer"):
        MemoryPlan.for_host(24 * GIB, max_concurrent=40, idle_sandboxes=3, memory_mb=4096, tmp_mb=256)


def test_a_clamped_job_tells_the_operator_and_tells_the_player_only_when_it_runs_out_of_memory() -> None:
    # 64 GiB per rank: every job is clamped to its fair share of this host. An ordinary verdict must not
    # carry that operator's note (a player would see it on every dispute); the log and the caller's
    # operator notes get it, and a job that does run out of memory gets it in its verdict, where it
    # explains why the limit was less than 64 GiB.
    config = RunnerConfig(memory_mb=64 * 1024, pool={}, max_concurrent_jobs=4)
    plan = MemoryPlan.for_host(host_memory_bytes(), 4, 1, config.memory_mb, config.tmp_mb)
    _, note = plan.job_limit(1, config.memory_mb, config.tmp_mb)
    assert note is not None
    svc = RunnerService(config)
    svc.start()
    try:
        if svc.launcher.cgroups is None or not svc.launcher.cgroups.available:
            pytest.skip("no job cgroups on this host")
        operator: list[str] = []
        verdict = svc.run(RunRequest(code="print('fits')\n"), operator)
        assert verdict.status == Status.OK, verdict.to_dict()
        assert not any(n.startswith("memory:") for n in verdict.notes), verdict.notes
        assert operator == [note]
        # Past the fair share (but far below 64 GiB): the kernel's OOM killer, and the note says why.
        over = plan.share_bytes + 512 * MIB
        verdict = svc.run(RunRequest(code=f"x = b'x' * {over}\nprint(len(x))\n", timeout_s=60))
        assert verdict.status == Status.OOM, verdict.to_dict()
        assert note in verdict.notes, verdict.notes
    finally:
        svc.close()


def test_the_cli_report_shows_the_clamp_as_a_runner_line_not_a_verdict_note(tmp_path: Path) -> None:
    script = tmp_path / "fits.py"
    script.write_text("print('fits')\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(script), "--memory-mb", "65536"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("status: ok"), result.stdout
    assert not any(line.startswith("note: memory:") for line in lines), result.stdout
    assert lines[-1].startswith("runner: memory: this job's sandbox may hold "), result.stdout


def test_the_cli_refuses_an_oversubscribing_configuration() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run(
        [sys.executable, "-m", "runner.cli", "serve", "--port", "0", "--max-concurrent", "10000"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "refusing to start: 10000 concurrent jobs do not fit in this host's memory" in result.stderr


def test_a_warm_sandbox_of_a_larger_capacity_gets_the_limits_of_the_job_it_runs() -> None:
    # The pool keeps sandboxes of capacity 2 (the default keeps 8): a 1-rank job served by one must get a
    # 1-rank job's memory limit and CPU quota, not those of two ranks, and no note about two ranks.
    host = host_memory_bytes()
    share = MemoryPlan.for_host(host, 4, 2, 1, 256).share_bytes // MIB
    memory_mb = share - 1024 - 64  # one rank fits in its fair share, two ranks do not
    config = RunnerConfig(memory_mb=memory_mb, pool={2: 1}, max_concurrent_jobs=4)
    svc = RunnerService(config)
    svc.start()
    try:
        if svc.launcher.cgroups is None or not svc.launcher.cgroups.available:
            pytest.skip("no job cgroups on this host")
        plan = svc.launcher.memory
        assert plan is not None
        one, one_note = plan.job_limit(1, memory_mb, config.tmp_mb)
        _, two_note = plan.job_limit(2, memory_mb, config.tmp_mb)
        assert one_note is None and two_note is not None
        assert svc.pool.wait_full(120)
        verdict = run(svc, "import torch\nprint('one rank', torch.ones(1).item())\n")
        assert verdict.status == Status.OK, verdict.to_dict()
        assert svc.pool.served_warm == 1
        assert not any(n.startswith("memory:") for n in verdict.notes), verdict.notes
        # And the cgroup itself, on a sandbox taken from the pool as the service takes it.
        assert svc.pool.wait_full(120)
        sandbox = svc.pool.acquire(1)
        try:
            assert sandbox.nproc == 2 and sandbox.cgroup is not None
            svc.launcher.fit(sandbox, 1)
            assert sandbox.cgroup.memory_limit() == one
            if svc.launcher.cgroups.cpu:
                assert sandbox.cgroup.cpus == 1.0
                quota = [
                    d / name
                    for d in sandbox.cgroup.dirs
                    for name in ("cpu.max", "cpu.cfs_quota_us")
                    if (d / name).exists()
                ]
                assert quota and quota[0].read_text().split()[0] == "100000"
        finally:
            svc.pool.release(sandbox)
    finally:
        svc.close()


def test_a_one_process_job_that_starts_workers_gets_the_cpu_of_as_many_ranks(service: RunnerService) -> None:
    # The DDP tutorial's layout (mode python, mp.spawn of the workers) held to one core made its workers
    # slower than a bare run; a snippet that starts no process keeps one core.
    if service.launcher.cgroups is None or not service.launcher.cgroups.cpu:
        pytest.skip("no CPU cgroups on this host")
    spawn = {"mode": "python", "code": "import torch.multiprocessing as mp\nmp.spawn(f, nprocs=2)\n"}
    plain = {"mode": "python", "code": "import torch\nprint(torch.ones(2))\n"}
    ddp = {"mode": "ddp", "code": "import torch.multiprocessing as mp\n"}
    assert service.cpu_ranks(1, spawn) == service.config.max_nproc
    assert service.cpu_ranks(1, plain) == 1
    # Words that only look like starting processes do not count.
    for code in (
        "import torch.nn as nn\nnn.MaxPool2d(2)\n",
        "DataLoader(ds, num_workers=0)\n",
        "# spawn later\n",
    ):
        assert service.cpu_ranks(1, {"mode": "python", "code": code}) == 1, code
    for code in ("DataLoader(ds, num_workers=4)\n", "with Pool(2) as p:\n    pass\n", "os.fork()\n"):
        assert service.cpu_ranks(1, {"mode": "python", "code": code}) == service.config.max_nproc, code
    assert service.cpu_ranks(2, ddp) == 2  # a ddp job's ranks are its processes already
    cores = float(min(service.config.max_nproc, os.cpu_count() or 1))
    sandbox = service.pool.acquire(1)
    try:
        # The pool's refill warms a sandbox in its place, which competes for the CPU until it is warm
        # (CpuShares: each would get half the cores); this checks the quota of a job alone.
        assert service.pool.wait_full(300)
        assert sandbox.cgroup is not None
        for job, cpus in ((spawn, cores), (plain, 1.0), (spawn, cores)):
            service.launcher.fit(sandbox, 1, service.cpu_ranks(1, job))
            assert sandbox.cgroup.cpus == cpus
            quota = [
                d / n
                for d in sandbox.cgroup.dirs
                for n in ("cpu.max", "cpu.cfs_quota_us")
                if (d / n).exists()
            ]
            assert quota and quota[0].read_text().split()[0] == str(int(cpus * 100000))
    finally:
        service.pool.release(sandbox)
