"""The command layer at its boundary (bot/commands): admin decisions, parsing of what was typed, the
command bodies and the problem flow with its deadline timer, against a real database (SQLite and
PostgreSQL through the conftest fixtures).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from bot.commands import parsing, questions
from bot.commands.admin import AdminPolicy, PlatformRights
from bot.commands.dedup import Redeliveries
from bot.commands.flow import ProblemFlow
from bot.commands.handlers import Commands, NoChallenge
from bot.core.cards import Feedback, ProblemCard
from bot.core.errors import ConfigurationError, NotAdminError, NotFoundError, PostRefusedError
from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.core.vocabulary import Period, Scope
from bot.services import App
from bot.storage.db import make_engine
from bot.storage.repositories.deliveries import SqlDeliveryLog
from tests.fakes import FakePlatform, FrozenClock

REFUSAL = "only admins can do that: ask one"
CHANNEL = ChannelRef("test", "W1", "C1", "general", "UTC")
ADMIN = Actor(PlayerRef("test", "boss", "Boss"), is_admin=True, tenant=CHANNEL.tenant)
PLAYER = Actor(PlayerRef("test", "pat", "Pat"), tenant=CHANNEL.tenant)


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


def test_post_now_takes_no_options() -> None:
    parsing.parse_post_now([])
    with pytest.raises(ConfigurationError, match=r"usage: /rankzero post-now .*schedule set"):
        parsing.parse_post_now(["--window", "8h"], command="/rankzero ")


def test_dispute_targets_and_variants() -> None:
    assert parsing.parse_dispute_target(["17"]) == "17"
    assert parsing.parse_dispute_target(["today:3"]) == "today:3"
    assert parsing.parse_dispute_target(["ddp-hang"]) == "ddp-hang"  # a question id asked today
    for malformed in (["two", "words"], ["²"], ["9" * 11], ["x" * 201]):
        with pytest.raises(ConfigurationError, match=r"usage: dispute <problem> \(today:N"):
            parsing.parse_dispute_target(malformed)
    assert parsing.problem_reference(" 17 ") == 17 and parsing.problem_reference("today 2") == "today 2"
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
def layer(app: App, clock: FrozenClock, platform: FakePlatform) -> Layer:
    """The command layer over the app's quiz and schedules (no disputes, no practice: as the console)."""
    policy = AdminPolicy(refusal=REFUSAL)
    return Layer(Commands(app.service, app.schedules, policy), app.service, app.schedules, platform, clock)


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


# ---------------------------------------------------------------------- the problem flow and its timer
class Surfaces:
    """What the flow asked the 'adapter' to render on time-up: (surface, problem id, outcome)."""

    def __init__(self) -> None:
        self.timed_out: list[tuple[str, int, str | None]] = []

    async def time_up(self, surface: str, card: ProblemCard, feedback: Feedback) -> None:
        self.timed_out.append((surface, card.problem_id, feedback.outcome))


