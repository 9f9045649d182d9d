"""RankZero engine benchmark: the answer path and the leaderboard, on SQLite and PostgreSQL, side by side.

What is measured, and why
-------------------------
1. **Answer path.** N players (default 1,000) each open the day's challenge (created once, shared by the
   channel) and, for each of its 5 problems, call ``start_problem`` then ``answer`` through the real
   ``QuizService`` (real ``SystemClock``, real unit of work, idempotency keys as the chat adapters send
   them). Players run concurrently under an ``asyncio.Semaphore`` (default 64 players in flight), so the
   database sees a steady, bounded burst like a busy channel right after the daily post.

   * ``answers/s`` = answers completed / wall time of the whole run (each answer needs its start_problem,
     so this is the rate at which players get problems played end to end).
   * p50 / p99 latency of the ``answer`` call under that load, and (for reference) at concurrency 1,
     which separates the call's own cost from queueing. That closed loop (64 players, no pause between
     calls) saturates the process, so its latency is queueing by Little's law: latency ~ in flight /
     throughput, whatever the code does.
   * So latency is also measured under open-loop load: players arrive at random (Poisson) at 25 / 50 /
     75 % of the capacity just measured (``--load-levels``), each playing the 5 problems back to back;
     the p99 target (25 ms) is read there.
   * The service is wired as the app wires it (bot/bootstrap.py): the start and answer calls of players
     clicking together share transactions (``bot.storage.group_commit``). The same workload is then run
     with a transaction per call on a fresh database (``--no-compare`` skips it), side by side.
   * On the same database, same engine settings (``bot.storage.db.make_engine``) and same concurrency,
     the raw rate of single-row ``INSERT`` + ``COMMIT`` into a scratch table: the ceiling any write path
     can reach on this machine. ``answers/s / raw inserts/s`` says how much of that ceiling the answer path
     keeps (target >= 0.3).

2. **Leaderboard.** A database holding 1,000,000 attempts by 10,000 players (one channel, one challenge
   per day, 5 problems each) is populated with bulk SQL, not through the service: ``executemany`` in one
   big transaction on SQLite, ``COPY`` (asyncpg ``copy_records_to_table``) on PostgreSQL. ``standings``
   rows are derived from the generated attempts exactly as the service maintains them (scopes
   ``ch:<pk>`` / ``ws:<platform>:<workspace>``, periods ``all`` / ``d:`` / ``w:``, via
   ``bot.core.standings.standing_keys`` and ``scoring.points_for``). Then
   ``QuizService.leaderboard`` (top 10 + the caller's own rank, for a mid-ranked caller so the own-rank
   query runs) is timed ~200 times per scope; target p95 <= 30 ms.

Run ``python benchmarks/engine.py`` (defaults) or ``--players 50 --attempts 20000`` for a smoke run.
PostgreSQL: a fresh temporary database is created on ``--pg-url``'s server and dropped at the end; it is
skipped, with a note, only when no server answers. The machine is shared, so figures are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import math
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.core import scoring
from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.ports import SystemClock
from bot.core.service import QuizService
from bot.core.standings import standing_keys
from bot.storage.db import make_engine, upgrade_async
from bot.storage.group_commit import DEFAULT_MAX_BATCH, GroupCommit, GroupCommitStats, default_lanes
from bot.storage.mapping import content_hash
from bot.storage.uow import SqlUnitOfWork, session_factory

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
PLATFORM = "bench"
WORKSPACE = "ws-bench"
CHANNEL = ChannelRef(PLATFORM, WORKSPACE, "daily", "daily", "UTC")
#: Imports the shared bank, so it is the operator (tenant admins only change their overlay).
ADMIN = Actor(PlayerRef(PLATFORM, "admin", "Admin"), is_admin=True, is_operator=True)
TOPICS = ("DDP", "Collectives", "FSDP", "Scaling", "Checkpointing", "Mixed precision")
LEVELS = ("intermediate", "advanced", "expert")
TIME_LIMIT_S = 120
PROBLEMS_PER_DAY = 5

TARGET_RATIO = 0.3
TARGET_ANSWER_P99_MS = 25.0
TARGET_LEADERBOARD_P95_MS = 30.0


# ---------------------------------------------------------------------------------------------- helpers
def make_spec(qid: str, difficulty: str, topic: str) -> dict[str, Any]:
    """A valid multiple-choice spec (same shape as tests/conftest.make_spec); the correct answer is A."""
    return {
        "id": qid,
        "kind": "conceptual",
        "topic": topic,
        "difficulty": difficulty,
        "prompt": f"Question {qid}?",
        "hint": f"hint for {qid}",
        "explanation": f"because {qid}",
        "time_limit_s": TIME_LIMIT_S,
        "attempts": 2,
        "tags": [],
        "choices": [
            {"text": f"{qid} choice {i}", "correct": i == 0, "feedback": f"fb {i}"} for i in range(4)
        ],
    }


def bank() -> list[dict[str, Any]]:
    """18 questions: 6 per level, topics mixed (the test bank's shape)."""
    return [make_spec(f"{level[:3]}-{i}", level, TOPICS[i]) for level in LEVELS for i in range(6)]


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100, nearest rank) of ``values`` in milliseconds (values are seconds)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[k] * 1000


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


