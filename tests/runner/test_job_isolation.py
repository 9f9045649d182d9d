"""Jobs cannot hurt each other or their supervisor (issue 18, section 1), with real hostile snippets.

Each test runs in the real bubblewrap sandbox: the syscall filter, the per-job user namespace and uid pair,
the fresh keyring, the per-job CPU cgroup and the supervisor's separate uid.
"""

from __future__ import annotations

import platform
import threading
import time
from pathlib import Path

import pytest

from runner.config import RunnerConfig
from runner.service import RunnerService
from runner.verdict import Status, Verdict
from tests.runner.conftest import TEST_MEMORY_MB, assert_healthy, run

pytestmark = pytest.mark.slow

x86_64_only = pytest.mark.skipif(platform.machine() != "x86_64", reason="raw syscall numbers are x86_64's")


def _lines(verdict: Verdict, rank: int = 0) -> dict[str, str]:
    out = {}
    for line in verdict.ranks[rank].stdout.splitlines():
        key, _, value = line.partition("=")
        out[key] = value
    return out


# Each call is one an unprivileged process may make on a stock kernel (so a refusal comes from the
# filter, not from missing capabilities), except mount/kexec/modules, which are also checked.
SYSCALLS = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(number, *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    print(f"{name}={'ok' if result >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')}", flush=True)
buf = ctypes.create_string_buffer(4096)
call("unshare_user", 272, 0x10000000)
call("unshare_net", 272, 0x40000000)
call("unshare_user_net", 272, 0x10000000 | 0x40000000)
call("unshare_mount", 272, 0x00020000)
call("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0)
call("clone3", 435, buf, 88)
call("setns", 308, 0, 0)
call("mount", 165, b"none", b"/tmp", b"tmpfs", 0, 0)
call("keyctl", 250, 1, 0)
call("add_key", 248, b"user", b"rz", b"secret", 6, 0xFFFFFFFD)
call("request_key", 249, b"user", b"rz", 0, 0)
call("io_uring_setup", 425, 8, buf)
call("io_setup", 206, 8, ctypes.create_string_buffer(8))
call("io_submit", 209, 0, 0, 0)
call("io_getevents", 208, 0, 0, 0, 0, 0)
call("socket_vsock", 41, 40, 1, 0)
call("socketpair_vsock", 53, 40, 1, 0, buf)
call("pidfd_getfd", 438, 0, 0, 0)
call("socket_unix", 41, 1, 1, 0)
call("perf_event_open", 298, buf, 0, -1, -1, 0)
call("bpf", 321, 0, buf, 72)
call("ptrace", 101, 0, 0, 0, 0)
call("kexec_load", 246, 0, 0, 0, 0)
call("init_module", 175, buf, 16, b"")
call("finit_module", 313, 0, b"", 0)
call("userfaultfd", 323, 1)
call("personality", 135, 0x0040000)
call("prlimit_pid1", 302, 1, 7, 0, buf)
call("prlimit_self", 302, 0, 7, 0, buf)
call("getpid", 39)
"""


@x86_64_only
@pytest.mark.parametrize(("mode", "nproc"), [("python", 1), ("ddp", 2)])
def test_dangerous_syscalls_are_denied_by_the_filter(service: RunnerService, mode: str, nproc: int) -> None:
    verdict = run(service, SYSCALLS, mode, nproc=nproc, timeout_s=30)
    assert verdict.status == Status.OK, verdict.to_dict()
    for rank in range(nproc):
        got = _lines(verdict, rank)
        allowed = {"clone3", "prlimit_self", "getpid", "socket_unix"}
        denied = {k: v for k, v in got.items() if k not in allowed}
        assert denied and all(v == "EPERM" for v in denied.values()), got
        # clone3's flags are beyond the filter: ENOSYS makes glibc fall back to clone, which it checks.
        assert got["clone3"] == "ENOSYS", got
        assert got["prlimit_self"] == "ok" and got["getpid"] == "ok", got
        # The socket rule is on the family alone: an ordinary unix socket still works.
        assert got["socket_unix"] == "ok", got


def test_the_namespace_escape_of_the_review_is_refused(service: RunnerService) -> None:
    # The review's path to the host's cgroup release_agent: a nested user namespace with all capabilities,
    # then a mount of a cgroup v1 hierarchy.  Both the unshare tool and a raw attempt must fail.
    verdict = run(
        service,
        """
        import subprocess
        script = "mkdir -p /tmp/cg && mount -t cgroup -o memory none /tmp/cg && cat /tmp/cg/release_agent"
        r = subprocess.run(["unshare", "-Urmn", "sh", "-c", script], capture_output=True, text=True)
        print("rc", r.returncode)
        print(r.stderr.strip())
        """,
    )
    assert verdict.status == Status.OK, verdict.to_dict()
    assert verdict.ranks[0].stdout.startswith("rc 1\n"), verdict.to_dict()
    assert "Operation not permitted" in verdict.ranks[0].stdout


@pytest.mark.parametrize(("mode", "nproc"), [("python", 1), ("dp", 1), ("ddp", 2)])
def test_torch_works_under_the_filter_in_every_mode(service: RunnerService, mode: str, nproc: int) -> None:
    code = """
    import os, torch, torch.nn as nn
    status = open("/proc/self/status").read()
    filters = [l for l in status.splitlines() if l.startswith(("Seccomp:", "Seccomp_filters:"))]
    model = nn.Linear(4, 2)
    x = torch.ones(3, 4)
    if os.environ.get("WORLD_SIZE"):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo")
        model = DDP(model)
        t = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(t)
        print("all_reduce", t.item())
    else:
        model = nn.DataParallel(model)
    loss = model(x).sum()
    loss.backward()
    print(filters, "grad", tuple(next(model.parameters()).grad.shape))
    """
    verdict = run(service, code, mode, nproc=nproc, timeout_s=60)
    assert verdict.status == Status.OK, verdict.to_dict()
    for rank in verdict.ranks:
        assert "['Seccomp:\\t2', 'Seccomp_filters:\\t2'] grad (2, 4)" in rank.stdout, verdict.to_dict()
        if mode == "ddp":
            assert "all_reduce 3.0" in rank.stdout


def test_mp_spawn_works_under_the_filter(service: RunnerService) -> None:
    verdict = run(
        service,
        """
        import torch, torch.distributed as dist, torch.multiprocessing as mp
        def work(rank, world):
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29511", rank=rank, world_size=world)
            t = torch.tensor([1.0])
            dist.all_reduce(t)
            print(f"{rank} {t.item()}", flush=True)
            dist.destroy_process_group()
        if __name__ == "__main__":
            mp.spawn(work, args=(2,), nprocs=2)
        """,
        timeout_s=60,
    )
    assert verdict.status == Status.OK, verdict.to_dict()
    # The workers share the pipe and print() writes the text and the newline separately: warm workers
    # print at the same moment, so their lines may meet, as in a terminal. Each text whole, nothing else.
    out = verdict.ranks[0].stdout
    assert out.count("\n") == 2 and out.replace("\n", "") in ("0 2.01 2.0", "1 2.00 2.0"), out


def test_the_kernel_keyring_is_out_of_reach(service: RunnerService) -> None:
    store = run(
        service,
        """
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        for ring in (0xFFFFFFFD, 0xFFFFFFFC):  # session, user keyring
            r = libc.syscall(248, b"user", b"rz-shared", b"from job one", 12, ring)
            print("add_key", r, errno.errorcode.get(ctypes.get_errno()))
        """,
    )
    read = run(
        service,
        """
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        r = libc.syscall(249, b"user", b"rz-shared", None, 0)
        print("request_key", r, errno.errorcode.get(ctypes.get_errno()))
        r = libc.syscall(250, 0, 0xFFFFFFFD, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
        print("keyctl", r, errno.errorcode.get(ctypes.get_errno()))
        """,
    )
    assert store.ranks[0].stdout == "add_key -1 EPERM\nadd_key -1 EPERM\n", store.to_dict()
    assert read.ranks[0].stdout == "request_key -1 EPERM\nkeyctl -1 EPERM\n", read.to_dict()


MAPPING = """
import os
print("uid", os.getuid(), "map", " ".join(open("/proc/self/uid_map").read().split()), flush=True)
"""


def test_each_job_has_its_own_user_namespace_and_host_uids(service: RunnerService) -> None:
    first = run(service, MAPPING, "ddp", nproc=2)
    second = run(service, MAPPING, "python")
    maps = []
    for verdict in (first, second):
        assert verdict.status == Status.OK, verdict.to_dict()
        for rank in verdict.ranks:
            words = rank.stdout.split()
            # uid 1000 inside; the supervisor is 0 inside: two host uids of the job's own pair.
            assert words[:2] == ["uid", "1000"], rank.stdout
            sup_inner, sup_outer, _, job_inner, job_outer, _ = map(int, words[3:9])
            assert (sup_inner, job_inner, job_outer) == (0, 1000, sup_outer + 1)
            maps.append(sup_outer)
    assert maps[0] == maps[1] and maps[0] != maps[2]


def _second_service() -> RunnerService:
    svc = RunnerService(RunnerConfig(memory_mb=TEST_MEMORY_MB, pool={}, max_concurrent_jobs=2))
    svc.start()
    return svc


def test_a_process_hog_in_one_runner_does_not_break_another_runners_job() -> None:
    # The review's finding: two runners handed out the same sandbox uid, so one job's ~500 processes used
    # up the other runner's job's RLIMIT_NPROC.  Two fresh services here are two runners.
    hog_runner, victim_runner = _second_service(), _second_service()
    results: dict[str, Verdict] = {}
    try:
        hog = threading.Thread(
            target=lambda: results.setdefault(
                "hog",
                run(
                    hog_runner,
                    """
                    import os, time
                    for _ in range(480):
                        if os.fork() == 0:
                            time.sleep(30)
                            os._exit(0)
                    print("holding", flush=True)
                    time.sleep(10)
                    """,
                    timeout_s=30,
                ),
            )
        )
        hog.start()
        time.sleep(5)  # the hog's 480 processes are up
        results["victim"] = run(
            victim_runner,
            """
            import os, time
            pids = []
            for _ in range(200):
                pid = os.fork()
                if pid == 0:
                    time.sleep(1)
                    os._exit(0)
                pids.append(pid)
            for pid in pids:
                os.waitpid(pid, 0)
            print("forked 200")
            """,
            timeout_s=30,
        )
        hog.join()
    finally:
        hog_runner.close()
        victim_runner.close()
    assert results["hog"].ranks[0].stdout == "holding\n", results["hog"].to_dict()
    assert results["victim"].status == Status.OK, results["victim"].to_dict()
    assert results["victim"].ranks[0].stdout == "forked 200\n"


def test_uids_are_unique_across_runner_processes(tmp_path: Path) -> None:
    from runner.sandbox import UidAllocator

    # A lock folder of this test's own: another test session on the host must not hold these uids.
    one, two = UidAllocator(300_000, 8, tmp_path), UidAllocator(300_000, 8, tmp_path)
    got = [one.acquire(), two.acquire(), one.acquire(), two.acquire()]
    assert len(set(got)) == 4 and all(u % 2 == 0 for u in got)
    with pytest.raises(RuntimeError, match="no free sandbox uid"):
        one.acquire()
    one.release(got[0])
    assert two.acquire() == got[0]


SUPERVISOR_ATTACKS = """
import os, resource, signal, subprocess
def attempt(name, fn):
    try:
        fn()
        print(name, "done")
    except OSError as exc:
        print(name, "refused", exc.errno)
attempt("prlimit_nofile", lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (0, 0)))
attempt("prlimit_as", lambda: resource.prlimit(1, resource.RLIMIT_AS, (1 << 20, 1 << 20)))
attempt("prlimit_nproc", lambda: resource.prlimit(1, resource.RLIMIT_NPROC, (0, 0)))
attempt("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
attempt("affinity", lambda: os.sched_setaffinity(1, {0}))
attempt("sigstop", lambda: os.kill(1, signal.SIGSTOP))
r = subprocess.run(["prlimit", "--pid", "1", "--nofile=0:0", "--nproc=0:0"], capture_output=True)
print("prlimit_tool", r.returncode)
print("alive", flush=True)
"""


@pytest.mark.parametrize(("mode", "nproc"), [("python", 1), ("ddp", 2)])
def test_a_job_cannot_cripple_its_supervisor(service: RunnerService, mode: str, nproc: int) -> None:
    verdict = run(service, SUPERVISOR_ATTACKS, mode, nproc=nproc, timeout_s=30)
    # Before: prlimit on PID 1 took the supervisor's descriptors away and the verdict became `crashed`.
    assert verdict.status == Status.OK, verdict.to_dict()
    for rank in verdict.ranks:
        lines = rank.stdout.splitlines()
        assert [line for line in lines if line.split()[1:2] == ["done"]] == [], rank.stdout
        assert "prlimit_tool 1" in lines and lines[-1] == "alive", rank.stdout
    assert_healthy(service)


def test_the_runner_refuses_to_start_without_its_syscall_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    from runner import sandbox
    from runner.seccomp_filter import SeccompUnavailableError

    def missing() -> bytes:
        raise SeccompUnavailableError("the syscall filter needs libseccomp (test)")

    monkeypatch.setattr(sandbox, "base_filter", missing)
    with pytest.raises(sandbox.SandboxUnavailableError, match="needs libseccomp"):
        sandbox.SandboxLauncher(RunnerConfig(pool={}))
