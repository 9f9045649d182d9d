"""One-line messages for the failures a user of the CLI fixes by hand (the database they named).

A misspelled database name, a server that is down and a refused password all end ``rankzero`` the same
way: one line naming the database (password masked), the cause, and what to check. The traceback is
logged at debug level only (``rankzero -v`` shows INFO; DEBUG is for developers).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

#: Modules whose exceptions mean "this database cannot be used" (asyncpg raises its own on connect:
#: InvalidCatalogNameError for a misspelled database, InvalidPasswordError, ...).
_DATABASE_MODULES = ("asyncpg", "sqlite3", "sqlalchemy", "aiosqlite")


def is_database_error(exc: BaseException) -> bool:
    """True when ``exc`` (or what it wraps) comes from the database driver or a refused connection."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        module = type(current).__module__.split(".")[0]
        if module in _DATABASE_MODULES or isinstance(current, (ConnectionError, TimeoutError)):
            return True
        current = current.__cause__ or current.__context__
    return isinstance(exc, OSError)


def database_message(url: str, exc: BaseException) -> str:
    """``cannot use the database at URL (Type: first line of the message); check ...``, on one line."""
    from bot.config import mask_url  # imports SQLAlchemy: only when there is an error to show

    cause = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {cause[0]}" if cause else type(exc).__name__
    return (
        f"cannot use the database at {mask_url(url)} ({detail[:300]}); check RANKZERO_DATABASE_URL "
        "(or --db): the server is up, the database exists, the user and password are right"
    )
