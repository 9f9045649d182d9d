"""Starting single-use sandboxes: bubblewrap (the default) or, only when asked, a bare process.

A sandbox is one supervisor process (runner/inside/) that imports torch and then waits for its one
job.  The host creates every pipe the job will use before the sandbox starts and hands the sandbox its
ends, so each rank's stdout, stderr and stack dump flow straight to the host, never through code the
snippet could tamper with.
"""

from __future__ import annotations

import fcntl
import glob
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from runner import hardware
from runner.cgroups import CgroupManager, JobCgroup
from runner.config import RunnerConfig
from runner.host_memory import (
    MemoryOversubscribedError,
    MemoryPlan,
    host_memory_bytes,
    host_tcp_pressure_bytes,
    tcp_bytes_per_sandbox,
)
from runner.sandbox_process import RankPipes, Sandbox, SandboxLog, child_pids
from runner.seccomp_filter import SeccompUnavailableError, base_filter, job_filter, memfd_with

log = logging.getLogger(__name__)

# What runs inside the sandbox (runner/inside/, which imports nothing else of the runner): bound read-only at
# /opt/rankzero/runner/inside with the package's own __init__ beside it (a regular package first on the path,
# so that no other ``runner`` a site folder names can stand in for it), and started by path.
INSIDE = Path(__file__).with_name("inside")
ENTRY = INSIDE / "__main__.py"
SANDBOX_RUNNER = "/opt/rankzero/runner"
SANDBOX_ENTRY = f"{SANDBOX_RUNNER}/inside/__main__.py"
# What CUDA and NCCL read from /sys on a GPU runner: the PCI devices and their NUMA node, local CPUs and
# link topology (/sys/bus/pci, and /sys/devices where its entries and /sys/class's point), and the NICs
# NCCL picks from (/sys/class/net, /sys/class/infiniband).
GPU_SYS_PATHS = ("/sys/bus/pci", "/sys/devices", "/sys/class")
SANDBOX_WORKDIR = "/tmp"  # noqa: S108 - inside the sandbox this is a private, size-capped tmpfs

# Files from /etc that the dynamic loader and Python need; the rest of /etc stays out of the sandbox.
_ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
)
HOSTNAME = "rankzero"
# Not -I: multiprocessing hands the interpreter's flags to the children it spawns, and -I would make them
# ignore PYTHONUNBUFFERED (their output then arrives late, grouped per process, and is lost when they are
# killed).  The environment is the runner's own (job_env), so -I protected nothing -s does not.
INTERPRETER_FLAGS = ("-s",)
ETC_PREFIX = "rankzero-etc-"
# Open files are a host-wide table (fs.file-max): at its end every process on the host fails to open one.
# The jobs together (the concurrent ones and the warm sandboxes) may fill at most this share of it.
FILE_MAX_SHARE = 0.5
MAX_FILES_PER_PROCESS = 1024  # the usual soft default; torch, gloo and DataLoader workers live within it
MIN_FILES_PER_PROCESS = 128  # below this an 8-rank gloo job's supervisor and ranks run short


class SandboxUnavailableError(RuntimeError):
    """No real sandbox can be started here (bubblewrap missing or not permitted)."""


def host_file_max(path: str = "/proc/sys/fs/file-max") -> int | None:
    """The host's open-file table size (``fs.file-max``), or None where it cannot be read."""
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def files_per_process(file_max: int, sandboxes: int, processes: int) -> int:
    """``RLIMIT_NOFILE`` for every process of a sandbox, so that all sandboxes stay in their file-max share.

    A job has at most ``processes`` processes of its uid (RLIMIT_NPROC, pids.max) plus its supervisor,
    each holding at most this many descriptors, so it opens at most (processes + 1) x this many files;
    ``sandboxes`` of them (the concurrent jobs and the warm sandboxes) together stay within
    FILE_MAX_SHARE of ``file_max``.  Capped at MAX_FILES_PER_PROCESS.
    """
    share = int(file_max * FILE_MAX_SHARE) // (max(sandboxes, 1) * (processes + 1))
    return min(MAX_FILES_PER_PROCESS, share)


