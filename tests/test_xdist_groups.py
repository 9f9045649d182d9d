"""`make test`'s parallel run (tests/xdist_groups.py): the workers name the sandbox tests they collected,
and the controller's scheduler makes one work unit of them, every other test a unit of its own."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests import xdist_groups

pytest.importorskip("xdist")  # the dev extra installs it


#: A parametrized id may hold spaces and escaped newlines (tests/runner/test_modes.py has some).
SPACED = "tests/runner/test_modes.py::test_e[ddp-9-nproc must be 1 to 8-import torch\\nx]"


class Item:
    """What the worker's hook reads of a collected test."""

    def __init__(self, nodeid: str, *marks: str) -> None:
        self.nodeid = nodeid
        self._marks = marks

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self._marks else None


def scheduler(controller: Any) -> Any:
    """The scheduler's grouping, without the workers pytest-xdist would start for a real one."""
    cls = xdist_groups._scheduler_class()
    sched: Any = object.__new__(cls)  # no __init__: it would start the workers
    sched.config = controller
    return sched


def test_every_sandbox_test_is_one_work_unit_and_every_other_test_its_own() -> None:
    controller = SimpleNamespace(stash=pytest.Stash())
    workers = [
        SimpleNamespace(workerinput={}, config=controller, gateway=SimpleNamespace(id=f"gw{i}"))
        for i in range(2)
    ]
    for node in workers:
        xdist_groups.pytest_configure_node(node)
    items = [
        Item("tests/runner/test_modes.py::test_a", "sandbox", "slow"),
        Item("tests/test_dispute_cli.py::test_b[x]", "sandbox", "process"),
        Item(SPACED, "sandbox"),
        Item("tests/test_serve_process.py::test_c", "process", "slow"),
        Item("tests/test_scoring.py::test_d"),
    ]
    for node in workers:  # each worker collects the same tests and writes its own list
        xdist_groups.record_sandbox_tests(SimpleNamespace(workerinput=node.workerinput), items)  # type: ignore[arg-type]
    folder = Path(workers[0].workerinput[xdist_groups.IDS_FILE]).parent
    assert sorted(p.name for p in folder.iterdir()) == ["gw0.json", "gw1.json"]

    sched = scheduler(controller)
    scopes = {item.nodeid: sched._split_scope(item.nodeid) for item in items}
    assert scopes == {
        "tests/runner/test_modes.py::test_a": xdist_groups.SANDBOX_GROUP,
        "tests/test_dispute_cli.py::test_b[x]": xdist_groups.SANDBOX_GROUP,
        SPACED: xdist_groups.SANDBOX_GROUP,
        "tests/test_serve_process.py::test_c": "tests/test_serve_process.py::test_c",
        "tests/test_scoring.py::test_d": "tests/test_scoring.py::test_d",
    }

    xdist_groups.pytest_unconfigure(controller)  # type: ignore[arg-type]
    assert not folder.exists()


def test_outside_a_worker_nothing_is_written(tmp_path: Path) -> None:
    # Stand-ins for pytest's config and items: only the attributes the hook reads.
    items: Any = [Item("tests/runner/test_x.py::t", "sandbox")]
    xdist_groups.record_sandbox_tests(cast(Any, SimpleNamespace()), items)
    assert xdist_groups.pytest_unconfigure(SimpleNamespace(stash=pytest.Stash())) is None  # type: ignore[arg-type, func-returns-value]


@pytest.mark.parametrize("dist", ["load", "loadscope", "no"])
def test_other_distribution_modes_keep_pytest_xdists_scheduler(dist: str) -> None:
    config = SimpleNamespace(getvalue=lambda name: dist)
    assert xdist_groups.pytest_xdist_make_scheduler(config, None) is None  # type: ignore[arg-type]
