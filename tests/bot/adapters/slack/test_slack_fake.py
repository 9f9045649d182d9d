"""The strict Slack fake refuses what the real Web API refuses: one test per documented rule, through a
real slack_sdk AsyncWebClient over HTTP (what the adapter uses).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from tests.slack_fake import Channel, FakeSlackApi


@pytest.fixture
async def api() -> AsyncIterator[FakeSlackApi]:
    fake = FakeSlackApi(users={"U1": {}})
    await fake.start()
    yield fake
    await fake.stop()


def client(api: FakeSlackApi, **kw: Any) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=api.base_url, **kw)


def section(text: str = "hi", **kw: Any) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}, **kw}


def button(text: str = "Go", action_id: str = "a", **kw: Any) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": text}, "action_id": action_id, **kw}


def modal(blocks: list[dict[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    view: dict[str, Any] = {"type": "modal", "title": {"type": "plain_text", "text": "RankZero"}}
    view["blocks"] = [section()] if blocks is None else blocks
    return {**view, **kw}


def select(n: int, text: str = "opt") -> dict[str, Any]:
    options = [{"text": {"type": "plain_text", "text": text}, "value": str(i)} for i in range(n)]
    element = {"type": "static_select", "action_id": "s", "options": options}
    return {
        "type": "input",
        "block_id": "k",
        "label": {"type": "plain_text", "text": "Kind"},
        "element": element,
    }


def plain(text: str) -> dict[str, str]:
    return {"type": "plain_text", "text": text}


# Each rule: a name, blocks at the limit (accepted) and just past it (refused), as chat.postMessage sends.
MESSAGE_RULES: list[tuple[str, Callable[[int], list[dict[str, Any]]], int]] = [
    ("50 blocks a message", lambda n: [section(str(i)) for i in range(n)], 50),
    ("section text 3000", lambda n: [section("x" * n)], 3000),
    ("header 150", lambda n: [{"type": "header", "text": plain("h" * n)}], 150),
    ("button text 75", lambda n: [{"type": "actions", "elements": [button("b" * n)]}], 75),
    ("action_id 255", lambda n: [{"type": "actions", "elements": [button(action_id="a" * n)]}], 255),
    ("block_id 255", lambda n: [section(block_id="b" * n)], 255),
    (
        "25 elements an actions block",
        lambda n: [{"type": "actions", "elements": [button(action_id=f"a{i}") for i in range(n)]}],
        25,
    ),
    ("10 elements a context block", lambda n: [{"type": "context", "elements": [plain("c")] * n}], 10),
    ("10 fields a section", lambda n: [{"type": "section", "fields": [plain("f")] * n}], 10),
]


@pytest.mark.parametrize(("rule", "make", "limit"), MESSAGE_RULES, ids=[r[0] for r in MESSAGE_RULES])
async def test_message_block_limits_are_invalid_blocks(
    api: FakeSlackApi, rule: str, make: Callable[[int], list[dict[str, Any]]], limit: int
) -> None:
    web = client(api)
    await web.chat_postMessage(channel="C1", blocks=make(limit), text="ok")
    with pytest.raises(SlackApiError) as refused:
        await web.chat_postMessage(channel="C9", blocks=make(limit + 1), text="too much")
    assert refused.value.response["error"] == "invalid_blocks"
    assert "json-pointer:/blocks" in str(refused.value.response["response_metadata"]["messages"])


async def test_duplicate_ids_empty_text_and_long_messages_are_refused(api: FakeSlackApi) -> None:
    api.limits["chat.postMessage"] = (100, 1.0)  # this test is about content, not the rate
    web = client(api)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"blocks": [section(block_id="x"), section(block_id="x")]}, "invalid_blocks"),
        (
            {"blocks": [{"type": "actions", "elements": [button(action_id="a"), button(action_id="a")]}]},
            "invalid_blocks",
        ),
        ({"blocks": [section("")]}, "invalid_blocks"),
        ({"blocks": [{"type": "header", "text": {"type": "mrkdwn", "text": "*h*"}}]}, "invalid_blocks"),
        ({"text": "t" * 40_001}, "msg_too_long"),
        ({"text": ""}, "no_text"),
    ]
    for kwargs, error in cases:
        with pytest.raises(SlackApiError) as refused:
            await web.chat_postMessage(channel="C1", **kwargs)
        assert refused.value.response["error"] == error, kwargs
    # The same action_id in two different blocks is allowed (unique per containing block).
    two = [{"type": "actions", "elements": [button(action_id="a")]} for _ in range(2)]
    await web.chat_postMessage(channel="C9", blocks=two, text="ok")


VIEW_RULES: list[tuple[str, Callable[[int], dict[str, Any]], int]] = [
    ("100 blocks a view", lambda n: modal([section(str(i)) for i in range(n)]), 100),
    ("title 24", lambda n: modal(title=plain("t" * n)), 24),
    ("submit 24", lambda n: modal(submit=plain("s" * n)), 24),
    ("close 24", lambda n: modal(close=plain("c" * n)), 24),
    ("private_metadata 3000", lambda n: modal(private_metadata="m" * n), 3000),
    ("callback_id 255", lambda n: modal(callback_id="c" * n), 255),
    ("100 options", lambda n: modal([select(n)], submit=plain("Save")), 100),
    ("option text 75", lambda n: modal([select(1, "o" * n)], submit=plain("Save")), 75),
]


@pytest.mark.parametrize(("rule", "make", "limit"), VIEW_RULES, ids=[r[0] for r in VIEW_RULES])
async def test_view_limits_are_refused(
    api: FakeSlackApi, rule: str, make: Callable[[int], dict[str, Any]], limit: int
) -> None:
    web = client(api)
    api.issue_trigger("t1")
    opened = await web.views_open(trigger_id="t1", view=make(limit))
    view_id = opened["view"]["id"]
    await web.views_update(view_id=view_id, view=make(limit))
    with pytest.raises(SlackApiError) as refused:
        await web.views_update(view_id=view_id, view=make(limit + 1))
    assert refused.value.response["error"] == "invalid_arguments"
    assert "json-pointer:/view" in str(refused.value.response["response_metadata"]["messages"])
    api.issue_trigger("t2")
    with pytest.raises(SlackApiError):
        await web.views_open(trigger_id="t2", view=make(limit + 1))


async def test_an_input_needs_a_submit_button(api: FakeSlackApi) -> None:
    api.issue_trigger("t1")
    with pytest.raises(SlackApiError) as refused:
        await client(api).views_open(trigger_id="t1", view=modal([select(2)]))
    assert "submit is required" in str(refused.value.response["response_metadata"])


async def test_a_trigger_expires_after_3_s_and_works_once(api: FakeSlackApi) -> None:
    web = client(api)
    api.issue_trigger("fresh")
    await web.views_open(trigger_id="fresh", view=modal())
    with pytest.raises(SlackApiError) as reused:
        await web.views_open(trigger_id="fresh", view=modal())
    assert reused.value.response["error"] == "exchanged_trigger_id"
    api.triggers["old"] = time.monotonic() - 3.1  # sent 3.1 s ago
    with pytest.raises(SlackApiError) as late:
        await web.views_open(trigger_id="old", view=modal())
    assert late.value.response["error"] == "expired_trigger_id"
    with pytest.raises(SlackApiError) as unknown:
        await web.views_open(trigger_id="never-sent", view=modal())
    assert unknown.value.response["error"] == "expired_trigger_id"


async def test_a_stale_hash_is_a_conflict_and_a_gone_view_not_found(api: FakeSlackApi) -> None:
    web = client(api)
    api.issue_trigger("t")
    opened = await web.views_open(trigger_id="t", view=modal())
    view_id, first = opened["view"]["id"], opened["view"]["hash"]
    updated = await web.views_update(view_id=view_id, hash=first, view=modal([section("2")]))
    with pytest.raises(SlackApiError) as stale:
        await web.views_update(view_id=view_id, hash=first, view=modal([section("3")]))
    assert stale.value.response["error"] == "hash_conflict"
    await web.views_update(view_id=view_id, hash=updated["view"]["hash"], view=modal([section("3")]))
    api.close(view_id)  # the user closed it
    with pytest.raises(SlackApiError) as gone:
        await web.views_update(view_id=view_id, view=modal())
    assert gone.value.response["error"] == "not_found"
    with pytest.raises(SlackApiError) as unknown:
        await web.views_update(external_id="never-pushed", view=modal())
    assert unknown.value.response["error"] == "not_found"


async def test_channels_the_bot_cannot_post_in(api: FakeSlackApi) -> None:
    api.scopes.discard("chat:write.public")
    api.channels["COUT"] = Channel("outside", member=False)
    api.channels["GSECRET"] = Channel("secret", member=False, private=True)
    web = client(api)
    for channel, error in (
        ("COUT", "not_in_channel"),
        ("GSECRET", "channel_not_found"),
        ("CX", "channel_not_found"),
    ):
        with pytest.raises(SlackApiError) as refused:
            await web.chat_postMessage(channel=channel, text="hi")
        assert refused.value.response["error"] == error
    info = await web.conversations_info(channel="COUT")
    assert info["channel"]["is_member"] is False
    with pytest.raises(SlackApiError) as hidden:
        await web.conversations_info(channel="GSECRET")
    assert hidden.value.response["error"] == "channel_not_found"


async def test_unknown_users_and_bad_tokens(api: FakeSlackApi) -> None:
    with pytest.raises(SlackApiError) as unknown:
        await client(api).users_info(user="UNOBODY")
    assert unknown.value.response["error"] == "user_not_found"
    with pytest.raises(SlackApiError) as bad:
        await AsyncWebClient(token="xoxb-revoked", base_url=api.base_url).auth_test()
    assert bad.value.response["error"] == "invalid_auth"


async def test_posting_is_limited_per_channel_with_retry_after(api: FakeSlackApi) -> None:
    api.limits["chat.postMessage"] = (2, 1.0)  # a burst of 2, then one a second
    web = client(api)
    for _ in range(2):
        await web.chat_postMessage(channel="C1", text="burst")
    with pytest.raises(SlackApiError) as limited:
        await web.chat_postMessage(channel="C1", text="one too many")
    assert limited.value.response.status_code == 429
    assert limited.value.response["error"] == "ratelimited"
    assert int(limited.value.response.headers["Retry-After"][0]) >= 1
    await web.chat_postMessage(channel="C9", text="another channel has its own budget")


async def test_views_update_shares_one_workspace_budget(api: FakeSlackApi) -> None:
    api.limits["views.update"] = (3, 0.5)
    web = client(api)
    ids = []
    for t in ("a", "b", "c", "d"):
        api.issue_trigger(t)
        ids.append((await web.views_open(trigger_id=t, view=modal()))["view"]["id"])
    for view_id in ids[:3]:
        await web.views_update(view_id=view_id, view=modal())
    with pytest.raises(SlackApiError) as limited:
        await web.views_update(view_id=ids[3], view=modal())  # another modal, the same budget
    assert limited.value.response.status_code == 429 and api.ratelimited == 1


async def test_the_public_retry_handler_waits_out_a_429(api: FakeSlackApi) -> None:
    api.limits["chat.postMessage"] = (1, 1.0)
    web = client(api, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=3)])
    started = time.monotonic()
    await web.chat_postMessage(channel="C1", text="1")
    await web.chat_postMessage(channel="C1", text="2")  # 429, Retry-After: 1, then accepted
    assert time.monotonic() - started >= 1.0
    assert api.ratelimited == 1 and len(api.of("chat.postMessage")) == 2


async def test_chat_write_public_posts_in_public_channels_only_and_scopes_are_checked(
    api: FakeSlackApi,
) -> None:
    api.channels["COUT"] = Channel("outside", member=False)
    api.channels["GSECRET"] = Channel("secret", member=False, private=True)
    web = client(api)
    await web.chat_postMessage(channel="COUT", text="public: fine with chat:write.public")
    with pytest.raises(SlackApiError):
        await web.chat_postMessage(channel="GSECRET", text="private: never")
    scopes = (await web.auth_test()).headers["X-OAuth-Scopes"]
    assert "chat:write.public" in (scopes[0] if isinstance(scopes, list) else scopes)
    api.scopes.discard("users:read")
    with pytest.raises(SlackApiError) as missing:
        await web.users_info(user="U1")
    assert (
        missing.value.response["error"] == "missing_scope"
        and missing.value.response["needed"] == "users:read"
    )


async def refusal(call: Any) -> str:
    """The error Slack answered a call with (the call must be refused)."""
    with pytest.raises(SlackApiError) as refused:
        await call
    return str(refused.value.response["error"])


async def test_message_metadata_is_kept_and_listed_only_with_include_all_metadata(api: FakeSlackApi) -> None:
    web = client(api)
    mark = {"event_type": "rankzero_post", "event_payload": {"post": "rz1-2.0"}}
    posted = await web.chat_postMessage(channel="C1", text="hi", metadata=mark)
    await web.chat_postMessage(channel="C1", text="reply", thread_ts=posted["ts"])
    plain = await web.conversations_history(channel="C1")
    assert [m["text"] for m in plain["messages"]] == ["hi"]  # replies are not in the channel's history
    assert "metadata" not in plain["messages"][0]
    full = await web.conversations_history(channel="C1", include_all_metadata=True)
    assert full["messages"][0]["metadata"] == mark and full["messages"][0]["bot_id"] == "BBOT"
    thread = await web.conversations_replies(channel="C1", ts=posted["ts"], include_all_metadata=True)
    assert [m["text"] for m in thread["messages"]] == ["hi", "reply"]
    assert await refusal(web.conversations_replies(channel="C1", ts="1.000001")) == "thread_not_found"


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"event_type": "bad type!", "event_payload": {}}, "invalid_metadata_format"),
        ({"event_type": "ok"}, "invalid_metadata_format"),
        ({"event_type": "ok", "event_payload": "text"}, "invalid_metadata_format"),
        ({"event_type": "ok", "event_payload": {}, "extra": 1}, "invalid_metadata_format"),
        ({"event_type": "ok", "event_payload": {"x": "y" * 8_000}}, "metadata_too_large"),
    ],
)
async def test_malformed_or_large_metadata_is_refused(
    api: FakeSlackApi, metadata: dict[str, Any], error: str
) -> None:
    assert await refusal(client(api).chat_postMessage(channel="C1", text="hi", metadata=metadata)) == error
    assert api.posts_in("C1") == []


async def test_history_pages_by_cursor_within_its_limit(api: FakeSlackApi) -> None:
    web = client(api)
    api.limits.pop("chat.postMessage", None)  # five quick posts: this test is about history
    for i in range(5):
        await web.chat_postMessage(channel="C1", text=f"m{i}")
    first = await web.conversations_history(channel="C1", limit=2)
    assert [m["text"] for m in first["messages"]] == ["m4", "m3"] and first["has_more"] is True
    cursor = first["response_metadata"]["next_cursor"]
    rest = await web.conversations_history(channel="C1", limit=999, cursor=cursor)
    assert [m["text"] for m in rest["messages"]] == ["m2", "m1", "m0"] and rest["has_more"] is False
    assert rest["response_metadata"]["next_cursor"] == ""
    assert await refusal(web.conversations_history(channel="C1", limit=1000)) == "invalid_arguments"
    assert await refusal(web.conversations_history(channel="C1", cursor="not a cursor")) == "invalid_cursor"


async def test_history_needs_its_scope_and_membership(api: FakeSlackApi) -> None:
    web = client(api)
    api.channels["COUT"] = Channel("outside", member=False)
    api.channels["GPRIV"] = Channel("private", private=True)
    assert await refusal(web.conversations_history(channel="COUT")) == "not_in_channel"
    await web.conversations_history(channel="GPRIV")
    api.scopes.discard("groups:history")
    assert await refusal(web.conversations_history(channel="GPRIV")) == "missing_scope"
    await web.conversations_history(channel="C1")  # a public channel needs channels:history only
    api.scopes.discard("channels:history")
    assert await refusal(web.conversations_history(channel="C1")) == "missing_scope"