async def bounded(n: int, concurrency: int, job: Callable[[int], Awaitable[None]]) -> float:
    """Run job(0..n-1) with at most ``concurrency`` in flight; return the wall time in seconds."""
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await job(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------- databases
@dataclass
class Backend:
    """One database server kind: how to create (and later drop) a fresh migrated database on it."""

    name: str
    kind: str  # "sqlite" | "postgresql"
    tmpdir: Path | None = None
    pg_admin_url: str | None = None
    created: list[str] = field(default_factory=list)

    async def fresh_database(self, label: str) -> str:
        """A new empty database, migrated to head; returns its SQLAlchemy URL."""
        if self.kind == "sqlite":
            assert self.tmpdir is not None
            url = f"sqlite+aiosqlite:///{self.tmpdir / f'{label}.db'}"
        else:
            assert self.pg_admin_url is not None
            name = f"rz_bench_{label}_{uuid.uuid4().hex[:8]}"
            await pg_admin(self.pg_admin_url, f'CREATE DATABASE "{name}"')
            self.created.append(name)
            url = make_url(self.pg_admin_url).set(database=name).render_as_string(hide_password=False)
        await upgrade_async(url)
        return url

    async def cleanup(self) -> None:
        """Drop what was created."""
        if self.kind == "sqlite" and self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        for name in self.created:
            assert self.pg_admin_url is not None
            await pg_admin(self.pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.created.clear()


def asyncpg_kwargs(url: str) -> dict[str, Any]:
    """asyncpg.connect() keyword arguments for a SQLAlchemy PostgreSQL URL."""
    u = make_url(url)
    return {
        "host": u.host or "127.0.0.1",
        "port": u.port or 5432,
        "user": u.username,
        "password": u.password,
        "database": u.database,
    }


async def pg_admin(url: str, sql: str) -> None:
    """Run one statement on the server's admin database (CREATE/DROP DATABASE)."""
    import asyncpg

    conn = await asyncpg.connect(**asyncpg_kwargs(url), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


# ---------------------------------------------------------------------------------------------- answer path
@dataclass
class LoadLevel:
    """Answer latency under an open-loop load: players arriving at random at a fraction of the capacity."""

    fraction: float
    offered_per_s: float  #: answers/s offered (players/s x 5)
    answer_lat: list[float] = field(default_factory=list)
    wall_s: float = 0.0


@dataclass
class AnswerResult:
    """Figures of the answer-path benchmark on one database."""

    players: int
    concurrency: int
    answers: int
    wall_s: float
    answer_lat: list[float]
    start_lat: list[float]
    solo_lat: list[float]
    raw_inserts: int
    raw_wall_s: float
    errors: Counter[str]
    statements_per_answer: float
    group_commit: GroupCommitStats | None = None
    load_levels: list[LoadLevel] = field(default_factory=list)
    #: the same workload with a transaction per call (no group commit), when measured
    alone: AnswerResult | None = None

    @property
    def answers_per_s(self) -> float:
        return self.answers / self.wall_s

    @property
    def raw_per_s(self) -> float:
        return self.raw_inserts / self.raw_wall_s

    @property
    def ratio(self) -> float:
        return self.answers_per_s / self.raw_per_s


async def raw_insert_rate(engine: AsyncEngine, n: int, concurrency: int) -> float:
    """Wall seconds for ``n`` single-row INSERT+COMMIT transactions into a scratch table."""
    async with engine.begin() as conn:
        await conn.execute(
            text("CREATE TABLE bench_scratch (id INTEGER PRIMARY KEY, k VARCHAR(64) NOT NULL, n INTEGER)")
        )
    stmt = text("INSERT INTO bench_scratch (id, k, n) VALUES (:id, :k, :n)")

    async def one(i: int) -> None:
        async with engine.begin() as conn:
            await conn.execute(stmt, {"id": i + 1, "k": f"key-{i}", "n": i})

    for i in range(n, n + 20):  # warm the pool (ids beyond the timed range)
        await one(i)
    wall = await bounded(n, concurrency, one)
    async with engine.begin() as conn:
        await conn.execute(text("DROP TABLE bench_scratch"))
    return wall


async def bench_answers(
    url: str,
    players: int,
    concurrency: int,
    raw_n: int,
    *,
    group_commit: bool = True,
    load_fractions: Sequence[float] = (),
    load_seconds: float = 4.0,
    max_batch: int = DEFAULT_MAX_BATCH,
) -> AnswerResult:
    """Players start and answer every problem of the day's challenge concurrently.

    ``group_commit``: the app's wiring (bot/bootstrap.py), where the start and answer calls of players
    clicking together share transactions; without it each call has a transaction of its own.
    """
    engine = make_engine(url)
    counting = False
    statements = 0

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _count(*_args: Any) -> None:
        nonlocal statements
        if counting:
            statements += 1

    factory = session_factory(engine)
    tx = None
    if group_commit:
        tx = GroupCommit(lambda: SqlUnitOfWork(factory), lanes=default_lanes(engine), max_batch=max_batch)
    svc = QuizService(lambda: SqlUnitOfWork(factory), SystemClock(), None, seed=1, transactions=tx)
    try:
        await svc.admin_import(ADMIN, bank())
        await svc.open_challenge(CHANNEL)  # created once; every player below reads the same one
        answer_lat: list[float] = []
        start_lat: list[float] = []
        errors: Counter[str] = Counter()
        rng = random.Random(7)
        letters = ["A" if rng.random() < 0.7 else "B" for _ in range(players * PROBLEMS_PER_DAY + 1000)]

        def failed(call: str, exc: Exception) -> None:
            # counted and reported (a failing call is a finding; the benchmark still finishes)
            errors[f"{call}: {type(exc).__name__}"] += 1

        async def play(i: int, prefix: str, answer_sink: list[float], start_sink: list[float] | None) -> None:
            nonlocal counting
            actor = Actor(PlayerRef(PLATFORM, f"{prefix}{i}", f"Player {prefix}{i}"))
            try:
                challenge, _ = await svc.open_challenge(CHANNEL)
            except Exception as exc:
                failed("open_challenge", exc)
                return
            for n, problem in enumerate(challenge.problems):
                t0 = time.perf_counter()
                try:
                    await svc.start_problem(actor, problem.id)
                except Exception as exc:
                    failed("start_problem", exc)
                    continue
                t1 = time.perf_counter()
                counting = prefix == "solo"  # the solo phase runs one call at a time: exact attribution
                try:
                    await svc.answer(
                        actor,
                        problem.id,
                        letters[(i * PROBLEMS_PER_DAY + n) % len(letters)],
                        f"ix-{prefix}{i}-{problem.id}",
                    )
                except Exception as exc:
                    failed("answer", exc)
                    continue
                finally:
                    counting = False
                answer_sink.append(time.perf_counter() - t1)
                if start_sink is not None:
                    start_sink.append(t1 - t0)

        # warm-up (pool, statement caches), not timed
        await bounded(10, 10, lambda i: play(i, "warm", [], None))
        # The raw rate is taken half before and half after the answer run: one short burst of inserts
        # swings by +-30 % with whatever else the shared machine (and the database server) is doing.
        raw_wall = await raw_insert_rate(engine, raw_n // 2, concurrency)
        if tx is not None:
            tx.stats = GroupCommitStats()  # count the timed run only
        wall = await bounded(players, concurrency, lambda i: play(i, "p", answer_lat, start_lat))
        stats = dataclasses.replace(tx.stats) if tx is not None else None
        capacity = len(answer_lat) / wall  # answers/s when saturated
        levels: list[LoadLevel] = []
        for fraction in load_fractions:
            # Open loop: players arrive at random (Poisson) at `fraction` of the capacity just measured, each
            # playing the 5 problems back to back. Latency then shows the path's own cost plus the queueing a
            # real burst below saturation causes, not the queue a saturated closed loop builds (Little's law).
            level = LoadLevel(fraction, fraction * capacity)
            arrivals = random.Random(int(fraction * 1000))
            n_players = max(20, round(level.offered_per_s * load_seconds / PROBLEMS_PER_DAY))
            tasks = []
            t_level = time.perf_counter()
            for i in range(n_players):
                tasks.append(asyncio.create_task(play(i, f"load{fraction}-", level.answer_lat, None)))
                await asyncio.sleep(arrivals.expovariate(level.offered_per_s / PROBLEMS_PER_DAY))
            await asyncio.gather(*tasks)
            level.wall_s = time.perf_counter() - t_level
            levels.append(level)
        solo_lat: list[float] = []
        await bounded(min(40, players), 1, lambda i: play(i, "solo", solo_lat, None))
        raw_wall += await raw_insert_rate(engine, raw_n - raw_n // 2, concurrency)
    finally:
        await engine.dispose()
    return AnswerResult(
        players=players,
        concurrency=concurrency,
        answers=len(answer_lat),
        wall_s=wall,
        answer_lat=answer_lat,
        start_lat=start_lat,
        solo_lat=solo_lat,
        raw_inserts=raw_n,
        raw_wall_s=raw_wall,
        errors=errors,
        statements_per_answer=statements / max(1, len(solo_lat)),
        group_commit=stats,
        load_levels=levels,
    )


# ---------------------------------------------------------------------------------------------- bulk data
Row = tuple[Any, ...]


@dataclass
class Chunk:
    """Rows for one table, in column order."""

    table: str
    columns: tuple[str, ...]
    rows: list[Row]


@dataclass
class Dataset:
    """What the generator produced (counts) and who to ask the leaderboard for."""

    players: int = 0
    sessions: int = 0
    attempts: int = 0
    standings: int = 0
    days: int = 0
    mid_player: PlayerRef | None = None
    mid_rank: int = 0


SESSION_COLS = (
    "id",
    "problem_id",
    "player_pk",
    "started_at",
    "deadline",
    "hint_used_at",
    "finished_at",
    "outcome",
    "points",
)
ATTEMPT_COLS = (
    "id",
    "session_id",
    "question_version_id",
    "attempt_no",
    "letter",
    "correct",
    "answered_at",
    "elapsed_ms",
    "idempotency_key",
)


def generate(
    n_players: int, n_attempts: int, sqlite_values: bool, out: Dataset, chunk_players: int = 500
) -> Iterator[Chunk]:
    """Yield rows for every table in foreign-key order, streaming sessions/attempts in chunks.

    Every player gets ``n_attempts / n_players`` attempts (remainder spread), spent on the problems of
    consecutive daily challenges: a session holds 1 attempt (correct 75 %, else it timed out) or 2 (a wrong
    first answer, then correct 60 %). Standings accumulate every correct session exactly as
    ``QuizService.answer`` does (points from ``scoring.points_for``, answer_ms = elapsed of the correct
    attempt) into both scopes and the three periods of the challenge's day.
    """

    def ts(value: dt.datetime) -> Any:
        # SQLite mode works on naive UTC datetimes: isoformat() is ~10x cheaper than strftime().
        return value.isoformat(" ", "microseconds") if sqlite_values else value

    def day_value(value: dt.date) -> Any:
        return value.isoformat() if sqlite_values else value

    rng = random.Random(42)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    tz = None if sqlite_values else dt.UTC
    now = now.replace(tzinfo=tz)
    per_player = n_attempts // n_players
    extra = n_attempts % n_players
    n_days = max(1, math.ceil((per_player + (1 if extra else 0)) / PROBLEMS_PER_DAY))
    today = now.date()
    days = [today - dt.timedelta(days=n_days - k) for k in range(n_days)]
    out.days = n_days
    out.players = n_players

    channel_pk = 1
    yield Chunk(
        "channels",
        ("id", "platform", "workspace_id", "channel_id", "name", "timezone", "created_at"),
        [
            (
                channel_pk,
                CHANNEL.platform,
                CHANNEL.workspace_id,
                CHANNEL.channel_id,
                CHANNEL.name,
                "UTC",
                ts(now),
            )
        ],
    )
    yield Chunk(
        "players",
        ("id", "platform", "user_id", "display_name", "created_at"),
        [(pk, PLATFORM, f"u{pk}", f"Player {pk}", ts(now)) for pk in range(1, n_players + 1)],
    )
    specs = bank()
    yield Chunk("questions", ("id", "created_at", "retired_at"), [(s["id"], ts(now), None) for s in specs])
    yield Chunk(
        "question_versions",
        ("id", "question_id", "version", "content_hash", "kind", "topic", "difficulty", "spec", "created_at"),
        [
            (i, s["id"], 1, content_hash(s), s["kind"], s["topic"], s["difficulty"], json.dumps(s), ts(now))
            for i, s in enumerate(specs, start=1)
        ],
    )
    difficulty = {i: s["difficulty"] for i, s in enumerate(specs, start=1)}
    opened = [dt.datetime.combine(d, dt.time(9), tzinfo=tz) for d in days]
    yield Chunk(
        "challenges",
        ("id", "channel_pk", "day", "title", "status", "opened_at", "closes_at", "closed_at", "message_ref"),
        [
            (
                c + 1,
                channel_pk,
                day_value(d),
                f"Multi-GPU challenge · {d.isoformat()}",
                "closed" if d < today else "open",
                ts(opened[c]),
                None,
                ts(opened[c] + dt.timedelta(hours=23)) if d < today else None,
                None,
            )
            for c, d in enumerate(days)
        ],
    )
    # problems: challenge c (0-based) holds problem ids 5c+1..5c+5, question versions cycling the bank
    problems: list[tuple[int, int, int]] = []  # (problem id, challenge index, version id)
    for c in range(n_days):
        for pos in range(1, PROBLEMS_PER_DAY + 1):
            pid = c * PROBLEMS_PER_DAY + pos
            problems.append((pid, c, (pid - 1) % len(specs) + 1))
    yield Chunk(
        "problems",
        ("id", "challenge_id", "position", "question_version_id"),
        [(pid, c + 1, (pid - 1) % PROBLEMS_PER_DAY + 1, v) for pid, c, v in problems],
    )

    scopes = [s.key for s in standing_keys(channel_pk, CHANNEL, days[0]).scopes]
    periods_of_day = [[p.key for p in standing_keys(channel_pk, CHANNEL, d).periods] for d in days]
    points_cache: dict[tuple[str, int, int], int] = {}

    def points(diff: str, attempt_no: int, elapsed_ms: int) -> int:
        key = (diff, attempt_no, elapsed_ms)
        got = points_cache.get(key)
        if got is None:
            got = scoring.points_for(
                difficulty=diff,
                correct=True,
                attempt_no=attempt_no,
                elapsed_s=elapsed_ms / 1000,
                time_limit_s=TIME_LIMIT_S,
                hint_used=False,
            )
            points_cache[key] = got
        return got

    # (period, player) -> [points, correct, answer_ms]; the two scopes hold the same rows (one channel)
    standing: dict[tuple[str, int], list[int]] = {}
    limit = dt.timedelta(seconds=TIME_LIMIT_S)
    session_id = 0
    attempt_id = 0
    sessions: list[Row] = []
    attempts: list[Row] = []
    for player_pk in range(1, n_players + 1):
        budget = per_player + (1 if player_pk <= extra else 0)
        for pid, c, version in problems:
            if budget <= 0:
                break
            session_id += 1
            started = opened[c] + dt.timedelta(seconds=(player_pk * 7) % 36000)
            deadline = started + limit
            first_ms = rng.randrange(2000, 100_000)
            if budget >= 2 and rng.random() < 0.35:  # wrong, then a second attempt
                second_ms = first_ms + rng.randrange(1000, 15_000)
                ok = rng.random() < 0.6
                attempt_id += 1
                attempts.append(
                    (
                        attempt_id,
                        session_id,
                        version,
                        1,
                        "B",
                        False,
                        ts(started + dt.timedelta(milliseconds=first_ms)),
                        first_ms,
                        None,
                    )
                )
                attempt_id += 1
                attempts.append(
                    (
                        attempt_id,
                        session_id,
                        version,
                        2,
                        "A" if ok else "C",
                        ok,
                        ts(started + dt.timedelta(milliseconds=second_ms)),
                        second_ms,
                        None,
                    )
                )
                budget -= 2
                attempt_no, elapsed_ms, outcome = 2, second_ms, ("correct" if ok else "wrong")
            else:
                ok = rng.random() < 0.75
                attempt_id += 1
                attempts.append(
                    (
                        attempt_id,
                        session_id,
                        version,
                        1,
                        "A" if ok else "D",
                        ok,
                        ts(started + dt.timedelta(milliseconds=first_ms)),
                        first_ms,
                        None,
                    )
                )
                budget -= 1
                attempt_no, elapsed_ms, outcome = 1, first_ms, ("correct" if ok else "timeout")
            pts = points(difficulty[version], attempt_no, elapsed_ms) if outcome == "correct" else 0
            finished = deadline if outcome == "timeout" else started + dt.timedelta(milliseconds=elapsed_ms)
            sessions.append(
                (session_id, pid, player_pk, ts(started), ts(deadline), None, ts(finished), outcome, pts)
            )
            if outcome == "correct":
                for period in periods_of_day[c]:
                    acc = standing.get((period, player_pk))
                    if acc is None:
                        standing[(period, player_pk)] = [pts, 1, elapsed_ms]
                    else:
                        acc[0] += pts
                        acc[1] += 1
                        acc[2] += elapsed_ms
        if player_pk % chunk_players == 0 or player_pk == n_players:
            yield Chunk("play_sessions", SESSION_COLS, sessions)
            yield Chunk("attempts", ATTEMPT_COLS, attempts)
            sessions, attempts = [], []
    out.sessions = session_id
    out.attempts = attempt_id

    rows = [(scope, period, pk, v[0], v[1], v[2]) for (period, pk), v in standing.items() for scope in scopes]
    out.standings = len(rows)
    yield Chunk("standings", ("scope", "period", "player_pk", "points", "correct", "answer_ms"), rows)

    ranked = sorted(
        ((v[0], v[2], pk) for (period, pk), v in standing.items() if period == "all"),
        key=lambda r: (-r[0], r[1], r[2]),
    )
    mid = len(ranked) // 2
    out.mid_rank = mid + 1
    mid_pk = ranked[mid][2] if ranked else 1
    out.mid_player = PlayerRef(PLATFORM, f"u{mid_pk}", f"Player {mid_pk}")


def load_sqlite(url: str, n_players: int, n_attempts: int, out: Dataset) -> None:
    """Bulk-load with sqlite3 executemany inside one big transaction (synchronous; run in a thread)."""
    path = make_url(url).database
    assert path is not None
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        for chunk in generate(n_players, n_attempts, True, out):
            cols = ", ".join(chunk.columns)
            marks = ", ".join("?" * len(chunk.columns))
            conn.executemany(f"INSERT INTO {chunk.table} ({cols}) VALUES ({marks})", chunk.rows)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


async def load_postgres(url: str, n_players: int, n_attempts: int, out: Dataset) -> str:
    """Bulk-load with COPY (asyncpg copy_records_to_table) in one transaction, then ANALYZE."""
    import asyncpg

    conn = await asyncpg.connect(**asyncpg_kwargs(url))
    note = "FK triggers off during COPY (session_replication_role=replica)"
    try:
        try:
            await conn.execute("SET session_replication_role = replica")
        except asyncpg.PostgresError:
            note = "FK checks on during COPY (not superuser)"
        async with conn.transaction():
            for chunk in generate(n_players, n_attempts, False, out):
                await conn.copy_records_to_table(chunk.table, records=chunk.rows, columns=list(chunk.columns))
        await conn.execute("SET session_replication_role = DEFAULT")
        for table in (
            "channels",
            "players",
            "question_versions",
            "challenges",
            "problems",
            "play_sessions",
            "attempts",
        ):
            await conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
            )
        await conn.execute("VACUUM ANALYZE")  # what autovacuum does after a big insert-only load
    finally:
        await conn.close()
    return note


# ---------------------------------------------------------------------------------------------- leaderboard
PROTO_INDEX = (
    "CREATE INDEX ix_standings_rank_cover ON standings (scope, period, points DESC, answer_ms, player_pk)"
)


@dataclass
class LeaderboardResult:
    """Figures of the leaderboard benchmark on one database."""

    data: Dataset
    setup_s: float
    note: str
    lat: dict[str, list[float]]
    total: int
    my_rank: int | None
    proto_lat: dict[str, list[float]] = field(default_factory=dict)
    proto_rank: int | None = None


async def bench_leaderboard(
    backend: Backend, n_players: int, n_attempts: int, iterations: int
) -> LeaderboardResult:
    """Populate a fresh database in bulk, then time QuizService.leaderboard per scope."""
    t0 = time.perf_counter()
    url = await backend.fresh_database("lb")
    data = Dataset()
    if backend.kind == "sqlite":
        await asyncio.to_thread(load_sqlite, url, n_players, n_attempts, data)
        note = "executemany, one transaction, no ANALYZE (the app never runs it)"
    else:
        note = await load_postgres(url, n_players, n_attempts, data) + ", then VACUUM ANALYZE"
    setup_s = time.perf_counter() - t0
    assert data.mid_player is not None

    engine = make_engine(url)
    svc = QuizService(lambda: SqlUnitOfWork(session_factory(engine)), SystemClock(), None)
    player = data.mid_player

    async def measure() -> tuple[dict[str, list[float]], int, int | None]:
        lat: dict[str, list[float]] = {}
        total = 0
        rank: int | None = None
        for scope in ("channel", "workspace"):
            for _ in range(5):  # warm-up
                await svc.leaderboard(CHANNEL, scope=scope, period="all", player=player)
            samples: list[float] = []
            for _ in range(iterations):
                t = time.perf_counter()
                card = await svc.leaderboard(CHANNEL, scope=scope, period="all", player=player)
                samples.append(time.perf_counter() - t)
            lat[scope] = samples
            total = card.total_players
            rank = card.me.rank if card.me else None
        return lat, total, rank

    try:
        lat, total, my_rank = await measure()
        result = LeaderboardResult(data, setup_s, note, lat, total, my_rank)
        # PROTOTYPE: an index matching the ORDER BY and covering the rank predicate (player_pk), so top 10,
        # count and own rank are all index(-only) range scans instead of heap visits of every ranked row.
        async with engine.begin() as conn:
            await conn.execute(text(PROTO_INDEX))
        if backend.kind == "postgresql":
            async with engine.connect() as conn:
                await (await conn.execution_options(isolation_level="AUTOCOMMIT")).execute(
                    text("VACUUM ANALYZE standings")
                )
        result.proto_lat, _, result.proto_rank = await measure()
    finally:
        await engine.dispose()
    return result


# ---------------------------------------------------------------------------------------------- report
@dataclass
class Report:
    """Everything measured on one database."""

    backend: str
    answers: AnswerResult | None = None
    leaderboard: LeaderboardResult | None = None
    skipped: str | None = None


def print_table(title: str, rows: Sequence[tuple[str, str, str, str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"\n{title}")
    print("-" * (sum(widths) + 9))
    for i, r in enumerate(rows):
        print(
            "  ".join(
                c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
        if i == 0:
            print("-" * (sum(widths) + 9))


def report_backend(rep: Report) -> None:
    header = ("metric", "value", "target", "status")
    rows: list[tuple[str, str, str, str]] = [header]
    a = rep.answers
    if a is not None:
        p99 = pct(a.answer_lat, 99)
        rows += [
            (
                f"players x problems (in flight <= {a.concurrency})",
                f"{a.players} x {PROBLEMS_PER_DAY}",
                "",
                "",
            ),
            ("answers ok / failed calls", f"{a.answers} / {a.errors.total()}", "", ""),
            ("wall time (s)", f"{a.wall_s:.2f}", "", ""),
            ("answers/s (end to end)", f"{a.answers_per_s:.1f}", "", ""),
            ("answer p50 (ms), saturated", f"{pct(a.answer_lat, 50):.1f}", "", ""),
            (
                "answer p99 (ms), saturated",
                f"{p99:.1f}",
                f"<= {TARGET_ANSWER_P99_MS:.0f}",
                verdict(p99 <= TARGET_ANSWER_P99_MS),
            ),
            (
                "start_problem p50 / p99 (ms)",
                f"{pct(a.start_lat, 50):.1f} / {pct(a.start_lat, 99):.1f}",
                "",
                "",
            ),
            (
                "answer p50 / p99 at concurrency 1 (ms)",
                f"{pct(a.solo_lat, 50):.1f} / {pct(a.solo_lat, 99):.1f}",
                "",
                "",
            ),
            (f"raw INSERT+COMMIT/s ({a.raw_inserts} tx)", f"{a.raw_per_s:.1f}", "", ""),
            (
                "ratio answers/s / raw inserts/s",
                f"{a.ratio:.3f}",
                f">= {TARGET_RATIO}",
                verdict(a.ratio >= TARGET_RATIO),
            ),
            ("SQL statements per answer call", f"{a.statements_per_answer:.1f}", "", ""),
        ]
        g = a.group_commit
        if g is not None:
            rows.append(
                (
                    "group commit: shared tx (jobs mean, max) / alone / rolled back",
                    f"{g.batches} ({(g.jobs - g.alone) / max(1, g.batches):.1f}, {g.largest})"
                    f" / {g.alone} / {g.fallbacks}",
                    "",
                    "",
                )
            )
        for level in a.load_levels:
            lp99 = pct(level.answer_lat, 99)
            rows.append(
                (
                    f"answer p50 / p99 (ms) at {level.fraction:.0%} load"
                    f" ({level.offered_per_s:.0f} answers/s, n={len(level.answer_lat)})",
                    f"{pct(level.answer_lat, 50):.1f} / {lp99:.1f}",
                    f"<= {TARGET_ANSWER_P99_MS:.0f}",
                    verdict(lp99 <= TARGET_ANSWER_P99_MS),
                )
            )
        if a.alone is not None:
            b = a.alone
            rows += [
                ("a transaction per call: answers/s", f"{b.answers_per_s:.1f}", "", ""),
                (
                    "a transaction per call: answer p50 / p99 (ms)",
                    f"{pct(b.answer_lat, 50):.1f} / {pct(b.answer_lat, 99):.1f}",
                    "",
                    "",
                ),
                (
                    "a transaction per call: ratio (to its own raw run)",
                    f"{b.ratio:.3f}",
                    "",
                    "",
                ),
                ("group commit speed-up (answers/s)", f"x{a.answers_per_s / b.answers_per_s:.2f}", "", ""),
            ]
    lb = rep.leaderboard
    if lb is not None:
        d = lb.data
        rows += [
            ("leaderboard data: attempts / sessions", f"{d.attempts:,} / {d.sessions:,}", "", ""),
            (
                "leaderboard data: players / days / standings",
                f"{d.players:,} / {d.days} / {d.standings:,}",
                "",
                "",
            ),
            ("leaderboard setup incl. migration (s)", f"{lb.setup_s:.1f}", "", ""),
            ("caller rank / ranked players", f"{lb.my_rank} / {lb.total:,} (exp. {d.mid_rank})", "", ""),
        ]
        for scope, samples in lb.lat.items():
            p95 = pct(samples, 95)
            rows += [
                (f"leaderboard {scope} p50 (ms, n={len(samples)})", f"{pct(samples, 50):.1f}", "", ""),
                (
                    f"leaderboard {scope} p95 (ms)",
                    f"{p95:.1f}",
                    f"<= {TARGET_LEADERBOARD_P95_MS:.0f}",
                    verdict(p95 <= TARGET_LEADERBOARD_P95_MS),
                ),
            ]
        for scope, samples in lb.proto_lat.items():
            p95 = pct(samples, 95)
            rows.append(
                (
                    f"PROTOTYPE covering index: {scope} p50 / p95",
                    f"{pct(samples, 50):.1f} / {p95:.1f}",
                    f"<= {TARGET_LEADERBOARD_P95_MS:.0f}",
                    verdict(p95 <= TARGET_LEADERBOARD_P95_MS),
                )
            )
    print_table(f"== {rep.backend} ==", rows)
    if a is not None:
        for what, n in sorted(a.errors.items()):
            print(f"  FAILED {what} x {n}")
        for what, n in sorted(a.alone.errors.items() if a.alone else ()):
            print(f"  FAILED (a transaction per call) {what} x {n}")
    if lb is not None:
        print(f"  bulk load: {lb.note}")
        if lb.proto_lat:
            print(f"  prototype index: {PROTO_INDEX}  (caller rank then: {lb.proto_rank})")


def report_side_by_side(reports: Sequence[Report]) -> None:
    live = [r for r in reports if r.skipped is None]
    if not live:
        return
    header = ["metric", *(r.backend for r in live), "target"]
    rows: list[list[str]] = [header]

    def add(label: str, target: str, fn: Callable[[Report], str]) -> None:
        rows.append([label, *(fn(r) for r in live), target])

    def ans(fmt: Callable[[AnswerResult], str]) -> Callable[[Report], str]:
        return lambda r: fmt(r.answers) if r.answers else "-"

    def lbf(scope: str) -> Callable[[Report], str]:
        def f(r: Report) -> str:
            if not r.leaderboard:
                return "-"
            p95 = pct(r.leaderboard.lat[scope], 95)
            return f"{p95:.1f} {verdict(p95 <= TARGET_LEADERBOARD_P95_MS)}"

        return f

    add("answers/s", "", ans(lambda a: f"{a.answers_per_s:.1f}"))
    add("raw INSERT+COMMIT/s", "", ans(lambda a: f"{a.raw_per_s:.1f}"))
    add("ratio", f">= {TARGET_RATIO}", ans(lambda a: f"{a.ratio:.3f} {verdict(a.ratio >= TARGET_RATIO)}"))
    add("failed calls (of players x 11)", "0", ans(lambda a: f"{a.errors.total()}"))
    add("answer p50 (ms), saturated", "", ans(lambda a: f"{pct(a.answer_lat, 50):.1f}"))
    add(
        "answer p99 (ms), saturated",
        f"<= {TARGET_ANSWER_P99_MS:.0f}",
        ans(
            lambda a: f"{pct(a.answer_lat, 99):.1f} {verdict(pct(a.answer_lat, 99) <= TARGET_ANSWER_P99_MS)}"
        ),
    )
    fractions = sorted({lv.fraction for r in live if r.answers for lv in r.answers.load_levels})
    for fraction in fractions:

        def at(a: AnswerResult, fraction: float = fraction) -> str:
            level = next((lv for lv in a.load_levels if lv.fraction == fraction), None)
            if level is None:
                return "-"
            p99 = pct(level.answer_lat, 99)
            return f"{p99:.1f} {verdict(p99 <= TARGET_ANSWER_P99_MS)}"

        add(f"answer p99 (ms) at {fraction:.0%} load", f"<= {TARGET_ANSWER_P99_MS:.0f}", ans(at))
    add("leaderboard channel p95 (ms)", f"<= {TARGET_LEADERBOARD_P95_MS:.0f}", lbf("channel"))
    add("leaderboard workspace p95 (ms)", f"<= {TARGET_LEADERBOARD_P95_MS:.0f}", lbf("workspace"))
    add("leaderboard setup (s)", "", lambda r: f"{r.leaderboard.setup_s:.1f}" if r.leaderboard else "-")
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    print("\n== side by side ==")
    for i, row in enumerate(rows):
        print(
            "  ".join(
                c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if i == 0:
            print("-" * (sum(widths) + 2 * len(widths)))


# ---------------------------------------------------------------------------------------------- main
async def pg_backend(pg_url: str) -> tuple[Backend | None, str | None]:
    """The PostgreSQL backend, or why it is skipped (only when no server answers)."""
    try:
        await pg_admin(pg_url, "SELECT 1")
    except Exception as exc:  # any failure to connect means "no server answers"
        return None, f"{type(exc).__name__}: {exc}"
    return Backend("PostgreSQL", "postgresql", pg_admin_url=pg_url), None


async def run_backend(backend: Backend, args: argparse.Namespace) -> Report:
    rep = Report(backend.name)
    try:
        print(
            f"\n[{backend.name}] answer path: {args.players} players x {PROBLEMS_PER_DAY} problems, "
            f"<= {args.concurrency} players in flight (asyncio.Semaphore) ...",
            flush=True,
        )
        url = await backend.fresh_database("answers")
        rep.answers = await bench_answers(
            url,
            args.players,
            args.concurrency,
            args.raw_inserts,
            load_fractions=[float(x) for x in args.load_levels.split(",") if x.strip()],
            load_seconds=args.load_seconds,
            max_batch=args.max_batch,
        )
        if not args.no_compare:
            print(f"[{backend.name}] answer path again, a transaction per call (no group commit) ...")
            rep.answers.alone = await bench_answers(
                await backend.fresh_database("answers_alone"),
                args.players,
                args.concurrency,
                args.raw_inserts,
                group_commit=False,
            )
        if not args.skip_leaderboard:
            print(
                f"[{backend.name}] leaderboard: bulk-loading {args.attempts:,} attempts by "
                f"{args.lb_players:,} players ...",
                flush=True,
            )
            rep.leaderboard = await bench_leaderboard(
                backend, args.lb_players, args.attempts, args.iterations
            )
    finally:
        await backend.cleanup()
    return rep


async def main_async(args: argparse.Namespace) -> int:
    reports: list[Report] = []
    backends: list[Backend] = [Backend("SQLite", "sqlite", tmpdir=Path(tempfile.mkdtemp(prefix="rz-bench-")))]
    if args.skip_pg:
        print("PostgreSQL skipped (--skip-pg).")
    else:
        pg, problem = await pg_backend(args.pg_url)
        if pg is None:
            print(f"PostgreSQL skipped: no server answers at {args.pg_url} ({problem}).")
        else:
            backends.append(pg)
    for backend in backends:
        reports.append(await run_backend(backend, args))
    for rep in reports:
        report_backend(rep)
    report_side_by_side(reports)
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--players", type=int, default=1000, help="answer-path players (default 1000)")
    p.add_argument("--concurrency", type=int, default=64, help="players in flight (default 64)")
    p.add_argument("--raw-inserts", type=int, default=2000, help="single-row INSERT+COMMIT transactions")
    p.add_argument("--attempts", type=int, default=1_000_000, help="leaderboard attempts (default 1,000,000)")
    p.add_argument("--lb-players", type=int, default=10_000, help="leaderboard players (default 10,000)")
    p.add_argument("--iterations", type=int, default=200, help="leaderboard calls per scope (default 200)")
    p.add_argument("--pg-url", default=DEFAULT_PG_URL, help="PostgreSQL server (a temp database is created)")
    p.add_argument("--skip-pg", action="store_true", help="SQLite only")
    p.add_argument("--skip-leaderboard", action="store_true", help="answer path only")
    p.add_argument(
        "--load-levels",
        default="0.25,0.5,0.75",
        help="open-loop loads for the latency figures, as fractions of the measured capacity ('' for none)",
    )
    p.add_argument("--load-seconds", type=float, default=4.0, help="arrival window per load level (s)")
    p.add_argument(
        "--max-batch", type=int, default=DEFAULT_MAX_BATCH, help="group commit: most jobs in one transaction"
    )
    p.add_argument(
        "--no-compare", action="store_true", help="skip the run without group commit (a transaction per call)"
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.lb_players > args.attempts:
        args.lb_players = max(1, args.attempts)
    t0 = time.perf_counter()
    print(
        f"RankZero engine benchmark · {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
        f" · python {sys.version.split()[0]} · sqlite {sqlite3.sqlite_version}"
    )
    rc = asyncio.run(main_async(args))
    print(
        f"\ntotal benchmark time: {time.perf_counter() - t0:.1f} s (shared 2-core machine: figures are noisy)"
    )
    return rc


if __name__ == "__main__":
    sys.exit(main())
