"""The runner's timing rules (runner/jobwatch.py) on a fake clock, without a sandbox: the deadline, the
CPU-wait credit, fail fast, dump requests, kills and the end of a job.
"""

from __future__ import annotations

import pytest

from runner.jobwatch import (
    DRAIN_GRACE_S,
    DUMP_GRACE_S,
    LINGER_S,
    MAX_EXTENSION_S,
    STOP_GRACE_S,
    WAIT_SAMPLE_S,
    Action,
    JobWatch,
)

START = 1000.0


def step(
    watch: JobWatch, at: float, *, streams: bool = True, status: bool = True, flood: bool = False
) -> Action:
    """One step of ``watch`` at ``at`` seconds into the job."""
    return watch.step(START + at, streams_open=streams, status_open=status, flooded=flood)


class FakeWaits:
    """A CpuWait stand-in: answers a fixed wait, and records when it was asked."""

    def __init__(self, waited_s: float) -> None:
        self.waited_s = waited_s
        self.asked: list[float] = []

    def __call__(self, elapsed_s: float) -> float:
        self.asked.append(elapsed_s)
        return self.waited_s


def test_the_deadline_dumps_then_kills_then_drains() -> None:
    watch = JobWatch(timeout_s=10, nproc=2, start=START)
    assert step(watch, 9.99) == Action.WAIT
    assert step(watch, 10.0) == Action.DUMP
    assert watch.timed_out and watch.dump_sent_at == START + 10
    # The dump is asked for once; the ranks get DUMP_GRACE_S to write their stacks.
    assert step(watch, 10.0 + DUMP_GRACE_S) == Action.WAIT
    assert step(watch, 10.01 + DUMP_GRACE_S) == Action.KILL_SANDBOX
    assert step(watch, 10.02 + DUMP_GRACE_S) == Action.WAIT  # draining what the kill flushed
    assert step(watch, 10.02 + DUMP_GRACE_S + DRAIN_GRACE_S) == Action.FINISH


def test_a_drained_sandbox_finishes_without_the_drain_grace() -> None:
    watch = JobWatch(timeout_s=10, nproc=1, start=START)
    step(watch, 10)
    assert step(watch, 11.5) == Action.KILL_SANDBOX
    assert step(watch, 11.6, streams=False) == Action.FINISH


def test_the_supervisors_dumped_event_ends_the_grace_early() -> None:
    watch = JobWatch(timeout_s=10, nproc=1, start=START)
    assert step(watch, 10) == Action.DUMP
    watch.dumped(START + 10.1)
    assert step(watch, 10.11) == Action.KILL_SANDBOX


def test_cpu_wait_moves_the_deadline_and_is_sampled_only_past_the_wall_deadline() -> None:
    waits = FakeWaits(3.0)
    watch = JobWatch(timeout_s=10, nproc=1, start=START, waited=waits)
    assert step(watch, 5) == Action.WAIT
    assert waits.asked == []  # a job is not blamed for its neighbours before its own deadline
    assert step(watch, 10) == Action.WAIT
    assert waits.asked == [10] and watch.credit == 3.0 and watch.deadline == START + 13
    assert step(watch, 10 + WAIT_SAMPLE_S / 2) == Action.WAIT
    assert waits.asked == [10]  # not sampled again within WAIT_SAMPLE_S
    assert step(watch, 12.9) == Action.WAIT
    assert step(watch, 13.0) == Action.DUMP
    assert watch.timed_out and watch.credit == 3.0
    asked = len(waits.asked)
    step(watch, 13.5)
    assert len(waits.asked) == asked  # never after the deadline's dump


def test_a_short_wait_moves_nothing() -> None:
    watch = JobWatch(timeout_s=10, nproc=1, start=START, waited=FakeWaits(0.4))
    assert step(watch, 10) == Action.DUMP
    assert watch.credit == 0.0


@pytest.mark.parametrize(
    ("timeout_s", "waited_s", "credit"),
    [(5, 20.0, 5.0), (100, 90.0, MAX_EXTENSION_S), (10, 2.0, 2.0)],
)
def test_the_credit_is_at_most_the_timeout_and_max_extension(
    timeout_s: float, waited_s: float, credit: float
) -> None:
    watch = JobWatch(timeout_s=timeout_s, nproc=1, start=START, waited=FakeWaits(waited_s))
    step(watch, timeout_s)
    assert watch.credit == credit
    assert step(watch, timeout_s + credit) == Action.DUMP


