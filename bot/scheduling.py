"""The scheduler: jobs rebuilt from the schedules in the database, timed by APScheduler 3.11's triggers.

Jobs carry ids only (a channel pk or a challenge id) and look everything else up when they run, so a
rebuilt or duplicated job can never act on stale data. Job ids are deterministic:

- ``post:<channel pk>``   cron at the schedule's local time on its days (IANA timezone, DST-correct)
- ``summary:<channel pk>`` cron on the weekly summary day at the post time; it also queues the team
                           report where the channel opted in (an outbox post of its own kind)
- ``close:<challenge id>`` date job at the stored ``closes_at``
- ``remind:<challenge id>`` date job ``reminder_minutes`` before ``closes_at``
- ``sync``                 interval job: rebuild when a schedule changed in another process
- ``outbox``               interval job: deliver the queued posts that are due (bot/core/outbox.py): a
                           failed results post, reminder or daily post, one a dead process claimed
- ``retry:<job id>``       date job: a failed job tried again (exponential backoff)

A failed job (the database or the platform did not answer) is retried with exponential backoff until it
succeeds. Every job runs under a deadline (``job_deadline_s``): a job still running then (a database that
accepts bytes and answers nothing) is cancelled, shown on /healthz and retried like any failure, so one
frozen call can never hold a job id, or the sync that follows schedule changes, for good. Each job
decides for itself when it is too late (a post beyond the grace period is skipped, a reminder after its
window closed is not sent), so retrying is always safe and always ends.

"Now" comes from the Clock port (the system clock in production, a controllable clock in tests). APScheduler
3.x reads the system time inside its scheduler loop and has no public way to take another clock, so the
timing loop is ours (``JobTable``: due jobs by the clock, coalesced, one instance per job, one wake-up
task), and APScheduler's public triggers (``CronTrigger``, ``DateTrigger``, ``IntervalTrigger``) compute
every fire time, DST included. Tests therefore drive the real triggers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.core.calendar import zone
from bot.core.fanout import FanoutGate
from bot.core.models import ChannelRef
from bot.core.ports import Clock
from bot.core.schedule import DAY_NAMES, Schedule, days_text
from bot.core.schedule_service import ScheduleService
from bot.logs import log_context

log = logging.getLogger(__name__)

#: Longest single wait of the wake-up task: the system clock can jump (NTP, suspend) while the event
#: loop's timer runs on the monotonic clock, so the due jobs are re-read from the clock at least this often.
MAX_SLEEP_S = 60.0
#: Jobs retried after a failure, and the scheduler method that runs them.
_RETRIED = ("post", "remind", "summary", "close", "sync", "outbox")
#: How long jobs cancelled at shutdown get to unwind (close their connections) before they are abandoned.
CANCEL_GRACE_S = 2.0


class JobDeadlineError(TimeoutError):
    """A scheduler job ran past its deadline and was cancelled (it is retried like any failure)."""


@dataclass
class ScheduledJob:
    """One job: a coroutine function called with one id (or none) at the times its trigger gives."""

    id: str
    func: Callable[..., Coroutine[Any, Any, None]]
    args: tuple[int, ...]
    trigger: BaseTrigger
    next_run_time: dt.datetime


class JobTable:
    """Jobs by id, run by the clock: what APScheduler's scheduler loop did, with an injectable clock.

    Semantics kept from the APScheduler configuration this replaces (``coalesce=True``, ``max_instances=1``,
    ``misfire_grace_time=None``): a job that fell behind runs once, never dropped for being late; a job
    whose previous run is still going skips this run (logged).
    """

    def __init__(self, clock: Clock, on_start: Callable[[str, float], None] | None = None) -> None:
        """``on_start(job id, lag)``: told of each run it starts, ``lag`` seconds after it was due."""
        self._clock = clock
        self._on_start = on_start
        self._jobs: dict[str, ScheduledJob] = {}
        #: The running instance of each job id (at most one).
        self._instances: dict[str, asyncio.Task[None]] = {}
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """True while the wake-up task runs."""
        return self._loop_task is not None and not self._loop_task.done()

    def start(self) -> None:
        """Start the wake-up task (it runs what is due, then sleeps until the next job)."""
        if not self.running:
            self._loop_task = asyncio.create_task(self._run(), name="rankzero-scheduler")

    async def stop(self) -> None:
        """Stop the wake-up task; running jobs go on (``RankZeroScheduler.idle`` waits for them)."""
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def add(self, job: ScheduledJob) -> None:
        """Add ``job``, replacing one with the same id, and re-plan the wake-up."""
        self._jobs[job.id] = job
        self._wakeup.set()

    def remove(self, job_id: str) -> None:
        """Remove a job (no error when there is none)."""
        self._jobs.pop(job_id, None)

    def get(self, job_id: str) -> ScheduledJob | None:
        """The job with that id, or None."""
        return self._jobs.get(job_id)

    def jobs(self) -> list[ScheduledJob]:
        """Every job, soonest first."""
        return sorted(self._jobs.values(), key=lambda j: j.next_run_time)

    def due(self) -> list[ScheduledJob]:
        """The jobs due now by the clock."""
        now = self._clock.now()
        return [j for j in self.jobs() if j.next_run_time <= now]

    def run_due(self) -> float | None:
        """Start every job due by the clock; return the seconds until the next one (None: no job)."""
        now = self._clock.now()
        for job in self.due():
            current = self._instances.get(job.id)
            if current is not None and not current.done():
                log.warning("job %s still running: this run is skipped", job.id)
            else:
                if self._on_start is not None:
                    self._on_start(job.id, (now - job.next_run_time).total_seconds())
                self._launch(job)
            # Coalesce: every fire time up to now is covered by this one run.
            following: dt.datetime | None = job.next_run_time
            while following is not None and following <= now:
                following = job.trigger.get_next_fire_time(following, now)
            if following is None:
                self.remove(job.id)
            else:
                job.next_run_time = following
        upcoming = self.jobs()
        if not upcoming:
            return None
        return max((upcoming[0].next_run_time - self._clock.now()).total_seconds(), 0.0)

    def _launch(self, job: ScheduledJob) -> None:
        task = asyncio.create_task(job.func(*job.args), name=f"rankzero-job:{job.id}")
        self._instances[job.id] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._instances.get(job.id) is finished:
                del self._instances[job.id]
            if not finished.cancelled() and finished.exception() is not None:
                # Job bodies catch their own failures (RankZeroScheduler._guard); this is a bug.
                log.error("job %s raised", job.id, exc_info=finished.exception())

        task.add_done_callback(done)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wakeup.clear()
            wait = self.run_due()
            # A timer that sets the wake-up event, rather than asyncio.wait_for around it: cancelling
            # this task (stop) then interrupts a plain Event.wait.
            timer = loop.call_later(MAX_SLEEP_S if wait is None else min(wait, MAX_SLEEP_S), self._wakeup.set)
            try:
                await self._wakeup.wait()
            finally:
                timer.cancel()


def describe_error(exc: BaseException) -> str:
    """One line naming a job's failure (driver timeouts carry no message: say what they mean)."""
    text = str(exc).strip()
    if not text and isinstance(exc, TimeoutError):
        text = "the database (or platform) did not answer in time"
    return f"{type(exc).__name__}: {text}".splitlines()[0][:300]


