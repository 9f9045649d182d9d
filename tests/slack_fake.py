"""A local fake of Slack: a Web API on loopback that records calls, and signed requests into the app.

slack_sdk's AsyncWebClient takes a ``base_url``, so the adapter's outgoing calls (chat.postMessage,
views.open, users.info...) reach this server over real HTTP; response_url posts land here too.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0001"


@dataclass
class Call:
    """One recorded call: the Web API method (or ``response``) and its arguments."""

    method: str
    args: dict[str, Any]

    def dump(self) -> str:
        """The arguments as JSON text (to search for rendered strings)."""
        return json.dumps(self.args, ensure_ascii=False)


@dataclass
class FakeSlackApi:
    """Records every Web API call; ``users`` holds what users.info answers per user id."""

    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None
    port: int = 0

    @property
    def base_url(self) -> str:
        """What to give AsyncWebClient(base_url=...)."""
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, name: str) -> str:
        """A response_url that records posts under method ``response``."""
        return f"http://127.0.0.1:{self.port}/response/{name}"

    async def start(self) -> None:
        """Listen on loopback (a free port)."""
        app = web.Application()
        app.add_routes(
            [web.route("*", "/api/{method}", self._api), web.post("/response/{name}", self._response)]
        )
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        raw = await request.read()
        if raw:
            if request.content_type == "application/json":
                args.update(json.loads(raw))
            else:
                args.update({k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()})
        return args

    async def _response(self, request: web.Request) -> web.Response:
        args = await self._args(request)
        args["_name"] = request.match_info["name"]
        self.calls.append(Call("response", args))
        return web.Response(text="ok")

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        if method != "auth.test":
            self.calls.append(Call(method, args))
        body: dict[str, Any] = {"ok": True}
        if method == "auth.test":
            body.update(user_id="UBOT", bot_id="BBOT", team_id=TEAM, user="rankzero", team="Test")
        elif method == "chat.postMessage":
            body.update(channel=args.get("channel"), ts=f"1700000000.{next(self._ts):06d}")
        elif method in ("views.open", "views.update", "views.publish"):
            view_id = args.get("view_id") or f"V{next(self._ts):04d}"
            args["_view_id"] = view_id  # recorded, so a test knows which modal it is
            body["view"] = {"id": view_id, **(args.get("view") if isinstance(args.get("view"), dict) else {})}
        elif method == "users.info":
            uid = str(args.get("user"))
            body["user"] = {"id": uid, "name": uid.lower(), **self.users.get(uid, {})}
        return web.json_response(body)

    def of(self, method: str) -> list[Call]:
        """Recorded calls of one method."""
        return [c for c in self.calls if c.method == method]

    async def wait_for(self, method: str, count: int = 1, timeout: float = 10.0) -> list[Call]:
        """Wait until ``count`` calls of ``method`` were recorded (listeners run after the ack)."""
        deadline = time.monotonic() + timeout
        while len(self.of(method)) < count:
            if time.monotonic() > deadline:
                seen = [c.method for c in self.calls]
                raise AssertionError(f"expected {count} {method} call(s); recorded: {seen}")
            await asyncio.sleep(0.01)
        return self.of(method)


def sign(body: str, timestamp: int | None = None, secret: str = SECRET) -> dict[str, str]:
    """Slack's request signing headers: v0=HMAC-SHA256(secret, 'v0:{ts}:{body}')."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


