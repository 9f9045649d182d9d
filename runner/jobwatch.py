"""The timing rules of one running job, as a small state machine without I/O (runner/executor.py drives it).

Every rule the host applies while a job runs is here, decided from the clock and from what the job's pipes
said, and answered as one :class:`Action` for the caller to carry out:

* the deadline: ``timeout_s`` after the job was sent, moved later by the time the job waited for a CPU
  behind other work (sampled only once the wall deadline is reached, at most every ``WAIT_SAMPLE_S``;
  waits under ``MIN_CREDIT_S`` move nothing; the move is at most ``timeout_s`` and ``MAX_EXTENSION_S``);
* at the deadline, the ranks still running dump their stacks, then the sandbox is killed ``DUMP_GRACE_S``
  later (sooner once the supervisor says the stacks are written);
* fail fast: when a rank fails while others still run, they dump their stacks, the supervisor is told to
  kill them ``DUMP_GRACE_S`` later, and the sandbox is killed if they are not gone ``STOP_GRACE_S`` after;
* an output flood or a lost supervisor kills the sandbox at once;
* the end: ``DRAIN_GRACE_S`` of draining after a kill, or ``LINGER_S`` after the last rank's exit for a
  daemonised grandchild still holding a pipe.

Times are seconds on one monotonic clock, passed in by the caller (tests pass a fake one).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

# After the deadline: how long the ranks get to write their stack dumps, then how long we keep draining
# pipes after the kill.  Together with the kill itself they keep the verdict within timeout + 3 s.
DUMP_GRACE_S = 1.0
DRAIN_GRACE_S = 0.5
# The deadline moves by the time a job waited for a CPU behind others, by at most its own timeout and at
# most MAX_EXTENSION_S: a job holds its slot for at most twice its timeout whatever happens.
MAX_EXTENSION_S = 60.0
# Waits shorter than this (an interpreter's start on a busy host) do not move the deadline.
MIN_CREDIT_S = 0.5
WAIT_SAMPLE_S = 0.25
# After a fail-fast "kill", how long the supervisor gets to stop its ranks before the sandbox is killed.
STOP_GRACE_S = 1.0
# Once every rank has exited, a daemonised grandchild may still hold a pipe open: stop waiting for EOF.
LINGER_S = 0.3


class Action(enum.Enum):
    """What the caller must do now."""

    WAIT = "wait"
    """Nothing: read the pipes a little longer."""
    DUMP = "dump"
    """Ask the supervisor to dump the stacks of the ranks still running (the deadline's dump)."""
    KILL_RANKS = "kill-ranks"
    """Ask the supervisor to kill its ranks (fail fast, once their stacks are dumped)."""
    KILL_SANDBOX = "kill-sandbox"
    """Kill the whole sandbox, then keep draining its pipes a little."""
    FINISH = "finish"
    """Stop watching: the job's outcome is complete."""


@dataclass
class JobWatch:
    """One job's clock: its deadline and CPU-wait credit, fail-fast stop, dump requests, kills and end.

    ``waited`` answers, given the seconds since the start, how long the job waited for a CPU behind other
    work (runner/executor.py's CpuWait); None where the sandbox has no CPU cgroup to ask.
    """

    timeout_s: float
    nproc: int
    start: float
    waited: Callable[[float], float] | None = None
    credit: float = 0.0
    """How far the deadline moved for time spent waiting for a CPU behind other work."""
    sampled_at: float = 0.0
    exits: int = 0
    all_exited_at: float | None = None
    dump_sent_at: float | None = None
    """When the deadline's dump was asked for."""
    stop_sent_at: float | None = None
    """When the fail-fast dump was asked for (after which the supervisor kills the ranks)."""
    kill_sent: bool = False
    killed_at: float | None = None
    timed_out: bool = False
    flooded: bool = False
    supervisor_lost: bool = False
    stopped_after_rank: int | None = None

    @property
    def deadline(self) -> float:
        """When the job times out, credit included."""
        return self.start + self.timeout_s + self.credit

    def step(self, now: float, *, streams_open: bool, status_open: bool, flooded: bool) -> Action:
        """The one thing to do at ``now``, given whether job streams and the status pipe are still open and
        whether the job's output went past the flood limit.
        """
        self._sample_wait(now)
        if self.killed_at is not None:
            done = not streams_open or now - self.killed_at > DRAIN_GRACE_S
            return Action.FINISH if done else Action.WAIT
        if self.all_exited_at is not None and (not streams_open or now - self.all_exited_at > LINGER_S):
            return Action.FINISH
        if (not status_open or self.supervisor_lost) and self.all_exited_at is None:
            # The supervisor is gone without reporting every rank: nothing more will come.
            self.supervisor_lost = True
            return self._kill(now)
        if flooded:
            self.flooded = True
            return self._kill(now)
        return self._timing(now)

    def _timing(self, now: float) -> Action:
        """The deadline's dump and kill, and the fail-fast kill of the ranks, then of the sandbox."""
        if now >= self.deadline and self.dump_sent_at is None:
            self.timed_out = True
            self.dump_sent_at = now
            # Under way already, the fail-fast dump's stacks must not be drained by a second request.
            return Action.DUMP if self.stop_sent_at is None else Action.WAIT
        if self.dump_sent_at is not None and now - self.dump_sent_at > DUMP_GRACE_S:
            return self._kill(now)
        if self.stop_sent_at is not None and not self.kill_sent and now - self.stop_sent_at > DUMP_GRACE_S:
            self.kill_sent = True
            return Action.KILL_RANKS
        if (
            self.kill_sent
            and self.stop_sent_at is not None
            and now - self.stop_sent_at > DUMP_GRACE_S + STOP_GRACE_S
        ):
            return self._kill(now)  # the supervisor did not stop its ranks: the sandbox goes
        return Action.WAIT

    def _kill(self, now: float) -> Action:
        self.killed_at = now
        return Action.KILL_SANDBOX

    def _sample_wait(self, now: float) -> None:
        # Only once the wall deadline is near: a starved job is not blamed for its neighbours.
        if self.waited is None or self.dump_sent_at is not None:
            return
        if now < self.deadline or now - self.sampled_at <= WAIT_SAMPLE_S:
            return
        waited = self.waited(now - self.start)
        self.credit = min(waited, self.timeout_s, MAX_EXTENSION_S) if waited >= MIN_CREDIT_S else 0.0
        self.sampled_at = now

    def rank_exited(self, rank: int, failed: bool, now: float) -> tuple[int, bool]:
        """Count a rank's exit: ``(its exit order, whether to dump the others' stacks now to fail fast)``."""
        order = self.exits
        self.exits += 1
        if self.exits == self.nproc:
            self.all_exited_at = now
        fail_fast = (
            failed and self.exits < self.nproc and self.stop_sent_at is None and self.dump_sent_at is None
        )
        if fail_fast:
            # The others would wait for a collective timeout.  Dump them, then stop them.
            self.stopped_after_rank = rank
            self.stop_sent_at = now
        return order, fail_fast

    def dumped(self, now: float) -> None:
        """The supervisor says the stacks are written: stop now rather than after the whole grace."""
        if self.dump_sent_at is not None:
            self.dump_sent_at = min(self.dump_sent_at, now - DUMP_GRACE_S)
        elif self.stop_sent_at is not None and not self.kill_sent:
            self.stop_sent_at = min(self.stop_sent_at, now - DUMP_GRACE_S)
