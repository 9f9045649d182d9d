"""Disputes: run a question's code on the runner, match the real output to the choices, fix wrong answers.

Use cases (each one service call; database work in short units of work, never held open while the
runner works):

* ``dispute``: a player disputes a problem that is over for them (or whose challenge closed), optionally
  with a variant of the code; rate limited per player through the ``disputes`` table.
* ``preview_question``: an admin sees what the runner really prints before saving a new question.
* ``check_question``: verify one question against the runner (``rankzero questions verify``).
* ``correct_answer``: an admin fixes a question's official answer: a new version, and every past
  attempt re-judged by the text its player chose on the version they were asked (an attempt on an older
  wording without the corrected text is left as scored, and counted), sessions, standings and
  completions re-scored, a note queued for each channel.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core import scoring
from bot.core.choice_text import rendered
from bot.core.disputes import AdminNotice, MatchResult, gpu_shortfall, match_verdict
from bot.core.errors import (
    ConfigurationError,
    InvalidAnswerError,
    NotAdminError,
    NotFoundError,
    RateLimitedError,
    TooEarlyError,
)
from bot.core.insights import relearn_question
from bot.core.models import LETTERS, Actor, Challenge, Choice, Question
from bot.core.outbox import Outbox, admin_notice_payload
from bot.core.ports import ChatPlatform, Clock, RunnerClient, UnitOfWork
from bot.core.quota import RunnerQuota
from bot.core.repositories import DisputeRecord, QuestionFlag, QuestionPlay
from bot.core.standings import standing_keys
from bot.core.tenancy import acting_tenant, sees
from bot.core.verdicts import RunnerHealth, RunSpec, RunVerdict
from bot.core.vocabulary import Difficulty, Kind

log = logging.getLogger(__name__)

#: Most characters of code a player may submit as a variant (the runner refuses over 64 KiB anyway).
MAX_VARIANT_CHARS = 20_000


@dataclass(frozen=True)
class DisputeCard:
    """What a dispute (or a preview, or a verification) found, as data for the renderers."""

    question_id: str
    question_version: int
    prompt: str
    spec: RunSpec
    variant: bool
    choices: tuple[Choice, ...]
    verdict: RunVerdict | None
    match: MatchResult | None
    cannot_reproduce: str | None = None
    flagged: bool = False
    dispute_id: int | None = None

    @property
    def run_shape(self) -> str:
        """'python', 'ddp × 2 ranks', with '· your variant' for a player's own code."""
        what = self.spec.mode + (f" × {self.spec.nproc} ranks" if self.spec.mode == "ddp" else "")
        return what + (" · your variant" if self.variant else "")

    @property
    def verification(self) -> str:
        """'confirmed', 'contradicted' or 'cannot_check'."""
        if self.match is None:
            return "cannot_check"
        return self.match.verification


@dataclass(frozen=True)
class CorrectionCard:
    """What an answer correction changed."""

    question_id: str
    from_version: int
    to_version: int
    old_letter: str | None
    new_letter: str
    sessions_rescored: int
    points_delta: int
    players_affected: int
    flags_resolved: int
    #: Plays on an older wording that no longer offers the corrected choice's text: left as scored.
    left_as_scored: int = 0

    @property
    def left_note(self) -> str:
        """The sentence about plays left as scored (empty when none)."""
        n = self.left_as_scored
        if not n:
            return ""
        were = "s on an older wording were" if n != 1 else " on an older wording was"
        return f"{n} attempt{were} left as scored."


def question_from_spec(spec: dict[str, Any], version_id: int = 0, version: int = 0) -> Question:
    """A domain Question from a bank spec dict (previews and verification; nothing is stored)."""
    choices = tuple(
        Choice(LETTERS[i], str(c["text"]), bool(c.get("correct")), c.get("feedback"))
        for i, c in enumerate(spec.get("choices") or [])
    )
    return Question(
        version_id=version_id,
        id=str(spec.get("id", "preview")),
        version=version,
        kind=str(spec.get("kind", Kind.PREDICT_OUTPUT)),
        topic=str(spec.get("topic", "")),
        difficulty=str(spec.get("difficulty", Difficulty.INTERMEDIATE)),
        prompt=str(spec.get("prompt") or ""),
        code=spec.get("code"),
        hint=spec.get("hint"),
        explanation=spec.get("explanation"),
        time_limit_s=int(spec.get("time_limit_s", 120)),
        attempts=int(spec.get("attempts", 2)),
        choices=choices,
        runner=spec.get("runner"),
    )


