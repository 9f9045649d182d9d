"""Slack OAuth mode (issue 17): one RankZero serving many workspaces.

Real boundaries: the installer's browser is an httpx client with a cookie jar that follows redirects from
the app's real /slack/install to the strict fake's /oauth/v2/authorize and back to the app's
/slack/oauth_redirect; Bolt exchanges the code with the fake's oauth.v2.access and saves the install
through slack_sdk's async SQLAlchemy store into the migrated database. Slash commands, clicks and events
are signed HTTP requests from each workspace; every Web API call the app makes must carry that
workspace's token (the fake refuses another workspace's channel, unknown and revoked tokens).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from pydantic import SecretStr
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore

from bot.adapters.slack.app import EVENTS_PATH, INSTALL_PATH, REDIRECT_PATH, SlackAdapter, build_adapter
from bot.adapters.slack.stores import TOKEN_COLUMNS
from bot.adapters.slack.workspaces import Workspace
from bot.bootstrap import build_services
from bot.config import Settings
from bot.core.errors import ConfigurationError, PostRefusedError
from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.vocabulary import Scope
from bot.secret_box import PREFIX, new_key
from bot.services import Services
from bot.storage.models import SEALED_TOKEN_LENGTH, Base
from tests.conftest import ADMIN, START, test_bank
from tests.fakes import FrozenClock
from tests.net import free_port
from tests.slack_fake import SECRET, Channel, FakeSlackApi, Grant, SlackSender, Team

OWNER = "UOWNER"
PLAYER = "UPLAYER"
ALPHA, BETA, GRID_TEAM, GRID = "T0001", "T0002", "T0003", "E0009"


class Harness:
    """The OAuth-mode adapter, the fake, a browser and a sender per workspace."""

    def __init__(
        self, api: FakeSlackApi, adapter: SlackAdapter, services: Services, base: str, http: httpx.AsyncClient
    ) -> None:
        self.api = api
        self.adapter = adapter
        self.services = services
        self.base = base
        self.http = http
        self.expected_refusals: list[tuple[str, str]] = []
        #: The last install's browser hops: /slack/install, Slack's page, the redirect back.
        self.hops: list[str] = []

    def sender(self, team: str, enterprise: str | None = None) -> SlackSender:
        return SlackSender(f"{self.base}{EVENTS_PATH}", self.api, self.http, team=team, enterprise=enterprise)

    async def install(self, team: str) -> httpx.Response:
        """A workspace admin opens /slack/install in a browser and approves in Slack for ``team``."""
        self.api.installing = team
        async with httpx.AsyncClient(timeout=10) as browser:
            start = await browser.get(f"{self.base}{INSTALL_PATH}")
            assert start.status_code == 302, start.text
            # Bolt's state cookie is Secure (production is https): a browser sends it back to the app;
            # httpx keeps Secure cookies from plain http, so the test carries it as a browser would.
            cookie = start.headers["set-cookie"].split(";", 1)[0]
            assert "Secure" in start.headers["set-cookie"] and "HttpOnly" in start.headers["set-cookie"]
            approved = await browser.get(start.headers["location"])  # Slack's page: the admin approves
            assert approved.status_code == 302, approved.text
            self.hops = [str(start.url), start.headers["location"], approved.headers["location"]]
            return await browser.get(approved.headers["location"], headers={"Cookie": cookie})

    async def post_now(self, send: SlackSender, channel: str) -> dict[str, Any]:
        """``/rankzero post-now`` by the owner in ``channel``; the chat.postMessage it made."""
        n = len(self.api.of("chat.postMessage"))
        r = await send.command(OWNER, "post-now", channel=channel)
        assert r.status_code == 200
        return (await self.api.wait_for("chat.postMessage", n + 1))[-1].args

    async def bot(self, ws: Workspace) -> Any:
        store = self.services.slack_installations
        assert store is not None
        return await store.async_find_bot(
            enterprise_id=ws.enterprise_id, team_id=ws.team_id, is_enterprise_install=ws.is_enterprise_install
        )


@pytest.fixture
async def oauth(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Harness]:
    db = tmp_path / "oauth.db"
    db.write_bytes(sqlite_template.read_bytes())
    api = FakeSlackApi(
        # UINSTALLER: whoever approves an install (the fake's authed_user), a member who can get a DM.
        users={OWNER: {"is_owner": True, "profile": {"display_name": "Olga"}}, PLAYER: {}, "UINSTALLER": {}},
        teams={ALPHA: Team("Alpha"), BETA: Team("Beta"), GRID_TEAM: Team("Gamma", enterprise=GRID)},
        channels={
            "CA1": Channel("general", team=ALPHA),
            "CB1": Channel("general", team=BETA),
            "CG1": Channel("general", team=GRID_TEAM),
        },
    )
    await api.start()
    api.tokens.clear()  # OAuth mode: no token until a workspace installs the app
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api.redirect_uris = [f"{base}{REDIRECT_PATH}"]
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{db}",
        slack_client_id=api.client_id,
        slack_client_secret=SecretStr(api.client_secret),
        slack_signing_secret=SecretStr(SECRET),
        slack_redirect_uri=f"{base}{REDIRECT_PATH}",
        slack_authorize_url=api.authorize_url,
        slack_port=port,
        health_port=0,
        secret_key=SecretStr(new_key()),
    )
    assert settings.slack_oauth
    adapter = build_adapter(settings, base_url=api.base_url)
    clock = FrozenClock(START)
    adapter.ctx.clock = clock
    services = await build_services(settings, [adapter], clock=clock, migrate=False)
    await services.quiz.admin_import(ADMIN, test_bank())
    await adapter.start(services)
    async with httpx.AsyncClient(timeout=10) as http:
        h = Harness(api, adapter, services, base, http)
        try:
            yield h
            unexpected = [r for r in api.refused if r[1] != "ratelimited" and r not in h.expected_refusals]
            assert not unexpected, f"Slack refused: {unexpected}"
        finally:
            await adapter.stop()
            await services.app.close()
            await api.stop()


# ---------------------------------------------------------------------- the tables
def test_our_tables_are_slack_sdks() -> None:
    """The migration's tables are the ones slack_sdk's stores read and write, column for column."""
    meta = sa.MetaData()
    theirs = [
        SQLAlchemyInstallationStore.build_installations_table(meta, "slack_installations"),
        SQLAlchemyInstallationStore.build_bots_table(meta, "slack_bots"),
        SQLAlchemyOAuthStateStore.build_oauth_states_table(meta, "slack_oauth_states"),
    ]
    for table in theirs:
        ours = Base.metadata.tables[table.name]
        assert [c.name for c in ours.columns] == [c.name for c in table.columns], table.name
        sealed = TOKEN_COLUMNS.get(table.name, ())
        for col in table.columns:
            mine = ours.columns[col.name]
            assert type(mine.type) is type(col.type), (table.name, col.name)
            if col.name in sealed:  # wider: they hold the tokens encrypted (migration 0009)
                assert mine.type.length == SEALED_TOKEN_LENGTH > col.type.length, col.name  # type: ignore[attr-defined]
                continue
            assert getattr(mine.type, "length", None) == getattr(col.type, "length", None), col.name
            assert mine.nullable == col.nullable, (table.name, col.name)
        assert {i.name for i in ours.indexes} == {i.name for i in table.indexes}


def test_workspace_keys_round_trip() -> None:
    for ws in (
        Workspace(None, "T1"),
        Workspace("E1", "T1"),
        Workspace("E1", None, is_enterprise_install=True),
    ):
        assert Workspace.from_key(ws.key) == ws
    assert Workspace(None, "T1").key == "T1"  # single-workspace mode's keys stay valid
    # An org-wide install keys its channels by the org, whichever workspace the request came from.
    assert Workspace("E1", "T7", is_enterprise_install=True).key == "E1"


def test_half_an_oauth_configuration_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="RANKZERO_SLACK_CLIENT_SECRET"):
        build_adapter(Settings(slack_client_id="1.2", slack_signing_secret=SecretStr("s")))
    with pytest.raises(ConfigurationError, match="unset RANKZERO_SLACK_APP_TOKEN"):
        build_adapter(
            Settings(
                slack_client_id="1.2",
                slack_client_secret=SecretStr("c"),
                slack_signing_secret=SecretStr("s"),
                slack_app_token=SecretStr("xapp-1"),
            )
        )


# ---------------------------------------------------------------------- install
async def test_install_round_trip_saves_the_workspace_token(oauth: Harness) -> None:
    r = await oauth.install(ALPHA)
    assert r.status_code == 200, r.text
    # The browser went app -> Slack's page -> app, carrying one state.
    hops = oauth.hops
    assert hops[0].endswith(INSTALL_PATH) and hops[1].startswith(oauth.api.authorize_url)
    assert hops[2].startswith(f"{oauth.base}{REDIRECT_PATH}?code=")
    assert [c.args["_team"] for c in oauth.api.of("oauth.v2.access")] == [ALPHA]
    bot = await oauth.bot(Workspace(None, ALPHA))
    assert bot is not None and bot.bot_token == oauth.api.token_of(ALPHA)
    assert bot.bot_id == f"BBOT{ALPHA}"  # Bolt's auth.test with the new token
    assert "chat:write" in bot.bot_scopes
    # The state is good once: the same redirect again (a replayed link) is refused, nothing exchanged.
    async with httpx.AsyncClient(timeout=10) as other:
        again = await other.get(str(r.url))
    assert again.status_code >= 400
    assert len(oauth.api.of("oauth.v2.access")) == 1


async def test_invalid_state_is_refused(oauth: Harness) -> None:
    async with httpx.AsyncClient(timeout=10) as browser:
        forged = await browser.get(f"{oauth.base}{REDIRECT_PATH}?code=code-x&state=forged")
        assert forged.status_code >= 400
        # A real state, but from another browser (no state cookie): refused too.
        start = await browser.get(f"{oauth.base}{INSTALL_PATH}")
        assert start.status_code == 302
        location = httpx.URL(start.headers["location"])
        state = location.params["state"]
        assert location.params["client_id"] == oauth.api.client_id
        assert "chat:write" in location.params["scope"].split(",")
    async with httpx.AsyncClient(timeout=10) as stranger:
        r = await stranger.get(f"{oauth.base}{REDIRECT_PATH}?code=code-x&state={state}")
        assert r.status_code >= 400
    assert not oauth.api.of("oauth.v2.access")
    assert await oauth.bot(Workspace(None, ALPHA)) is None


async def _states(oauth: Harness) -> list[tuple[str, dt.datetime]]:
    async with oauth.services.app.engine.connect() as conn:
        rows = await conn.execute(sa.text("SELECT state, expire_at FROM slack_oauth_states ORDER BY id"))
        # SQLite gives the raw text of a DATETIME through sa.text(); PostgreSQL a datetime.
        return [(str(state), dt.datetime.fromisoformat(str(expire_at))) for state, expire_at in rows]


async def test_install_links_are_limited_per_client(oauth: Harness) -> None:
    """Each unauthenticated GET /slack/install writes a state row: one client gets a few a minute."""
    assert oauth.adapter.http is not None
    limit = oauth.adapter.http.installs.per_minute
    async with httpx.AsyncClient(timeout=10) as flooder:
        answers = [(await flooder.get(f"{oauth.base}{INSTALL_PATH}")) for _ in range(limit + 3)]
    assert [a.status_code for a in answers] == [302] * limit + [429] * 3
    assert int(answers[-1].headers["Retry-After"]) > 0
    assert "set-cookie" not in answers[-1].headers
    assert len(await _states(oauth)) == limit  # the refused ones wrote nothing


async def test_expired_install_states_are_deleted(oauth: Harness) -> None:
    """slack_sdk's store refuses an expired state but keeps its row; issuing a new one deletes them."""
    async with httpx.AsyncClient(timeout=10) as browser:
        assert (await browser.get(f"{oauth.base}{INSTALL_PATH}")).status_code == 302
    [(old, _)] = await _states(oauth)
    past = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=1)
    async with oauth.services.app.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE slack_oauth_states SET expire_at = :t"), {"t": past})
    async with httpx.AsyncClient(timeout=10) as browser:
        assert (await browser.get(f"{oauth.base}{INSTALL_PATH}")).status_code == 302
    states = await _states(oauth)
    assert len(states) == 1 and states[0][0] != old  # the expired one is gone, the new one is kept
    assert states[0][1] > past


