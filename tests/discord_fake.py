"""A local fake of the Discord REST API (aiohttp on loopback) that records every request and is strict.

discord.py's real HTTP client talks to it once ``discord.http.Route.BASE`` points here; interactions are fed
to the real ConnectionState as the gateway would (``parse_interaction_create``) with payloads shaped like
Discord's, and the buttons clicked are the components of messages the bot really posted.

Strict as the real API (each rule with its source; the JSON bodies are Discord's own shapes):

- 400 ``50035 Invalid Form Body`` with nested ``errors`` for a message over its limits (content 2000;
  10 embeds; embed title 256, description 4096, 25 fields, field name 256 / value 1024, footer 2048,
  author 256, 6000 characters over all embeds: ``MAX_EMBED_SIZE_EXCEEDED``) -- docs: Message resource,
  "Embed Limits"; components (5 action rows, 5 buttons a row or one select, custom_id 1..100, label 80,
  25 select options, unique custom ids) -- docs: "Component Reference"; modals (title 45, 1..5 inputs,
  label 45, value/max_length 4000, a value within the input's max_length, placeholder 100) -- docs:
  "Interaction Response Object / Modal". A submission (:meth:`Interactions.submit_modal`) is of a modal the
  bot opened, carries every input (pre-filled values where the user typed nothing), and only what Discord's
  client lets through: known inputs, required ones filled, none over its max_length.
- 400 ``50006 Cannot send an empty message``.
- Files (docs: Message resource, "Uploading Files" and "Attachment Object"): a message with files is
  multipart/form-data, its JSON in ``payload_json`` and file ``n`` in the part ``files[n]``, described by
  ``attachments[n]`` (``id`` n, ``filename``, ``description``: the alt text). At most 10 files (50035 at
  ``attachments``), a description of at most 1024 characters and a file name required (50035 at
  ``attachments.n.description`` / ``.filename``), and a request over the upload limit (10 MiB for a bot
  in a server without boosts) is 413 ``40005 Request entity too large``
  (discord/discord-api-docs#6058). Accepted files are kept in :attr:`FakeDiscord.uploads`.
- A message's ``nonce`` (an integer, or a string of at most 25 characters: else 50035) with
  ``enforce_nonce: true`` is checked for uniqueness "in the past few minutes" (docs: Create Message): a
  second create with the nonce of a message the bot created within :data:`NONCE_WINDOW_S` returns that
  message and creates none. Discord gives no exact window; the fake's is short (a conservative reading).
- 400 ``40060 Interaction has already been acknowledged`` for a second callback of one interaction;
  404 ``10062 Unknown interaction`` for a callback later than 3 s (and so after 15 minutes);
  401 ``50027 Invalid Webhook Token`` for a follow-up or @original edit after the token's 15 minutes
  (what the API answers then: discord/discord-api-docs#6851).
- 404 ``10003 Unknown Channel`` for every call on a deleted channel (:attr:`FakeDiscord.deleted_channels`).
- 403 ``50001 Missing Access`` (no View Channel) / ``50013 Missing Permissions`` (no Send Messages,
  embeds without Embed Links, or a new message with files without Attach Files) / ``160002`` (a reply
  without Read Message History, or a thread without Create Public Threads: 50013) from a per-channel
  permission table (:meth:`FakeDiscord.set_permissions`);
  interaction responses and follow-ups are webhooks and need no channel permission.
- DMs: ``POST /users/@me/channels`` opens (or returns) the user's DM channel; a message to a user whose
  privacy settings refuse the bot (:attr:`FakeDiscord.dms_closed`) gets 403 ``50007 Cannot send messages
  to this user`` -- docs: "JSON Error Codes".
- 429 with ``retry_after`` / ``global`` in the body and ``Retry-After``, ``X-RateLimit-*`` headers: a
  per-channel bucket for creating messages (5 per 5 s, the limit Discord's headers report) and forced
  limits for tests (:meth:`FakeDiscord.rate_limit_next`).
- Slash-command options as Discord's client sends them once the commands are synced: only declared
  options, the required ones, and a value among an option's ``choices`` (:meth:`Interactions.command`),
  of the option's declared type (a string option sends text, an integer option a whole number within
  Discord's range: the client lets nobody type ``today:1`` into an integer option) and within its
  ``min_length``/``max_length``. Autocomplete (:meth:`Interactions.autocomplete`): the callback (type 8)
  answers at most 25 choices, each name 1..100 characters and a value of the option's type (a string at
  most 100) -- docs: "Autocomplete", "Application Command Option Choice Structure"; once commands are
  synced, only an option declared ``autocomplete: true`` is asked about.

A gateway too (:class:`FakeGateway`, ``GET /gateway/bot`` and a websocket at ``/gateway``) for tests that
run a real client or a whole ``rankzero serve`` process: HELLO, heartbeats and their ACKs, IDENTIFY with
``shard: [id, count]`` (docs: Gateway, "Sharding"), READY naming the shard's guilds, then a GUILD_CREATE
for each of them only; dispatches (INTERACTION_CREATE, ...) go to the connection of the guild's shard,
``(guild_id >> 22) % count``, as Discord routes them. Refused as Discord refuses them: close code 4010
"Invalid shard" for a shard id outside ``0..count-1``, 4011 "Sharding required" for a count below what the
fake requires (:attr:`FakeGateway.min_shards`), 4004 for a wrong token. Frames are sent as text JSON
(discord.py accepts them; Discord compresses when asked, which only changes the encoding).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
from aiohttp import web

APP_ID = 900000000000000001
BOT_ID = 900000000000000002
GUILD_ID = 800000000000000001
CHANNEL_ID = 700000000000000001
MANAGE_GUILD = 1 << 5
#: The bot's own managed role in the guild (it holds the bot's permissions).
BOT_ROLE = 555000000000000099


#: Discord's limits on files (see the module docstring).
MAX_FILES = 10
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_ATTACHMENT_DESCRIPTION = 1024


@dataclass
class Uploaded:
    """A file Discord accepted with a message: its bytes, name, alt text, and the message's id."""

    data: bytes
    filename: str
    description: str | None
    message_id: int
    #: Whether the message is ephemeral (an interaction's private reply).
    ephemeral: bool = False


@dataclass
class Multipart:
    """A multipart/form-data body as read: the ``payload_json`` and each ``files[n]`` part."""

    payload: dict[str, Any]
    files: dict[int, tuple[str | None, bytes]]
    size: int


async def read_multipart(request: web.Request) -> Multipart:
    """Read a message body sent as multipart/form-data (what discord.py sends with files)."""
    reader = await request.multipart()
    payload: dict[str, Any] = {}
    files: dict[int, tuple[str | None, bytes]] = {}
    size = 0
    while (part := await reader.next()) is not None:
        assert isinstance(part, aiohttp.BodyPartReader)
        data = await part.read()
        size += len(data)
        if part.name == "payload_json":
            payload = json.loads(data)
        elif part.name and (hit := re.fullmatch(r"files\[(\d+)\]", part.name)):
            files[int(hit[1])] = (part.filename or None, bytes(data))
    return Multipart(payload, files, size)


