"""The outbox: every outgoing post (the daily post, also of a challenge ``play`` opened before its slot;
its reminder; its results; a channel's weekly summary and team report; the admins' notice of a question a
dispute flagged) is a row written in the transaction of the state change that causes it, and marked sent only
after the platform accepted it. A post of several messages records each accepted one (bot/core/parts.py),
so a retry sends only the rest.

Why: a close committed before its results were posted used to lose them for good when the post failed
(the retry found the challenge "already closed"), and a crash between creating the day's challenge and
posting it lost the day's post. Now the row survives both: a sender delivers it whenever it can.

Delivering one row (:meth:`Outbox.deliver`):

1. claim it: one conditional UPDATE takes it for a lease (``lease_s``), so one sender at a time holds it,
   across processes, on PostgreSQL and SQLite (bot/storage/repositories/outbox.py);
2. build the card from the stored challenge (results as they stand at the close, with the correction notes
   the close took) and skip what can no longer succeed or matter (a reminder for a challenge that closed,
   the post of a challenge that closed);
3. call the platform (outside any transaction);
4. mark it sent (the daily post's message reference saved with it, in one transaction); or record the
   failure: retried with exponential backoff (``retry_base_s`` doubling up to ``retry_max_s``), the
   admins told once per cause (the cause is kept in the row, so a restart or another process does not
   tell again), and given up only after ``give_up_s``, with a last notice to the admins.

A sender killed between 1 and 4 leaves the row pending: once its lease ends the next sender (the
scheduler's ``outbox`` job in any process, or a restart) delivers it. A sender that dies after the platform
accepted the post and before step 4 commits leaves no record of the post in the row: step 3 therefore marks
every message with the row's idempotency mark (:class:`bot.core.parts.PostMark`: Slack stores it as the
message's metadata, Discord as its nonce), and a try of a row claimed before (its claim, committed before
the send, is the record that an attempt started) is ``uncertain``: the adapter first looks for the mark in
the channel's recent messages and, when it finds it, takes that message as the post instead of posting
again. What remains (a lookup the platform refuses or that does not see the message yet) is in the
adapters' docs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from bot.core import parts
from bot.core.cards import ChallengeCard, DeliveryNotice, LeaderboardCard, ReminderCard, ResultsCard
from bot.core.disputes import AdminNotice
from bot.core.errors import RankZeroError
from bot.core.models import Challenge, ChannelRef, Tenant
from bot.core.ports import AlreadyExistsError, ChatPlatform, Clock, UnitOfWork
from bot.core.repositories.outbox import OutboxItem, OutboxKind
from bot.core.standings import PeriodKey, ScopeKey
from bot.core.team_report import team_report_card
from bot.core.vocabulary import Period, Scope

log = logging.getLogger(__name__)

#: Defaults (settings: RANKZERO_OUTBOX_*).
LEASE_S = 120.0
RETRY_BASE_S = 30.0
RETRY_MAX_S = 30 * 60.0
GIVE_UP_S = 24 * 3600.0
#: Rows delivered per pass of :meth:`Outbox.drain`.
DRAIN_BATCH = 50
#: Due rows read per page while looking for this process's own (another shard's rows are skipped), and at
#: most this many pages per pass: a dead shard's backlog cannot hide this process's rows.
DRAIN_PAGE = 200
DRAIN_MAX_PAGES = 20
#: A send may use this share of the lease: a sender never holds a post past its lease (the next sender
#: would post it again), so the platform call is cut off first and counts as a failed try.
SEND_SHARE_OF_LEASE = 0.8
#: The payload key of a post in parts' split digest (bot/core/parts.py): recorded with its count.
PARTS_DIGEST = "parts_digest"
#: Finished rows (sent or given up) are kept this long for the record, then deleted, at most
#: ``PURGE_BATCH`` per pass: the table holds weeks of posts, not years.
KEEP_FINISHED = dt.timedelta(days=30)
PURGE_BATCH = 500
#: Players a weekly summary lists.
SUMMARY_TOP = 10


@dataclass(frozen=True)
class OutboxTiming:
    """How long a sender holds a post (``lease_s``: longer than one platform call can take), the backoff
    between tries, and when a post is given up (counted from when it was queued).
    """

    lease_s: float = LEASE_S
    retry_base_s: float = RETRY_BASE_S
    retry_max_s: float = RETRY_MAX_S
    give_up_s: float = GIVE_UP_S


@dataclass(frozen=True)
class Delivery:
    """What one delivery did: ``sent``; ``retrying`` (failed, due again at ``retry_at``); ``gave_up``;
    ``skipped`` (it could no longer matter); ``busy`` (another sender holds it, or it is done already).
    """

    status: Literal["sent", "retrying", "gave_up", "skipped", "busy"]
    cause: str | None = None
    retry_at: dt.datetime | None = None
    message_ref: str | None = None


def cause_of(exc: BaseException) -> str:
    """The failure in one line an admin can act on: a domain refusal (the platform adapters translate
    theirs, with what to do) as is; anything else by type and first line.
    """
    text = str(exc).strip()
    if isinstance(exc, RankZeroError):
        return text[:300] or type(exc).__name__
    if not text and isinstance(exc, TimeoutError):
        text = "the platform did not answer in time"
    return f"{type(exc).__name__}: {text}".splitlines()[0][:300]


class OutboxExpiredError(RankZeroError):
    """A post past its give-up time when a sender claims it again (see :meth:`Outbox.deliver`)."""

    def __init__(self, tries: int, last_error: str | None) -> None:
        last = last_error or "none recorded (the sender stopped before the platform answered: a crash?)"
        super().__init__(
            f"not delivered within the give-up time after {tries} tries; the last failure: {last}. Check the "
            "bot's log and the platform's status"
        )


ResultsBuilder = Callable[[UnitOfWork, Challenge], Awaitable[ResultsCard]]
CardBuilder = Callable[[Challenge], ChallengeCard]


class Outbox:
    """Queues posts in the caller's transaction and delivers them (see the module doc)."""

    def __init__(
        self,
        uow_factory: Callable[[], UnitOfWork],
        clock: Clock,
        platform: ChatPlatform | None,
        *,
        results: ResultsBuilder,
        challenge_card: CardBuilder,
        timing: OutboxTiming | None = None,
    ) -> None:
        """``results`` / ``challenge_card``: how the quiz service builds those cards from a challenge."""
        self._uow = uow_factory
        self._clock = clock
        self.platform = platform
        self._results = results
        self._challenge_card = challenge_card
        self.timing = timing or OutboxTiming()

    @property
    def enabled(self) -> bool:
        """Whether there is a platform to deliver to (no platform: nothing is queued)."""
        return self.platform is not None

    async def queue(
        self,
        uow: UnitOfWork,
        challenge: Challenge,
        kind: OutboxKind,
        payload: dict[str, Any] | None = None,
        *,
        key: str | None = None,
    ) -> int | None:
        """Queue ``kind`` for ``challenge`` in the caller's transaction ``uow``; its id (the existing one
        when it was queued before), or None when there is no platform. ``key``: what makes the post
        unique among its kind (default: the challenge; an admin notice: its flag).
        """
        return await self._add(
            uow, challenge.channel.tenant, challenge.channel_pk, challenge.id, kind, payload or {}, key
        )

    async def queue_summary(
        self,
        uow: UnitOfWork,
        channel: ChannelRef,
        channel_pk: int,
        title: str,
        week_day: dt.date,
        key: str,
        kind: Literal["summary", "team_report"] = "summary",
    ) -> int | None:
        """Queue the weekly summary (or, ``kind``, the team report) of ``channel`` (the week of
        ``week_day``) in the caller's transaction, once per ``key`` (the channel and week); its id, or
        None when there is no platform.
        """
        payload = summary_payload(title, week_day)
        return await self._add(uow, channel.tenant, channel_pk, None, kind, payload, key)

    async def _add(
        self,
        uow: UnitOfWork,
        tenant: Tenant,
        channel_pk: int,
        challenge_id: int | None,
        kind: OutboxKind,
        payload: dict[str, Any],
        key: str | None,
    ) -> int | None:
        if self.platform is None:
            return None
        try:
            return await uow.outbox.add(
                tenant, channel_pk, challenge_id, kind, payload, self._clock.now(), key=key
            )
        except AlreadyExistsError:
            found = await uow.outbox.find(challenge_id, kind, key=key)
            return found.id if found is not None else None

    async def deliver(self, item_id: int, *, now_due: bool = False, reraise: bool = False) -> Delivery:
        """Deliver one queued post if no other sender holds it (the module doc's steps).

        ``now_due``: try it now even when its next try is later (an admin's post-now after a fix).
        ``reraise``: a platform failure is recorded as usual and then raised (the daily post's caller
        removes a challenge nobody saw); otherwise it is returned as ``retrying`` / ``gave_up``.
        """
        now = self._clock.now()
        async with self._uow() as uow:
            item = await uow.outbox.claim(
                item_id, now, now + dt.timedelta(seconds=self.timing.lease_s), any_time=now_due
            )
            if item is None:
                return Delivery("busy")
            challenge: Challenge | None = None
            if item.challenge_id is not None:
                challenge = await uow.challenges.get_challenge_by_id(item.challenge_id)
                if challenge is None:
                    return Delivery("busy")
            channel = challenge.channel if challenge is not None else item.channel
            if channel is None:  # the channel row is gone (its cascade deletes the row too)
                return Delivery("busy")
            about = _About.of(item, challenge)
            skip = self._pointless(item, challenge, now)
            if skip is None:
                card: Any = await self._card(uow, item, challenge)
            else:
                await uow.outbox.mark_failed(item.id, skip, item.told, None, attempt=item.attempts)
        if skip is not None:
            log.info("outbox: %s of %s skipped: %s", item.kind, about.label, skip)
            return Delivery("skipped", skip)
        if item.attempts > 1 and self._expired(item, now):
            # Past its give-up time: not tried again. Checked here, before the send, and not only when a
            # send fails: a sender that crashes mid-send never reaches _failed, and without this check the
            # row would be claimed and sent forever. The admins get the last notice.
            return await self._failed(
                item, channel, about, OutboxExpiredError(item.attempts - 1, item.last_error)
            )
        assert self.platform is not None
        try:
            async with asyncio.timeout(self.timing.lease_s * SEND_SHARE_OF_LEASE):
                ledger = parts.PartLedger(
                    item.parts_sent, self._part_recorder(item), item.payload.get(PARTS_DIGEST)
                )
                with parts.ledger(ledger), parts.marked(post_mark(item)):
                    ref = await self._send(channel, challenge, item, card)
        except asyncio.CancelledError:
            # Cancelled (a job deadline, shutdown): release the claim for an early retry, so the row does
            # not wait out the lease; recorded even though this task is being cancelled.
            await asyncio.shield(self._release(item))
            raise
        except parts.LeaseLostError:
            # Another sender took the post over (this one outlived its lease): the rest is theirs.
            log.warning("outbox: %s of %s taken over by another sender mid-send", item.kind, about.label)
            return Delivery("busy")
        except Exception as exc:
            delivery = await self._failed(item, channel, about, exc)
            if reraise:
                raise
            return delivery
        async with self._uow() as uow:
            await uow.outbox.mark_sent(item.id, self._clock.now(), ref, attempt=item.attempts)
            if item.kind == "challenge" and ref is not None and challenge is not None:
                await uow.challenges.set_message_ref(challenge.id, ref)
        if item.attempts > 1:
            log.warning("outbox: %s of %s sent at try %d", item.kind, about.label, item.attempts)
        return Delivery("sent", message_ref=ref)

    def _part_recorder(self, item: OutboxItem) -> Callable[[int, str], Awaitable[bool]]:
        """How a post in several messages records each accepted one (fenced by this claim's try)."""

        async def record(count: int, digest: str) -> bool:
            payload = {**item.payload, PARTS_DIGEST: digest}
            async with self._uow() as uow:
                return await uow.outbox.mark_parts(item.id, count, attempt=item.attempts, payload=payload)

        return record

    async def deliver_pending(self, challenge_id: int, kind: OutboxKind) -> Delivery | None:
        """Deliver ``kind`` of a challenge now if it is still queued (not sent, not given up), whatever its
        next try says; None when there is nothing pending. For a console close run again: the results an
        earlier close queued but could not print (a failure, the process stopped) print now.
        """
        async with self._uow() as uow:
            item = await uow.outbox.find(challenge_id, kind)
        if item is None or item.status != "pending":
            return None
        return await self.deliver(item.id, now_due=True)

    async def drain(self, serves: Callable[[ChannelRef], bool] | None = None) -> list[Delivery]:
        """Deliver every due post of the channels this process ``serves`` (None: all); what each did.

        Run by the scheduler's ``outbox`` job and at its start. A row another process holds is skipped
        (``busy``), so several processes draining together send each post once.
        """
        done: list[Delivery] = []
        now = self._clock.now()
        async with self._uow() as uow:
            purged = await uow.outbox.purge(now - KEEP_FINISHED, PURGE_BATCH)
        if purged:
            log.info("outbox: %d finished post(s) older than %d days deleted", purged, KEEP_FINISHED.days)
        mine: list[int] = []
        # Page past rows of channels another process serves (another shard's, maybe a dead one's backlog)
        # until this pass has its batch; bounded, so a huge backlog costs a bounded read per pass.
        for page in range(DRAIN_MAX_PAGES):
            async with self._uow() as uow:
                due = await uow.outbox.due(now, DRAIN_PAGE, offset=page * DRAIN_PAGE)
            mine += [item_id for item_id, channel in due if serves is None or serves(channel)]
            if len(mine) >= DRAIN_BATCH or len(due) < DRAIN_PAGE:
                break
        for item_id in mine[:DRAIN_BATCH]:
            done.append(await self.deliver(item_id))
        return done

    # ------------------------------------------------------------------ the steps
    @staticmethod
    def _pointless(item: OutboxItem, challenge: Challenge | None, now: dt.datetime) -> str | None:
        """Why sending ``item`` now could no longer matter (None: send it)."""
        if challenge is None:
            return None
        if item.kind == "reminder" and (
            challenge.status != "open" or (challenge.closes_at is not None and now >= challenge.closes_at)
        ):
            return "the challenge closed before its reminder could be posted"
        if item.kind == "challenge" and challenge.status != "open":
            return "the challenge closed before it could be posted (its results say so)"
        return None

    async def _card(self, uow: UnitOfWork, item: OutboxItem, challenge: Challenge | None) -> Any:
        if item.kind == "summary":
            return await summary_card(uow, item.channel_pk, item.payload)
        if item.kind == "team_report":
            return await team_report_card(uow, item.tenant, item.channel_pk, item.payload)
        if item.kind == "notice":
            return admin_notice_from(item.payload)
        assert challenge is not None  # the other kinds belong to a challenge
        if item.kind == "results":
            card = await self._results(uow, challenge)
            return dataclasses.replace(card, notes=tuple(str(n) for n in item.payload.get("notes", ())))
        if item.kind == "reminder":
            assert challenge.closes_at is not None
            return ReminderCard(challenge.id, challenge.title, challenge.day, challenge.closes_at)
        return self._challenge_card(challenge)

    async def _send(
        self, channel: ChannelRef, challenge: Challenge | None, item: OutboxItem, card: Any
    ) -> str | None:
        assert self.platform is not None
        message_ref = challenge.message_ref if challenge is not None else None
        if item.kind == "results":
            await self.platform.post_results(channel, card, message_ref)
            return None
        if item.kind == "reminder":
            await self.platform.post_reminder(channel, card, message_ref)
            return None
        if item.kind == "summary":
            await self.platform.post_weekly_summary(channel, card)
            return None
        if item.kind == "team_report":
            await self.platform.post_team_report(channel, card)
            return None
        if item.kind == "notice":
            await self.platform.post_admin_notice(card, channel)
            return None
        return await self.platform.post_challenge(channel, card)

    def retry_delay(self, tries: int) -> dt.timedelta:
        """How long after its ``tries``-th failed try a post is tried again."""
        # The exponent is capped: 2 ** n of a float overflows past ~1,024 tries (a tiny retry_max_s).
        doublings = min(max(tries - 1, 0), 40)
        return dt.timedelta(seconds=min(self.timing.retry_base_s * 2**doublings, self.timing.retry_max_s))

    def _expired(self, item: OutboxItem, now: dt.datetime) -> bool:
        """Whether ``item`` is past its give-up time (counted from when it was queued)."""
        return now - item.created_at >= dt.timedelta(seconds=self.timing.give_up_s)

    async def _release(self, item: OutboxItem) -> None:
        """Hand a claimed row back for a retry soon (its send was cancelled, not refused)."""
        retry_at = self._clock.now() + self.retry_delay(1)
        try:
            async with self._uow() as uow:
                await uow.outbox.mark_failed(
                    item.id, "the send was cancelled", item.told, retry_at, attempt=item.attempts
                )
        except Exception as exc:  # the lease ends anyway: the row is retried then
            log.warning("outbox: could not release post %s after a cancel: %s", item.id, cause_of(exc))

    async def _failed(self, item: OutboxItem, channel: ChannelRef, about: _About, exc: Exception) -> Delivery:
        now = self._clock.now()
        cause = cause_of(exc)
        retry_at: dt.datetime | None = now + self.retry_delay(item.attempts)
        if self._expired(item, now):
            retry_at = None
        notice = DeliveryNotice(
            item.kind, about.challenge_id, about.title, about.day, cause, retry_at, item.attempts
        )
        # Once per cause: a refusal repeats at every retry until someone fixes it. The daily post's own
        # refusal is told by the platform already (it knows the permission to grant); its give-up is ours.
        told = item.told
        tell = retry_at is None or (cause != item.told and item.kind != "challenge")
        log.log(
            logging.ERROR if retry_at is None else logging.WARNING,
            "outbox: %s of %s failed (try %d): %s; %s",
            item.kind,
            about.label,
            item.attempts,
            cause,
            "given up" if retry_at is None else f"retrying at {retry_at.isoformat()}",
            exc_info=not isinstance(exc, RankZeroError) and item.attempts == 1,
        )
        if tell and self.platform is not None:
            try:
                await self.platform.post_delivery_notice(channel, notice)
                told = cause
            except Exception as failed:  # the admin channel is unreachable too: the log is the report
                log.error("outbox: could not tell the admins either: %s", cause_of(failed))
        async with self._uow() as uow:
            await uow.outbox.mark_failed(item.id, cause, told, retry_at, attempt=item.attempts)
        if retry_at is None:
            return Delivery("gave_up", cause)
        return Delivery("retrying", cause, retry_at)