async def test_a_code_is_exchanged_once_with_the_client_secret(oauth: Harness) -> None:
    """The fake's oauth.v2.access is strict: a wrong secret and a reused code are refused."""
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(base_url=oauth.api.base_url)
    oauth.api.codes["code-1"] = Grant(ALPHA, None, {"chat:write"}, float("inf"))
    oauth.expected_refusals += [("oauth.v2.access", "bad_client_secret"), ("oauth.v2.access", "invalid_code")]
    with pytest.raises(SlackApiError, match="bad_client_secret"):
        await client.oauth_v2_access(client_id=oauth.api.client_id, client_secret="nope", code="code-1")
    ok = await client.oauth_v2_access(
        client_id=oauth.api.client_id, client_secret=oauth.api.client_secret, code="code-1"
    )
    assert ok["team"]["id"] == ALPHA
    with pytest.raises(SlackApiError, match="invalid_code"):
        await client.oauth_v2_access(
            client_id=oauth.api.client_id, client_secret=oauth.api.client_secret, code="code-1"
        )


# ---------------------------------------------------------------------- two workspaces
async def test_two_workspaces_never_mix(oauth: Harness) -> None:
    assert (await oauth.install(ALPHA)).status_code == 200
    assert (await oauth.install(BETA)).status_code == 200
    alpha, beta = oauth.sender(ALPHA), oauth.sender(BETA)

    # Each workspace's post goes out with its own token, in its own channel.
    post_a = await oauth.post_now(alpha, "CA1")
    post_b = await oauth.post_now(beta, "CB1")
    assert (post_a["channel"], post_a["_team"]) == ("CA1", ALPHA)
    assert (post_b["channel"], post_b["_team"]) == ("CB1", BETA)

    # Schedules: one per workspace, each keyed by its workspace.
    assert (await alpha.command(OWNER, "schedule set --time 09:30", channel="CA1")).status_code == 200
    assert (await beta.command(OWNER, "schedule set --time 18:00", channel="CB1")).status_code == 200
    await oauth.api.wait_for("response", 4)
    by_ws = {s.channel.workspace_id: s for s in await oauth.services.schedules.schedules()}
    assert set(by_ws) == {ALPHA, BETA}
    assert (by_ws[ALPHA].config.hour, by_ws[BETA].config.hour) == (9, 18)

    # A score in Alpha is on Alpha's boards only.
    quiz = oauth.services.quiz
    pat = Actor(PlayerRef("slack", PLAYER, "Pat"))
    ch_a, ch_b = ChannelRef("slack", ALPHA, "CA1"), ChannelRef("slack", BETA, "CB1")
    start = next(e["action_id"] for b in post_a["blocks"] if b["type"] == "actions" for e in b["elements"])
    problem = await quiz.next_problem(pat, int(start.split(":")[2]))
    assert problem is not None
    await quiz.start_problem(pat, problem.id)
    await quiz.answer(pat, problem.id, "A", idempotency_key="k1")
    for scope in (Scope.CHANNEL, Scope.WORKSPACE):
        assert [r.display_name for r in (await quiz.leaderboard(ch_a, scope=scope)).rows] == ["Pat"]
        assert not (await quiz.leaderboard(ch_b, scope=scope)).rows

    # A workspace cannot reach the other's channel: Beta's command naming Alpha's channel is refused by
    # Slack (its token does not see it), never posted with Alpha's token.
    oauth.expected_refusals.append(("conversations.info", "channel_not_found"))
    n = len(oauth.api.of("chat.postMessage"))
    await beta.command(OWNER, "post-now", channel="CA1")
    await oauth.api.wait_for("response", 5)
    assert len(oauth.api.of("chat.postMessage")) == n


