"""SqlUnitOfWork: the UnitOfWork port over SQLAlchemy's AsyncSession (one session per use case)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import Integer, Table, and_, bindparam, delete, func, literal, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bot.core.models import (
    LETTERS,
    Attempt,
    Challenge,
    ChannelRef,
    Choice,
    PlayContext,
    PlayerRef,
    PlaySession,
    Problem,
    Question,
    QuestionCandidate,
    StandingRow,
)
from bot.core.ports import (
    AlreadyExistsError,
    AnswerWrite,
    AttemptConflictError,
    CompletionRow,
    ProblemTally,
    QuestionRow,
    SyncReport,
    TransientConflictError,
)
from bot.core.schedule import Schedule, ScheduleConfig
from bot.storage.models import (
    AttemptRow,
    BadgeRow,
    ChallengeRow,
    ChannelRow,
    CompletionRowModel,
    PlayerRow,
    PlaySessionRow,
    ProblemRow,
    QuestionVersionRow,
    SchedulerClaimRow,
    ScheduleRow,
    StandingRowModel,
)
from bot.storage.models import QuestionRow as QuestionModel

if TYPE_CHECKING:
    from bot.storage.disputes import SqlDisputeStore


def content_hash(spec: dict[str, Any]) -> str:
    """A stable hash of a question's content (key order and defaults normalised by the caller)."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def question_from_version(row: QuestionVersionRow) -> Question:
    """Build the domain Question of a stored version."""
    spec = row.spec
    choices = tuple(
        Choice(LETTERS[i], c["text"], bool(c.get("correct")), c.get("feedback"))
        for i, c in enumerate(spec.get("choices") or [])
    )
    extra = {k: spec[k] for k in ("front", "back", "concepts", "model_answer", "source") if spec.get(k)}
    return Question(
        version_id=row.id,
        id=row.question_id,
        version=row.version,
        kind=row.kind,
        topic=row.topic,
        difficulty=row.difficulty,
        prompt=spec.get("prompt") or spec.get("front") or "",
        code=spec.get("code"),
        hint=spec.get("hint"),
        explanation=spec.get("explanation"),
        time_limit_s=int(spec.get("time_limit_s", 120)),
        attempts=int(spec.get("attempts", 2)),
        choices=choices,
        tags=tuple(spec.get("tags") or ()),
        runner=spec.get("runner"),
        extra=extra,
    )


def _as_asked(question: Question, row: ChallengeRow) -> Question:
    """The question as this challenge asks it: a schedule's time limit / attempts override its own."""
    if row.time_limit_s is None and row.attempts is None:
        return question
    return _override(question, row.time_limit_s, row.attempts)


def _override(question: Question, time_limit_s: int | None, attempts: int | None) -> Question:
    return replace(
        question,
        time_limit_s=time_limit_s if time_limit_s is not None else question.time_limit_s,
        attempts=attempts if attempts is not None else question.attempts,
    )


_STATEMENTS: dict[tuple[str, str], Any] = {}


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
        *_version_key_columns(v),
        *_challenge_columns(c, ch),
        pl.c.id.label("player_pk"),
        s.c.id.label("s_id"), s.c.started_at.label("s_started_at"), s.c.deadline.label("s_deadline"),
        s.c.hint_used_at.label("s_hint_used_at"), s.c.finished_at.label("s_finished_at"),
        s.c.outcome.label("s_outcome"), s.c.points.label("s_points"),
        a.c.attempt_no.label("a_no"), a.c.letter.label("a_letter"), a.c.correct.label("a_correct"),
        a.c.answered_at.label("a_answered_at"), a.c.elapsed_ms.label("a_elapsed_ms"),
        total.label("n_problems"), key_seen.label("key_seen"), finished.label("n_finished"),
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


def _version_key_columns(v: Any) -> list[Any]:
    """The columns that identify a parsed question in ``_QUESTIONS`` (not the spec itself)."""
    return [
        v.c.id.label("v_id"), v.c.question_id.label("v_question_id"), v.c.version.label("v_version"),
        v.c.content_hash.label("v_hash"),
    ]


def _challenge_columns(c: Any, ch: Any) -> list[Any]:
    """A challenge's columns and its channel's, labelled as the hot-path readers expect."""
    return [
        c.c.id.label("c_id"), c.c.channel_pk.label("c_channel_pk"), c.c.day.label("c_day"),
        c.c.status.label("c_status"), c.c.title.label("c_title"), c.c.opened_at.label("c_opened_at"),
        c.c.closes_at.label("c_closes_at"), c.c.message_ref.label("c_message_ref"),
        c.c.time_limit_s.label("c_time_limit_s"), c.c.attempts.label("c_attempts"),
        ch.c.platform.label("ch_platform"), ch.c.workspace_id.label("ch_workspace_id"),
        ch.c.channel_id.label("ch_channel_id"), ch.c.name.label("ch_name"),
        ch.c.timezone.label("ch_timezone"),
    ]


def _challenge_from_columns(r: Any, problems: tuple[Problem, ...], size: int = 0) -> Challenge:
    """A Challenge from a row holding ``_challenge_columns``."""
    return Challenge(
        id=r.c_id,
        channel_pk=r.c_channel_pk,
        channel=ChannelRef(r.ch_platform, r.ch_workspace_id, r.ch_channel_id, r.ch_name, r.ch_timezone),
        day=r.c_day,
        status="open" if r.c_status == "open" else "closed",
        title=r.c_title,
        opened_at=r.c_opened_at,
        closes_at=r.c_closes_at,
        problems=problems,
        message_ref=r.c_message_ref,
        size=size,
    )


def _problems_statement(_dialect: str) -> Any:
    p = ProblemRow.__table__
    v = QuestionVersionRow.__table__
    return (
        select(p.c.id.label("p_id"), p.c.position.label("p_position"), *_version_key_columns(v))
        .join(v, v.c.id == p.c.question_version_id)
        .where(p.c.challenge_id == bindparam("challenge_id"))
        .order_by(p.c.position)
    )