@dataclass(frozen=True)
class Rescored:
    """A session's result under a corrected answer."""

    outcome: str | None
    points: int
    correct_attempt: int | None
    answer_ms: int
    finished_at: dt.datetime | None


def rescore(play: QuestionPlay, new_letter: str, attempts_allowed: int) -> Rescored:
    """Re-judge a session's attempts against ``new_letter`` with the game's scoring rules."""
    s, q = play.session, play.question
    hit = next((a for a in s.attempts if a.letter == new_letter), None)
    if hit is not None:
        hint = play.hint_used_at is not None and play.hint_used_at <= hit.answered_at
        points = scoring.points_for(
            difficulty=q.difficulty,
            correct=True,
            attempt_no=hit.attempt_no,
            elapsed_s=hit.elapsed_ms / 1000,
            time_limit_s=q.time_limit_s,
            hint_used=hint,
        )
        return Rescored("correct", points, hit.attempt_no, hit.elapsed_ms, hit.answered_at)
    if s.outcome == "timeout":
        return Rescored("timeout", 0, None, 0, s.finished_at)
    if s.outcome is not None or len(s.attempts) >= attempts_allowed:
        last = s.attempts[-1].answered_at if s.attempts else s.finished_at
        return Rescored("wrong", 0, None, 0, s.finished_at or last)
    return Rescored(None, 0, None, 0, None)


async def run_question(
    runner: RunnerClient, health: RunnerHealth, question: Question, code: str, timeout_s: float = 30.0
) -> tuple[RunSpec, RunVerdict | None, MatchResult | None, str | None]:
    """Run ``code`` as the question's ``runner`` block says: (spec, verdict, match, cannot-reproduce)."""
    spec = RunSpec.from_question(code, question.runner, timeout_s)
    shortfall = gpu_shortfall(spec, health)
    if shortfall is not None:
        return spec, None, None, shortfall
    verdict = await runner.run(spec)
    return spec, verdict, match_verdict(question, verdict, code), None


async def verify_questions(
    runner: RunnerClient,
    questions: Sequence[Question],
    *,
    concurrency: int = 2,
    timeout_s: float = 30.0,
    on_done: Callable[[DisputeCard], None] | None = None,
) -> list[DisputeCard]:
    """Check each question's official answer on the runner, ``concurrency`` at a time, in input order.

    Questions needing more GPUs than the runner has come back as 'cannot check' without running.
    """
    health = await runner.health()
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(q: Question) -> DisputeCard:
        if not q.code:
            raise NotFoundError(f"question {q.id!r} has no code to run")
        async with gate:
            spec, verdict, match, shortfall = await run_question(runner, health, q, q.code, timeout_s)
        card = DisputeCard(q.id, q.version, q.prompt, spec, False, q.choices, verdict, match, shortfall)
        if on_done is not None:
            on_done(card)
        return card

    return list(await asyncio.gather(*(one(q) for q in questions)))


def needs_preview(spec: dict[str, Any]) -> bool:
    """Whether a valid question spec from a chat form is shown on the runner before it may be saved:
    a predict_output question with code and a runner block (what ``preview_question`` runs).
    """
    return (
        spec.get("kind") == Kind.PREDICT_OUTPUT and bool(spec.get("code")) and spec.get("runner") is not None
    )


#: Seconds DisputeService remembers the runner's health before asking again.
HEALTH_TTL_S = 60.0