async def test_enterprise_grid_workspace_is_keyed_by_org_and_team(oauth: Harness) -> None:
    assert (await oauth.install(GRID_TEAM)).status_code == 200
    bot = await oauth.bot(Workspace(GRID, GRID_TEAM))
    assert bot is not None and bot.enterprise_id == GRID
    post = await oauth.post_now(oauth.sender(GRID_TEAM, enterprise=GRID), "CG1")
    assert post["_team"] == GRID_TEAM
    (schedule_less,) = [c for c in await _channels(oauth) if c.channel_id == "CG1"]
    assert schedule_less.workspace_id == f"{GRID}/{GRID_TEAM}"
    # The scheduler's path (no request): the key alone finds the Grid install's token.
    n = len(oauth.api.of("chat.postMessage"))
    await oauth.services.quiz.post_daily(
        ChannelRef("slack", f"{GRID}/{GRID_TEAM}", "CG1"), START.date() + dt.timedelta(days=1)
    )
    assert oauth.api.of("chat.postMessage")[n].args["_team"] == GRID_TEAM


async def test_an_admin_in_one_workspace_is_not_one_in_another(oauth: Harness) -> None:
    """Admin answers (users.info) are per workspace and made with that workspace's token: a Grid user who
    administers Gamma is a plain member of Delta, in the same org, with the same user id.
    """
    delta, shared = "T0004", "WSHARED"
    oauth.api.teams[delta] = Team("Delta", enterprise=GRID)
    oauth.api.channels["CG2"] = Channel("general", team=delta)
    oauth.api.members = {
        GRID_TEAM: {shared: {"is_admin": True, "profile": {"display_name": "Sam"}}},
        delta: {shared: {"profile": {"display_name": "Sam"}}},
    }
    assert (await oauth.install(GRID_TEAM)).status_code == 200
    assert (await oauth.install(delta)).status_code == 200
    gamma, delta_send = oauth.sender(GRID_TEAM, enterprise=GRID), oauth.sender(delta, enterprise=GRID)

    assert (await gamma.command(shared, "post-now", channel="CG1")).status_code == 200
    [post] = await oauth.api.wait_for("chat.postMessage")
    assert post.args["_team"] == GRID_TEAM
    await oauth.api.wait_for("response", 1)  # "Posted ..."
    n = 1
    # Within the admin cache's lifetime, the same user in Delta: Delta's own answer decides.
    assert (await delta_send.command(shared, "post-now", channel="CG2")).status_code == 200
    told = (await oauth.api.wait_for("response", n + 1))[-1]
    assert "only admins" in told.dump()
    assert len(oauth.api.of("chat.postMessage")) == 1, "nothing posted in Delta"
    asked = [c.args["_team"] for c in oauth.api.of("users.info") if c.args.get("user") == shared]
    assert asked == [GRID_TEAM, delta], "each workspace asked once, with its own token"
    # And the other way round: Delta's "member" answer does not demote Sam in Gamma.
    n = len(oauth.api.of("response"))
    assert (await gamma.command(shared, "schedule set --time 09:00", channel="CG1")).status_code == 200
    told = (await oauth.api.wait_for("response", n + 1))[-1]
    assert "only admins" not in told.dump()
    assert [s.channel.workspace_id for s in await oauth.services.schedules.schedules()] == [
        f"{GRID}/{GRID_TEAM}"
    ]