def _find_challenge_statement(_dialect: str) -> Any:
    c = ChallengeRow.__table__
    ch = ChannelRow.__table__
    return (
        select(*_challenge_columns(c, ch))
        .select_from(c)
        .join(ch, ch.c.id == c.c.channel_pk)
        .where(
            ch.c.platform == bindparam("platform"),
            ch.c.workspace_id == bindparam("workspace_id"),
            ch.c.channel_id == bindparam("channel_id"),
            c.c.day == bindparam("day"),
        )
    )


# Parsed questions by everything that determines them: (version id, question id, version, content hash).
# Question versions are never rewritten, so an entry never goes stale; the full key also keeps two
# databases in one process (the test suite, the benchmark) from ever sharing a wrong entry.
_QUESTIONS: dict[tuple[int, str, int, str], Question] = {}
_QUESTIONS_MAX = 4096


def _upsert_sql(table: Any, columns: Sequence[str], on_conflict: str) -> Any:
    """``INSERT INTO table (columns) VALUES (...) <on_conflict>`` as a typed ``text()`` statement.

    Why text: SQLAlchemy never caches the compiled SQL of the dialect-specific ``insert().on_conflict_*``
    constructs (their classes set ``inherit_cache = False``), so on the answer path each one was compiled
    on every call (~0.3 ms each, measured in benchmarks/engine.py). The syntax below is the same on
    SQLite (>= 3.35, for RETURNING) and PostgreSQL, and the typed bind parameters keep the columns' own
    conversions (UTC datetimes, booleans). Table and column names come from our models, never from input.
    """
    names = ", ".join(columns)
    values = ", ".join(f":{c}" for c in columns)
    sql = f"INSERT INTO {table.name} ({names}) VALUES ({values}) {on_conflict}"  # noqa: S608
    return text(sql).bindparams(*(bindparam(c, type_=table.c[c].type) for c in columns))


_PLAYER_COLUMNS = ("platform", "user_id", "display_name", "created_at")
_SESSION_COLUMNS = ("problem_id", "player_pk", "started_at", "deadline", "points")
_ATTEMPT_COLUMNS = (
    "session_id", "question_version_id", "attempt_no", "letter", "correct", "answered_at", "elapsed_ms",
    "idempotency_key",
)
_COMPLETION_COLUMNS = (
    "challenge_id", "player_pk", "channel_pk", "day", "problems", "correct", "hints_used", "max_answer_ms",
    "points", "completed_at",
)
_BADGE_COLUMNS = ("player_pk", "badge", "scope_key", "challenge_id", "awarded_at")
_STANDING_COLUMNS = ("scope", "period", "player_pk", "points", "correct", "answer_ms")
_INSERT_OR_NOTHING = "ON CONFLICT DO NOTHING RETURNING id"


def _standings_upsert(rows: int) -> Any:
    """Add one answer's points to ``rows`` standings (scope, period) of one player, in one statement."""
    table = StandingRowModel.__table__
    values = ", ".join(f"(:scope_{i}, :period_{i}, :player_pk, :points, 1, :answer_ms)" for i in range(rows))
    sql = (
        f"INSERT INTO standings ({', '.join(_STANDING_COLUMNS)}) VALUES {values} "  # noqa: S608
        "ON CONFLICT (scope, period, player_pk) DO UPDATE SET points = standings.points + excluded.points, "
        "correct = standings.correct + excluded.correct, "
        "answer_ms = standings.answer_ms + excluded.answer_ms"
    )
    binds = [bindparam(c, type_=table.c[c].type) for c in ("player_pk", "points", "answer_ms")]
    for i in range(rows):
        binds.append(bindparam(f"scope_{i}", type_=table.c.scope.type))
        binds.append(bindparam(f"period_{i}", type_=table.c.period.type))
    return text(sql).bindparams(*binds)


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
    INSERT INTO standings ({", ".join(_STANDING_COLUMNS)})
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


def _to_challenge(
    row: ChallengeRow, channel: ChannelRow, problems: tuple[Problem, ...], size: int = 0
) -> Challenge:
    return Challenge(
        id=row.id,
        channel_pk=row.channel_pk,
        channel=ChannelRef(
            channel.platform, channel.workspace_id, channel.channel_id, channel.name, channel.timezone
        ),
        day=row.day,
        status="open" if row.status == "open" else "closed",
        title=row.title,
        opened_at=row.opened_at,
        closes_at=row.closes_at,
        problems=problems,
        message_ref=row.message_ref,
        size=size,
    )


def _to_session(row: PlaySessionRow, attempts: tuple[Attempt, ...]) -> PlaySession:
    return PlaySession(
        id=row.id,
        problem_id=row.problem_id,
        player_pk=row.player_pk,
        started_at=row.started_at,
        deadline=row.deadline,
        hint_used=row.hint_used_at is not None,
        finished_at=row.finished_at,
        outcome=row.outcome,  # type: ignore[arg-type]
        points=row.points,
        attempts=attempts,
    )


#: PostgreSQL's deadlock_detected and serialization_failure: the transaction was aborted, nothing kept.
_TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})


def _sqlstate(error: DBAPIError) -> str | None:
    return getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)