def _uid_lock_dir() -> Path:
    # /run is root's tmpfs: the locks vanish at reboot, with every sandbox they guarded.
    run = Path("/run")
    base = run if run.is_dir() and os.access(run, os.W_OK) else Path(tempfile.gettempdir())
    return base / "rankzero-uids"


class UidAllocator:
    """Hands out host uids for sandboxes, unique across every runner process on the host.

    Each sandbox gets a pair (``uid``, ``uid + 1``): the supervisor and the ranks of its private user
    namespace are mapped to them (runner/inside/identity.py).  The kernel counts RLIMIT_NPROC (and the other
    per-user counters) per uid, so no two live sandboxes, of this runner or of another one, may share one:
    a uid is held through an exclusive ``flock`` on a file named after it, which the kernel drops when the
    holder dies, so a crashed runner leaks nothing.
    """

    def __init__(self, base: int, count: int, lock_dir: Path | None = None) -> None:
        self._base = base
        self._pairs = max(count // 2, 1)
        self._next = 0
        self._held: dict[int, int] = {}  # uid -> descriptor holding its lock
        self._lock = threading.Lock()
        self._dir = lock_dir or _uid_lock_dir()

    def acquire(self) -> int:
        """The first uid of a pair no live sandbox on this host uses."""
        with self._lock:
            self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            for _ in range(self._pairs):
                uid = self._base + 2 * self._next
                self._next = (self._next + 1) % self._pairs
                if uid in self._held:
                    continue
                fd = os.open(self._dir / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)  # another runner's live sandbox holds it
                    continue
                self._held[uid] = fd
                return uid
        raise RuntimeError(f"no free sandbox uid in {self._base}..{self._base + 2 * self._pairs - 1}")

    def release(self, uid: int | None) -> None:
        """Return a uid pair once its sandbox is dead."""
        with self._lock:
            fd = self._held.pop(uid if uid is not None else -1, None)
        if fd is not None:
            os.close(fd)  # drops the flock


def bubblewrap_path() -> str | None:
    """Path of the bwrap binary, if installed."""
    return shutil.which("bwrap")


class SandboxLauncher:
    """Builds and starts sandboxes according to the config."""

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self.uids = UidAllocator(config.uid_base, config.uid_count)
        self.bwrap = None if config.unsafe_no_sandbox else bubblewrap_path()
        if not config.unsafe_no_sandbox and self.bwrap is None:
            raise SandboxUnavailableError(
                "bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap) or start the "
                "runner with --unsafe-no-sandbox"
            )
        self.as_root = os.geteuid() == 0
        self.seccomp: tuple[bytes, bytes] | None = None
        if self.bwrap is not None:
            try:
                self.seccomp = (base_filter(), job_filter())
            except SeccompUnavailableError as exc:
                raise SandboxUnavailableError(str(exc)) from exc
        self._hosts: Path | None = None
        # The pool, the one being warmed and the concurrent jobs: as many sandboxes as the memory plan.
        sandboxes = config.max_concurrent_jobs + sum(config.pool.values()) + 1
        file_max = host_file_max()
        self.files_per_process = (
            MAX_FILES_PER_PROCESS
            if file_max is None
            else files_per_process(file_max, sandboxes, config.max_processes)
        )
        self.cgroups = CgroupManager() if self.isolated and self.as_root else None
        # TCP socket buffers (loopback ones included) come from a host-wide pool, net.ipv4.tcp_mem.
        pressure = host_tcp_pressure_bytes()
        self.tcp_bytes = tcp_bytes_per_sandbox(pressure, sandboxes) if pressure else 512 * 1024 * 1024
        self.memory: MemoryPlan | None = None
        if self.cgroups is not None and self.cgroups.available:
            try:
                self.memory = MemoryPlan.for_host(
                    host_memory_bytes(),
                    config.max_concurrent_jobs,
                    sum(config.pool.values()) + 1,  # the pool, and the one being warmed
                    config.memory_mb,
                    config.tmp_mb,
                )
            except MemoryOversubscribedError as exc:
                self.cgroups.close()
                raise SandboxUnavailableError(f"refusing to start: {exc}") from exc
            _, widest = self.memory.job_limit(config.max_nproc, config.memory_mb, config.tmp_mb)
            if widest:
                log.warning("%s (for a %d-rank job; smaller jobs may fit whole)", widest, config.max_nproc)
        # After the memory plan, whose refusal names the concurrency that would fit.
        if self.files_per_process < MIN_FILES_PER_PROCESS:
            if self.cgroups is not None:
                self.cgroups.close()
            raise SandboxUnavailableError(
                f"refusing to start: fs.file-max ({file_max}) leaves {self.files_per_process} open files per "
                f"process for {sandboxes} sandboxes of {config.max_processes} processes within "
                f"{FILE_MAX_SHARE:.0%} of it (at least {MIN_FILES_PER_PROCESS} needed): raise fs.file-max or "
                "lower --max-concurrent"
            )
        self._serial = 0

    def close(self) -> None:
        """Remove the host-side files this launcher made (its /etc/hosts folder)."""
        if self._hosts is not None:
            shutil.rmtree(self._hosts.parent, ignore_errors=True)
            self._hosts = None

    def _hosts_file(self) -> Path:
        if self._hosts is None:
            remove_stale_etc_folders()
            # The pid in the name lets a later runner remove the folder of one that was killed.
            folder = Path(tempfile.mkdtemp(prefix=f"{ETC_PREFIX}{os.getpid()}-"))
            folder.chmod(0o755)
            hosts = folder / "hosts"
            hosts.write_text(f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n::ffff:127.0.0.1 localhost\n")
            hosts.chmod(0o644)
            self._hosts = hosts
        return self._hosts

    @property
    def engine(self) -> str:
        """Name reported in verdicts and /v1/health."""
        return "none" if self.bwrap is None else "bubblewrap"

    @property
    def isolated(self) -> bool:
        """Whether jobs run in a namespace sandbox."""
        return self.bwrap is not None

    def check(self) -> None:
        """Start a trivial sandbox once, so that a broken setup fails at startup, not at the first job."""
        if self.bwrap is None:
            return
        argv = [self.bwrap, *self._namespace_args(), *self._mount_args(), "--", "/bin/true"]
        result = subprocess.run(argv, capture_output=True, env=_host_env(), timeout=30, check=False)
        if result.returncode != 0:
            raise SandboxUnavailableError(
                f"bubblewrap cannot start a sandbox here: {result.stderr.decode(errors='replace').strip()}"
            )

    def spawn(self, nproc: int, preload: bool | str = True) -> Sandbox:
        """Start a sandbox for up to ``nproc`` ranks; it becomes ready once torch is imported.

        ``preload``: True or ``"full"`` (torch and what snippets use next), ``"torch"`` (torch only), False.
        Somewhat over 60 lines: the spec is one literal, and the descriptors opened here must be closed
        in one place (the ``finally``) whatever fails.
        """
        keep: list[int] = []  # sandbox-side pipe ends, closed here once the child has them
        control_r, control_w = os.pipe()
        status_r, status_w = os.pipe()
        keep += [control_r, status_w]
        ranks, rank_fds = _rank_pipes(nproc, keep)
        uid = self.uids.acquire() if self.isolated and self.as_root else None
        host_workdir = None if self.isolated else tempfile.mkdtemp(prefix="rankzero-job-")
        workdir = SANDBOX_WORKDIR if self.isolated else str(host_workdir)
        spec: dict[str, Any] = {
            "control_fd": control_r,
            "status_fd": status_w,
            "ranks": rank_fds,
            "nproc_limit": self.config.max_processes if uid else 0,
            # Every process of the job inherits it, soft = hard (see files_per_process).
            "nofile_limit": self.files_per_process,
            "workdir": workdir,
            "preload": preload,
            # The host's GPU count, for the warm-up's CUDA queries (inside/warmup.py: cuda_runtime_untouched):
            # nothing in the sandbox before the ranks may ask the CUDA runtime itself.
            "gpus": hardware.probe().gpus,
        }
        if uid is not None:
            spec["userns"] = {"sup_outer": uid, "job_outer": uid + 1}
        seccomp_args: list[str] = []
        if self.seccomp is not None:
            base_fd = memfd_with(self.seccomp[0], "rankzero-seccomp-base")
            job_fd = memfd_with(self.seccomp[1], "rankzero-seccomp-job")
            keep += [base_fd, job_fd]
            seccomp_args = ["--seccomp", str(base_fd)]
            spec["seccomp_fd"] = job_fd
        argv = self._argv(spec, seccomp_args)
        sandbox_log = SandboxLog()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=sandbox_log.write_fd,
                stderr=sandbox_log.write_fd,
                pass_fds=keep,
                env=job_env() if not self.isolated else _host_env(),
                cwd=host_workdir,
                start_new_session=True,
            )
        finally:
            for fd in keep:
                os.close(fd)
            # Also when Popen failed: the drain then sees EOF at once and closes the read end.
            sandbox_log.started()
        return Sandbox(
            cgroup=self._confine(proc, nproc),
            cgroups=self.cgroups,
            proc=proc,
            nproc=nproc,
            control=control_w,
            status=status_r,
            ranks=ranks,
            engine=self.engine,
            isolated=self.isolated,
            uid=uid,
            workdir=workdir,
            log=sandbox_log,
            host_workdir=host_workdir,
        )

    def _argv(self, spec: dict[str, Any], seccomp_args: list[str]) -> list[str]:
        """The command line that starts the sandbox's supervisor (runner/inside/__main__.py) with ``spec``."""
        if not self.isolated:
            return [sys.executable, *INTERPRETER_FLAGS, str(ENTRY), json.dumps(spec)]
        return [
            str(self.bwrap),
            *self._namespace_args(),
            *self._mount_args(),
            *seccomp_args,
            "--",
            sys.executable,
            *INTERPRETER_FLAGS,
            SANDBOX_ENTRY,
            json.dumps(spec),
        ]

    def _confine(self, proc: subprocess.Popen[bytes], nproc: int) -> JobCgroup | None:
        """Put the sandbox's PID 1 (and so every process of the job) into a cgroup of its own."""
        if self.cgroups is None or not self.cgroups.available:
            return None
        self._serial += 1
        budget, note, cpus = self._job_limits(nproc)
        cgroup = self.cgroups.create(
            f"sandbox-{self._serial}", budget, self.config.max_processes, cpus, min(budget, self.tcp_bytes)
        )
        if cgroup is None:
            return None
        cgroup.memory_note = note
        cgroup.cpus = cpus
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            # bwrap forks PID 1 right away; it only forks ranks once a job arrives, long after this.
            children = child_pids(proc.pid)
            if children:
                try:
                    cgroup.add(children[0])
                    return cgroup
                except OSError as exc:
                    log.warning("could not move sandbox %s into its cgroup: %s", proc.pid, exc)
                    break
            if proc.poll() is not None:
                break
            time.sleep(0.002)
        self.cgroups.discard(cgroup)
        return None

    def _job_limits(self, nproc: int, cpu_ranks: int | None = None) -> tuple[int, str | None, float]:
        """``(memory bytes, note, cores)`` of the cgroup of a sandbox running ``nproc`` ranks.

        ``cpu_ranks`` (default ``nproc``) is how many processes the job's CPU quota is sized for: a
        one-process job whose snippet starts workers of its own (``mp.spawn``) is sized as that many ranks.
        """
        # The ranks' own limits plus the two tmpfs (their pages are charged here) and the supervisor, or
        # the job's fair share of the host when that is less (see MemoryPlan).
        note = None
        if self.memory is not None:
            budget, note = self.memory.job_limit(nproc, self.config.memory_mb, self.config.tmp_mb)
        else:
            budget = (nproc * self.config.memory_mb + 2 * self.config.tmp_mb + 512) * 1024 * 1024
        # At most one core per rank, and never more than the host has: a job's spinners compete as one.
        return budget, note, float(min(cpu_ranks or nproc, os.cpu_count() or 1))

    def fit(self, sandbox: Sandbox, nproc: int, cpu_ranks: int | None = None) -> None:
        """Size a sandbox's cgroup for the job it is about to run (``nproc`` ranks).

        A warm sandbox was started for its capacity: its memory limit (the capacity's, clamped to the
        fair share with a note about the capacity's ranks) and its CPU quota (min(capacity, cores)) are
        those of its largest job, not of this one.  When the cgroup refuses the change, the sandbox is
        no use for this job's fairness guarantees, so the caller gets an error, not a silent wrong limit.
        ``cpu_ranks``: see ``_job_limits``.
        """
        cgroup = sandbox.cgroup
        if cgroup is None:
            return
        budget, note, cpus = self._job_limits(nproc, cpu_ranks)
        if sandbox.nproc != nproc or cgroup.cpus != cpus:
            if not cgroup.resize(budget, cpus):
                raise RuntimeError(f"the sandbox's cgroup could not be sized for {nproc} ranks")
            cgroup.memory_note = note
        if self.cgroups is not None:
            # The job competes for the CPU from now until its sandbox is removed: its quota, and every
            # other competing sandbox's, is its fair share while others compete (CpuShares).
            self.cgroups.shares.compete(cgroup)

    def rest(self, sandbox: Sandbox) -> None:
        """A warm sandbox waits idle in the pool: it no longer competes for the CPU (CpuShares)."""
        if sandbox.cgroup is not None and self.cgroups is not None:
            self.cgroups.shares.rest(sandbox.cgroup)

    def awaited(self, sandbox: Sandbox) -> None:
        """A job waits for this sandbox's warm-up: it is favoured, with a reserved CPU share (CpuShares)."""
        if sandbox.cgroup is not None and self.cgroups is not None:
            self.cgroups.shares.await_warm_up(sandbox.cgroup)

    def _namespace_args(self) -> list[str]:
        args = [
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            HOSTNAME,
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
        ]
        if self.as_root:
            # Root runs bwrap without a user namespace and lets the supervisor switch to a private uid;
            # these two capabilities exist only for that switch and are gone once it is done.
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            args += ["--unshare-user"]
        return args

    def _mount_args(self) -> list[str]:
        args: list[str] = ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        # Directories bwrap creates implicitly are private to root; the job's uid must traverse these.
        args += ["--perms", "0755", "--dir", "/etc"]
        args += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", "/opt/rankzero"]
        for name in _ETC_FILES:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        # Our own /etc/hosts: the sandbox's hostname must resolve (gloo and c10d look it up) to loopback.
        args += ["--ro-bind", str(self._hosts_file()), "/etc/hosts"]
        # The private /tmp comes before the Python binds: a venv or checkout living under /tmp (a CI
        # clone, say) must be bound on top of the tmpfs, not hidden by it.
        size = str(self.config.tmp_mb * 1024 * 1024)
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]  # noqa: S108 - sandbox-private
        made: set[str] = {"/etc", "/tmp"}  # noqa: S108 - the sandbox's own tmpfs
        bound: set[str] = {"/usr"}
        for prefix in _python_roots():
            args += _parents(prefix, made, bound)
            args += ["--ro-bind", prefix, prefix]
            bound.add(prefix)
        args += ["--perms", "0755", "--dir", SANDBOX_RUNNER]
        args += ["--ro-bind", str(INSIDE.parent / "__init__.py"), f"{SANDBOX_RUNNER}/__init__.py"]
        args += ["--ro-bind", str(INSIDE), f"{SANDBOX_RUNNER}/inside"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        if hardware.probe().gpus > 0:  # cached: torch is probed once per runner process
            args += _gpu_args(made)
        # After --dev, which would otherwise mount over it.
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]  # noqa: S108 - sandbox-private
        # Last of the mounts: the root itself (bwrap's tmpfs holding the mount points made above) becomes
        # read-only; the /tmp and /dev/shm tmpfs mounted on it stay writable (not recursive).
        args += ["--remount-ro", "/"]
        args += ["--chdir", SANDBOX_WORKDIR, "--clearenv"]
        for key, value in job_env().items():
            args += ["--setenv", key, value]
        return args