class DisputeService:
    """Disputes, previews, verification and answer corrections over a runner and the database."""

    def __init__(
        self,
        uow_factory: Callable[[], UnitOfWork],
        clock: Clock,
        runner: RunnerClient | None,
        platform: ChatPlatform | None = None,
        *,
        runs_per_hour: int = 6,
        run_timeout_s: float = 30.0,
        quota: RunnerQuota | None = None,
        outbox: Outbox | None = None,
    ) -> None:
        """``quota``: the runner's fair use per tenant, shared by disputes and previews (default: 60 jobs
        an hour and 2 at once per tenant). ``outbox``: the quiz service's; admin notices are queued in it
        with the flag that causes them (without one they are posted directly, best effort).
        """
        if runs_per_hour < 1:
            raise ConfigurationError("disputes per hour must be at least 1")
        self._uow = uow_factory
        self._clock = clock
        self._runner = runner
        self._platform = platform
        self._per_hour = runs_per_hour
        self._timeout = run_timeout_s
        self._quota = quota or RunnerQuota(clock)
        self._outbox = outbox if outbox is not None and outbox.enabled else None
        self._health: RunnerHealth | None = None
        self._health_at = 0.0

    # ------------------------------------------------------------------ the runner
    def _require_runner(self) -> RunnerClient:
        if self._runner is None:
            raise ConfigurationError(
                "no runner is configured: set RANKZERO_RUNNER_URL (and RANKZERO_RUNNER_TOKEN) to a "
                "`rankzero-runner serve` instance"
            )
        return self._runner

    async def runner_health(self) -> RunnerHealth:
        """The runner's capabilities, remembered for HEALTH_TTL_S.

        Not forever: a fleet's largest runner may be down when first asked and back later, and whether a
        GPU question "cannot be reproduced" must follow it.
        """
        now = asyncio.get_running_loop().time()
        if self._health is None or now - self._health_at > HEALTH_TTL_S:
            self._health = await self._require_runner().health()
            self._health_at = now
        return self._health

    async def _run(
        self, question: Question, code: str
    ) -> tuple[RunSpec, RunVerdict | None, MatchResult | None, str | None]:
        health = await self.runner_health()
        return await run_question(self._require_runner(), health, question, code, self._timeout)

    async def check_question(self, question: Question) -> DisputeCard:
        """Run a question's own code and compare with its official answer (no database, no flag)."""
        if not question.code:
            raise NotFoundError(f"question {question.id!r} has no code to run")
        spec, verdict, match, shortfall = await self._run(question, question.code)
        return DisputeCard(
            question.id,
            question.version,
            question.prompt,
            spec,
            False,
            question.choices,
            verdict,
            match,
            shortfall,
        )

    async def preview_question(self, actor: Actor, spec: dict[str, Any]) -> DisputeCard:
        """What the runner really prints for a question an admin is about to save."""
        self._require_admin(actor)
        question = question_from_spec(spec)
        if question.kind != Kind.PREDICT_OUTPUT or not question.code:
            raise NotFoundError("only predict_output questions with code can be previewed on the runner")
        tenant = acting_tenant(actor)
        if tenant is None:  # the operator's previews are not a tenant's fair use
            return await self.check_question(question)
        async with self._quota.job(tenant):
            return await self.check_question(question)

    # ------------------------------------------------------------------ disputes
    async def check_dispute(self, actor: Actor, problem_id: int, code: str | None = None) -> None:
        """Raise what :meth:`dispute` would refuse before it runs anything (no such problem, not over
        for the player, nothing to run, a variant too long, no runs left this hour); return otherwise.

        For callers that start or wake a runner before disputing (the console starts a local one): a
        dispute that cannot run is refused at once, without the runner. :meth:`dispute` checks again.
        """
        now = self._clock.now()
        self._check_variant(code)
        async with self._uow() as uow:
            player_pk, _, _ = await self._disputable(uow, actor, problem_id, now)
            used = await uow.disputes.count_disputes_since(player_pk, now - dt.timedelta(hours=1))
            if used >= self._per_hour:
                raise RateLimitedError(
                    f"you have used your {self._per_hour} runner runs for this hour: try again later"
                )

    @staticmethod
    def _check_variant(code: str | None) -> None:
        if code is not None and code.strip() and len(code) > MAX_VARIANT_CHARS:
            raise InvalidAnswerError(
                f"the variant is {len(code)} characters; keep it under {MAX_VARIANT_CHARS}"
            )

    async def _disputable(
        self, uow: UnitOfWork, actor: Actor, problem_id: int, now: dt.datetime
    ) -> tuple[int, Question, Challenge]:
        """The player's key, the problem's question and challenge, when the player may dispute it now.

        A problem of another tenant is refused with the same words as a missing one.
        """
        challenge_id = await uow.challenges.challenge_id_of_problem(problem_id)
        challenge = (
            await uow.challenges.get_challenge_by_id(challenge_id) if challenge_id is not None else None
        )
        if challenge is None or not sees(actor, challenge.channel.tenant):
            raise NotFoundError(f"no problem with id {problem_id}")
        problem = next(p for p in challenge.problems if p.id == problem_id)
        player_pk = await uow.players.ensure_player(actor.player)
        session = await uow.plays.get_session(problem_id, player_pk)
        over = challenge.status == "closed" or (
            session is not None and (session.finished or now >= session.deadline)
        )
        if not over:
            raise TooEarlyError(
                "you can dispute a problem once it is over for you (answered, out of attempts or "
                "time up) or once the challenge has closed"
            )
        question = problem.question
        if not question.code or question.runner is None:
            raise NotFoundError(
                f"question {question.id!r} has no runnable code: only predict-the-output and debug "
                "questions with a runner block can be disputed"
            )
        return player_pk, question, challenge

    async def dispute(self, actor: Actor, problem_id: int, code: str | None = None) -> DisputeCard:
        """Dispute a problem that is over for the player: run its code (or ``code``, a variant)."""
        now = self._clock.now()
        variant = code is not None and code.strip() != ""
        self._check_variant(code)
        async with self._uow() as uow:
            player_pk, question, challenge = await self._disputable(uow, actor, problem_id, now)
            tenant = challenge.channel.tenant
            # _disputable refused a question without code.
            run_code = code if variant and code is not None else (question.code or "")
            # Reserve the run before it starts, then count: concurrent requests see each other's
            # reservations instead of all passing the check while their runs take seconds.
            dispute_id = await uow.disputes.add_dispute(
                DisputeRecord(
                    player_pk=player_pk,
                    question_version_id=question.version_id,
                    problem_id=problem_id,
                    variant=variant,
                    code_sha256=hashlib.sha256(run_code.encode()).hexdigest(),
                    verdict_status="running",
                    verification="cannot_check",
                    matched_letter=None,
                    official_letter=question.correct_letter,
                    explanation="",
                    verdict={},
                    created_at=now,
                    tenant=tenant,
                )
            )
            used = await uow.disputes.count_disputes_since(player_pk, now - dt.timedelta(hours=1))
            if used > self._per_hour:
                raise RateLimitedError(  # rolls the reservation back
                    f"you have used your {self._per_hour} runner runs for this hour: try again later"
                )
        try:
            async with self._quota.job(tenant):
                spec, verdict, match, shortfall = await self._run(question, run_code)
        except BaseException:
            # The runner could not answer: the run does not count against the player.
            async with self._uow() as uow:
                await uow.disputes.delete_dispute(dispute_id)
            raise
        if verdict is None:
            # Nothing ran ("cannot reproduce here: needs N GPUs"): it costs the player none of the
            # hour's runs, and there is no verdict to keep.
            async with self._uow() as uow:
                await uow.disputes.delete_dispute(dispute_id)
            return DisputeCard(
                question.id,
                question.version,
                question.prompt,
                spec,
                variant,
                question.choices,
                None,
                None,
                shortfall,
            )
        card = DisputeCard(
            question.id,
            question.version,
            question.prompt,
            spec,
            variant,
            question.choices,
            verdict,
            match,
            shortfall,
        )
        notice: AdminNotice | None = None
        notice_id: int | None = None
        async with self._uow() as uow:
            record = DisputeRecord(
                player_pk=player_pk,
                question_version_id=question.version_id,
                problem_id=problem_id,
                variant=variant,
                code_sha256=hashlib.sha256(run_code.encode()).hexdigest(),
                verdict_status=verdict.status if verdict else "unsupported",
                verification=card.verification,
                matched_letter=match.matched_letter if match else None,
                official_letter=question.correct_letter,
                explanation=match.explanation if match else (shortfall or ""),
                verdict=_verdict_json(verdict),
                created_at=now,
                tenant=tenant,
            )
            await uow.disputes.complete_dispute(dispute_id, record)
            # Only the question's own code can prove its answer wrong; a variant is another snippet.
            if match is not None and match.verification == "contradicted" and not variant:
                flag_id, created = await uow.disputes.flag_question(
                    tenant,
                    question.id,
                    question.version_id,
                    dispute_id,
                    question.correct_letter,
                    match.matched_letter,
                    match.explanation,
                    self._clock.now(),
                )
                card = dataclasses.replace(card, flagged=True)
                if created:
                    notice = AdminNotice(
                        question.id,
                        question.version,
                        question.correct_letter,
                        match.matched_letter,
                        match.explanation,
                        flag_id,
                        actor.player.display_name,
                    )
                    if self._outbox is not None:
                        # Queued with the flag, in its transaction: a refused notice is retried (and
                        # given up with a word in the log), never lost with a platform hiccup.
                        notice_id = await self._outbox.queue(
                            uow, challenge, "notice", admin_notice_payload(notice), key=str(flag_id)
                        )
        card = dataclasses.replace(card, dispute_id=dispute_id)
        if notice_id is not None and self._outbox is not None:
            try:
                await self._outbox.deliver(notice_id)
            except Exception:  # queued: the outbox job delivers it; the player's verdict stands
                log.exception(
                    "could not deliver the admin notice of flag %s now; the outbox retries", notice_id
                )
        elif notice is not None and self._platform is not None:
            try:
                await self._platform.post_admin_notice(notice, challenge.channel)
            except Exception:  # the flag is stored; a platform hiccup must not lose the player's verdict
                log.exception("could not post the admin notice for flag %s", notice.flag_id)
        return card

    async def flags(self, actor: Actor, status: str | None = "open") -> list[QuestionFlag]:
        """Questions flagged by disputes in the admin's tenant (every tenant's, for the operator)."""
        self._require_admin(actor)
        tenant = acting_tenant(actor)
        async with self._uow() as uow:
            return await uow.disputes.flags(tenant, status)

    # ------------------------------------------------------------------ corrections
    @staticmethod
    def _require_admin(actor: Actor) -> None:
        if not actor.is_admin:
            raise NotAdminError("only admins can do that: ask a server/workspace admin")

    async def correct_answer(self, actor: Actor, question_id: str, letter: str) -> CorrectionCard:
        """Make ``letter`` the official answer (a new version) and re-score past attempts.

        A tenant admin corrects the question for their tenant only: the new version is theirs, and only
        their channels' problems and attempts are re-scored. The operator corrects the shared question
        for everyone. A question the admin's tenant does not see reads as missing.

        Each play is judged through its own version's choices: it is right when the choice its player
        picked reads (``rendered``) as the corrected choice. A problem keeps the version it was asked on
        unless that version shows exactly the corrected version's choices, in order.

        The learned difficulty of the question is learned again from the re-judged first attempts, in the
        same transaction, for the correcting tenant (every tenant that learned it, for the operator).
        """
        self._require_admin(actor)
        view = acting_tenant(actor)
        letter = letter.strip().upper()
        now = self._clock.now()
        async with self._uow() as uow:
            latest = await uow.questions.latest_question(view, question_id)
            if latest is None:
                raise NotFoundError(f"no question with id {question_id!r}: see `rankzero questions list`")
            if latest.choice(letter) is None:
                letters = ", ".join(c.letter for c in latest.choices) or "none"
                raise InvalidAnswerError(
                    f"{letter!r} is not a choice of {question_id}: pick one of {letters}"
                )
            if latest.correct_letter == letter:
                raise InvalidAnswerError(f"{letter} is already the official answer of {question_id}")
            spec = await uow.questions.version_spec(latest.version_id)
            if spec is None:  # pragma: no cover - the version was just read
                raise NotFoundError(f"question {question_id!r} lost its latest version")
            spec["choices"] = [
                {**c, "correct": LETTERS[i] == letter} for i, c in enumerate(spec.get("choices") or [])
            ]
            new_id = await uow.questions.add_corrected_version(view, question_id, spec, now)
            new = await uow.questions.question_version(new_id)
            assert new is not None and new.version > latest.version
            corrected = latest.choice(letter)
            assert corrected is not None  # checked above
            target = rendered(corrected.text)
            # A play is re-judged through its own version's choices (letters of an older order mean other
            # choices), so read the plays before any problem moves.
            plays = await uow.corrections.question_plays(view, question_id)
            # Only problems whose version shows exactly the corrected version's choices (same texts, same
            # order: the key is all that differs) move to it; one asked on another order or wording keeps
            # the version its players saw, or their letters would point at other choices.
            same = []
            for version_id in await uow.corrections.problem_versions(view, question_id):
                asked = await uow.questions.question_version(version_id)
                if asked is not None and _shown(asked) == _shown(new):
                    same.append(version_id)
            await uow.corrections.repoint_problems(view, question_id, new.version_id, same)
            rescored = points_delta = left = 0
            players: set[int] = set()
            channels: dict[int, int] = {}
            for play in plays:
                if not play.session.attempts:
                    continue
                own = next((c.letter for c in play.question.choices if rendered(c.text) == target), None)
                if own is None:
                    # The corrected choice is not one this play's wording offered (rewritten or removed):
                    # no honest re-judgement exists, so its result stands and the admin is told.
                    left += 1
                    continue
                delta = await self._rescore_play(uow, play, own)
                if delta is None:  # pragma: no cover - attempts checked above
                    continue
                rescored += 1
                points_delta += delta
                if delta:
                    players.add(play.session.player_pk)
                channels[play.channel_pk] = channels.get(play.channel_pk, 0) + 1
            # The learned difficulty counted the old key's verdicts at each close (a wrong key is what
            # makes a question look too hard): learn it again from the re-judged first attempts, for the
            # correcting tenant only (the operator's correction re-judged every tenant's plays).
            for tenant in [view] if view is not None else await uow.difficulty.learned_tenants(question_id):
                await relearn_question(uow, tenant, question_id, now)
            correction_id = await uow.corrections.add_correction(
                view,
                question_id,
                latest.version_id,
                new.version_id,
                latest.correct_letter,
                letter,
                actor.player.display_name,
                now,
                rescored,
                points_delta,
            )
            for channel_pk, n in channels.items():
                await uow.corrections.add_correction_note(
                    correction_id,
                    channel_pk,
                    f"Correction: the answer to {question_id} is {letter}, not {latest.correct_letter} "
                    f"(checked on the runner). {n} past answer{'s' if n != 1 else ''} re-scored; "
                    "leaderboards updated.",
                )
            if left:
                log.info("correction of %s left %d play(s) on an older wording as scored", question_id, left)
            resolved = await uow.disputes.resolve_flags(view, question_id, now)
        return CorrectionCard(
            question_id,
            latest.version,
            new.version,
            latest.correct_letter,
            letter,
            rescored,
            points_delta,
            len(players),
            resolved,
            left,
        )

    async def _rescore_play(self, uow: UnitOfWork, play: QuestionPlay, letter: str) -> int | None:
        """Re-judge one session against ``letter``, the corrected choice's letter in the play's own
        version; return its points delta, or None when it has no attempts to re-judge.
        """
        s = play.session
        if not s.attempts:
            return None
        for a in s.attempts:
            await uow.corrections.set_attempt_correct(s.id, a.attempt_no, a.letter == letter)
        new = rescore(play, letter, play.question.attempts)
        was_correct = s.outcome == "correct"
        old_ms = next((a.elapsed_ms for a in s.attempts if a.correct), 0) if was_correct else 0
        await uow.corrections.set_session_result(s.id, new.outcome, new.points, new.finished_at)
        d_points = new.points - s.points
        d_correct = int(new.outcome == "correct") - int(was_correct)
        d_ms = new.answer_ms - old_ms
        if d_points or d_correct or d_ms:
            await uow.corrections.adjust_standings(
                standing_keys(play.channel_pk, play.channel, play.day),
                s.player_pk,
                d_points,
                d_correct,
                d_ms,
            )
            await uow.corrections.adjust_completion(play.challenge_id, s.player_pk, d_correct, d_points)
        return d_points


def _shown(question: Question) -> tuple[str, ...]:
    """A version's choices as a player reads them, in order (what a problem's attempts' letters mean)."""
    return tuple(rendered(c.text) for c in question.choices)


def _verdict_json(verdict: RunVerdict | None) -> dict[str, Any]:
    """The verdict as stored with the dispute (plain JSON)."""
    return dataclasses.asdict(verdict) if verdict is not None else {}