@dataclass
class SlackSender:
    """Sends signed requests to the app's /slack/events like Slack does."""

    url: str
    api: FakeSlackApi
    http: httpx.AsyncClient
    _n: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def post(
        self,
        body: str,
        content_type: str,
        *,
        headers: dict[str, str] | None = None,
        signer: Callable[[str], dict[str, str]] = sign,
    ) -> httpx.Response:
        """POST ``body`` signed (or as ``signer`` says)."""
        hdrs = {"Content-Type": content_type, **signer(body), **(headers or {})}
        return await self.http.post(self.url, content=body.encode(), headers=hdrs)

    async def command(self, user: str, text: str, channel: str = "C1", **kw: Any) -> httpx.Response:
        """A /rankzero slash command."""
        n = next(self._n)
        form = {
            "token": "unused",
            "team_id": TEAM,
            "team_domain": "test",
            "channel_id": channel,
            "channel_name": "general",
            "user_id": user,
            "user_name": user.lower(),
            "command": "/rankzero",
            "text": text,
            "response_url": self.api.response_url(f"cmd{n}"),
            "trigger_id": f"trigger-cmd-{n}",
        }
        return await self.post(urllib.parse.urlencode(form), "application/x-www-form-urlencoded", **kw)

    async def interactive(self, payload: dict[str, Any], **kw: Any) -> httpx.Response:
        """An interactivity payload (block_actions, view_submission)."""
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        return await self.post(body, "application/x-www-form-urlencoded", **kw)

    async def click(
        self,
        user: str,
        action_id: str,
        *,
        view_id: str | None = None,
        action_ts: str | None = None,
        **kw: Any,
    ) -> httpx.Response:
        """A button click: on the channel post (no view) or inside a modal (``view_id``)."""
        n = next(self._n)
        payload: dict[str, Any] = {
            "type": "block_actions",
            "team": {"id": TEAM, "domain": "test"},
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM},
            "api_app_id": "A1",
            "token": "unused",
            "trigger_id": f"trigger-{n}",
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "b",
                    "text": {"type": "plain_text", "text": "x"},
                    "action_ts": action_ts or f"1700000100.{n:06d}",
                }
            ],
        }
        if view_id is None:
            payload["container"] = {"type": "message", "channel_id": "C1", "message_ts": "1700000000.000001"}
            payload["channel"] = {"id": "C1", "name": "general"}
            payload["response_url"] = self.api.response_url(f"act{n}")
        else:
            payload["container"] = {"type": "view", "view_id": view_id}
            payload["view"] = {"id": view_id, "type": "modal", "callback_id": "rz_play", "hash": "h"}
        return await self.interactive(payload, **kw)

    async def submit(
        self, user: str, callback_id: str, values: dict[str, Any], *, metadata: str = "", **kw: Any
    ) -> httpx.Response:
        """A view_submission of a modal's inputs (``values``: block id -> value, ('select', value) or
        ('checkboxes', [values])); ``metadata`` is the view's private_metadata.
        """
        state: dict[str, Any] = {}
        for block_id, value in values.items():
            if isinstance(value, tuple) and value[0] == "checkboxes":
                chosen = [{"value": v} for v in value[1]]
                state[block_id] = {"value": {"type": "checkboxes", "selected_options": chosen}}
            elif isinstance(value, tuple):
                state[block_id] = {"value": {"type": "static_select", "selected_option": {"value": value[1]}}}
            else:
                state[block_id] = {"value": {"type": "plain_text_input", "value": value}}
        payload = {
            "type": "view_submission",
            "team": {"id": TEAM, "domain": "test"},
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM},
            "api_app_id": "A1",
            "token": "unused",
            "trigger_id": "trigger-submit",
            "view": {
                "id": "VQ",
                "type": "modal",
                "callback_id": callback_id,
                "private_metadata": metadata,
                "state": {"values": state},
            },
        }
        return await self.interactive(payload, **kw)

    async def event(self, event: dict[str, Any], event_id: str, **kw: Any) -> httpx.Response:
        """An Events API callback."""
        body = json.dumps(
            {
                "token": "unused",
                "team_id": TEAM,
                "api_app_id": "A1",
                "type": "event_callback",
                "event_id": event_id,
                "event_time": int(time.time()),
                "event": event,
                "authorizations": [{"team_id": TEAM, "user_id": "UBOT", "is_bot": True}],
            }
        )
        return await self.post(body, "application/json", **kw)
