"""Parallel runs (``make test``: pytest-xdist, ``-n N --dist loadgroup``) that never run two sandbox tests at
once.

Every test marked ``sandbox`` (tests/conftest.py) goes to one worker, which runs them one after another as
a serial run would: sandboxes share the host's cgroups and its cores, and some runner tests measure what a
neighbour does to a job. Everything else is spread over all the workers, one test at a time.

pytest-xdist's own ``loadgroup`` reads ``xdist_group`` marks on the worker and passes the group to the
controller by appending ``@group`` to the test's node id; since pytest 9.2 that edit no longer takes
(https://github.com/pytest-dev/pytest-xdist/issues/1386), and the groups are silently ignored. So the worker
writes the sandbox tests' node ids to a file the controller named (:func:`pytest_configure_node`), and the
controller's scheduler (:class:`SandboxGroupScheduling`, chosen for ``--dist loadgroup`` by
:func:`pytest_xdist_make_scheduler`) reads them once every worker has collected. tests/conftest.py imports
these hooks; without pytest-xdist installed they are never called.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

#: The one work unit that holds every sandbox test.
SANDBOX_GROUP = "@sandbox"
#: The worker input key naming the file a worker writes the sandbox tests' node ids to.
IDS_FILE = "rankzero_sandbox_ids"
_DIR = pytest.StashKey[Path]()


def _ids_dir(config: pytest.Config) -> Path:
    """The controller's folder for the workers' lists (one per session, removed at the end)."""
    if _DIR not in config.stash:
        config.stash[_DIR] = Path(tempfile.mkdtemp(prefix="rankzero-xdist-"))
    return config.stash[_DIR]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: tell each worker where to write the sandbox tests it collected."""
    node.workerinput[IDS_FILE] = str(_ids_dir(node.config) / f"{node.gateway.id}.json")


def record_sandbox_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Worker: write the node ids of the collected ``sandbox`` tests where the controller asked (called by
    tests/conftest.py once the tests are marked; nothing happens outside an xdist worker).
    """
    target = getattr(config, "workerinput", {}).get(IDS_FILE)
    if target is None:
        return
    ids = [item.nodeid for item in items if item.get_closest_marker("sandbox") is not None]
    # JSON, not a line per id: a parametrized test's id may hold spaces and escaped newlines.
    Path(target).write_text(json.dumps(ids), encoding="utf-8")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Controller: ``--dist loadgroup`` schedules with :class:`SandboxGroupScheduling` (tryfirst: before
    pytest-xdist's own choice).
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    return _scheduler_class()(config, log)


def _scheduler_class() -> type:
    from xdist.scheduler import LoadScopeScheduling  # only where pytest-xdist runs the session

    class SandboxGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """pytest-xdist's scope scheduler whose scopes are: every sandbox test together, and each other test
        on its own. The scopes go out largest first (pytest-xdist's default order), so the sandbox worker
        starts with them and the other workers take the single tests as they become free.
        """

        _sandbox: frozenset[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._sandbox is None:
                ids: set[str] = set()
                for listing in _ids_dir(self.config).glob("*.json"):
                    ids |= set(json.loads(listing.read_text(encoding="utf-8")))
                self._sandbox = frozenset(ids)
            return SANDBOX_GROUP if nodeid in self._sandbox else nodeid

    return SandboxGroupScheduling


def pytest_unconfigure(config: pytest.Config) -> None:
    """Controller: remove the workers' lists."""
    folder = config.stash.get(_DIR, None)
    if folder is not None:
        for listing in folder.glob("*.json"):
            listing.unlink()
        folder.rmdir()