def post_mark(item: OutboxItem) -> parts.PostMark:
    """The idempotency mark of ``item``'s messages: its id and the second it was queued (ids of purged rows
    can come back on SQLite), ``uncertain`` from its second claim on (an earlier claim maybe posted it).
    """
    return parts.PostMark(f"rz{item.id}-{int(item.created_at.timestamp())}", uncertain=item.attempts > 1)


@dataclass(frozen=True)
class _About:
    """What a post is about, for the log and the admins' notice: its challenge, or (a weekly summary or
    team report) the week it covers.
    """

    challenge_id: int | None
    title: str
    day: dt.date

    @property
    def label(self) -> str:
        return f"challenge {self.challenge_id}" if self.challenge_id is not None else repr(self.title)

    @classmethod
    def of(cls, item: OutboxItem, challenge: Challenge | None) -> _About:
        if challenge is not None:
            return cls(challenge.id, challenge.title, challenge.day)
        day = dt.date.fromisoformat(str(item.payload.get("day", item.created_at.date().isoformat())))
        return cls(None, str(item.payload.get("title", item.kind)), day)


def summary_payload(title: str, week_day: dt.date) -> dict[str, Any]:
    """The stored form of a weekly summary: its title and a day of the week it covers."""
    return {"title": title, "day": week_day.isoformat()}


