"""SqlPlayRepository: players' sessions and attempts on problems, the start and answer paths.

These are the hot paths (every start and every answer), so the reads are single joined statements of
plain columns and the writes prebuilt ``text()`` statements (see bot/storage/sql.py for why).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Integer, Table, and_, bindparam, func, literal, select, text, update

from bot.core.models import Attempt, PlayContext, PlayerRef, PlaySession, Problem
from bot.core.ports import AttemptConflictError
from bot.core.repositories import AnswerWrite, ProblemTally
from bot.core.standings import StandingKeys
from bot.storage.mapping import (
    as_asked,
    cached_question,
    challenge_columns,
    challenge_from_columns,
    to_session,
    version_key_columns,
)
from bot.storage.models import (
    AttemptRow,
    ChallengeRow,
    ChannelRow,
    CompletionRowModel,
    PlayerRow,
    PlaySessionRow,
    ProblemRow,
    QuestionVersionRow,
    StandingRowModel,
)
from bot.storage.sql import INSERT_OR_NOTHING, STANDING_COLUMNS, SqlRepository, standings_upsert, upsert_sql

_SESSION_COLUMNS = ("problem_id", "player_pk", "started_at", "deadline", "points")
_ATTEMPT_COLUMNS = (
    "session_id",
    "question_version_id",
    "attempt_no",
    "letter",
    "correct",
    "answered_at",
    "elapsed_ms",
    "idempotency_key",
)


def _play_context_statement(for_answer: bool) -> Any:
    """One joined SELECT of plain columns: problem, version key, challenge, channel, player, session and
    its attempts; ``for_answer`` adds whether the idempotency key was seen and how many of the player's
    problems of this challenge are over (the start path needs neither).

    Plain columns, not ORM entities: hydrating six mapped objects per row cost more than the query itself
    on the answer path. The question's spec (JSON) is not read here: versions never change, so the parsed
    Question is cached by its version key (``_QUESTIONS``) and the spec is fetched only on a miss.
    """
    p = ProblemRow.__table__
    v = QuestionVersionRow.__table__
    c = ChallengeRow.__table__
    ch = ChannelRow.__table__
    pl = PlayerRow.__table__
    s = PlaySessionRow.__table__
    a = AttemptRow.__table__
    others = p.alias("others")
    keyed = a.alias("keyed")
    done = s.alias("done")
    total = select(func.count(others.c.id)).where(others.c.challenge_id == p.c.challenge_id).scalar_subquery()
    key_seen: Any = literal(False)
    finished: Any = literal(0)
    if for_answer:
        key_seen = select(keyed.c.id).where(keyed.c.idempotency_key == bindparam("key")).exists()
        # The player's problems of this challenge already over (this read's snapshot): lets the answer
        # path skip the completion check on every problem but the last without another statement. An IN
        # list of the challenge's problems probes the (problem, player) unique index a few times.
        finished = (
            select(func.count(done.c.id))
            .where(
                # correlate(p): nested two levels down, auto-correlation would not reach the outer
                # problem and the IN list would hold every problem of every challenge.
                done.c.problem_id.in_(
                    select(others.c.id).where(others.c.challenge_id == p.c.challenge_id).correlate(p)
                ),
                done.c.player_pk == pl.c.id,
                done.c.outcome.is_not(None),
            )
            .scalar_subquery()
        )
    this_player = and_(pl.c.platform == bindparam("platform"), pl.c.user_id == bindparam("user_id"))
    columns = [
        p.c.position.label("p_position"),
        *version_key_columns(v),
        *challenge_columns(c, ch),
        pl.c.id.label("player_pk"),
        s.c.id.label("s_id"),
        s.c.started_at.label("s_started_at"),
        s.c.deadline.label("s_deadline"),
        s.c.hint_used_at.label("s_hint_used_at"),
        s.c.finished_at.label("s_finished_at"),
        s.c.outcome.label("s_outcome"),
        s.c.points.label("s_points"),
        a.c.attempt_no.label("a_no"),
        a.c.letter.label("a_letter"),
        a.c.correct.label("a_correct"),
        a.c.answered_at.label("a_answered_at"),
        a.c.elapsed_ms.label("a_elapsed_ms"),
        total.label("n_problems"),
        key_seen.label("key_seen"),
        finished.label("n_finished"),
    ]
    return (
        select(*columns)
        .select_from(p)
        .join(v, v.c.id == p.c.question_version_id)
        .join(c, c.c.id == p.c.challenge_id)
        .join(ch, ch.c.id == c.c.channel_pk)
        .outerjoin(pl, this_player)
        .outerjoin(s, and_(s.c.problem_id == p.c.id, s.c.player_pk == pl.c.id))
        .outerjoin(a, a.c.session_id == s.c.id)
        .where(p.c.id == bindparam("problem_id"))
        .order_by(a.c.attempt_no)
    )


def _record_answer_pg(rows: int) -> Any:
    """PostgreSQL: a correct, session-ending answer in one statement (see ``record_answer``).

    Each data-modifying CTE runs once; the session is ended only if the attempt was inserted and the
    session was still running, and the standings move only if the session was ended here.
    """
    attempts = AttemptRow.__table__
    sessions = PlaySessionRow.__table__
    standings = StandingRowModel.__table__
    values = ", ".join(f"(:scope_{i}, :period_{i})" for i in range(rows))
    sql = f"""
