"""The command layer at its boundary (bot/commands): admin decisions, parsing of what was typed, and the
command bodies against a real database (SQLite and PostgreSQL through the conftest fixtures).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from bot.commands import parsing, questions
from bot.commands.admin import AdminPolicy, PlatformRights
from bot.commands.handlers import Commands, NoChallenge
from bot.core.errors import ConfigurationError, NotAdminError, NotFoundError, PostRefusedError
from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.core.vocabulary import Period, Scope
from bot.storage.db import make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.fakes import FakePlatform, FrozenClock

REFUSAL = "only admins can do that: ask one"
CHANNEL = ChannelRef("test", "W1", "C1", "general", "UTC")
ADMIN = Actor(PlayerRef("test", "boss", "Boss"), is_admin=True)
PLAYER = Actor(PlayerRef("test", "pat", "Pat"))


# ---------------------------------------------------------------------- who is an admin
def test_the_platforms_own_admin_right_makes_an_admin() -> None:
    policy = AdminPolicy(refusal=REFUSAL)
    assert policy.is_admin("u1", PlatformRights(manages_workspace=True))
    assert not policy.is_admin("u1", PlatformRights())


def test_configured_users_and_roles_are_admins_others_are_not() -> None:
    policy = AdminPolicy(refusal=REFUSAL, admin_users=["U9"], admin_roles=[123, "456"])
    assert policy.is_admin("U9", PlatformRights())
    assert policy.is_admin("u1", PlatformRights(role_ids=frozenset({"123"})))
    assert policy.is_admin("u1", PlatformRights(role_ids=frozenset({"7", "456"})))
    assert not policy.is_admin("u1", PlatformRights(role_ids=frozenset({"7"})))
    actor = policy.actor(PlayerRef("discord", "u1", "Una"), PlatformRights(role_ids=frozenset({"123"})))
    assert actor.is_admin and actor.player.display_name == "Una"


def test_require_refuses_with_the_platforms_words() -> None:
    policy = AdminPolicy(refusal=REFUSAL)
    policy.require(ADMIN)
    with pytest.raises(NotAdminError, match="ask one"):
        policy.require(PLAYER)


# ---------------------------------------------------------------------- parsing
def test_schedule_options_become_set_schedule_arguments() -> None:
    got = parsing.parse_schedule_options(["--time", "09:00", "--problems", "3", "--tz", "Europe/Berlin"])
    assert got == {"post_time": "09:00", "problems": 3, "timezone": "Europe/Berlin"}


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--when", "9"], "unknown schedule option '--when'"),
        (["--time"], "--time needs a value"),
        (["--problems", "five"], "--problems takes a whole number, not 'five'"),
        ([], "needs at least one option"),
    ],
)
def test_bad_schedule_options_say_what_to_write(words: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parsing.parse_schedule_options(words)


def test_schedule_changes_keep_what_was_not_given() -> None:
    assert parsing.schedule_changes({"post_time": "10:00", "days": None}) == {"post_time": "10:00"}
    with pytest.raises(ValueError, match="not schedule settings"):
        parsing.schedule_changes({"colour": "red"})


def test_leaderboard_words_are_the_vocabularys_enums_in_any_order() -> None:
    assert parsing.parse_leaderboard([]) == (Scope.CHANNEL, Period.ALL)
    assert parsing.parse_leaderboard(["week", "workspace"]) == (Scope.WORKSPACE, Period.WEEK)
    assert parsing.parse_leaderboard(["Server", "TODAY"]) == (Scope.WORKSPACE, Period.TODAY)
    with pytest.raises(
        ConfigurationError, match="unknown leaderboard period 'month': use one of today, week, all"
    ):
        parsing.parse_leaderboard(["month"])
    with pytest.raises(ConfigurationError, match="unknown leaderboard scope 'planet'"):
        parsing.parse_scope("planet")


def test_close_now_retire_correct_and_flags_arguments() -> None:
    assert parsing.parse_close_now([]) is None
    assert parsing.parse_close_now(["12"]) == 12
    with pytest.raises(ConfigurationError, match="usage: /rankzero close-now"):
        parsing.parse_close_now(["abc"], command="/rankzero ")
    assert parsing.parse_retire(["ddp-hang"]) == "ddp-hang"
    with pytest.raises(ConfigurationError, match="usage: question retire"):
        parsing.parse_retire([])
    with pytest.raises(ConfigurationError, match="is not a question id"):
        parsing.question_id("two words")
    with pytest.raises(ConfigurationError, match="is not a question id"):
        parsing.question_id("x" * 201)
    assert parsing.parse_correct(["ddp-hang", "b"]) == ("ddp-hang", "B")
    with pytest.raises(ConfigurationError, match="one letter"):
        parsing.parse_correct(["ddp-hang", "BB"])
    assert parsing.parse_flags([]) is False and parsing.parse_flags(["all"]) is True
    with pytest.raises(ConfigurationError, match="usage: question flags"):
        parsing.parse_flags(["everything"])


def test_dispute_targets_and_variants() -> None:
    assert parsing.parse_dispute_target(["17"]) == "17"
    assert parsing.parse_dispute_target(["today:3"]) == "today:3"
    with pytest.raises(ConfigurationError, match="usage: dispute <problem-id>"):
        parsing.parse_dispute_target(["abc"])
    with pytest.raises(ConfigurationError, match="usage"):
        parsing.parse_dispute_target([])
    head, code = parsing.split_variant("dispute 3 ```python\nif a &lt; b: print(1)```")
    assert head == "dispute 3 " and code == "if a < b: print(1)"
    assert parsing.split_variant("dispute 3") == ("dispute 3", None)
    with pytest.raises(ConfigurationError, match="not closed"):
        parsing.split_variant("dispute 3 ```print(1)")
    with pytest.raises(ConfigurationError, match="empty"):
        parsing.split_variant("dispute 3 ``` ```")


# ---------------------------------------------------------------------- question forms
def test_a_text_form_becomes_a_valid_spec_with_its_runner_line() -> None:
    spec = questions.spec_from_text_form(
        qid=" ddp-print ",
        kind="predict_output",
        topic="DDP",
        difficulty="advanced",
        prompt="What prints?",
        code="runner: ddp 2 init\nprint(rank)\n",
        choices="0\\n1\n1\\n0\n",
        correct="a",
        notes="think ranks\n---\nEach rank prints its own.",
    )
    assert spec["runner"] == {"mode": "ddp", "nproc": 2, "gpus": 0, "init_process_group": True}
    assert spec["code"] == "print(rank)\n" and spec["choices"][0] == {"text": "0\n1", "correct": True}
    assert spec["hint"] == "think ranks" and spec["explanation"] == "Each rank prints its own."
    valid = questions.validate_question(spec)
    assert valid["id"] == "ddp-print" and questions.wants_preview(valid)


def test_an_invalid_form_lists_each_field_to_fix() -> None:
    with pytest.raises(questions.QuestionInvalid) as caught:
        questions.validate_question({"id": "x", "kind": "conceptual", "topic": "DDP", "difficulty": "hard"})
    lines = caught.value.lines()
    assert any(line.startswith("difficulty:") for line in lines)
    with pytest.raises(questions.RunnerLineError, match="unknown runner mode 'gpu'"):
        questions.split_runner_line("runner: gpu 2\nprint(1)", "predict_output")


def test_runner_fields_of_a_form_with_a_field_per_setting() -> None:
    runner, errors = questions.runner_from_fields({"runner_mode": "ddp", "runner_nproc": "x"}, "debug", True)
    assert (
        runner is not None
        and runner["mode"] == "ddp"
        and errors == {"runner_nproc": "a whole number, not 'x'"}
    )
    assert questions.runner_from_fields({}, "conceptual", True) == (None, {})
    assert questions.runner_from_fields({}, "predict_output", True)[0] == questions.DEFAULT_RUNNER


# ---------------------------------------------------------------------- the command bodies, real database
@dataclass
class Layer:
    commands: Commands
    quiz: QuizService
    schedules: ScheduleService
    platform: FakePlatform
    clock: FrozenClock


@pytest.fixture
async def layer(
    service: QuizService, db_url: str, clock: FrozenClock, platform: FakePlatform
) -> AsyncIterator[Layer]:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    schedules = ScheduleService(lambda: SqlUnitOfWork(factory), clock, service, platform)
    policy = AdminPolicy(refusal=REFUSAL)
    yield Layer(Commands(service, schedules, policy), service, schedules, platform, clock)
    await engine.dispose()


async def _allowed() -> None:
    return None


async def _refused() -> None:
    raise PostRefusedError("I cannot post here: grant Send Messages")


async def test_admin_commands_refuse_players_before_touching_anything(layer: Layer) -> None:
    c = layer.commands
    calls = [
        c.post_now(PLAYER, CHANNEL, _allowed),
        c.schedule_set(PLAYER, CHANNEL, {"post_time": "09:00"}, _allowed),
        c.schedule_pause(PLAYER, CHANNEL, paused=True),
        c.close_now(PLAYER, CHANNEL, None),
        c.retire(PLAYER, "int-0"),
        c.preview(PLAYER, "int-0"),
        c.import_questions(PLAYER, []),
    ]
    for call in calls:
        with pytest.raises(NotAdminError, match="ask one"):
            await call
    assert layer.platform.posts == [] and await c.schedule_show(CHANNEL) is None


async def test_post_now_checks_the_platforms_permission_first(layer: Layer) -> None:
    with pytest.raises(PostRefusedError, match="grant Send Messages"):
        await layer.commands.post_now(ADMIN, CHANNEL, _refused)
    assert layer.platform.posts == [] and await layer.quiz.find_challenge(CHANNEL) is None
    card = await layer.commands.post_now(ADMIN, CHANNEL, _allowed)
    assert [c.challenge_id for _, c in layer.platform.posts] == [card.challenge_id]


async def test_schedule_set_show_and_pause(layer: Layer) -> None:
    c = layer.commands
    with pytest.raises(PostRefusedError):
        await c.schedule_set(ADMIN, CHANNEL, {"post_time": "09:00"}, _refused)
    assert await c.schedule_show(CHANNEL) is None
    saved = await c.schedule_set(
        ADMIN, CHANNEL, {"post_time": "09:00", "problems": 3, "days": None}, _allowed
    )
    assert saved.config.problems == 3
    view = await c.schedule_show(CHANNEL)
    assert view is not None and view.next_posts
    assert (await c.schedule_pause(ADMIN, CHANNEL, paused=True)).config.paused


async def test_challenge_is_shown_never_created(layer: Layer) -> None:
    c = layer.commands
    assert await c.challenge(CHANNEL) == NoChallenge(None)
    await c.schedule_set(ADMIN, CHANNEL, {"post_time": "23:00"}, _allowed)
    nothing = await c.challenge(CHANNEL)
    assert isinstance(nothing, NoChallenge) and nothing.next_post is not None
    assert await layer.quiz.find_challenge(CHANNEL) is None
    posted = await c.post_now(ADMIN, CHANNEL, _allowed)
    shown = await c.challenge(CHANNEL)
    assert not isinstance(shown, NoChallenge) and shown.challenge_id == posted.challenge_id


async def test_close_now_closes_the_open_one_then_says_there_is_none(layer: Layer) -> None:
    c = layer.commands
    posted = await c.post_now(ADMIN, CHANNEL, _allowed)
    results = await c.close_now(ADMIN, CHANNEL, None)
    assert results is not None and results.challenge_id == posted.challenge_id
    with pytest.raises(NotFoundError, match="no open challenge"):
        await c.close_now(ADMIN, CHANNEL, None)
    assert await c.close_challenge(ADMIN, posted.challenge_id) is None  # already closed


async def test_dispute_targets_resolve_against_todays_challenge_here(layer: Layer) -> None:
    c = layer.commands
    with pytest.raises(NotFoundError, match="no challenge in this channel today"):
        await c.resolve_problem(CHANNEL, "today:1")
    posted = await c.post_now(ADMIN, CHANNEL, _allowed)
    challenge = await layer.quiz.get_challenge(posted.challenge_id)
    second = next(p for p in challenge.problems if p.position == 2)
    assert await c.resolve_problem(CHANNEL, "today:2") == second.id
    assert await c.resolve_problem(CHANNEL, "today 2") == second.id
    assert await c.resolve_problem(CHANNEL, second.question.id) == second.id
    assert await c.resolve_problem(CHANNEL, "4711") == 4711
    with pytest.raises(NotFoundError, match="problems 1 to 5, not 9"):
        await c.resolve_problem(CHANNEL, "today:9")
    with pytest.raises(ConfigurationError, match="runner is not configured"):
        await c.dispute(PLAYER, CHANNEL, "today:1")


async def test_questions_retire_preview_and_stats(layer: Layer) -> None:
    c = layer.commands
    spec = await c.preview(ADMIN, "int-0")
    assert spec["id"] == "int-0" and any(ch.get("correct") for ch in spec["choices"])
    await c.retire(ADMIN, "int-0")
    assert (await c.preview(ADMIN, "int-0"))["id"] == "int-0"  # retired ones can still be previewed
    with pytest.raises(NotFoundError, match="no question with id 'nope'"):
        await c.preview(ADMIN, "nope")
    stats = await c.stats(PLAYER.player, CHANNEL)
    assert stats.practice is None and stats.record is not None
    board = await c.leaderboard(PLAYER, CHANNEL, Scope.WORKSPACE, Period.WEEK)
    assert board is not None
    with pytest.raises(ConfigurationError, match="disputes are not set up"):
        await c.flags(ADMIN, everything=False)
