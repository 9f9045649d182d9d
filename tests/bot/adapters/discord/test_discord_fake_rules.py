"""The strict Discord fake refuses what the real API refuses, with Discord's own error bodies.

Each rule is shown twice where it matters: through discord.py's real client (the error it raises is what
the adapter sees) and, for bodies discord.py would refuse before sending, as raw HTTP.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest

from tests.discord_fake import (
    ALL_PERMISSIONS,
    APP_ID,
    ATTACH_FILES,
    CHANNEL_ID,
    CREATE_PUBLIC_THREADS,
    EMBED_LINKS,
    READ_MESSAGE_HISTORY,
    SEND_MESSAGES,
    VIEW_CHANNEL,
    FakeDiscord,
)

MESSAGES = f"/channels/{CHANNEL_ID}/messages"


@pytest.fixture
async def client(fake: FakeDiscord) -> AsyncIterator[discord.Client]:
    bot = discord.Client(intents=discord.Intents(guilds=True))
    await bot.login("test-token")
    yield bot
    await bot.close()


async def raw(fake: FakeDiscord, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
    """One request to the fake as it would reach Discord; (status, JSON body, headers)."""
    async with aiohttp.ClientSession() as http, http.request(method, fake.base + path, json=body) as resp:
        return resp.status, await resp.json(), resp.headers


def _codes(errors: dict[str, Any], path: str) -> list[str]:
    node = errors
    for part in path.split("."):
        node = node[part]
    return [e["code"] for e in node["_errors"]]


def _button(custom_id: str, label: str = "B") -> dict[str, Any]:
    return {"type": 2, "style": 1, "label": label, "custom_id": custom_id}


# ---------------------------------------------------------------------- message limits (50035)
async def test_content_over_2000_is_invalid_form_body(fake: FakeDiscord, client: discord.Client) -> None:
    channel = client.get_partial_messageable(CHANNEL_ID)
    await channel.send("x" * 2000)
    with pytest.raises(discord.HTTPException) as info:
        await channel.send("x" * 2001)
    assert info.value.status == 400 and info.value.code == 50035
    assert "In content: Must be 2000 or fewer in length." in info.value.text
    fake.take_rejections()


@pytest.mark.parametrize(
    ("embed", "where", "code"),
    [
        ({"title": "t" * 257}, "embeds.0.title", "BASE_TYPE_MAX_LENGTH"),
        ({"description": "d" * 4097}, "embeds.0.description", "BASE_TYPE_MAX_LENGTH"),
        ({"fields": [{"name": "n", "value": "v"}] * 26}, "embeds.0.fields", "BASE_TYPE_MAX_LENGTH"),
        ({"fields": [{"name": "n" * 257, "value": "v"}]}, "embeds.0.fields.0.name", "BASE_TYPE_MAX_LENGTH"),
        ({"fields": [{"name": "n", "value": "v" * 1025}]}, "embeds.0.fields.0.value", "BASE_TYPE_MAX_LENGTH"),
        ({"fields": [{"name": "n", "value": ""}]}, "embeds.0.fields.0.value", "BASE_TYPE_REQUIRED"),
        ({"footer": {"text": "f" * 2049}}, "embeds.0.footer.text", "BASE_TYPE_MAX_LENGTH"),
        (
            {"description": "d" * 4000, "fields": [{"name": "n", "value": "v" * 1000}] * 2},
            "embeds",
            "MAX_EMBED_SIZE_EXCEEDED",
        ),
    ],
)
async def test_embed_limits(fake: FakeDiscord, embed: dict[str, Any], where: str, code: str) -> None:
    status, body, _ = await raw(fake, "POST", MESSAGES, {"embeds": [embed]})
    assert status == 400 and body["code"] == 50035 and body["message"] == "Invalid Form Body"
    assert code in _codes(body["errors"], where)
    fake.take_rejections()


async def test_embed_limits_through_discord_py(fake: FakeDiscord, client: discord.Client) -> None:
    embed = discord.Embed(title="t", description="d" * 4000)
    for _ in range(3):
        embed.add_field(name="n", value="v" * 1000)
    with pytest.raises(discord.HTTPException) as info:
        await client.get_partial_messageable(CHANNEL_ID).send(embed=embed)
    assert info.value.code == 50035 and "Embed size exceeds maximum size of 6000" in info.value.text
    fake.take_rejections()


async def test_six_thousand_counts_over_all_embeds_and_ten_embeds_at_most(fake: FakeDiscord) -> None:
    two = [{"description": "d" * 3500}, {"description": "d" * 3500}]
    status, body, _ = await raw(fake, "POST", MESSAGES, {"embeds": two})
    assert status == 400 and "MAX_EMBED_SIZE_EXCEEDED" in _codes(body["errors"], "embeds")
    status, body, _ = await raw(fake, "POST", MESSAGES, {"embeds": [{"title": "t"}] * 11})
    assert status == 400 and "BASE_TYPE_MAX_LENGTH" in _codes(body["errors"], "embeds")
    assert (await raw(fake, "POST", MESSAGES, {"embeds": [{"title": "t"}] * 10}))[0] == 200
    fake.take_rejections()


async def test_empty_message_is_refused(fake: FakeDiscord) -> None:
    status, body, _ = await raw(fake, "POST", MESSAGES, {"content": ""})
    assert (status, body) == (400, {"message": "Cannot send an empty message", "code": 50006})
    fake.take_rejections()


# ---------------------------------------------------------------------- components
@pytest.mark.parametrize(
    ("components", "where", "code"),
    [
        (
            [{"type": 1, "components": [_button(f"b{i}")]} for i in range(6)],
            "components",
            "BASE_TYPE_MAX_LENGTH",
        ),
        (
            [{"type": 1, "components": [_button(f"b{i}") for i in range(6)]}],
            "components.0.components",
            "BASE_TYPE_MAX_LENGTH",
        ),
        (
            [{"type": 1, "components": [_button("c" * 101)]}],
            "components.0.components.0.custom_id",
            "BASE_TYPE_BAD_LENGTH",
        ),
        (
            [{"type": 1, "components": [_button("ok", "l" * 81)]}],
            "components.0.components.0.label",
            "BASE_TYPE_MAX_LENGTH",
        ),
        (
            [{"type": 1, "components": [{"type": 2, "style": 1, "custom_id": "no-label"}]}],
            "components.0.components.0.label",
            "BASE_TYPE_REQUIRED",
        ),
        (
            [{"type": 1, "components": [{"type": 2, "style": 5, "label": "link"}]}],
            "components.0.components.0.url",
            "BASE_TYPE_REQUIRED",
        ),
        (
            [
                {
                    "type": 1,
                    "components": [
                        _button("b"),
                        {"type": 3, "custom_id": "s", "options": [{"label": "o", "value": "v"}]},
                    ],
                }
            ],
            "components.0.components",
            "COMPONENT_LAYOUT_WIDTH_EXCEEDED",
        ),
        (
            [{"type": 1, "components": [_button("same"), _button("same")]}],
            "components.0.components.1.custom_id",
            "COMPONENT_CUSTOM_ID_DUPLICATED",
        ),
        (
            [
                {
                    "type": 1,
                    "components": [
                        {
                            "type": 3,
                            "custom_id": "pick",
                            "options": [{"label": f"o{i}", "value": f"v{i}"} for i in range(26)],
                        }
                    ],
                }
            ],
            "components.0.components.0.options",
            "BASE_TYPE_MAX_LENGTH",
        ),
    ],
)
async def test_component_limits(
    fake: FakeDiscord, components: list[dict[str, Any]], where: str, code: str
) -> None:
    status, body, _ = await raw(fake, "POST", MESSAGES, {"content": "x", "components": components})
    assert status == 400 and body["code"] == 50035
    assert code in _codes(body["errors"], where)
    fake.take_rejections()


# ---------------------------------------------------------------------- interactions
def _interaction(fake: FakeDiscord, token: str = "tok-x") -> int:
    iid = fake.next_id()
    fake.register_interaction(iid, token)
    return iid


def _text_input(**changes: Any) -> dict[str, Any]:
    return {"type": 4, "custom_id": "t", "style": 1, "label": "L", **changes}


def _modal(**changes: Any) -> dict[str, Any]:
    text = {"type": 4, "custom_id": "t", "style": 1, "label": "Label"}
    data = {"custom_id": "m", "title": "Title", "components": [{"type": 1, "components": [text]}]}
    data.update(changes)
    return {"type": 9, "data": data}


@pytest.mark.parametrize(
    ("modal", "where"),
    [
        (_modal(title="t" * 46), "data.title"),
        (
            _modal(
                components=[
                    {"type": 1, "components": [{"type": 4, "custom_id": f"t{i}", "style": 1, "label": "L"}]}
                    for i in range(6)
                ]
            ),
            "data.components",
        ),
        (
            _modal(components=[{"type": 1, "components": [_text_input(max_length=4001)]}]),
            "data.components.0.components.0.max_length",
        ),
        (
            _modal(components=[{"type": 1, "components": [_text_input(placeholder="p" * 101)]}]),
            "data.components.0.components.0.placeholder",
        ),
        (
            _modal(
                components=[
                    {"type": 1, "components": [{"type": 4, "custom_id": "t", "style": 1, "label": "L" * 46}]}
                ]
            ),
            "data.components.0.components.0.label",
        ),
        (
            _modal(
                components=[
                    {
                        "type": 1,
                        "components": [
                            {"type": 4, "custom_id": "t", "style": 2, "label": "L", "value": "v" * 4001}
                        ],
                    }
                ]
            ),
            "data.components.0.components.0.value",
        ),
    ],
)
async def test_modal_limits(fake: FakeDiscord, modal: dict[str, Any], where: str) -> None:
    iid = _interaction(fake)
    status, body, _ = await raw(fake, "POST", f"/interactions/{iid}/tok-x/callback", modal)
    assert status == 400 and body["code"] == 50035 and _codes(body["errors"], where)
    # a refused response does not acknowledge: a valid one still can
    assert (await raw(fake, "POST", f"/interactions/{iid}/tok-x/callback", _modal()))[0] == 200
    fake.take_rejections()


async def test_an_interaction_is_answered_once(fake: FakeDiscord) -> None:
    iid = _interaction(fake)
    path = f"/interactions/{iid}/tok-x/callback"
    assert (await raw(fake, "POST", path, {"type": 5, "data": {"flags": 64}}))[0] == 200
    status, body, _ = await raw(fake, "POST", path, {"type": 4, "data": {"content": "again"}})
    assert (status, body) == (400, {"message": "Interaction has already been acknowledged.", "code": 40060})
    fake.take_rejections()


async def test_first_response_after_three_seconds_is_unknown_interaction(fake: FakeDiscord) -> None:
    iid = _interaction(fake)
    fake.advance(3.5)
    status, body, _ = await raw(fake, "POST", f"/interactions/{iid}/tok-x/callback", {"type": 5})
    assert (status, body) == (404, {"message": "Unknown interaction", "code": 10062})
    fake.take_rejections()


async def test_token_webhooks_need_the_first_response_and_expire_after_15_minutes(fake: FakeDiscord) -> None:
    iid = _interaction(fake)
    followup = f"/webhooks/{APP_ID}/tok-x"
    status, body, _ = await raw(fake, "POST", followup, {"content": "too early"})
    assert (status, body["code"]) == (404, 10015)  # no response yet: Unknown Webhook
    await raw(fake, "POST", f"/interactions/{iid}/tok-x/callback", {"type": 5})
    assert (await raw(fake, "POST", followup, {"content": "ok"}))[0] == 200
    fake.advance(14 * 60)
    assert (await raw(fake, "PATCH", followup + "/messages/@original", {"content": "still ok"}))[0] == 200
    fake.advance(61)
    status, body, _ = await raw(fake, "POST", followup, {"content": "late"})
    assert (status, body) == (401, {"message": "Invalid Webhook Token", "code": 50027})
    status, body, _ = await raw(fake, "PATCH", followup + "/messages/@original", {"content": "late"})
    assert (status, body["code"]) == (401, 50027)
    fake.take_rejections()


# ---------------------------------------------------------------------- permissions
async def test_channel_permissions(fake: FakeDiscord, client: discord.Client) -> None:
    channel = client.get_partial_messageable(CHANNEL_ID)
    fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~VIEW_CHANNEL)
    with pytest.raises(discord.Forbidden) as info:
        await channel.send("hello")
    assert (info.value.status, info.value.code, info.value.text) == (403, 50001, "Missing Access")
    fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~SEND_MESSAGES)
    with pytest.raises(discord.Forbidden) as info:
        await channel.send("hello")
    assert (info.value.code, info.value.text) == (50013, "Missing Permissions")
    fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~EMBED_LINKS)
    await channel.send("plain text needs no Embed Links")
    with pytest.raises(discord.Forbidden) as info:
        await channel.send(embed=discord.Embed(title="an embed does"))
    assert info.value.code == 50013
    fake.take_rejections()


async def test_a_message_with_files_needs_attach_files(fake: FakeDiscord, client: discord.Client) -> None:
    """Discord's 403 50013 for a file without Attach Files; the same message without it goes."""
    channel = client.get_partial_messageable(CHANNEL_ID)
    fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~ATTACH_FILES)
    with pytest.raises(discord.Forbidden) as info:
        await channel.send("a chart", file=discord.File(io.BytesIO(b"png"), filename="c.png"))
    assert (info.value.status, info.value.code, info.value.text) == (403, 50013, "Missing Permissions")
    await channel.send("text needs no Attach Files")
    fake.take_rejections()
    fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS)
    await channel.send("a chart", file=discord.File(io.BytesIO(b"png"), filename="c.png"))