async def _channels(h: Harness) -> list[ChannelRef]:
    async with h.services.app.engine.connect() as conn:
        rows = await conn.execute(sa.text("SELECT platform, workspace_id, channel_id FROM channels"))
        return [ChannelRef(p, w, c) for p, w, c in rows]


# ---------------------------------------------------------------------- uninstall, revoked tokens
async def test_uninstall_removes_the_token_and_stops_that_workspace_only(oauth: Harness) -> None:
    assert (await oauth.install(ALPHA)).status_code == 200
    assert (await oauth.install(BETA)).status_code == 200
    alpha, beta = oauth.sender(ALPHA), oauth.sender(BETA)
    for send, ch in ((alpha, "CA1"), (beta, "CB1")):
        assert (await send.command(OWNER, "schedule set --time 09:30", channel=ch)).status_code == 200
    await oauth.api.wait_for("response", 2)

    oauth.api.uninstall(ALPHA)
    r = await alpha.event({"type": "app_uninstalled"}, "Ev-uninstall-1")
    assert r.status_code == 200
    await _until(lambda: _paused(oauth, ALPHA))
    assert await oauth.bot(Workspace(None, ALPHA)) is None
    assert await oauth.bot(Workspace(None, BETA)) is not None
    paused = {s.channel.workspace_id: s.config.paused for s in await oauth.services.schedules.schedules()}
    assert paused == {ALPHA: True, BETA: False}

    # The scheduler's post for Alpha is refused with what to do, and nothing reaches Slack or any admin.
    n = len(oauth.api.calls)
    with pytest.raises(PostRefusedError, match="not installed in Slack workspace T0001"):
        await oauth.services.quiz.post_daily(ChannelRef("slack", ALPHA, "CA1"), START.date())
    assert len(oauth.api.calls) == n
    # Beta still works.
    post_b = await oauth.post_now(beta, "CB1")
    assert post_b["_team"] == BETA
    # A command from the uninstalled workspace is answered by Bolt (reinstall), not crashed on.
    n = len(oauth.api.of("response"))
    r = await alpha.command(OWNER, "post-now", channel="CA1")
    assert r.status_code == 200
    told = (await oauth.api.wait_for("response", n + 1))[-1]
    assert "not installed in this workspace any more" in told.dump()

    # Installed again: a new token; the schedule the uninstall paused runs again, and posts work again.
    assert (await oauth.install(ALPHA)).status_code == 200
    await _until(lambda: _not_paused(oauth, ALPHA))
    post_a = await oauth.post_now(alpha, "CA1")
    assert post_a["_team"] == ALPHA


