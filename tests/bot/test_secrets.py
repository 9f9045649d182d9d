"""Issue 24, section 3: Slack tokens encrypted at rest with RANKZERO_SECRET_KEY, a clear error when the
key is missing, malformed or wrong, and ``rankzero secrets rotate`` moving every token to a new key.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from pydantic import SecretStr
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore

from bot.adapters.slack.app import build_adapter
from bot.adapters.slack.stores import EncryptedInstallationStore
from bot.bootstrap import build_services
from bot.cli import main
from bot.config import Settings
from bot.secret_box import PREFIX, SecretBox, SecretKeyError, new_key
from bot.storage.db import make_engine

OAUTH = {
    "slack_client_id": "1111.2222",
    "slack_client_secret": SecretStr("client-secret"),
    "slack_signing_secret": SecretStr("signing-secret"),
}


def install(team: str) -> Installation:
    return Installation(
        app_id="A1",
        team_id=team,
        user_id="UINSTALLER",
        bot_token=f"xoxb-{team}-0123456789",
        bot_refresh_token=f"xoxe-1-{team}-refresh",
        bot_id="B1",
        bot_user_id="UBOT",
        bot_scopes=["chat:write"],
    )


def test_a_key_is_required_and_checked_without_being_shown() -> None:
    with pytest.raises(SecretKeyError, match=r"needs RANKZERO_SECRET_KEY.*rankzero secrets new-key"):
        SecretBox.required(None, "Slack OAuth mode")
    bad = "not-a-fernet-key-but-a-password"
    with pytest.raises(SecretKeyError, match="key 2 of 2 is not a Fernet key") as caught:
        SecretBox(f"{new_key()},{bad}")
    assert bad not in str(caught.value)
    with pytest.raises(SecretKeyError, match="is empty"):
        SecretBox(" , ")


def test_sealed_values_open_with_any_listed_key_and_only_with_them() -> None:
    old, new = new_key(), new_key()
    sealed = SecretBox(old).seal("xoxb-secret")
    assert sealed is not None and sealed.startswith(PREFIX) and "xoxb-secret" not in sealed
    assert SecretBox(old).seal(sealed) == sealed  # never encrypted twice
    assert SecretBox(f"{new},{old}").open(sealed) == "xoxb-secret"
    with pytest.raises(SecretKeyError, match="does not decrypt a Slack bot_token"):
        SecretBox(new).open(sealed, "a Slack bot_token")
    assert SecretBox(new).open("xoxb-from-before") == "xoxb-from-before"  # plaintext rows still read


def test_oauth_mode_without_a_key_is_refused_before_anything_starts() -> None:
    with pytest.raises(SecretKeyError, match=r"Slack OAuth mode .* needs RANKZERO_SECRET_KEY"):
        build_adapter(Settings(**OAUTH))  # type: ignore[arg-type]
    with pytest.raises(SecretKeyError, match="key 1 of 1 is not a Fernet key"):
        build_adapter(Settings(**OAUTH, secret_key=SecretStr("hunter2")))  # type: ignore[arg-type]


async def test_a_wrong_key_is_refused_at_start(tmp_path: Path, sqlite_template: Path) -> None:
    db = tmp_path / "rz.db"
    shutil.copy(sqlite_template, db)
    url = f"sqlite+aiosqlite:///{db}"
    engine = make_engine(url)
    try:
        store = EncryptedInstallationStore(client_id="1111.2222", engine=engine, box=SecretBox(new_key()))
        await store.async_save(install("T1"))
    finally:
        await engine.dispose()
    settings = Settings(database_url=url, **OAUTH, secret_key=SecretStr(new_key()), health_port=0)  # type: ignore[arg-type]
    adapter = build_adapter(settings, base_url="http://127.0.0.1:9/api/")
    with pytest.raises(SecretKeyError, match="does not decrypt the Slack bot tokens in slack_installations"):
        await build_services(settings, [adapter], migrate=False)


def _stored(url: str) -> list[str]:
    async def read() -> list[str]:
        engine = make_engine(url)
        try:
            async with engine.connect() as conn:
                out: list[str] = []
                for sql in (
                    "SELECT bot_token, bot_refresh_token FROM slack_installations",
                    "SELECT bot_token, bot_refresh_token FROM slack_bots",
                ):
                    out += [v for row in await conn.execute(sa.text(sql)) for v in row if v is not None]
                return out
        finally:
            await engine.dispose()

    return asyncio.run(read())


def _find_token(url: str, key: str) -> str | None:
    async def find() -> str | None:
        engine = make_engine(url)
        try:
            store = EncryptedInstallationStore(client_id="1111.2222", engine=engine, box=SecretBox(key))
            bot = await store.async_find_bot(enterprise_id=None, team_id="T1")
            return None if bot is None else bot.bot_token
        finally:
            await engine.dispose()

    return asyncio.run(find())


def test_rotate_encrypts_plaintext_rows_then_moves_them_to_a_new_key(
    tmp_path: Path, sqlite_template: Path
) -> None:
    db = tmp_path / "rz.db"
    shutil.copy(sqlite_template, db)
    url = f"sqlite+aiosqlite:///{db}"

    async def legacy() -> None:  # what an install before issue 24 left: slack_sdk's plain store
        engine = make_engine(url)
        try:
            plain = AsyncSQLAlchemyInstallationStore(client_id="1111.2222", engine=engine)
            await plain.async_save(install("T1"))
        finally:
            await engine.dispose()

    asyncio.run(legacy())
    assert "xoxb-T1-0123456789" in _stored(url)

    def rotate(key: str) -> tuple[int, str]:
        result = CliRunner().invoke(
            main, ["--db", url, "secrets", "rotate"], env={"RANKZERO_SECRET_KEY": key}
        )
        return result.exit_code, result.output

    first, second, stranger = new_key(), new_key(), new_key()
    assert rotate(first) == (
        0,
        "4 Slack token(s) encrypted with the first key of RANKZERO_SECRET_KEY "
        "(4 of them stored in plaintext before)\n",
    )
    sealed = _stored(url)
    assert len(sealed) == 4 and all(v.startswith(PREFIX) for v in sealed)
    assert not any("T1-0123456789" in v or "T1-refresh" in v for v in sealed)
    assert _find_token(url, first) == "xoxb-T1-0123456789"

    # A key that opens nothing: refused with the reason, nothing written.
    code, out = rotate(stranger)
    assert code == 2 and "does not decrypt the Slack bot_token of slack_installations row 1" in out
    assert _stored(url) == sealed

    # The new key first, the old one after it: everything moves to the new key.
    assert rotate(f"{second},{first}")[0] == 0
    assert _find_token(url, second) == "xoxb-T1-0123456789"
    with pytest.raises(SecretKeyError):
        _find_token(url, first)