WITH a AS (
    INSERT INTO attempts ({", ".join(_ATTEMPT_COLUMNS)})
    VALUES ({", ".join(f":{c}" for c in _ATTEMPT_COLUMNS)})
    ON CONFLICT DO NOTHING RETURNING id
), f AS (
    UPDATE play_sessions SET outcome = :outcome, points = :points, finished_at = :answered_at
    WHERE id = :session_id AND outcome IS NULL AND EXISTS (SELECT 1 FROM a)
    RETURNING id
), st AS (
    INSERT INTO standings ({", ".join(STANDING_COLUMNS)})
    SELECT v.scope, v.period, CAST(:player_pk AS INTEGER), CAST(:points AS INTEGER), 1,
           CAST(:elapsed_ms AS INTEGER)
    FROM (VALUES {values}) AS v (scope, period)
    WHERE EXISTS (SELECT 1 FROM f)
    ON CONFLICT (scope, period, player_pk) DO UPDATE SET points = standings.points + excluded.points,
        correct = standings.correct + excluded.correct, answer_ms = standings.answer_ms + excluded.answer_ms
    RETURNING 1
)
SELECT (SELECT count(*) FROM a) AS inserted, (SELECT count(*) FROM f) AS finished
"""  # noqa: S608 - table and column names are ours, never input
    binds = [bindparam(c, type_=attempts.c[c].type) for c in _ATTEMPT_COLUMNS]
    binds += [
        bindparam("outcome", type_=sessions.c.outcome.type),
        bindparam("points", type_=sessions.c.points.type),
        bindparam("player_pk", type_=standings.c.player_pk.type),
    ]
    for i in range(rows):
        binds.append(bindparam(f"scope_{i}", type_=standings.c.scope.type))
        binds.append(bindparam(f"period_{i}", type_=standings.c.period.type))
    return text(sql).bindparams(*binds).columns(inserted=Integer, finished=Integer)


class SqlPlayRepository(SqlRepository):
    """The PlayRepository port (bot/core/repositories/plays.py) over one unit of work."""

    async def play_context(
        self,
        problem_id: int,
        player: PlayerRef,
        idempotency_key: str | None = None,
        *,
        for_answer: bool = False,
    ) -> PlayContext | None:
        """The problem, its challenge and channel, the player's session and attempts: one statement.

        ``for_answer`` also reads whether ``idempotency_key`` was seen and how many of the player's
        problems are over (``key_seen`` / ``finished``, else False / 0).

        This is the hot path of every start and answer, so it is a single joined SELECT of plain columns
        (one row per attempt) instead of the handful of lookups the general-purpose readers make.
        """
        stmt = self._db.cached(f"play_context:{for_answer}", lambda _: _play_context_statement(for_answer))
        params: dict[str, Any] = {
            "problem_id": problem_id,
            "platform": player.platform,
            "user_id": player.user_id,
        }
        if for_answer:
            params["key"] = idempotency_key
        rows = (await self._db.core(stmt, params)).all()
        if not rows:
            return None
        r = rows[0]
        challenge = challenge_from_columns(r, (), size=int(r.n_problems))
        question = await cached_question(self.s, r.v_id, r.v_question_id, r.v_version, r.v_hash)
        if r.c_time_limit_s is not None or r.c_attempts is not None:
            question = as_asked(question, r.c_time_limit_s, r.c_attempts)
        problem = Problem(problem_id, r.c_id, r.p_position, question)
        session = None
        if r.s_id is not None:
            attempts = tuple(
                Attempt(a.a_no, a.a_letter, a.a_correct, a.a_answered_at, a.a_elapsed_ms)
                for a in rows
                if a.a_no is not None
            )
            session = PlaySession(
                id=r.s_id,
                problem_id=problem_id,
                player_pk=r.player_pk,
                started_at=r.s_started_at,
                deadline=r.s_deadline,
                hint_used=r.s_hint_used_at is not None,
                finished_at=r.s_finished_at,
                outcome=r.s_outcome,
                points=r.s_points,
                attempts=attempts,
            )
        return PlayContext(challenge, problem, r.player_pk, session, bool(r.key_seen), int(r.n_finished or 0))

    async def get_session(self, problem_id: int, player_pk: int) -> PlaySession | None:
        """A player's session on a problem."""
        found = await self.sessions_where(
            and_(PlaySessionRow.problem_id == problem_id, PlaySessionRow.player_pk == player_pk)
        )
        return found[0] if found else None

    async def create_session(
        self, problem_id: int, player_pk: int, started_at: dt.datetime, deadline: dt.datetime
    ) -> PlaySession:
        """Start a problem; an existing session is returned unchanged (its deadline keeps running)."""
        stmt = self._db.cached(
            "create_session",
            lambda _: upsert_sql(PlaySessionRow.__table__, _SESSION_COLUMNS, INSERT_OR_NOTHING),
        )
        params = {
            "problem_id": problem_id,
            "player_pk": player_pk,
            "started_at": started_at,
            "deadline": deadline,
            "points": 0,
        }
        new_id = (await self._db.core(stmt, params)).scalar()
        if new_id is not None:
            return PlaySession(new_id, problem_id, player_pk, started_at, deadline, False, None, None, 0, ())
        found = await self.get_session(problem_id, player_pk)
        assert found is not None
        return found

    async def sessions_in_challenge(self, challenge_id: int, player_pk: int) -> list[PlaySession]:
        """A player's sessions on a challenge."""
        problem_ids = select(ProblemRow.id).where(ProblemRow.challenge_id == challenge_id)
        return await self.sessions_where(
            and_(PlaySessionRow.player_pk == player_pk, PlaySessionRow.problem_id.in_(problem_ids))
        )

    async def sessions_where(self, where: Any) -> list[PlaySession]:
        """Sessions matching a SQL condition, with their attempts (also used by corrections)."""
        rows = list(await self.s.scalars(select(PlaySessionRow).where(where).order_by(PlaySessionRow.id)))
        if not rows:
            return []
        attempts: dict[int, list[Attempt]] = {r.id: [] for r in rows}
        for a in await self.s.scalars(
            select(AttemptRow)
            .where(AttemptRow.session_id.in_(list(attempts)))
            .order_by(AttemptRow.attempt_no)
        ):
            attempts[a.session_id].append(
                Attempt(a.attempt_no, a.letter, a.correct, a.answered_at, a.elapsed_ms)
            )
        return [to_session(r, tuple(attempts[r.id])) for r in rows]

    async def _add_attempt(
        self,
        session_id: int,
        attempt_no: int,
        letter: str,
        correct: bool,
        answered_at: dt.datetime,
        elapsed_ms: int,
        idempotency_key: str | None,
        question_version_id: int,
    ) -> None:
        """Record an attempt; AttemptConflictError if its number or idempotency key is already taken.

        ON CONFLICT DO NOTHING lets the unique keys arbitrate concurrent clicks without a savepoint: on
        PostgreSQL the loser waits for the winner's commit, then inserts nothing.
        """
        stmt = self._db.cached(
            "add_attempt",
            lambda _: upsert_sql(AttemptRow.__table__, _ATTEMPT_COLUMNS, INSERT_OR_NOTHING),
        )
        params = {
            "session_id": session_id,
            "attempt_no": attempt_no,
            "letter": letter,
            "correct": correct,
            "answered_at": answered_at,
            "elapsed_ms": elapsed_ms,
            "idempotency_key": idempotency_key,
            "question_version_id": question_version_id,
        }
        if (await self._db.core(stmt, params)).scalar() is None:
            raise AttemptConflictError(f"attempt {attempt_no} of session {session_id} (or its key) is taken")

    async def record_answer(self, write: AnswerWrite) -> bool:
        """Store an answer: the attempt, then (if asked) the end of the session and the standings.

        PostgreSQL: one statement (data-modifying CTEs, each step conditional on the one before), so the
        answer path's writes cost one round trip instead of three. SQLite: the same three steps as three
        statements (no data-modifying CTEs there; its statements cost no network round trip).
        """
        if write.standings is not None and write.outcome is None:
            raise ValueError("standings move only when the answer ends the session: outcome is missing")
        if self._db.dialect == "postgresql" and write.standings is not None:
            keys = write.standings.pairs()
            stmt = self._db.cached(f"record_answer:{len(keys)}", lambda _: _record_answer_pg(len(keys)))
            params: dict[str, Any] = {
                "session_id": write.session_id,
                "question_version_id": write.question_version_id,
                "attempt_no": write.attempt_no,
                "letter": write.letter,
                "correct": write.correct,
                "answered_at": write.answered_at,
                "elapsed_ms": write.elapsed_ms,
                "idempotency_key": write.idempotency_key,
                "outcome": write.outcome,
                "points": write.points,
                "player_pk": write.player_pk,
            }
            for i, (scope, period) in enumerate(keys):
                params[f"scope_{i}"] = scope
                params[f"period_{i}"] = period
            row = (await self._db.core(stmt, params)).one()
            if not row.inserted:
                raise AttemptConflictError(
                    f"attempt {write.attempt_no} of session {write.session_id} (or its key) is taken"
                )
            return bool(row.finished)
        await self._add_attempt(
            write.session_id,
            write.attempt_no,
            write.letter,
            write.correct,
            write.answered_at,
            write.elapsed_ms,
            write.idempotency_key,
            write.question_version_id,
        )
        if write.outcome is None:
            return False
        if not await self.finish_session(write.session_id, write.outcome, write.points, write.answered_at):
            return False
        if write.standings is not None:
            await self._add_to_standings(write.standings, write.player_pk, write.points, write.elapsed_ms)
        return True

    async def _add_to_standings(
        self, standings: StandingKeys, player_pk: int, points: int, answer_ms: int
    ) -> None:
        """Upsert the player's standing in every (scope, period)."""
        keys = standings.pairs()
        # One multi-row upsert (prebuilt per row count: 6 on the answer path), not an executemany: one
        # statement for the database to run instead of six.
        stmt = self._db.cached(f"add_to_standings:{len(keys)}", lambda _: standings_upsert(len(keys)))
        params: dict[str, Any] = {"player_pk": player_pk, "points": points, "answer_ms": answer_ms}
        for i, (scope, period) in enumerate(keys):
            params[f"scope_{i}"] = scope
            params[f"period_{i}"] = period
        await self._db.core(stmt, params)

    async def finish_session(
        self, session_id: int, outcome: str, points: int, finished_at: dt.datetime
    ) -> bool:
        """End a session once; True only for the call that ended it."""
        table: Table = PlaySessionRow.__table__  # type: ignore[assignment]
        stmt = self._db.cached(
            "finish_session",
            lambda _: (
                update(table)
                .where(table.c.id == bindparam("sid"), table.c.outcome.is_(None))
                .values(outcome=bindparam("outcome"), points=bindparam("points"), finished_at=bindparam("at"))
            ),
        )
        params = {"sid": session_id, "outcome": outcome, "points": points, "at": finished_at}
        result = await self._db.core(stmt, params)
        return bool(result.rowcount)

    async def mark_hint(self, session_id: int, at: dt.datetime) -> None:
        """Record the first time the hint was shown."""
        await self.s.execute(
            update(PlaySessionRow)
            .where(PlaySessionRow.id == session_id, PlaySessionRow.hint_used_at.is_(None))
            .values(hint_used_at=at)
        )

    async def expire_sessions(self, challenge_id: int, now: dt.datetime) -> list[tuple[int, int]]:
        """End every unfinished session of a challenge as timed out (at its deadline or now)."""
        problem_ids = select(ProblemRow.id).where(ProblemRow.challenge_id == challenge_id)
        rows = (
            await self.s.execute(
                select(PlaySessionRow.id, PlaySessionRow.player_pk, PlaySessionRow.deadline).where(
                    PlaySessionRow.problem_id.in_(problem_ids), PlaySessionRow.outcome.is_(None)
                )
            )
        ).all()
        ended = []
        for sid, player_pk, deadline in rows:
            if await self.finish_session(sid, "timeout", 0, min(deadline, now)):
                ended.append((int(sid), int(player_pk)))
        return ended

    async def finished_count(self, challenge_id: int, player_pk: int) -> int:
        """How many of a challenge's problems are over for a player."""
        stmt = self._db.cached(
            "finished_count",
            lambda _: (
                select(func.count(PlaySessionRow.id))
                .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
                .where(
                    ProblemRow.challenge_id == bindparam("challenge_id"),
                    PlaySessionRow.player_pk == bindparam("player_pk"),
                    PlaySessionRow.outcome.is_not(None),
                )
            ),
        )
        n = (await self.s.execute(stmt, {"challenge_id": challenge_id, "player_pk": player_pk})).scalar()
        return int(n or 0)

    async def players_missing_completion(self, challenge_id: int, problem_count: int) -> list[int]:
        """Players with every problem of the challenge over but no completion row (see close_challenge)."""
        s, p, c = PlaySessionRow, ProblemRow, CompletionRowModel
        recorded = select(c.player_pk).where(c.challenge_id == challenge_id)
        rows = await self.s.scalars(
            select(s.player_pk)
            .join(p, p.id == s.problem_id)
            .where(p.challenge_id == challenge_id, s.outcome.is_not(None), s.player_pk.not_in(recorded))
            .group_by(s.player_pk)
            .having(func.count(s.id) >= problem_count)
            .order_by(s.player_pk)
        )
        return [int(pk) for pk in rows]

    async def problem_tallies(self, challenge_id: int) -> list[ProblemTally]:
        """Per problem: counts of each player's last chosen letter, players and solvers."""
        last = (
            select(AttemptRow.session_id, func.max(AttemptRow.attempt_no).label("n"))
            .group_by(AttemptRow.session_id)
            .subquery()
        )
        rows = (
            await self.s.execute(
                select(PlaySessionRow.problem_id, AttemptRow.letter, func.count())
                .join(last, last.c.session_id == PlaySessionRow.id)
                .join(
                    AttemptRow,
                    and_(AttemptRow.session_id == last.c.session_id, AttemptRow.attempt_no == last.c.n),
                )
                .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
                .where(ProblemRow.challenge_id == challenge_id)
                .group_by(PlaySessionRow.problem_id, AttemptRow.letter)
            )
        ).tuples()
        dist: dict[int, dict[str, int]] = {}
        for pid, letter, n in rows:
            dist.setdefault(int(pid), {})[str(letter)] = int(n)
        counts = (
            await self.s.execute(
                select(
                    ProblemRow.id,
                    func.count(PlaySessionRow.id),
                    func.coalesce(
                        func.sum(
                            func.cast(
                                PlaySessionRow.outcome == literal("correct"), type_=ProblemRow.position.type
                            )
                        ),
                        0,
                    ),
                )
                .outerjoin(PlaySessionRow, PlaySessionRow.problem_id == ProblemRow.id)
                .where(ProblemRow.challenge_id == challenge_id)
                .group_by(ProblemRow.id)
                .order_by(ProblemRow.position)
            )
        ).tuples()
        return [
            ProblemTally(int(pid), dist.get(int(pid), {}), int(n), int(solved)) for pid, n, solved in counts
        ]