async def test_reinstall_brings_the_daily_challenge_back_and_tells_the_installer(oauth: Harness) -> None:
    """What a team expects after removing and reinstalling the app: the schedules the removal paused run
    again (one an admin paused stays paused), and whoever installed is told which, in a DM.
    """
    oauth.api.channels["CA2"] = Channel("random", team=ALPHA)
    assert (await oauth.install(ALPHA)).status_code == 200
    assert (await oauth.install(BETA)).status_code == 200
    alpha = oauth.sender(ALPHA)
    for n, text, channel in (
        (1, "schedule set --time 09:00 --days daily", "CA1"),
        (2, "schedule set --time 10:00", "CA2"),
        (3, "schedule pause", "CA2"),  # the admin's own decision, before the uninstall
    ):
        assert (await alpha.command(OWNER, text, channel=channel)).status_code == 200
        await oauth.api.wait_for("response", n)
    assert (
        await oauth.sender(BETA).command(OWNER, "schedule set --time 08:00", channel="CB1")
    ).status_code == 200
    await oauth.api.wait_for("response", 4)

    async def paused() -> dict[str, bool]:
        return {s.channel.channel_id: s.config.paused for s in await oauth.services.schedules.schedules()}

    for cycle in (1, 2):  # the removal's marks are used up by a reinstall: a second round works the same
        oauth.api.uninstall(ALPHA)
        # Slack sends both on an uninstall: the second finds everything already paused.
        assert (
            await alpha.event({"type": "tokens_revoked", "tokens": {"bot": ["U"]}}, f"Ev-r{cycle}")
        ).status_code == 200
        assert (await alpha.event({"type": "app_uninstalled"}, f"Ev-u{cycle}")).status_code == 200
        await _until(lambda: _gone(oauth, ALPHA))
        await _until(lambda: _paused(oauth, ALPHA))
        assert await paused() == {"CA1": True, "CA2": True, "CB1": False}
        dms = len([c for c in oauth.api.of("chat.postMessage") if c.args["channel"] == "UINSTALLER"])

        assert (await oauth.install(ALPHA)).status_code == 200
        assert await paused() == {"CA1": False, "CA2": True, "CB1": False}, "only what the uninstall paused"
        told = [c for c in oauth.api.of("chat.postMessage") if c.args["channel"] == "UINSTALLER"]
        assert len(told) == dms + 1, "the installer is told once"
        note = told[-1]
        assert note.args["_team"] == ALPHA, "with the new install's token"
        assert "<#CA1>" in note.args["text"] and "Every day at 09:00 UTC" in note.args["text"]
        assert "CA2" not in note.args["text"]
        assert "/rankzero schedule pause" in note.args["text"]

    # The daily post comes back: at its slot the scheduler posts in CA1 with Alpha's new token.
    [ca1] = [s for s in await oauth.services.schedules.schedules() if s.channel.channel_id == "CA1"]
    outcome = await oauth.services.schedules.post_scheduled(ca1.channel_pk)
    assert outcome.status == "posted"
    assert oauth.api.of("chat.postMessage")[-1].args["_team"] == ALPHA


