"""Settings from environment variables (prefix ``RANKZERO_``) and an optional ``.env`` file.

Built only in the entry points (cli.py) and passed down as arguments.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    """Where the embedded SQLite database lives: ``$XDG_DATA_HOME/rankzero`` (~/.local/share/rankzero)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "rankzero"


class Settings(BaseSettings):
    """Every setting of the bot. Secrets are SecretStr so they never show up in logs or reprs."""

    model_config = SettingsConfigDict(env_prefix="RANKZERO_", env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str = ""
    problems_per_challenge: int = Field(default=5, ge=1, le=10)
    default_timezone: str = "UTC"
    runner_url: str | None = None
    runner_token: SecretStr | None = None
    admins: list[str] = Field(default_factory=list)

    def model_post_init(self, __context: object) -> None:
        """Derive the SQLite URL from the data directory when no URL is given."""
        if not self.database_url:
            self.database_url = f"sqlite+aiosqlite:///{self.data_dir / 'rankzero.db'}"
