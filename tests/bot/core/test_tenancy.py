"""Tenants never affect each other (issue 24): two Discord servers and a Slack Grid team play the shared
bank; each one's admins change only their own overlay, re-scoring touches only their attempts, and an
object of another tenant named by id reads exactly as a missing one. SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import AsyncIterator

import pytest

from bot.commands.admin import AdminPolicy
from bot.commands.handlers import Commands
from bot.core.errors import NotAdminError, NotFoundError, QuestionBankError, RankZeroError, TooEarlyError
from bot.core.models import Actor, ChannelRef, PlayerRef, Tenant
from tests.bootstrap import Env as AppEnv
from tests.bootstrap import open_env
from tests.conftest import ADMIN, make_spec
from tests.fakes import FakePlatform, FrozenClock

QID = "shared-q"
A = ChannelRef("discord", "111", "a-general", "general")
B = ChannelRef("discord", "222", "b-general", "general")
GRID = ChannelRef("slack", "E1/T2", "C9", "quiz")


def admin_of(channel: ChannelRef) -> Actor:
    return Actor(PlayerRef(channel.platform, f"admin-{channel.workspace_id}", "Admin"), True, channel.tenant)


def player(name: str, channel: ChannelRef) -> Actor:
    return Actor(PlayerRef(channel.platform, name, name.title()), tenant=channel.tenant)


class Env(AppEnv):
    """The app, and the command layer over it as the chat adapters build it."""

    @functools.cached_property
    def commands(self) -> Commands:
        return Commands(self.quiz, self.schedules, AdminPolicy(refusal="no"), disputes=self.disputes)


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    # The operator's shared bank: one question, official answer A.
    bank = [make_spec(QID, "advanced", "DDP", kind="predict_output", correct=0)]
    async with open_env(db_url, clock, platform, kind=Env, bank=bank, problems_per_challenge=1) as made:
        yield made


async def _play(env: Env, who: Actor, problem_id: int, letter: str) -> None:
    start = env.clock.now()
    await env.quiz.start_problem(who, problem_id)
    env.clock.current = start + dt.timedelta(seconds=10)
    await env.quiz.answer(who, problem_id, letter)
    env.clock.current = start


async def _points(env: Env, channel: ChannelRef) -> dict[str, int]:
    card = await env.quiz.leaderboard(channel, period="all", scope="workspace")
    return {r.display_name: r.points for r in card.rows}


async def test_a_correction_rescores_only_its_tenant(env: Env) -> None:
    a, _ = await env.quiz.open_challenge(A)
    b, _ = await env.quiz.open_challenge(B)
    await _play(env, player("ann", A), a.problems[0].id, "A")
    await _play(env, player("bo", B), b.problems[0].id, "A")
    before_a = await _points(env, A)
    assert before_a["Ann"] > 0 and (await _points(env, B))["Bo"] > 0

    fix = await env.disputes.correct_answer(admin_of(B), QID, "B")
    assert fix.sessions_rescored == 1 and fix.players_affected == 1

    assert await _points(env, B) == {}, "B's player lost the points of the old answer"
    assert await _points(env, A) == before_a, "A's player keeps theirs: B's correction is B's"
    assert (await env.quiz.results(a.id)).problems[0].correct_letter == "A"
    assert (await env.quiz.results(b.id)).problems[0].correct_letter == "B"
    versions = {
        name: [q.version for q in await env.quiz.list_questions(view=view) if q.id == QID]
        for name, view in (("shared", None), ("A", A.tenant), ("B", B.tenant))
    }
    assert versions == {"shared": [1], "A": [1], "B": [2]}
    # A's next challenge still asks the version A sees.
    env.clock.current += dt.timedelta(days=1)
    a2, _ = await env.quiz.open_challenge(A)
    assert a2.problems[0].question.correct_letter == "A"
    b2, _ = await env.quiz.open_challenge(B)
    assert b2.problems[0].question.correct_letter == "B"


async def test_the_shared_bank_is_read_only_for_tenant_admins(env: Env) -> None:
    taken = make_spec(QID, "beginner", "DDP", correct=1)
    with pytest.raises(QuestionBankError, match="already used") as shared:
        await env.quiz.admin_import(admin_of(A), [taken])
    # The operator's question is unchanged for everyone.
    assert [q.version for q in await env.quiz.list_questions(view=A.tenant)] == [1]

    # A tenant's own question: B plays it, A never sees it, and A cannot take or overwrite its id.
    own = make_spec("b-own", "beginner", "NCCL", correct=2)
    report = await env.quiz.admin_import(admin_of(B), [own])
    assert report.added == ("b-own",)
    assert {q.id for q in await env.quiz.list_questions(view=B.tenant)} == {QID, "b-own"}
    assert {q.id for q in await env.quiz.list_questions(view=A.tenant)} == {QID}
    assert {q.id for q in await env.quiz.list_questions()} == {QID}, "not in the shared bank"
    with pytest.raises(QuestionBankError) as other:
        await env.quiz.admin_import(admin_of(A), [make_spec("b-own", "expert", "NCCL")])
    assert str(other.value).replace("b-own", "X") == str(shared.value).replace(QID, "X"), (
        "another tenant's id is refused with the same words as a shared one"
    )
    # A batch with one taken id writes nothing at all.
    with pytest.raises(QuestionBankError):
        await env.quiz.admin_import(admin_of(A), [make_spec("a-new", "beginner", "DDP"), taken])
    assert {q.id for q in await env.quiz.list_questions(view=A.tenant)} == {QID}

    # B's own question lands in B's challenges only.
    await env.quiz.admin_retire(admin_of(B), QID)
    b, _ = await env.quiz.open_challenge(B)
    assert b.problems[0].question.id == "b-own"
    a, _ = await env.quiz.open_challenge(A)
    assert a.problems[0].question.id == QID, "B's retirement is B's; A keeps playing the question"
    assert [q.retired for q in await env.quiz.list_questions(True, view=A.tenant)] == [False]
    assert [q.retired for q in await env.quiz.list_questions(True)] == [False]


@pytest.mark.parametrize(
    "command",
    ["retire", "correct", "preview", "close"],
)
async def test_admin_commands_from_the_wrong_tenant_change_nothing(env: Env, command: str) -> None:
    await env.quiz.admin_import(admin_of(B), [make_spec("b-own", "beginner", "NCCL", correct=2)])
    b, _ = await env.quiz.open_challenge(B)
    await _play(env, player("bo", B), b.problems[0].id, "C")
    before = (await _points(env, B), await env.quiz.list_questions(True, view=B.tenant))

    async def attempt(name: str | int) -> str:
        with pytest.raises(NotFoundError) as refused:
            if command == "retire":
                await env.commands.retire(admin_of(A), str(name))
            elif command == "correct":
                await env.commands.correct(admin_of(A), str(name), "A")
            elif command == "preview":
                await env.commands.preview(admin_of(A), str(name))
            else:
                await env.commands.close_challenge(admin_of(A), int(name))
        return str(refused.value)

    theirs: str | int = b.id if command == "close" else "b-own"
    missing: str | int = 999_999 if command == "close" else "no-such"
    assert (await attempt(theirs)).replace(str(theirs), "X") == (await attempt(missing)).replace(
        str(missing), "X"
    ), "another tenant's object reads exactly as a missing one"
    assert (await _points(env, B), await env.quiz.list_questions(True, view=B.tenant)) == before
    assert (await env.quiz.get_challenge(b.id)).status == "open"
    # B's own admin can (the refusal above is about the tenant, not the command).
    if command == "close":
        assert await env.commands.close_challenge(admin_of(B), b.id) is not None


async def test_a_dispute_of_another_tenants_problem_reads_as_missing(env: Env) -> None:
    b, _ = await env.quiz.open_challenge(B)
    await _play(env, player("bo", B), b.problems[0].id, "C")
    stranger = player("ann", A)
    with pytest.raises(NotFoundError) as theirs:
        await env.disputes.check_dispute(stranger, b.problems[0].id)
    with pytest.raises(NotFoundError) as missing:
        await env.disputes.check_dispute(stranger, 999_999)
    assert str(theirs.value).replace(str(b.problems[0].id), "X") == str(missing.value).replace("999999", "X")


async def test_a_tenant_admin_needs_a_tenant_and_only_the_operator_changes_the_shared_bank(env: Env) -> None:
    homeless = Actor(PlayerRef("discord", "dm-user", "Dee"), is_admin=True, tenant=None)
    for call in (
        env.quiz.admin_retire(homeless, QID),
        env.quiz.admin_import(homeless, [make_spec("dm-q", "beginner", "DDP")]),
        env.disputes.correct_answer(homeless, QID, "B"),
    ):
        with pytest.raises(NotAdminError):
            await call
    await env.quiz.admin_retire(ADMIN, QID)
    for view in (None, A.tenant, GRID.tenant):
        assert [q.retired for q in await env.quiz.list_questions(True, view=view)] == [True]
    with pytest.raises(RankZeroError, match="bank is empty"):
        await env.quiz.open_challenge(GRID)


def test_tenant_keys_round_trip_and_refuse_junk() -> None:
    assert GRID.tenant == Tenant("slack", "E1/T2") and GRID.tenant.key == "slack:E1/T2"
    assert Tenant.from_key("slack:E1/T2") == GRID.tenant
    for junk in ("", "discord", "discord:", ":111"):
        with pytest.raises(ValueError):
            Tenant.from_key(junk)
    with pytest.raises(ValueError):
        Tenant("discord", "9" * 200)


async def test_a_players_record_in_one_server_shows_nothing_of_another(env: Env) -> None:
    """The same Discord user plays in A and B: /stats in B (theirs, or a member's) shows only B's play."""
    a, _ = await env.quiz.open_challenge(A)
    b, _ = await env.quiz.open_challenge(B)
    await _play(env, player("ann", A), a.problems[0].id, "A")  # right in A
    ann_b = player("ann", B)
    await env.quiz.start_problem(ann_b, b.problems[0].id)
    for letter in ("C", "D"):  # wrong in B, out of attempts
        await env.quiz.answer(ann_b, b.problems[0].id, letter)
    in_a = await env.quiz.stats(player("ann", A).player, A)
    in_b = await env.quiz.stats(player("ann", B).player, B)
    assert (in_a.points > 0, in_a.correct, in_a.problems) == (True, 1, 1)
    assert (in_b.points, in_b.correct, in_b.problems) == (0, 0, 1)
    assert in_b.challenges_completed == 1 and in_a.challenges_completed == 1
    assert (await env.quiz.stats(player("ann", A).player, GRID)).problems == 0


async def test_a_team_report_explanation_is_its_tenants_and_only_once_closed(env: Env) -> None:
    """Issue 30: the team report's "Explanation" button names a problem id; a click from another tenant,
    or from a DM (no tenant), reads exactly as a missing id, and an open challenge's problem is not
    explained (it would give the answer away).
    """
    challenge, _ = await env.quiz.open_challenge(A)
    problem_id = challenge.problems[0].id
    with pytest.raises(TooEarlyError):
        await env.commands.missed_explanation(player("ann", A), problem_id)
    await env.quiz.close_challenge(challenge.id)

    shown = await env.commands.missed_explanation(player("ann", A), problem_id)
    assert (shown.question_id, shown.explanation) == (QID, f"because {QID}")

    outsiders = [player("bob", B), Actor(PlayerRef("discord", "dm", "Dm"))]
    for outsider in outsiders:
        with pytest.raises(NotFoundError) as theirs:
            await env.commands.missed_explanation(outsider, problem_id)
        with pytest.raises(NotFoundError) as missing:
            await env.commands.missed_explanation(outsider, problem_id + 1000)
        assert str(theirs.value).replace(str(problem_id), "N") == str(missing.value).replace(
            str(problem_id + 1000), "N"
        )


async def test_a_correction_after_a_reorder_stays_in_its_tenant(env: Env) -> None:
    """Both servers played v1; the operator reorders the choices (v2); B corrects: only B's play moves,
    judged by the text its player chose on v1's order.
    """
    a, _ = await env.quiz.open_challenge(A)
    b, _ = await env.quiz.open_challenge(B)
    await _play(env, player("ann", A), a.problems[0].id, "B")  # "choice 1" on v1: wrong for now
    await _play(env, player("bo", B), b.problems[0].id, "B")  # the same choice in B
    v1 = make_spec(QID, "advanced", "DDP", kind="predict_output", correct=0)
    await env.quiz.admin_import(ADMIN, [{**v1, "choices": [v1["choices"][i] for i in (1, 0, 2, 3)]}])
    # On v2 "choice 1" is A: B's admin makes it the answer.
    fix = await env.disputes.correct_answer(admin_of(B), QID, "A")
    assert (fix.from_version, fix.to_version, fix.sessions_rescored, fix.left_as_scored) == (2, 3, 1, 0)
    assert (await _points(env, B))["Bo"] > 0, "bo chose the corrected text on the old order"
    assert await _points(env, A) == {}, "ann's identical choice stays wrong: B's correction is B's"
    versions = {
        name: [q.version for q in await env.quiz.list_questions(view=view) if q.id == QID]
        for name, view in (("shared", None), ("A", A.tenant), ("B", B.tenant))
    }
    assert versions == {"shared": [2], "A": [2], "B": [3]}
    for challenge in (a, b):  # both problems keep v1, the order their players answered on
        assert (await env.quiz.get_challenge(challenge.id)).problems[0].question.version == 1