async def test_a_first_install_tells_nobody_anything(oauth: Harness) -> None:
    assert (await oauth.install(ALPHA)).status_code == 200
    assert not oauth.api.of("chat.postMessage"), "nothing was paused: nothing to say"


async def test_revoked_bot_token(oauth: Harness) -> None:
    assert (await oauth.install(BETA)).status_code == 200
    beta = oauth.sender(BETA)
    token = oauth.api.token_of(BETA)
    oauth.api.tokens[token].revoked = True
    # Before the event arrives: Slack answers token_revoked; the post is refused and explained.
    oauth.expected_refusals.append(("chat.postMessage", "token_revoked"))
    with pytest.raises(PostRefusedError, match="uninstalled or its token revoked"):
        await oauth.services.quiz.post_daily(ChannelRef("slack", BETA, "CB1"), START.date())
    r = await beta.event({"type": "tokens_revoked", "tokens": {"bot": ["UBOTT0002"]}}, "Ev-revoked-1")
    assert r.status_code == 200
    await _until(lambda: _gone(oauth, BETA))
    with pytest.raises(PostRefusedError, match="not installed"):
        await oauth.services.quiz.post_daily(ChannelRef("slack", BETA, "CB1"), START.date())


async def _paused(h: Harness, ws: str) -> bool:
    return any(
        s.config.paused for s in await h.services.schedules.schedules() if s.channel.workspace_id == ws
    )


async def _not_paused(h: Harness, ws: str) -> bool:
    return not await _paused(h, ws)


async def _gone(h: Harness, team: str) -> bool:
    return await h.bot(Workspace(None, team)) is None


async def _until(check: Any, polls: int = 500) -> None:
    """Poll ``check`` (a hang guard of ``polls`` tries 0.02 s apart, no speed bound)."""
    for _ in range(polls):
        if await check():
            return
        await asyncio.sleep(0.02)
    assert await check(), "the condition never held"


# ---------------------------------------------------------------------- the stores on both backends
async def test_stores_on_each_backend(db_url: str) -> None:
    """slack_sdk's async stores over our engine and migrated tables, on SQLite and PostgreSQL: installs of
    two workspaces and a Grid org found apart, one deleted alone, a state good once.
    """
    from slack_sdk.oauth.installation_store.models.installation import Installation

    from bot.bootstrap import slack_oauth_stores
    from bot.storage.db import make_engine

    settings = Settings(database_url=db_url, slack_client_id="1111.2222", secret_key=SecretStr(new_key()))
    engine = make_engine(db_url)
    try:
        installs, states = slack_oauth_stores(settings, engine)

        def install(team: str | None, enterprise: str | None = None, org: bool = False) -> Installation:
            return Installation(
                app_id="A1",
                enterprise_id=enterprise,
                team_id=team,
                user_id="UINSTALLER",
                bot_token=f"xoxb-{team or enterprise}",
                bot_id="B1",
                bot_user_id="UBOT",
                bot_scopes=["chat:write", "commands"],
                is_enterprise_install=org,
            )

        alpha = install(ALPHA)
        # A rotating install's tokens (xoxe.xoxb-1-..., refresh xoxe-1-...) are long: 200 characters each,
        # slack_sdk's column width, which the encrypted value exceeds (PostgreSQL enforces the width).
        alpha.bot_token = "xoxe.xoxb-1-" + "b" * 188
        alpha.bot_refresh_token = "xoxe-1-" + "r" * 193
        alpha.user_token, alpha.user_refresh_token = "xoxp-user-token", "xoxe-1-user-refresh"
        await installs.async_save(alpha)
        await installs.async_save(install(BETA))
        await installs.async_save(install(None, GRID, org=True))
        # At rest: no token readable in either table, every one of them sealed.
        async with engine.connect() as conn:
            stored = [
                value
                for table, columns in TOKEN_COLUMNS.items()
                for row in await conn.execute(sa.text(f"SELECT {', '.join(columns)} FROM {table}"))
                for value in row
                if value is not None
            ]
        assert len(stored) == 4 + 2 + 2 + 2  # alpha's install row (4) and bot row (2); beta, grid: 1 + 1
        plaintexts = [
            alpha.bot_token,
            alpha.bot_refresh_token,
            "xoxp-user-token",
            f"xoxb-{BETA}",
            f"xoxb-{GRID}",
        ]
        assert all(v.startswith(PREFIX) for v in stored), stored
        assert not [v for v in stored for token in plaintexts if token and token in v], stored
        found = await installs.async_find_installation(
            enterprise_id=None, team_id=ALPHA, user_id="UINSTALLER"
        )
        assert found is not None
        assert (found.bot_token, found.bot_refresh_token) == (alpha.bot_token, alpha.bot_refresh_token)
        assert (found.user_token, found.user_refresh_token) == ("xoxp-user-token", "xoxe-1-user-refresh")
        for ws, token in (
            (Workspace(None, ALPHA), alpha.bot_token),
            (Workspace(None, BETA), f"xoxb-{BETA}"),
            (Workspace(GRID, None, is_enterprise_install=True), f"xoxb-{GRID}"),
        ):
            bot = await installs.async_find_bot(
                enterprise_id=ws.enterprise_id,
                team_id=ws.team_id,
                is_enterprise_install=ws.is_enterprise_install,
            )
            assert bot is not None and bot.bot_token == token, ws
        await installs.async_delete_all(enterprise_id=None, team_id=ALPHA)
        assert await installs.async_find_bot(enterprise_id=None, team_id=ALPHA) is None
        assert await installs.async_find_bot(enterprise_id=None, team_id=BETA) is not None

        state = await states.async_issue()
        assert await states.async_consume(state)
        assert not await states.async_consume(state)  # good once
        assert not await states.async_consume("forged")
    finally:
        await engine.dispose()


