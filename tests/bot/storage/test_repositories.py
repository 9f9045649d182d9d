"""The storage ports stay narrow: the unit of work only holds a transaction and hands out repositories,
each a small Protocol in bot/core/repositories/ implemented in bot/storage/repositories/ (issue 13)."""

from __future__ import annotations

import inspect
from typing import Protocol

import bot.core.repositories as ports
from bot.core.ports import UnitOfWork
from bot.storage.uow import SqlUnitOfWork

#: The widest a port may grow before it should be split (the review found one of 51 members).
MAX_MEMBERS = 15


def _members(protocol: type) -> set[str]:
    return {
        name for name in vars(protocol) if not name.startswith("_") or name in ("__aenter__", "__aexit__")
    }


def _protocols() -> dict[str, type]:
    return {
        name: obj
        for name, obj in vars(ports).items()
        if inspect.isclass(obj) and Protocol in obj.__mro__ and obj is not Protocol
    }


#: The unit of work's own members besides the repositories it hands out: the transaction.
TRANSACTION = {"commit", "rollback", "__aenter__", "__aexit__"}


def test_every_repository_port_and_the_unit_of_work_stay_narrow() -> None:
    found = _protocols()
    assert len(found) == 17
    wide = {name: len(_members(p)) for name, p in found.items()}
    # The unit of work grows by one repository per area (one small port each, as the ports' own bound
    # asks): the bound counts those; its transaction members are fixed.
    assert _members(UnitOfWork) >= TRANSACTION
    wide["UnitOfWork"] = len(_members(UnitOfWork) - TRANSACTION)
    assert all(n <= MAX_MEMBERS for n in wide.values()), wide


def test_the_unit_of_work_hands_out_one_repository_per_port_with_every_member() -> None:
    """Each ``uow.<name>`` of SqlUnitOfWork implements every method its port declares."""
    uow = SqlUnitOfWork(None)  # type: ignore[arg-type]  # no session needed to inspect the attributes
    by_attribute = {name: p for name, p in inspect.getmembers(UnitOfWork) if isinstance(p, property)}
    assert set(by_attribute) == {
        "players",
        "questions",
        "challenges",
        "schedules",
        "plays",
        "standings",
        "disputes",
        "corrections",
        "practice",
        "practice_settings",
        "outbox",
        "difficulty",
    }
    for name, prop in by_attribute.items():
        assert prop.fget is not None, name  # each port is a read-only property with a getter
        port = inspect.get_annotations(prop.fget, eval_str=True)["return"]
        repo = getattr(uow, name)
        # A port split in two (PracticeRepository on DeckRepository) declares the rest on its base.
        declared = set().union(*(_members(p) for p in port.__mro__ if Protocol in getattr(p, "__mro__", ())))
        missing = [m for m in declared if not callable(getattr(repo, m, None))]
        assert missing == [], f"uow.{name} ({type(repo).__name__}) lacks {missing}"
