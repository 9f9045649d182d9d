"""tests/conftest.py marks every test by what it needs, so that ``make test-fast`` can leave out the slow
tiers; these check the rule on module sources and on this very session's collected tests."""

from __future__ import annotations

import pytest

from tests.conftest import module_kinds


@pytest.mark.parametrize(
    ("source", "folder", "kinds"),
    [
        ("import asyncio\nfrom bot.core import service\n", (), set()),
        ("import subprocess\n", (), {"process"}),
        ("import pexpect\n", (), {"process"}),  # a CLI in a pseudo-terminal
        ("from tests.runner_server import runner_server\n", (), {"process", "sandbox"}),
        ("from tests.runner_server import RunnerServer\n", (), set()),
        ("from runner.service import RunnerService\n", (), {"sandbox"}),
        ("from runner.verdict import Status\n", ("runner",), {"sandbox"}),
        ("def f():\n    import subprocess\n", (), {"process"}),
    ],
)
def test_a_module_is_marked_by_its_folder_and_imports(
    source: str, folder: tuple[str, ...], kinds: set[str]
) -> None:
    assert module_kinds(source, folder) == kinds


def test_this_in_process_module_is_in_the_fast_tier(request: pytest.FixtureRequest) -> None:
    marks = {m.name for m in request.node.iter_markers()}
    assert not marks & {"slow", "sandbox", "process"}, marks


def test_the_strict_markers_option_is_on(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.getoption("strict_markers")