def attachment_problems(upload: Multipart) -> list[Problem]:
    """What Discord rejects in a message's files (the size is checked apart: a 413, not a form error)."""
    problems: list[Problem] = []
    described = {str(a.get("id")): a for a in upload.payload.get("attachments") or []}
    if len(upload.files) > MAX_FILES:
        problems.append(("attachments", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_FILES} or fewer in length."))
    for n, (name, _) in sorted(upload.files.items()):
        meta = described.get(str(n), {})
        _required(problems, f"attachments.{n}.filename", meta.get("filename") or name)
        _max_len(
            problems, f"attachments.{n}.description", meta.get("description"), MAX_ATTACHMENT_DESCRIPTION
        )
    return problems


@dataclass
class Recorded:
    """One request the bot made."""

    method: str
    path: str
    query: dict[str, str]
    body: Any


# ---------------------------------------------------------------------- Discord's rules, as data
#: Permission bits (docs: Permissions, "Bitwise Permission Flags").
ADMINISTRATOR = 1 << 3  # bypasses channel overwrites: a bot is not given it
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
EMBED_LINKS = 1 << 14
ATTACH_FILES = 1 << 15
READ_MESSAGE_HISTORY = 1 << 16
SEND_MESSAGES_IN_THREADS = 1 << 38
CREATE_PUBLIC_THREADS = 1 << 35
ALL_PERMISSIONS = (1 << 41) - 1

#: How long Discord accepts the first response and the token's webhook calls.
FIRST_RESPONSE_S = 3.0
TOKEN_LIFETIME_S = 15 * 60.0
#: How long Discord remembers a message nonce sent with ``enforce_nonce`` ("the past few minutes": no exact
#: figure is documented; three minutes, the short end of "a few").
NONCE_WINDOW_S = 3 * 60.0

Problem = tuple[str, str, str]  # (path "embeds.0.title", code, message)


def _max_len(problems: list[Problem], path: str, value: Any, limit: int) -> None:
    if isinstance(value, (str, list)) and len(value) > limit:
        problems.append((path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length."))


def _bad_len(problems: list[Problem], path: str, value: Any, low: int, high: int) -> None:
    if not isinstance(value, str) or not low <= len(value) <= high:
        problems.append((path, "BASE_TYPE_BAD_LENGTH", f"Must be between {low} and {high} in length."))


def _required(problems: list[Problem], path: str, value: Any) -> bool:
    if value is None or value == "":
        problems.append((path, "BASE_TYPE_REQUIRED", "This field is required"))
        return False
    return True


def embed_problems(embeds: list[dict[str, Any]], path: str = "embeds") -> list[Problem]:
    """What Discord rejects in a message's embeds (docs: Message resource, "Embed Limits")."""
    problems: list[Problem] = []
    _max_len(problems, path, embeds, 10)
    total = 0
    for i, embed in enumerate(embeds):
        at = f"{path}.{i}"
        title, desc = embed.get("title") or "", embed.get("description") or ""
        _max_len(problems, f"{at}.title", title, 256)
        _max_len(problems, f"{at}.description", desc, 4096)
        footer = (embed.get("footer") or {}).get("text") or ""
        author = (embed.get("author") or {}).get("name") or ""
        _max_len(problems, f"{at}.footer.text", footer, 2048)
        _max_len(problems, f"{at}.author.name", author, 256)
        fields = embed.get("fields") or []
        _max_len(problems, f"{at}.fields", fields, 25)
        total += len(title) + len(desc) + len(footer) + len(author)
        for j, field in enumerate(fields):
            name, value = field.get("name"), field.get("value")
            if _required(problems, f"{at}.fields.{j}.name", name):
                _max_len(problems, f"{at}.fields.{j}.name", name, 256)
            if _required(problems, f"{at}.fields.{j}.value", value):
                _max_len(problems, f"{at}.fields.{j}.value", value, 1024)
            total += len(name or "") + len(value or "")
    if total > 6000:
        problems.append((path, "MAX_EMBED_SIZE_EXCEEDED", "Embed size exceeds maximum size of 6000"))
    return problems


def component_problems(rows: list[dict[str, Any]], path: str = "components") -> list[Problem]:
    """What Discord rejects in a message's components (docs: "Component Reference")."""
    problems: list[Problem] = []
    _max_len(problems, path, rows, 5)
    seen: set[str] = set()
    for i, row in enumerate(rows):
        at = f"{path}.{i}"
        if row.get("type") != 1:
            problems.append(
                (f"{at}.type", "UNION_TYPE_CHOICES", 'Value of field "type" must be one of (1,).')
            )
            continue
        children = row.get("components") or []
        if not children:
            problems.append(
                (f"{at}.components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.")
            )
        _max_len(problems, f"{at}.components", children, 5)
        selects = [c for c in children if c.get("type") in (3, 5, 6, 7, 8)]
        if selects and len(children) > 1:
            problems.append(
                (
                    f"{at}.components",
                    "COMPONENT_LAYOUT_WIDTH_EXCEEDED",
                    "The specified component exceeds the maximum width",
                )
            )
        for j, comp in enumerate(children):
            cat = f"{at}.components.{j}"
            if comp.get("type") == 2 and comp.get("style") == 5:  # link button: a url, no custom_id
                _required(problems, f"{cat}.url", comp.get("url"))
            elif "custom_id" in comp or comp.get("type") in (2, 3, 5, 6, 7, 8):
                cid = comp.get("custom_id")
                _bad_len(problems, f"{cat}.custom_id", cid, 1, 100)
                if isinstance(cid, str):
                    if cid in seen:
                        problems.append(
                            (
                                f"{cat}.custom_id",
                                "COMPONENT_CUSTOM_ID_DUPLICATED",
                                "Component custom id cannot be duplicated",
                            )
                        )
                    seen.add(cid)
            if comp.get("type") == 2:
                if not comp.get("label") and not comp.get("emoji"):
                    problems.append((f"{cat}.label", "BASE_TYPE_REQUIRED", "This field is required"))
                _max_len(problems, f"{cat}.label", comp.get("label"), 80)
            if comp.get("type") == 3:
                options = comp.get("options") or []
                if not options:
                    problems.append(
                        (f"{cat}.options", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 25 in length.")
                    )
                _max_len(problems, f"{cat}.options", options, 25)
                for k, opt in enumerate(options):
                    _bad_len(problems, f"{cat}.options.{k}.label", opt.get("label"), 1, 100)
                    _bad_len(problems, f"{cat}.options.{k}.value", opt.get("value"), 1, 100)
                _max_len(problems, f"{cat}.placeholder", comp.get("placeholder"), 150)
    return problems


def message_problems(body: dict[str, Any], *, create: bool) -> list[Problem]:
    """What Discord rejects in a message create/edit body."""
    problems: list[Problem] = []
    content = body.get("content")
    _max_len(problems, "content", content, 2000)
    problems += embed_problems(body.get("embeds") or [])
    problems += component_problems(body.get("components") or [])
    empty = (
        not content and not body.get("embeds") and not body.get("components") and not body.get("sticker_ids")
    )
    if create and empty and not body.get("attachments"):
        problems.append(("", "50006", "Cannot send an empty message"))
    nonce = body.get("nonce")
    if nonce is not None and not (isinstance(nonce, int) or (isinstance(nonce, str) and len(nonce) <= 25)):
        problems.append(("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."))
    return problems


def modal_problems(data: dict[str, Any]) -> list[Problem]:
    """What Discord rejects in a modal (docs: Interaction response, "Modal", and "Text Input")."""
    problems: list[Problem] = []
    if _required(problems, "data.title", data.get("title")):
        _max_len(problems, "data.title", data.get("title"), 45)
    _bad_len(problems, "data.custom_id", data.get("custom_id"), 1, 100)
    rows = data.get("components") or []
    if not 1 <= len(rows) <= 5:
        problems.append(("data.components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length."))
    for i, row in enumerate(rows):
        at = f"data.components.{i}"
        # An action row holding one text input, or a Label (type 18) with its component.
        if row.get("type") == 18:
            inputs = [row.get("component") or {}]
            _bad_len(problems, f"{at}.label", row.get("label"), 1, 45)
        else:
            inputs = row.get("components") or []
            if len(inputs) != 1:
                problems.append(
                    (f"{at}.components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 1 in length.")
                )
        for j, comp in enumerate(inputs):
            cat = f"{at}.components.{j}"
            _bad_len(problems, f"{cat}.custom_id", comp.get("custom_id"), 1, 100)
            if comp.get("type") == 4:
                if row.get("type") != 18:
                    _bad_len(problems, f"{cat}.label", comp.get("label"), 1, 45)
                _max_len(problems, f"{cat}.value", comp.get("value"), 4000)
                # A pre-filled value must fit the input's own max_length (the client could not hold it).
                if comp.get("max_length") is not None:
                    _max_len(problems, f"{cat}.value", comp.get("value"), int(comp["max_length"]))
                _max_len(problems, f"{cat}.placeholder", comp.get("placeholder"), 100)
                for key in ("min_length", "max_length"):
                    n = comp.get(key)
                    low = 0 if key == "min_length" else 1
                    if n is not None and not low <= int(n) <= 4000:
                        problems.append(
                            (
                                f"{cat}.{key}",
                                "NUMBER_TYPE_MAX",
                                "int value should be less than or equal to 4000.",
                            )
                        )
    return problems


def form_error(problems: list[Problem]) -> dict[str, Any]:
    """Discord's error body: 50006 for an empty message, else 50035 with errors nested by path."""
    if any(code == "50006" for _, code, _ in problems):
        return {"message": "Cannot send an empty message", "code": 50006}
    errors: dict[str, Any] = {}
    for path, code, message in problems:
        node = errors
        for part in path.split("."):
            node = node.setdefault(part, {})
        node.setdefault("_errors", []).append({"code": code, "message": message})
    return {"message": "Invalid Form Body", "code": 50035, "errors": errors}


@dataclass
class _Bucket:
    """A rate-limit bucket: ``limit`` requests per ``per`` seconds."""

    limit: int
    per: float
    hits: list[float]


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


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly "application/json", as Discord sends it (discord.py compares the header verbatim).
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        # Discord answers through Google's front end ("Via: 1.1 google"); discord.py takes a 429 without
        # it for a Cloudflare ban and does not retry.
        headers={"Content-Type": "application/json", "Via": "1.1 google", **(headers or {})},
    )


def _rate_limited(
    retry_after: float, *, limit: int = 5, bucket: str, is_global: bool = False
) -> web.Response:
    """A 429 as Discord sends it (docs: Rate Limits, "Exceeding A Rate Limit"): body and headers."""
    retry_after = max(0.001, round(retry_after, 3))
    headers = {
        "Retry-After": str(math.ceil(retry_after)),
        "X-RateLimit-Limit": str(limit),
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": f"{time.time() + retry_after:.3f}",
        "X-RateLimit-Reset-After": f"{retry_after:.3f}",
        "X-RateLimit-Bucket": bucket,
        "X-RateLimit-Scope": "global" if is_global else "user",
    }
    if is_global:
        headers["X-RateLimit-Global"] = "true"
    body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": is_global}
    return _json(body, status=429, headers=headers)


def guild_shard(guild_id: int, shard_count: int) -> int:
    """The shard Discord sends a guild's events on (docs: Gateway, "Sharding")."""
    return (guild_id >> 22) % shard_count


#: Gateway opcodes and close codes (docs: Opcodes and Status Codes).
OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_RESUME, OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = (
    0,
    1,
    2,
    6,
    9,
    10,
    11,
)
CLOSE_AUTHENTICATION_FAILED, CLOSE_INVALID_SHARD, CLOSE_SHARDING_REQUIRED = 4004, 4010, 4011


class FakeGateway:
    """Discord's gateway for the fake: one websocket per shard, each given only its shards' guilds."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        #: guild id -> its text channel ids (what GUILD_CREATE carries)
        self.guilds: dict[int, list[int]] = {}
        #: The shard count /gateway/bot recommends; an IDENTIFY with fewer shards is closed with 4011.
        self.min_shards = 1
        #: The token IDENTIFY must carry (None: any).
        self.token: str | None = None
        #: (shard id, shard count) of every accepted IDENTIFY, in order
        self.identified: list[tuple[int, int]] = []
        #: Close codes sent to refused IDENTIFYs, in order
        self.refused: list[int] = []
        #: shard id -> (its open websocket, the count it identified with, its sequence number)
        self.connections: dict[int, tuple[web.WebSocketResponse, int, list[int]]] = {}
        self.heartbeat_interval_ms = 41250

    def add_guild(self, guild_id: int, channel_ids: list[int]) -> None:
        """The bot is a member of ``guild_id`` with these text channels (sent on its shard's connect)."""
        self.guilds[guild_id] = list(channel_ids)

    def bot_gateway(self) -> dict[str, Any]:
        """``GET /gateway/bot`` (docs: Get Gateway Bot)."""
        return {
            "url": self.fake.root.replace("http://", "ws://") + "/gateway",
            "shards": self.min_shards,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
        }

    async def _send(
        self, ws: web.WebSocketResponse, op: int, d: Any, t: str | None = None, s: Any = None
    ) -> None:
        await ws.send_str(json.dumps({"op": op, "d": d, "s": s, "t": t}))

    async def dispatch_to_guild(self, guild_id: int, event: str, data: dict[str, Any]) -> int | None:
        """Send a dispatch to the connection of ``guild_id``'s shard; its shard id, or None when no
        connection holds that shard (Discord then has nobody to deliver it to).
        """
        for shard_id, (ws, count, seq) in self.connections.items():
            if guild_shard(guild_id, count) == shard_id and not ws.closed:
                seq[0] += 1
                await self._send(ws, OP_DISPATCH, data, event, seq[0])
                return shard_id
        return None

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        """One gateway session: HELLO, then IDENTIFY (checked), READY and the shard's GUILD_CREATEs."""
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        await self._send(ws, OP_HELLO, {"heartbeat_interval": self.heartbeat_interval_ms})
        shard_id: int | None = None
        try:
            async for msg in ws:
                if msg.type != 1:  # aiohttp WSMsgType.TEXT
                    continue
                frame = json.loads(msg.data)
                op = frame.get("op")
                if op == OP_HEARTBEAT:
                    await self._send(ws, OP_HEARTBEAT_ACK, None)
                elif op == OP_RESUME:
                    # No session is kept across connections: Discord's answer is "identify again".
                    await self._send(ws, OP_INVALID_SESSION, False)
                elif op == OP_IDENTIFY:
                    shard_id = await self._identify(ws, frame.get("d") or {})
                    if shard_id is None:
                        break
        finally:
            if shard_id is not None and self.connections.get(shard_id, (None,))[0] is ws:
                del self.connections[shard_id]
        return ws

    async def _identify(self, ws: web.WebSocketResponse, d: dict[str, Any]) -> int | None:
        if self.token is not None and d.get("token") != self.token:
            await self._refuse(ws, CLOSE_AUTHENTICATION_FAILED, "Authentication failed.")
            return None
        shard = d.get("shard", [0, 1])  # without "shard": one connection for every guild
        if not (isinstance(shard, list) and len(shard) == 2 and all(type(n) is int for n in shard)):
            await self._refuse(ws, CLOSE_INVALID_SHARD, "Invalid shard.")
            return None
        shard_id: int = shard[0]
        count: int = shard[1]
        if count < 1 or not 0 <= shard_id < count:
            await self._refuse(ws, CLOSE_INVALID_SHARD, "Invalid shard.")
            return None
        if count < self.min_shards:
            await self._refuse(ws, CLOSE_SHARDING_REQUIRED, "Sharding required.")
            return None
        self.identified.append((shard_id, count))
        mine = [g for g in sorted(self.guilds) if guild_shard(g, count) == shard_id]
        seq = [1]
        self.connections[shard_id] = (ws, count, seq)
        ready = {
            "v": 10,
            "user": user_payload(BOT_ID, "RankZero", bot=True),
            "guilds": [{"id": str(g), "unavailable": True} for g in mine],
            "session_id": f"session-{shard_id}-{len(self.identified)}",
            "resume_gateway_url": self.fake.root.replace("http://", "ws://") + "/gateway",
            "shard": [shard_id, count],
            "application": {"id": str(APP_ID), "flags": 0},
        }
        await self._send(ws, OP_DISPATCH, ready, "READY", seq[0])
        for guild_id in mine:
            seq[0] += 1
            payload = self.fake.guild_payload(guild_id, self.guilds[guild_id])
            await self._send(ws, OP_DISPATCH, payload, "GUILD_CREATE", seq[0])
        return shard_id

    async def _refuse(self, ws: web.WebSocketResponse, code: int, reason: str) -> None:
        self.refused.append(code)
        await ws.close(code=code, message=reason.encode())


class FakeDiscord:
    """Answers the REST calls the adapter makes and keeps the messages it creates."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        #: Guilds the bot left (Leave Guild), in order.
        self.left_guilds: list[int] = []
        self.messages: dict[int, dict[str, Any]] = {}
        #: interaction token -> id of the message its @original refers to
        self.originals: dict[str, int] = {}
        self.files: dict[str, bytes] = {}
        #: Files sent with messages that Discord accepted, in order.
        self.uploads: list[Uploaded] = []
        self.threads: dict[int, dict[str, Any]] = {}
        #: DM channels opened by the bot (channel id -> the user), and users whose DMs are closed.
        self.dm_channels: dict[int, int] = {}
        self.dms_closed: set[int] = set()
        #: channel id -> the bot's permission bits there (absent: every permission)
        self.permissions: dict[int, int] = {}
        #: Channels an admin deleted: every call on them is 404 ``10003 Unknown Channel``.
        self.deleted_channels: set[int] = set()
        #: interaction token -> (interaction id, when it was created on :meth:`now`'s clock)
        self.interactions: dict[str, tuple[int, float]] = {}
        #: Autocomplete answers by interaction token: the choices the bot offered.
        self.suggestions: dict[str, list[dict[str, Any]]] = {}
        self.acknowledged: set[int] = set()
        #: Modals the bot opened, by custom_id (the last one opened under each id).
        self.modals: dict[str, dict[str, Any]] = {}
        #: Requests answered with an error status: (status, method, path, body)
        self.rejected: list[tuple[int, str, str, Any]] = []
        #: Message creation per channel: 5 per 5 s, as the API's X-RateLimit headers report it.
        self.channel_limit = (5, 5.0)
        self._buckets: dict[int, list[float]] = {}
        #: The bot's message nonces sent with ``enforce_nonce``: nonce -> (message id, when).
        self.nonces: dict[str, tuple[int, float]] = {}
        self._forced: list[list[Any]] = []
        #: [method, path regex, status, body, matching requests to let through first]
        self._failures: list[list[Any]] = []
        #: "" (global) or "/guilds/<id>" -> the commands last PUT there
        self.commands: dict[str, list[dict[str, Any]]] = {}
        self._skew = 0.0
        self._ids = itertools.count(600000000000000001)
        self._runner: web.AppRunner | None = None
        self.base = ""
        self.root = ""
        self.gateway = FakeGateway(self)

    # ------------------------------------------------------------------ configuring the strictness
    def now(self) -> float:
        """The fake's clock (monotonic; :meth:`advance` moves it, to age interaction tokens)."""
        return time.monotonic() + self._skew

    def advance(self, seconds: float) -> None:
        """Move the fake's clock on (tokens expire, rate-limit windows pass)."""
        self._skew += seconds

    def set_permissions(self, channel_id: int, allow: int) -> None:
        """The bot's permissions in a channel (bits as in :data:`VIEW_CHANNEL` ...)."""
        self.permissions[channel_id] = allow

    def permissions_in(self, channel_id: int) -> int:
        """The bot's permissions in a channel (a thread inherits its parent's)."""
        thread = self.threads.get(channel_id)
        if thread is not None:
            channel_id = int(thread["parent_id"])
        return self.permissions.get(channel_id, ALL_PERMISSIONS)

    def rate_limit_next(
        self, method: str, pattern: str, *, times: int = 1, retry_after: float = 0.3, is_global: bool = False
    ) -> None:
        """Answer the next ``times`` requests matching (method, path regex) with a 429."""
        self._forced.append([method, pattern, times, retry_after, is_global])

    def fail_next(
        self, method: str, pattern: str, status: int, body: dict[str, Any], *, after: int = 0
    ) -> None:
        """Answer the next request matching (method, path regex) with ``status`` and Discord's ``body``
        (an outage or a refusal the permission table cannot express); ``after``: let that many matching
        requests through first (the 2nd message of a post in several fails: ``after=1``)."""
        self._failures.append([method, pattern, status, body, after])

    def register_interaction(self, interaction_id: int, token: str) -> None:
        """An interaction Discord has just sent (its token's clocks start now)."""
        self.interactions[token] = (interaction_id, self.now())

    def next_id(self) -> int:
        """A fresh snowflake."""
        return next(self._ids)

    async def start(self) -> str:
        """Listen on a free loopback port; return the API base URL."""
        # Big enough for a request over Discord's upload limit to reach the 413 rule, not aiohttp's own.
        app = web.Application(client_max_size=4 * MAX_UPLOAD_BYTES)
        app.router.add_get("/gateway", self.gateway.handle)
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
            "attachments": body.get("attachments") or [],
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": False,
            "timestamp": dt.datetime.now(dt.UTC).isoformat(),
            "edited_timestamp": None,
            "flags": flags | int(body.get("flags") or 0),
        }

    def guild_payload(
        self, guild_id: int, channel_ids: list[int], role_ids: Sequence[int] = ()
    ) -> dict[str, Any]:
        """A GUILD_CREATE payload as the gateway sends it on connect (guilds intent): the guild, its roles
        (@everyone, the bot's managed role, ``role_ids``), the bot's own member and the text channels.
        """
        roles = [
            {
                "id": str(rid),
                "name": "@everyone" if rid == guild_id else f"role-{rid}",
                "color": 0,
                "hoist": False,
                "position": 0 if rid == guild_id else 1,
                # The bot's role grants what the permission table allows by default; channels narrow it
                # with overwrites (channel_payload).
                "permissions": str(ALL_PERMISSIONS & ~ADMINISTRATOR if rid == BOT_ROLE else 0),
                "managed": rid == BOT_ROLE,
                "mentionable": False,
                "flags": 0,
            }
            for rid in [guild_id, BOT_ROLE, *role_ids]
        ]
        return {
            "id": str(guild_id),
            "name": "RankZero test server",
            "icon": None,
            "owner_id": "1",
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "roles": roles,
            "emojis": [],
            "features": [],
            "mfa_level": 0,
            "system_channel_flags": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "member_count": 2,
            # The bot's own member always comes with GUILD_CREATE (discord.py: "always cached").
            "members": [
                {
                    "user": user_payload(BOT_ID, "RankZero", bot=True),
                    "roles": [str(BOT_ROLE)],
                    "joined_at": "2026-01-01T00:00:00+00:00",
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "channels": [self.channel_payload(c, guild_id) for c in channel_ids],
            "threads": [],
            "unavailable": False,
        }

    def channel_payload(self, channel_id: int, guild_id: int = GUILD_ID) -> dict[str, Any]:
        """A guild text channel whose overwrites deny the bot's role what the permission table denies."""
        allow = self.permissions_in(channel_id)
        denied = ALL_PERMISSIONS & ~allow
        overwrites = [{"id": str(BOT_ROLE), "type": 0, "allow": "0", "deny": str(denied)}] if denied else []
        return {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(guild_id),
            "name": "general",
            "position": 0,
            "permission_overwrites": overwrites,
            "nsfw": False,
            "parent_id": None,
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
        upload: Multipart | None = None
        if request.content_type == "multipart/form-data":
            upload = await read_multipart(request)
            body = self._with_attachments(upload)
        elif request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
        path = request.path.removeprefix("/api/v10")
        self.requests.append(Recorded(request.method, path, dict(request.query), body))
        response = self._upload_refusal(upload) if upload is not None else None
        response = response or self._route(request.method, path, body)
        if upload is not None and response.status < 400:
            self._keep_uploads(upload, response)
        if response.status >= 400:
            self.rejected.append((response.status, request.method, path, json.loads(response.body or b"{}")))  # type: ignore[arg-type]
        return response

    def _with_attachments(self, upload: Multipart) -> dict[str, Any]:
        """The message body of a multipart request, its ``attachments`` as Discord returns them."""
        described = {str(a.get("id")): a for a in upload.payload.get("attachments") or []}
        out = []
        for n, (name, data) in sorted(upload.files.items()):
            meta = described.get(str(n), {})
            filename = meta.get("filename") or name or ""
            aid = self.next_id()
            out.append(
                {
                    "id": str(aid),
                    "filename": filename,
                    "description": meta.get("description"),
                    "size": len(data),
                    "url": f"{self.root}/attachments/{aid}/{filename}",
                    "proxy_url": f"{self.root}/attachments/{aid}/{filename}",
                    "content_type": "image/png" if filename.endswith(".png") else "application/octet-stream",
                }
            )
        return {**upload.payload, "attachments": out}

    def _upload_refusal(self, upload: Multipart) -> web.Response | None:
        """413 over the upload limit, 400 for files over the other limits."""
        if upload.size > MAX_UPLOAD_BYTES:
            return _json({"message": "Request entity too large", "code": 40005}, status=413)
        problems = attachment_problems(upload)
        return _json(form_error(problems), status=400) if problems else None

    def _keep_uploads(self, upload: Multipart, response: web.Response) -> None:
        answer = json.loads(response.body or b"{}")  # type: ignore[arg-type]
        message = answer if "attachments" in answer else {}
        mid = int(message.get("id") or 0)
        flags = int(message.get("flags") or 0)
        parts = [data for _, (_, data) in sorted(upload.files.items())]
        for meta, data in zip(message.get("attachments") or [], parts, strict=False):
            self.uploads.append(
                Uploaded(data, meta["filename"], meta.get("description"), mid, bool(flags & 64))
            )

    def _route(self, m: str, path: str, body: Any) -> web.Response:
        forced = self._forced_limit(m, path)
        if forced is not None:
            return forced
        for i, (method, pattern, status, error, after) in enumerate(self._failures):
            if method == m and re.fullmatch(pattern, path):
                if after > 0:
                    self._failures[i][4] = after - 1
                    break
                del self._failures[i]
                return _json(error, status=status)
        if (hit := re.match(r"/channels/(\d+)(/|$)", path)) and int(hit[1]) in self.deleted_channels:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        if path in self.files:
            return web.Response(body=self.files[path])
        if m == "GET" and path == "/gateway/bot":
            return _json(self.gateway.bot_gateway())
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
        if m == "POST" and path == "/users/@me/channels":
            return self._open_dm(body or {})
        if (hit := re.fullmatch(r"/users/@me/guilds/(\d+)", path)) and m == "DELETE":
            # Leave Guild: 204 and the bot is no longer a member; 404 Unknown Guild when it was not one.
            if self.gateway.guilds.pop(int(hit[1]), None) is None:
                return _json({"message": "Unknown Guild", "code": 10004}, status=404)
            self.left_guilds.append(int(hit[1]))
            return web.Response(status=204)
        if (
            (hit := re.fullmatch(r"/channels/(\d+)/messages", path))
            and m == "POST"
            and int(hit[1]) in self.dm_channels
        ):
            if self.dm_channels[int(hit[1])] in self.dms_closed:
                # What Discord answers when the user's privacy settings refuse the bot's DMs.
                return _json({"message": "Cannot send messages to this user", "code": 50007}, status=403)
            return self._check_body(body or {}, create=True) or _json(
                self._store(self.next_id(), int(hit[1]), body or {})
            )
        if (hit := re.fullmatch(r"/channels/(\d+)/messages", path)) and m == "POST":
            channel = int(hit[1])
            return self._check_channel(channel, body or {}, create=True) or self._create_in(
                channel, body or {}
            )
        if (hit := re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path)) and m == "PATCH":
            channel = int(hit[1])
            if int(hit[2]) not in self.messages:
                return _json({"message": "Unknown Message", "code": 10008}, status=404)
            return self._check_channel(channel, body or {}, create=False) or _json(
                self._store(int(hit[2]), channel, body or {})
            )
        if (hit := re.fullmatch(r"/channels/(\d+)/threads", path)) and m == "POST":
            allow = self.permissions_in(int(hit[1]))
            if not allow & VIEW_CHANNEL:
                return _json({"message": "Missing Access", "code": 50001}, status=403)
            if not allow & CREATE_PUBLIC_THREADS:
                return _json({"message": "Missing Permissions", "code": 50013}, status=403)
            return _json(self._thread(int(hit[1]), body or {}))
        if (hit := re.fullmatch(r"/interactions/(\d+)/([^/]+)/callback", path)) and m == "POST":
            return self._callback(int(hit[1]), hit[2], body or {})
        if (hit := re.fullmatch(r"/webhooks/(\d+)/([^/]+)/messages/@original", path)) and m == "PATCH":
            refused = self._check_token(hit[2]) or self._check_body(body or {}, create=False)
            if refused is not None:
                return refused
            mid = self.originals.get(hit[2])
            if mid is None:
                return _json({"code": 10008, "message": "Unknown Message"}, status=404)
            return _json(self._store(mid, CHANNEL_ID, body or {}))
        if (hit := re.fullmatch(r"/webhooks/(\d+)/([^/]+)", path)) and m == "POST":
            refused = self._check_token(hit[2]) or self._check_body(body or {}, create=True)
            if refused is not None:
                return refused
            return _json(self._store(self.next_id(), CHANNEL_ID, body or {}))
        if (hit := re.fullmatch(r"/applications/\d+(/guilds/\d+)?/commands", path)) and m == "PUT":
            return _json(self._put_commands(hit[1], body or []))
        if (hit := re.fullmatch(r"/applications/\d+(/guilds/\d+)?/commands", path)) and m == "GET":
            return _json(self.commands.get(hit[1] or "", []))
        return _json({"code": 0, "message": f"fake has no route {m} {path}"}, status=404)

    def _open_dm(self, body: dict[str, Any]) -> web.Response:
        """``POST /users/@me/channels`` (Create DM): one DM channel per user, as Discord keeps it."""
        recipient = body.get("recipient_id")
        if not str(recipient or "").isdigit():
            problem = ("recipient_id", "BASE_TYPE_REQUIRED", "This field is required")
            return _json(form_error([problem]), status=400)
        user = int(str(recipient))
        channel = next((c for c, u in self.dm_channels.items() if u == user), None) or self.next_id()
        self.dm_channels[channel] = user
        return _json(
            {
                "id": str(channel),
                "type": 1,
                "last_message_id": None,
                "recipients": [user_payload(user, f"user{user}")],
            }
        )

    # ------------------------------------------------------------------ the rules
    def _check_body(self, body: dict[str, Any], *, create: bool) -> web.Response | None:
        problems = message_problems(body, create=create)
        return _json(form_error(problems), status=400) if problems else None

    def _check_channel(self, channel: int, body: dict[str, Any], *, create: bool) -> web.Response | None:
        """403 without View Channel / Send Messages / Embed Links, 400 for a bad body, 429 over the bucket."""
        allow = self.permissions_in(channel)
        if not allow & VIEW_CHANNEL:
            return _json({"message": "Missing Access", "code": 50001}, status=403)
        send = SEND_MESSAGES_IN_THREADS if channel in self.threads else SEND_MESSAGES
        if create and not allow & send:
            return _json({"message": "Missing Permissions", "code": 50013}, status=403)
        if body.get("embeds") and not allow & EMBED_LINKS:
            return _json({"message": "Missing Permissions", "code": 50013}, status=403)
        if create and body.get("attachments") and not allow & ATTACH_FILES:  # a message with files
            return _json({"message": "Missing Permissions", "code": 50013}, status=403)
        if create and body.get("message_reference") and not allow & READ_MESSAGE_HISTORY:
            message = "Cannot reply without permission to read message history"
            return _json({"message": message, "code": 160002}, status=403)
        refused = self._check_body(body, create=create)
        if refused is not None or not create:
            return refused
        return self._bucket(channel)

    def _bucket(self, channel: int) -> web.Response | None:
        limit, per = self.channel_limit
        now = self.now()
        hits = [t for t in self._buckets.get(channel, []) if now - t < per]
        self._buckets[channel] = hits
        if len(hits) >= limit:
            return _rate_limited(per - (now - hits[0]), limit=limit, bucket=f"channel-{channel}")
        hits.append(now)
        return None

    def _create_in(self, channel: int, body: dict[str, Any]) -> web.Response:
        limit, per = self.channel_limit
        hits = self._buckets.get(channel, [])
        reset_after = per - (self.now() - hits[0]) if hits else per
        headers = {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(max(0, limit - len(hits))),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": f"channel-{channel}",
        }
        nonce = body.get("nonce")
        if body.get("enforce_nonce") and nonce is not None:
            earlier = self.nonces.get(str(nonce))
            fresh = earlier is not None and self.now() - earlier[1] < NONCE_WINDOW_S
            if earlier is not None and fresh and earlier[0] in self.messages:
                # Discord: the message created before with this nonce is returned, no new one is made.
                return _json(self.messages[earlier[0]], headers=headers)
        mid = self.next_id()
        if body.get("enforce_nonce") and nonce is not None:
            self.nonces[str(nonce)] = (mid, self.now())
        return _json(self._store(mid, channel, body), headers=headers)

    def _forced_limit(self, m: str, path: str) -> web.Response | None:
        for entry in self._forced:
            method, pattern, times, retry_after, is_global = entry
            if times > 0 and method == m and re.fullmatch(pattern, path):
                entry[2] -= 1
                return _rate_limited(retry_after, is_global=is_global, bucket="forced")
        return None

    def _check_token(self, token: str) -> web.Response | None:
        """Webhook calls with an interaction token: only after the first response, for 15 minutes."""
        known = self.interactions.get(token)
        if known is None or known[0] not in self.acknowledged:
            return _json({"message": "Unknown Webhook", "code": 10015}, status=404)
        if self.now() - known[1] > TOKEN_LIFETIME_S:
            return _json({"message": "Invalid Webhook Token", "code": 50027}, status=401)
        return None

    def _put_commands(self, guild_part: str | None, body: list[dict[str, Any]]) -> list[dict[str, Any]]:
        stored = []
        for cmd in body:
            stored.append({**cmd, "id": str(self.next_id()), "application_id": str(APP_ID), "version": "1"})
        self.commands[guild_part or ""] = stored
        return stored

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

    def _callback(self, interaction_id: int, token: str, body: dict[str, Any]) -> web.Response:
        known = self.interactions.get(token)
        if known is None or known[0] != interaction_id or self.now() - known[1] > FIRST_RESPONSE_S:
            return _json({"message": "Unknown interaction", "code": 10062}, status=404)
        if interaction_id in self.acknowledged:
            return _json({"message": "Interaction has already been acknowledged.", "code": 40060}, status=400)
        kind = body.get("type")
        data = body.get("data") or {}
        if kind == 8:
            problems = autocomplete_problems(data)
            if problems:
                return _json(form_error(problems), status=400)
            self.acknowledged.add(interaction_id)
            self.suggestions[token] = list(data.get("choices") or [])
            return _json({"interaction": {"id": str(interaction_id), "type": 4}})
        if kind == 9:
            problems = modal_problems(data)
        elif kind in (4, 7):
            problems = message_problems(data, create=kind == 4)
        else:
            problems = []
        if problems:
            return _json(form_error(problems), status=400)
        self.acknowledged.add(interaction_id)
        if kind == 9:  # a modal the user now sees: only it can be submitted (Interactions.submit_modal)
            self.modals[str(data.get("custom_id"))] = data
        message_id: int | None = None
        if kind in (4, 5):  # a new (maybe ephemeral, maybe "thinking") response message
            message_id = self.next_id()
            self._store(message_id, CHANNEL_ID, data, flags=int(data.get("flags") or 0))
            self.originals[token] = message_id
        elif kind == 7 and token in self.originals:  # update the component's message
            self._store(self.originals[token], CHANNEL_ID, data)
        return _json(
            {
                "interaction": {
                    "id": str(interaction_id),
                    "type": 3,
                    "response_message_id": str(message_id) if message_id else None,
                    "response_message_loading": kind == 5,
                    "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
                }
            }
        )

    # ------------------------------------------------------------------ what tests look at
    def take_rejections(self) -> list[tuple[int, str, str, Any]]:
        """The error answers so far (and forget them: :func:`no_unexpected_rejections` checks the rest)."""
        out, self.rejected = self.rejected, []
        return out

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


#: Interaction token numbers, shared by every Interactions of the process (see Interactions.__init__).
_TOKENS = itertools.count(1)


class Interactions:
    """Builds interaction payloads and feeds them to a client as the gateway would."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        # Unique in the process, as Discord's are: discord.py keeps one webhook rate-limit lock per (app,
        # token) for the whole process, and a test that ended while its lock was held for a bucket's reset
        # (X-RateLimit-Remaining 0) left it held; a later test's "tok-3" then waited on it for ever.
        self._n = _TOKENS

    def _base(
        self,
        kind: int,
        user_id: int,
        name: str,
        permissions: int,
        roles: list[int],
        channel_id: int = CHANNEL_ID,
        guild_id: int = GUILD_ID,
    ) -> dict[str, Any]:
        n = next(self._n)
        interaction_id = self.fake.next_id()
        self.fake.register_interaction(interaction_id, f"tok-{n}")
        # What Discord computes for the bot in this channel (its permission table).
        app_permissions = str(self.fake.permissions_in(channel_id))
        return {
            "id": str(interaction_id),
            "application_id": str(APP_ID),
            "type": kind,
            "token": f"tok-{n}",
            "version": 1,
            "guild_id": str(guild_id),
            "channel_id": str(channel_id),
            "channel": {
                "id": str(channel_id),
                "type": 0,
                "guild_id": str(guild_id),
                "name": "general",
                "position": 0,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
                "topic": None,
                "last_message_id": None,
                "rate_limit_per_user": 0,
                "flags": 0,
                "permissions": app_permissions,
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
            "app_permissions": app_permissions,
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(guild_id)},
            "context": 0,
            "attachment_size_limit": 10 * 1024 * 1024,
        }

    def join_guild(self, client: discord.Client, role_ids: Sequence[int] = ()) -> None:
        """GUILD_CREATE as the gateway sends it on connect (guilds intent): the guild, its roles, the
        channel; member roles of later interactions resolve through this cache.
        """
        payload = self.fake.guild_payload(GUILD_ID, [CHANNEL_ID], role_ids)
        client._connection.parse_guild_create(payload)

    def channel_payload(self, channel_id: int) -> dict[str, Any]:
        """A guild text channel whose overwrites deny the bot's role what the permission table denies."""
        return self.fake.channel_payload(channel_id)

    def channel_update(self, client: discord.Client, channel_id: int = CHANNEL_ID) -> None:
        """CHANNEL_UPDATE as the gateway sends it when an admin edits a channel's permissions."""
        client._connection.parse_channel_update(self.channel_payload(channel_id))

    def click(
        self,
        client: discord.Client,
        message_id: int,
        custom_id: str,
        *,
        user_id: int = 111,
        name: str = "alice",
        permissions: int = 0,
        guild_id: int = GUILD_ID,
    ) -> str:
        """Click a button of a message the fake holds (from ``guild_id``); return the interaction token."""
        payload = self._base(3, user_id, name, permissions, [], guild_id=guild_id)
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
        channel_id: int = CHANNEL_ID,
        guild_id: int = GUILD_ID,
    ) -> str:
        """Invoke a slash command (``name`` may be 'group sub' or 'group sub sub') in ``guild_id``.

        Once the bot synced its commands, the options are checked as Discord's client enforces them:
        declared, required ones given, and a value of the declared choices (ValueError otherwise).
        """
        payload = self.command_payload(
            name,
            options,
            user_id=user_id,
            user=user,
            permissions=permissions,
            roles=roles,
            resolved=resolved,
            channel_id=channel_id,
            guild_id=guild_id,
        )
        client._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        return str(payload["token"])

    def command_payload(
        self,
        name: str,
        options: list[dict[str, Any]] | None = None,
        *,
        user_id: int = 111,
        user: str = "alice",
        permissions: int = 0,
        roles: list[int] | None = None,
        resolved: dict[str, Any] | None = None,
        channel_id: int = CHANNEL_ID,
        guild_id: int = GUILD_ID,
    ) -> dict[str, Any]:
        """The INTERACTION_CREATE payload of a slash command (checked as :meth:`command` says), for
        :meth:`command` or for the gateway to dispatch to the guild's shard (:class:`FakeGateway`).
        """
        payload = self._base(2, user_id, user, permissions, roles or [], channel_id, guild_id)
        parts = name.split()
        opts: list[dict[str, Any]] = options or []
        guild = self._check_options(parts, opts)
        for sub in reversed(parts[1:]):
            opts = [{"type": 1 if sub == parts[-1] else 2, "name": sub, "options": opts}]
        payload["data"] = {"id": str(self.fake.next_id()), "name": parts[0], "type": 1, "options": opts}
        if guild:  # a guild command's data names its guild (docs: Application Command Data Structure)
            payload["data"]["guild_id"] = guild.rsplit("/", 1)[1]
        if resolved:
            payload["data"]["resolved"] = resolved
        return payload

    def _check_options(self, parts: list[str], options: list[dict[str, Any]]) -> str | None:
        """The options against the synced command; the "/guilds/<id>" it was synced to, if any."""
        for where_synced, synced in sorted(self.fake.commands.items(), reverse=True):  # guilds first
            declared: dict[str, Any] | None = next((c for c in synced if c["name"] == parts[0]), None)
            for sub in parts[1:]:
                if declared is not None:
                    declared = next((o for o in declared.get("options", []) if o["name"] == sub), None)
            if declared is None:
                continue
            schema = {o["name"]: o for o in declared.get("options", [])}
            given = {o["name"]: o.get("value") for o in options}
            where = "/" + " ".join(parts)
            for sent in options:
                opt, value = sent["name"], sent.get("value")
                if opt not in schema:
                    raise ValueError(f"{where} has no option {opt!r} (declared: {sorted(schema)})")
                if sent.get("focused") and not schema[opt].get("autocomplete"):
                    # Discord's client asks for suggestions only for options declared autocomplete: true.
                    raise ValueError(f"{where} {opt}: not an autocomplete option, Discord asks nothing")
                problem = _option_value_problem(schema[opt], sent)
                if problem:
                    raise ValueError(f"{where} {opt}: {problem}")
                allowed = [c["value"] for c in schema[opt].get("choices") or []]
                if allowed and value not in allowed:
                    raise ValueError(f"{where} {opt}: Discord offers only {allowed}, not {value!r}")
            missing = [n for n, o in schema.items() if o.get("required") and n not in given]
            if missing:
                raise ValueError(f"{where} needs {missing}: Discord does not send the command without them")
            return where_synced or None
        return None

    def autocomplete(
        self, client: discord.Client, name: str, option: str, typed: str, *, user_id: int = 111
    ) -> str:
        """The user types ``typed`` into ``option`` of command ``name``: Discord asks the bot for choices
        (an APPLICATION_COMMAND_AUTOCOMPLETE interaction); the answer lands in ``fake.suggestions[token]``.
        """
        focused = [{"type": 3, "name": option, "value": typed, "focused": True}]
        payload = self.command_payload(name, focused, user_id=user_id)
        payload["type"] = 4
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
        guild_id: int = GUILD_ID,
    ) -> str:
        """Submit a modal the bot opened, with text input values by custom_id (an input not given keeps its
        pre-filled value, as the user left it); ``message_id``: the message whose button opened it (its
        @original, as for a click). ValueError for what Discord's client would not send.
        """
        submitted = modal_submission(self.fake.modals, custom_id, values)
        payload = self._base(5, user_id, "admin", permissions, [], guild_id=guild_id)
        if message_id is not None:
            payload["message"] = self.fake.messages[message_id]
            self.fake.originals[payload["token"]] = message_id
        payload["data"] = {
            "custom_id": custom_id,
            "components": [
                {"type": 1, "components": [{"type": 4, "custom_id": k, "value": v}]}
                for k, v in submitted.items()
            ],
        }
        client._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        return str(payload["token"])

    def forge_modal(
        self,
        client: discord.Client,
        custom_id: str,
        values: dict[str, str],
        *,
        user_id: int = 111,
        guild_id: int = GUILD_ID,
    ) -> str:
        """A modal submission from a hostile client, not Discord's: any custom id (one the bot never
        opened, malformed, over Discord's 100 characters) with any input values. For tests of what the
        bot does with ids it did not issue; everything else goes through :meth:`submit_modal`.
        """
        payload = self._base(5, user_id, "mallory", 0, [], guild_id=guild_id)
        payload["data"] = {
            "custom_id": custom_id,
            "components": [
                {"type": 1, "components": [{"type": 4, "custom_id": k, "value": v}]}
                for k, v in values.items()
            ],
        }
        client._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        return str(payload["token"])


def modal_submission(
    modals: dict[str, dict[str, Any]], custom_id: str, values: dict[str, str]
) -> dict[str, str]:
    """Every input of the opened modal ``custom_id`` with the value the user leaves in it: ``values``
    over the pre-filled ones. ValueError for what Discord's client does not send: a modal never opened, an
    input it does not have, a required input left empty, a value over the input's max_length.
    """
    modal = modals.get(custom_id)
    if modal is None:
        raise ValueError(
            f"no modal {custom_id!r} was opened: Discord sends submissions of opened modals only"
        )
    inputs = [
        comp
        for row in modal.get("components") or []
        for comp in ([row.get("component")] if row.get("type") == 18 else row.get("components") or [])
        if comp and comp.get("type") == 4
    ]
    known = {str(comp["custom_id"]): comp for comp in inputs}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"modal {custom_id!r} has no inputs {unknown} (it has {sorted(known)})")
    out: dict[str, str] = {}
    for cid, comp in known.items():
        value = values.get(cid, str(comp.get("value") or ""))
        if comp.get("required", True) and not value:
            raise ValueError(f"input {cid!r} is required: Discord's client does not submit it empty")
        if comp.get("max_length") is not None and len(value) > int(comp["max_length"]):
            raise ValueError(f"input {cid!r} takes at most {comp['max_length']} characters")
        if len(value) < int(comp.get("min_length") or 0):
            raise ValueError(f"input {cid!r} needs at least {comp['min_length']} characters")
        out[cid] = value
    return out


#: Option types (docs: "Application Command Option Type") and the JSON values Discord's client sends.
_OPTION_TYPES: dict[int, tuple[type, ...]] = {3: (str,), 4: (int,), 5: (bool,), 10: (int, float)}
#: An integer option's range (docs: "-2^53 and 2^53").
_MAX_INTEGER = 2**53


def _option_value_problem(declared: dict[str, Any], sent: dict[str, Any]) -> str | None:
    """Why Discord's client would not send this option value (wrong type, out of range), or None."""
    kind = int(declared["type"])
    value: Any = sent.get("value")
    if sent.get("focused"):  # an autocomplete's focused option is whatever is typed so far
        return None if isinstance(value, str) else "a focused option is sent as the text typed so far"
    if "type" in sent and int(sent["type"]) != kind:
        return f"declared as type {kind}, sent as type {sent['type']}"
    allowed = _OPTION_TYPES.get(kind)
    if allowed is not None and (not isinstance(value, allowed) or (kind != 5 and isinstance(value, bool))):
        return f"type {kind} takes {', '.join(t.__name__ for t in allowed)}, not {value!r}"
    if kind == 4 and not -_MAX_INTEGER <= value <= _MAX_INTEGER:
        return f"{value} is outside Discord's integer range"
    if kind == 3:
        if len(value) < int(declared.get("min_length", 0)):
            return f"at least {declared['min_length']} characters"
        if len(value) > int(declared.get("max_length", 6000)):
            return f"at most {declared['max_length']} characters"
    return None


def autocomplete_problems(data: dict[str, Any]) -> list[Problem]:
    """(path, code, message) of what an autocomplete answer breaks (at most 25 choices; name 1..100; a
    string value at most 100)."""
    problems: list[Problem] = []
    choices = data.get("choices")
    if not isinstance(choices, list):
        return [("choices", "BASE_TYPE_REQUIRED", "This field is required")]
    if len(choices) > 25:
        problems.append(("choices", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."))
    for i, choice in enumerate(choices):
        name, value = str(choice.get("name", "")), choice.get("value")
        if not 1 <= len(name) <= 100:
            problems.append(
                (f"choices.{i}.name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
            )
        if isinstance(value, str) and len(value) > 100:
            problems.append((f"choices.{i}.value", "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length."))
    return problems


def no_unexpected_rejections(request: Any) -> None:
    """Fail a test whose bot made a request the strict fake refused, unless the test took it
    (:meth:`FakeDiscord.take_rejections`): a rejected message is a lost message.
    """
    fake = request.node.funcargs.get("fake")
    if isinstance(fake, FakeDiscord) and fake.rejected:
        raise AssertionError(f"Discord (the strict fake) refused requests: {fake.rejected}")
