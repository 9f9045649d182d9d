"""What runs inside the sandbox: a supervisor that pre-warms torch, then runs exactly one job's ranks.

This package is bind-mounted into the sandbox on its own (read-only at /opt/rankzero/runner/inside, beside
runner/__init__.py and nothing else of the runner; runner/sandbox.py) and started by path (``__main__.py``),
so it imports nothing from the rest of the ``runner`` package, only itself, the standard library and torch: it
runs in another process, at another trust level (.importlinter, "runner-inside-stands-alone").
The host imports a few of its names (the light hint, the spawn-zygote rule); importing this package itself
imports nothing.

Modules, in the order a sandbox uses them: ``protocol`` (events and reports between supervisor and host),
``identity`` (user namespace, keyring, syscall filter, limits), ``warmup`` (torch imported without CUDA),
``supervisor`` (the job read, the ranks forked, reaped, dumped, killed; ``main``), ``snippet`` (one rank's
body), ``ranks`` (ranks that are fresh interpreters), ``torchcompat`` (torchrun's environment, process-group
guards), ``zygote`` (multiprocessing's fresh interpreters served warm), ``interpreter`` (start and end as a
new interpreter would).

Lifecycle:

1. Set up the job's identity (runner started as root): a user namespace of its own, in which the
   supervisor is root (one host uid of the job's pair) and the ranks will be uid 1000 (the other); a fresh
   session keyring; the process limit; then the job's syscall filter (bubblewrap loaded the base one).
2. Import torch (the expensive part, done while the sandbox waits in the pool), report ``ready``.
3. Read one job (a JSON line) from the control pipe, write the snippet to ``main.py`` and fork one
   process per rank.  Each rank gets its own stdout/stderr/stack-dump pipes that lead straight to the host.
4. Report each rank's exit on the status pipe.  On ``dump`` from the host (at the deadline, or right
   after a rank failed: fail fast instead of waiting for a 30-minute collective timeout), dump the stacks
   of the ranks still running; on ``kill``, kill them.

Only the supervisor holds the status pipe: the host trusts what arrives there, so a rank (running the
snippet) must never be able to write to it.  Ranks close it right after the fork, run under another uid
than the supervisor, and the supervisor makes itself non-dumpable, so that no rank can reopen it through
``/proc/1/fd``, ptrace the supervisor, signal it, or change its limits or its scheduling.
Each rank's exit code comes from ``waitpid``; the only thing a rank reports itself is the description of
the exception it died of, over a report pipe of its own, and the supervisor attaches it only to a non-zero
exit, so a forged description can never turn a failure into a success or blame another rank.

The supervisor normally runs as PID 1 of the sandbox's PID namespace: a snippet cannot kill it (the
kernel drops signals to a namespace init that has no handler), and when it exits the kernel kills every
process left in the namespace, daemons included.
"""
