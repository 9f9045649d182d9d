"""The one Discord harness: discord.py's real client logged in against the local fake of the Discord REST
API (tests/discord_fake.py), with the services ``serve`` would give it (built through the bootstrap,
tests/bootstrap.py) attached, and the helpers the Discord tests read it with.

The ``bot`` fixture (tests/conftest.py) opens one per test with the module's ``bot_options`` (a fixture a
module overrides: admin roles, an admin channel, a runner for disputes, the outbox's times, the
adapter's own settings); a test that needs a second bot (a restart) calls :func:`open_bot` and
:func:`close_bot`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.adapters.discord.app import DiscordAdapter, RankZeroClient, RankZeroShardedClient
from bot.core.models import ChannelRef
from bot.core.outbox import OutboxTiming
from bot.core.ports import RunnerClient
from bot.core.practice import PracticeService
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.services import Services
from bot.storage.models import ChallengeRow
from tests.bootstrap import build_test_services
from tests.conftest import test_bank
from tests.discord_fake import CHANNEL_ID, GUILD_ID, MANAGE_GUILD, FakeDiscord, Interactions
from tests.fakes import FrozenClock

#: The fake guild's text channel, as the services name it.
CHANNEL = ChannelRef("discord", str(GUILD_ID), str(CHANNEL_ID), "general")
#: A role the adapter treats as an admin role when ``BotOptions.admin_roles`` names it.
ADMIN_ROLE = 555000000000000001
#: The channel admin notices go to when ``BotOptions.admin_channel`` names it.
ADMIN_CHANNEL = 700000000000000099


@dataclass(frozen=True)
class BotOptions:
    """How a test's bot is opened (a module's ``bot_options`` fixture returns one)."""

    #: The question specs imported before the adapter attaches (None: an empty bank).
    bank: list[dict[str, Any]] | None = field(default_factory=test_bank)
    #: Discord role ids the adapter treats as admins; the fake guild creates them.
    admin_roles: tuple[int, ...] = ()
    #: Where admin notices go (None: nowhere configured).
    admin_channel: int | None = None
    #: The runner disputes run on (None: none configured, as without RANKZERO_RUNNER_URL).
    runner: RunnerClient | None = None
    #: The outbox's lease, backoff and give-up times (None: the service's defaults).
    outbox: OutboxTiming | None = None
    #: Further DiscordAdapter keyword arguments (handler_deadline_s, guild_id, sync_state...).
    adapter: dict[str, Any] = field(default_factory=dict)

    def but(self, **changes: Any) -> BotOptions:
        """These options with ``changes`` (for a second bot opened by hand in a test)."""
        return replace(self, **changes)


@dataclass
class Bot:
    """A running adapter (logged in against the fake) with its services and the fake's helpers."""

    adapter: DiscordAdapter
    services: Services
    runner: RunnerClient | None
    fake: FakeDiscord
    act: Interactions
    clock: FrozenClock

    @property
    def client(self) -> RankZeroClient | RankZeroShardedClient:
        return self.adapter.client

    @property
    def quiz(self) -> QuizService:
        return self.services.quiz

    @property
    def schedules(self) -> ScheduleService:
        return self.services.schedules

    @property
    def practice(self) -> PracticeService:
        return self.services.app.practice

    @property
    def engine(self) -> AsyncEngine:
        return self.services.app.engine

    async def post(self) -> int:
        """The daily post; returns the posted message id."""
        await self.quiz.post_daily(CHANNEL)
        posted = self.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")
        return int(self.fake.messages[max(self.fake.messages)]["id"]) if posted else 0

    def buttons(self, message_id: int) -> dict[str, str]:
        """label -> custom_id of a message's buttons."""
        return {
            c["label"]: c["custom_id"]
            for row in self.fake.messages[message_id]["components"]
            for c in row["components"]
        }

    def edits(self, token: str) -> list[Any]:
        """Bodies of the @original edits made with an interaction token."""
        return [r.body for r in self.fake.calls("PATCH", rf"/webhooks/\d+/{token}/messages/@original")]

    def followups(self, token: str) -> list[Any]:
        """Bodies of the follow-up messages sent with an interaction token."""
        return [r.body for r in self.fake.calls("POST", rf"/webhooks/\d+/{token}")]

    def callbacks(self, token: str) -> list[Any]:
        """Bodies of the interaction responses made for a token."""
        return [r.body for r in self.fake.calls("POST", rf"/interactions/\d+/{token}/callback")]

    async def reply(self, token: str, timeout: float = 10.0) -> dict[str, Any]:
        """The last follow-up sent for ``token`` (waits for it, failing after ``timeout`` seconds: a hang
        guard, not a bound on the bot's speed).
        """
        await self.fake.wait_for(lambda: self.followups(token), timeout)
        return dict(self.followups(token)[-1])

    async def start(self, post_id: int, user_id: int = 111) -> tuple[str, int]:
        """Press Start; return the token and the ephemeral message id."""
        token = self.act.click(self.client, post_id, self.buttons(post_id)["Start"], user_id=user_id)
        await self.fake.wait_for(lambda: self.edits(token))
        return token, self.fake.originals[token]

    async def command(self, name: str, options: list[dict[str, Any]] | None = None, **kw: Any) -> int:
        """Run a command answered in an ephemeral message; its id once it is filled in."""
        token = self.act.command(self.client, name, options, **kw)
        await self.fake.wait_for(lambda: self.edits(token))
        return self.fake.originals[token]

    async def click(self, message_id: int, label: str, **kw: Any) -> str:
        """Click a button of a message by label; the token once the bot edited or followed up."""
        token = self.act.click(self.client, message_id, self.buttons(message_id)[label], **kw)
        await self.fake.wait_for(lambda: self.edits(token) or self.followups(token))
        return token

    async def challenges(self) -> int:
        """How many challenges the database holds."""
        async with self.engine.connect() as conn:
            return int((await conn.execute(select(func.count()).select_from(ChallengeRow))).scalar_one())

    async def question_ids(self) -> list[str]:
        """The ids of the questions the fake guild's tenant sees."""
        return [q.id for q in await self.quiz.list_questions(view=CHANNEL.tenant)]

    def draft_message(self) -> int:
        """The id of the latest message carrying a draft's Save button."""
        return max(
            mid
            for mid, msg in self.fake.messages.items()
            if any(
                c["custom_id"].startswith("rzq:save:") for row in msg["components"] for c in row["components"]
            )
        )

    async def open_form(self, qid: str, kind: str = "predict_output", **kw: Any) -> tuple[str, list[str]]:
        """``/question add`` as an admin; the modal's custom id and its five inputs' ids."""
        opts = [
            {"type": 3, "name": "id", "value": qid},
            {"type": 3, "name": "topic", "value": "DDP"},
            {"type": 3, "name": "difficulty", "value": "advanced"},
            {"type": 3, "name": "kind", "value": kind},
        ]
        token = self.act.command(self.client, "question add", opts, permissions=MANAGE_GUILD, **kw)
        await self.fake.wait_for(lambda: self.callbacks(token))
        [modal] = self.callbacks(token)
        assert modal["type"] == 9
        inputs = [row["components"][0]["custom_id"] for row in modal["data"]["components"]]
        return modal["data"]["custom_id"], inputs

    async def submit_form(
        self, qid: str, code: str, *, kind: str = "predict_output", correct: str = "a"
    ) -> str:
        """Open the form and submit it with choices about the all-reduce; the submission's token."""
        custom_id, (prompt, code_id, choices, letter, notes) = await self.open_form(qid, kind)
        return self.act.submit_modal(
            self.client,
            custom_id,
            {
                prompt: "Two ranks all-reduce 1 and 2. What is printed?",
                code_id: code,
                # "\n" typed in a choice is a line break: one choice per rank's line
                choices: "tensor([3.])\\ntensor([3.])\ntensor([1.])\\ntensor([2.])\ntensor([3.])",
                letter: correct,
                notes: "",
            },
            permissions=MANAGE_GUILD,
        )


async def open_bot(
    fake: FakeDiscord, db: str, clock: FrozenClock, options: BotOptions, act: Interactions | None = None
) -> Bot:
    """An adapter logged in against ``fake`` with the services over ``db`` attached, in the fake guild;
    ``act``: the interactions of the process before a restart (their tokens go on counting: none reused).
    """
    adapter = DiscordAdapter(
        "test-token",
        clock=clock,
        admin_roles=list(options.admin_roles),
        admin_channel_id=options.admin_channel,
        **options.adapter,
    )
    outbox = {}
    if options.outbox is not None:
        outbox = {f"outbox_{name}": value for name, value in dataclasses.asdict(options.outbox).items()}
    services = await build_test_services(
        db, [adapter], clock=clock, runner=options.runner, bank=options.bank, **outbox
    )
    await adapter.client.login("test-token")
    adapter.attach(services)
    act = act or Interactions(fake)
    act.join_guild(adapter.client, list(options.admin_roles))
    return Bot(adapter, services, options.runner, fake, act, clock)


async def close_bot(bot: Bot) -> None:
    """Stop the adapter and release the database."""
    await bot.adapter.stop()
    await bot.services.app.close()
