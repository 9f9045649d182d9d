"""What every SQL repository shares: the unit of work's open session and the statement helpers.

``SqlContext`` is the one object a unit of work hands its repositories: the session of the current
transaction (set on ``async with``), plus the hot-path helpers (prebuilt statements, Core execution past
the ORM, an INSERT that supports ON CONFLICT on both backends). ``upsert_sql`` and the standings upsert
are the typed ``text()`` statements the answer path uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.storage.models import QuestionRow as QuestionModel
from bot.storage.models import QuestionVersionRow, StandingRowModel

#: Prebuilt hot-path statements by (dialect, name); see ``SqlContext.cached``.
_STATEMENTS: dict[tuple[str, str], Any] = {}

#: PostgreSQL's deadlock_detected and serialization_failure: the transaction was aborted, nothing kept.
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})

INSERT_OR_NOTHING = "ON CONFLICT DO NOTHING RETURNING id"
STANDING_COLUMNS = ("scope", "period", "player_pk", "points", "correct", "answer_ms")


def sqlstate(error: DBAPIError) -> str | None:
    """The SQLSTATE of a driver error (asyncpg and psycopg spell the attribute differently)."""
    return getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)


class SqlContext:
    """The session of one unit of work's transaction, shared by the repositories it hands out."""

    def __init__(self) -> None:
        self.session: AsyncSession | None = None

    @property
    def s(self) -> AsyncSession:
        """The open session (only inside the unit of work's ``async with``)."""
        if self.session is None:
            raise RuntimeError("SqlUnitOfWork used outside 'async with'")
        return self.session

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.s.bind.dialect.name

    async def core(self, stmt: Any, params: Any) -> CursorResult[Any]:
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

    def cached(self, name: str, build: Callable[[str], Any]) -> Any:
        """A hot-path statement built once per dialect and reused with bound parameters.

        Building a statement object costs more Python time than running it on SQLite; prebuilt ones also
        always hit SQLAlchemy's compiled cache.
        """
        key = (self.dialect, name)
        stmt = _STATEMENTS.get(key)
        if stmt is None:
            stmt = _STATEMENTS[key] = build(key[0])
        return stmt

    def insert(self, model: Any) -> Any:
        """An INSERT that supports ON CONFLICT on both backends."""
        return postgresql.insert(model) if self.dialect == "postgresql" else sqlite.insert(model)


class SqlRepository:
    """Base of the ``Sql*Repository`` classes: they read and write through one unit of work's context."""

    def __init__(self, db: SqlContext) -> None:
        self._db = db

    @property
    def s(self) -> AsyncSession:
        """The unit of work's open session."""
        return self._db.s


def upsert_sql(table: Any, columns: Sequence[str], on_conflict: str) -> Any:
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


def standings_upsert(rows: int) -> Any:
    """Add one answer's points to ``rows`` standings (scope, period) of one player, in one statement."""
    table = StandingRowModel.__table__
    values = ", ".join(f"(:scope_{i}, :period_{i}, :player_pk, :points, 1, :answer_ms)" for i in range(rows))
    sql = (
        f"INSERT INTO standings ({', '.join(STANDING_COLUMNS)}) VALUES {values} "  # noqa: S608
        "ON CONFLICT (scope, period, player_pk) DO UPDATE SET points = standings.points + excluded.points, "
        "correct = standings.correct + excluded.correct, "
        "answer_ms = standings.answer_ms + excluded.answer_ms"
    )
    binds = [bindparam(c, type_=table.c[c].type) for c in ("player_pk", "points", "answer_ms")]
    for i in range(rows):
        binds.append(bindparam(f"scope_{i}", type_=table.c.scope.type))
        binds.append(bindparam(f"period_{i}", type_=table.c.period.type))
    return text(sql).bindparams(*binds)


def visible_versions(view: str | None) -> Any:
    """A WHERE clause over QuestionRow and QuestionVersionRow: the versions the tenant keyed ``view``
    sees (shared questions and its own; shared versions and its own corrections), or with None only the
    operator's shared bank. The one place that decides what a tenant sees of the bank.
    """
    q, v = QuestionModel, QuestionVersionRow
    if view is None:
        return and_(q.owner_tenant.is_(None), v.tenant.is_(None))
    return and_(
        or_(q.owner_tenant.is_(None), q.owner_tenant == view),
        or_(v.tenant.is_(None), v.tenant == view),
    )


def latest_versions(view: str | None = None) -> Any:
    """A subquery of (question_id, v): every question's latest version number that ``view`` (a tenant
    key, or None: the shared bank) sees.
    """
    return (
        select(QuestionVersionRow.question_id, func.max(QuestionVersionRow.version).label("v"))
        .join(QuestionModel, QuestionModel.id == QuestionVersionRow.question_id)
        .where(visible_versions(view))
        .group_by(QuestionVersionRow.question_id)
        .subquery()
    )