def test_oauth_settings_alone_enable_the_slack_adapter() -> None:
    from bot.adapters.registry import ADAPTERS

    (spec,) = [s for s in ADAPTERS if s.name == "slack"]
    oauth = Settings(
        slack_client_id="1.2",
        slack_client_secret=SecretStr("c"),
        slack_signing_secret=SecretStr("s"),
        secret_key=SecretStr(new_key()),
    )
    assert oauth.slack_oauth and spec.enabled(oauth)
    assert not Settings(slack_client_id="1.2", slack_client_secret=SecretStr("c")).slack_oauth
    adapter = build_adapter(oauth)
    assert adapter.oauth is not None and adapter.bolt is None  # built at start, over the stores


def test_half_an_oauth_configuration_is_refused_by_serve_not_ignored() -> None:
    """Through the registry serve uses: a client id without its secret (or the reverse) reaches
    build_adapter's refusal instead of Slack being left out as if it were not configured."""
    from bot.adapters.registry import build_adapters

    half = [
        Settings(slack_client_id="1.2", record_file=Path("posts.jsonl")),
        Settings(slack_client_secret=SecretStr("c"), slack_signing_secret=SecretStr("s")),
    ]
    for settings in half:
        with pytest.raises(ConfigurationError, match="needs both RANKZERO_SLACK_CLIENT_ID"):
            build_adapters(settings)
    with pytest.raises(ConfigurationError, match="set RANKZERO_SLACK_SIGNING_SECRET"):
        build_adapters(Settings(slack_client_id="1.2", slack_client_secret=SecretStr("c")))


async def test_org_wide_grid_install_is_keyed_by_the_org(oauth: Harness) -> None:
    oauth.api.installing_org_wide = True
    assert (await oauth.install(GRID_TEAM)).status_code == 200
    bot = await oauth.bot(Workspace(GRID, None, is_enterprise_install=True))
    assert bot is not None and bot.is_enterprise_install and bot.team_id is None
    send = SlackSender(
        f"{oauth.base}{EVENTS_PATH}", oauth.api, oauth.http, team=GRID_TEAM, enterprise=GRID, org_wide=True
    )
    post = await oauth.post_now(send, "CG1")
    assert post["_team"] == GRID  # the org's token
    assert [c.workspace_id for c in await _channels(oauth) if c.channel_id == "CG1"] == [GRID]
    # Uninstalled from the org: its token goes, its schedules stop.
    assert (await send.command(OWNER, "schedule set --time 07:00", channel="CG1")).status_code == 200
    await oauth.api.wait_for("response", 2)
    oauth.api.uninstall(GRID)
    assert (await send.event({"type": "app_uninstalled"}, "Ev-org-1")).status_code == 200
    await _until(lambda: _paused(oauth, GRID))
    assert await oauth.bot(Workspace(GRID, None, is_enterprise_install=True)) is None


