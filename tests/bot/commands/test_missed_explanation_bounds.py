"""An "Explanation" click names any id of up to 18 digits: one beyond the database's 32-bit ids is "not
found", like a missing one, not a database error (SQLite and PostgreSQL: the db fixture runs both).
"""

from __future__ import annotations

import pytest

from bot.commands.parsing import MAX_PROBLEM_NUMBER
from bot.core.errors import NotFoundError
from tests.bot.core.test_tenancy import A, Env, env, player  # noqa: F401  (fixture re-used)


@pytest.mark.parametrize("pid", [0, MAX_PROBLEM_NUMBER + 1, 10**17, 999999999999999999])
async def test_an_id_no_problem_can_have_is_not_found(env: Env, pid: int) -> None:  # noqa: F811
    """The same answer as a missing id (the button's listeners show a RankZeroError's words)."""
    with pytest.raises(NotFoundError, match="no problem with id"):
        await env.commands.missed_explanation(player("ann", A), pid)


async def test_a_missing_id_in_range_is_not_found_too(env: Env) -> None:  # noqa: F811
    """The largest id a problem can have reaches the database and gets the same answer."""
    with pytest.raises(NotFoundError, match="no problem with id"):
        await env.commands.missed_explanation(player("ann", A), MAX_PROBLEM_NUMBER)
