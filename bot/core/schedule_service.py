"""Schedule use cases: admins set, show and pause a channel's schedule; the scheduler's jobs call the rest.

Every call is one unit of work. Exactly-once is the database's job: the day's challenge is unique per
(channel, date) and created (claimed) before the platform call, closing is ``UPDATE ... WHERE
status='open'``, and reminders / weekly summaries insert a unique claim row before posting. Jobs that fire
twice, late, or in two processes at once therefore post once.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal

from bot.core.calendar import local_day
from bot.core.cards import ChallengeCard, LeaderboardCard, ResultsCard
from bot.core.errors import NotAdminError, NotFoundError, ScheduleConflictError
from bot.core.models import Actor, Challenge, ChannelRef, OpenWindow
from bot.core.outbox import summary_card, summary_payload
from bot.core.ports import ChatPlatform, Clock, UnitOfWork
from bot.core.schedule import (
    Schedule,
    ScheduleConfig,
    local_date,
    merge,
    next_slot,
    previous_slot,
    slot_on,
    window_end,
)
from bot.core.schedule_text import describe_schedule
from bot.core.service import QuizService
from bot.core.standings import PeriodKey
from bot.core.team_report import last_complete_week, team_report_title
from bot.core.tenancy import OutboundGate

log = logging.getLogger(__name__)

#: How often a schedule save reads again after another admin's save got in first.
SAVE_ATTEMPTS = 5


def config_changes(before: ScheduleConfig | None, after: ScheduleConfig | None) -> tuple[str, ...]:
    """What differs from ``before`` to ``after``, in words (``"paused"``, ``"time 09:00 -> 10:00"``)."""
    if before == after or after is None:
        return ()
    if before is None:
        return ("created: " + describe_schedule(after),)
    out: list[str] = []
    if (before.hour, before.minute) != (after.hour, after.minute):
        out.append(f"time {before.hour:02d}:{before.minute:02d} -> {after.hour:02d}:{after.minute:02d}")
    if before.paused != after.paused:
        out.append("paused" if after.paused else "resumed")
    for name in (
        "timezone",
        "days",
        "problems",
        "time_limit_s",
        "attempts",
        "window_minutes",
        "reminder_minutes",
        "summary_day",
        "team_report",
    ):
        old, new = getattr(before, name), getattr(after, name)
        if old != new:
            out.append(f"{name.replace('_', ' ')} {old} -> {new}")
    return tuple(out)


#: Default grace period for a post missed while no process was running.
DEFAULT_GRACE = dt.timedelta(hours=1)
#: A job that fires this late is on time (APScheduler wakes a little after the slot): even a grace period
#: of 0 posts then.
ON_TIME = dt.timedelta(minutes=1)
#: A question's time limit when neither it nor the schedule sets one (the bank schema's default): a late
#: post is skipped when its window leaves less than this.
QUESTION_TIME_LIMIT_S = 120
#: How long a challenge posted in a channel without a schedule stays open (``post-now``): a day, like the
#: default window of a daily schedule ("until the next post").
NO_SCHEDULE_WINDOW = dt.timedelta(hours=24)
#: The claim kind marking a schedule paused because its workspace removed the app (not by an admin): a
#: reinstall resumes exactly these.
SUSPENDED = "suspended"


@dataclass(frozen=True)
class TakenDay:
    """A day whose slot will post nothing: the channel has that day's challenge already."""

    day: dt.date
    challenge_id: int
    status: str


@dataclass(frozen=True)
class ScheduleView:
    """A schedule as shown to an admin, with its next post times."""

    schedule: Schedule
    next_posts: tuple[dt.datetime, ...]
    #: Slots before the last of ``next_posts`` that post nothing (the day's challenge exists already).
    taken: tuple[TakenDay, ...] = ()


@dataclass(frozen=True)
class PostOutcome:
    """What a scheduled post did: ``posted`` (or found already posted), ``skipped`` and why."""

    status: Literal["posted", "skipped"]
    reason: str
    challenge_id: int | None = None
    closes_at: dt.datetime | None = None
    reminder_at: dt.datetime | None = None


