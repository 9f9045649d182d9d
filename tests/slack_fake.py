"""A local fake of Slack: a Web API on loopback that answers as strictly as the real one, records calls, and
sends signed requests into the app.

slack_sdk's AsyncWebClient takes a ``base_url``, so the adapter's outgoing calls (chat.postMessage,
views.open, users.info...) reach this server over real HTTP; response_url posts land here too.

What the fake refuses, as Slack's documentation says (docs.slack.dev: Block Kit reference, the modal view
object, chat.postMessage, views.open/update/push, rate limits):

- Block Kit limits: 50 blocks in a message, 100 in a view; section text 3000 (fields 10 x 2000); header
  150 (plain_text); button text 75 (plain_text), value 2000; action_id and block_id 255, a block_id unique in
  its message or view and an action_id unique in its block; 25 elements in an actions block, 10 in a
  context block; a select's options 100 and an option's text 75 / value 150; an input's label 2000. A
  message's ``text`` over 40,000 characters is ``msg_too_long``. Messages answer ``invalid_blocks``, views
  ``invalid_arguments`` (as the real methods do), each with ``response_metadata.messages`` saying where.
- Modals: title (required), submit and close 24 characters of plain_text; submit required with an input
  block; private_metadata 3000; callback_id and external_id 255.
- A trigger_id is good once, for 3 seconds: later ``expired_trigger_id``, a second use
  ``exchanged_trigger_id``. views.update/push/open name a view that exists (``not_found``); a ``hash``
  that is not the view's current one is a ``hash_conflict``.
- Channels: an unknown channel (or a private one the bot is not in) is ``channel_not_found``; a channel
  the bot has not joined is ``not_in_channel`` (a public one is fine with ``chat:write.public``); an
  archived one takes no post or edit (``is_archived``). chat.update of a deleted message is
  ``message_not_found``.
  chat.postMessage to a known user's id is a DM from the app (``chat:write``); an unknown user id is
  ``channel_not_found``.
  users.info of an unknown user is ``user_not_found``; a workspace listed in ``members`` answers from
  its own list only (the same Grid user can be an admin in one workspace and a member in another).
- Scopes: a method whose scope the token lacks is ``missing_scope`` with ``needed`` (chat:write,
  users:read, channels:read / groups:read for conversations.info); auth.test sends X-OAuth-Scopes.
- Tokens and workspaces: every Web API call needs a known token (``invalid_auth``); a revoked one (the app
  uninstalled, or the token revoked) is ``token_revoked``. Each token belongs to one workspace, whose
  channels alone it sees (another workspace's channel is ``channel_not_found``); auth.test answers that
  workspace and bot. Each accepted call records the workspace it was made for (``_team``).
- OAuth v2 install: ``GET /oauth/v2/authorize`` (what the installer's browser opens) needs the app's
  client id, a scope and, if given, a registered redirect URL; the installer approves for ``installing``
  (a team id) and is sent to the redirect URL with a code, good once for 10 minutes. ``oauth.v2.access``
  authenticates the app (HTTP Basic or form: ``invalid_client_id``, ``bad_client_secret``), takes the code
  once (``invalid_code``) with the same redirect URL as the authorization (``bad_redirect_uri``), and answers
  a new bot token for that workspace (Enterprise Grid: its enterprise; org-wide: ``is_enterprise_install``).
- Messages are kept per channel (:attr:`FakeSlackApi.messages`). chat.postMessage's ``metadata`` must be an
  object of ``event_type`` (alphanumeric) and ``event_payload`` (an object): ``invalid_metadata_format``,
  ``metadata_too_large``. conversations.history (top-level messages, newest first) and conversations.replies
  (a thread, ``thread_not_found``) need ``channels:history`` / ``groups:history`` and, for a bot token,
  membership (``not_in_channel``); ``limit`` 1..999, cursor pagination (``invalid_cursor``), ``oldest`` /
  ``latest`` / ``inclusive``; a message's ``metadata`` is returned only with ``include_all_metadata``.
- Rate limits (https://api.slack.com/docs/rate-limits): HTTP 429 with ``Retry-After`` (whole seconds) and
  ``error: ratelimited``. chat.postMessage about one message a second per channel (a short burst
  allowed); other methods a budget per method and workspace by tier (:data:`METHOD_TIERS`: Tier 4, 100+ a
  minute: views.*, users.info, chat.postEphemeral; Tier 3, 50+ a minute: chat.update,
  conversations.info), a burst of half a minute's calls (Slack gives no figure). All views.update calls
  of the workspace share one budget.
- Files (docs.slack.dev: files.getUploadURLExternal, files.completeUploadExternal; what slack_sdk's
  ``files_upload_v2`` calls): both need ``files:write`` (``missing_scope``). getUploadURLExternal needs
  ``filename`` (``invalid_arguments``) and a ``length`` above 0 (``missing_argument``, "typically only
  occurs when the length provided is 0"); ``alt_txt`` over 1000 characters is ``alt_txt_too_large``. It
  answers a ``file_id`` and an ``upload_url`` on this server; bytes POSTed there whose size is not the
  declared ``length`` are refused with HTTP 400 (Slack documents no code for it: the fake's choice, so a
  mismatch cannot pass), an unknown upload URL is 404. completeUploadExternal takes ``files`` (a JSON
  list of ``{id, title}``): a file id that is not this workspace's, whose bytes never arrived, or that was
  completed already is ``file_not_found``; ``channel_id`` / ``channels`` follow the channel rules above
  (a user id in ``channels`` shares to the app's DM with that user). Shared files are kept in
  :attr:`FakeSlackApi.uploads` with their alt text.
- response_url (https://api.slack.com/interactivity/handling#message_responses): "up to 5 times within 30
  minutes", then ``used_url`` / ``expired_url`` (404). A post with ``response_type: ephemeral`` is a
  private message to the clicking user (:attr:`FakeSlackApi.ephemeral`); ``replace_original`` from a click
  on such a message replaces it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import math
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0001"

# ---------------------------------------------------------------------- Slack's documented limits
MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_ID = 255
MAX_ACTIONS_ELEMENTS = 25
MAX_CONTEXT_ELEMENTS = 10
MAX_OPTIONS = 100
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150
MAX_LABEL = 2000
MAX_MODAL_TEXT = 24
MAX_METADATA = 3000
MAX_MESSAGE_TEXT = 40_000
#: A message's metadata (chat.postMessage ``metadata``: ``event_type`` a short alphanumeric name, and an
#: ``event_payload`` object) as JSON text at most this long (Slack documents no exact figure the project
#: could confirm: a conservative bound, far above the ~60 characters of RankZero's marks).
MAX_MESSAGE_METADATA = 8_000
MAX_EVENT_TYPE = 255
#: conversations.history / conversations.replies: ``limit`` at most 999 (the method's documented maximum;
#: the default is 100), pages chained by an opaque ``cursor`` (``invalid_cursor`` when it is not one).
MAX_HISTORY_LIMIT = 999
DEFAULT_HISTORY_LIMIT = 100
TRIGGER_TTL_S = 3.0


@dataclass
class Bucket:
    """A token bucket: ``burst`` calls at once, then ``per_s`` a second."""

    burst: float
    per_s: float
    tokens: float = -1.0
    at: float = 0.0

    def take(self, now: float) -> float:
        """0 when a call may go at ``now`` (monotonic seconds) and is counted, else the seconds to wait."""
        if self.tokens < 0:
            self.tokens, self.at = self.burst, now
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_s)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.per_s


#: Slack's Web API tiers, calls a minute per method per app per workspace, as documented at
#: https://api.slack.com/docs/rate-limits (https://docs.slack.dev/apis/web-api/rate-limits): Tier 1 "1+",
#: Tier 2 "20+", Tier 3 "50+", Tier 4 "100+ per minute ... generous burst behavior". Slack publishes no
#: burst size: the fake lets a Tier's bucket hold half a minute's calls (Tier 4: 50 at once), then refills
#: at the documented rate. chat.postMessage is the Special tier: "one message per second per channel"
#: (short bursts allowed: 3 here). response_url posts are not Web API methods and have no documented tier;
#: they are limited by their own rule (5 uses within 30 minutes, :data:`RESPONSE_URL_USES`).
TIER_PER_MINUTE = {1: 1, 2: 20, 3: 50, 4: 100}
#: Each rate-limited method's tier (Slack's method reference).
METHOD_TIERS = {
    "chat.update": 3,
    "conversations.info": 3,
    "conversations.history": 3,
    "conversations.replies": 3,
    "chat.postEphemeral": 4,
    "views.open": 4,
    "views.update": 4,
    "views.push": 4,
    "views.publish": 4,
    "users.info": 4,
}


def _tier_bucket(tier: int) -> tuple[float, float]:
    per_minute = TIER_PER_MINUTE[tier]
    return (max(1.0, per_minute / 2), per_minute / 60)


#: Budgets per method and workspace (burst, calls a second); chat.postMessage's is per channel.
RATE_LIMITS: dict[str, tuple[float, float]] = {
    "chat.postMessage": (3, 1.0),
    **{method: _tier_bucket(tier) for method, tier in METHOD_TIERS.items()},
}


@dataclass
class Channel:
    """A channel as the bot sees it (in workspace ``team``)."""

    name: str
    member: bool = True
    private: bool = False
    team: str = TEAM
    #: An archived channel takes no posts or edits (``is_archived``).
    archived: bool = False


@dataclass
class Team:
    """A workspace that may install the app (``enterprise``: its Enterprise Grid org, if any)."""

    name: str
    enterprise: str | None = None


@dataclass
class Token:
    """A bot token: its workspace (a team, or a whole Grid org when ``org_wide``), scopes, whether revoked."""

    team: str
    scopes: set[str] | None = None  # None: the fake's ``scopes`` (the default token)
    revoked: bool = False
    org_wide: bool = False
    enterprise: str | None = None
    #: Token rotation: when it stops working, in the fake's time (:meth:`FakeSlackApi.now`); None: never.
    expires_at: float | None = None


@dataclass
class Grant:
    """An authorization code: for which workspace, which redirect URL and scopes, until when."""

    team: str
    redirect_uri: str | None
    scopes: set[str]
    expires: float
    org_wide: bool = False


#: How long an OAuth code is good for (Slack: 10 minutes).
CODE_TTL_S = 600.0


def _text_problems(where: str, obj: Any, limit: int, plain_only: bool = False) -> Iterator[str]:
    if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
        yield f"[ERROR] must be a text object [json-pointer:{where}]"
        return
    if plain_only and obj["type"] != "plain_text":
        yield f"[ERROR] must be plain_text [json-pointer:{where}/type]"
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        yield f"[ERROR] must be more than 0 characters [json-pointer:{where}/text]"
    elif len(text) > limit:
        yield f"[ERROR] must be less than {limit + 1} characters [json-pointer:{where}/text]"


def _id_problems(where: str, value: Any) -> Iterator[str]:
    if value is not None and (not isinstance(value, str) or len(value) > MAX_ID):
        yield f"[ERROR] must be less than {MAX_ID + 1} characters [json-pointer:{where}]"


def _element_problems(where: str, el: Any) -> Iterator[str]:
    if not isinstance(el, dict):
        yield f"[ERROR] must be an object [json-pointer:{where}]"
        return
    yield from _id_problems(f"{where}/action_id", el.get("action_id"))
    kind = el.get("type")
    if kind == "button":
        yield from _text_problems(f"{where}/text", el.get("text"), MAX_BUTTON_TEXT, plain_only=True)
        if len(str(el.get("value", ""))) > MAX_BUTTON_VALUE:
            yield f"[ERROR] must be less than {MAX_BUTTON_VALUE + 1} characters [json-pointer:{where}/value]"
    if kind in ("static_select", "multi_static_select", "checkboxes", "radio_buttons"):
        options = el.get("options") or []
        most = MAX_OPTIONS if "select" in str(kind) else 10
        if len(options) > most:
            yield f"[ERROR] no more than {most} items allowed [json-pointer:{where}/options]"
        for i, opt in enumerate(options):
            yield from _text_problems(f"{where}/options/{i}/text", opt.get("text"), MAX_OPTION_TEXT)
            if len(str(opt.get("value", ""))) > MAX_OPTION_VALUE:
                limit = MAX_OPTION_VALUE + 1
                yield f"[ERROR] must be less than {limit} characters [json-pointer:{where}/options/{i}/value]"
    if kind == "plain_text_input" and int(el.get("max_length") or 0) > 3000:
        yield f"[ERROR] must be at most 3000 [json-pointer:{where}/max_length]"


def block_problems(blocks: Any, limit: int, root: str = "/blocks") -> list[str]:
    """What Slack would refuse in ``blocks`` (empty: valid)."""
    if not isinstance(blocks, list):
        return [f"[ERROR] must be an array [json-pointer:{root}]"]
    out: list[str] = []
    if len(blocks) > limit:
        out.append(f"[ERROR] no more than {limit} items allowed [json-pointer:{root}]")
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        where = f"{root}/{i}"
        if not isinstance(block, dict):
            out.append(f"[ERROR] must be an object [json-pointer:{where}]")
            continue
        bid = block.get("block_id")
        out += _id_problems(f"{where}/block_id", bid)
        if bid is not None:
            if bid in block_ids:
                out.append(f"[ERROR] duplicate block_id {bid!r} [json-pointer:{where}/block_id]")
            block_ids.add(bid)
        kind = block.get("type")
        if kind == "section":
            if "text" in block:
                out += _text_problems(f"{where}/text", block["text"], MAX_SECTION_TEXT)
            fields = block.get("fields") or []
            if len(fields) > MAX_SECTION_FIELDS:
                out.append(
                    f"[ERROR] no more than {MAX_SECTION_FIELDS} items allowed [json-pointer:{where}/fields]"
                )
            for j, f in enumerate(fields):
                out += _text_problems(f"{where}/fields/{j}", f, MAX_FIELD_TEXT)
            if "text" not in block and not fields:
                out.append(f"[ERROR] a section needs text or fields [json-pointer:{where}]")
            if "accessory" in block:
                out += _element_problems(f"{where}/accessory", block["accessory"])
        elif kind == "header":
            out += _text_problems(f"{where}/text", block.get("text"), MAX_HEADER_TEXT, plain_only=True)
        elif kind in ("actions", "context"):
            elements = block.get("elements") or []
            most = MAX_ACTIONS_ELEMENTS if kind == "actions" else MAX_CONTEXT_ELEMENTS
            if not elements or len(elements) > most:
                out.append(f"[ERROR] between 1 and {most} items allowed [json-pointer:{where}/elements]")
            action_ids: set[str] = set()
            for j, el in enumerate(elements):
                if kind == "context":
                    if isinstance(el, dict) and el.get("type") in ("plain_text", "mrkdwn"):
                        out += _text_problems(f"{where}/elements/{j}", el, MAX_SECTION_TEXT)
                    continue
                out += _element_problems(f"{where}/elements/{j}", el)
                aid = el.get("action_id") if isinstance(el, dict) else None
                if aid is not None:
                    if aid in action_ids:
                        out.append(f"[ERROR] duplicate action_id {aid!r} [json-pointer:{where}/elements/{j}]")
                    action_ids.add(aid)
        elif kind == "input":
            out += _text_problems(f"{where}/label", block.get("label"), MAX_LABEL, plain_only=True)
            out += _element_problems(f"{where}/element", block.get("element"))
        elif kind not in ("divider", "image", "rich_text", "file", "video"):
            out.append(f"[ERROR] unknown block type {kind!r} [json-pointer:{where}/type]")
    return out


def view_problems(view: Any) -> list[str]:
    """What Slack would refuse in a modal or Home tab view object (empty: valid)."""
    if not isinstance(view, dict):
        return ["[ERROR] must be an object [json-pointer:/view]"]
    out = block_problems(view.get("blocks"), MAX_VIEW_BLOCKS, "/view/blocks")
    if view.get("type") == "modal":
        out += _text_problems("/view/title", view.get("title"), MAX_MODAL_TEXT, plain_only=True)
        for name in ("submit", "close"):
            if view.get(name) is not None:
                out += _text_problems(f"/view/{name}", view[name], MAX_MODAL_TEXT, plain_only=True)
        has_input = any(isinstance(b, dict) and b.get("type") == "input" for b in view.get("blocks") or [])
        if has_input and view.get("submit") is None:
            out.append(
                "[ERROR] submit is required when an input block is present [json-pointer:/view/submit]"
            )
    elif view.get("type") != "home":
        out.append("[ERROR] must be modal or home [json-pointer:/view/type]")
    if len(str(view.get("private_metadata") or "")) > MAX_METADATA:
        out.append(
            f"[ERROR] must be less than {MAX_METADATA + 1} characters [json-pointer:/view/private_metadata]"
        )
    out += _id_problems("/view/callback_id", view.get("callback_id"))
    out += _id_problems("/view/external_id", view.get("external_id"))
    return out


@dataclass
class Call:
    """One recorded call: the Web API method (or ``response``) and its arguments."""

    method: str
    args: dict[str, Any]
    #: When Slack accepted it (epoch seconds): what a player sees appears then.
    at: float = field(default_factory=time.time)
    #: The client's (address, port) it came from: which process made it.
    peer: tuple[Any, ...] | None = None

    def dump(self) -> str:
        """The arguments as JSON text (to search for rendered strings)."""
        return json.dumps(self.args, ensure_ascii=False)


#: Slack's longest image description (files.getUploadURLExternal: ``alt_txt_too_large``).
MAX_ALT_TXT = 1000


@dataclass
class PendingFile:
    """An upload ticket (files.getUploadURLExternal): declared name, length and alt text, the bytes once
    they arrived at its upload URL, and whether it was completed (shared) already.
    """

    team: str
    filename: str
    length: int
    alt_txt: str | None
    data: bytes | None = None
    completed: bool = False


@dataclass
class SlackUpload:
    """A file Slack shared (files.completeUploadExternal): where, with what text, and its alt text."""

    file_id: str
    filename: str
    data: bytes
    alt_txt: str | None
    title: str | None
    channel: str
    initial_comment: str | None
    thread_ts: str | None
    team: str


@dataclass
class ShownView:
    """A view Slack shows: its current content and hash, and the view it was pushed on."""

    view: dict[str, Any]
    hash: str
    parent: str | None = None


class SlackRefusal(Exception):
    """What a Web API method answers instead of ok (``error``, HTTP status, extra body, headers)."""

    def __init__(
        self,
        error: str,
        status: int = 200,
        messages: list[str] | None = None,
        retry_after: int = 0,
        extra: dict[str, str] | None = None,
    ) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra or {}
        self.status = status
        self.messages = messages or []
        self.retry_after = retry_after


#: How many times a response_url may be used, and for how long (Slack: "up to 5 times within 30 minutes",
#: https://api.slack.com/interactivity/handling#message_responses); later ``used_url`` / ``expired_url``.
RESPONSE_URL_USES = 5
RESPONSE_URL_TTL_S = 30 * 60


@dataclass
class Ephemeral:
    """A private message Slack shows one user in a channel (posted through a response_url)."""

    ts: str
    text: str
    blocks: list[dict[str, Any]]
    at: float


@dataclass
class ResponseUrl:
    """Who a response_url answers (its user, and the private message it came from, if any), since when."""

    user: str | None
    issued: float
    message_ts: str | None = None


#: What users.info says of a user's timezone unless a test gives one (Slack's user object: ``tz`` an IANA
#: name, ``tz_label`` its name in words, ``tz_offset`` seconds from UTC now).
DEFAULT_USER_TZ: dict[str, Any] = {
    "tz": "America/Los_Angeles",
    "tz_label": "Pacific Standard Time",
    "tz_offset": -28800,
}


@dataclass
class FakeSlackApi:
    """The Web API on loopback. ``users``: what users.info answers per user id (senders' users are added
    as they act); ``channels``: the channels that exist and whether the bot is in them; ``limits``: the rate
    budgets (see RATE_LIMITS); ``fail``: method -> error answered once, for tests of failure paths;
    ``stall``: method -> seconds before it answers.
    """

    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, Channel] = field(
        default_factory=lambda: {c: Channel(c.lower()) for c in ("C1", "C9", "CADMIN")}
    )
    limits: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(RATE_LIMITS))
    calls: list[Call] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)
    #: method -> seconds Slack takes to answer it (a slow users.info, say).
    stall: dict[str, float] = field(default_factory=dict)
    #: method -> seconds the answer of its next accepted call is held back, once: the call is done in Slack
    #: (a message posted) while its caller still waits (to kill it between Slack's acceptance and its own
    #: record of it).
    hold_after: dict[str, float] = field(default_factory=dict)
    _held: set[asyncio.Future[None]] = field(default_factory=set)
    #: Every refusal answered (method, error), 429s included.
    refused: list[tuple[str, str]] = field(default_factory=list)
    views: dict[str, ShownView] = field(default_factory=dict)
    triggers: dict[str, float | None] = field(default_factory=dict)
    _trigger_user: dict[str, str] = field(default_factory=dict)
    bot_token: str = "xoxb-test"
    #: The bot token's scopes (auth.test sends them in X-OAuth-Scopes), as the README's manifest asks.
    scopes: set[str] = field(
        default_factory=lambda: {
            "chat:write",
            "chat:write.public",
            "commands",
            "users:read",
            "channels:read",
            "groups:read",
            "files:write",
            "channels:history",
            "groups:history",
        }
    )
    #: Per workspace (a team id, or a Grid org for an org-wide token): user id -> what users.info answers
    #: with that workspace's token. A workspace not listed answers from ``users``.
    members: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: The workspaces that exist (the default one holds the default token's channels).
    teams: dict[str, Team] = field(default_factory=lambda: {TEAM: Team("Test")})
    #: Bot tokens Slack accepts (the default one is added at start): token -> its workspace.
    tokens: dict[str, Token] = field(default_factory=dict)
    #: The app's OAuth credentials and Redirect URLs (OAuth & Permissions), for the install flow.
    client_id: str = "1111.2222"
    client_secret: str = "oauth-client-secret"
    redirect_uris: list[str] = field(default_factory=list)
    #: The workspace whose admin approves the next authorization (what they pick in Slack's page), and
    #: whether they install org-wide (Enterprise Grid).
    installing: str = TEAM
    installing_org_wide: bool = False
    codes: dict[str, Grant] = field(default_factory=dict)
    #: Every client connection (address, port) a Web API call or response_url post came on.
    connections: set[Any] = field(default_factory=set)
    #: Token rotation (the app's "Opt in" under OAuth & Permissions): installs get a refresh token and
    #: bot tokens that expire after ``token_ttl_s`` (Slack: 12 hours); an expired one is ``token_expired``.
    rotation: bool = False
    token_ttl_s: float = 12 * 3600
    #: Added to the real clock to make the fake's "now" (token expiry, response_url ages, the rate budgets):
    #: a test moves time forward by raising it.
    clock_offset_s: float = 0.0
    #: Live refresh tokens -> the workspace token they renew (its team, scopes, org-wide...).
    refresh_tokens: dict[str, Token] = field(default_factory=dict)
    #: Messages deleted in Slack (channel, ts): chat.update of one is ``message_not_found``.
    deleted: set[tuple[str, str]] = field(default_factory=set)
    #: channel id -> the messages in it, oldest first (as conversations.history lists them, with their
    #: ``metadata``; thread replies carry ``thread_ts``). Deleted messages are removed.
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _external: dict[str, str] = field(default_factory=dict)
    #: Upload tickets by file id, and the files shared (files.completeUploadExternal), in order.
    pending_files: dict[str, PendingFile] = field(default_factory=dict)
    uploads: list[SlackUpload] = field(default_factory=list)
    _buckets: dict[tuple[str, str], Bucket] = field(default_factory=dict)
    _responses: dict[str, int] = field(default_factory=dict)
    #: response_url name -> whose it is and when it was issued (see :meth:`response_url`).
    response_urls: dict[str, ResponseUrl] = field(default_factory=dict)
    #: user id -> the private (ephemeral) messages Slack shows them, oldest first.
    ephemeral: dict[str, list[Ephemeral]] = field(default_factory=dict)
    #: view id -> the user whose trigger opened it.
    view_owner: dict[str, str] = field(default_factory=dict)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None
    port: int = 0

    def now(self) -> float:
        """The fake's clock (epoch seconds): real time plus ``clock_offset_s``."""
        return time.time() + self.clock_offset_s

    def _rotating(self, info: Token, body: dict[str, Any]) -> dict[str, Any]:
        """With rotation on, ``body`` (an oauth.v2.access answer for ``info``) gets an expiring token."""
        if not self.rotation:
            return body
        info.expires_at = self.now() + self.token_ttl_s
        refresh = f"xoxe-1-{info.team}-{secrets.token_hex(8)}"
        self.refresh_tokens[refresh] = info
        return {**body, "refresh_token": refresh, "expires_in": int(self.token_ttl_s)}

    @property
    def base_url(self) -> str:
        """What to give AsyncWebClient(base_url=...)."""
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, name: str, user: str | None = None, message_ts: str | None = None) -> str:
        """A response_url that records posts under method ``response``: ``user``'s, from a click on their
        private message ``message_ts`` (replace_original replaces that one) or elsewhere (a new one).
        """
        self.response_urls[name] = ResponseUrl(user, self.now(), message_ts)
        return f"http://127.0.0.1:{self.port}/response/{name}"

    @property
    def authorize_url(self) -> str:
        """Slack's authorization page (what AsyncOAuthSettings(authorization_url=...) links to)."""
        return f"http://127.0.0.1:{self.port}/oauth/v2/authorize"

    def uninstall(self, team: str) -> list[str]:
        """An admin removes the app from ``team`` (a team id, or a Grid org's enterprise id): its tokens are
        revoked. Returns them (the app learns of it through ``app_uninstalled``).
        """
        gone = [
            t for t, info in self.tokens.items() if team in (info.team, info.enterprise) and not info.revoked
        ]
        for t in gone:
            self.tokens[t].revoked = True
        return gone

    def delete_message(self, channel: str, ts: str) -> None:
        """Someone deletes a message in Slack (chat.update of it is then ``message_not_found``)."""
        self.deleted.add((channel, ts))
        self.messages[channel] = [m for m in self.messages.get(channel, []) if m["ts"] != ts]

    def posts_in(self, channel: str) -> list[dict[str, Any]]:
        """The messages that are in ``channel`` now (not deleted), thread replies included, oldest first."""
        return list(self.messages.get(channel, []))

    def token_of(self, team: str) -> str:
        """The live bot token of a workspace (AssertionError when it has none)."""
        for token, info in self.tokens.items():
            if info.team == team and not info.revoked:
                return token
        raise AssertionError(f"no live token for {team}")

    @property
    def ratelimited(self) -> int:
        """How many calls were answered 429."""
        return sum(1 for _, error in self.refused if error == "ratelimited")

    async def start(self) -> None:
        """Listen on loopback (a free port)."""
        app = web.Application()
        self.tokens.setdefault(self.bot_token, Token(TEAM))
        app.add_routes(
            [
                web.route("*", "/api/{method}", self._api),
                web.post("/response/{name}", self._response),
                web.post("/upload/{file_id}", self._upload),
                web.get("/oauth/v2/authorize", self._authorize),
            ]
        )
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop listening (answers held back are let go first: the runner waits for every handler)."""
        for held in self._held:
            held.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ what Slack's side does
    def issue_trigger(self, trigger_id: str, user: str | None = None) -> None:
        """A trigger_id Slack sent with an interaction (by ``user``), valid from now for 3 s and once
        (https://api.slack.com/docs/triggers: "Triggers expire in three seconds", "used only once").
        """
        self.triggers[trigger_id] = time.monotonic()
        if user is not None:
            self._trigger_user[trigger_id] = user

    def show(self, view_id: str, view: dict[str, Any], parent: str | None = None) -> ShownView:
        """Slack shows ``view`` as ``view_id`` (opened, updated, pushed): a new hash each time."""
        shown = ShownView(view, f"{time.time():.6f}.{secrets.token_hex(4)}", parent)
        self.views[view_id] = shown
        ext = view.get("external_id")
        if ext:
            self._external[str(ext)] = view_id
        return shown

    def close(self, view_id: str, stack: bool = False) -> None:
        """The view is gone (closed by the user, or answered with clear): so is its stack with ``stack``."""
        shown = self.views.pop(view_id, None)
        if stack:
            for vid in [v for v, s in self.views.items() if s.parent == view_id]:
                self.close(vid, stack=True)
            if shown is not None and shown.parent:
                self.close(shown.parent, stack=True)

    def _use_trigger(self, trigger_id: Any) -> None:
        issued = self.triggers.get(str(trigger_id), 0.0)
        if issued is None:
            raise SlackRefusal("exchanged_trigger_id")
        if not issued or time.monotonic() - issued > TRIGGER_TTL_S:
            raise SlackRefusal("expired_trigger_id")
        self.triggers[str(trigger_id)] = None

    def _rate(self, method: str, args: dict[str, Any]) -> None:
        limit = self.limits.get(method)
        if limit is None:
            return
        key = str(args.get("channel")) if method == "chat.postMessage" else str(args.get("_team", TEAM))
        bucket = self._buckets.setdefault((method, key), Bucket(*limit))
        # The fake's clock: a test that moves time forward (clock_offset_s) refills the budgets as that much
        # time would, instead of the app waiting out the Retry-After for real.
        wait = bucket.take(time.monotonic() + self.clock_offset_s)
        if wait > 0:
            raise SlackRefusal("ratelimited", status=429, retry_after=max(1, math.ceil(wait)))

    def _scopes(self, args: dict[str, Any]) -> set[str]:
        token = self.tokens.get(str(args.get("_token")))
        return self.scopes if token is None or token.scopes is None else token.scopes

    def _need(self, scope: str, args: dict[str, Any] | None = None) -> None:
        scopes = self._scopes(args or {})
        if scope not in scopes:
            raise SlackRefusal("missing_scope", extra={"needed": scope, "provided": ",".join(sorted(scopes))})

    def _sees(self, token: Token, channel: Channel) -> bool:
        if token.org_wide:
            return self.teams.get(channel.team, Team("")).enterprise == token.enterprise
        return channel.team == token.team

    def _channel(self, args: dict[str, Any], post: bool) -> Channel:
        target = str(args.get("channel"))
        token = self.tokens.get(str(args.get("_token")), Token(TEAM))
        if post and target in self.users and target not in self.channels:
            # A user id as channel: the message goes to the app's DM with that user (its Messages tab).
            return Channel(name=f"dm-{target}", team=token.team)
        channel = self.channels.get(target)
        if channel is None or (channel.private and not channel.member) or not self._sees(token, channel):
            raise SlackRefusal("channel_not_found")
        if not post:
            self._need("groups:read" if channel.private else "channels:read", args)
        scopes = self._scopes(args)
        if post and not channel.member and (channel.private or "chat:write.public" not in scopes):
            raise SlackRefusal("not_in_channel")
        if post and channel.archived:
            raise SlackRefusal("is_archived")
        return channel

    def _view_arg(self, args: dict[str, Any]) -> dict[str, Any]:
        view = args.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError:
                raise SlackRefusal("invalid_arguments", messages=["[ERROR] view is not JSON"]) from None
        problems = view_problems(view)
        if problems:
            raise SlackRefusal("invalid_arguments", messages=problems)
        if not isinstance(view, dict):
            raise SlackRefusal("invalid_arguments", messages=["[ERROR] missing required field: view"])
        return dict(view)

    def _blocks_arg(self, args: dict[str, Any]) -> None:
        blocks = args.get("blocks")
        if isinstance(blocks, str):
            blocks = args["blocks"] = json.loads(blocks)
        if blocks is not None:
            problems = block_problems(blocks, MAX_MESSAGE_BLOCKS)
            if problems:
                raise SlackRefusal("invalid_blocks", messages=problems)
        if len(str(args.get("text") or "")) > MAX_MESSAGE_TEXT:
            raise SlackRefusal("msg_too_long")
        if blocks is None and not args.get("text"):
            raise SlackRefusal("no_text")

    def _bot_suffix(self, args: dict[str, Any]) -> str:
        """What tells this token's bot user apart (auth.test's ``UBOT…`` / ``BBOT…``)."""
        token = self.tokens.get(str(args.get("_token")), Token(TEAM))
        return "" if args.get("_token") == self.bot_token else token.team

    def _metadata_arg(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """chat.postMessage's ``metadata`` (JSON text or an object): ``event_type`` a non-empty alphanumeric
        (and ``_``) name, ``event_payload`` an object; ``invalid_metadata_format`` otherwise,
        ``metadata_too_large`` past :data:`MAX_MESSAGE_METADATA`.
        """
        raw = args.get("metadata")
        if raw is None or raw == "":
            return None
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                raise SlackRefusal("invalid_metadata_format") from None
        if not isinstance(raw, dict) or set(raw) - {"event_type", "event_payload"}:
            raise SlackRefusal("invalid_metadata_format")
        event_type, payload = raw.get("event_type"), raw.get("event_payload")
        if (
            not isinstance(event_type, str)
            or not re.fullmatch(r"[A-Za-z0-9_]+", event_type)
            or len(event_type) > MAX_EVENT_TYPE
            or not isinstance(payload, dict)
        ):
            raise SlackRefusal("invalid_metadata_format")
        if len(json.dumps(raw)) > MAX_MESSAGE_METADATA:
            raise SlackRefusal("metadata_too_large")
        return {"event_type": event_type, "event_payload": payload}

    def _keep(self, method: str, args: dict[str, Any], ts: str, metadata: dict[str, Any] | None) -> None:
        """Store a posted message in its channel (or apply an edit to it)."""
        channel = str(args.get("channel"))
        kept = self.messages.setdefault(channel, [])
        if method == "chat.update":
            for edited in kept:
                if edited["ts"] == ts:
                    edited.update(text=args.get("text"), blocks=args.get("blocks"))
            return
        suffix = self._bot_suffix(args)
        message: dict[str, Any] = {
            "type": "message",
            "ts": ts,
            "user": f"UBOT{suffix}",
            "bot_id": f"BBOT{suffix}",
            "app_id": "A0RANKZERO",
            "text": args.get("text"),
            "blocks": args.get("blocks"),
        }
        if args.get("thread_ts"):
            message["thread_ts"] = str(args["thread_ts"])
        if metadata is not None:
            message["metadata"] = metadata
        kept.append(message)

    def _history(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """conversations.history (a channel's messages, newest first, thread replies left out) or
        conversations.replies (a thread: its parent, then its replies, oldest first), as Slack answers a
        bot token: ``channels:history`` / ``groups:history``, only in channels the bot is a member of
        (``not_in_channel``), ``limit`` 1..999, an opaque ``cursor``, ``oldest`` / ``latest`` /
        ``inclusive``; ``metadata`` only with ``include_all_metadata``.
        """
        token = self.tokens.get(str(args.get("_token")), Token(TEAM))
        channel = self.channels.get(str(args.get("channel")))
        if channel is None or (channel.private and not channel.member) or not self._sees(token, channel):
            raise SlackRefusal("channel_not_found")
        self._need("groups:history" if channel.private else "channels:history", args)
        if not channel.member:
            raise SlackRefusal("not_in_channel")
        try:
            limit = int(args.get("limit") or DEFAULT_HISTORY_LIMIT)
        except (TypeError, ValueError):
            raise SlackRefusal("invalid_arguments", messages=["[ERROR] limit must be a number"]) from None
        if not 1 <= limit <= MAX_HISTORY_LIMIT:
            raise SlackRefusal(
                "invalid_arguments", messages=[f"[ERROR] limit must be 1..{MAX_HISTORY_LIMIT}"]
            )
        kept = self.messages.get(str(args.get("channel")), [])
        if method == "conversations.history":
            listed = [m for m in reversed(kept) if m.get("thread_ts") in (None, m["ts"])]
        else:
            parent = str(args.get("ts") or "")
            if not any(m["ts"] == parent for m in kept):
                raise SlackRefusal("thread_not_found")
            listed = [m for m in kept if m["ts"] == parent or m.get("thread_ts") == parent]
        inclusive = str(args.get("inclusive", "")).lower() in ("1", "true")
        if args.get("oldest"):
            oldest = float(args["oldest"])
            listed = [
                m for m in listed if float(m["ts"]) > oldest or (inclusive and float(m["ts"]) == oldest)
            ]
        if args.get("latest"):
            latest = float(args["latest"])
            listed = [
                m for m in listed if float(m["ts"]) < latest or (inclusive and float(m["ts"]) == latest)
            ]
        start = 0
        if args.get("cursor"):
            try:
                start = int(
                    base64.b64decode(str(args["cursor"]), validate=True).decode().removeprefix("next:")
                )
            except (ValueError, UnicodeDecodeError):
                raise SlackRefusal("invalid_cursor") from None
        page = listed[start : start + limit]
        with_metadata = str(args.get("include_all_metadata", "")).lower() in ("1", "true")
        shown = [{k: v for k, v in m.items() if k != "metadata" or with_metadata} for m in page]
        more = start + limit < len(listed)
        cursor = base64.b64encode(f"next:{start + limit}".encode()).decode() if more else ""
        return {"messages": shown, "has_more": more, "response_metadata": {"next_cursor": cursor}}

    def _answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """The ok body of ``method``, or a SlackRefusal."""
        if method in self.fail:
            raise SlackRefusal(self.fail.pop(method))
        self._rate(method, args)
        if method == "auth.test":
            token = self.tokens[str(args["_token"])]
            team = self.teams.get(token.team, Team(token.team))
            suffix = self._bot_suffix(args)
            body: dict[str, Any] = {
                "user_id": f"UBOT{suffix}",
                "bot_id": f"BBOT{suffix}",
                "user": "rankzero",
                "team": team.name,
            }
            body["team_id"] = "" if token.org_wide else token.team
            if token.enterprise or team.enterprise:
                body["enterprise_id"] = token.enterprise or team.enterprise
            body["url"] = f"https://{team.name.lower() or 'org'}.slack.com/"
            return body
        if method in ("chat.postMessage", "chat.update"):
            self._need("chat:write", args)
            self._channel(args, post=True)
            if method == "chat.update" and (str(args.get("channel")), str(args.get("ts"))) in self.deleted:
                raise SlackRefusal("message_not_found")
            self._blocks_arg(args)
            metadata = self._metadata_arg(args) if method == "chat.postMessage" else None
            ts = str(args.get("ts") or f"1700000000.{next(self._ts):06d}")
            self._keep(method, args, ts, metadata)
            return {"channel": args.get("channel"), "ts": ts}
        if method in ("conversations.history", "conversations.replies"):
            return self._history(method, args)
        if method in ("files.getUploadURLExternal", "files.completeUploadExternal"):
            self._need("files:write", args)
            if method == "files.getUploadURLExternal":
                return self._upload_ticket(args)
            return self._complete_upload(args)
        if method == "conversations.info":
            ch = self._channel(args, post=False)
            cid = str(args.get("channel"))
            return {"channel": {"id": cid, "name": ch.name, "is_member": ch.member, "is_private": ch.private}}
        if method == "users.info":
            self._need("users:read", args)
            uid = str(args.get("user"))
            known = self.members.get(str(args.get("_team")), self.users)
            if uid not in known:
                raise SlackRefusal("user_not_found")
            # As Slack's user object: every user has a timezone (their profile's, else the workspace's).
            return {"user": {"id": uid, "name": uid.lower(), **DEFAULT_USER_TZ, **known[uid]}}
        if method in ("views.open", "views.push"):
            view = self._view_arg(args)
            self._use_trigger(args.get("trigger_id"))
            vid = f"V{next(self._ts):04d}"
            shown = self.show(vid, view)
            owner = self._trigger_user.get(str(args.get("trigger_id")))
            if owner is not None:
                self.view_owner[vid] = owner
            return {"view": {"id": vid, "hash": shown.hash, **view}}
        if method == "views.update":
            view = self._view_arg(args)
            vid = str(args.get("view_id") or self._external.get(str(args.get("external_id")), ""))
            if vid not in self.views:
                raise SlackRefusal("not_found")
            if args.get("hash") and args["hash"] != self.views[vid].hash:
                raise SlackRefusal("hash_conflict")
            shown = self.show(vid, view, self.views[vid].parent)
            return {"view": {"id": vid, "hash": shown.hash, **view}}
        if method == "views.publish":
            view = self._view_arg(args)
            if str(args.get("user_id")) not in self.users:
                raise SlackRefusal("user_not_found")
            return {"view": {"id": f"VH{args.get('user_id')}", **view}}
        raise SlackRefusal("unknown_method", status=404)

    # ------------------------------------------------------------------ files
    def _upload_ticket(self, args: dict[str, Any]) -> dict[str, Any]:
        """files.getUploadURLExternal: a file id and the URL to POST its bytes to."""
        if not args.get("filename"):
            raise SlackRefusal("invalid_arguments", messages=["[ERROR] missing required field: filename"])
        length = str(args.get("length") or "")
        if not length.isdigit() or int(length) <= 0:
            raise SlackRefusal("missing_argument")
        alt = args.get("alt_txt")
        if alt is not None and len(str(alt)) > MAX_ALT_TXT:
            raise SlackRefusal("alt_txt_too_large")
        file_id = f"F{next(self._ts):08d}"
        team = str(args.get("_team", TEAM))
        self.pending_files[file_id] = PendingFile(
            team, str(args["filename"]), int(length), None if alt is None else str(alt)
        )
        return {"file_id": file_id, "upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}"}

    async def _upload(self, request: web.Request) -> web.Response:
        """The upload URL: the raw bytes (or a multipart ``file`` part), exactly the declared length."""
        pending = self.pending_files.get(request.match_info["file_id"])
        if pending is None:
            self.refused.append(("upload", "not_found"))
            return web.Response(status=404, text="not_found")
        if request.content_type == "multipart/form-data":
            form = await request.post()
            part = next(iter(form.values()), b"")
            data = part.file.read() if hasattr(part, "file") else str(part).encode()
        else:
            data = await request.read()
        if len(data) != pending.length:
            self.refused.append(("upload", "length_mismatch"))
            return web.Response(status=400, text="length does not match files.getUploadURLExternal's")
        pending.data = data
        return web.Response(text=f"OK - {len(data)}")

    def _complete_upload(self, args: dict[str, Any]) -> dict[str, Any]:
        """files.completeUploadExternal: share the uploaded files in the channel (or DM) named."""
        try:
            files = json.loads(str(args.get("files") or ""))
        except ValueError:
            raise SlackRefusal("invalid_arguments", messages=["[ERROR] files is not JSON"]) from None
        if not isinstance(files, list) or not files:
            raise SlackRefusal("invalid_arguments", messages=["[ERROR] missing required field: files"])
        team = str(args.get("_team", TEAM))
        tickets = []
        for entry in files:
            pending = self.pending_files.get(str(entry.get("id")) if isinstance(entry, dict) else "")
            if pending is None or pending.team != team or pending.data is None or pending.completed:
                raise SlackRefusal("file_not_found")
            tickets.append((str(entry["id"]), entry.get("title"), pending))
        targets = [t for t in str(args.get("channels") or "").split(",") if t]
        if args.get("channel_id"):
            targets.append(str(args["channel_id"]))
        for target in targets:
            self._channel({**args, "channel": target}, post=True)
        for file_id, title, pending in tickets:
            pending.completed = True
            for target in targets:
                self.uploads.append(
                    SlackUpload(
                        file_id,
                        pending.filename,
                        pending.data or b"",
                        pending.alt_txt,
                        title,
                        target,
                        args.get("initial_comment"),
                        args.get("thread_ts"),
                        team,
                    )
                )
        return {"files": [{"id": fid, "title": title or pending.filename} for fid, title, pending in tickets]}

    # ------------------------------------------------------------------ HTTP
    async def _args(self, request: web.Request) -> dict[str, Any]:
        # Which TCP connection the call came on (the client's address and port): a process that shares
        # one session reuses a few; one that opens a session per call makes one per call.
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.connections.add(tuple(peer) if peer else None)
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
        name = request.match_info["name"]
        self._responses[name] = self._responses.get(name, 0) + 1
        issued = self.response_urls.get(name)
        if issued is not None and self.now() - issued.issued > RESPONSE_URL_TTL_S:
            self.refused.append(("response", "expired_url"))
            return web.Response(status=404, text="expired_url")
        if self._responses[name] > RESPONSE_URL_USES:
            self.refused.append(("response", "used_url"))
            return web.Response(status=404, text="used_url")
        if isinstance(args.get("blocks"), str):
            args["blocks"] = json.loads(args["blocks"])
        if block_problems(args.get("blocks", []), MAX_MESSAGE_BLOCKS):
            self.refused.append(("response", "invalid_blocks"))
            return web.Response(status=400, text="invalid_blocks")
        args["_name"] = name
        call = Call("response", args)
        if issued is not None and issued.user is not None:
            args["_user"] = issued.user
            self._ephemeral(issued, args, call.at)
        self.calls.append(call)
        return web.Response(text="ok")

    def _ephemeral(self, url: ResponseUrl, args: dict[str, Any], at: float) -> None:
        """A private message posted through ``url``: it replaces the message the click came from
        (``replace_original`` on a click in a private message), or is a new one.
        """
        assert url.user is not None
        if args.get("response_type") == "in_channel" or args.get("delete_original"):
            return
        mine = self.ephemeral.setdefault(url.user, [])
        text, blocks = str(args.get("text") or ""), list(args.get("blocks") or [])
        replace = args.get("replace_original") in (True, "true")
        if replace and url.message_ts is not None:
            for msg in mine:
                if msg.ts == url.message_ts:
                    msg.text, msg.blocks, msg.at = text, blocks, at
                    return
        mine.append(Ephemeral(f"1700000500.{next(self._ts):06d}", text, blocks, at))

    # ------------------------------------------------------------------ OAuth v2
    async def _authorize(self, request: web.Request) -> web.Response:
        """Slack's authorization page, approved at once by the admin of ``installing``."""
        q = request.query
        if q.get("client_id") != self.client_id:
            return web.Response(status=400, text="invalid_client_id")
        scopes = {s for s in q.get("scope", "").split(",") if s}
        if not scopes:
            return web.Response(status=400, text="invalid_scope: the app asks for no bot scope")
        redirect = q.get("redirect_uri")
        if redirect is not None and redirect not in self.redirect_uris:
            return web.Response(status=400, text="bad_redirect_uri")
        target = redirect or (self.redirect_uris[0] if self.redirect_uris else None)
        if target is None:
            return web.Response(status=400, text="no_redirect_uri: the app lists no Redirect URL")
        code = f"code-{secrets.token_hex(8)}"
        self.codes[code] = Grant(
            self.installing, redirect, scopes, time.monotonic() + CODE_TTL_S, self.installing_org_wide
        )
        query = urllib.parse.urlencode({"code": code, "state": q.get("state", "")})
        raise web.HTTPFound(f"{target}?{query}")

    def _client_auth(self, request: web.Request, args: dict[str, Any]) -> tuple[str, str]:
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            cid, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            return cid, secret
        return str(args.get("client_id", "")), str(args.get("client_secret", ""))

    def _oauth_access(self, request: web.Request, args: dict[str, Any]) -> dict[str, Any]:
        cid, secret = self._client_auth(request, args)
        if cid != self.client_id:
            raise SlackRefusal("invalid_client_id")
        if secret != self.client_secret:
            raise SlackRefusal("bad_client_secret")
        if args.get("grant_type") == "refresh_token":
            return self._refresh(args)
        grant = self.codes.pop(str(args.get("code")), None)
        if grant is None or time.monotonic() > grant.expires:
            raise SlackRefusal("invalid_code")
        if args.get("redirect_uri") != grant.redirect_uri:
            raise SlackRefusal("bad_redirect_uri")
        team = self.teams[grant.team]
        enterprise = {"id": team.enterprise, "name": f"Org {team.enterprise}"} if team.enterprise else None
        token = f"xoxb-{grant.team}-{secrets.token_hex(6)}"
        info = Token(grant.team, set(grant.scopes), org_wide=grant.org_wide, enterprise=team.enterprise)
        self.tokens[token] = info
        return self._rotating(
            info,
            {
                "access_token": token,
                "token_type": "bot",
                "scope": ",".join(sorted(grant.scopes)),
                "bot_user_id": f"UBOT{grant.team}",
                "app_id": "A1",
                "team": None if grant.org_wide else {"id": grant.team, "name": team.name},
                "enterprise": enterprise,
                "is_enterprise_install": grant.org_wide,
                "authed_user": {"id": "UINSTALLER"},
            },
        )

    def _refresh(self, args: dict[str, Any]) -> dict[str, Any]:
        """oauth.v2.access with grant_type=refresh_token: a new access token (and refresh token; the
        used one is spent) for the workspace the refresh token belongs to.
        """
        old = self.refresh_tokens.pop(str(args.get("refresh_token")), None)
        if old is None or old.revoked:
            raise SlackRefusal("invalid_refresh_token")
        token = f"xoxe.xoxb-1-{old.team}-{secrets.token_hex(6)}"
        info = Token(old.team, old.scopes, org_wide=old.org_wide, enterprise=old.enterprise)
        self.tokens[token] = info
        body = {"access_token": token, "token_type": "bot", "scope": ",".join(sorted(old.scopes or ()))}
        return self._rotating(info, body)

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        if method == "oauth.v2.access":  # authenticated by the app's client id and secret, not a token
            try:
                body = self._oauth_access(request, args)
            except SlackRefusal as no:
                self.refused.append((method, no.error))
                return web.json_response({"ok": False, "error": no.error})
            team = self.tokens[body["access_token"]]
            grant = str(args.get("grant_type") or "authorization_code")
            self.calls.append(Call(method, {"code": args.get("code"), "_team": team.team, "_grant": grant}))
            return web.json_response({"ok": True, **body})
        header = request.headers.get("Authorization", "")
        token = self.tokens.get(header.removeprefix("Bearer ")) if header.startswith("Bearer ") else None
        if token is not None and token.expires_at is not None and self.now() >= token.expires_at:
            self.refused.append((method, "token_expired"))
            return web.json_response({"ok": False, "error": "token_expired"})
        if token is None or token.revoked:
            error = "invalid_auth" if token is None else "token_revoked"
            self.refused.append((method, error))
            return web.json_response({"ok": False, "error": error})
        args["_token"] = header.removeprefix("Bearer ")
        args["_team"] = token.enterprise if token.org_wide else token.team
        if self.stall.get(method):
            await asyncio.sleep(self.stall[method])
        try:
            body = self._answer(method, args)
        except SlackRefusal as no:
            self.refused.append((method, no.error))
            out: dict[str, Any] = {"ok": False, "error": no.error, **no.extra}
            if no.messages:
                out["response_metadata"] = {"messages": no.messages}
            headers = {"Retry-After": str(no.retry_after)} if no.retry_after else None
            return web.json_response(out, status=no.status, headers=headers)
        scopes = self._scopes(args)
        args.pop("_token", None)  # recorded calls name the workspace (_team), never the token
        if method != "auth.test":
            if method in ("views.open", "views.update", "views.push"):
                args["_view_id"] = body["view"]["id"]  # recorded, so a test knows which modal it is
                args["_user"] = self.view_owner.get(str(body["view"]["id"]))
            peer = request.transport.get_extra_info("peername") if request.transport else None
            self.calls.append(Call(method, args, peer=tuple(peer) if peer else None))
        if method in self.hold_after:
            held = asyncio.ensure_future(asyncio.sleep(self.hold_after.pop(method)))
            self._held.add(held)
            await asyncio.wait({held})  # until its time, or stop() lets it go
            self._held.discard(held)
        headers = {"X-OAuth-Scopes": ",".join(sorted(scopes))} if method == "auth.test" else None
        return web.json_response({"ok": True, **body}, headers=headers)

    def of(self, method: str) -> list[Call]:
        """Recorded (accepted) calls of one method."""
        return [c for c in self.calls if c.method == method]

    async def wait_for(self, method: str, count: int = 1, timeout: float = 10.0) -> list[Call]:
        """Wait until ``count`` calls of ``method`` were recorded (listeners run after the ack)."""
        deadline = time.monotonic() + timeout
        while len(self.of(method)) < count:
            if time.monotonic() > deadline:
                seen = [c.method for c in self.calls]
                raise AssertionError(
                    f"expected {count} {method} call(s); recorded: {seen}; refused: {self.refused}"
                )
            await asyncio.sleep(0.01)
        return self.of(method)


@contextlib.contextmanager
def running_in_thread(api: FakeSlackApi) -> Iterator[FakeSlackApi]:
    """Serve ``api`` from its own event loop in a thread (for tests that run ``rankzero serve`` as a
    process and stay synchronous themselves).
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(api.start(), loop).result(10)
    try:
        yield api
    finally:
        asyncio.run_coroutine_threadsafe(api.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def sign(body: str, timestamp: int | None = None, secret: str = SECRET) -> dict[str, str]:
    """Slack's request signing headers: v0=HMAC-SHA256(secret, 'v0:{ts}:{body}')."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


#: How long Slack waits for the app's answer to an interaction or command before showing an error.
ACK_TIMEOUT_S = 3.0


@dataclass
class SlackSender:
    """Sends signed requests to the app's /slack/events like Slack does, and plays Slack's part with the
    answer: the trigger_id it sends is issued in the fake, a view_submission's ``response_action`` changes
    the shown views (``update``/``push``/``clear``, empty: close) after checking the view like views.open, and
    an answer later than 3 s is recorded in ``late`` (Slack shows the user an error then).
    """

    url: str
    api: FakeSlackApi
    http: httpx.AsyncClient
    late: list[str] = field(default_factory=list)
    #: The workspace the requests come from, and its Enterprise Grid org (if any); ``org_wide``: the app
    #: is installed for the whole org (Slack then says ``is_enterprise_install``).
    team: str = TEAM
    enterprise: str | None = None
    org_wide: bool = False
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
        started = time.monotonic()
        resp = await self.http.post(self.url, content=body.encode(), headers=hdrs)
        took = time.monotonic() - started
        if took > ACK_TIMEOUT_S:
            self.late.append(f"{body[:80]}... answered after {took:.1f} s")
        return resp

    def _user(self, user: str) -> None:
        self.api.users.setdefault(user, {})

    def _enterprise(self) -> dict[str, Any]:
        return {"enterprise_id": self.enterprise} if self.enterprise else {}

    async def command(self, user: str, text: str, channel: str = "C1", **kw: Any) -> httpx.Response:
        """A /rankzero slash command."""
        n = next(self._n)
        self._user(user)
        trigger = f"trigger-cmd-{n}"
        self.api.issue_trigger(trigger, user)
        form = {
            "token": "unused",
            "team_id": self.team,
            "team_domain": "test",
            **({"enterprise_id": self.enterprise} if self.enterprise else {}),
            "is_enterprise_install": "true" if self.org_wide else "false",
            "channel_id": channel,
            "channel_name": "general",
            "user_id": user,
            "user_name": user.lower(),
            "command": "/rankzero",
            "text": text,
            "response_url": self.api.response_url(f"cmd{n}", user),
            "trigger_id": trigger,
        }
        return await self.post(urllib.parse.urlencode(form), "application/x-www-form-urlencoded", **kw)

    async def interactive(self, payload: dict[str, Any], **kw: Any) -> httpx.Response:
        """An interactivity payload (block_actions, view_submission, view_closed)."""
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        resp = await self.post(body, "application/x-www-form-urlencoded", **kw)
        view_id = str((payload.get("view") or {}).get("id", ""))
        if payload.get("type") == "view_closed":
            self.api.close(view_id)
        elif payload.get("type") == "view_submission" and resp.status_code == 200:
            self._submitted(view_id, resp)
        return resp

    def _submitted(self, view_id: str, resp: httpx.Response) -> None:
        """What Slack does with the answer to a view_submission."""
        answer = resp.json() if resp.content.strip() else {}
        action = answer.get("response_action")
        if action in ("update", "push"):
            problems = view_problems(answer.get("view"))
            if problems:
                self.api.refused.append(("view_submission", "invalid_arguments"))
                raise AssertionError(f"Slack refuses the {action} view: {problems}")
            if action == "update":
                self.api.show(view_id, answer["view"], self.api.views[view_id].parent)
            else:
                self.api.show(f"V{next(self.api._ts):04d}", answer["view"], view_id)
        elif action == "errors":
            shown = self.api.views.get(view_id)
            if shown is None:
                raise AssertionError(f"Slack refuses response_action errors for an unknown view {view_id}")
            inputs = {b.get("block_id") for b in shown.view.get("blocks", []) if b.get("type") == "input"}
            unknown = set(answer.get("errors") or {}) - inputs
            if shown.view.get("blocks") and unknown:
                raise AssertionError(f"Slack refuses errors on blocks that are not inputs: {unknown}")
        elif action == "clear":
            self.api.close(view_id, stack=True)
        elif action is None:
            self.api.close(view_id)

    async def click(
        self,
        user: str,
        action_id: str,
        *,
        view_id: str | None = None,
        action_ts: str | None = None,
        channel: str = "C1",
        message_ts: str | None = None,
        **kw: Any,
    ) -> httpx.Response:
        """A button click: on the channel post (no view), on the user's private message ``message_ts``
        (see :attr:`FakeSlackApi.ephemeral`), or inside a modal (``view_id``).
        """
        n = next(self._n)
        self._user(user)
        trigger = f"trigger-{n}"
        self.api.issue_trigger(trigger, user)
        payload: dict[str, Any] = {
            "type": "block_actions",
            "team": {"id": self.team, "domain": "test", **self._enterprise()},
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": self.team},
            "is_enterprise_install": self.org_wide,
            **({"enterprise": {"id": self.enterprise, "name": "Org"}} if self.enterprise else {}),
            "api_app_id": "A1",
            "token": "unused",
            "trigger_id": trigger,
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "b",
                    "text": {"type": "plain_text", "text": "x"},
                    # When the user clicked (Slack sends the click's epoch time).
                    "action_ts": action_ts or f"{time.time():.6f}",
                }
            ],
        }
        if view_id is None:
            payload["container"] = {
                "type": "message",
                "channel_id": channel,
                "message_ts": message_ts or "1700000000.000001",
                "is_ephemeral": message_ts is not None,
            }
            payload["channel"] = {"id": channel, "name": "general"}
            payload["response_url"] = self.api.response_url(f"act{n}", user, message_ts)
        else:
            shown = self.api.views.get(view_id)
            payload["container"] = {"type": "view", "view_id": view_id}
            payload["view"] = {
                "id": view_id,
                "type": "modal",
                "callback_id": shown.view.get("callback_id", "rz_play") if shown else "rz_play",
                "hash": shown.hash if shown else "h",
                "private_metadata": shown.view.get("private_metadata", "") if shown else "",
            }
        return await self.interactive(payload, **kw)

    async def submit(
        self,
        user: str,
        callback_id: str,
        values: dict[str, Any],
        *,
        metadata: str | None = None,
        view_id: str | None = None,
        **kw: Any,
    ) -> httpx.Response:
        """A view_submission of a modal's inputs (``values``: block id -> value, ('select', value) or
        ('checkboxes', [values])). The modal is ``view_id``, else the latest shown one with
        ``callback_id``, else one Slack shows now (a form opened earlier); ``metadata`` is its
        private_metadata (default: the shown view's).
        """
        self._user(user)
        if view_id is None:
            view_id = next(
                (v for v, s in reversed(self.api.views.items()) if s.view.get("callback_id") == callback_id),
                None,
            )
        if view_id is None or view_id not in self.api.views:
            view_id = view_id or f"VQ{next(self._n)}"
            self.api.show(view_id, {"type": "modal", "callback_id": callback_id})
        shown = self.api.views[view_id]
        state: dict[str, Any] = {}
        for block_id, value in values.items():
            if isinstance(value, tuple) and value[0] == "checkboxes":
                chosen = [{"value": v} for v in value[1]]
                state[block_id] = {"value": {"type": "checkboxes", "selected_options": chosen}}
            elif isinstance(value, tuple):
                state[block_id] = {"value": {"type": "static_select", "selected_option": {"value": value[1]}}}
            else:
                state[block_id] = {"value": {"type": "plain_text_input", "value": value}}
        trigger = f"trigger-submit-{next(self._n)}"
        self.api.issue_trigger(trigger)
        payload = {
            "type": "view_submission",
            "team": {"id": self.team, "domain": "test", **self._enterprise()},
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": self.team},
            "is_enterprise_install": self.org_wide,
            **({"enterprise": {"id": self.enterprise, "name": "Org"}} if self.enterprise else {}),
            "api_app_id": "A1",
            "token": "unused",
            "trigger_id": trigger,
            "view": {
                "id": view_id,
                "type": "modal",
                "callback_id": callback_id,
                "hash": shown.hash,
                "private_metadata": shown.view.get("private_metadata", "") if metadata is None else metadata,
                "state": {"values": state},
            },
        }
        return await self.interactive(payload, **kw)

    async def event(self, event: dict[str, Any], event_id: str, **kw: Any) -> httpx.Response:
        """An Events API callback."""
        if "user" in event:
            self._user(str(event["user"]))
        body = json.dumps(
            {
                "token": "unused",
                "team_id": self.team,
                **({"enterprise_id": self.enterprise} if self.enterprise else {}),
                "api_app_id": "A1",
                "type": "event_callback",
                "event_id": event_id,
                "event_time": int(time.time()),
                "event": event,
                "authorizations": [
                    {
                        "enterprise_id": self.enterprise,
                        "team_id": None if self.org_wide else self.team,
                        "user_id": "UBOT",
                        "is_bot": True,
                        "is_enterprise_install": self.org_wide,
                    }
                ],
            }
        )
        return await self.post(body, "application/json", **kw)