def _rank_pipes(nproc: int, keep: list[int]) -> tuple[list[RankPipes], list[dict[str, int]]]:
    """Each rank's stdout, stderr and dump pipes: the host's read ends, and the sandbox's write ends (also
    added to ``keep``, the descriptors the sandbox inherits).
    """
    ranks: list[RankPipes] = []
    rank_fds: list[dict[str, int]] = []
    for _ in range(nproc):
        pairs = [os.pipe() for _ in range(3)]
        ranks.append(RankPipes(pairs[0][0], pairs[1][0], pairs[2][0]))
        rank_fds.append({"out": pairs[0][1], "err": pairs[1][1], "dump": pairs[2][1]})
        keep += [p[1] for p in pairs]
    return ranks, rank_fds


def remove_stale_etc_folders(tmp: str | None = None) -> list[str]:
    """Remove the /etc folders of runner processes that are gone (killed before they could clean up)."""
    removed = []
    for folder in Path(tmp or tempfile.gettempdir()).glob(f"{ETC_PREFIX}*"):
        owner = folder.name[len(ETC_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit() or not folder.is_dir() or folder.is_symlink():
            continue
        try:
            os.kill(int(owner), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    return removed


def _gpu_args(made: set[str]) -> list[str]:
    """Bwrap arguments for the GPUs: the NVIDIA device nodes and the parts of /sys CUDA and NCCL read.

    Not the whole of /sys (kernel, module, firmware and fs stay hidden): only GPU_SYS_PATHS, each bound
    read-only when the host has it, under world-traversable parents.
    """
    args: list[str] = []
    for path in GPU_SYS_PATHS:
        args += _parents(path, made, set())
        args += ["--ro-bind-try", path, path]
    for device in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind", device, device]
    return args


def _parents(path: str, made: set[str], bound: set[str]) -> list[str]:
    """Bwrap --dir arguments for the missing, world-traversable parents of ``path``."""
    args: list[str] = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        parent = str(Path(*parts[:i]))
        inside_bind = any(parent == b or parent.startswith(b + "/") for b in bound)
        if parent not in made and not inside_bind:
            # Created by bwrap, so traversable by the job's uid even where the host's is not (/root).
            args += ["--perms", "0755", "--dir", parent]
            made.add(parent)
    return args


def _python_roots() -> list[str]:
    """The directories the interpreter and its packages live in (outside /usr)."""
    roots: set[str] = set()
    for candidate in (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)):
        for path in {candidate, os.path.realpath(candidate)}:
            if os.path.isdir(path) and not path.startswith("/usr/"):
                roots.add(path)
    # Nested roots (a venv's bin inside the venv) need no bind of their own.
    return sorted(r for r in roots if not any(r != o and r.startswith(o + "/") for o in roots))


def _host_env() -> dict[str, str]:
    # bwrap itself gets no secrets either: with --clearenv the job would not see them, but keeping them out
    # of bwrap's own environment means they are nowhere to be read.
    return {"PATH": "/usr/local/bin:/usr/bin:/bin"}


def job_env() -> dict[str, str]:
    """The whole environment a job sees: nothing inherited from the runner."""
    venv_bin = os.path.dirname(sys.executable)
    return {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": SANDBOX_WORKDIR,
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": SANDBOX_WORKDIR,
    }