class ScheduleService:
    """Schedules and the scheduled side effects (post, remind, close, weekly summary)."""

    def __init__(
        self,
        uow_factory: Callable[[], UnitOfWork],
        clock: Clock,
        quiz: QuizService,
        platform: ChatPlatform | None = None,
        *,
        grace: dt.timedelta = DEFAULT_GRACE,
        default_timezone: str = "UTC",
        outbound: OutboundGate | None = None,
    ) -> None:
        self._uow = uow_factory
        #: RANKZERO_ALLOWED_TENANTS for scheduled posts (open when not given).
        self._outbound = outbound or OutboundGate()
        self._clock = clock
        self._quiz = quiz
        self._platform = platform
        self.grace = grace
        self._default_tz = default_timezone
        self._listeners: list[Callable[[], Awaitable[None]]] = []

    def subscribe(self, listener: Callable[[], Awaitable[None]]) -> None:
        """Call ``listener`` after every schedule change made through this service (the scheduler)."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[], Awaitable[None]]) -> None:
        """Stop calling ``listener``."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    async def _changed(self) -> None:
        for listener in list(self._listeners):
            await listener()

    # ------------------------------------------------------------------ admin
    async def set_schedule(
        self,
        actor: Actor,
        channel: ChannelRef,
        *,
        post_time: str | None = None,
        timezone: str | None = None,
        days: str | None = None,
        problems: int | None = None,
        time_limit_s: int | None = None,
        attempts: int | None = None,
        window: str | None = None,
        reminder: str | None = None,
        weekly_summary: str | None = None,
        team_report: str | None = None,
    ) -> Schedule:
        """Create or change a channel's schedule (admin). Unset arguments keep their stored value.

        Everything is validated before the transaction writes: a bad value raises ConfigurationError
        and the stored schedule is unchanged. ``window``: minutes/hours or ``next`` (until the next
        post); ``reminder`` / ``weekly_summary``: ``off`` to remove; 0 time limit/attempts: the question's;
        ``team_report``: ``on``/``off``, the weekly team report posted with the summary (needs its day).
        """
        _require_admin(actor)
        fallback_tz = channel.timezone if channel.timezone != "UTC" else self._default_tz

        def change(current: ScheduleConfig | None) -> ScheduleConfig:
            return merge(
                current,
                post_time=post_time,
                timezone=timezone,
                days=days,
                problems=problems,
                time_limit_s=time_limit_s,
                attempts=attempts,
                window=window,
                reminder=reminder,
                weekly_summary=weekly_summary,
                team_report=team_report,
                default_timezone=fallback_tz,
            )

        saved = await self._save(channel, change, require_existing=False)
        log.info("schedule of %s set: %s", channel.channel_id, saved.config)
        await self._changed()
        return saved

    async def _save(
        self,
        channel: ChannelRef,
        change: Callable[[ScheduleConfig | None], ScheduleConfig],
        *,
        require_existing: bool,
        release_suspension: bool = False,
    ) -> Schedule:
        """Read the channel's schedule, apply ``change`` and save it if nobody saved in between (its
        version); else read again, apply ``change`` to what the other admin saved, and report what they
        changed in ``changed_meanwhile``: two admins saving at once both keep their change, and a pause
        is never silently undone.
        """
        seen: ScheduleConfig | None = None
        first = True
        for _ in range(SAVE_ATTEMPTS):
            try:
                async with self._uow() as uow:
                    channel_pk = await uow.players.ensure_channel(channel)
                    current = await uow.schedules.get_schedule(channel_pk)
                    if current is None and require_existing:
                        raise NotFoundError(
                            "this channel has no schedule: set one first (schedule set --time 09:00)"
                        )
                    if first:
                        seen, first = (current.config if current else None), False
                    if release_suspension:
                        # An admin's pause or resume is the decision from now on: a removal's mark, if
                        # one was left, no longer applies (a reinstall must not resume what they paused).
                        await uow.schedules.release(SUSPENDED, str(channel_pk))
                    config = change(current.config if current else None)
                    saved = await uow.schedules.save_schedule(
                        channel_pk, config, self._clock.now(), current.version if current else 0
                    )
            except ScheduleConflictError as exc:
                log.info("schedule of %s: %s; reading it again", channel.channel_id, exc)
                continue
            meanwhile = config_changes(seen, current.config if current else None)
            return replace(saved, changed_meanwhile=meanwhile)
        raise ScheduleConflictError(
            "other admins kept saving this channel's schedule at the same time: look at it "
            "(schedule show) and try again"
        )

    async def pause_schedule(self, actor: Actor, channel: ChannelRef, paused: bool = True) -> Schedule:
        """Pause (or resume) a channel's schedule (admin); open challenges still close on time."""
        _require_admin(actor)

        def change(current: ScheduleConfig | None) -> ScheduleConfig:
            assert current is not None
            return replace(current, paused=paused)

        saved = await self._save(channel, change, require_existing=True, release_suspension=True)
        await self._changed()
        return saved

    async def suspend_workspace(self, actor: Actor, platform: str, workspace_id: str) -> list[Schedule]:
        """Pause every running schedule of a workspace that removed the app (uninstalled, token revoked);
        the schedules paused here, each marked as paused by the removal so that a reinstall resumes it.

        Schedules an admin had paused stay as they were and are not marked: a reinstall leaves them paused.
        A second removal event (Slack sends ``tokens_revoked`` and ``app_uninstalled``) finds nothing
        running and changes nothing. Open challenges still close on time.
        """
        _require_admin(actor)
        now = self._clock.now()
        paused: list[Schedule] = []
        async with self._uow() as uow:
            for schedule in await uow.schedules.list_schedules():
                ch = schedule.channel
                if (ch.platform, ch.workspace_id) != (platform, workspace_id) or schedule.config.paused:
                    continue
                await uow.schedules.claim(SUSPENDED, str(schedule.channel_pk), now)
                saved = await _save_paused(uow, schedule, True, now)
                if saved is not None:
                    paused.append(saved)
        for schedule in paused:
            log.warning(
                "%s workspace %s removed the app: paused the schedule of %s",
                platform,
                workspace_id,
                schedule.channel.channel_id,
            )
        if paused:
            await self._changed()
        return paused

    async def resume_workspace(self, actor: Actor, platform: str, workspace_id: str) -> list[Schedule]:
        """Resume the schedules of a workspace that installed the app again, those its removal paused
        (:meth:`suspend_workspace`), not those an admin paused; the schedules resumed.

        Each resume takes the removal's mark away in the same transaction, so it happens once even when
        two installs race; the next post is at the schedule's next slot.
        """
        _require_admin(actor)
        now = self._clock.now()
        resumed: list[Schedule] = []
        async with self._uow() as uow:
            for schedule in await uow.schedules.list_schedules():
                ch = schedule.channel
                if (ch.platform, ch.workspace_id) != (platform, workspace_id):
                    continue
                if not await uow.schedules.release(SUSPENDED, str(schedule.channel_pk)):
                    continue
                if schedule.config.paused:
                    saved = await _save_paused(uow, schedule, False, now)
                    if saved is not None:
                        resumed.append(saved)
        for schedule in resumed:
            log.warning(
                "%s workspace %s installed the app again: resumed the schedule of %s",
                platform,
                workspace_id,
                schedule.channel.channel_id,
            )
        if resumed:
            await self._changed()
        return resumed

    async def show_schedule(self, channel: ChannelRef, upcoming: int = 3) -> ScheduleView | None:
        """A channel's schedule and its next ``upcoming`` post times (none while paused)."""
        async with self._uow() as uow:
            channel_pk = await uow.players.ensure_channel(channel)
            schedule = await uow.schedules.get_schedule(channel_pk)
            if schedule is None:
                return None
            posts: list[dt.datetime] = []
            taken: list[TakenDay] = []
            at = self._clock.now()
            # A slot on a day that has its challenge already (posted, or opened by `rankzero play` and
            # closed) posts nothing (post_scheduled says "already posted"): it is not promised as a post.
            # Only the first slots can be such days; the bound keeps a corrupt table from looping.
            while not schedule.config.paused and len(posts) < upcoming and len(taken) < 8:
                at = next_slot(schedule.config, at)
                existing = await uow.challenges.get_challenge(channel_pk, local_date(schedule.config, at))
                if existing is not None and (existing.closes_at is not None or existing.status != "open"):
                    taken.append(TakenDay(existing.day, existing.id, existing.status))
                else:
                    posts.append(at)
        return ScheduleView(schedule, tuple(posts), tuple(taken))

    # ------------------------------------------------------------------ reads for the scheduler
    async def schedules(self) -> list[Schedule]:
        """Every stored schedule."""
        async with self._uow() as uow:
            return await uow.schedules.list_schedules()

    async def open_windows(self) -> list[OpenWindow]:
        """Every open challenge with a closing time, and its channel."""
        async with self._uow() as uow:
            return await uow.challenges.open_windows()

    async def end_windowless(self) -> list[int]:
        """Give a closing time to open challenges that never got one and never will; their ids.

        A challenge opened without a window (``rankzero play`` before the day's post, or ``post-now``
        without a schedule in versions before windows were given to every post) is adopted by its
        schedule's slot on its own day, within the grace period. Once that cannot happen any more
        (:data:`NO_SCHEDULE_WINDOW` and the grace period after it opened), it gets the window a
        post-now without a schedule gets, counted from when it opened, so the scheduler closes it and
        posts its results like any other. ``adopt_window`` writes only where there is no closing time
        yet: two processes, or a schedule's adoption at the same moment, give it one window.
        """
        now = self._clock.now()
        ended: list[int] = []
        async with self._uow() as uow:
            for challenge_id, opened_at in await uow.challenges.windowless():
                closes_at = opened_at + NO_SCHEDULE_WINDOW
                if now - closes_at >= max(self.grace, ON_TIME) and await uow.challenges.adopt_window(
                    challenge_id, closes_at
                ):
                    ended.append(challenge_id)
        for challenge_id in ended:
            log.warning("challenge %s had no closing time: it gets one and closes now", challenge_id)
        return ended

    async def _schedule(self, channel_pk: int) -> Schedule | None:
        async with self._uow() as uow:
            return await uow.schedules.get_schedule(channel_pk)

    @staticmethod
    def reminder_at(schedule: Schedule | None, closes_at: dt.datetime) -> dt.datetime | None:
        """When to remind before ``closes_at`` under this schedule (None: no reminder)."""
        if schedule is None or schedule.config.reminder_minutes is None:
            return None
        return closes_at - dt.timedelta(minutes=schedule.config.reminder_minutes)

    # ------------------------------------------------------------------ scheduled side effects
    async def post_scheduled(self, channel_pk: int) -> PostOutcome:
        """Post the challenge of the channel's latest slot, unless paused or later than the grace period.

        Called by the channel's cron job at its slot, and at start for a post missed while down. The
        challenge row is the claim: another process or a retried job finds it and posts nothing.
        """
        now = self._clock.now()
        schedule = await self._schedule(channel_pk)
        if schedule is None or schedule.config.paused:
            return PostOutcome("skipped", "no schedule" if schedule is None else "paused")
        if not self._outbound.permits(schedule.channel.tenant):
            # Dropped from the allow-list: no challenge is even opened there (the platform would refuse
            # its post too); the schedule stays, so listing the tenant again resumes it.
            return PostOutcome("skipped", "its tenant is not in RANKZERO_ALLOWED_TENANTS")
        cfg = schedule.config
        slot = previous_slot(cfg, now)
        if slot is None:
            return PostOutcome("skipped", "no slot in the past week")
        day = local_date(cfg, slot)
        async with self._uow() as uow:
            existing = await uow.challenges.get_challenge(channel_pk, day)
        if existing is not None and existing.closes_at is not None:
            # Posted already (another process, this job before a restart, an admin's post-now), or queued
            # in the outbox (a crash between creating it and posting it): nothing was missed, whatever the
            # time is now; the outbox delivers what is queued.
            closes = existing.closes_at
            said = "already posted" if existing.message_ref else "queued: the outbox posts it"
            return PostOutcome("posted", said, existing.id, closes, self.reminder_at(schedule, closes))
        late = now - slot
        closes_at = window_end(cfg, slot)
        # The window counts from the slot, not from now: a late post whose window is (nearly) over would
        # open and close at once. It must leave at least one problem's time limit to play.
        needed = dt.timedelta(seconds=cfg.time_limit_s or QUESTION_TIME_LIMIT_S)
        if late > max(self.grace, ON_TIME):
            why = f"{late} late, beyond the {self.grace} grace period"
        elif late > ON_TIME and closes_at - now < needed:
            # Only a late post can find its window nearly over: on time, the window is what the admin chose.
            why = f"{late} late, its window ends at {closes_at.isoformat()} (less than {needed} left)"
        else:
            why = ""
        if why:
            # A slot before the schedule was set (or last changed) was never due: not a missed post.
            before = slot < schedule.updated_at
            log.log(
                logging.INFO if before else logging.WARNING,
                "%s post of channel %s at %s: %s; skipped",
                "no" if before else "missed",
                schedule.channel.channel_id,
                slot.isoformat(),
                "it came before the schedule was set" if before else why,
            )
            return PostOutcome("skipped", "before the schedule was set" if before else f"missed: {why}")
        if existing is not None:
            return await self._adopt(schedule, existing, closes_at)
        card = await self._quiz.post_daily(
            schedule.channel,
            day,
            closes_at=closes_at,
            problems=cfg.problems,
            time_limit_s=cfg.time_limit_s,
            attempts=cfg.attempts,
        )
        # An existing challenge (posted by another process meanwhile) keeps its own window.
        window = card.closes_at
        return PostOutcome(
            "posted",
            "late, within grace" if late > ON_TIME else "on time",
            card.challenge_id,
            window,
            self.reminder_at(schedule, window) if window else None,
        )

    async def _adopt(self, schedule: Schedule, challenge: Challenge, closes_at: dt.datetime) -> PostOutcome:
        """The day's challenge was opened without a window (``rankzero play`` before the post): it gets the
        schedule's window and is posted now, by the one caller that gave it the window.
        """
        item_id: int | None = None
        async with self._uow() as uow:
            adopted = await uow.challenges.adopt_window(challenge.id, closes_at)
            if adopted:
                # Its post is queued with the window, in one transaction: a refused post is retried and
                # told to the admins by the outbox, not lost (nobody would post it again: it has a window).
                item_id = await self._quiz.outbox.queue(
                    uow, replace(challenge, closes_at=closes_at), "challenge"
                )
        if not adopted:  # another process adopted it first
            async with self._uow() as uow:
                current = await uow.challenges.get_challenge_by_id(challenge.id)
            closes = current.closes_at if current is not None else None
            reminder = self.reminder_at(schedule, closes) if closes else None
            return PostOutcome("posted", "already posted", challenge.id, closes, reminder)
        log.info("challenge %s, opened by play, gets the schedule's window until %s", challenge.id, closes_at)
        if item_id is not None:
            # Delivered now; a failure stays queued (the outbox job retries it). The challenge is kept
            # whatever happens: players who opened it with `play` have played it already.
            await self._quiz.outbox.deliver(item_id)
        return PostOutcome(
            "posted",
            "opened earlier; given the schedule's window",
            challenge.id,
            closes_at,
            self.reminder_at(schedule, closes_at),
        )

    async def post_now(self, actor: Actor, channel: ChannelRef) -> ChallengeCard:
        """Post today's challenge of ``channel`` now (admin), with the channel's schedule settings.

        With a schedule, the challenge gets the schedule's window from now (its closing time, so the
        scheduler closes it and posts results), its problem count and time limit / attempts overrides;
        the day is the schedule's local date, so the day's scheduled post finds it and posts nothing
        twice. Without a schedule it stays open :data:`NO_SCHEDULE_WINDOW` (``close-now`` closes it
        earlier): every posted challenge has an end, at which the scheduler closes it and posts its
        results. Already posted today: returned as is.
        """
        _require_admin(actor)
        now = self._clock.now()
        async with self._uow() as uow:
            schedule = await uow.schedules.get_schedule(await uow.players.ensure_channel(channel))
        if schedule is None:
            card = await self._quiz.post_daily(channel, closes_at=now + NO_SCHEDULE_WINDOW)
            await self._changed()  # the scheduler arms its close job at once
            return card
        cfg = schedule.config
        day = local_date(cfg, now)
        # Posted early, before today's slot: the challenge is the day's challenge, so it gets the day's
        # whole window (counted from the slot), not a window ending at the slot itself.
        todays_slot = slot_on(cfg, day)
        opens = todays_slot if day.isoweekday() in cfg.days and todays_slot > now else now
        card = await self._quiz.post_daily(
            schedule.channel,
            day,
            closes_at=window_end(cfg, opens),
            problems=cfg.problems,
            time_limit_s=cfg.time_limit_s,
            attempts=cfg.attempts,
        )
        # The scheduler (subscribed) arms the close and reminder jobs of the new window at once.
        await self._changed()
        return card

    async def close_window(self, challenge_id: int) -> ResultsCard | None:
        """Close a challenge whose window ended; results are posted by the one call that closes it."""
        return await self._quiz.close_challenge(challenge_id)

    async def remind(self, challenge_id: int) -> bool:
        """Post the closing reminder once (claimed in the database); False if claimed or closed."""
        now = self._clock.now()
        async with self._uow() as uow:
            challenge = await uow.challenges.get_challenge_by_id(challenge_id)
            if challenge is None or challenge.status != "open" or challenge.closes_at is None:
                return False
            if now >= challenge.closes_at or not await uow.schedules.claim(
                "reminder", str(challenge_id), now
            ):
                return False
            # Queued with its claim: a failed post (or a crash) leaves it to the outbox, not lost.
            item_id = await self._quiz.outbox.queue(uow, challenge, "reminder")
        if item_id is not None:
            await self._quiz.outbox.deliver(item_id)
        return True

    async def deliver_outbox(self, serves: Callable[[ChannelRef], bool] | None = None) -> int:
        """Deliver the queued posts that are due (the channels this process ``serves``); how many went
        out now. A post another process holds is left to it.
        """
        done = await self._quiz.outbox.drain(serves)
        return sum(1 for d in done if d.status == "sent")

    async def weekly_summary(self, channel_pk: int) -> LeaderboardCard | None:
        """Post the channel's leaderboard of the week before the summary day (local), once per week, and
        the week's team report with it where the channel opted in (a post of its own, once per week too);
        the summary's card, None when it was not this call's to post.

        Called by the weekly job at its slot, and at start: a summary missed while no process ran is
        made up within the grace period; an older one is not (the next week's comes as usual). Each post
        is claimed and queued in the outbox in one transaction, so a job run twice, late or in two
        processes posts each once, and a refused post is retried and told to the admins, not lost.
        """
        now = self._clock.now()
        card: LeaderboardCard | None = None
        queued: list[int | None] = []
        async with self._uow() as uow:
            schedule = await uow.schedules.get_schedule(channel_pk)
            week_day = self._summary_week(schedule, now)
            if schedule is None or week_day is None:
                return None
            week = PeriodKey.week(week_day)
            key = f"{channel_pk}:{week.key}"
            # Each post is queued under the key its claim took (the outbox dedups on it too).
            summary_key = await _claim_week(uow, "summary", key, week_day, schedule, now)
            if summary_key is not None:
                title = f"Weekly summary · {week.label}"
                card = await summary_card(uow, channel_pk, summary_payload(title, week_day))
                queued.append(
                    await self._quiz.outbox.queue_summary(
                        uow, schedule.channel, channel_pk, title, week_day, summary_key
                    )
                )
            # Claimed apart from the summary: a report turned on after this week's summary went out, and
            # before a restart within grace, is still posted once.
            report_key = (
                await _claim_week(uow, "team_report", key, week_day, schedule, now)
                if schedule.config.team_report
                else None
            )
            if report_key is not None:
                queued.append(
                    await self._quiz.outbox.queue_summary(
                        uow,
                        schedule.channel,
                        channel_pk,
                        team_report_title(week_day),
                        week_day,
                        report_key,
                        kind="team_report",
                    )
                )
        for item_id in queued:
            if item_id is not None:
                await self._quiz.outbox.deliver(item_id)
        return card

    def _summary_week(self, schedule: Schedule | None, now: dt.datetime) -> dt.date | None:
        """A day of the week the weekly posts due now cover (None: none are due: no schedule, paused,
        no summary day, or its slot is older than the grace period).

        The summary runs on its day at the post time: it covers the last complete ISO week (Monday to
        Sunday) before the slot's local day, whatever the summary day: a Monday summary (the default
        suggestion) reports the week just ended, a Wednesday one the same week (never the Monday and
        Tuesday of the week still running, which would leave Wednesday to Sunday out of every report).
        From the slot, not from now: a summary made up after midnight still reports the same week.
        """
        if schedule is None or schedule.config.paused or schedule.config.summary_day is None:
            return None
        cfg = schedule.config
        slot = previous_slot(replace(cfg, days=(schedule.config.summary_day,)), now)
        if slot is None or now - slot > max(self.grace, ON_TIME):
            return None
        return last_complete_week(local_date(cfg, slot))