class SqlUnitOfWork:
    """One transaction on one AsyncSession. Use ``async with SqlUnitOfWork(factory) as uow``."""

    def __init__(self, factory: async_sessionmaker[AsyncSession]) -> None:
        self._factory = factory
        self._session: AsyncSession | None = None
        #: True while several jobs share this transaction (bot.storage.group_commit): no job may then
        #: commit or roll back on its own.
        self.shared = False

    @property
    def s(self) -> AsyncSession:
        """The open session (only inside ``async with``)."""
        if self._session is None:
            raise RuntimeError("SqlUnitOfWork used outside 'async with'")
        return self._session

    async def __aenter__(self) -> SqlUnitOfWork:
        self._session = self._factory()
        await self._session.begin()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        session = self.s
        try:
            if exc_type is None and session.in_transaction():
                await session.commit()
            else:
                await session.rollback()
        except DBAPIError as error:
            if _sqlstate(error) in _TRANSIENT_SQLSTATES:
                raise TransientConflictError(str(error.orig)) from error
            raise
        finally:
            await session.close()
            self._session = None
        if isinstance(exc, DBAPIError) and _sqlstate(exc) in _TRANSIENT_SQLSTATES:
            raise TransientConflictError(str(exc.orig)) from exc

    async def commit(self) -> None:
        """Commit and open the next transaction on the same session."""
        self._own_transaction("commit")
        await self.s.commit()
        await self.s.begin()

    async def rollback(self) -> None:
        """Roll back and open the next transaction."""
        self._own_transaction("roll back")
        await self.s.rollback()
        await self.s.begin()

    def _own_transaction(self, what: str) -> None:
        if self.shared:
            # GroupCommit reruns the job in a transaction of its own, where this is allowed.
            raise RuntimeError(f"a job cannot {what} a transaction it shares with other jobs")

    async def next_job(self) -> None:
        """Between two jobs of a shared transaction: write pending objects, forget cached ones."""
        await self.s.flush()
        self.s.expunge_all()

    @property
    def disputes(self) -> SqlDisputeStore:
        """Disputes, flags and answer corrections in this transaction (bot/storage/disputes.py)."""
        from bot.storage.disputes import SqlDisputeStore  # imported here: that module builds on this one

        return SqlDisputeStore(self)

    async def _core(self, stmt: Any, params: Any) -> CursorResult[Any]:
        """Run a hot-path Core statement on the session's connection, past the ORM's execute machinery.

        The ORM's per-call work (statement coercion, compile-state lookups, autoflush, result wrapping) cost
        about as much as the statement's round trip on PostgreSQL (profiled in benchmarks/engine.py). The
        transaction is the session's own; objects added to the session are flushed first, as autoflush would.
        """
        session = self.s
        if session.new or session.dirty or session.deleted:
            await session.flush()
        conn = await session.connection()
        return await conn.execute(stmt, params)

    def _cached(self, name: str, build: Callable[[str], Any]) -> Any:
        """A hot-path statement built once per dialect and reused with bound parameters.

        Building a statement object costs more Python time than running it on SQLite; prebuilt ones also
        always hit SQLAlchemy's compiled cache.
        """
        key = (self.s.bind.dialect.name, name)
        stmt = _STATEMENTS.get(key)
        if stmt is None:
            stmt = _STATEMENTS[key] = build(key[0])
        return stmt

    def _insert(self, model: Any) -> Any:
        """An INSERT that supports ON CONFLICT on both backends."""
        dialect = self.s.bind.dialect.name
        return postgresql.insert(model) if dialect == "postgresql" else sqlite.insert(model)

    # ---------------------------------------------------------------- players and channels
    async def ensure_channel(self, ref: ChannelRef) -> int:
        """The channel's primary key, creating the row if needed."""
        key = (ChannelRow.platform == ref.platform) & (ChannelRow.workspace_id == ref.workspace_id)
        key &= ChannelRow.channel_id == ref.channel_id
        pk = await self.s.scalar(select(ChannelRow.id).where(key))
        if pk is not None:
            return pk
        stmt = self._insert(ChannelRow).values(
            platform=ref.platform,
            workspace_id=ref.workspace_id,
            channel_id=ref.channel_id,
            name=ref.name,
            timezone=ref.timezone,
            created_at=dt.datetime.now(dt.UTC),
        )
        await self.s.execute(stmt.on_conflict_do_nothing())
        pk = await self.s.scalar(select(ChannelRow.id).where(key))
        assert pk is not None
        return int(pk)

    async def ensure_player(self, ref: PlayerRef, *, likely_new: bool = False) -> int:
        """The player's primary key, creating it or refreshing the display name.

        ``likely_new``: the caller just read that the player does not exist (the start path's context),
        so try the INSERT first and skip the lookup.
        """
        key = (PlayerRow.platform == ref.platform) & (PlayerRow.user_id == ref.user_id)
        if not likely_new:
            row = (await self.s.execute(select(PlayerRow.id, PlayerRow.display_name).where(key))).first()
            if row is not None:
                if row.display_name != ref.display_name:
                    await self.s.execute(
                        update(PlayerRow).where(PlayerRow.id == row.id).values(display_name=ref.display_name)
                    )
                return int(row.id)
        stmt = self._cached(
            "insert_player", lambda _: _upsert_sql(PlayerRow.__table__, _PLAYER_COLUMNS, _INSERT_OR_NOTHING)
        )
        params = {"platform": ref.platform, "user_id": ref.user_id, "display_name": ref.display_name,
                  "created_at": dt.datetime.now(dt.UTC)}
        pk = (await self._core(stmt, params)).scalar()
        if pk is None:  # created concurrently (or it existed after all): read it
            return await self.ensure_player(ref)
        return int(pk)

    async def player_name(self, player_pk: int) -> str:
        """A player's display name."""
        return (await self.s.scalar(select(PlayerRow.display_name).where(PlayerRow.id == player_pk))) or "?"

    # ---------------------------------------------------------------- questions
    async def _latest_versions(self) -> dict[str, QuestionVersionRow]:
        latest = (
            select(QuestionVersionRow.question_id, func.max(QuestionVersionRow.version).label("v"))
            .group_by(QuestionVersionRow.question_id)
            .subquery()
        )
        rows = await self.s.scalars(
            select(QuestionVersionRow).join(
                latest,
                and_(
                    QuestionVersionRow.question_id == latest.c.question_id,
                    QuestionVersionRow.version == latest.c.v,
                ),
            )
        )
        return {r.question_id: r for r in rows}

    async def sync_questions(self, specs: Sequence[dict[str, Any]], now: dt.datetime) -> SyncReport:
        """Insert new questions and new versions of changed ones; versions are never rewritten."""
        latest = await self._latest_versions()
        added: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        for spec in specs:
            qid = spec["id"]
            digest = content_hash(spec)
            current = latest.get(qid)
            if spec.get("retired"):
                # A bank file retires a question by flagging it (removing it would leave it in rotation):
                # never picked again, while past attempts keep pointing at the version they were asked.
                await self._retire_on_import(qid, current is None, now)
            if current is not None and current.content_hash == digest:
                unchanged.append(qid)
                continue
            if current is not None and await self._had_content(qid, digest):
                # An older version had this content (e.g. a bank file re-imported after an admin
                # corrected the answer in the database): keep the newer version, never resurrect it.
                unchanged.append(qid)
                continue
            if current is None:
                if not spec.get("retired"):
                    self.s.add(QuestionModel(id=qid, created_at=now, retired_at=None))
                version = 1
                added.append(qid)
            else:
                version = current.version + 1
                updated.append(qid)
            self.s.add(
                QuestionVersionRow(
                    question_id=qid,
                    version=version,
                    content_hash=digest,
                    kind=spec["kind"],
                    topic=spec["topic"],
                    difficulty=spec["difficulty"],
                    spec=spec,
                    created_at=now,
                )
            )
            await self.s.flush()
        return SyncReport(tuple(added), tuple(updated), tuple(unchanged))

    async def _retire_on_import(self, question_id: str, is_new: bool, now: dt.datetime) -> None:
        if is_new:
            # Stored retired from its first version: it was never in rotation here.
            self.s.add(QuestionModel(id=question_id, created_at=now, retired_at=now))
            await self.s.flush()
            return
        await self.s.execute(
            update(QuestionModel)
            .where(QuestionModel.id == question_id, QuestionModel.retired_at.is_(None))
            .values(retired_at=now)
        )

    async def _had_content(self, question_id: str, digest: str) -> bool:
        found = await self.s.scalar(
            select(QuestionVersionRow.id).where(
                QuestionVersionRow.question_id == question_id, QuestionVersionRow.content_hash == digest
            )
        )
        return found is not None

    async def retire_question(self, question_id: str, now: dt.datetime) -> bool:
        """Retire a question; False if it does not exist."""
        exists = await self.s.scalar(select(QuestionModel.id).where(QuestionModel.id == question_id))
        if exists is None:
            return False
        await self.s.execute(
            update(QuestionModel)
            .where(QuestionModel.id == question_id, QuestionModel.retired_at.is_(None))
            .values(retired_at=now)
        )
        return True

    async def list_questions(self, include_retired: bool) -> list[QuestionRow]:
        """Every question with its latest version's metadata."""
        latest = await self._latest_versions()
        retired = dict(
            (await self.s.execute(select(QuestionModel.id, QuestionModel.retired_at))).tuples().all()
        )
        out = [
            QuestionRow(qid, v.version, v.kind, v.topic, v.difficulty, retired.get(qid) is not None)
            for qid, v in sorted(latest.items())
        ]
        return [r for r in out if include_retired or not r.retired]

    async def latest_question(self, question_id: str) -> Question | None:
        """The latest version of a question."""
        row = await self.s.scalar(
            select(QuestionVersionRow)
            .where(QuestionVersionRow.question_id == question_id)
            .order_by(QuestionVersionRow.version.desc())
            .limit(1)
        )
        return question_from_version(row) if row is not None else None

    async def latest_specs(self, include_retired: bool) -> list[dict[str, Any]]:
        """The latest version of every question as its spec dict."""
        rows = await self.list_questions(include_retired)
        latest = await self._latest_versions()
        return [latest[r.id].spec for r in rows]

    async def question_candidates(self, channel_pk: int, kinds: Sequence[str]) -> list[QuestionCandidate]:
        """Active questions of these kinds (latest version) and their use count in this channel."""
        latest = (
            select(QuestionVersionRow.question_id, func.max(QuestionVersionRow.version).label("v"))
            .group_by(QuestionVersionRow.question_id)
            .subquery()
        )
        used = (
            select(
                QuestionVersionRow.question_id.label("qid"),
                func.count(ProblemRow.id).label("n"),
                func.max(ChallengeRow.day).label("last"),
            )
            .join(ProblemRow, ProblemRow.question_version_id == QuestionVersionRow.id)
            .join(ChallengeRow, ChallengeRow.id == ProblemRow.challenge_id)
            .where(ChallengeRow.channel_pk == channel_pk)
            .group_by(QuestionVersionRow.question_id)
            .subquery()
        )
        stmt = (
            select(QuestionVersionRow, func.coalesce(used.c.n, 0), used.c.last)
            .join(
                latest,
                and_(
                    QuestionVersionRow.question_id == latest.c.question_id,
                    QuestionVersionRow.version == latest.c.v,
                ),
            )
            .join(QuestionModel, QuestionModel.id == QuestionVersionRow.question_id)
            .outerjoin(used, used.c.qid == QuestionVersionRow.question_id)
            .where(QuestionModel.retired_at.is_(None), QuestionVersionRow.kind.in_(list(kinds)))
            .order_by(QuestionVersionRow.question_id)
        )
        return [
            QuestionCandidate(v.id, v.question_id, v.topic, v.difficulty, v.kind, int(n), last)
            for v, n, last in (await self.s.execute(stmt)).tuples()
        ]

    # ---------------------------------------------------------------- challenges
    async def _challenge(self, row: ChallengeRow | None) -> Challenge | None:
        if row is None:
            return None
        channel = await self.s.get_one(ChannelRow, row.channel_pk)
        return _to_challenge(row, channel, await self._problems(row.id, row.time_limit_s, row.attempts))

    async def _problems(
        self, challenge_id: int, time_limit_s: int | None, attempts: int | None
    ) -> tuple[Problem, ...]:
        """A challenge's problems in order, as asked (questions from the version cache, no JSON read)."""
        stmt = self._cached("problems", _problems_statement)
        problems = []
        for r in (await self._core(stmt, {"challenge_id": challenge_id})).all():
            question = await self._question(r.v_id, r.v_question_id, r.v_version, r.v_hash)
            if time_limit_s is not None or attempts is not None:
                question = _override(question, time_limit_s, attempts)
            problems.append(Problem(r.p_id, challenge_id, r.p_position, question))
        return tuple(problems)

    async def find_challenge(self, ref: ChannelRef, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day, found by the channel's platform ids (no channel row needed)."""
        stmt = self._cached("find_challenge", _find_challenge_statement)
        params = {"platform": ref.platform, "workspace_id": ref.workspace_id, "channel_id": ref.channel_id,
                  "day": day}
        r = (await self._core(stmt, params)).first()
        if r is None:
            return None
        return _challenge_from_columns(r, await self._problems(r.c_id, r.c_time_limit_s, r.c_attempts))

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
        stmt = self._cached(f"play_context:{for_answer}", lambda _: _play_context_statement(for_answer))
        params: dict[str, Any] = {"problem_id": problem_id, "platform": player.platform,
                                  "user_id": player.user_id}
        if for_answer:
            params["key"] = idempotency_key
        rows = (await self._core(stmt, params)).all()
        if not rows:
            return None
        r = rows[0]
        challenge = _challenge_from_columns(r, (), size=int(r.n_problems))
        question = await self._question(r.v_id, r.v_question_id, r.v_version, r.v_hash)
        if r.c_time_limit_s is not None or r.c_attempts is not None:
            question = _override(question, r.c_time_limit_s, r.c_attempts)
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

    async def _question(self, version_id: int, question_id: str, version: int, digest: str) -> Question:
        """A question version, parsed once per process (versions are immutable; see ``_QUESTIONS``)."""
        key = (version_id, question_id, version, digest)
        question = _QUESTIONS.get(key)
        if question is None:
            row = await self.s.get_one(QuestionVersionRow, version_id)
            question = question_from_version(row)
            if len(_QUESTIONS) >= _QUESTIONS_MAX:
                _QUESTIONS.clear()  # crude bound; a bank has hundreds of versions, not thousands
            _QUESTIONS[key] = question
        return question

    async def finished_count(self, challenge_id: int, player_pk: int) -> int:
        """How many of a challenge's problems are over for a player."""
        stmt = self._cached(
            "finished_count",
            lambda _: select(func.count(PlaySessionRow.id))
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .where(
                ProblemRow.challenge_id == bindparam("challenge_id"),
                PlaySessionRow.player_pk == bindparam("player_pk"),
                PlaySessionRow.outcome.is_not(None),
            ),
        )
        n = (await self.s.execute(stmt, {"challenge_id": challenge_id, "player_pk": player_pk})).scalar()
        return int(n or 0)

    async def get_challenge(self, channel_pk: int, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day."""
        row = await self.s.scalar(
            select(ChallengeRow).where(ChallengeRow.channel_pk == channel_pk, ChallengeRow.day == day)
        )
        return await self._challenge(row)

    async def get_challenge_by_id(self, challenge_id: int) -> Challenge | None:
        """A challenge by id."""
        return await self._challenge(await self.s.get(ChallengeRow, challenge_id))

    async def latest_challenge(self, channel_pk: int) -> Challenge | None:
        """The channel's most recent challenge."""
        row = await self.s.scalar(
            select(ChallengeRow)
            .where(ChallengeRow.channel_pk == channel_pk)
            .order_by(ChallengeRow.day.desc())
            .limit(1)
        )
        return await self._challenge(row)

    async def create_challenge(
        self,
        channel_pk: int,
        day: dt.date,
        title: str,
        version_ids: Sequence[int],
        opened_at: dt.datetime,
        closes_at: dt.datetime | None,
        *,
        time_limit_s: int | None = None,
        attempts: int | None = None,
    ) -> Challenge:
        """Create the day's challenge; AlreadyExistsError when the channel already has that day's."""
        stmt = (
            self._insert(ChallengeRow)
            .values(
                channel_pk=channel_pk,
                day=day,
                title=title,
                status="open",
                opened_at=opened_at,
                closes_at=closes_at,
                time_limit_s=time_limit_s,
                attempts=attempts,
            )
            .on_conflict_do_nothing()
            .returning(ChallengeRow.id)
        )
        challenge_id = await self.s.scalar(stmt)
        if challenge_id is None:
            raise AlreadyExistsError(f"channel {channel_pk} already has a challenge for {day}")
        self.s.add_all(
            ProblemRow(challenge_id=challenge_id, position=i, question_version_id=v)
            for i, v in enumerate(version_ids, start=1)
        )
        await self.s.flush()
        challenge = await self.get_challenge_by_id(challenge_id)
        assert challenge is not None
        return challenge

    async def close_challenge(self, challenge_id: int, now: dt.datetime) -> bool:
        """Close if open; True only for the caller that closed it."""
        result = await self.s.execute(
            update(ChallengeRow)
            .where(ChallengeRow.id == challenge_id, ChallengeRow.status == "open")
            .values(status="closed", closed_at=now)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    # ---------------------------------------------------------------- schedules
    async def _schedules(self, where: Any) -> list[Schedule]:
        rows = (
            await self.s.execute(
                select(ScheduleRow, ChannelRow)
                .join(ChannelRow, ChannelRow.id == ScheduleRow.channel_pk)
                .where(where)
                .order_by(ScheduleRow.channel_pk)
            )
        ).tuples()
        return [
            Schedule(
                channel_pk=r.channel_pk,
                channel=ChannelRef(c.platform, c.workspace_id, c.channel_id, c.name, c.timezone),
                config=ScheduleConfig(
                    hour=r.post_hour,
                    minute=r.post_minute,
                    timezone=r.timezone,
                    days=tuple(int(d) for d in r.days),
                    problems=r.problems,
                    time_limit_s=r.time_limit_s,
                    attempts=r.attempts,
                    window_minutes=r.window_minutes,
                    reminder_minutes=r.reminder_minutes,
                    summary_day=r.summary_day,
                    paused=r.paused,
                ),
                updated_at=r.updated_at,
            )
            for r, c in rows
        ]

    async def get_schedule(self, channel_pk: int) -> Schedule | None:
        """A channel's schedule."""
        found = await self._schedules(ScheduleRow.channel_pk == channel_pk)
        return found[0] if found else None

    async def list_schedules(self) -> list[Schedule]:
        """Every stored schedule."""
        return await self._schedules(literal(True))

    async def save_schedule(self, channel_pk: int, config: ScheduleConfig, now: dt.datetime) -> Schedule:
        """Insert or replace the channel's schedule (one row per channel) and adopt its timezone."""
        values = {
            "post_hour": config.hour,
            "post_minute": config.minute,
            "timezone": config.timezone,
            "days": "".join(str(d) for d in sorted(config.days)),
            "problems": config.problems,
            "time_limit_s": config.time_limit_s,
            "attempts": config.attempts,
            "window_minutes": config.window_minutes,
            "reminder_minutes": config.reminder_minutes,
            "summary_day": config.summary_day,
            "paused": config.paused,
            "updated_at": now,
        }
        stmt = self._insert(ScheduleRow).values(channel_pk=channel_pk, **values)
        await self.s.execute(stmt.on_conflict_do_update(index_elements=["channel_pk"], set_=values))
        # Days, streaks and leaderboards of the channel follow the schedule's timezone.
        await self.s.execute(
            update(ChannelRow).where(ChannelRow.id == channel_pk).values(timezone=config.timezone)
        )
        saved = await self.get_schedule(channel_pk)
        assert saved is not None
        return saved

    async def open_windows(self) -> list[tuple[int, int, dt.datetime]]:
        """(challenge id, channel pk, closes_at) of open challenges that have a closing time."""
        rows = await self.s.execute(
            select(ChallengeRow.id, ChallengeRow.channel_pk, ChallengeRow.closes_at)
            .where(ChallengeRow.status == "open", ChallengeRow.closes_at.is_not(None))
            .order_by(ChallengeRow.id)
        )
        return [(int(i), int(c), at) for i, c, at in rows.tuples() if at is not None]

    async def claim(self, kind: str, key: str, now: dt.datetime) -> bool:
        """First insert of (kind, key) wins; a concurrent or later claimer gets False."""
        stmt = self._insert(SchedulerClaimRow).values(kind=kind, key=key, claimed_at=now)
        result = await self.s.execute(stmt.on_conflict_do_nothing())
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def set_message_ref(self, challenge_id: int, message_ref: str) -> None:
        """Remember where the challenge was posted."""
        await self.s.execute(
            update(ChallengeRow).where(ChallengeRow.id == challenge_id).values(message_ref=message_ref)
        )

    async def delete_unposted_challenge(self, challenge_id: int) -> bool:
        """Remove a challenge whose post the platform refused (never posted, so nobody saw or played it);
        its problems go with it (ON DELETE CASCADE). False when it was posted or played meanwhile.
        """
        played = select(PlaySessionRow.id).join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
        played = played.where(ProblemRow.challenge_id == challenge_id)
        result = await self.s.execute(
            delete(ChallengeRow).where(
                ChallengeRow.id == challenge_id, ChallengeRow.message_ref.is_(None), ~played.exists()
            )
        )
        return isinstance(result, CursorResult) and result.rowcount > 0

    async def adopt_window(self, challenge_id: int, closes_at: dt.datetime) -> bool:
        """Give an open challenge without a closing time this one; True only for the caller that did."""
        result = await self.s.execute(
            update(ChallengeRow)
            .where(
                ChallengeRow.id == challenge_id,
                ChallengeRow.status == "open",
                ChallengeRow.closes_at.is_(None),
            )
            .values(closes_at=closes_at)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def challenge_id_of_problem(self, problem_id: int) -> int | None:
        """The challenge a problem belongs to."""
        found = await self.s.scalar(select(ProblemRow.challenge_id).where(ProblemRow.id == problem_id))
        return int(found) if found is not None else None

    # ---------------------------------------------------------------- plays
    async def _sessions(self, where: Any) -> list[PlaySession]:
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
        return [_to_session(r, tuple(attempts[r.id])) for r in rows]

    async def get_session(self, problem_id: int, player_pk: int) -> PlaySession | None:
        """A player's session on a problem."""
        found = await self._sessions(
            and_(PlaySessionRow.problem_id == problem_id, PlaySessionRow.player_pk == player_pk)
        )
        return found[0] if found else None

    async def create_session(
        self, problem_id: int, player_pk: int, started_at: dt.datetime, deadline: dt.datetime
    ) -> PlaySession:
        """Start a problem; an existing session is returned unchanged (its deadline keeps running)."""
        stmt = self._cached(
            "create_session",
            lambda _: _upsert_sql(PlaySessionRow.__table__, _SESSION_COLUMNS, _INSERT_OR_NOTHING),
        )
        params = {"problem_id": problem_id, "player_pk": player_pk, "started_at": started_at,
                  "deadline": deadline, "points": 0}
        new_id = (await self._core(stmt, params)).scalar()
        if new_id is not None:
            return PlaySession(new_id, problem_id, player_pk, started_at, deadline, False, None, None, 0, ())
        found = await self.get_session(problem_id, player_pk)
        assert found is not None
        return found

    async def sessions_in_challenge(self, challenge_id: int, player_pk: int) -> list[PlaySession]:
        """A player's sessions on a challenge."""
        problem_ids = select(ProblemRow.id).where(ProblemRow.challenge_id == challenge_id)
        return await self._sessions(
            and_(PlaySessionRow.player_pk == player_pk, PlaySessionRow.problem_id.in_(problem_ids))
        )

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

    async def add_attempt(
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
        stmt = self._cached(
            "add_attempt",
            lambda _: _upsert_sql(AttemptRow.__table__, _ATTEMPT_COLUMNS, _INSERT_OR_NOTHING),
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
        if (await self._core(stmt, params)).scalar() is None:
            raise AttemptConflictError(f"attempt {attempt_no} of session {session_id} (or its key) is taken")

    async def record_answer(self, write: AnswerWrite) -> bool:
        """Store an answer: the attempt, then (if asked) the end of the session and the standings.

        PostgreSQL: one statement (data-modifying CTEs, each step conditional on the one before), so the
        answer path's writes cost one round trip instead of three. SQLite: the same three steps as three
        statements (no data-modifying CTEs there; its statements cost no network round trip).
        """
        if write.standings is not None and write.outcome is None:
            raise ValueError("standings move only when the answer ends the session: outcome is missing")
        if self.s.bind.dialect.name == "postgresql" and write.standings is not None:
            scopes, periods = write.standings
            keys = [(sc, pe) for sc in scopes for pe in periods]
            stmt = self._cached(f"record_answer:{len(keys)}", lambda _: _record_answer_pg(len(keys)))
            params: dict[str, Any] = {
                "session_id": write.session_id, "question_version_id": write.question_version_id,
                "attempt_no": write.attempt_no, "letter": write.letter, "correct": write.correct,
                "answered_at": write.answered_at, "elapsed_ms": write.elapsed_ms,
                "idempotency_key": write.idempotency_key, "outcome": write.outcome, "points": write.points,
                "player_pk": write.player_pk,
            }
            for i, (scope, period) in enumerate(keys):
                params[f"scope_{i}"] = scope
                params[f"period_{i}"] = period
            row = (await self._core(stmt, params)).one()
            if not row.inserted:
                raise AttemptConflictError(
                    f"attempt {write.attempt_no} of session {write.session_id} (or its key) is taken"
                )
            return bool(row.finished)
        await self.add_attempt(
            write.session_id, write.attempt_no, write.letter, write.correct, write.answered_at,
            write.elapsed_ms, write.idempotency_key, write.question_version_id,
        )
        if write.outcome is None:
            return False
        if not await self.finish_session(write.session_id, write.outcome, write.points, write.answered_at):
            return False
        if write.standings is not None:
            scopes, periods = write.standings
            await self.add_to_standings(scopes, periods, write.player_pk, write.points, write.elapsed_ms)
        return True

    async def attempt_by_key(self, idempotency_key: str) -> tuple[int, int] | None:
        """(problem id, player pk) of the attempt with this idempotency key."""
        row = (
            await self.s.execute(
                select(PlaySessionRow.problem_id, PlaySessionRow.player_pk)
                .join(AttemptRow, AttemptRow.session_id == PlaySessionRow.id)
                .where(AttemptRow.idempotency_key == idempotency_key)
            )
        ).first()
        return (int(row[0]), int(row[1])) if row else None

    async def finish_session(
        self, session_id: int, outcome: str, points: int, finished_at: dt.datetime
    ) -> bool:
        """End a session once; True only for the call that ended it."""
        table: Table = PlaySessionRow.__table__  # type: ignore[assignment]
        stmt = self._cached(
            "finish_session",
            lambda _: update(table)
            .where(table.c.id == bindparam("sid"), table.c.outcome.is_(None))
            .values(outcome=bindparam("outcome"), points=bindparam("points"), finished_at=bindparam("at")),
        )
        params = {"sid": session_id, "outcome": outcome, "points": points, "at": finished_at}
        result = await self._core(stmt, params)
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

    # ---------------------------------------------------------------- standings, completions, badges
    async def add_to_standings(
        self, scopes: Sequence[str], periods: Sequence[str], player_pk: int, points: int, answer_ms: int
    ) -> None:
        """Upsert the player's standing in every (scope, period)."""
        keys = [(s, p) for s in scopes for p in periods]
        # One multi-row upsert (prebuilt per row count: 6 on the answer path), not an executemany: one
        # statement for the database to run instead of six.
        stmt = self._cached(f"add_to_standings:{len(keys)}", lambda _: _standings_upsert(len(keys)))
        params: dict[str, Any] = {"player_pk": player_pk, "points": points, "answer_ms": answer_ms}
        for i, (scope, period) in enumerate(keys):
            params[f"scope_{i}"] = scope
            params[f"period_{i}"] = period
        await self._core(stmt, params)

    async def leaderboard(
        self, scope: str, period: str, limit: int, player_pk: int | None
    ) -> tuple[list[StandingRow], StandingRow | None, int]:
        """Top rows by points (ties: less total answer time first), the caller's row, ranked count."""
        st = StandingRowModel
        base = (st.scope == scope) & (st.period == period)
        top = (
            await self.s.execute(
                select(st.player_pk, PlayerRow.display_name, st.points, st.correct, st.answer_ms)
                .join(PlayerRow, PlayerRow.id == st.player_pk)
                .where(base)
                .order_by(st.points.desc(), st.answer_ms.asc(), st.player_pk.asc())
                .limit(limit)
            )
        ).all()
        rows = [StandingRow(i, r[0], r[1], r[2], r[3], r[4]) for i, r in enumerate(top, start=1)]
        total = int(await self.s.scalar(select(func.count()).select_from(st).where(base)) or 0)
        me: StandingRow | None = next((r for r in rows if r.player_pk == player_pk), None)
        if me is None and player_pk is not None:
            mine = (
                await self.s.execute(
                    select(st.points, st.correct, st.answer_ms, PlayerRow.display_name)
                    .join(PlayerRow, PlayerRow.id == st.player_pk)
                    .where(base, st.player_pk == player_pk)
                )
            ).first()
            if mine is not None:
                ahead = await self.s.scalar(
                    select(func.count())
                    .select_from(st)
                    .where(
                        base,
                        or_(
                            st.points > mine.points,
                            and_(st.points == mine.points, st.answer_ms < mine.answer_ms),
                            and_(
                                st.points == mine.points,
                                st.answer_ms == mine.answer_ms,
                                st.player_pk < player_pk,
                            ),
                        ),
                    )
                )
                me = StandingRow(
                    int(ahead or 0) + 1,
                    player_pk,
                    mine.display_name,
                    mine.points,
                    mine.correct,
                    mine.answer_ms,
                )
        return rows, me, total

    async def record_completion(
        self, challenge: Challenge, player_pk: int, row: CompletionRow, points: int
    ) -> bool:
        """Record a completed challenge; True the first time."""
        stmt = self._cached(
            "record_completion",
            lambda _: _upsert_sql(CompletionRowModel.__table__, _COMPLETION_COLUMNS, _INSERT_OR_NOTHING),
        )
        params = {
            "challenge_id": challenge.id,
            "player_pk": player_pk,
            "channel_pk": challenge.channel_pk,
            "day": challenge.day,
            "problems": row.problems,
            "correct": row.correct,
            "hints_used": row.hints_used,
            "max_answer_ms": round(row.max_answer_s * 1000),
            "points": points,
            "completed_at": dt.datetime.now(dt.UTC),
        }
        return (await self._core(stmt, params)).scalar() is not None

    async def completions(self, player_pk: int, channel_pk: int | None) -> list[CompletionRow]:
        """A player's completed challenges."""
        c = CompletionRowModel
        stmt = select(c).where(c.player_pk == player_pk)
        if channel_pk is not None:
            stmt = stmt.where(c.channel_pk == channel_pk)
        return [
            CompletionRow(r.day, r.problems, r.correct, r.hints_used, r.max_answer_ms / 1000)
            for r in await self.s.scalars(stmt.order_by(c.day))
        ]

    async def completion_days(
        self, channel_pk: int, player_pks: Sequence[int]
    ) -> dict[int, list[dt.date]]:
        """The days each of these players completed a challenge in one channel (one query)."""
        c = CompletionRowModel
        days: dict[int, list[dt.date]] = {pk: [] for pk in player_pks}
        if not days:
            return days
        stmt = (
            select(c.player_pk, c.day)
            .where(c.channel_pk == channel_pk, c.player_pk.in_(list(days)))
            .order_by(c.player_pk, c.day)
        )
        for player_pk, day in (await self.s.execute(stmt)).tuples():
            days[int(player_pk)].append(day)
        return days

    async def award_badges(
        self, player_pk: int, challenge_id: int, awards: Sequence[tuple[str, str]], at: dt.datetime
    ) -> list[str]:
        """Award badges idempotently; return the newly awarded codes."""
        stmt = self._cached(
            "award_badge", lambda _: _upsert_sql(BadgeRow.__table__, _BADGE_COLUMNS, _INSERT_OR_NOTHING)
        )
        new: list[str] = []
        for code, scope_key in awards:
            params = {"player_pk": player_pk, "badge": code, "scope_key": scope_key,
                      "challenge_id": challenge_id, "awarded_at": at}
            if (await self._core(stmt, params)).scalar() is not None:
                new.append(code)
        return new

    async def badge_counts(self, player_pk: int) -> dict[str, int]:
        """Badge code -> times earned."""
        rows = await self.s.execute(
            select(BadgeRow.badge, func.count())
            .where(BadgeRow.player_pk == player_pk)
            .group_by(BadgeRow.badge)
        )
        return {code: int(n) for code, n in rows.tuples()}

    async def challenge_badges(self, challenge_id: int) -> list[tuple[int, str]]:
        """(player pk, badge) awarded on a challenge."""
        rows = await self.s.execute(
            select(BadgeRow.player_pk, BadgeRow.badge)
            .where(BadgeRow.challenge_id == challenge_id)
            .order_by(BadgeRow.id)
        )
        return [(int(p), str(b)) for p, b in rows.tuples()]

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

    async def challenge_standings(self, challenge_id: int) -> list[StandingRow]:
        """Players of one challenge ranked by points, then by total time to their correct answers."""
        correct_ms = (
            select(AttemptRow.session_id, func.min(AttemptRow.elapsed_ms).label("ms"))
            .where(AttemptRow.correct.is_(True))
            .group_by(AttemptRow.session_id)
            .subquery()
        )
        rows = (
            await self.s.execute(
                select(
                    PlaySessionRow.player_pk,
                    PlayerRow.display_name,
                    func.sum(PlaySessionRow.points).label("pts"),
                    func.count(correct_ms.c.session_id).label("ok"),
                    func.coalesce(func.sum(correct_ms.c.ms), 0).label("ms"),
                )
                .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
                .join(PlayerRow, PlayerRow.id == PlaySessionRow.player_pk)
                .outerjoin(correct_ms, correct_ms.c.session_id == PlaySessionRow.id)
                .where(ProblemRow.challenge_id == challenge_id)
                .group_by(PlaySessionRow.player_pk, PlayerRow.display_name)
                .order_by(
                    func.sum(PlaySessionRow.points).desc(), func.coalesce(func.sum(correct_ms.c.ms), 0).asc()
                )
            )
        ).tuples()
        return [
            StandingRow(i, int(p), str(name), int(pts or 0), int(ok), int(ms))
            for i, (p, name, pts, ok, ms) in enumerate(rows, start=1)
        ]

    async def player_points(self, player_pk: int) -> int:
        """All points a player earned in challenges."""
        total = await self.s.scalar(
            select(func.coalesce(func.sum(PlaySessionRow.points), 0)).where(
                PlaySessionRow.player_pk == player_pk
            )
        )
        return int(total or 0)

    async def player_accuracy(self, player_pk: int, by: str) -> list[tuple[str, int, int]]:
        """(topic or kind, finished problems, solved)."""
        col = QuestionVersionRow.topic if by == "topic" else QuestionVersionRow.kind
        solved = func.sum(
            func.cast(PlaySessionRow.outcome == literal("correct"), type_=ProblemRow.position.type)
        )
        rows = await self.s.execute(
            select(col, func.count(), solved)
            .select_from(PlaySessionRow)
            .join(ProblemRow, ProblemRow.id == PlaySessionRow.problem_id)
            .join(QuestionVersionRow, QuestionVersionRow.id == ProblemRow.question_version_id)
            .where(PlaySessionRow.player_pk == player_pk, PlaySessionRow.outcome.is_not(None))
            .group_by(col)
            .order_by(col)
        )
        return [(str(name), int(n), int(ok or 0)) for name, n, ok in rows.tuples()]


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """A session factory whose objects stay usable after commit (we return plain values anyway)."""
    return async_sessionmaker(engine, expire_on_commit=False, autobegin=False)