def test_a_failing_rank_dumps_the_others_then_they_are_stopped_then_the_sandbox_goes() -> None:
    watch = JobWatch(timeout_s=30, nproc=3, start=START)
    assert watch.rank_exited(1, failed=True, now=START + 2) == (0, True)
    assert watch.stopped_after_rank == 1
    # A second failure is part of the same stop: no second dump.
    assert watch.rank_exited(0, failed=True, now=START + 2.1) == (1, False)
    assert step(watch, 2 + DUMP_GRACE_S) == Action.WAIT
    assert step(watch, 2.01 + DUMP_GRACE_S) == Action.KILL_RANKS
    assert step(watch, 2.02 + DUMP_GRACE_S) == Action.WAIT  # the supervisor gets STOP_GRACE_S
    assert step(watch, 2.01 + DUMP_GRACE_S + STOP_GRACE_S) == Action.KILL_SANDBOX
    assert not watch.timed_out


def test_the_fail_fast_dump_ends_early_on_dumped_and_the_stopped_ranks_end_the_job() -> None:
    watch = JobWatch(timeout_s=30, nproc=2, start=START)
    assert watch.rank_exited(0, failed=True, now=START + 1)[1]
    watch.dumped(START + 1.2)
    assert step(watch, 1.21) == Action.KILL_RANKS
    assert watch.rank_exited(1, failed=True, now=START + 1.3) == (1, False)
    assert step(watch, 1.31) == Action.WAIT  # output may still be on its way
    assert step(watch, 1.31 + LINGER_S) == Action.FINISH


def test_the_last_ranks_failure_and_a_clean_exit_stop_nothing() -> None:
    watch = JobWatch(timeout_s=30, nproc=2, start=START)
    assert watch.rank_exited(0, failed=False, now=START + 1) == (0, False)
    assert watch.rank_exited(1, failed=True, now=START + 1.5) == (1, False)
    assert watch.stopped_after_rank is None
    assert step(watch, 1.6, streams=False) == Action.FINISH


def test_the_deadline_during_a_fail_fast_dump_does_not_drain_its_stacks() -> None:
    watch = JobWatch(timeout_s=3, nproc=2, start=START)
    watch.rank_exited(0, failed=True, now=START + 2.5)
    assert step(watch, 3.0) == Action.WAIT  # timed out, but the fail-fast dump is already under way
    assert watch.timed_out
    assert step(watch, 3.0 + DUMP_GRACE_S + 0.01) == Action.KILL_SANDBOX


def test_a_fail_fast_after_the_deadlines_dump_is_not_started() -> None:
    watch = JobWatch(timeout_s=3, nproc=2, start=START)
    assert step(watch, 3) == Action.DUMP
    assert watch.rank_exited(1, failed=True, now=START + 3.2) == (0, False)
    assert watch.stopped_after_rank is None


def test_a_flood_or_a_lost_supervisor_kills_at_once() -> None:
    flooded = JobWatch(timeout_s=30, nproc=1, start=START)
    assert step(flooded, 0.5, flood=True) == Action.KILL_SANDBOX
    assert flooded.flooded and not flooded.timed_out
    lost = JobWatch(timeout_s=30, nproc=2, start=START)
    lost.rank_exited(0, failed=False, now=START + 0.1)
    assert step(lost, 0.2, status=False) == Action.KILL_SANDBOX
    assert lost.supervisor_lost
    told = JobWatch(timeout_s=30, nproc=1, start=START, supervisor_lost=True)  # the job could not be sent
    assert step(told, 0.0) == Action.KILL_SANDBOX


def test_a_closed_status_pipe_after_every_exit_is_no_loss() -> None:
    watch = JobWatch(timeout_s=30, nproc=1, start=START)
    watch.rank_exited(0, failed=False, now=START + 1)
    assert step(watch, 1.1, status=False) == Action.WAIT
    assert not watch.supervisor_lost
    assert step(watch, 1.1 + LINGER_S + 0.01, status=False) == Action.FINISH
