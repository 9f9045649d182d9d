"""The operator's bank is never blocked by a tenant (security review of issue 24, finding 1): shipped
question ids are public, so a tenant admin could add one that the next release uses; the operator's
import then renames the tenant's question (``<id>-own``) instead of refusing the shipped bank, and
``serve`` starts. SQLite and PostgreSQL for the repository; serve's seed on SQLite.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

import bot.cli.serve as serve_mod
from bot.bootstrap import build_app
from bot.config import Settings
from bot.core.errors import InvalidAnswerError, NotFoundError, QuestionBankError
from bot.core.models import Actor, PlayerRef, Tenant
from tests.bot.core.test_tenancy import QID, A, B, Env, admin_of, env  # noqa: F401  (env: both databases)
from tests.conftest import ADMIN, make_spec
from tests.shipped import shipped_specs


async def test_serve_starts_after_a_tenant_took_an_id_of_the_next_shipped_bank(
    tmp_path: Path, sqlite_template: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "rz.db"
    shutil.copy(sqlite_template, db)
    settings = Settings(database_url=f"sqlite+aiosqlite:///{db}", health_port=0)
    squatter = Tenant("discord", "666")
    future = make_spec("future-shipped-q", "beginner", "DDP", correct=1)
    theirs = make_spec("future-shipped-q", "expert", "NCCL", correct=3)
    app = await build_app(settings, migrate=False)
    try:
        await app.service.admin_import(Actor(PlayerRef("discord", "evil", "Evil"), True, squatter), [theirs])
    finally:
        await app.close()
    # The operator upgrades RankZero and its shipped bank now has that id: serve seeds it at start.
    shipped = shipped_specs()  # shipped_bank_specs(), loaded once per session
    monkeypatch.setattr(serve_mod, "shipped_bank_specs", lambda: [*shipped, future])
    caplog.set_level(logging.WARNING, logger="bot.core.service")
    await serve_mod._seed_bank(settings)

    app = await build_app(settings, migrate=False)
    try:
        shared = {q.id: q for q in await app.service.list_questions()}
        assert shared["future-shipped-q"].difficulty == "beginner", "the operator's version is the shared one"
        assert "future-shipped-q-own" not in shared
        seen = {q.id: q for q in await app.service.list_questions(view=squatter)}
        assert seen["future-shipped-q-own"].difficulty == "expert", "the tenant keeps its question"
        assert seen["future-shipped-q"].difficulty == "beginner"
        assert "future-shipped-q-own" not in {q.id for q in await app.service.list_questions(view=A.tenant)}
    finally:
        await app.close()
    assert (
        "tenant discord:666's own question 'future-shipped-q' is renamed 'future-shipped-q-own'"
        in caplog.text
    )


async def test_the_operator_import_moves_a_tenant_question_aside_with_its_history(env: Env) -> None:  # noqa: F811
    own = make_spec("b-q", "beginner", "NCCL", correct=2)
    await env.quiz.admin_import(admin_of(B), [own])
    await env.disputes.correct_answer(admin_of(B), "b-q", "D")  # B's correction: a version only B sees
    await env.quiz.admin_retire(admin_of(B), QID)  # and a retirement of a shared question, untouched

    report = await env.quiz.admin_import(ADMIN, [make_spec("b-q", "expert", "DDP", correct=0)])

    assert report.added == ("b-q",)
    assert report.moved_aside == (("discord:222", "b-q", "b-q-own"),)
    assert {q.id for q in await env.quiz.list_questions()} == {QID, "b-q"}
    b_sees = {q.id: q for q in await env.quiz.list_questions(view=B.tenant)}
    assert set(b_sees) == {"b-q", "b-q-own"}, "B's retirement of the shared question stays"
    assert b_sees["b-q-own"].version == 2 and b_sees["b-q-own"].topic == "NCCL"
    with pytest.raises(InvalidAnswerError, match="already the official answer"):
        await env.disputes.correct_answer(admin_of(B), "b-q-own", "D")  # B's correction moved with it
    with pytest.raises(NotFoundError):
        await env.disputes.correct_answer(admin_of(A), "b-q-own", "A")  # still B's alone
    assert {q.id for q in await env.quiz.list_questions(view=A.tenant)} == {QID, "b-q"}
    # B's own file, under the new id, is what B has: nothing new is added; under the old id it is refused.
    again = await env.quiz.admin_import(admin_of(B), [{**own, "id": "b-q-own"}])
    assert again.unchanged == ("b-q-own",) and not again.added and not again.updated
    with pytest.raises(QuestionBankError, match="already used"):
        await env.quiz.admin_import(admin_of(B), [own])
    # A second release taking the new id too moves it once more; the operator is never refused.
    report = await env.quiz.admin_import(ADMIN, [make_spec("b-q-own", "expert", "DDP")])
    assert report.moved_aside == (("discord:222", "b-q-own", "b-q-own-own"),)