async def _claim_week(
    uow: UnitOfWork, kind: str, key: str, week_day: dt.date, schedule: Schedule, now: dt.datetime
) -> str | None:
    """Claim the weekly post ``kind`` of the week of ``week_day``; the key claimed (the outbox item is
    queued under it), None when the post is not this call's to make.

    ``key`` names the channel and the week reported (its ISO key), not the slot: a post made up late, a
    second process, or an admin moving the summary day to another weekday never posts one week twice.

    Before the "last complete week" rule, a summary day other than Monday claimed the week still
    running under the same key, for a report of its first days only. Such a claim, made before the week
    it names ended (local time), does not stand for the week: the complete post is claimed once more under
    ``key:complete`` instead, so the week is neither skipped at the change (its Wednesday to Sunday
    would be in no post) nor posted complete twice (that second key is claimed once, too). A claim made
    by this rule is always made after its week ended, so it never reaches the fallback.
    """
    if await uow.schedules.claim(kind, key, now):
        return key
    claimed = await uow.schedules.claimed_at(kind, key)
    week_end = week_day + dt.timedelta(days=7)  # the Monday after the week, local
    if claimed is None or local_day(claimed, schedule.config.timezone) >= week_end:
        return None
    complete = f"{key}:complete"
    return complete if await uow.schedules.claim(kind, complete, now) else None


def _require_admin(actor: Actor) -> None:
    if not actor.is_admin:
        raise NotAdminError("only admins can change the schedule: ask a server/workspace admin")


#: How often a system pause or resume re-reads a schedule an admin saved in between before giving up.
_SYSTEM_SAVE_TRIES = 5


async def _save_paused(
    uow: UnitOfWork, schedule: Schedule, paused: bool, now: dt.datetime
) -> Schedule | None:
    """Set only ``paused`` on ``schedule`` as read, naming its version: an admin's save committed between
    the read and this write is re-read and kept (the pause goes on top of it), never overwritten by the
    stale copy. None when the schedule was deleted meanwhile.
    """
    for _ in range(_SYSTEM_SAVE_TRIES):
        try:
            return await uow.schedules.save_schedule(
                schedule.channel_pk,
                replace(schedule.config, paused=paused),
                now,
                expected_version=schedule.version,
            )
        except ScheduleConflictError:
            fresh = await uow.schedules.get_schedule(schedule.channel_pk)
            if fresh is None:
                return None
            schedule = fresh
    raise ScheduleConflictError(f"the schedule of channel {schedule.channel_pk} kept changing; try again")