# ---------------------------------------------------------------------- the fake's own rules
async def test_fake_refuses_like_slack() -> None:
    """The fake's token and OAuth rules (so the tests above can fail): unknown and revoked tokens,
    another workspace's channel, a wrong client id or redirect URL at authorization.
    """
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    api = FakeSlackApi(
        teams={ALPHA: Team("Alpha"), BETA: Team("Beta")},
        channels={"CA1": Channel("a", team=ALPHA), "CB1": Channel("b", team=BETA)},
        redirect_uris=["https://rz.example/slack/oauth_redirect"],
    )
    await api.start()
    try:
        with pytest.raises(SlackApiError, match="invalid_auth"):
            await AsyncWebClient(token="xoxb-made-up", base_url=api.base_url).auth_test()
        api.installing = BETA
        async with httpx.AsyncClient() as browser:
            base = {"scope": "chat:write", "state": "s1"}
            bad = await browser.get(api.authorize_url, params={**base, "client_id": "0.0"})
            assert bad.status_code == 400 and "invalid_client_id" in bad.text
            bad = await browser.get(
                api.authorize_url, params={**base, "client_id": api.client_id, "redirect_uri": "https://evil"}
            )
            assert bad.status_code == 400 and "bad_redirect_uri" in bad.text
            ok = await browser.get(api.authorize_url, params={**base, "client_id": api.client_id})
            assert ok.status_code == 302
        code = httpx.URL(ok.headers["location"]).params["code"]
        client = AsyncWebClient(base_url=api.base_url)
        with pytest.raises(SlackApiError, match="bad_redirect_uri"):  # not the authorization's redirect URL
            await client.oauth_v2_access(
                client_id=api.client_id, client_secret=api.client_secret, code=code, redirect_uri="https://x"
            )
        api.codes[code] = Grant(BETA, None, {"chat:write"}, float("inf"))  # a fresh code for this test
        token = (
            await client.oauth_v2_access(client_id=api.client_id, client_secret=api.client_secret, code=code)
        )["access_token"]
        beta = AsyncWebClient(token=token, base_url=api.base_url)
        assert (await beta.auth_test())["team_id"] == BETA
        with pytest.raises(SlackApiError, match="channel_not_found"):
            await beta.chat_postMessage(channel="CA1", text="hi")  # Alpha's channel
        await beta.chat_postMessage(channel="CB1", text="hi")
        api.uninstall(BETA)
        with pytest.raises(SlackApiError, match="token_revoked"):
            await beta.chat_postMessage(channel="CB1", text="hi")
    finally:
        await api.stop()


# ---------------------------------------------------------------------- token rotation (issue 24)
async def test_rotating_tokens_keep_posts_and_commands_working_after_12_hours(
    oauth: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With token rotation the fake's bot tokens expire after 12 hours (``token_expired``); the scheduler's
    posts and the requests' answers renew them with the refresh token first, stored encrypted."""
    from slack_sdk.oauth.token_rotation import async_rotator

    oauth.api.rotation = True
    assert (await oauth.install(ALPHA)).status_code == 200
    first = oauth.api.token_of(ALPHA)
    await oauth.services.quiz.post_daily(ChannelRef("slack", ALPHA, "CA1"), START.date())
    assert not [c for c in oauth.api.of("oauth.v2.access") if c.args["_grant"] == "refresh_token"]

    # 12 hours and a minute later, for the fake and for slack_sdk's rotator (its expiry check).
    later = 12 * 3600 + 60
    oauth.api.clock_offset_s = later
    monkeypatch.setattr(async_rotator, "time", lambda: time.time() + later)
    next_day = START.date() + dt.timedelta(days=1)
    await oauth.services.quiz.post_daily(ChannelRef("slack", ALPHA, "CA1"), next_day)  # the scheduler's path
    renewals = [c for c in oauth.api.of("oauth.v2.access") if c.args["_grant"] == "refresh_token"]
    assert len(renewals) == 1
    second = (await oauth.bot(Workspace(None, ALPHA))).bot_token
    assert second != first and second in oauth.api.tokens
    assert oauth.api.of("chat.postMessage")[-1].args["_team"] == ALPHA
    # A command answered through Bolt's authorization uses the renewed token (no second renewal: the
    # install row was saved with the new refresh token too).
    n = len(oauth.api.of("response"))
    assert (await oauth.sender(ALPHA).command(OWNER, "help", channel="CA1")).status_code == 200
    await oauth.api.wait_for("response", n + 1)
    assert len([c for c in oauth.api.of("oauth.v2.access") if c.args["_grant"] == "refresh_token"]) == 1
    assert ("chat.postMessage", "token_expired") not in oauth.api.refused
    # The renewed tokens are encrypted at rest like the first ones.
    async with oauth.services.app.engine.connect() as conn:
        rows = (await conn.execute(sa.text("SELECT bot_token, bot_refresh_token FROM slack_bots"))).all()
    assert rows and all(v.startswith(PREFIX) for row in rows for v in row)
