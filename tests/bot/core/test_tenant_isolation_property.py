"""Property: whatever three tenants do to the bank (add their own questions, retire, correct, play, get
flagged), no repository call made with tenant T returns a row of another tenant: not a question, not a
version, not a challenge, not a play, not a flag. SQLite (a fresh copy of the migrated template each
example).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from bot.core.models import ChannelRef, Tenant
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS
from bot.storage.db import make_engine
from bot.storage.models import ChallengeRow, ChannelRow, QuestionFlagRow, QuestionVersionRow
from bot.storage.models import QuestionRow as QuestionModel
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import make_spec

T0 = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)
CHANNELS = (
    ChannelRef("discord", "111", "a1"),
    ChannelRef("discord", "222", "b1"),
    ChannelRef("slack", "E1/T2", "C1"),
)
TENANTS = tuple(c.tenant for c in CHANNELS)
SHARED = ("s1", "s2")

# An operation: (tenant index, what, question number, letter index).
OPS = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.sampled_from(["add", "retire", "correct", "challenge", "flag"]),
        st.integers(0, 3),
        st.integers(0, 3),
    ),
    max_size=14,
)


def _qid(tenant: int, n: int) -> str:
    """Question n as tenant ``tenant`` names it: the shared ones, or its own."""
    return SHARED[n] if n < len(SHARED) else f"own-{tenant}-{n}"


async def _scenario(url: str, ops: list[tuple[int, str, int, int]]) -> None:
    engine = make_engine(url)
    factory = session_factory(engine)
    try:
        async with SqlUnitOfWork(factory) as uow:
            await uow.questions.sync_questions(None, [make_spec(q, "beginner", "DDP") for q in SHARED], T0)
        day = 0
        for who, what, n, letter in ops:
            tenant, channel, qid = TENANTS[who], CHANNELS[who], _qid(who, n)
            async with SqlUnitOfWork(factory) as uow:
                if what == "add" and qid not in SHARED:
                    await uow.questions.sync_questions(tenant, [make_spec(qid, "expert", "NCCL")], T0)
                elif what == "retire":
                    await uow.questions.retire_question(tenant, qid, T0)
                elif what == "correct":
                    latest = await uow.questions.latest_question(tenant, qid)
                    if latest is not None:
                        spec = make_spec(qid, "beginner", "DDP", correct=letter)
                        new = await uow.questions.add_corrected_version(tenant, qid, spec, T0)
                        await uow.corrections.repoint_problems(tenant, qid, new)
                elif what == "challenge":
                    day += 1
                    pk = await uow.players.ensure_channel(channel)
                    picks = await uow.questions.question_candidates(tenant, pk, MULTIPLE_CHOICE_KINDS)
                    if picks:
                        await uow.challenges.create_challenge(
                            pk, T0.date() + dt.timedelta(days=day), "t", [picks[0].version_id], T0, None
                        )
                elif what == "flag":
                    latest = await uow.questions.latest_question(tenant, qid)
                    if latest is not None:
                        await uow.disputes.flag_question(
                            tenant, qid, latest.version_id, None, "A", "B", "x", T0
                        )
        await _check(factory)
    finally:
        await engine.dispose()


async def _check(factory: object) -> None:
    async with SqlUnitOfWork(factory) as uow:  # type: ignore[arg-type]
        s = uow.s  # the test reads the rows' owners straight from the tables
        owner = dict((await s.execute(select(QuestionModel.id, QuestionModel.owner_tenant))).tuples().all())
        version_tenant = dict(
            (await s.execute(select(QuestionVersionRow.id, QuestionVersionRow.tenant))).tuples().all()
        )
        challenge_tenant = {
            cid: Tenant(p, w).key
            for cid, p, w in (
                await s.execute(
                    select(ChallengeRow.id, ChannelRow.platform, ChannelRow.workspace_id).join(
                        ChannelRow, ChannelRow.id == ChallengeRow.channel_pk
                    )
                )
            ).tuples()
        }
        flag_tenant = dict(
            (await s.execute(select(QuestionFlagRow.id, QuestionFlagRow.tenant))).tuples().all()
        )
        for tenant, channel in zip(TENANTS, CHANNELS, strict=True):
            mine = {None, tenant.key}
            listed = await uow.questions.list_questions(tenant, True)
            assert all(owner[q.id] in mine for q in listed), tenant
            specs = await uow.questions.latest_specs(tenant, True)
            assert all(owner[spec["id"]] in mine for spec in specs), tenant
            for qid in owner:
                latest = await uow.questions.latest_question(tenant, qid)
                if latest is not None:
                    assert owner[qid] in mine and version_tenant[latest.version_id] in mine, (tenant, qid)
                for play in await uow.corrections.question_plays(tenant, qid):
                    assert play.channel.tenant == tenant
            pk = await uow.players.ensure_channel(channel)
            for c in await uow.questions.question_candidates(tenant, pk, MULTIPLE_CHOICE_KINDS):
                assert owner[c.question_id] in mine and version_tenant[c.version_id] in mine, tenant
            for cid, key in challenge_tenant.items():
                found = await uow.challenges.tenant_challenge(tenant, cid)
                assert (found is not None) == (key == tenant.key), (tenant, cid)
                if found is not None:
                    assert all(version_tenant[p.question.version_id] in mine for p in found.problems)
            assert all(flag_tenant[f.id] == tenant.key for f in await uow.disputes.flags(tenant, None))
        # The operator's view is the shared bank alone.
        assert all(owner[q.id] is None for q in await uow.questions.list_questions(None, True))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_no_repository_call_crosses_tenants(
    ops: list[tuple[int, str, int, int]], sqlite_template: Path, tmp_path: Path
) -> None:
    target = tmp_path / f"{uuid.uuid4().hex}.db"
    shutil.copy(sqlite_template, target)
    try:
        asyncio.run(_scenario(f"sqlite+aiosqlite:///{target}", ops))
    finally:
        target.unlink(missing_ok=True)
