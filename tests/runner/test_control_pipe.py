"""The supervisor's control pipe: the host's light hint never stands in for the job (no sandbox needed)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

import pytest

from runner.inside.protocol import HINT_LIGHT
from runner.inside.supervisor import Supervisor


@pytest.fixture
def pipes() -> Iterator[tuple[Supervisor, int]]:
    control_r, control_w = os.pipe()
    status_r, status_w = os.pipe()
    supervisor = Supervisor({"control_fd": control_r, "status_fd": status_w, "ranks": []})
    yield supervisor, control_w
    for fd in (control_r, control_w, status_r, status_w):
        with contextlib.suppress(OSError):  # a test may have closed the host's end already
            os.close(fd)


JOB = {"code": "print(1)\n", "mode": "python", "nproc": 1}


def test_a_hint_read_while_warming_is_not_the_job(pipes: tuple[Supervisor, int]) -> None:
    supervisor, host = pipes
    assert not supervisor.hinted_light()
    os.write(host, HINT_LIGHT)
    assert supervisor.hinted_light() and supervisor.hinted_light()
    os.write(host, (json.dumps(JOB) + "\n").encode())
    assert supervisor.wait_job() == JOB


def test_a_hint_that_came_after_the_warm_up_looked_is_skipped(pipes: tuple[Supervisor, int]) -> None:
    # The host hinted after the supervisor's last look: hint and job are both still in the pipe.
    supervisor, host = pipes
    assert not supervisor.hinted_light()
    os.write(host, HINT_LIGHT + (json.dumps(JOB) + "\n").encode())
    assert supervisor.wait_job() == JOB


def test_a_job_read_while_looking_for_the_hint_is_kept(pipes: tuple[Supervisor, int]) -> None:
    supervisor, host = pipes
    os.write(host, (json.dumps(JOB) + "\n").encode())
    assert not supervisor.hinted_light()  # it read the job line while looking
    assert supervisor.wait_job() == JOB


def test_the_host_gone_before_the_job_is_none(pipes: tuple[Supervisor, int]) -> None:
    supervisor, host = pipes
    os.write(host, HINT_LIGHT)
    os.close(host)
    assert supervisor.wait_job() is None
