"""A local fake of the Discord REST API (aiohttp on loopback) that records every request.

discord.py's real HTTP client talks to it once ``discord.http.Route.BASE`` points here; interactions are fed
to the real ConnectionState as the gateway would (``parse_interaction_create``) with payloads shaped like
Discord's, and the buttons clicked are the components of messages the bot really posted.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import discord
from aiohttp import web

APP_ID = 900000000000000001
BOT_ID = 900000000000000002
GUILD_ID = 800000000000000001
CHANNEL_ID = 700000000000000001
MANAGE_GUILD = 1 << 5


@dataclass
class Recorded:
    """One request the bot made."""

    method: str
    path: str
    query: dict[str, str]
    body: Any


def user_payload(uid: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    """A Discord user object."""
    return {
        "id": str(uid),
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def _json(data: Any, status: int = 200) -> web.Response:
    # Exactly "application/json", as Discord sends it (discord.py compares the header verbatim).
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


class FakeDiscord:
    """Answers the REST calls the adapter makes and keeps the messages it creates."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.messages: dict[int, dict[str, Any]] = {}
        #: interaction token -> id of the message its @original refers to
        self.originals: dict[str, int] = {}
        self.files: dict[str, bytes] = {}
        self.threads: dict[int, dict[str, Any]] = {}
        self._ids = itertools.count(600000000000000001)
        self._runner: web.AppRunner | None = None
        self.base = ""

    def next_id(self) -> int:
        """A fresh snowflake."""
        return next(self._ids)

    async def start(self) -> str:
        """Listen on a free loopback port; return the API base URL."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.root = f"http://127.0.0.1:{port}"
        self.base = f"{self.root}/api/v10"
        return self.base

    async def stop(self) -> None:
        """Shut the server down."""
        if self._runner is not None:
            await self._runner.cleanup()

    def message(self, mid: int, channel_id: int, body: dict[str, Any], *, flags: int = 0) -> dict[str, Any]:
        """A message object as Discord returns it, from a create/edit body."""
        return {
            "id": str(mid),
            "channel_id": str(channel_id),
            "guild_id": str(GUILD_ID),
            "type": 0,
            "content": body.get("content") or "",
            "author": user_payload(BOT_ID, "RankZero", bot=True),
            "embeds": body.get("embeds") or [],
            "components": body.get("components") or [],
            "attachments": [],
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": False,
            "timestamp": dt.datetime.now(dt.UTC).isoformat(),
            "edited_timestamp": None,
            "flags": flags | int(body.get("flags") or 0),
        }

    def _store(self, mid: int, channel_id: int, body: dict[str, Any], flags: int = 0) -> dict[str, Any]:
        old = self.messages.get(mid)
        if old is not None:
            merged = dict(old)
            for key in ("content", "embeds", "components"):
                if key in body:
                    merged[key] = body[key] if body[key] is not None else ([] if key != "content" else "")
            self.messages[mid] = merged
            return merged
        msg = self.message(mid, channel_id, body, flags=flags)
        self.messages[mid] = msg
        return msg

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
        path = request.path.removeprefix("/api/v10")
        self.requests.append(Recorded(request.method, path, dict(request.query), body))
        m = request.method
        if path in self.files:
            return web.Response(body=self.files[path])
        if m == "GET" and path == "/users/@me":
            return _json(user_payload(BOT_ID, "RankZero", bot=True))
        if m == "GET" and path == "/oauth2/applications/@me":
            return _json(
                {
                    "id": str(APP_ID),
                    "name": "RankZero",
                    "icon": None,
                    "description": "",
                    "bot_public": True,
                    "bot_require_code_grant": False,
                    "verify_key": "00",
                    "owner": user_payload(1, "owner"),
                    "flags": 0,
                }
            )
        if (hit := re.fullmatch(r"/channels/(\d+)/messages", path)) and m == "POST":
            return _json(self._store(self.next_id(), int(hit[1]), body or {}))
        if (hit := re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path)) and m == "PATCH":
            return _json(self._store(int(hit[2]), int(hit[1]), body or {}))
        if (hit := re.fullmatch(r"/channels/(\d+)/threads", path)) and m == "POST":
            return _json(self._thread(int(hit[1]), body or {}))
        if (hit := re.fullmatch(r"/interactions/(\d+)/([^/]+)/callback", path)) and m == "POST":
            return _json(self._callback(int(hit[1]), hit[2], body or {}))
        if (hit := re.fullmatch(r"/webhooks/(\d+)/([^/]+)/messages/@original", path)) and m == "PATCH":
            mid = self.originals.get(hit[2])
            if mid is None:
                return _json({"code": 10008, "message": "Unknown Message"}, status=404)
            return _json(self._store(mid, CHANNEL_ID, body or {}))
        if (hit := re.fullmatch(r"/webhooks/(\d+)/([^/]+)", path)) and m == "POST":
            return _json(self._store(self.next_id(), CHANNEL_ID, body or {}))
        if re.fullmatch(r"/applications/\d+(/guilds/\d+)?/commands", path) and m == "PUT":
            return _json([])
        return _json({"code": 0, "message": f"fake has no route {m} {path}"}, status=404)

    def _thread(self, parent_id: int, body: dict[str, Any]) -> dict[str, Any]:
        tid = self.next_id()
        thread = {
            "id": str(tid),
            "type": int(body.get("type") or 11),
            "guild_id": str(GUILD_ID),
            "parent_id": str(parent_id),
            "name": body.get("name", ""),
            "owner_id": str(BOT_ID),
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 1,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": int(body.get("auto_archive_duration") or 1440),
                "archive_timestamp": dt.datetime.now(dt.UTC).isoformat(),
                "locked": False,
            },
        }
        self.threads[tid] = thread
        return thread

    def _callback(self, interaction_id: int, token: str, body: dict[str, Any]) -> dict[str, Any]:
        kind = body.get("type")
        data = body.get("data") or {}
        message_id: int | None = None
        if kind in (4, 5):  # a new (maybe ephemeral, maybe "thinking") response message
            message_id = self.next_id()
            self._store(message_id, CHANNEL_ID, data, flags=int(data.get("flags") or 0))
            self.originals[token] = message_id
        elif kind == 7 and token in self.originals:  # update the component's message
            self._store(self.originals[token], CHANNEL_ID, data)
        return {
            "interaction": {
                "id": str(interaction_id),
                "type": 3,
                "response_message_id": str(message_id) if message_id else None,
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
            }
        }

    # ------------------------------------------------------------------ what tests look at
    def calls(self, method: str, pattern: str) -> list[Recorded]:
        """Recorded requests whose path matches ``pattern``."""
        return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until ``predicate()`` is truthy (the bot works in tasks); fail after ``timeout``."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if loop.time() > end:
                raise AssertionError("the bot did not make the expected request in time")
            await asyncio.sleep(0.01)


class Interactions:
    """Builds interaction payloads and feeds them to a client as the gateway would."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self._n = itertools.count(1)

    def _base(self, kind: int, user_id: int, name: str, permissions: int, roles: list[int]) -> dict[str, Any]:
        n = next(self._n)
        return {
            "id": str(self.fake.next_id()),
            "application_id": str(APP_ID),
            "type": kind,
            "token": f"tok-{n}",
            "version": 1,
            "guild_id": str(GUILD_ID),
            "channel_id": str(CHANNEL_ID),
            "channel": {
                "id": str(CHANNEL_ID),
                "type": 0,
                "guild_id": str(GUILD_ID),
                "name": "general",
                "position": 0,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
                "topic": None,
                "last_message_id": None,
                "rate_limit_per_user": 0,
                "flags": 0,
                "permissions": str((1 << 41) - 1),
            },
            "member": {
                "user": user_payload(user_id, name),
                "roles": [str(r) for r in roles],
                "permissions": str(permissions),
                "joined_at": "2026-01-01T00:00:00+00:00",
                "deaf": False,
                "mute": False,
                "flags": 0,
            },
            "app_permissions": str((1 << 41) - 1),
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(GUILD_ID)},
            "context": 0,
            "attachment_size_limit": 10 * 1024 * 1024,
        }

    def click(
        self,
        client: discord.Client,
        message_id: int,
        custom_id: str,
        *,
        user_id: int = 111,
        name: str = "alice",
        permissions: int = 0,
    ) -> str:
        """Click a button of a message the fake holds; return the interaction token."""
        payload = self._base(3, user_id, name, permissions, [])
        payload["message"] = self.fake.messages[message_id]
        payload["data"] = {"custom_id": custom_id, "component_type": 2}
        self.fake.originals[payload["token"]] = message_id
        client._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        return str(payload["token"])

    def command(
        self,
        client: discord.Client,
        name: str,
        options: list[dict[str, Any]] | None = None,
        *,
        user_id: int = 111,
        user: str = "alice",
        permissions: int = 0,
        roles: list[int] | None = None,
        resolved: dict[str, Any] | None = None,
    ) -> str:
        """Invoke a slash command (``name`` may be 'group sub' or 'group sub sub')."""
        payload = self._base(2, user_id, user, permissions, roles or [])
        parts = name.split()
        opts: list[dict[str, Any]] = options or []
        for sub in reversed(parts[1:]):
            opts = [{"type": 1 if sub == parts[-1] else 2, "name": sub, "options": opts}]
        payload["data"] = {"id": str(self.fake.next_id()), "name": parts[0], "type": 1, "options": opts}
        if resolved:
            payload["data"]["resolved"] = resolved
        client._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        return str(payload["token"])

    def submit_modal(
        self,
        client: discord.Client,
        custom_id: str,
        values: dict[str, str],
        *,
        user_id: int = 111,
        permissions: int = 0,
        message_id: int | None = None,
    ) -> str:
        """Submit a modal the bot opened, with text input values by custom_id; ``message_id``: the message
        whose button opened it (its @original, as for a click).
        """
        payload = self._base(5, user_id, "admin", permissions, [])
        if message_id is not None:
            payload["message"] = self.fake.messages[message_id]
            self.fake.originals[payload["token"]] = message_id
        payload["data"] = {
            "custom_id": custom_id,
            "components": [
                {"type": 1, "components": [{"type": 4, "custom_id": k, "value": v}]}
                for k, v in values.items()
            ],
        }
        client._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        return str(payload["token"])
