"""A real ``rankzero serve`` killed with SIGKILL between claiming the day's post and sending it: the restart
sends it, exactly once (issue 25 §1). Before the outbox, the restart logged "already posted" and the day's
post was lost.

The process is caught mid-send for certain, not by timing: its record file (the file platform's output,
RANKZERO_RECORD_FILE) is a FIFO nobody reads, so the post's ``open`` blocks after the outbox row was
claimed. The test sees the claim in the database, kills the process, puts a plain file in the FIFO's place
and starts another process.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.storage.models import ChallengeRow, OutboxRow
from tests.bot.test_serve_process import Serve, _db, _kinds, _schedule_now, _wait_for, procs

__all__ = ["procs"]  # the fixture

pytestmark = pytest.mark.slow

#: Short lease and polling, so that the restart takes the dead process's claim within seconds.
FAST = {"RANKZERO_OUTBOX_LEASE_S": "3", "RANKZERO_OUTBOX_INTERVAL_S": "0.5"}


def _claimed_post(db_url: str) -> dict[str, Any] | None:
    async def body(factory: Any) -> dict[str, Any] | None:
        async with factory() as s, s.begin():
            row = (
                await s.execute(
                    select(
                        OutboxRow.status,
                        OutboxRow.claimed_until,
                        OutboxRow.attempts,
                        ChallengeRow.message_ref,
                    )
                    .join(ChallengeRow, ChallengeRow.id == OutboxRow.challenge_id)
                    .where(OutboxRow.kind == "challenge")
                )
            ).first()
        return None if row is None else dict(row._mapping)

    result: dict[str, Any] | None = _db(db_url, body)
    return result


def test_sigkill_between_claim_and_send_then_restart_posts_once(
    db_url: str, tmp_path: Path, procs: list[Serve]
) -> None:
    record, log = tmp_path / "posts.jsonl", tmp_path / "serve.log"
    os.mkfifo(record)  # nobody reads it: the post blocks in open() after its claim
    _schedule_now(db_url)
    first = Serve(db_url, record, log, **FAST)
    procs.append(first)
    # A hang guard counted in polls, not a time bound (loading the shipped bank takes over a minute on a
    # busy machine with PostgreSQL).
    for _ in range(1500):
        claim = _claimed_post(db_url)
        if claim is not None and claim["claimed_until"] is not None:
            break
        assert first.proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.2)
    assert claim is not None and claim["claimed_until"] is not None, f"no claimed post: {claim}"
    assert claim["status"] == "pending" and claim["message_ref"] is None and claim["attempts"] == 1
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL  # between the claim and the send

    record.unlink()  # the platform works again
    second = Serve(db_url, record, log, **FAST)
    procs.append(second)
    [post] = _wait_for(record, "post", 1, polls=1500)
    assert post["pid"] == second.proc.pid
    time.sleep(2.0)  # its outbox job has run several more times
    after = _claimed_post(db_url)
    assert after is not None and after["status"] == "sent" and after["message_ref"] is not None
    assert second.stop() == 0
    restarted = log.read_text()
    # The restart's outbox delivered the dead process's claim (its second try), before its post job ran.
    assert "outbox: challenge of challenge 1 sent at try 2" in restarted

    third = Serve(db_url, record, log, **FAST)  # a later restart: nothing left to send
    procs.append(third)
    third.wait_healthy(polls=1500)
    time.sleep(1.5)
    assert third.stop() == 0
    assert _kinds(record) == ["post"], log.read_text()[-3000:]