async def summary_card(uow: UnitOfWork, channel_pk: int, payload: dict[str, Any]) -> LeaderboardCard:
    """The weekly summary of ``channel_pk`` from its stored form: the week's leaderboard as it stands (a
    retry after a correction shows the corrected standings, as the channel's leaderboard does).
    """
    week = PeriodKey.week(dt.date.fromisoformat(str(payload["day"])))
    rows, _, total = await uow.standings.leaderboard(ScopeKey.channel(channel_pk), week, SUMMARY_TOP, None)
    return LeaderboardCard(Scope.CHANNEL, Period.WEEK, str(payload["title"]), tuple(rows), None, total)


def admin_notice_payload(notice: AdminNotice) -> dict[str, Any]:
    """The stored form of an admin notice (its fields: plain strings and numbers)."""
    return dataclasses.asdict(notice)


def admin_notice_from(payload: dict[str, Any]) -> AdminNotice:
    """The admin notice of :func:`admin_notice_payload`."""
    return AdminNotice(
        question_id=str(payload["question_id"]),
        question_version=int(payload["question_version"]),
        official_letter=_opt_str(payload.get("official_letter")),
        matched_letter=_opt_str(payload.get("matched_letter")),
        explanation=str(payload["explanation"]),
        flag_id=int(payload["flag_id"]),
        raised_by=str(payload["raised_by"]),
    )


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)
