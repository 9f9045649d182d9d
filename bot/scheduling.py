"""The scheduler: APScheduler 3.11 (AsyncIOScheduler) jobs rebuilt from the schedules in the database.

Jobs carry ids only (a channel pk or a challenge id) and look everything else up when they run, so a
rebuilt or duplicated job can never act on stale data. Job ids are deterministic:

- ``post:<channel pk>``   cron at the schedule's local time on its days (IANA timezone, DST-correct)
- ``summary:<channel pk>`` cron on the weekly summary day at the post time
- ``close:<challenge id>`` date job at the stored ``closes_at``
- ``remind:<challenge id>`` date job ``reminder_minutes`` before ``closes_at``
- ``sync``                 interval job: rebuild when a schedule changed in another process
- ``retry:<job id>``       date job: a failed job tried again (exponential backoff)

A failed job (the database or the platform did not answer) is retried with exponential backoff until it
succeeds; each job decides for itself when it is too late (a post beyond the grace period is skipped, a
reminder after its window closed is not sent), so retrying is always safe and always ends.

"Now" comes from the Clock port (the system clock in production, a controllable clock in tests): the
scheduler computes due jobs and its next wake-up from it, so tests drive real APScheduler triggers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from apscheduler.executors.base import MaxInstancesReachedError
from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.base import STATE_PAUSED, STATE_RUNNING
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.core.calendar import zone
from bot.core.ports import Clock
from bot.core.schedule import DAY_NAMES, Schedule, days_text
from bot.core.schedule_service import ScheduleService

log = logging.getLogger(__name__)

#: APScheduler's own cap on a single timer wait.
_TIMEOUT_MAX = 4294967
#: Jobs retried after a failure, and the scheduler method that runs them.
_RETRIED = ("post", "remind", "summary", "close", "sync")


class ClockedAsyncIOScheduler(AsyncIOScheduler):  # type: ignore[misc]  # APScheduler is untyped
    """AsyncIOScheduler whose notion of now is a Clock: due jobs and wake-ups follow ``clock.now()``."""

    def __init__(self, clock: Clock, **options: Any) -> None:
        self._clock = clock
        super().__init__(**options)

    def _process_jobs(self) -> float | None:
        """Submit due jobs (by the clock) and return the seconds until the next one is due."""
        if self.state == STATE_PAUSED:
            return None
        now = self._clock.now()
        next_wakeup: dt.datetime | None = None
        with self._jobstores_lock:
            for alias, store in self._jobstores.items():
                for job in store.get_due_jobs(now):
                    run_times = job._get_run_times(now)
                    # Coalesce: a job that fell behind runs once, for its latest due time.
                    run_times = run_times[-1:] if run_times and job.coalesce else run_times
                    if not run_times:
                        continue
                    try:
                        self._lookup_executor(job.executor).submit_job(job, run_times)
                    except MaxInstancesReachedError:
                        log.warning("job %s still running: this run is skipped", job.id)
                    following = job.trigger.get_next_fire_time(run_times[-1], now)
                    if following is not None:
                        job._modify(next_run_time=following)
                        store.update_job(job)
                    else:
                        self.remove_job(job.id, alias)
                due = store.get_next_run_time()
                if due is not None and (next_wakeup is None or due < next_wakeup):
                    next_wakeup = due
        if next_wakeup is None:
            return None
        wait = (next_wakeup - self._clock.now()).total_seconds()
        return min(max(wait, 0.0), _TIMEOUT_MAX)


def _fingerprint(schedules: list[Schedule]) -> tuple[object, ...]:
    """What the jobs are built from: a different fingerprint means rebuild."""
    return tuple((s.channel_pk, s.config, s.updated_at) for s in schedules)


class RankZeroScheduler:
    """Owns the APScheduler instance and the jobs of the channels this process serves."""

    def __init__(
        self,
        schedules: ScheduleService,
        clock: Clock,
        *,
        platforms: frozenset[str] | None = None,
        sync_interval_s: float = 30.0,
        retry_base_s: float = 5.0,
        retry_max_s: float = 60.0,
    ) -> None:
        """``platforms``: channel platforms served by this process (None: all).

        A failed post, reminder, summary or close is retried after ``retry_base_s``, doubling up to
        ``retry_max_s`` between tries.
        """
        self._schedules = schedules
        self._retry_base_s = retry_base_s
        self._retry_max_s = retry_max_s
        #: Jobs failing now (job id -> what /healthz shows); an entry leaves when its job succeeds.
        self.failing: dict[str, dict[str, Any]] = {}
        #: Failures in a row per job id (the backoff exponent).
        self._failures: dict[str, int] = {}
        self._clock = clock
        self._platforms = platforms
        self._sync_interval_s = sync_interval_s
        self._fingerprint: tuple[object, ...] | None = None
        self._running: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.aps = ClockedAsyncIOScheduler(
            clock,
            timezone=dt.UTC,
            # Our jobs decide for themselves what "too late" means (the grace period), so APScheduler
            # never drops a run; a job that fell behind runs once.
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Close overdue windows, make missed posts within grace, then schedule every job."""
        self.aps.start()
        # Schedules changed through this process (an adapter's admin command) rebuild at once; changes
        # made elsewhere (the CLI, another instance) are picked up by the sync job.
        self._schedules.subscribe(self.rebuild)
        await self._close_overdue()
        await self.rebuild()
        for schedule in await self._served():
            if not schedule.config.paused:
                # Missed while down: the post, and the weekly summary, are made now within grace.
                await self._own_task(self._post(schedule.channel_pk))
                if schedule.config.summary_day is not None:
                    await self._own_task(self._summary(schedule.channel_pk))
        every = dt.timedelta(seconds=self._sync_interval_s)
        # start_date from the clock: APScheduler would otherwise start the interval from the system time.
        sync = IntervalTrigger(
            seconds=self._sync_interval_s, start_date=self._clock.now() + every, timezone=dt.UTC
        )
        self._add("sync", self._sync, sync, None)
        log.info("scheduler started with %d jobs", len(self.aps.get_jobs()))

    async def shutdown(self) -> None:
        """Stop the scheduler and wait for running jobs."""
        self._schedules.unsubscribe(self.rebuild)
        if self.aps.state == STATE_RUNNING:
            self.aps.shutdown(wait=False)
        await self.idle()

    async def tick(self) -> None:
        """Run whatever is due now (by the clock) and wait until it finished (tests, clock jumps)."""
        while True:
            await asyncio.sleep(0)
            self.aps._process_jobs()
            await asyncio.sleep(0)
            if not self._running:
                due = [j for j in self.aps.get_jobs() if j.next_run_time <= self._clock.now()]
                if not due:
                    return
            await self.idle()

    async def idle(self) -> None:
        """Wait until no job is running."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    # ------------------------------------------------------------------ jobs
    async def rebuild(self) -> None:
        """Recreate the cron jobs from the stored schedules, and close/remind jobs of open windows."""
        schedules = await self._served()
        self._fingerprint = _fingerprint(schedules)
        for job in self.aps.get_jobs():
            if job.id.startswith(("post:", "summary:")):
                job.remove()
        for s in schedules:
            if s.config.paused:
                continue
            tz = zone(s.config.timezone)
            days = days_text(s.config.days)
            trigger = CronTrigger(day_of_week=days, hour=s.config.hour, minute=s.config.minute, timezone=tz)
            self._add(f"post:{s.channel_pk}", self._post, trigger, s.channel_pk)
            if s.config.summary_day is not None:
                weekly = CronTrigger(
                    day_of_week=DAY_NAMES[s.config.summary_day],
                    hour=s.config.hour,
                    minute=s.config.minute,
                    timezone=tz,
                )
                self._add(f"summary:{s.channel_pk}", self._summary, weekly, s.channel_pk)
        await self._refresh_windows(schedules)

    async def _refresh_windows(self, schedules: list[Schedule]) -> None:
        """Close (and reminder) jobs for every open window as stored; a changed closes_at moves its job."""
        by_pk = {s.channel_pk: s for s in schedules}
        for challenge_id, channel_pk, closes_at in await self._schedules.open_windows():
            if self._platforms is not None and channel_pk not in by_pk:
                continue  # another process serves that platform
            current = self.next_run(f"close:{challenge_id}")
            if current is None or current != closes_at:
                remind_at = self._schedules.reminder_at(by_pk.get(channel_pk), closes_at)
                self._window_jobs(challenge_id, closes_at, remind_at)

    def _window_jobs(self, challenge_id: int, closes_at: dt.datetime, remind_at: dt.datetime | None) -> None:
        self._add(f"close:{challenge_id}", self._close, DateTrigger(closes_at, timezone=dt.UTC), challenge_id)
        if remind_at is not None and remind_at < closes_at:
            # A reminder whose time passed while we were down is still sent if the window is open.
            self._add(
                f"remind:{challenge_id}", self._remind, DateTrigger(remind_at, timezone=dt.UTC), challenge_id
            )

    def _add(
        self, job_id: str, func: Callable[..., Awaitable[None]], trigger: BaseTrigger, arg: int | None
    ) -> None:
        next_run = trigger.get_next_fire_time(None, self._clock.now())
        if next_run is None:
            return
        self.aps.add_job(
            func,
            trigger,
            args=() if arg is None else (arg,),
            id=job_id,
            name=job_id,
            replace_existing=True,
            next_run_time=next_run,
        )

    async def _served(self) -> list[Schedule]:
        return [
            s
            for s in await self._schedules.schedules()
            if self._platforms is None or s.channel.platform in self._platforms
        ]

    @staticmethod
    async def _own_task(job: Awaitable[None]) -> None:
        """Run a job body now, in its own task as APScheduler would (``_guard`` tracks the task)."""
        await asyncio.ensure_future(job)

    async def _guard(self, what: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run a job body, tracked for ``idle()``; a failure is logged, shown on /healthz and retried.

        One line per failure; the traceback only with the first failure of an outage.
        """
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
            # Tracked until the task is done, not until this body returns: APScheduler counts the job's
            # instance until then, and a retry submitted earlier would be skipped as "still running".
            task.add_done_callback(self._running.discard)
        try:
            await body()
        except Exception as exc:  # one channel's failure must not stop the others
            self._failed(what, exc)
        else:
            if self.failing.pop(what, None) is not None:
                log.warning("scheduled %s succeeded after %d failure(s)", what, self._failures.get(what, 0))
            self._failures.pop(what, None)

    def _failed(self, what: str, exc: Exception) -> None:
        count = self._failures.get(what, 0) + 1
        self._failures[what] = count
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        kind, _, arg = what.partition(":")
        retry_at: dt.datetime | None = None
        if kind in _RETRIED:
            delay = min(self._retry_base_s * 2 ** (count - 1), self._retry_max_s)
            retry_at = self._clock.now() + dt.timedelta(seconds=delay)
            trigger = DateTrigger(retry_at, timezone=dt.UTC)
            self._add(f"retry:{what}", getattr(self, f"_{kind}"), trigger, int(arg) if arg else None)
        # Only the first failure of an outage (no job failing yet) carries the traceback: an outage would
        # otherwise print the same trace for every job, every retry. The following ones are one line each.
        first = not self.failing
        self.failing[what] = {
            "error": error,
            "failures": count,
            "since": self.failing.get(what, {}).get("since", self._clock.now().isoformat()),
            "retry_at": retry_at.isoformat() if retry_at else None,
        }
        then = f"retrying at {retry_at:%H:%M:%S} UTC" if retry_at else "next run as scheduled"
        log.error("scheduled %s failed (%s); %s [failure %d]", what, error, then, count, exc_info=first)

    async def _post(self, channel_pk: int) -> None:
        async def body() -> None:
            outcome = await self._schedules.post_scheduled(channel_pk)
            log.info("post for channel %s: %s (%s)", channel_pk, outcome.status, outcome.reason)
            if outcome.challenge_id is not None and outcome.closes_at is not None:
                self._window_jobs(outcome.challenge_id, outcome.closes_at, outcome.reminder_at)

        await self._guard(f"post:{channel_pk}", body)

    async def _close(self, challenge_id: int) -> None:
        async def body() -> None:
            card = await self._schedules.close_window(challenge_id)
            log.info("challenge %s closed%s", challenge_id, "" if card else " (already, elsewhere)")

        await self._guard(f"close:{challenge_id}", body)

    async def _remind(self, challenge_id: int) -> None:
        async def body() -> None:
            await self._schedules.remind(challenge_id)

        await self._guard(f"remind:{challenge_id}", body)

    async def _summary(self, channel_pk: int) -> None:
        async def body() -> None:
            await self._schedules.weekly_summary(channel_pk)

        await self._guard(f"summary:{channel_pk}", body)

    async def _sync(self) -> None:
        async def body() -> None:
            schedules = await self._served()
            if _fingerprint(schedules) != self._fingerprint:
                log.info("schedules changed: rebuilding jobs")
                await self.rebuild()
            else:
                # Windows opened by another process, or whose closing time an admin moved.
                await self._refresh_windows(schedules)

        await self._guard("sync", body)

    async def _close_overdue(self) -> None:
        """Close every window that ended while no process was running (results posted once)."""
        now = self._clock.now()
        served = {s.channel_pk for s in await self._served()}
        for challenge_id, channel_pk, closes_at in await self._schedules.open_windows():
            if closes_at <= now and (self._platforms is None or channel_pk in served):
                await self._own_task(self._close(challenge_id))

    # ------------------------------------------------------------------ health
    def state(self) -> dict[str, Any]:
        """Scheduler state and next runs, for /healthz."""
        names = {0: "stopped", 1: "running", 2: "paused"}
        jobs: list[Job] = sorted(self.aps.get_jobs(), key=lambda j: j.next_run_time)
        return {
            "state": names.get(self.aps.state, str(self.aps.state)),
            "jobs": [{"id": j.id, "next_run": j.next_run_time.astimezone(dt.UTC).isoformat()} for j in jobs],
            "failing": dict(self.failing),
        }

    def next_run(self, job_id: str) -> dt.datetime | None:
        """When a job runs next (UTC), or None if there is no such job."""
        job = self.aps.get_job(job_id)
        return job.next_run_time.astimezone(dt.UTC) if job is not None else None
