"""`make deploy-env`: write the .env that compose.yaml reads, with fresh random secrets.

    python3 deploy/make_env.py [PATH]        (default: .env in the working directory)

Never overwrites: when PATH exists it is left exactly as it is, and the generated names it lacks are
listed (exit 1), so an operator's tokens and the database password that PostgreSQL's volume was
initialised with are never replaced. The file is created with mode 0600 (only its owner reads it).
Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import base64
import os
import secrets
import sys
from pathlib import Path

#: Generated here; compose.yaml refuses to start without them.
GENERATED = ("POSTGRES_PASSWORD", "RUNNER_TOKEN", "SECRET_KEY")

TEMPLATE = """\
# RankZero's stack (compose.yaml). Written by `make deploy-env`; keep it secret (mode 0600, git-ignored).
# The names have no RANKZERO_ prefix on purpose: compose.yaml maps them, and a `rankzero` run by hand in
# this folder does not read them as its own settings.

# --- Generated: keep them. POSTGRES_PASSWORD is the one the database volume was created with (changing it
# here does not change it there). RUNNER_TOKEN is shared by the bot and the runner. SECRET_KEY encrypts
# the Slack tokens stored in the database: losing it loses them (rotate it with `rankzero secrets rotate`).
POSTGRES_PASSWORD={postgres_password}
RUNNER_TOKEN={runner_token}
SECRET_KEY={secret_key}

# --- Paste yours: Discord, Slack or both (README.md, "Deploying").
# Discord: Developer Portal > your application > Bot > Reset Token.
DISCORD_TOKEN=
# Slack: OAuth & Permissions > Bot User OAuth Token (xoxb-...), and either the signing secret (Basic
# Information > App Credentials; HTTP mode, port 3000) or an app-level token (xapp-..., socket mode).
SLACK_BOT_TOKEN=
SLACK_SIGNING_SECRET=
SLACK_APP_TOKEN=

# --- Optional (JSON lists, e.g. ADMINS='["discord:123456789012345678"]'; empty means unset).
ADMINS=
ALLOWED_TENANTS=
DEFAULT_TIMEZONE=

# --- The read-only web page (README.md, "The read-only web page"): off while either is empty. WEB_SECRET:
# at least 32 random characters (e.g. `rankzero secrets new-key`); PUBLIC_URL: https://... of the proxy
# in front of 127.0.0.1:8790.
WEB_SECRET=
PUBLIC_URL=
"""


def fernet_key() -> str:
    """A Fernet key, as ``rankzero secrets new-key`` prints one: 32 random bytes, url-safe base64."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii")


def defined_names(text: str) -> set[str]:
    """The names a dotenv file gives a non-empty value (``NAME=value`` or ``export NAME=value``)."""
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.removeprefix("export ").partition("=")
        if value.strip().strip("'\""):
            names.add(name.strip())
    return names


def main(argv: list[str]) -> int:
    """Write PATH unless it exists; otherwise report what it lacks."""
    if len(argv) > 1:
        print("usage: make_env.py [PATH]", file=sys.stderr)
        return 2
    path = Path(argv[0] if argv else ".env")
    text = TEMPLATE.format(
        postgres_password=secrets.token_urlsafe(32),  # url-safe: it goes into the database URL as is
        runner_token=secrets.token_urlsafe(32),
        secret_key=fernet_key(),
    )
    try:
        # O_EXCL: created here or not at all, even if another process writes the same file meanwhile.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        missing = [name for name in GENERATED if name not in defined_names(path.read_text())]
        if missing:
            print(
                f"{path} exists and was left as it is, but it lacks {', '.join(missing)}: add them, or "
                f"move {path} away and run `make deploy-env` again",
                file=sys.stderr,
            )
            return 1
        print(f"{path} exists (left as it is); it has {', '.join(GENERATED)}")
        return 0
    with os.fdopen(fd, "w") as out:
        out.write(text)
    print(
        f"wrote {path} with a fresh {', '.join(GENERATED)} (mode 0600);"
        " now paste your Discord or Slack tokens"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