async def _eventually(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not predicate():
            await asyncio.sleep(0.005)


async def _flow(layer: Layer) -> tuple[ProblemFlow[str], Surfaces, int]:
    surfaces = Surfaces()
    flow: ProblemFlow[str] = ProblemFlow(layer.quiz, layer.clock, surfaces.time_up)
    posted = await layer.commands.post_now(ADMIN, CHANNEL, _allowed)
    return flow, surfaces, posted.challenge_id


async def test_start_arms_one_timer_and_time_up_renders_on_the_surface(layer: Layer) -> None:
    flow, surfaces, challenge_id = await _flow(layer)
    shown = await flow.next(PLAYER, challenge_id, "view-1", "view-1")
    assert shown.card is not None and shown.card.position == 1 and flow.timers.armed == 1
    again = await flow.next(PLAYER, challenge_id, "view-1", "view-1")  # a second Start resumes it
    assert again.card is not None and again.card.problem_id == shown.card.problem_id
    assert flow.timers.armed == 1
    layer.clock.advance(119)
    await asyncio.sleep(0.05)
    assert surfaces.timed_out == []
    layer.clock.advance(2)
    await _eventually(lambda: bool(surfaces.timed_out))
    assert surfaces.timed_out == [("view-1", shown.card.problem_id, "timeout")]
    assert (await flow.view(PLAYER, shown.card.problem_id)).over
    await flow.close()


async def test_a_wrong_answer_keeps_the_timer_a_final_answer_disarms_it(layer: Layer) -> None:
    flow, surfaces, challenge_id = await _flow(layer)
    shown = await flow.next(PLAYER, challenge_id, "s")
    assert shown.card is not None
    pid = shown.card.problem_id
    wrong = await flow.answer(PLAYER, pid, "B", "click-1", "s")
    assert wrong.feedback is not None and not wrong.feedback.correct and flow.timers.armed == 1
    duplicate = await flow.answer(PLAYER, pid, "B", "click-1", "s")  # the same click redelivered
    assert duplicate.feedback is not None and duplicate.feedback.duplicate
    right = await flow.answer(PLAYER, pid, "A", "click-2", "s")
    assert (
        right.feedback is not None and right.feedback.correct and right.card is not None and right.card.over
    )
    await _eventually(lambda: flow.timers.armed == 0)
    layer.clock.advance(600)
    await asyncio.sleep(0.05)
    assert surfaces.timed_out == []  # nothing to announce: the problem ended in time
    await flow.close()


async def test_time_up_goes_through_the_latest_surface_that_shows_the_problem(layer: Layer) -> None:
    flow, surfaces, challenge_id = await _flow(layer)
    first = await flow.next(PLAYER, challenge_id, "old-token")
    assert first.card is not None
    # A later click on the same problem (a hint) brings a fresher handle (Discord: a new interaction
    # token); the one timer stays and edits through it.
    await flow.hint(PLAYER, first.card.problem_id, "new-token")
    assert flow.timers.armed == 1
    layer.clock.advance(121)
    await _eventually(lambda: bool(surfaces.timed_out))
    assert surfaces.timed_out == [("new-token", first.card.problem_id, "timeout")]
    await flow.close()


async def test_hint_then_summary_after_the_last_problem(layer: Layer) -> None:
    flow, _, challenge_id = await _flow(layer)
    shown = await flow.next(PLAYER, challenge_id, "s")
    assert shown.card is not None
    hinted = await flow.hint(PLAYER, shown.card.problem_id, "s")
    assert hinted.hint is not None and hinted.card is not None and hinted.card.hint
    for n in range(5):
        current = await flow.next(PLAYER, challenge_id, "s")
        assert current.card is not None and current.card.position == n + 1
        await flow.answer(PLAYER, current.card.problem_id, "A", f"k{n}", "s")
    done = await flow.next(PLAYER, challenge_id, "s")
    assert done.card is None and done.summary is not None and flow.timers.armed == 0
    await flow.close()


# ---------------------------------------------------------------------- redelivered events
async def test_a_redelivery_is_dropped_here_and_in_another_process(db_url: str, clock: FrozenClock) -> None:
    engine = make_engine(db_url)
    try:
        here = Redeliveries(clock, SqlDeliveryLog(engine))
        elsewhere = Redeliveries(clock, SqlDeliveryLog(engine))  # a second process on the same database
        assert await here.first("event:Ev1")
        assert not await here.first("event:Ev1")  # Slack's retry reaching this process
        assert not await elsewhere.first("event:Ev1")  # ... or another one
        here.forget_local()  # a restart: the database still remembers
        assert not await here.first("event:Ev1")
        assert await elsewhere.first("event:Ev2")
        assert here.first_here("action:U1:rz:start:1:17.0") and not here.first_here(
            "action:U1:rz:start:1:17.0"
        )
    finally:
        await engine.dispose()


class BrokenLog:
    async def first(self, key: str, now: dt.datetime) -> bool:
        raise ConnectionError("database gone")


async def test_an_unreachable_delivery_log_lets_the_event_through(
    clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    deliveries = Redeliveries(clock, BrokenLog())
    assert await deliveries.first("event:Ev9")  # a lost event is worse than a duplicate Home tab
    assert "the delivery log failed" in caplog.text
    assert not await deliveries.first("event:Ev9")  # this process still remembers it


def test_the_local_memory_is_bounded(clock: FrozenClock) -> None:
    deliveries = Redeliveries(clock, remember=3)
    for n in range(5):
        assert deliveries.first_here(f"k{n}")
    assert deliveries.first_here("k0")  # forgotten: the oldest went first
    assert not deliveries.first_here("k4")


async def test_the_team_report_is_a_schedule_option_admins_turn_on_and_off(layer: Layer) -> None:
    # As Slack's `/rankzero schedule set` words and Discord's options both reach the command layer.
    words = ["--time", "09:00", "--weekly-summary", "mon", "--team-report", "on"]
    options = parsing.parse_schedule_options(words)
    assert options["team_report"] == "on"
    with pytest.raises(NotAdminError):
        await layer.commands.schedule_set(PLAYER, CHANNEL, options, _allowed)
    saved = await layer.commands.schedule_set(ADMIN, CHANNEL, options, _allowed)
    assert saved.config.team_report and saved.config.summary_day == 1
    off = parsing.parse_schedule_options(["--team-report", "off"])
    assert not (await layer.commands.schedule_set(ADMIN, CHANNEL, off, _allowed)).config.team_report