def _fingerprint(schedules: list[Schedule]) -> tuple[object, ...]:
    """What the jobs are built from: a different fingerprint means rebuild."""
    return tuple((s.channel_pk, s.config, s.updated_at) for s in schedules)


class RankZeroScheduler:
    """Owns the job table and the jobs of the channels this process serves."""

    def __init__(
        self,
        schedules: ScheduleService,
        clock: Clock,
        *,
        platforms: frozenset[str] | None = None,
        owns: Callable[[ChannelRef], bool] | None = None,
        sync_interval_s: float = 30.0,
        retry_base_s: float = 5.0,
        retry_max_s: float = 60.0,
        nudge: Callable[[], Awaitable[object]] | None = None,
        nudge_interval_s: float = 3600.0,
        optimize: Callable[[], Awaitable[object]] | None = None,
        optimize_interval_s: float = 86400.0,
        job_deadline_s: float | None = 120.0,
        on_job_start: Callable[[str, float], None] | None = None,
        outbox_interval_s: float = 15.0,
        fanout: FanoutGate | None = None,
    ) -> None:
        """``platforms``: channel platforms served by this process (None: all). ``owns``: whether this
        process serves a channel (Discord sharding: its guild's shard is one of ours; None: every channel).
        Every job (post, summary, close, reminder, their retries) is made only for the channels served, so
        two processes never act on the same channel; the database's claims stay the safety net.
        ``nudge``: the practice reminder of due cards, run at start and every ``nudge_interval_s`` (it
        claims each player's reminder per day, so running it hourly, or in several processes, sends each
        one once a day and reaches players whose cards fell due later in the day). ``optimize``: fitting
        players' FSRS parameters, every ``optimize_interval_s`` (first one interval after start).

        A failed post, reminder, summary, close, sync or outbox pass is retried after ``retry_base_s``,
        doubling up to ``retry_max_s`` between tries. ``job_deadline_s``: how long one run of a job may take
        (None: no bound); past it the run is cancelled and counts as a failure. ``on_job_start(job id, lag)``:
        told of every run the job table starts, ``lag`` seconds after its due time (the scheduler-lag metric).
        ``outbox_interval_s``: how often the outbox's due posts are delivered (each post's own backoff decides
        when it is due). ``fanout``: the gate every post, close, reminder and summary job of a channel passes
        before its body runs (bot/core/fanout.py: bounded per platform, fair between tenants, within the
        database pool); the wait there is outside the job's deadline. None: jobs run as they fall due.
        """
        self.fanout = fanout
        #: The channel of each scheduled channel pk and open window (the gate's platform and tenant).
        self._channels: dict[int, ChannelRef] = {}
        self._window_channels: dict[int, ChannelRef] = {}
        self._outbox_interval_s = outbox_interval_s
        self._schedules = schedules
        self._retry_base_s = retry_base_s
        self._retry_max_s = retry_max_s
        #: Jobs failing now (job id -> what /healthz shows); an entry leaves when its job succeeds.
        self.failing: dict[str, dict[str, Any]] = {}
        #: Failures in a row per job id (the backoff exponent).
        self._failures: dict[str, int] = {}
        self._clock = clock
        self._platforms = platforms
        self._owns = owns
        self._sync_interval_s = sync_interval_s
        self._nudge = nudge
        self._nudge_interval_s = nudge_interval_s
        self._optimize = optimize
        self._optimize_interval_s = optimize_interval_s
        self._fingerprint: tuple[object, ...] | None = None
        self._running: set[asyncio.Task[Any]] = set()
        self._job_deadline_s = job_deadline_s
        #: What each running job body is (job name), when it started (event-loop time: monotonic) and its
        #: deadline (seconds, None: none).
        self._started: dict[asyncio.Task[Any], tuple[str, float, float | None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        # Our jobs decide for themselves what "too late" means (the grace period), so the table never
        # drops a run; a job that fell behind runs once.
        self.jobs = JobTable(clock, on_job_start)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Close overdue windows, make missed posts within grace, then schedule every job."""
        self.jobs.start()
        # Schedules changed through this process (an adapter's admin command) rebuild at once; changes
        # made elsewhere (the CLI, another instance) are picked up by the sync job.
        self._schedules.subscribe(self.rebuild)
        await self._close_overdue()
        await self.rebuild()
        # Posts queued before a crash or a restart (a claimed daily post never sent, failed results).
        await self._own_task(self._outbox())
        for schedule in await self._served():
            if not schedule.config.paused:
                # Missed while down: the post, and the weekly summary, are made now within grace.
                await self._own_task(self._post(schedule.channel_pk))
                if schedule.config.summary_day is not None:
                    await self._own_task(self._summary(schedule.channel_pk))
        every = dt.timedelta(seconds=self._sync_interval_s)
        # start_date from the clock: the trigger would otherwise start the interval from the system time.
        sync = IntervalTrigger(
            seconds=self._sync_interval_s, start_date=self._clock.now() + every, timezone=dt.UTC
        )
        self._add("sync", self._sync, sync, None)
        outbox = IntervalTrigger(
            seconds=self._outbox_interval_s,
            start_date=self._clock.now() + dt.timedelta(seconds=self._outbox_interval_s),
            timezone=dt.UTC,
        )
        self._add("outbox", self._outbox, outbox, None)
        if self._nudge is not None:
            await self._own_task(self._send_nudges())
            hourly = IntervalTrigger(
                seconds=self._nudge_interval_s,
                start_date=self._clock.now() + dt.timedelta(seconds=self._nudge_interval_s),
                timezone=dt.UTC,
            )
            self._add("nudge", self._send_nudges, hourly, None)
        if self._optimize is not None:
            daily = IntervalTrigger(
                seconds=self._optimize_interval_s,
                start_date=self._clock.now() + dt.timedelta(seconds=self._optimize_interval_s),
                timezone=dt.UTC,
            )
            self._add("optimize", self._fit_parameters, daily, None)
        log.info("scheduler started with %d jobs", len(self.jobs.jobs()))

    async def shutdown(self, timeout_s: float | None = None) -> list[str]:
        """Stop the scheduler and wait for running jobs, at most ``timeout_s`` (None: until they end).

        Jobs still running then are cancelled, given :data:`CANCEL_GRACE_S` to unwind, and returned by
        name (sorted): the work this shutdown abandoned. Their claims are in the database, so a later
        process redoes or skips them as after a crash.
        """
        self._schedules.unsubscribe(self.rebuild)
        await self.jobs.stop()
        if timeout_s is None:
            await self.idle()
            return []
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        # asyncio.wait, not idle()'s gather: a gather cancelled by a timeout would cancel the jobs with it,
        # and this must know which ones were still running.
        while (left := [t for t in self._running if not t.done()]) and (remaining := end - loop.time()) > 0:
            await asyncio.wait(left, timeout=remaining)
        if not left:
            return []
        abandoned = sorted({self._started[t][0] if t in self._started else t.get_name() for t in left})
        for task in left:
            task.cancel()
        # Bounded: a body whose cleanup waits on the frozen database again is left behind, not awaited.
        await asyncio.wait(left, timeout=CANCEL_GRACE_S)
        return abandoned

    async def tick(self) -> None:
        """Run whatever is due now (by the clock) and wait until it finished (tests, clock jumps)."""
        while True:
            await asyncio.sleep(0)
            self.jobs.run_due()
            await asyncio.sleep(0)
            if not self._running and not self.jobs.due():
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
        for job in self.jobs.jobs():
            if job.id.startswith(("post:", "summary:")):
                self.jobs.remove(job.id)
        for s in schedules:
            self._channels[s.channel_pk] = s.channel
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

    def _serves(self, channel: ChannelRef) -> bool:
        """Whether this process serves ``channel`` (its platform, its shard), schedule or not."""
        return (self._platforms is None or channel.platform in self._platforms) and (
            self._owns is None or self._owns(channel)
        )

    async def _refresh_windows(self, schedules: list[Schedule]) -> None:
        """Close (and reminder) jobs for every open window as stored; a changed closes_at moves its job.

        Every open window of a channel this process serves, whatever opened it: a post-now in a channel
        without a schedule has a window too, and a channel's schedule decides only its reminder.
        """
        by_pk = {s.channel_pk: s for s in schedules}
        for challenge_id, channel_pk, closes_at, channel in await self._schedules.open_windows():
            if not self._serves(channel):
                continue  # another process serves that platform or shard
            self._window_channels[challenge_id] = channel
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
        self,
        job_id: str,
        func: Callable[..., Coroutine[Any, Any, None]],
        trigger: BaseTrigger,
        arg: int | None,
    ) -> None:
        next_run = trigger.get_next_fire_time(None, self._clock.now())
        if next_run is None:
            return
        self.jobs.add(ScheduledJob(job_id, func, () if arg is None else (arg,), trigger, next_run))

    async def _served(self) -> list[Schedule]:
        return [s for s in await self._schedules.schedules() if self._serves(s.channel)]

    @staticmethod
    async def _own_task(job: Awaitable[None]) -> None:
        """Run a job body now, in its own task as the job table would (``_guard`` tracks the task)."""
        await asyncio.ensure_future(job)

    async def _guard(
        self,
        what: str,
        body: Callable[[], Awaitable[None]],
        deadline_s: float | None = None,
        channel: ChannelRef | None = None,
    ) -> None:
        """Run a job body, tracked for ``idle()``; a failure is logged, shown on /healthz and retried.

        One line per failure; the traceback only with the first failure of an outage. The body is cancelled
        after ``deadline_s`` (default: the scheduler's ``job_deadline_s``), which counts as a failure.
        ``channel``: the job's channel; with a fan-out gate the body waits for its slot first (that wait
        does not count against the deadline: 1,500 posts due at once must not time out queueing).
        """
        if self.fanout is not None and channel is not None:
            task = asyncio.current_task()
            if task is not None:  # tracked while it waits too: idle() and tick() wait for queued jobs
                self._running.add(task)
                task.add_done_callback(self._running.discard)
            async with self.fanout.slot(channel.platform, channel.tenant.key):
                await self._guarded(what, body, deadline_s)
            return
        await self._guarded(what, body, deadline_s)

    async def _guarded(
        self, what: str, body: Callable[[], Awaitable[None]], deadline_s: float | None = None
    ) -> None:
        """:meth:`_guard`'s body: tracked, under the deadline, failures recorded."""
        limit = self._job_deadline_s if deadline_s is None else deadline_s
        # The job's log lines carry its id as their request id (a job runs in a task of its own).
        log_context(request_id=f"job:{what}")
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
            # Tracked until the task is done, not until this body returns: the job table counts the job's
            # instance until then, and a retry submitted earlier would be skipped as "still running".
            task.add_done_callback(self._running.discard)
            self._started[task] = (what, asyncio.get_running_loop().time(), limit)
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                await body()
        except TimeoutError as exc:
            if deadline.expired():
                # Cancelled by our deadline (the database or platform sent nothing back): a failure, retried.
                self._failed(what, JobDeadlineError(f"did not finish within its {limit:g} s deadline"))
            else:
                self._failed(what, exc)  # a driver's own timeout (connect, statement, pool)
        except Exception as exc:  # one channel's failure must not stop the others
            self._failed(what, exc)
        else:
            if self.failing.pop(what, None) is not None:
                log.warning("scheduled %s succeeded after %d failure(s)", what, self._failures.get(what, 0))
            self._failures.pop(what, None)
        finally:
            if task is not None:
                self._started.pop(task, None)

    def _failed(self, what: str, exc: Exception) -> None:
        count = self._failures.get(what, 0) + 1
        self._failures[what] = count
        error = describe_error(exc)
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
                channel = self._channels.get(channel_pk)
                if channel is not None:
                    self._window_channels[outcome.challenge_id] = channel
                self._window_jobs(outcome.challenge_id, outcome.closes_at, outcome.reminder_at)

        await self._guard(f"post:{channel_pk}", body, channel=self._channels.get(channel_pk))

    async def _close(self, challenge_id: int) -> None:
        async def body() -> None:
            card = await self._schedules.close_window(challenge_id)
            log.info("challenge %s closed%s", challenge_id, "" if card else " (already, elsewhere)")
            self._window_channels.pop(challenge_id, None)  # the window is over: no job of it is left

        await self._guard(f"close:{challenge_id}", body, channel=self._window_channels.get(challenge_id))

    async def _remind(self, challenge_id: int) -> None:
        async def body() -> None:
            await self._schedules.remind(challenge_id)

        await self._guard(f"remind:{challenge_id}", body, channel=self._window_channels.get(challenge_id))

    async def _summary(self, channel_pk: int) -> None:
        async def body() -> None:
            await self._schedules.weekly_summary(channel_pk)

        await self._guard(f"summary:{channel_pk}", body, channel=self._channels.get(channel_pk))

    async def _outbox(self) -> None:
        async def body() -> None:
            sent = await self._schedules.deliver_outbox(self._serves)
            if sent:
                log.info("outbox: %d queued post(s) delivered", sent)

        await self._guard("outbox", body)

    async def _send_nudges(self) -> None:
        nudge = self._nudge
        if nudge is None:
            return

        async def body() -> None:
            await nudge()

        # A batch over every player (one DM each, at the platform's pace): it has until its next run.
        await self._guard("nudge", body, self._nudge_interval_s)

    async def _fit_parameters(self) -> None:
        optimize = self._optimize
        if optimize is None:
            return

        async def body() -> None:
            await optimize()

        # One fit per player, each saved apart: it too has until its next run, a day later.
        await self._guard("optimize", body, self._optimize_interval_s)

    async def _sync(self) -> None:
        async def body() -> None:
            # Challenges that never got a closing time get one once no schedule can adopt them.
            await self._schedules.end_windowless()
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
        await self._schedules.end_windowless()
        for window in await self._schedules.open_windows():
            if window.closes_at <= now and self._serves(window.channel):
                await self._own_task(self._close(window.challenge_id))

    # ------------------------------------------------------------------ health
    def state(self) -> dict[str, Any]:
        """Scheduler state and next runs, for /healthz.

        ``running``: the job bodies running now and for how many seconds. ``stuck``: those among them
        past their deadline (cancelled, but not unwound: what a shutdown would have to abandon).
        """
        now = asyncio.get_running_loop().time()
        running: dict[str, float] = {}
        stuck: dict[str, dict[str, float]] = {}
        for what, since, limit in self._started.values():
            secs = round(now - since, 1)
            running[what] = max(running.get(what, 0.0), secs)
            if limit is not None and now - since > limit:
                stuck[what] = {"running_s": secs, "deadline_s": limit}
        return {
            "state": "running" if self.jobs.running else "stopped",
            "jobs": [
                {"id": j.id, "next_run": j.next_run_time.astimezone(dt.UTC).isoformat()}
                for j in self.jobs.jobs()
            ],
            "failing": dict(self.failing),
            "running": running,
            "stuck": stuck,
        }

    def next_run(self, job_id: str) -> dt.datetime | None:
        """When a job runs next (UTC), or None if there is no such job."""
        job = self.jobs.get(job_id)
        return job.next_run_time.astimezone(dt.UTC) if job is not None else None