async def test_replies_need_read_message_history_and_threads_create_public_threads(fake: FakeDiscord) -> None:
    fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~READ_MESSAGE_HISTORY & ~CREATE_PUBLIC_THREADS)
    reply = {"content": "x", "message_reference": {"message_id": "1", "channel_id": str(CHANNEL_ID)}}
    status, body, _ = await raw(fake, "POST", MESSAGES, reply)
    assert (status, body["code"]) == (403, 160002)
    assert body["message"] == "Cannot reply without permission to read message history"
    assert (await raw(fake, "POST", MESSAGES, {"content": "not a reply"}))[0] == 200
    status, body, _ = await raw(fake, "POST", f"/channels/{CHANNEL_ID}/threads", {"name": "t", "type": 11})
    assert (status, body["code"]) == (403, 50013)
    fake.take_rejections()


async def test_editing_an_unknown_message_is_unknown_message(fake: FakeDiscord) -> None:
    status, body, _ = await raw(fake, "PATCH", f"{MESSAGES}/123", {"content": "x"})
    assert (status, body) == (404, {"message": "Unknown Message", "code": 10008})
    fake.take_rejections()


# ---------------------------------------------------------------------- rate limits
async def test_429_carries_retry_after_and_headers_and_discord_py_retries(
    fake: FakeDiscord, client: discord.Client
) -> None:
    fake.rate_limit_next("POST", MESSAGES, retry_after=0.2)
    message = await client.get_partial_messageable(CHANNEL_ID).send("after the limit")
    assert message.content == "after the limit"
    [(status, _, _, body)] = fake.take_rejections()
    assert status == 429 and body == {
        "message": "You are being rate limited.",
        "retry_after": 0.2,
        "global": False,
    }
    assert len(fake.calls("POST", MESSAGES)) == 2  # refused, then retried after retry_after


async def test_the_channel_bucket_answers_429_with_real_headers(fake: FakeDiscord) -> None:
    for _ in range(5):
        status, _, headers = await raw(fake, "POST", MESSAGES, {"content": "x"})
        assert status == 200 and headers["X-RateLimit-Limit"] == "5"
    assert headers["X-RateLimit-Remaining"] == "0"
    status, body, headers = await raw(fake, "POST", MESSAGES, {"content": "x"})
    assert status == 429 and 0 < body["retry_after"] <= 5 and body["global"] is False
    for name in ("Retry-After", "X-RateLimit-Reset-After", "X-RateLimit-Bucket", "X-RateLimit-Scope"):
        assert name in headers
    fake.advance(5)
    assert (await raw(fake, "POST", MESSAGES, {"content": "x"}))[0] == 200
    fake.take_rejections()
